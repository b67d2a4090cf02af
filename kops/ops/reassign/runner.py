"""The engine of one journaled execution: waves, throttles, progress, stall and health stops."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kops.errors import EXIT_FAILURE, EXIT_NOT_DONE, EXIT_OK, ClusterError
from kops.model import Topology, TopicPartition
from kops.ops import failpoints
from kops.ops import journal as J
from kops.ops import throttle as T
from kops.ops.progress import NullReporter, Snapshot, poll
from kops.ops.disk_fit import check_disk
from kops.ops.move import Move
from kops.ops.reassign import admin as A
from kops.ops.reassign.options import (
    ENDING_SOON_S,
    FRESH_S,
    HALT_DISK,
    HALT_HEALTH,
    LAG_RECHECK_EVERY_S,
    LAG_RECHECK_S,
    LIFT_ATTEMPTS,
    LIFT_DEFER_MAX_S,
    NO_PROGRESS_S,
    SETTLE_S,
    SPACE_WAIT_S,
    WAKE_S,
    WAKE_SOON_S,
    ExecuteOptions,
)
from kops.ops.reassign.outcome import Outcome
from kops.ops.reassign.status import (
    LOG_DIR_DONE,
    LOG_DIR_ELSEWHERE,
    LOG_DIR_MOVING,
    alive,
    health_problems,
    log_dir_states,
    next_wave,
    settle,
)

class Runner:
    """Drives one journaled execution: waves, throttles, progress, journal updates."""

    def __init__(self, conn, store: J.JournalStore, journal: J.Journal, opts: ExecuteOptions,
                 reporter=None, lock=None):
        self.conn = conn
        self.store = store
        self.j = journal
        self.opts = opts
        self.reporter = reporter or NullReporter()
        self.lock = lock
        self.notes: list[str] = []
        self.baseline_offline: set[TopicPartition] = {tuple(x) for x in journal.options.get("baseline_offline", [])}
        self.topics = sorted({m.topic for m in journal.moves})
        self._stalled_since: float | None = None
        #: per data move in flight: bytes its new replicas held when last seen to change, and when
        self._copied: dict[str, tuple[int, float]] = {}
        self._finished = (-1, 0.0)  # moves finished at the last stall check, and since when
        self._mismatch_seen: dict[str, float] = {}
        self._last_save = 0.0
        self._log_dirs_started: set[tuple[str, int, int]] = set()
        self.bytes_total = sum(m.bytes_to_move for m in journal.moves if not m.noop) or None
        self.halted_reasons: list[str] = []
        self.halted_by = HALT_HEALTH
        self.stalled = False
        self.stalled_reason = "stalled on down broker(s)"
        self._watch: set[TopicPartition] = set()
        self._lagging: dict[TopicPartition, float] = {}
        #: (topology, time.monotonic() it was read) that the first tick may use instead of reading
        self.fresh: tuple[Topology, float] | None = None
        self._log_dir_states: dict[str, dict[int, str]] = {}
        self._log_dir_failed: dict[tuple[str, int, int], str] = {}
        self._ending_soon = True  # see snapshot() and moves_finished()
        self._all_ending_soon = False  # see snapshot() and tick()
        self._lift_deferred_at: float | None = None  # a lift of finished moves' throttles put off
        self._last_topo: Topology | None = None  # the last tick's read
        self._woke_at = 0.0
        self._ticked_at = 0.0
        #: since when a later disk stage's wave waits for the space its earlier stages free
        self._space_wait_since: float | None = None

    # -- helpers ------------------------------------------------------------------------
    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
            self.reporter.message(text)
            self.j.event(text)

    def save(self, force: bool = True) -> None:
        now = time.monotonic()
        if force or now - self._last_save > 10:
            self.store.save(self.j)
            self._last_save = now

    def _write_ahead(self, records: T.ThrottleState) -> None:
        """Journal every throttle that may be in place before changing any (a kill while they
        are applied must not leave throttles the journal does not know of)."""
        self.j.throttles = records
        self.save()

    def _sync_throttles(self, topo: Topology, in_flight: list[Move], *, save: bool = True) -> list[T.Change]:
        """Bring the throttles to what ``in_flight`` needs. ``save=False``: the caller saves
        the journal soon after (the write-ahead record already names every throttle that may
        be in place, so nothing is lost if kops dies in between)."""
        desired = T.desired_throttles(in_flight, rate=self.opts.throttle, log_dir_rate=self.opts.log_dir_throttle)
        state, notes, changes = T.sync(self.conn, self.j.throttles, desired, topo,
                                       before_apply=self._write_ahead)
        changed = state.to_dict() != self.j.throttles.to_dict()
        self.j.throttles = state
        for n in notes:
            self.note(n)
        if changes or changed:
            self.j.event("throttles: " + "; ".join(str(c) for c in changes))
            if save:
                self.save()
        return changes

    # -- one tick -----------------------------------------------------------------------
    def refresh(self, topo: Topology, reassigning: Mapping[TopicPartition, Any], *,
                mismatch_after_s: float = SETTLE_S) -> bool:
        """Update the states of the moves in flight; True if anything changed.

        Metadata can lag behind the controller (a broker's cache still shows the replica set
        of the reassignment that just finished), so a mismatch only counts once it has been
        seen for ``mismatch_after_s``."""
        now = time.time()
        changed = False
        in_flight = self.j.moves_in(J.IN_FLIGHT)
        self._read_log_dirs(in_flight, topo, reassigning)
        for m in in_flight:
            ld = self._log_dir_states.get(m.name)
            s = settle(m, topo, reassigning, submitted_at=self.j.submitted_at.get(m.name), now=now, log_dirs=ld)
            failed = sorted(b for b, v in (ld or {}).items()
                            if v != LOG_DIR_DONE and (m.topic, m.partition, b) in self._log_dir_failed)
            if s == J.IN_FLIGHT and failed and m.tp not in reassigning:
                s = J.MISMATCH  # the replicas are there, a requested log dir never will be
            if s == J.MISMATCH:
                first = self._mismatch_seen.setdefault(m.name, time.monotonic())
                if time.monotonic() - first < mismatch_after_s:
                    continue
            else:
                self._mismatch_seen.pop(m.name, None)
            if s != J.IN_FLIGHT:
                self.j.progress[m.name] = s
                changed = True
                if s == J.MISMATCH and failed:
                    self.note(
                        f"{m.name}: replicas at the target, but the log dir move failed on broker(s) "
                        + ", ".join(f"{b} ({self._log_dir_failed[(m.topic, m.partition, b)]})" for b in failed)
                    )
                elif s == J.MISMATCH:
                    p = topo.partition(m.topic, m.partition)
                    self.note(
                        f"{m.name}: no longer reassigning, but its replicas are "
                        f"{list(p.replicas) if p else '(gone)'} instead of {list(m.target)} "
                        "(changed or cancelled by someone else?)"
                    )
        return changed

    def _read_log_dirs(self, in_flight: list[Move], topo: Topology,
                       reassigning: Mapping[TopicPartition, Any]) -> None:
        """Where the replicas of log-dir moves live (DescribeLogDirs), once their replicas are
        at the target: :attr:`_log_dir_states` per move (read by :meth:`refresh` and
        :meth:`_log_dirs`)."""
        from kops.cluster.topology import replica_log_dirs

        todo = [m for m in in_flight if m.log_dir_moves and m.tp not in reassigning]
        names = {m.name for m in in_flight}
        self._log_dir_states = {k: v for k, v in self._log_dir_states.items() if k in names}
        if not todo:
            return
        brokers = sorted({b for m in todo for b in m.log_dir_moves})
        dirs = replica_log_dirs(self.conn, brokers, sorted({m.topic for m in todo}))
        for m in todo:
            self._log_dir_states[m.name] = log_dir_states(m.log_dir_moves, m.topic, m.partition, dirs)

    def tick(self, *, start_waves: bool = True) -> Snapshot:
        # when a wave is about to start, read the whole cluster once (its health check needs
        # it) instead of the execution's topics first and everything again
        wave_likely = start_waves and self.j.state == J.RUNNING and bool(next_wave(
            self.j.moves_in(J.PENDING), self.j.moves_in(J.IN_FLIGHT),
            max_per_broker=self.opts.max_moves_per_broker, max_in_flight=self.opts.max_moves_in_flight,
        ))
        self._ticked_at = time.monotonic()
        fresh, self.fresh = self.fresh, None
        validated = wave_likely and fresh is not None and time.monotonic() - fresh[1] < FRESH_S
        if validated:
            topo = fresh[0]  # validated a moment ago (execute --yes): no second read for wave 1
        else:
            topo = A.read(self.conn) if wave_likely else A.read(self.conn, topics=self.topics)
        self._last_topo = topo
        reassigning = A.ongoing_in(topo)
        changed = self.refresh(topo, reassigning)
        # what wait() watches between ticks: the moves in flight the controller still lists,
        # and those it has finished while the metadata read above still shows the old replicas
        # (brokers learn the outcome a moment after the controller): those are looked at again
        # shortly, not one poll interval later
        self._watch = {m.tp for m in self.j.moves_in(J.IN_FLIGHT) if m.tp in reassigning}
        now_m = time.monotonic()
        lagging = {}
        for m in self.j.moves_in(J.IN_FLIGHT):
            p = topo.partition(m.topic, m.partition)
            if m.tp not in reassigning and (p is None or tuple(p.replicas) != m.target):
                lagging[m.tp] = self._lagging.get(m.tp, now_m)
        self._lagging = lagging
        in_flight = self.j.moves_in(J.IN_FLIGHT)
        pending = self.j.moves_in(J.PENDING)

        if start_waves and pending and self.j.state == J.RUNNING:
            wave = next_wave(
                pending, in_flight,
                max_per_broker=self.opts.max_moves_per_broker,
                max_in_flight=self.opts.max_moves_in_flight,
            )
            if wave:
                full = topo if wave_likely else A.read(self.conn)
                problems = health_problems(full, baseline_offline=self.baseline_offline)
                if problems and not (self.j.waves == 0 and self.opts.allow_offline):
                    self.halted_reasons = problems
                    self.halted_by = HALT_HEALTH
                    self.j.state = J.HALTED
                    self.note(
                        f"stopped before wave {self.j.waves + 1}: {len(problems)} partition(s) "
                        f"unhealthy, e.g. {problems[0]}; moves in flight continue. Fix the "
                        "cluster, then `kops reassign resume`, or `kops reassign cancel`."
                    )
                    changed = True
                elif not validated and self._disk_halt(full, wave):
                    changed = True  # (a plan validated a moment ago was checked whole)
                else:
                    # _start_wave syncs the throttles for in flight + wave (incl. removals)
                    # and saves the journal
                    self._start_wave(full, in_flight, wave)
                    self._log_dirs(self.j.moves_in(J.IN_FLIGHT))
                    return self.snapshot(full)

        # lift the throttles of finished moves; not while every move left ends within seconds
        # anyway (and no wave waits): they are all lifted together then, saving a round of
        # config changes (each is a change notification every broker processes). A lift put
        # off is done at the next tick that does not put it off, or after LIFT_DEFER_MAX_S.
        if changed or self._lift_deferred_at is not None:
            defer = bool(in_flight) and not pending and self._all_ending_soon
            if defer and self._lift_deferred_at is None:
                self._lift_deferred_at = time.monotonic()
            if not defer or time.monotonic() - self._lift_deferred_at > LIFT_DEFER_MAX_S:
                self._lift_deferred_at = None
                saved = self._last_save
                self._sync_throttles(topo, in_flight)
                changed = self._last_save == saved  # lifting throttles journaled the new states already
        self._log_dirs(in_flight)
        self._check_stall(topo, in_flight)
        self.save(force=changed)
        return self.snapshot(topo)

    def _disk_halt(self, topo: Topology, wave: list[Move]) -> bool:
        """The disk check before a later wave (or the first one of a resumed execution): would
        the wave's new replicas, with what the moves in flight still copy, fit on their
        destinations now? Reads the brokers' usable bytes, the partitions' sizes and what the
        replicas being added hold already (one DescribeLogDirs round). If not, the execution
        halts: nothing new starts, the moves in flight continue (a disk filling up mid-move
        ends here: `cancel` rolls back, `resume` checks again). A wave of a later disk stage
        first waits for the space the stages before it free (:meth:`_waits_for_space`). True
        when the wave must not start (halted, or waiting)."""
        from kops.cluster.topology import log_dir_usage

        data = [m for m in wave if m.moves_data]
        if not data:
            return False
        dests = {b for m in data for b in m.adding}
        flights = [p for p in topo.partitions() if set(p.adding_replicas) & dests]
        brokers = {b for m in data for b in (*m.original, *m.adding)} | {b for p in flights for b in p.replicas}
        usage = log_dir_usage(self.conn, sorted(b for b in brokers if alive(topo, b)),
                              {m.topic for m in data} | {p.topic for p in flights})
        if usage is None:
            self.note("disk check skipped before a wave: the brokers' log dirs could not be read "
                      "(DescribeLogDirs)")
            return False
        sizes = usage.partition_sizes()
        now = topo.with_log_dirs(usage.dirs).with_sizes(sizes)
        check = check_disk([replace(m, size_bytes=sizes.get(m.tp, m.size_bytes)) for m in data], now,
                           reserve_pct=self.opts.reserve_pct, threshold_pct=self.opts.threshold_pct,
                           on_disk=usage.on_disk())
        for w in check.warnings:
            self.note(f"disk check: {w}")  # said once, not before every wave
        over = check.overflows
        if not over:
            self._space_wait_since = None
            return False
        if self._waits_for_space(wave, over):
            return True
        self.halted_reasons = check.problems()
        self.halted_by = HALT_DISK
        self.j.state = J.HALTED
        brokers_over = ",".join(str(b) for b in sorted({f.broker for f in over}))
        self.note(
            f"stopped before wave {self.j.waves + 1}: its {len(data)} move(s) would not fit on the disk "
            f"of broker(s) {brokers_over} ({check.rule()}): "
            + "; ".join(self.halted_reasons[:3])
            + ". Moves in flight continue; nothing new is started. Free space, then `kops reassign "
            "resume` (it checks again), or roll back with `kops reassign cancel`."
        )
        return True

    def _waits_for_space(self, wave: list[Move], over) -> bool:
        """A wave of a later disk stage whose destinations the moves of the stages before it
        leave: their space comes back only when the brokers delete the old replicas' files
        (``log.segment.delete.delay.ms`` after the move, a minute by default). Waits for it, at most
        :data:`SPACE_WAIT_S`, saying so once; True while waiting (the wave does not start)."""
        stage = min(m.stage for m in wave)
        if stage == 0:
            return False
        freeing = {b for m in self.j.moves if m.stage < stage for b in m.removing}
        blocked = sorted({f.broker for f in over})
        if not set(blocked) <= freeing:
            return False
        now = time.monotonic()
        if self._space_wait_since is None:
            self._space_wait_since = now
            self.note(f"disk stage {stage + 1}: waiting for broker(s) {','.join(map(str, blocked))} to free the "
                      "space of the replicas that earlier stages moved away (Kafka deletes them "
                      f"log.segment.delete.delay.ms after the move; at most {SPACE_WAIT_S:.0f} s)")
        return now - self._space_wait_since < SPACE_WAIT_S

    def _start_wave(self, topo: Topology, in_flight: list[Move], wave: list[Move]) -> None:
        # throttles first (as Kafka does), so that no byte moves unthrottled; and, unlike
        # Kafka's tool, only once the brokers have applied them (they learn of config changes
        # asynchronously: a move submitted sooner copies unthrottled at first)
        moving = in_flight + [m for m in wave if m.moves_data]
        changes = self._sync_throttles(topo, moving, save=False)  # saved with the wave below
        if any(c.kind == "broker" and c.value is not None for c in changes):
            desired = T.desired_throttles(moving, rate=self.opts.throttle, log_dir_rate=self.opts.log_dir_throttle)
            wait_s = max(5.0, getattr(self.conn, "timeout_s", 10.0))
            late = T.await_rates(self.conn, desired, topo, timeout_s=wait_s)
            if late:
                self.note(f"broker(s) {late} did not show the throttle rates kops set within {wait_s:.0f} s; "
                          "starting the moves anyway")
        if self.opts.via == "zookeeper":
            results = A.submit_zk(self.conn, {m.tp: m.target for m in wave})
        else:
            results = A.submit(self.conn, {m.tp: m.target for m in wave})
        failpoints.reach("wave.submitted")
        if results and all(e == A.BUSY for e in results.values()):
            self.note("/admin/reassign_partitions still exists: the next wave waits until it is gone")
            self.save()
            return
        now = time.time()
        self.j.waves += 1
        started = []
        for m in wave:
            err = results.get(m.tp)
            if err is None:
                self.j.progress[m.name] = J.IN_FLIGHT
                self.j.submitted_at[m.name] = now
                started.append(m.name)
            else:
                self.j.progress[m.name] = J.REJECTED
                self.note(f"{m.name}: the controller refused the reassignment: {err}")
        self.j.event(f"wave {self.j.waves}: started {len(started)} move(s): {', '.join(started[:20])}")
        self.save()

    def _log_dirs(self, in_flight: list[Move]) -> None:
        """AlterReplicaLogDirs for the log-dir requests of the moves in flight: sent until a
        broker accepts it (a replica not created yet is refused, the broker remembers the dir
        for it), and again if the replica is seen in another dir with nothing moving it (a
        broker restarted before the move began). A broker without that log dir is final."""
        reqs = {}
        for m in in_flight:
            states = self._log_dir_states.get(m.name, {})
            for b, d in m.log_dir_moves.items():
                k = (m.topic, m.partition, b)
                if k in self._log_dir_failed or states.get(b) in (LOG_DIR_DONE, LOG_DIR_MOVING):
                    continue
                if k not in self._log_dirs_started or states.get(b) == LOG_DIR_ELSEWHERE:
                    reqs[k] = d
        if not reqs:
            return
        for k, err in A.alter_log_dirs(self.conn, reqs).items():
            if err is None:
                if k not in self._log_dirs_started:
                    self.j.event(f"log dir move started: {k[0]}-{k[1]} on broker {k[2]} -> {reqs[k]}")
                self._log_dirs_started.add(k)
            elif "LogDirNotFound" in err:
                self._log_dir_failed[k] = f"broker has no log dir {reqs[k]}: {err}"
                self.note(f"{k[0]}-{k[1]}: broker {k[2]} has no log dir {reqs[k]} ({err})")

    def _check_stall(self, topo: Topology, in_flight: list[Move]) -> None:
        """Stalled: every data move in flight has a down broker among its *target* replicas — a
        destination, or a replica that stays (Kafka completes a reassignment only once every
        target replica is in the ISR, found by the fault lab: a kept replica on a killed broker
        blocks the move as surely as a dead destination)."""
        def is_down(b: int) -> bool:
            return not (topo.broker(b) and topo.broker(b).alive)

        data_moves = [m for m in in_flight if m.moves_data]
        stuck = [m for m in data_moves if any(is_down(b) for b in m.target)]
        if data_moves and len(stuck) == len(data_moves) and not self.j.moves_in(J.PENDING):
            if self._stalled_since is None:
                self._stalled_since = time.monotonic()
                dead = sorted({b for m in stuck for b in m.target if is_down(b)})
                self.note(f"every move in flight waits on down broker(s) {dead}")
            elif time.monotonic() - self._stalled_since > self.opts.stall_after_s:
                self.stalled = True
            return
        self._stalled_since = None
        # every broker up, yet nothing copied and nothing finished: a follower that cannot fetch
        # (fault lab: a stale log of a deleted topic answers INCONSISTENT_TOPIC_ID forever), else
        # --wait without --timeout waited for good. The window leaves a slow throttle its time (a
        # 1 MiB fetch at the rate); finished moves are progress (scale bench: 4,003 small moves
        # copied at once, then completed by the controller ~10 a second, each long idle by bytes).
        window = max(NO_PROGRESS_S, 3 * (1 << 20) / self.opts.throttle if self.opts.throttle else 0)
        now_m = time.monotonic()
        if (n := len(self.j.moves_in(J.DONE, J.MISMATCH))) != self._finished[0]:
            self._finished = (n, now_m)
        idle = [m for m in data_moves if m.name in self._copied and now_m - self._copied[m.name][1] > window]
        if (data_moves and len(idle) == len(data_moves) and not self.j.moves_in(J.PENDING)
                and now_m - self._finished[1] > window):
            self.stalled = True
            self.stalled_reason = (f"no data copied for {window:.0f} s by any move in flight, every broker up: "
                                   + ", ".join(m.name for m in idle[:5])
                                   + " (the brokers' logs say why: a follower that cannot fetch)")
            self.note(self.stalled_reason)

    def snapshot(self, topo: Topology | None = None) -> Snapshot:
        done = len(self.j.moves_in(J.DONE, J.MISMATCH, J.REJECTED))
        in_flight = self.j.moves_in(J.IN_FLIGHT)
        bytes_done = None
        # a move in flight may end any moment (for moves_finished): unless the sizes show that
        # each still has more than a few seconds of copying left
        self._ending_soon = True
        self._all_ending_soon = False
        if self.bytes_total:
            bytes_done = sum(m.bytes_to_move for m in self.j.moves_in(J.DONE))
            if in_flight:
                from kops.cluster.topology import replica_sizes

                dests = sorted({b for m in in_flight for b in m.adding})
                sizes = replica_sizes(self.conn, dests, sorted({m.topic for m in in_flight}))
                left = []
                now_m = time.monotonic()
                for m in in_flight:
                    copied = [min(sizes.get((m.topic, m.partition, b), 0), m.size_bytes or 0) for b in m.adding]
                    bytes_done += sum(copied)
                    if sizes:  # (an unanswered read says nothing about progress)
                        seen = self._copied.get(m.name)
                        if seen is None or seen[0] != sum(copied):
                            self._copied[m.name] = (sum(copied), now_m)
                    left.append(max(((m.size_bytes or 0) - c for c in copied), default=0))
                soon = max(ENDING_SOON_S * (self.opts.throttle or 0), 0.05 * max(m.size_bytes or 0 for m in in_flight))
                self._ending_soon = (not sizes) or min(left) <= soon
                self._all_ending_soon = bool(sizes) and max(left) <= soon
        note = "halted" if self.j.state == J.HALTED else ("stalled" if self._stalled_since else "")
        return Snapshot(
            done=done,
            total=len(self.j.moves),
            in_flight=len(in_flight),
            pending=len(self.j.moves_in(J.PENDING)),
            bytes_done=bytes_done,
            bytes_total=self.bytes_total,
            note=note,
        )

    def moves_finished(self) -> bool:
        """Cheap check between ticks (one ListPartitionReassignments): has the controller
        finished one of the moves that were reassigning at the last tick? Then the next tick
        runs at once, to lift throttles, start the next wave or end, without waiting out the
        poll interval."""
        now_m = time.monotonic()
        if any(now_m - t0 < LAG_RECHECK_S for t0 in self._lagging.values()):
            # metadata was behind the controller at the last tick: look again shortly
            return now_m - self._ticked_at >= LAG_RECHECK_EVERY_S
        if not self._watch:
            return False
        if now_m - self._woke_at < (WAKE_SOON_S if self._ending_soon else WAKE_S):
            return False
        self._woke_at = now_m
        now = A.ongoing(self.conn)
        return any(tp not in now for tp in self._watch)

    # -- end --------------------------------------------------------------------------------
    @property
    def work_left(self) -> bool:
        return bool(self.j.moves_in(J.IN_FLIGHT, J.PENDING))

    def finish(self, *, preserve_throttles: bool = False, final_state: str | None = None) -> None:
        """The work has ended: lift kops' throttles, close the journal, release the lock."""
        records = self.j.throttles  # every broker rate of this execution, lifted or not
        if not preserve_throttles and (records.brokers or not records.empty):
            topo = self._last_topo  # enough to know which brokers are alive
            if not records.empty or topo is None:
                topo = A.read(self.conn, topics=self.topics)
            if not records.empty:
                state = records
                for attempt in range(1, LIFT_ATTEMPTS + 1):
                    # a removal that failed (a broker slow or cut off) is sent again while the
                    # broker is up: a run that ends well leaves no throttle behind
                    state, notes, changes = T.remove_all(self.conn, state, topo, before_apply=self._write_ahead)
                    self.j.throttles = state
                    if changes:
                        self.j.event("throttles removed: " + "; ".join(str(c) for c in changes))
                    if state.empty or attempt == LIFT_ATTEMPTS or not T.plan_sync(
                            state, T.Desired({}, {}), topo, final=True).changes:
                        for n in notes:
                            self.note(n)
                        break
                    time.sleep(1)
                    try:
                        topo = A.read(self.conn, topics=self.topics)
                    except ClusterError as e:  # the journal keeps the records: verify/resume lift them
                        for n in notes:
                            self.note(n)
                        self.note(f"could not read the cluster to lift the throttles again: {e.message}")
                        break
                if not state.empty:
                    self.note(
                        "some throttles could not be removed yet (broker down?): "
                        + "; ".join(state.describe())
                        + " — run `kops reassign verify` again when the broker is back"
                    )
            if records.brokers:
                # "removed" means the brokers have applied it, not only that it was written
                wait_s = max(5.0, getattr(self.conn, "timeout_s", 10.0))
                late = T.await_lifted(self.conn, records, topo, timeout_s=wait_s)
                if late:
                    self.note(f"broker(s) {late} still showed a throttle rate kops removed after {wait_s:.0f} s "
                              "(brokers apply config changes asynchronously)")
        if final_state:
            self.j.state = final_state
        elif self.j.moves_in(J.MISMATCH, J.REJECTED):
            self.j.state = J.FAILED
        else:
            self.j.state = J.COMPLETE
        self.j.event(f"execution {self.j.state}")
        self.save()
        if self.lock is not None:
            try:
                self.lock.release(self.j.id)
            except ClusterError as e:
                self.note(f"could not release the cluster lock: {e.message}")

    def run(self) -> Outcome:
        """Tick until done (with ``opts.wait``) or once (without)."""
        t0 = time.monotonic()
        self.reporter.start(len(self.j.moves), self.bytes_total)
        try:
            if self.opts.wait:
                def done(_s: Snapshot) -> bool:
                    return (not self.work_left) or self.j.state == J.HALTED or self.stalled

                def step() -> Snapshot:
                    s = self.tick()
                    self.reporter.update(s)
                    return s

                interval = self.opts.poll_interval_s
                _, finished = poll(step, done, interval_s=interval, timeout_s=self.opts.timeout_s,
                                   wake=self.moves_finished, wake_interval_s=WAKE_SOON_S)
            else:
                self.reporter.update(self.tick())
        except KeyboardInterrupt:
            self.reporter.stop()
            self.reporter.message(
                f"interrupted: execution {self.j.id} continues in the cluster (moves in flight, their "
                "throttles stay); `kops reassign resume` to drive it, `verify` to check, `cancel` to roll back"
            )
            raise
        finally:
            self.reporter.stop()
        elapsed = time.monotonic() - t0
        if not self.work_left and self.j.state in (J.RUNNING, J.HALTED):
            self.finish()
        j = self.j
        if j.finished:
            code = EXIT_OK if j.state == J.COMPLETE else EXIT_FAILURE
            msg = f"execution {j.id} {j.state}: {len(j.moves_in(J.DONE))}/{len(j.moves)} partitions at their target"
            if j.state == J.FAILED:
                bad = [m.name for m in j.moves_in(J.MISMATCH, J.REJECTED)]
                msg += f"; not at target: {', '.join(bad[:20])}"
            return Outcome(j, True, code, msg, self.notes, self.bytes_total, elapsed)
        if j.state == J.HALTED:
            return Outcome(j, False, EXIT_FAILURE,
                           f"execution {j.id} halted by the {self.halted_by}: " + "; ".join(self.halted_reasons[:5])
                           + "; moves in flight continue: `kops reassign resume` once fixed, or `kops reassign cancel`",
                           self.notes, self.bytes_total, elapsed)
        c = j.counts()
        if not self.opts.wait:
            msg = (f"execution {j.id} started: {c.get(J.IN_FLIGHT, 0)} moving, {c.get(J.PENDING, 0)} "
                   "waiting for later waves. Follow it with `kops reassign verify`; "
                   + ("drive the remaining waves with `kops reassign resume`." if c.get(J.PENDING) else
                      "verify removes the throttles once it completes."))
            return Outcome(j, False, EXIT_OK, msg, self.notes, self.bytes_total, elapsed)
        why = self.stalled_reason if self.stalled else "timed out"
        return Outcome(j, False, EXIT_NOT_DONE,
                       f"execution {j.id} not done ({why}): {c}; continue with `kops reassign resume`, "
                       "or `kops reassign cancel`", self.notes, self.bytes_total, elapsed)
