"""f. Disks that cannot take the data (issue 16): broker 5 of the fault sandbox has a data disk of
its own (256 MiB, `--data-disk 5:256MB`), filled on purpose with `fill_disk` (a file next to
Kafka's data, as if other data had grown there). Kafka reports the real total and usable bytes
(DescribeLogDirs, KIP-827); kops must refuse a plan that would not fit before any write, and stop
submitting when the disk fills mid-move, with `cancel` rolling back cleanly."""

from __future__ import annotations

import json
import time

import pytest
from tests.faults.helpers import (
    FaultWatch,
    assert_clean,
    create_topic,
    kops,
    kops_bg,
    ongoing,
    replicas,
    unique,
    wait_in_flight,
    wait_recovered,
    workload_topics,
    write_plan,
)
from tests.faults.test_reassign_faults import _cleanup
from tests.faults.workload import Workload

pytestmark = pytest.mark.faults

SMALL = 5  # the broker with a small disk (rack c, with broker 4)
MB = 2**20


def _onto_small(before: dict[int, list[int]]) -> dict[int, list[int]]:
    """Replace broker 4 (rack c) by broker 5 in every partition: the new replicas land on 5."""
    return {p: [SMALL if b == 4 else b for b in r] for p, r in before.items()}


def _topic_on_4(bs: str, partitions: int, mb: int) -> tuple[str, dict[int, list[int]]]:
    """A topic whose partitions all have a replica on broker 4 and none on 5."""
    name = unique("disk")
    racks = {"a": [0, 1], "b": [2, 3]}
    assignment = {p: [racks["a"][p % 2], racks["b"][(p // 2) % 2], 4] for p in range(partitions)}
    return name, create_topic(bs, name, assignment=assignment, min_isr=2, mb_per_partition=mb)


def test_plan_that_would_not_fit_the_destination_disk_is_refused_before_any_write(
        dsandbox, dbootstrap, tmp_path, kops_home, record):
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    topic, before = _topic_on_4(bs, 3, 6)
    plan = write_plan(tmp_path / "plan.json", topic, _onto_small(before))
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            sb.faults.fill_disk(SMALL, leave_bytes=20 * MB)  # 18 MiB to copy, 20 MiB free, 5 % (12 MiB) kept
            t0 = time.monotonic()
            r = kops("reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", "1000000",
                     "--wait", "--yes", "--bootstrap-server", bs, "--output", "json", timeout=120)
            took = time.monotonic() - t0
            w.wait_acknowledged(100)
            res = w.finish()
        record(scenario="f. a plan that would not fit the destination disk", workload=res,
               kops_exit=r.returncode, kops_s=round(took, 1),
               detail=f"broker {SMALL}: 20 MiB free of {sb.faults.disk_usage(SMALL)[0] // MB} MiB, "
                      "18 MiB to copy; refused")
        assert r.returncode == 2, r.stdout + r.stderr
        err = json.loads(r.stdout)["error"]
        assert f"destination broker {SMALL}" in err["message"] and "nothing was changed" in err["message"], err
        assert replicas(bs, topic) == before and ongoing(bs) == {}
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        sb.faults.release_disk(SMALL)
        _cleanup(bs, [topic, *work])


def test_plan_that_would_pass_the_disk_threshold_is_refused_though_it_fits(dsandbox, dbootstrap, tmp_path, kops_home,
                                                                           record):
    """The disk threshold (default 80 %): 56 MiB free on the 256 MiB disk (229 MiB for files) and
    ~17 MiB to copy fit under the 5 % reserve, but leave the volume ~83 % full at the peak: refused before any write
    (exit 2, the figures named); `--disk-threshold 90` lets the same plan run to the end."""
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    topic, before = _topic_on_4(bs, 3, 6)
    target = _onto_small(before)
    plan = write_plan(tmp_path / "plan.json", topic, target)
    common = ["--reassignment-json-file", str(plan), "--throttle", "10000000", "--wait", "--timeout", "240", "--yes",
              "--poll-interval", "1", "--bootstrap-server", bs, "--output", "json"]
    watch = FaultWatch(sb, bs)
    try:
        with watch:
            watch.settle()  # the baseline a failure of the workload's start is measured against
            with Workload(bs, work) as w:
                w.wait_acknowledged(200)
                watch.settle()  # a settled cluster: the health check passes, the disk figures are the scenario's
                sb.faults.fill_disk(SMALL, leave_bytes=56 * MB)
                total, free = sb.faults.disk_usage(SMALL)
                t0 = time.monotonic()
                r = kops("reassign", "execute", *common, timeout=120)
                refused_s = time.monotonic() - t0
                unchanged = replicas(bs, topic) == before and ongoing(bs) == {}
                again = kops("reassign", "execute", *common, "--disk-threshold", "90", timeout=300)
                w.wait_acknowledged(100)
                res = w.finish()
            unplanned = watch.faults()
            record(scenario="f. a plan that fits the disk but would pass the 80 % threshold",
                   workload=res, kops_exit=f"execute {r.returncode}; with --disk-threshold 90: {again.returncode}",
                   kops_s=round(refused_s, 1),
                   detail=f"broker {SMALL}: {free / MB:.0f} MiB free of {total / MB:.0f} MiB, 18 MiB to copy"
                   + (f"; faults nobody injected: {'; '.join(unplanned)}" if unplanned else ""))
            assert r.returncode == 2, r.stdout + r.stderr
            err = json.loads(r.stdout)["error"]
            assert f"destination broker {SMALL}" in err["message"] and "--disk-threshold" in err["message"], err
            assert "full at the peak (threshold 80 %)" in " ".join(err["details"]), err
            assert unchanged, "the refused plan changed something"
            assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
            assert replicas(bs, topic) == target
            assert_clean(bs, record)
            assert res.lost == 0, res.lost_examples
    finally:
        sb.faults.release_disk(SMALL)
        _cleanup(bs, [topic, *work])


def test_a_shuffle_through_a_nearly_full_broker_runs_in_disk_stages_and_never_passes_the_threshold(
        dsandbox, dbootstrap, tmp_path, kops_home, record):
    """Broker 5's disk filled to ~2 MB under the 80 % threshold; the plan swaps two ~4 MB partitions
    between brokers 4 and 5 (rack c). At once the disk would pass 80 % (nothing is freed before
    a move ends); kops runs it in two disk stages — first the move off broker 5, then, once the
    broker has deleted that replica's files, the move onto it — and the disk, sampled throughout,
    never passes the threshold."""
    import threading

    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    topic = unique("stage")
    create_topic(bs, topic, assignment={0: [0, 2, SMALL], 1: [1, 3, 4]}, min_isr=2, mb_per_partition=4)
    target = {0: [0, 2, 4], 1: [1, 3, SMALL]}
    plan = write_plan(tmp_path / "plan.json", topic, target)
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            total, free = sb.faults.disk_usage(SMALL)
            samples.append(100.0 * (total - free) / total)
            stop.wait(0.1)

    try:
        with Workload(bs, work, rate_per_s=25) as w:
            w.wait_acknowledged(50)
            total = sb.faults.disk_usage(SMALL)[0]
            sb.faults.fill_disk(SMALL, leave_bytes=int(0.2 * total) + 2 * 10**6)  # 2 MB under 80 %
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            t0 = time.monotonic()
            r = kops("reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", "10000000", "--wait",
                     "--timeout", "300", "--yes", "--poll-interval", "1", "--bootstrap-server", bs, "--output", "json",
                     timeout=420)
            took = time.monotonic() - t0
            stop.set()
            sampler.join(5)
            w.wait_acknowledged(25)
            res = w.finish()
        peak = max(samples) if samples else None
        record(scenario="f. a shuffle through a nearly full broker: disk stages", workload=res,
               kops_exit=r.returncode, kops_s=round(took, 1),
               detail=f"broker {SMALL}'s disk peaked at {peak:.1f} % (threshold 80 %, {len(samples)} samples)")
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
        assert "runs in 2 disk stages" in r.stderr, r.stderr[-3000:]
        assert replicas(bs, topic) == target
        assert samples and peak <= 80.0, f"peak {peak:.2f} % of broker {SMALL}'s disk"
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        stop.set()
        sb.faults.release_disk(SMALL)
        _cleanup(bs, [topic, *work])


def test_disk_filling_mid_move_stops_new_waves_and_cancel_rolls_back(dsandbox, dbootstrap, tmp_path, kops_home,
                                                                        record):
    """One move at a time onto broker 5 (waves of one ~7.6 MiB partition); once a move is copying,
    its disk fills to 16 MiB free: the move in flight still fits, no later wave does (5 % of the
    256 MiB disk, 12.8 MiB, is kept free: 3.2 MiB of room), whichever wave is in flight by then
    (a first move can copy its first megabytes before the brokers apply the topic's throttled
    replica lists). kops stops submitting (exit 1, state halted, says why), the waves after it
    are never submitted, `cancel` rolls back what is still in flight and removes every throttle."""
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    topic, before = _topic_on_4(bs, 4, 8)
    target = _onto_small(before)
    plan = write_plan(tmp_path / "plan.json", topic, target)
    run = None
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            t_start = time.monotonic()
            run = kops_bg("reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", "1000000",
                          "--max-moves-per-broker", "1", "--wait", "--timeout", "240", "--yes", "--poll-interval", "1",
                          "--bootstrap-server", bs, "--output", "json", out=tmp_path / "execute.json")
            wait_in_flight(bs, topic)
            t_fault = time.monotonic()
            sb.faults.fill_disk(SMALL, leave_bytes=16 * MB)
            # what a failure message needs: when the disk filled, what was moving, what was free
            at_fill = (f"disk filled {t_fault - t_start:.1f} s after execute started, "
                       f"{sb.faults.disk_usage(SMALL)[1] / MB:.1f} MiB free on the host's view, "
                       f"in flight then: {sorted(ongoing(bs))}")
            rc, out, err = run.finish(300)
            doc = json.loads(out)
            c = kops("reassign", "cancel", "--bootstrap-server", bs, "--output", "json", timeout=120)
            sb.faults.release_disk(SMALL)
            recover_s = wait_recovered(bs, t_fault)
            w.wait_acknowledged(100)
            res = w.finish()
        after = replicas(bs, topic)
        moved = sorted(p for p in after if after[p] == target[p])
        record(scenario="f. destination disk filling mid-move; `cancel`", workload=res,
               kops_exit=f"execute {rc}, cancel {c.returncode}", recover_s=recover_s, kops_s=round(run.elapsed, 1),
               detail=f"broker {SMALL} left with 16 MiB free mid-execution; partitions moved before the stop: {moved}")
        assert rc == 1, f"{err[-3000:]}\nnotes: {doc.get('notes')}; waves: {doc.get('waves')}; {at_fill}"
        assert doc["state"] == "halted", doc
        assert "would not fit on the disk" in err, err[-3000:]
        assert c.returncode == 0, c.stdout + c.stderr
        assert len(moved) < len(target), "the waves after the disk filled were submitted"
        assert all(after[p] in (before[p], target[p]) for p in after), after  # each partition whole
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        sb.faults.release_disk(SMALL)
        if run is not None:
            run.stop()
        _cleanup(bs, [topic, *work])
