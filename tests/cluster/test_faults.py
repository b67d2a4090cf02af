"""kops killed at the exact moments that matter for recovery (``KOPS_FAILPOINT``: the process
SIGKILLs itself there, like ``kill -9``), on the real cluster.

After each crash a later kops must finish or recover the work with no throttle left behind and
no stale lock blocking the next execution:

- ``throttles.applied``: throttle configs written, the journal not yet told. Resume must still
  remove every one of them (the journal records them *before* they are applied).
- ``wave.submitted``: the wave is in the cluster, the journal still says pending.
- ``execute.lock-taken``: the cluster lock names an execution that never wrote a journal.
- ``lock.topic-created``: the lock topic exists but no holder was recorded.
"""

from __future__ import annotations

import json

import pytest
from tests.cluster.kafka_helpers import assert_lock_released, lock_topic_exists, wait_for
from tests.cluster.test_reassign import (
    broker_throttles,
    create_topic,
    delete_topic,
    kops,
    replicas,
    same_rack_swap,
    topic_throttles,
    write_plan,
)

pytestmark = pytest.mark.cluster


@pytest.fixture
def kops_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path / "kops-home"))
    return tmp_path / "kops-home"


def _execute(bootstrap, plan, *extra, failpoint=None, timeout=180):
    return kops("execute", "--reassignment-json-file", str(plan), "--throttle", "1000000", "--wait", "--yes",
                "--poll-interval", "1", "--bootstrap-server", bootstrap, "--output", "json", *extra,
                env_extra={"KOPS_FAILPOINT": failpoint} if failpoint else None, timeout=timeout)


def _killed_at(failpoint, sandbox, bootstrap, topic, tmp_path, mb):
    """A topic with real data, a plan swapping one replica per partition within its rack, and
    an ``execute`` of it that kills itself at ``failpoint``: (before, target, plan file)."""
    before = create_topic(bootstrap, topic, partitions=3, mb_per_partition=mb)
    target = same_rack_swap(sandbox, before)
    plan = write_plan(tmp_path / "plan.json", topic, target)
    r = _execute(bootstrap, plan, failpoint=failpoint)
    assert r.returncode == -9, (r.returncode, r.stderr)
    return before, target, plan


def _assert_clean(sandbox, bootstrap, topic):
    assert topic_throttles(bootstrap, topic) == {}
    # dynamic broker configs reach every broker asynchronously
    wait_for(lambda: broker_throttles(bootstrap, sandbox.broker_ids, fresh=True) == {}, 20, 0.5,
             "no broker throttle left")
    assert_lock_released(bootstrap)


@pytest.mark.parametrize("failpoint", ["throttles.applied", "wave.submitted"])
def test_killed_mid_execute_resume_removes_every_throttle(sandbox, bootstrap, unique_topic, tmp_path,
                                                           kops_home, failpoint):
    topic = unique_topic("fault-" + failpoint.split(".")[0])
    try:
        _, target, _ = _killed_at(failpoint, sandbox, bootstrap, topic, tmp_path, 2)
        assert topic_throttles(bootstrap, topic), "the killed kops had applied its throttles"
        r = kops("list", "--bootstrap-server", bootstrap, "--output", "json")
        execs = json.loads(r.stdout)["kops_executions"]
        assert [e["state"] for e in execs] == ["running"], execs
        r = kops("resume", "--poll-interval", "1", "--bootstrap-server", bootstrap, "--output", "json", timeout=180)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["state"] == "complete" and doc["progress"] == {"done": 3}, doc
        assert replicas(bootstrap, topic) == target
        _assert_clean(sandbox, bootstrap, topic)
    finally:
        kops("cancel", "--bootstrap-server", bootstrap)
        delete_topic(bootstrap, topic)


@pytest.mark.parametrize("failpoint", ["execute.lock-taken", "lock.topic-created"])
def test_lock_left_by_a_killed_kops_does_not_block_the_next_execution(sandbox, bootstrap, unique_topic, tmp_path,
                                                                      kops_home, failpoint):
    topic = unique_topic("fault-lock")
    try:
        before, target, plan = _killed_at(failpoint, sandbox, bootstrap, topic, tmp_path, 1)
        # killed right after CreateTopics returned: the metadata of the new topic reaches the
        # broker that answers the check a moment later
        wait_for(lambda: lock_topic_exists(bootstrap), 10, 0.2, "the killed kops' lock topic __kops_lock")
        assert replicas(bootstrap, topic) == before and topic_throttles(bootstrap, topic) == {}
        # the next execution recognises the stale lock (nothing was started under it) and runs
        r = _execute(bootstrap, plan)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["state"] == "complete"
        assert replicas(bootstrap, topic) == target
        _assert_clean(sandbox, bootstrap, topic)
    finally:
        kops("cancel", "--bootstrap-server", bootstrap)
        delete_topic(bootstrap, topic)
        if lock_topic_exists(bootstrap):  # failed before the next execution cleared it
            delete_topic(bootstrap, "__kops_lock")
