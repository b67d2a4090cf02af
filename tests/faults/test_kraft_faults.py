"""Faults on a KRaft cluster in containers (Kafka 4.x, a quorum of 3 controllers, 6 brokers in racks
a,a,b,b,c,c): the same checks as test_reassign_faults.py."""

from __future__ import annotations

import json
import time

import pytest
from tests.faults.helpers import assert_clean, data_topic, kops_bg, replicas, wait_in_flight, wait_recovered, wait_for
from tests.faults.test_reassign_faults import EXEC_TIMEOUT, _cleanup, _execute_args
from tests.faults.workload import Workload

pytestmark = pytest.mark.faults


def test_active_kraft_controller_killed_mid_execute(dsandbox_kraft, tmp_path, kops_home, record):
    """a (KRaft). The active controller of the metadata quorum is SIGKILLed while `execute --wait`
    has moves in flight, then restarted: the quorum elects another leader, the reassignment goes
    on, kops completes (exit 0)."""
    sb = dsandbox_kraft
    bs = sb.bootstrap_servers
    from tests.faults.helpers import workload_topics

    work = workload_topics(bs)
    topic, _before, target, plan = data_topic(bs, sb, tmp_path)
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            run = kops_bg(*_execute_args(bs, plan), out=tmp_path / "execute.json")
            wait_in_flight(bs, topic)
            active = sb.active_controller()
            assert active in sb.controller_ids, active
            t_fault = time.monotonic()
            sb.stop_node(active, kill=True)
            new = wait_for(lambda: (c := sb.active_controller()) not in (None, active) and c, 60, 0.5,
                           "another controller to lead the metadata quorum")
            sb.start_node(active)
            rc, out, err = run.finish(EXEC_TIMEOUT + 60)
            recover_s = wait_recovered(bs, t_fault)
            w.wait_acknowledged(100)
            res = w.finish()
        record(scenario="a. active KRaft controller killed mid `reassign execute --wait`", mode="kraft",
               workload=res, kops_exit=rc, recover_s=recover_s, kops_s=round(run.elapsed, 1),
               detail=f"controller {active} killed, {new} took over", throttles_left=None)
        assert rc == 0, err[-3000:]
        assert json.loads(out)["state"] == "complete"
        assert replicas(bs, topic) == target
        record(throttles_left=assert_clean(sb, bs, [topic, *work]))
        assert res.lost == 0, res.lost_examples
    finally:
        _cleanup(bs, [topic, *work])
