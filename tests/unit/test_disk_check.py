"""Free space of destination brokers: log dir capacities in the model, the snapshot and the
DescribeLogDirs reader, and the pure disk check of a reassignment plan (no cluster)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jsonschema
import pytest

from kops.cluster.snapshot import parse_topology, topology_schema
from kops.cluster.topology import _describe_log_dirs
from kops.errors import BadInput
from kops.model import Broker, LogDir, Partition, PlanEntry, ReassignmentPlan, Topic, Topology
from kops.ops.disk_fit import DEFAULT_DISK_RESERVE_PCT, check_disk, plan_disk
from kops.ops.validate import validate_plan
from tests.unit.engine_fakes import Store

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


# -- the disk check (pure: moves + Topology) -------------------------------------------------------

def _topo(log_dirs=None, sizes=(10 * GB, 20 * GB, 30 * GB), adding=None) -> Topology:
    """Brokers 0-5, topic t with 3 partitions on 0,1,2; every broker one 100 GB dir with
    ``log_dirs`` overriding; ``adding``: partition -> replicas being added (in flight)."""
    dirs = {b: (LogDir(f"/data/{b}", 100 * GB, 80 * GB),) for b in range(6)}
    dirs.update(log_dirs or {})
    brokers = tuple(Broker(b, "abc"[b // 2], log_dirs=dirs[b]) for b in range(6))
    adding = adding or {}
    parts = tuple(
        Partition("t", p, (0, 1, 2), isr=(0, 1, 2), leader=0, size_bytes=sizes[p],
                  adding_replicas=tuple(adding.get(p, ())))
        for p in range(3)
    )
    return Topology(brokers=brokers, topics=(Topic("t", parts),))


def _moves(topo, *entries):
    """entries: (partition, target replicas[, log dirs])"""
    plan = ReassignmentPlan(tuple(
        PlanEntry("t", e[0], tuple(e[1]), tuple(e[2]) if len(e) > 2 else None) for e in entries))
    return validate_plan(plan, topo)


def test_a_plan_that_fits_passes_with_figures_per_destination():
    topo = _topo()
    moves = _moves(topo, (0, [0, 1, 3]), (1, [0, 1, 3]), (2, [4, 1, 2]))
    _, check = plan_disk(moves, topo)
    assert check.warnings == () and check.overflows == []
    by = {f.broker: f for f in check.figures}
    assert sorted(by) == [3, 4]
    assert by[3].plan_bytes == 30 * GB and by[3].in_flight_bytes == 0 and by[3].log_dir == "/data/3"
    assert by[3].reserve_bytes == 5 * GB  # 5 % of 100 GB kept free: 75 GB of room, but
    assert by[3].threshold_pct == 80.0 and by[3].room_bytes == 60 * GB  # at most 80 GB used of 100
    assert by[3].peak_pct == 50.0  # 20 GB used + 30 GB arriving
    assert by[4].plan_bytes == 30 * GB


def test_a_plan_that_does_not_fit_is_refused_naming_every_overflowing_broker():
    topo = _topo({3: (LogDir("/data/3", 100 * GB, 40 * GB),), 4: (LogDir("/data/4", 100 * GB, 32 * GB),)})
    # 3 receives 10+20+30 = 60 GB > 40-5; 4 receives 30 GB > 32-5; 5 receives 10 GB: fits
    moves = _moves(topo, (0, [3, 1, 5]), (1, [0, 3, 2]), (2, [3, 4, 2]))
    with pytest.raises(BadInput) as ei:
        plan_disk(moves, topo)
    e = ei.value
    assert e.exit_code == 2 and "nothing was changed" in e.message and "brokers 3,4" in e.message
    lines = [d for d in e.details if d.startswith("broker ")]
    assert len(lines) == 2
    assert lines[0].startswith(f"broker 3 log dir /data/3: needs {60 * GB} bytes")
    assert f"usable {40 * GB} bytes" in lines[0] and f"of {100 * GB} total" in lines[0]
    assert "5 % reserve" in lines[0] and "short" in lines[0]
    assert lines[1].startswith(f"broker 4 log dir /data/4: needs {30 * GB} bytes")
    # the same plan with no reserve still overflows broker 3 only
    assert [f.broker for f in check_disk(moves, topo, reserve_pct=0, threshold_pct=None).overflows] == [3]
    # with the threshold (80 %), broker 4 (68 GB used, 30 GB more) overflows too
    assert [f.broker for f in check_disk(moves, topo, reserve_pct=0).overflows] == [3, 4]


def test_the_reserve_is_a_share_of_each_volume():
    assert DEFAULT_DISK_RESERVE_PCT == 5.0
    topo = _topo({3: (LogDir("/data/3", 100 * GB, 12 * GB),)})
    moves = _moves(topo, (0, [0, 1, 3]))  # 10 GB to broker 3, 12 GB usable
    assert not check_disk(moves, topo, threshold_pct=None).figures[0].fits  # 12 - 5 % of 100 = 7 GB of room
    assert check_disk(moves, topo, reserve_pct=2, threshold_pct=None).figures[0].fits  # 12 - 2 = 10 GB
    assert check_disk(moves, topo, reserve_pct=0, threshold_pct=None).figures[0].fits
    (f,) = check_disk(moves, topo, reserve_pct=100, threshold_pct=None).figures  # keep it all free: nothing fits
    assert f.reserve_bytes == 100 * GB and not f.fits
    # a move that adds nothing never overflows, however full the disk
    assert check_disk(_moves(topo, (0, [1, 0, 2])), topo, reserve_pct=100).figures == ()


def test_data_in_flight_counts_and_what_is_on_disk_already_is_subtracted():
    # (the reserve alone here: the threshold has its own test)
    # partition 2 (30 GB) is being copied to broker 3 by an earlier reassignment
    topo = _topo({3: (LogDir("/data/3", 100 * GB, 50 * GB),)}, adding={2: (3,)})
    moves = _moves(topo, (0, [0, 1, 3]))  # 10 GB more: 40 GB of 45 GB room
    check = check_disk(moves, topo, threshold_pct=None)
    (f,) = check.figures
    assert (f.plan_bytes, f.in_flight_bytes, f.needed_bytes) == (10 * GB, 30 * GB, 40 * GB)
    assert f.fits
    moves = _moves(topo, (0, [0, 1, 3]), (1, [0, 1, 3]))  # 10 + 20 + 30 in flight = 60 > 45
    assert not check_disk(moves, topo, threshold_pct=None).overflows[0].fits
    # data in flight to a broker the plan does not add to is not the plan's to check
    crowded = _topo({4: (LogDir("/data/4", 100 * GB, 1 * GB),)}, adding={2: (4,)})
    assert [f.broker for f in check_disk(_moves(crowded, (0, [0, 1, 3])), crowded, threshold_pct=None).figures] == [3]
    # 25 GB of the move in flight are on broker 3 already (and in its usable bytes): 5 GB to come
    on_disk = {("t", 2, 3): ("/data/3", 25 * GB)}
    (f,) = check_disk(moves, topo, on_disk=on_disk, threshold_pct=None).figures
    assert f.in_flight_bytes == 5 * GB and f.fits


def test_nothing_is_freed_by_replicas_leaving_a_destination():
    # a (10 GB) leaves broker 0 while b (10 GB) arrives there: both are on 0 until a's move ends
    parts_a = (Partition("a", 0, (0, 1, 2), isr=(0, 1, 2), leader=0, size_bytes=10 * GB),)
    parts_b = (Partition("b", 0, (3, 4, 5), isr=(3, 4, 5), leader=3, size_bytes=10 * GB),)
    dirs = {b: (LogDir(f"/data/{b}", 100 * GB, 80 * GB),) for b in range(6)}
    dirs[0] = (LogDir("/data/0", 100 * GB, 14 * GB),)  # 9 GB of room
    topo = Topology(brokers=tuple(Broker(b, log_dirs=dirs[b]) for b in range(6)),
                    topics=(Topic("a", parts_a), Topic("b", parts_b)))
    plan = ReassignmentPlan((PlanEntry("a", 0, (3, 1, 2)), PlanEntry("b", 0, (0, 4, 5))))
    over = check_disk(validate_plan(plan, topo), topo).overflows
    assert [(f.broker, f.needed_bytes) for f in over] == [(0, 10 * GB)]


def test_explicit_log_dir_against_any():
    two = (LogDir("/big", 100 * GB, 60 * GB), LogDir("/small/", 100 * GB, 15 * GB))
    topo = _topo({3: two})
    # "any": Kafka picks; counted against the dir with the most usable bytes
    (f,) = check_disk(_moves(topo, (1, [0, 1, 3])), topo).figures
    assert f.log_dir == "/big" and f.fits
    # the plan names the small dir (with or without a trailing slash): 20 GB > 15 - 5
    for path in ("/small", "/small/"):
        (f,) = check_disk(_moves(topo, (1, [0, 1, 3], ["any", "any", path])), topo).figures
        assert f.log_dir == "/small/" and not f.fits
    # a dir the broker lacks: not counted, said (the execution reports LogDirNotFound later)
    check = check_disk(_moves(topo, (1, [0, 1, 3], ["any", "any", "/nope"])), topo)
    assert check.figures == () and "broker 3 has no log dir /nope" in check.warnings[0]
    # an offline dir has no room; "any" avoids it
    topo = _topo({3: (LogDir("/big", None, None, offline=True), LogDir("/ok", 100 * GB, 50 * GB))})
    assert check_disk(_moves(topo, (1, [0, 1, 3])), topo).figures[0].log_dir == "/ok"
    (f,) = check_disk(_moves(topo, (1, [0, 1, 3], ["any", "any", "/big"])), topo).figures
    assert f.offline and not f.fits


def test_unknown_capacities_and_sizes_warn_and_never_refuse():
    topo = _topo({3: (), 4: (LogDir("/data/4", None, None),)})
    moves = _moves(topo, (0, [3, 4, 5]), (1, [3, 4, 5]))
    _, check = plan_disk(moves, topo)  # no exception
    assert [f.broker for f in check.figures] == [5]
    assert any("broker 3 unknown" in w for w in check.warnings)
    assert any("broker 4 does not report the free space" in w and "Kafka 3.3" in w for w in check.warnings)
    # sizes unknown (DescribeLogDirs could not be read)
    topo = _topo(sizes=(None, None, None))
    check = check_disk(_moves(topo, (0, [0, 1, 3])), topo)
    assert check.figures == () and check.warnings == ("broker 3: size of 1 partition it receives unknown (t-0): not counted",)
    # a snapshot without log dirs: every destination warned about, nothing refused
    bare = Topology(brokers=tuple(Broker(b) for b in range(6)), topics=_topo().topics)
    assert "brokers 3,4 unknown" in check_disk(_moves(bare, (0, [3, 4, 2])), bare).warnings[0]


# -- before each later wave (the execution's wave loop, with the cluster stood in) ----------------


def _wave_runner(monkeypatch, usable, opts=None):
    """An execution with t-0 (10 GB) in flight to broker 3, 4 GB of it copied, and t-1 (10 GB)
    waiting for the next wave, also to broker 3, whose volume (100 GB) has ``usable`` bytes."""
    from kops.cluster.topology import LogDirRead
    from kops.ops import journal as J
    from kops.ops import reassign as R
    from kops.ops.move import Move

    a = Move("t", 0, (1, 2), (1, 3), size_bytes=10 * GB)
    b = Move("t", 1, (1, 2), (1, 3), size_bytes=10 * GB)
    topo = Topology(brokers=tuple(Broker(i) for i in (1, 2, 3)), topics=(Topic("t", (
        Partition("t", 0, (1, 3, 2), isr=(1, 2), leader=1, adding_replicas=(3,), removing_replicas=(2,)),
        Partition("t", 1, (1, 2), isr=(1, 2), leader=1),
    )),))
    monkeypatch.setattr(R.admin, "read", lambda conn, topics=None, sizes=False: topo)
    monkeypatch.setattr("kops.cluster.topology.replica_sizes", lambda conn, brokers, topics: {})
    asked = []

    def usage(conn, brokers, topics=()):
        asked.append((list(brokers), sorted(topics)))
        return LogDirRead(
            entries=[(("t", 0, 1), "/d", 10 * GB, False), (("t", 0, 2), "/d", 10 * GB, False),
                     (("t", 0, 3), "/d", 4 * GB, False), (("t", 1, 1), "/d", 10 * GB, False),
                     (("t", 1, 2), "/d", 10 * GB, False)],
            dirs={1: (LogDir("/d", 100 * GB, 50 * GB),), 2: (LogDir("/d", 100 * GB, 50 * GB),),
                  3: (LogDir("/d", 100 * GB, usable[0]),)},
        )

    monkeypatch.setattr("kops.cluster.topology.log_dir_usage", usage)
    j = J.Journal(id="x", cluster_id="c", moves=[a, b])
    j.progress[a.name] = J.IN_FLIGHT
    j.submitted_at[a.name] = time.time()
    runner = R.Runner(object(), Store(), j, opts or R.ExecuteOptions())
    started = []
    monkeypatch.setattr(R.admin, "submit", lambda conn, targets: started.append([f"{t}-{p}" for t, p in targets])
                        or {tp: None for tp in targets})
    return runner, started, asked


def test_a_disk_filling_mid_move_stops_the_next_wave_and_says_so(monkeypatch):
    from kops.errors import EXIT_FAILURE
    from kops.ops import journal as J

    usable = [12 * GB]  # 6 GB still to come for t-0 + 10 GB for t-1 > 12 - 5 GB
    runner, started, asked = _wave_runner(monkeypatch, usable)
    outcome = runner.run()  # without --wait: one tick
    assert started == [] and runner.j.state == J.HALTED and runner.halt.by == "disk check"
    assert asked == [([1, 2, 3], ["t"])]
    assert outcome.exit_code == EXIT_FAILURE and not outcome.finished
    assert "halted by the disk check: broker 3 log dir /d: needs 16000000000 bytes" in outcome.message
    assert "kops reassign cancel" in outcome.message
    note = next(n for n in runner.notes if n.startswith("stopped before wave"))
    assert "broker(s) 3" in note and "Moves in flight continue" in note and "resume" in note
    assert runner.j.progress["t-0"] == J.IN_FLIGHT and runner.j.progress["t-1"] == J.PENDING

    # space was freed: a resume (state running again) checks again and starts the wave
    usable[0] = 45 * GB  # 16 GB more: 71 % full at the peak, under the 80 % threshold
    runner.j.state = J.RUNNING
    runner.tick()
    assert started == [["t-1"]] and runner.j.state == J.RUNNING


def test_the_wave_check_follows_the_execution_reserve_and_degrades_to_a_note(monkeypatch):
    from kops.ops import reassign as R

    runner, started, _ = _wave_runner(monkeypatch, [12 * GB], R.ExecuteOptions(disk_reserve_pct=0))
    runner.tick()  # 16 GB > 12 GB: still too much
    assert started == [] and runner.halt.by == "disk check"

    runner, started, _ = _wave_runner(monkeypatch, [12 * GB])
    monkeypatch.setattr("kops.cluster.topology.log_dir_usage", lambda conn, brokers, topics=(): None)
    runner.tick()  # DescribeLogDirs failed: said, not a stop
    assert started == [["t-1"]]
    assert any("disk check skipped before a wave" in n for n in runner.notes)


def test_the_threshold_holds_the_peak_of_the_move_below_a_share_of_the_volume():
    """--disk-threshold (default 80 %, as the planners): used bytes plus everything arriving
    (the plan's and what is still in flight; nothing freed before a move ends) stay under the
    threshold; the tighter of reserve and threshold wins; refused with the figures."""
    from kops.ops.disk_fit import DEFAULT_DISK_THRESHOLD_PCT

    assert DEFAULT_DISK_THRESHOLD_PCT == 80.0
    topo = _topo({3: (LogDir("/data/3", 100 * GB, 45 * GB),)}, adding={2: (3,)})  # 55 GB used
    (f,) = check_disk(_moves(topo, (0, [0, 1, 3])), topo).figures  # 10 GB + 30 GB in flight: 95 %
    assert f.peak_pct == 95.0 and f.threshold_room_bytes == 25 * GB and not f.fits
    assert check_disk(_moves(topo, (0, [0, 1, 3])), topo, threshold_pct=None).figures[0].fits  # 40 <= 45 - 5
    assert check_disk(_moves(topo, (0, [0, 1, 3])), topo, threshold_pct=95).figures[0].fits
    with pytest.raises(BadInput) as ei:
        plan_disk(_moves(topo, (0, [0, 1, 3])), topo)
    e = ei.value
    assert e.exit_code == 2 and "destination broker 3" in e.message and "nothing was changed" in e.message
    assert "at most 80 % full at the peak of the move, --disk-threshold" in e.message
    assert "95.0 % full at the peak (threshold 80 %)" in e.details[0] and "short" in e.details[0]
    # the reserve still binds where it is the tighter one: 4 GB usable of 100 (96 % full): 99 % is
    # allowed, 5 % must stay free
    topo = _topo({3: (LogDir("/data/3", 100 * GB, 4 * GB),)}, sizes=(GB, GB, GB))
    (f,) = check_disk(_moves(topo, (0, [0, 1, 3])), topo, reserve_pct=5, threshold_pct=99).figures
    assert f.threshold_room_bytes == 3 * GB and f.room_bytes == -1 * GB and not f.fits


def test_brokers_sharing_one_volume_are_held_to_the_reserve_only():
    """Several brokers of one host on one volume (a local sandbox): its use is not any one
    broker's, so no threshold is drawn from it; the reserve still holds (a full disk is full)."""
    dirs = {b: (LogDir("/data", 100 * GB, 15 * GB),) for b in range(6)}  # 85 % used, by all of them
    topo = Topology(brokers=tuple(Broker(b, "abc"[b // 2], host="10.0.0.1", log_dirs=dirs[b]) for b in range(6)),
                    topics=_topo().topics)
    _, check = plan_disk(_moves(topo, (0, [0, 1, 3])), topo)  # 10 GB of 15 - 5: fits
    (f,) = check.figures
    assert f.threshold_pct is None and f.fits and check.shared == (3,)
    assert "not applied to broker 3: a volume other brokers of the host share" in check.rule()
    with pytest.raises(BadInput, match="keeping 5 % of each volume free"):
        plan_disk(_moves(topo, (1, [0, 1, 3])), topo)  # 20 GB: the reserve refuses it


def test_execute_options_keep_the_threshold_in_the_journal():
    from kops.ops import reassign as R

    assert R.ExecuteOptions().threshold_pct == 80.0
    recorded = R.ExecuteOptions(disk_threshold_pct=90).to_dict()
    assert recorded["disk_threshold_pct"] == 90
    assert R.ExecuteOptions().with_journal(recorded).threshold_pct == 90  # resume: the execution's
    assert R.ExecuteOptions(disk_threshold_pct=70).with_journal(recorded).threshold_pct == 70
    # an execution journaled before the threshold existed resumes without one
    assert R.ExecuteOptions().with_journal({"disk_reserve_pct": 5.0}).threshold_pct == 100.0


def test_execute_options_keep_the_reserve_in_the_journal():
    from kops.ops import reassign as R

    assert R.ExecuteOptions().reserve_pct == DEFAULT_DISK_RESERVE_PCT
    recorded = R.ExecuteOptions(disk_reserve_pct=1.5).to_dict()
    assert recorded["disk_reserve_pct"] == 1.5
    assert R.ExecuteOptions().with_journal(recorded).reserve_pct == 1.5  # resume: the execution's
    assert R.ExecuteOptions(disk_reserve_pct=0).with_journal(recorded).reserve_pct == 0  # unless given


def test_offline_on_a_snapshot_with_log_dirs():
    """A snapshot (``cluster describe --output json``) carries the capacities: the check works
    on it as on a live read."""
    doc = _topo({3: (LogDir("/data/3", 100 * GB, 20 * GB),)}).to_dict()
    topo = parse_topology(json.loads(json.dumps(doc)))
    plan = ReassignmentPlan((PlanEntry("t", 2, (0, 1, 3)),))  # 30 GB onto broker 3
    with pytest.raises(BadInput) as ei:
        plan_disk(validate_plan(plan, topo), topo)
    assert ei.value.details[0].startswith(f"broker 3 log dir /data/3: needs {30 * GB} bytes")
