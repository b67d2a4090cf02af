"""h. Two kops processes on two different hosts (containers on the cluster's network, each with its
own KOPS_HOME, so no local lock file can help) execute at the same moment: the cluster lock lets
exactly one run; the other is refused with exit 3, naming the holder (its host and pid), and
changes nothing. i. kops SIGKILLed at each failpoint of execute (tests/cluster/test_faults.py),
on this cluster too, under the workload."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from tests.cluster.kafka_helpers import lock_topic_exists
from tests.cluster.test_faults import _killed_at
from tests.faults.helpers import (
    FaultWatch,
    assert_clean,
    data_topic,
    kops,
    replicas,
    throttles_set,
    wait_for,
    wait_recovered,
    workload_topics,
)
from tests.faults.test_reassign_faults import _cleanup
from tests.faults.workload import Workload

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[2]


def _kops_container(sb, name: str, args: list[str], shared: Path):
    """kops (this checkout, its virtualenv's packages) in a container of the sandbox's image on the
    cluster's network, talking to the brokers' INTERNAL listeners."""
    from testcontainers.core.container import DockerContainer

    from kops.sandbox.containers import LABEL

    site = next(p for p in sys.path if p.endswith("site-packages") and str(Path(sys.prefix)) in p)
    c = (
        DockerContainer(sb.containers.image())
        .with_name(f"{sb.containers.prefix}-{name}")
        .with_network(sb.containers.network())
        .with_volume_mapping(str(ROOT), str(ROOT), "ro")
        .with_volume_mapping(site, site, "ro")
        .with_volume_mapping(str(shared), str(shared), "rw")
        .with_env("PYTHONPATH", f"{ROOT}:{site}")
        .with_env("KOPS_HOME", str(shared / f"home-{name}"))
        .with_command(["python3", "-m", "kops", *args])
        .with_kwargs(hostname=name, labels={LABEL: sb.containers.prefix})
    )
    return c


def test_two_kops_in_two_containers_one_is_refused_by_the_lock(dsandbox, dbootstrap, tmp_path, kops_home, record):
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    t1, before1, target1, plan1 = data_topic(bs, sb, tmp_path, plan_name="plan-1.json")
    t2, before2, target2, plan2 = data_topic(bs, sb, tmp_path, plan_name="plan-2.json")
    common = ["--throttle", "1000000", "--wait", "--timeout", "240", "--yes", "--poll-interval", "1",
              "--bootstrap-server", sb.containers.internal_bootstrap, "--output", "json"]
    runs = {
        "kops-ops-1": _kops_container(sb, "kops-ops-1", ["reassign", "execute", "--reassignment-json-file",
                                                         str(plan1), *common], tmp_path),
        "kops-ops-2": _kops_container(sb, "kops-ops-2", ["reassign", "execute", "--reassignment-json-file",
                                                         str(plan2), *common], tmp_path),
    }
    results: dict[str, tuple[int, dict, str]] = {}
    watch = FaultWatch(sb, bs)
    try:
        with watch:
            watch.settle()  # the baseline a failure of the workload's start is measured against
            with Workload(bs, work) as w:
                w.wait_acknowledged(200)
                watch.settle()  # both contenders start on a settled cluster: every broker in every ISR
                t0 = time.monotonic()
                for c in runs.values():
                    c.start()
                for name, c in runs.items():
                    rc = c.get_wrapped_container().wait(timeout=300)["StatusCode"]
                    out, err = (x.decode(errors="replace") for x in c.get_logs())
                    results[name] = (rc, json.loads(out) if out.strip().startswith("{") else {}, err)
                took = time.monotonic() - t0
                winner = next((n for n, r in results.items() if r[0] == 0), None)
                loser = next((n for n, r in results.items() if n != winner), None)
                # the refused run changed nothing: its topic where it was, no throttle of its own
                loser_topic, loser_before = (t2, before2) if loser == "kops-ops-2" else (t1, before1)
                untouched = replicas(bs, loser_topic) == loser_before
                its_throttles = {k: v for k, v in throttles_set(bs).items() if k == f"topic {loser_topic}"}
                # the refused plan runs once the lock is free (from this host)
                plan_again = plan2 if loser == "kops-ops-2" else plan1
                again = kops("reassign", "execute", "--reassignment-json-file", str(plan_again), "--throttle",
                             "1000000", "--wait", "--timeout", "240", "--yes", "--poll-interval", "1",
                             "--bootstrap-server", bs, "--output", "json", timeout=300)
                recover_s = wait_recovered(bs, t0)
                w.wait_acknowledged(100)
                res = w.finish()
            unplanned = watch.faults()
            codes = ", ".join(f"{n} {r[0]}" for n, r in sorted(results.items()))
            record(scenario="h. two kops in two containers execute at once", workload=res,
                   kops_exit=f"{codes}; refused plan again {again.returncode}", recover_s=recover_s,
                   kops_s=round(took, 1),
                   detail=f"{winner} ran, {loser} refused by the cluster lock"
                   + (f"; faults nobody injected: {'; '.join(unplanned)}" if unplanned else ""))
            assert sorted(r[0] for r in results.values()) == [0, 3], results
            loser_err = results[loser][2] + json.dumps(results[loser][1])
            assert "another kops execution" in loser_err and winner in loser_err, loser_err[-2000:]
            assert untouched, f"the refused run moved {loser_topic}: {replicas(bs, loser_topic)} (was {loser_before})"
            assert its_throttles == {}, its_throttles
            assert results[winner][1]["state"] == "complete"
            assert again.returncode == 0, again.stderr[-2000:]
            assert replicas(bs, t1) == target1 and replicas(bs, t2) == target2
            assert_clean(bs, record)
            assert res.lost == 0, res.lost_examples
    finally:
        for c in runs.values():
            try:
                c.stop()
            except Exception:  # noqa: BLE001 - never started
                pass
        _cleanup(bs, [t1, t2, *work])


@pytest.mark.parametrize("failpoint", ["throttles.applied", "wave.submitted", "execute.lock-taken",
                                       "lock.topic-created"])
def test_kops_killed_at_each_failpoint_then_recovers(dsandbox, dbootstrap, tmp_path, kops_home, record, failpoint):
    """kops SIGKILLs itself at ``failpoint`` (KOPS_FAILPOINT): `resume` finishes what was started
    and removes every throttle; a lock left before anything started does not block the next
    execution."""
    from tests.cluster.test_faults import _execute

    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    topic = f"failpoint-{os.urandom(4).hex()}"
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            t0 = time.monotonic()
            _before, target, plan = _killed_at(failpoint, sb, bs, topic, tmp_path, 2)
            if failpoint in ("throttles.applied", "wave.submitted"):
                r = kops("reassign", "resume", "--poll-interval", "1", "--bootstrap-server", bs, "--output", "json",
                         timeout=240)
                how = "resume"
            else:
                wait_for(lambda: lock_topic_exists(bs), 10, 0.2, "the killed kops' lock topic")
                r = _execute(bs, plan)
                how = "next execute"
            recover_s = wait_recovered(bs, t0)
            w.wait_acknowledged(100)
            res = w.finish()
        record(scenario=f"i. kops SIGKILLed at `{failpoint}`, then `{how}`", workload=res,
               kops_exit=f"killed -9, {how} {r.returncode}", recover_s=recover_s, kops_s=None,
               detail=f"{how} completed the plan")
        assert r.returncode == 0, r.stderr[-3000:]
        assert json.loads(r.stdout)["state"] == "complete"
        assert replicas(bs, topic) == target
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        _cleanup(bs, [topic, *work])
        from tests.cluster.kafka_helpers import delete_topic

        if lock_topic_exists(bs):  # a failed run leaves no lock behind for the next tests
            delete_topic(bs, "__kops_lock")

