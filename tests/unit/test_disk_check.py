"""Free space of destination brokers: log dir capacities in the model, the snapshot and the
DescribeLogDirs reader, and the pure disk check of a reassignment plan (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from kops.cluster.snapshot import parse_topology, topology_schema
from kops.cluster.topology import _describe_log_dirs
from kops.model import Broker, LogDir, Topology

DATA = Path(__file__).parent / "data"
GB = 1_000_000_000


# -- model and snapshot --------------------------------------------------------------------------


def test_log_dirs_roundtrip_through_a_snapshot():
    topo = Topology(
        brokers=(
            Broker(0, "a", log_dirs=(LogDir("/d0", 100 * GB, 40 * GB),)),
            Broker(1, "b", log_dirs=[LogDir("/d1", None, None), LogDir("/d2", 10, 5, offline=True)]),
            Broker(2, "c"),
        ),
        topics=(),
    )
    doc = topo.to_dict()
    jsonschema.validate(doc, topology_schema())
    assert doc["brokers"][0]["log_dirs"] == [{"path": "/d0", "total_bytes": 100 * GB, "usable_bytes": 40 * GB}]
    assert "log_dirs" not in doc["brokers"][2]  # not read: not written
    again = parse_topology(json.loads(json.dumps(doc)))
    assert again.to_dict() == doc
    assert again.broker(1).log_dirs[1].offline and not again.broker(1).log_dirs[0].capacity_known


def test_old_snapshots_without_log_dirs_still_load():
    raw = json.loads((DATA / "topo6.json").read_text())
    assert all("log_dirs" not in b for b in raw["brokers"])
    topo = parse_topology(raw)
    assert all(b.log_dirs == () for b in topo.brokers)


# -- the DescribeLogDirs reader ------------------------------------------------------------------


class _Admin:
    def __init__(self, answer):
        self.answer = answer
        self.asked = []

    def describe_log_dirs(self, topic_partitions=None, brokers=None):
        self.asked.append((topic_partitions, brokers))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class _Conn:
    def __init__(self, answer):
        self.admin = _Admin(answer)

    def kp_admin(self):
        return self.admin


def test_reader_takes_total_and_usable_bytes_and_treats_minus_one_as_not_reported():
    answer = [
        {"broker": 1, "log_dirs": [
            {"error_code": 0, "log_dir": "/b", "total_bytes": 100, "usable_bytes": 60, "topics": [
                {"name": "t", "partitions": [
                    {"partition_index": 0, "partition_size": 7, "is_future_key": False},
                    {"partition_index": 1, "partition_size": 3, "is_future_key": True}]}]},
            {"error_code": 0, "log_dir": "/a", "total_bytes": 50, "usable_bytes": 50, "topics": []},
        ]},
        # an older broker (DescribeLogDirs < v4: no sizes) and one reporting -1
        {"broker": 2, "log_dirs": [{"error_code": 0, "log_dir": "/x", "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "partition_size": 9, "is_future_key": False}]}]}]},
        {"broker": 3, "log_dirs": [
            {"error_code": 0, "log_dir": "/y", "total_bytes": -1, "usable_bytes": -1, "topics": []},
            {"error_code": 57, "log_dir": "/z", "total_bytes": -1, "usable_bytes": -1, "topics": []}]},
    ]
    conn = _Conn(answer)
    read = _describe_log_dirs(conn, [1, 2, 3], ["t"])
    assert read.dirs[1] == (LogDir("/a", 50, 50), LogDir("/b", 100, 60))
    assert read.dirs[2] == (LogDir("/x", None, None),)
    assert read.dirs[3] == (LogDir("/y", None, None), LogDir("/z", None, None, offline=True))
    assert read.replica_sizes() == {("t", 0, 1): 7, ("t", 0, 2): 9}  # future replicas left out
    assert read.partition_sizes() == {("t", 0): 9}
    assert read.on_disk() == {("t", 0, 1): ("/b", 7), ("t", 0, 2): ("/x", 9)}
    assert conn.admin.asked == [(["t"], [1, 2, 3])]


def test_reader_asks_for_log_dirs_only_without_topics_and_gives_up_quietly():
    conn = _Conn([])
    assert _describe_log_dirs(conn, [1], []).dirs == {}
    assert conn.admin.asked == [({}, [1])]  # {}: no partitions (a list asks for all of them)
    assert _describe_log_dirs(_Conn(RuntimeError("down")), [1], ["t"]) is None
