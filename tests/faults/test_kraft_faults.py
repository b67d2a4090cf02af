"""Faults on a KRaft cluster in containers (Kafka 4.x, a quorum of 3 controllers, 6 brokers in racks
a,a,b,b,c,c): the same checks as test_reassign_faults.py."""

from __future__ import annotations

import pytest
from tests.faults.helpers import wait_for
from tests.faults.test_reassign_faults import execute_through

pytestmark = pytest.mark.faults


def test_active_kraft_controller_killed_mid_execute(dsandbox_kraft, tmp_path, kops_home, record):
    """a (KRaft). The active controller of the metadata quorum is SIGKILLed while `execute --wait`
    has moves in flight, then restarted: the quorum elects another leader, the reassignment goes
    on, kops completes (exit 0)."""
    sb = dsandbox_kraft

    def kill_active_controller() -> str:
        active = sb.active_controller()
        assert active in sb.controller_ids, active
        sb.faults.stop_node(active, kill=True)
        new = wait_for(lambda: (c := sb.active_controller()) not in (None, active) and c, 60, 0.5,
                       "another controller to lead the metadata quorum")
        sb.faults.start_node(active)
        return f"controller {active} killed, {new} took over"

    execute_through(sb, tmp_path, record, kill_active_controller,
                    scenario="a. active KRaft controller killed mid `reassign execute --wait`")
