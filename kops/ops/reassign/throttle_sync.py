"""The execution's throttles kept at what its moves in flight need: its throttle tracker.

:mod:`kops.ops.throttle` computes and applies throttles (the one place that does); this object
decides *when* for one execution, and journals each step:

- before a wave: the throttles of the moves in flight plus the wave's, in force on the brokers
  before the wave is submitted (Kafka's tool submits right after writing them: the first bytes
  then copy unthrottled);
- as moves finish: their throttles lifted, except while every move left ends within seconds
  anyway (and no wave waits) — then they are all lifted together, saving a round of config
  changes (each is a change notification every broker processes); a lift put off is done at
  the next check that does not put it off, or after :data:`LIFT_DEFER_MAX_S`;
- at the end: every throttle of the execution lifted, sent again while some of it fails on a
  broker that is up, and waited for until no broker still shows a rate kops set.

Every throttle that may be in place is journaled before any is changed (write-ahead), so
``verify``, ``resume`` and ``cancel`` can always lift them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from kops.errors import ClusterError
from kops.model import Topology
from kops.ops import throttle
from kops.ops.move import Move
from kops.ops.reassign import admin
from kops.ops.reassign.options import LIFT_ATTEMPTS, LIFT_DEFER_MAX_S
from kops.ops.reassign.record import Recorder


class ThrottleSync:
    def __init__(self, conn, record: Recorder, *, rate: int | None, log_dir_rate: int | None,
                 topics: Sequence[str]):
        self.conn = conn
        self.record = record
        self.rate = rate
        self.log_dir_rate = log_dir_rate
        self.topics = list(topics)
        self._lift_put_off_at: float | None = None

    @property
    def _journal(self):
        return self.record.journal

    def _wait_s(self) -> float:
        """How long to wait for the brokers to apply a change (they do so asynchronously)."""
        return max(5.0, getattr(self.conn, "timeout_s", 10.0))

    def desired(self, moves: Sequence[Move]) -> throttle.Desired:
        return throttle.desired_throttles(moves, rate=self.rate, log_dir_rate=self.log_dir_rate)

    def sync(self, topo: Topology, moves: Sequence[Move], *, save: bool = True) -> list[throttle.Change]:
        """Bring the throttles to what ``moves`` need. ``save=False``: the caller saves the
        journal soon after (the write-ahead record already names every throttle that may be in
        place, so nothing is lost if kops dies in between)."""
        j = self._journal
        state, notes, changes = throttle.sync(self.conn, j.throttles, self.desired(moves), topo,
                                       before_apply=self.record.write_ahead)
        changed = state.to_dict() != j.throttles.to_dict()
        j.throttles = state
        for n in notes:
            self.record.note(n)
        if changes or changed:
            self.record.event("throttles: " + "; ".join(str(c) for c in changes))
            if save:
                self.record.save()
        return changes

    def before_wave(self, topo: Topology, moving: Sequence[Move]) -> None:
        """Throttles first (as Kafka does), so that no byte moves unthrottled; and, unlike
        Kafka's tool, only once the brokers have applied them (they learn of config changes
        asynchronously: a move submitted sooner copies unthrottled at first). Not saved: the
        caller saves with the wave."""
        changes = self.sync(topo, moving, save=False)
        if any(c.kind == "broker" and c.value is not None for c in changes):
            wait_s = self._wait_s()
            late = throttle.await_rates(self.conn, self.desired(moving), topo, timeout_s=wait_s)
            if late:
                self.record.note(f"broker(s) {late} did not show the throttle rates kops set within "
                                 f"{wait_s:.0f} s; starting the moves anyway")

    def lift_due(self, changed: bool, *, in_flight: bool, pending: bool, all_ending_soon: bool,
                 now: float) -> bool:
        """Should the throttles of finished moves be lifted now? ``changed``: moves finished at
        this check; ``in_flight``/``pending``: moves are in flight / wait for later waves;
        ``all_ending_soon``: every move in flight ends within seconds."""
        if not changed and self._lift_put_off_at is None:
            return False
        put_off = in_flight and not pending and all_ending_soon
        if put_off and self._lift_put_off_at is None:
            self._lift_put_off_at = now
        if put_off and now - self._lift_put_off_at <= LIFT_DEFER_MAX_S:
            return False
        self._lift_put_off_at = None
        return True

    def lift_all(self, topo: Topology | None) -> None:
        """The work has ended: lift every throttle of the execution (``topo``: the last read,
        enough to know which brokers are alive when only broker rates are left to wait for)."""
        records = self._journal.throttles  # every broker rate of this execution, lifted or not
        if not (records.brokers or not records.empty):
            return
        if not records.empty or topo is None:
            topo = admin.read(self.conn, topics=self.topics)
        if not records.empty:
            topo = self._remove(records, topo)
        if records.brokers:
            # "removed" means the brokers have applied it, not only that it was written
            wait_s = self._wait_s()
            late = throttle.await_lifted(self.conn, records, topo, timeout_s=wait_s)
            if late:
                self.record.note(f"broker(s) {late} still showed a throttle rate kops removed after "
                                 f"{wait_s:.0f} s (brokers apply config changes asynchronously)")

    def _remove(self, state: throttle.ThrottleState, topo: Topology) -> Topology:
        """Remove the throttles of ``state``; a removal that failed (a broker slow or cut off) is
        sent again while the broker is up, so that a run that ends well leaves none behind.
        Returns the last topology read."""
        for attempt in range(1, LIFT_ATTEMPTS + 1):
            state, notes, changes = throttle.remove_all(self.conn, state, topo,
                                                        before_apply=self.record.write_ahead)
            self._journal.throttles = state
            if changes:
                self.record.event("throttles removed: " + "; ".join(str(c) for c in changes))
            if state.empty or attempt == LIFT_ATTEMPTS or not throttle.plan_sync(
                    state, throttle.Desired({}, {}), topo, final=True).changes:
                for n in notes:
                    self.record.note(n)
                break
            time.sleep(1)
            try:
                topo = admin.read(self.conn, topics=self.topics)
            except ClusterError as e:  # the journal keeps the records: verify/resume lift them
                for n in notes:
                    self.record.note(n)
                self.record.note(f"could not read the cluster to lift the throttles again: {e.message}")
                break
        if not state.empty:
            self.record.note(
                "some throttles could not be removed yet (broker down?): "
                + "; ".join(state.describe())
                + " — run `kops reassign verify` again when the broker is back"
            )
        return topo
