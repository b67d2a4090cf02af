"""The KRaft metadata quorum in view, on a real quorum of 3 controllers (Kafka 4.x, KRaft):
`cluster describe` shows its voters and observers as their leader sees them, and `cluster
health` flags a quorum that cannot lose one more voter while a controller is down -- and stops
flagging it once the controller is back and caught up."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.cluster.kafka_helpers import wait_for
from tests.cluster.sandboxes import own_sandbox

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def quorum3(tmp_path_factory, request):
    """KRaft: 3 controllers (1000-1002), 1 broker."""
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-quorum", "quorum sandbox", brokers=1,
                           racks="a", mode="kraft", controllers=3)


def _kops(sb, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kops", *args, "--bootstrap-server", sb.bootstrap_servers],
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "COLUMNS": "160"})


def _health(sb) -> tuple[int, dict]:
    r = _kops(sb, "cluster", "health", "--output", "json")
    assert r.returncode in (0, 3), r.stderr
    return r.returncode, json.loads(r.stdout)


def _quorum_checks(doc: dict) -> list[str]:
    return [f["check"] for f in doc["findings"] if f["check"].startswith("quorum")]


def test_describe_shows_the_quorum_and_health_flags_a_lost_voter(quorum3):
    sb = quorum3
    r = _kops(sb, "cluster", "describe", "--output", "json")
    assert r.returncode == 0, r.stderr
    q = json.loads(r.stdout)["quorum"]
    assert [v["id"] for v in q["voters"]] == [1000, 1001, 1002]
    assert [o["id"] for o in q["observers"]] == [0]
    assert q["leader"] in (1000, 1001, 1002) and json.loads(r.stdout)["controller"] == q["leader"]
    assert q["high_watermark"] > 0 and all(v["lag"] is not None for v in q["voters"])
    table = _kops(sb, "cluster", "describe")
    assert table.returncode == 0 and f"KRaft metadata quorum: leader {q['leader']}" in table.stdout, table.stdout
    code, doc = _health(sb)
    assert code == 0 and _quorum_checks(doc) == [], doc

    lost = next(v["id"] for v in q["voters"] if v["id"] != q["leader"])
    sb.nodes.signal_and_wait([lost], signal.SIGKILL, time.monotonic() + 30, 30)
    assert not sb.nodes.running(lost)
    t0 = time.monotonic()
    # the killed voter stops fetching: once it is more than QUORUM_BEHIND_S behind, the quorum
    # (2 of 3, a majority of 2) cannot lose one more
    found = wait_for(lambda: (lambda h: h if _quorum_checks(h[1]) else None)(_health(sb)), 90, 1.0,
                     f"cluster health to flag the quorum without controller {lost}")
    code, doc = found
    assert code == 3 and _quorum_checks(doc) == ["quorum_at_risk"], doc
    finding = next(f for f in doc["findings"] if f["check"] == "quorum_at_risk")
    assert finding["severity"] == "problem" and finding["message"].startswith(f"voter {lost} (last caught up"), finding
    assert "2 of 3 voters are in sync and a majority needs 2" in finding["message"]
    assert time.monotonic() - t0 >= 5, "flagged before the voter could have fallen behind"
    r = _kops(sb, "cluster", "describe", "--output", "json")
    behind = {v["id"]: v for v in json.loads(r.stdout)["quorum"]["voters"]}[lost]
    assert behind["lag"] > 0 and behind["behind_s"] > 10, behind

    sb.nodes.launch(lost)  # back: it catches up, and the flag goes
    wait_for(lambda: _health(sb)[0] == 0, 90, 1.0, f"controller {lost} to catch up and the quorum to be healthy")

    # the active controller killed: another is elected, and the one killed never fetches from it
    leader = json.loads(_kops(sb, "cluster", "describe", "--output", "json").stdout)["quorum"]["leader"]
    sb.nodes.signal_and_wait([leader], signal.SIGKILL, time.monotonic() + 30, 30)
    code, doc = wait_for(lambda: (lambda h: h if _quorum_checks(h[1]) else None)(_health(sb)), 90, 1.0,
                         f"cluster health to flag the quorum without its leader {leader}")
    finding = next(f for f in doc["findings"] if f["check"] == "quorum_at_risk")
    assert code == 3 and finding["message"].startswith(f"voter {leader} (has not fetched from leader"), finding
