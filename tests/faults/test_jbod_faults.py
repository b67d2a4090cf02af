"""Self-healing of a failed disk (issue 40, item 5d): a JBOD broker loses one of its two log dirs
for real while the workload runs (`kops sandbox fail-log-dir`: Kafka's next write there fails,
the dir goes offline, the broker stays up on its other dir), and `kops heal step` runs in a loop
as cron would. Asserted: the fault happened (the broker reports the dir offline, the partitions
whose replica was there lose it from their ISR, the broker stays registered), heal watched it in
its grace before acting, then re-created exactly those replicas on the broker's rack mate in
bounded steps -- nothing else moved -- until nothing was left on the dir (the anomaly then
reported, nothing more moved); every partition fully replicated and rack-safe, no acknowledged
message lost, nothing of kops' left.

A sandbox of its own: 4 brokers in racks a, b, c, a with two log dirs each (local JVMs: a disk
fault needs no container network), beside the session's."""

from __future__ import annotations

import json
import time

import pytest

from tests.cluster.sandboxes import own_sandbox
from tests.faults.helpers import (
    admin,
    assert_clean,
    assignment,
    create_topic,
    cron_runs,
    kops,
    wait_for,
    wait_recovered,
    workload_topics,
)
from tests.faults.workload import Workload

pytestmark = pytest.mark.faults

RACKS = {0: "a", 1: "b", 2: "c", 3: "a"}
FAILING, MATE = 0, 3


@pytest.fixture(scope="module")
def jbod4(tmp_path_factory, request):
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-jbod-faults", "jbod fault sandbox", brokers=4,
                           racks="a,b,c,a", log_dirs=2)


def _heal(bs: str, home, *args: str) -> tuple[int, dict, str]:
    r = kops("heal", "step", "--max-moves", "2", "--throttle", "10M", *args, "--bootstrap-server", bs,
             "--output", "json", timeout=300, env={"KOPS_HOME": str(home)})
    try:
        return r.returncode, json.loads(r.stdout), r.stderr
    except ValueError:
        return r.returncode, {}, r.stderr


def _dir_anomaly(doc: dict) -> dict | None:
    return next((a for a in doc.get("anomalies", []) if a["key"] == f"log_dir_failure/{FAILING}"), None)


def _nothing_left(doc: dict) -> bool:
    """The run that reports the dir with nothing left to re-create (every run names the dir)."""
    a = _dir_anomaly(doc)
    assert a is not None, doc
    return a["state"] == "refused" and a["why"].startswith("nothing to re-create")


def _isr(bs: str) -> dict[tuple[str, int], list[int]]:
    md = admin(bs).list_topics(timeout=10)
    return {(t, p): list(pm.isrs) for t, tm in md.topics.items() for p, pm in tm.partitions.items()}


def _offline(bs: str) -> set[tuple[str, int]]:
    """The partitions whose replica on the failing broker is offline, as kops reads them."""
    r = kops("cluster", "describe", "--bootstrap-server", bs, "--output", "json", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return {(t["name"], p["partition"]) for t in json.loads(r.stdout)["topics"] for p in t["partitions"]
            if FAILING in p.get("offline_replicas", ())}


def test_a_failed_log_dir_is_healed_under_load(jbod4, tmp_path, record):
    sb = jbod4
    bs, wd = sb.bootstrap_servers, str(sb.workdir)
    work = workload_topics(bs)
    data = "jbod-data"
    create_topic(bs, data, partitions=8, rf=3, min_isr=2, mb_per_partition=0.5)
    code, doc, err = _heal(bs, tmp_path, "--broker-grace", "5s")  # every broker registered: racks known
    assert code == 0 and not _dir_anomaly(doc), (doc, err[-2000:])
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            t_fault = time.monotonic()
            r = kops("sandbox", "fail-log-dir", "--workdir", wd, "--broker", str(FAILING), "--output", "json",
                     timeout=120)
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
            failed_dir = json.loads(r.stdout)["offline_log_dirs"]
            assert len(failed_dir) == 1, r.stdout  # the fault: the broker reports the dir offline
            # ... the replicas it held are offline (Metadata) and leave their ISR; the broker stays registered
            lost = wait_for(lambda: _offline(bs), 60, 0.5, f"Metadata to name broker {FAILING}'s offline replicas")
            wait_for(lambda: all(FAILING not in _isr(bs)[tp] for tp in lost), 60, 0.3,
                     f"the offline replicas of broker {FAILING} out of their ISR")
            assert FAILING in sb.registered_brokers()
            before = assignment(bs)  # (a failed dir changes no replica list; __consumer_offsets exists by now)
            t0 = time.monotonic()
            runs = cron_runs(lambda: _heal(bs, tmp_path, "--broker-grace", "8s"), _nothing_left, limit=30)
            kops_s = round(time.monotonic() - t0, 1)
            recover_s = wait_recovered(bs, t_fault)
            w.wait_acknowledged(100)
            res = w.finish()
        watched = [d for d in runs if (a := _dir_anomaly(d)) and a["state"] == "in_grace"]
        steps = [d for d in runs if d["status"] == "moved"]
        moved = sum(d.get("replicas_moved") or 0 for d in runs)
        after = assignment(bs)
        record(scenario="heal d. a JBOD broker's log dir fails under load, `heal step` from cron (grace 8 s, 2 copies "
                        "per step)", workload=res, kops_exit=0, recover_s=recover_s, kops_s=kops_s,
               mode=sb.mode, kafka_version=sb.kafka_version,
               detail=f"broker {FAILING} (rack a) reported {failed_dir[0].rsplit('/', 1)[-1]} offline and stayed "
                      f"registered; {len(lost)} replicas left their ISR; {len(watched)} runs watched it in grace; "
                      f"{len(steps)} steps re-created {moved} replicas on broker {MATE} (its rack mate), nothing "
                      "else moved; the next run reported the dir, nothing left to re-create")
        assert lost, "no replica was on the failed dir"
        assert watched, "heal acted before the grace or never saw the failed dir"
        assert len(steps) >= 2 and moved == len(lost), (len(steps), moved, len(lost))  # bounded: 2 per step
        for tp, reps in before.items():
            if tp in lost:  # in its place, on the rack mate
                assert after[tp] == [MATE if b == FAILING else b for b in reps], (tp, reps, after[tp])
            else:
                assert after[tp] == reps, (tp, reps, after[tp])
        assert all(len({RACKS[b] for b in reps}) == 3 for reps in after.values())
        assert assert_clean(bs, record) == 0
        assert res.lost == 0, res.lost_examples
    finally:
        r = kops("sandbox", "fail-log-dir", "--workdir", wd, "--broker", str(FAILING), "--restore", timeout=180)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
