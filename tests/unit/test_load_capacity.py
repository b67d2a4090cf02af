"""Load and capacity in the model (issue 21 items 1-2, no cluster): Cruise Control capacity files,
capacities applied to brokers (measured disk where the file is silent), the bytes-in estimator,
and snapshots that carry both (old snapshots still load)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kops.cluster.sampling import Reading, estimate
from kops.cluster.snapshot import parse_topology
from kops.errors import BadInput
from kops.inputs.capacity import KIB, MIB, parse_capacities
from kops.model import Broker, Capacity, LogDir, Partition, Topic, Topology

CC_FILE = {"brokerCapacities": [
    {"brokerId": "-1", "capacity": {"DISK": "500000", "CPU": "100", "NW_IN": "50000", "NW_OUT": "50000"},
     "doc": "default"},
    {"brokerId": "3", "capacity": {"DISK": {"/data1": "250000", "/data2": 250000.5}, "CPU": {"num.cores": "16"},
                                   "NW_IN": 100000, "NW_OUT": "100000"}},
    {"brokerId": 4, "capacity": {"NW_IN": "1000"}},
]}


def test_cruise_control_capacity_file_with_default_jbod_and_cores():
    caps = parse_capacities(CC_FILE, source="--capacity-file c.json")
    assert caps[-1] == Capacity(500000 * MIB, 50000 * KIB, 50000 * KIB, 100.0,
                                source={k: "capacity file" for k in ("DISK", "NW_IN", "NW_OUT", "CPU")})
    assert caps[3].disk_bytes == int(500000.5 * MIB) and caps[3].cpu == 16.0
    assert caps[4].disk_bytes is None and caps[4].nw_in_bytes_per_s == 1000 * KIB


def test_every_problem_of_a_capacity_file_at_once():
    bad = {"brokerCapacities": [
        {"brokerId": "x", "capacity": {}},
        {"brokerId": 1, "capacity": {"DISK": "nan", "GPU": "1"}},
        {"brokerId": 1, "capacity": {"CPU": {"cores": 2}}},
        {"brokerId": "-1", "capacity": {"NW_IN": -5, "NW_OUT": "1e400"}},
        {"brokerId": 2},
        "three",
    ]}
    with pytest.raises(BadInput) as e:
        parse_capacities(bad, source="--capacity-file c.json")
    text = "\n".join(e.value.details)
    for where in ("brokerCapacities[0].brokerId", "brokerCapacities[1].capacity.DISK",
                  "brokerCapacities[1].capacity.GPU", "brokerCapacities[2].capacity.CPU",
                  "brokerCapacities[3].capacity.NW_IN", "brokerCapacities[3].capacity.NW_OUT",
                  "brokerCapacities[4].capacity", "brokerCapacities[5]"):
        assert where in text, (where, text)
    assert e.value.message.startswith("--capacity-file c.json: 8 problems")
    for doc in ({}, {"brokerCapacities": {}}, {"brokerCapacities": []}, [1]):
        with pytest.raises(BadInput):
            parse_capacities(doc, source="f")


def test_capacities_applied_default_entry_and_measured_disk_where_the_file_is_silent():
    dirs = (LogDir("/d1", total_bytes=100 * MIB, usable_bytes=60 * MIB), LogDir("/d2", 50 * MIB, 50 * MIB))
    topo = Topology(brokers=(Broker(1, "a", log_dirs=dirs), Broker(3, "b"), Broker(4, "b", log_dirs=dirs),
                             Broker(5, "c", log_dirs=(LogDir("/d", None, None),))), topics=())
    caps = parse_capacities(CC_FILE, source="f")
    got = {b.id: b.capacity for b in topo.with_capacities(caps).brokers}
    assert got[1] == caps[-1]  # the file speaks for DISK: it wins over the measured 150 MiB
    assert got[3] == caps[3]
    assert got[4].disk_bytes == 150 * MIB and got[4].source["DISK"] == "measured"
    assert got[4].nw_in_bytes_per_s == 1000 * KIB and got[4].source["NW_IN"] == "capacity file"
    assert got[5] == caps[-1]
    # no file entry at all: the measured disk only
    only = topo.with_capacities({})
    assert only.broker(1).capacity == Capacity(disk_bytes=150 * MIB, source={"DISK": "measured"})
    assert only.broker(3).capacity is None and only.broker(5).capacity is None


def test_estimate_by_size_growth_by_offsets_when_data_was_deleted_and_unmeasured():
    a, b, c, d, e, f = ("t", 0), ("t", 1), ("t", 2), ("t", 3), ("t", 4), ("u", 0)
    first = {a: Reading(0, 100, 10_000), b: Reading(0, 1000, 100_000), c: Reading(5, 5, 0),
             d: Reading(0, 10, 1000), e: Reading(0, 50, 5000)}
    second = {a: Reading(0, 300, 30_000),            # grew 20,000 B in 10 s
              b: Reading(500, 1500, 80_000),         # retention deleted 500 msgs: 500 msgs x 80 B
              c: Reading(5, 5, 0),                   # empty, nothing written
              d: Reading(0, 10, None),               # size not answered, nothing written
              e: Reading(0, None, 5000),             # end offset not answered
              f: Reading(0, 10, 100)}                # not read at the start
    rates, sample = estimate(first, second, 10.0, started_at="2026-11-23T00:00:00+00:00")
    assert rates[a] == pytest.approx(2000.0)
    assert rates[b] == pytest.approx(500 * (80_000 / 1000) / 10)
    assert rates[c] == 0.0 and rates[d] == 0.0
    assert e not in rates and f not in rates
    assert (sample.partitions, sample.by_size, sample.by_offsets, sample.unmeasured) == (4, 3, 1, 2)
    notes = " ".join(sample.notes)
    assert "t-1" in notes and "retention or compaction" in notes and "under 30 s" in notes
    assert "2 partition(s) without a rate" in notes
    with pytest.raises(ValueError):
        estimate(first, second, 0)


def test_a_snapshot_with_load_and_capacity_round_trips_and_validates_and_old_ones_still_load():
    topo = Topology(brokers=(Broker(1, "a", capacity=Capacity(disk_bytes=10, nw_in_bytes_per_s=5.5,
                                                              source={"DISK": "measured"})),),
                    topics=(Topic("t", (Partition("t", 0, (1,), (1,), 1, size_bytes=7),)),))
    rates, sample = estimate({("t", 0): Reading(0, 0, 0)}, {("t", 0): Reading(0, 10, 1000)}, 100.0)
    topo = topo.with_rates(rates, sample)
    doc = json.loads(topo.to_json())
    assert parse_topology(doc).to_dict() == doc
    assert doc["topics"][0]["partitions"][0]["bytes_in_per_s"] == 10.0
    assert doc["load_sample"]["seconds"] == 100.0 and doc["brokers"][0]["capacity"]["disk_bytes"] == 10
    bad = json.loads(json.dumps(doc))
    bad["topics"][0]["partitions"][0]["bytes_in_per_s"] = -1
    bad["load_sample"]["seconds"] = 0
    with pytest.raises(BadInput) as e:
        parse_topology(bad)
    assert "bytes_in_per_s" in " ".join(e.value.details) and "load_sample.seconds" in " ".join(e.value.details)
    old = {"version": 1, "brokers": [{"id": 1}], "topics": [{"name": "t", "partitions": [{"partition": 0, "replicas": [1]}]}]}
    loaded = parse_topology(old)
    assert loaded.load_sample is None and loaded.broker(1).capacity is None
    assert next(loaded.partitions()).bytes_in_per_s is None


@pytest.mark.parametrize("content, expect", [
    (b"\xff\xfe not utf-8", "UTF-8"),
    (b'{"brokerCapacities": [{"brokerId": "-1", "capacity": {"DISK": "-1"}}]}', "DISK"),
    (b"{", "not valid JSON"),
])
def test_cli_refuses_a_bad_capacity_file_before_connecting(tmp_path, content, expect):
    f = tmp_path / "cap.json"
    f.write_bytes(content)
    r = subprocess.run([sys.executable, "-m", "kops", "cluster", "describe", "--capacity-file", str(f),
                        "--bootstrap-server", "127.0.0.1:1", "--output", "json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    err = json.loads(r.stdout)["error"]
    assert expect in json.dumps(err) and "Traceback" not in r.stderr


def test_cli_sampling_needs_a_live_cluster(tmp_path):
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"version": 1, "brokers": [{"id": 1}], "topics": []}))
    r = subprocess.run([sys.executable, "-m", "kops", "cluster", "describe", "--topology", str(snap),
                        "--sample-seconds", "5", "--output", "json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--sample-seconds" in r.stdout, r.stdout + r.stderr


SNAP = {"version": 1, "brokers": [{"id": 0, "rack": "a"}, {"id": 1, "rack": "b"}, {"id": 2, "rack": "c"}],
        "topics": [{"name": "t", "partitions": [{"partition": p, "replicas": [p % 3, (p + 1) % 3], "size_bytes": 100 << 20}
                                                for p in range(6)]}]}


def _plan(tmp_path, *args):
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(SNAP))
    r = subprocess.run([sys.executable, "-m", "kops", "plan", *args, "--topology", str(snap), "--output", "json"],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, json.loads(r.stdout), r.stderr


def test_what_if_a_small_broker_is_added(tmp_path):
    """Issue 21 item 4: capacity planning without a cluster. A new broker with a 250 MiB disk takes
    two 100 MiB replicas (80 %), not the three a balance by bytes would give it."""
    rc, doc, err = _plan(tmp_path, "add-brokers", "--brokers", "3", "--add-broker", "3:a:250M")
    assert rc == 0, err
    d = doc["report"]["goals"]["disk-capacity"]
    assert len(doc["plan"]["partitions"]) == 2 and d["after"] == 80.0 and d["status"] == "met", d
    rc, doc, err = _plan(tmp_path, "add-brokers", "--brokers", "3", "--add-broker", "3:a:250M", "--disk-threshold", "100")
    assert len(doc["plan"]["partitions"]) == 2  # 300 MiB would not fit 250 MiB either
    rc, doc, err = _plan(tmp_path, "add-brokers", "--brokers", "3", "--add-broker", "3:a")
    assert len(doc["plan"]["partitions"]) == 3 and doc["report"]["goals"]["disk-capacity"]["status"] == "unknown"


def test_what_if_capacities_from_a_file(tmp_path):
    cap = tmp_path / "cap.json"
    cap.write_text(json.dumps({"brokerCapacities": [{"brokerId": -1, "capacity": {"DISK": "1000"}},
                                                    {"brokerId": 3, "capacity": {"DISK": "150"}}]}))
    # by replica count the small broker takes what fits below the threshold
    rc, doc, err = _plan(tmp_path, "add-brokers", "--brokers", "3", "--add-broker", "3:a", "--capacity-file", str(cap),
                         "--goals", "replicas,leaders")
    assert rc == 0, err
    assert len(doc["plan"]["partitions"]) == 1  # 100 MiB of 150: 67 %; a second would be 133 %
    # by disk use it is given its capacity's share: less than one partition of 100 MiB
    rc, doc, err = _plan(tmp_path, "add-brokers", "--brokers", "3", "--add-broker", "3:a", "--capacity-file", str(cap),
                         "--goals", "disk-usage,leaders")
    assert rc == 0, err
    assert doc["plan"]["partitions"] == [] and doc["report"]["goals_optimised"]["capacity_shares"], doc["report"]


@pytest.mark.parametrize("args, expect", [
    (["--add-broker", "0:a"], "broker 0 is in the cluster already"),
    (["--add-broker", "x"], "expected ID:RACK"),
    (["--add-broker", "5:a:-1"], "is not a byte count"),
    (["--add-broker", "5:a", "--add-broker", "5:b"], "given twice"),
    (["--disk-threshold", "0"], "--disk-threshold"),
    (["--disk-threshold", "nan"], "--disk-threshold"),
])
def test_what_if_bad_input(tmp_path, args, expect):
    rc, doc, err = _plan(tmp_path, "rebalance", *args)
    assert rc == 2 and expect in json.dumps(doc), (doc, err)


def test_add_broker_needs_a_snapshot():
    r = subprocess.run([sys.executable, "-m", "kops", "plan", "rebalance", "--add-broker", "3:a",
                        "--bootstrap-server", "127.0.0.1:1", "--output", "json"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "needs --topology" in r.stdout


def test_a_slow_first_reading_does_not_shorten_the_sampling_window(monkeypatch):
    """The window runs between the readings' midpoints: a first reading that takes 3 s (cold
    connections) must not turn --sample-seconds 8 into a 6.5 s window (seen on a loaded run)."""
    from kops.cluster import sampling

    clock = [100.0]
    took = iter([3.0, 0.1])  # the first reading slow, the second fast

    def read_point(conn, topo, names):
        clock[0] += next(took)
        return {}

    monkeypatch.setattr(sampling, "read_point", read_point)
    monkeypatch.setattr(sampling.time, "monotonic", lambda: clock[0])
    seen = {}

    def estimate(first, second, window, started_at=None):
        seen["window"] = window
        raise StopIteration  # the window is all this test needs

    monkeypatch.setattr(sampling, "estimate", estimate)

    def sleep(s):
        clock[0] += s

    with pytest.raises(StopIteration):
        sampling.sample_rates(None, None, 8.0, sleep=sleep)
    assert 8.0 <= seen["window"] <= 8.1
