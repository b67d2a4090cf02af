"""The human renderings of `cluster describe` and `cluster health` (no cluster): every kind of
topology they can be given renders, with what it carries (a renderer's slip is exit 1 for the user)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from kops.cli.render import render_health, render_topology
from kops.cluster.sampling import Reading, estimate
from kops.health import check_health
from kops.model import Broker, Capacity, Partition, Topic, Topology


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=200, emoji=False), buf


def _topologies() -> dict[str, Topology]:
    plain = Topology(brokers=(Broker(0, "a", host="h0", port=9092), Broker(1, "b", alive=False)),
                     topics=(Topic("t", (Partition("t", 0, (0, 1), (0,), 0, size_bytes=5 << 20),
                                         Partition("t", 1, (1, 0), (), -1))),),
                     notes=("broker 1: ZooKeeper says it is registered",))
    rates, sample = estimate({("t", 0): Reading(0, 0, 0)}, {("t", 0): Reading(0, 100, 100_000)}, 10.0)
    loaded = plain.with_rates(rates, sample).with_capacities(
        {-1: Capacity(disk_bytes=1 << 30, nw_in_bytes_per_s=1e6, nw_out_bytes_per_s=2e6)})
    return {"plain": plain, "loaded": loaded}


@pytest.mark.parametrize("kind", ["plain", "loaded"])
def test_describe_and_health_render_every_topology(kind):
    topo = _topologies()[kind]
    con, buf = _console()
    render_topology(con, topo)
    out = buf.getvalue()
    assert "Brokers" in out and "offline" in out and "ZooKeeper says" in out
    if kind == "loaded":
        assert "bytes in/s" in out and "9.8 KiB/s" in out and "1.0 GiB" in out and "load sample:" in out
    else:
        assert "bytes in/s" not in out
    con, buf = _console()
    render_health(con, check_health(topo), topo, "problem")
    out = buf.getvalue()
    assert "UNHEALTHY" in out and "broker" in out
