"""The engine of one journaled execution: a coordinator that holds small trackers.

Each check (:meth:`Runner.tick`) reads the cluster once, settles the moves in flight, starts
the next wave when the limits, the health check and the disks allow it, and asks each tracker
to do its part; each holds its own state and has its own unit tests:

* :class:`~kops.ops.reassign.throttle_sync.ThrottleSync` — throttles in force before a wave,
  lifted as moves finish and at the end, journaled ahead;
* :class:`~kops.ops.reassign.log_dirs.LogDirMoves` — AlterReplicaLogDirs for a plan's
  ``log_dirs``, and where the replicas live;
* :class:`~kops.ops.reassign.disk_stages.DiskStages` — the disk check before a later wave, and
  a later disk stage's wait for the space the earlier ones free;
* :class:`~kops.ops.reassign.stall.StallWatch` — when waiting is pointless;
* :class:`~kops.ops.reassign.lag.LagWatch` — metadata trailing the controller, and finished
  moves noticed between checks;
* :class:`~kops.ops.reassign.auto_throttle.AutoThrottle` — under ``--throttle auto``, the rate:
  down at the first harm to partitions not being moved, up while the copy has headroom;
* :class:`~kops.ops.reassign.record.Recorder` — notes, journal events and saves.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from kops.errors import ClusterError
from kops.model import Topology, TopicPartition
from kops.ops import failpoints
from kops.ops.journal import (
    COMPLETE,
    DONE,
    FAILED,
    HALTED,
    IN_FLIGHT,
    Journal,
    JournalStore,
    MISMATCH,
    PENDING,
    REJECTED,
    RUNNING,
)
from kops.ops.lock import LOCK_TOPIC
from kops.ops.move import Move
from kops.ops.progress import Snapshot, poll
from kops.ops.reassign import admin
from kops.ops.reassign.auto_throttle import AutoThrottle
from kops.ops.reassign.disk_stages import DiskStages
from kops.ops.reassign.lag import LagWatch
from kops.ops.reassign.log_dirs import LogDirMoves
from kops.ops.reassign.options import FRESH_S, HALT_HEALTH, SETTLE_S, WAKE_SOON_S, ExecuteOptions
from kops.ops.reassign.outcome import Halt, Outcome
from kops.ops.reassign.preflight import Prepared
from kops.ops.reassign.record import Recorder
from kops.ops.reassign.stall import StallWatch
from kops.ops.reassign.status import Copying, copying, health_problems, next_wave, settle
from kops.ops.reassign.throttle_sync import ThrottleSync


class Runner:
    """Drives one journaled execution: waves, throttles, progress, journal updates.

    ``fresh``: the topology the preflight read and when (``time.monotonic()``): a first wave due
    within :data:`FRESH_S` uses it instead of reading the cluster again; ``said``: notes the
    operator saw before the execution started (kept in the outcome and the journal, not shown
    again); ``probe``: the latency probe of ``--probe-topic``
    (:class:`~kops.cluster.probe.LatencyProbe`). :meth:`after_preflight` builds a new
    execution's runner from its preflight."""

    def __init__(self, conn, store: JournalStore, journal: Journal, opts: ExecuteOptions, *,
                 reporter=None, lock=None, fresh: tuple[Topology, float] | None = None,
                 said: Iterable[str] = (), probe=None):
        from kops.cluster import topology as cluster  # DescribeLogDirs (lazily: cron start-up)

        self.conn = conn
        self.j = journal
        self.opts = opts
        self.lock = lock
        self.record = Recorder(store, journal, reporter, known=said)
        self.topics = sorted({m.topic for m in journal.moves})
        #: partitions offline when the execution started: they do not stop a wave
        self.baseline_offline: set[TopicPartition] = {
            tuple(x) for x in journal.options.get("baseline_offline", [])}
        self.bytes_total = sum(m.bytes_to_move for m in journal.moves if not m.noop) or None
        #: why the execution stopped starting waves (None: it did not)
        self.halt: Halt | None = None
        self._fresh = fresh
        self._last_topo: Topology | None = None  # the last check's read
        self._copying = Copying({})  # as the last snapshot saw it
        #: under --throttle auto: the rate's tracker (harm judged against the cluster as the
        #: preflight read it, else as the first check does), and the probe
        # (kops' lock topic has one replica by design: its broker down is no harm done by the copy)
        self.auto = (AutoThrottle(opts.auto_throttle, rate=opts.throttle, ignore={LOCK_TOPIC})
                     if opts.auto_throttle else None)
        if self.auto is not None and fresh is not None:
            self.auto.start(fresh[0])
        self.probe = probe
        self._bytes_done: int | None = None  # as the last snapshot counted
        self.throttles = ThrottleSync(conn, self.record, rate=self.auto.rate if self.auto else opts.throttle,
                                      log_dir_rate=opts.log_dir_throttle, topics=self.topics)
        self.log_dirs = LogDirMoves(
            describe=lambda brokers, topics: cluster.replica_log_dirs(conn, brokers, topics),
            alter=lambda requests: admin.alter_log_dirs(conn, requests),
        )
        self.disk = DiskStages(lambda brokers, topics: cluster.log_dir_usage(conn, brokers, topics),
                               moves=journal.moves, reserve_pct=opts.reserve_pct, threshold_pct=opts.threshold_pct)
        self.stall = StallWatch(stall_after_s=opts.stall_after_s,
                                throttle=opts.auto_throttle.lo if opts.auto_throttle else opts.throttle)
        self.lag = LagWatch()

    @classmethod
    def after_preflight(cls, conn, store: JournalStore, journal: Journal, opts: ExecuteOptions,
                        prepared: Prepared, *, reporter=None, lock=None, probe=None) -> Runner:
        """The runner of an execution just created from ``prepared``: its first wave uses the
        preflight's read, and the disk check's warnings (shown before the confirmation) are
        kept without being shown again."""
        warnings = prepared.disk.warnings if prepared.disk is not None else ()
        return cls(conn, store, journal, opts, reporter=reporter, lock=lock, probe=probe,
                   fresh=(prepared.topology, prepared.read_at), said=[f"disk check: {w}" for w in warnings])

    @property
    def notes(self) -> list[str]:
        return self.record.notes

    @property
    def work_left(self) -> bool:
        return bool(self.j.moves_in(IN_FLIGHT, PENDING))

    # -- one check ----------------------------------------------------------------------
    def tick(self, *, start_waves: bool = True) -> Snapshot:
        j = self.j
        # when a wave is about to start, read the whole cluster once (its health check needs
        # it) instead of the execution's topics first and everything again; the adaptive
        # throttle watches every partition
        wave_likely = (start_waves and j.state == RUNNING
                       and bool(self._next_wave(j.moves_in(PENDING), j.moves_in(IN_FLIGHT))))
        whole = wave_likely or self.auto is not None
        self.lag.checking(time.monotonic())
        fresh, self._fresh = self._fresh, None
        validated = wave_likely and fresh is not None and time.monotonic() - fresh[1] < FRESH_S
        if validated:
            topo = fresh[0]  # validated a moment ago (execute --yes): no second read for wave 1
        else:
            topo = admin.read(self.conn) if whole else admin.read(self.conn, topics=self.topics)
        self._last_topo = topo
        reassigning = admin.ongoing_in(topo)
        changed = self.refresh(topo, reassigning)
        # what moves_finished() watches until the next check, and metadata lagging the controller
        self.lag.saw(j.moves_in(IN_FLIGHT), topo, reassigning, time.monotonic())
        in_flight = j.moves_in(IN_FLIGHT)
        pending = j.moves_in(PENDING)
        self._adapt(topo, reassigning, in_flight)

        if start_waves and pending and j.state == RUNNING:
            wave = self._next_wave(pending, in_flight)
            if wave:
                full = topo if whole else admin.read(self.conn)
                if self._wave_may_start(full, wave, checked_whole=validated):
                    self._start_wave(full, in_flight, wave)
                    self.log_dirs.drive(j.moves_in(IN_FLIGHT), self.record)
                    return self.snapshot()
                changed = True  # halted, or waiting for disk space

        # the throttles of finished moves: lifted now, or put off while the rest ends within seconds
        if self.throttles.lift_due(changed, in_flight=bool(in_flight), pending=bool(pending),
                                   all_ending_soon=self._copying.all_ending_soon, now=time.monotonic()):
            saves = self.record.saves
            self.throttles.sync(topo, in_flight)
            changed = self.record.saves == saves  # lifting throttles journaled the new states already
        self.log_dirs.drive(in_flight, self.record)
        for text in self.stall.check(topo, in_flight, pending=bool(pending),
                                     finished=len(j.moves_in(DONE, MISMATCH)), now=time.monotonic()):
            self.record.note(text)
        self.record.save(force=changed)
        return self.snapshot()

    def _adapt(self, topo: Topology, reassigning: Mapping[TopicPartition, Any], in_flight: Sequence[Move]) -> None:
        """Under ``--throttle auto``: the rate for what this check read, changed on the brokers
        of the moves in flight (the next wave starts at it), journaled with its reason."""
        if self.auto is None:
            return
        copying = [m for m in in_flight if m.moves_data]
        change = self.auto.check(
            topo, set(reassigning) | {m.tp for m in in_flight}, now=time.monotonic(), copied=self._bytes_done,
            receiving=len({b for m in copying for b in m.adding}),
            probe_ms=self.probe.sample() if self.probe is not None and copying else None,
            closed=self.opts.window.closed_reason(datetime.now(timezone.utc)) if self.opts.window is not None else None)
        if change is None:
            return
        self.throttles.rate = change.after
        self.j.options["throttle"] = change.after
        self.record.announce(str(change))
        if not self.throttles.sync(topo, in_flight):
            self.record.save()

    def _next_wave(self, pending: Sequence[Move], in_flight: Sequence[Move]) -> list[Move]:
        return next_wave(pending, in_flight, max_per_broker=self.opts.max_moves_per_broker,
                         max_in_flight=self.opts.max_moves_in_flight)

    def refresh(self, topo: Topology, reassigning: Mapping[TopicPartition, Any], *,
                mismatch_after_s: float = SETTLE_S) -> bool:
        """Update the states of the moves in flight; True if anything changed.

        Metadata can lag behind the controller (a broker's cache still shows the replica set
        of the reassignment that just finished), so a mismatch only counts once it has been
        seen for ``mismatch_after_s``."""
        now = time.time()
        changed = False
        in_flight = self.j.moves_in(IN_FLIGHT)
        self.log_dirs.read(in_flight, reassigning)
        for m in in_flight:
            s = settle(m, topo, reassigning, submitted_at=self.j.submitted_at.get(m.name), now=now,
                       log_dirs=self.log_dirs.states(m))
            failed = self.log_dirs.failed(m)
            if s == IN_FLIGHT and failed and m.tp not in reassigning:
                s = MISMATCH  # the replicas are there, a requested log dir never will be
            if s != MISMATCH:
                self.lag.settled(m.name)
            elif not self.lag.confirmed(m.name, time.monotonic(), mismatch_after_s):
                continue
            if s == IN_FLIGHT:
                continue
            self.j.progress[m.name] = s
            changed = True
            if s == MISMATCH and failed:
                self.record.note(f"{m.name}: replicas at the target, but the log dir move failed on broker(s) "
                                 + ", ".join(failed))
            elif s == MISMATCH:
                p = topo.partition(m.topic, m.partition)
                self.record.note(
                    f"{m.name}: no longer reassigning, but its replicas are "
                    f"{list(p.replicas) if p else '(gone)'} instead of {list(m.target)} "
                    "(changed or cancelled by someone else?)"
                )
        return changed

    def _wave_may_start(self, topo: Topology, wave: list[Move], *, checked_whole: bool) -> bool:
        """The health check, then the disk check (not when ``checked_whole``: the preflight
        checked the whole plan a moment ago). False when the execution halts, or the wave waits
        for disk space."""
        problems = health_problems(topo, baseline_offline=self.baseline_offline)
        if problems and not (self.j.waves == 0 and self.opts.allow_offline):
            self._halt(Halt(HALT_HEALTH, problems, (
                f"stopped before wave {self.j.waves + 1}: {len(problems)} partition(s) "
                f"unhealthy, e.g. {problems[0]}; moves in flight continue. Fix the "
                "cluster, then `kops reassign resume`, or `kops reassign cancel`."
            )))
            return False
        if checked_whole:
            return True
        verdict = self.disk.before_wave(topo, wave, wave_no=self.j.waves + 1, now=time.monotonic(),
                                        record=self.record)
        if isinstance(verdict, Halt):
            self._halt(verdict)
            return False
        return verdict

    def _halt(self, halt: Halt) -> None:
        """Nothing new starts; the moves in flight continue."""
        self.halt = halt
        self.j.state = HALTED
        self.record.note(halt.note)

    def _start_wave(self, topo: Topology, in_flight: list[Move], wave: list[Move]) -> None:
        self.throttles.before_wave(topo, in_flight + [m for m in wave if m.moves_data])  # saved below
        if self.opts.via == "zookeeper":
            results = admin.submit_zk(self.conn, {m.tp: m.target for m in wave})
        else:
            results = admin.submit(self.conn, {m.tp: m.target for m in wave})
        failpoints.reach("wave.submitted")
        if results and all(e == admin.BUSY for e in results.values()):
            self.record.note("/admin/reassign_partitions still exists: the next wave waits until it is gone")
            self.record.save()
            return
        now = time.time()
        self.j.waves += 1
        started = []
        for m in wave:
            err = results.get(m.tp)
            if err is None:
                self.j.progress[m.name] = IN_FLIGHT
                self.j.submitted_at[m.name] = now
                started.append(m.name)
            else:
                self.j.progress[m.name] = REJECTED
                self.record.note(f"{m.name}: the controller refused the reassignment: {err}")
        self.record.event(f"wave {self.j.waves}: started {len(started)} move(s): {', '.join(started[:20])}")
        self.record.save()

    def snapshot(self) -> Snapshot:
        """Progress for the reporter; also what the stall and lag watches and the throttle lift
        learn from the new replicas' sizes (one DescribeLogDirs of the destinations)."""
        j = self.j
        in_flight = j.moves_in(IN_FLIGHT)
        bytes_done = None
        self._copying = Copying({})
        if self.bytes_total:
            bytes_done = sum(m.bytes_to_move for m in j.moves_in(DONE))
            if in_flight:
                from kops.cluster.topology import replica_sizes

                sizes = replica_sizes(self.conn, sorted({b for m in in_flight for b in m.adding}),
                                      sorted({m.topic for m in in_flight}))
                self._copying = copying(in_flight, sizes, throttle=self.throttles.rate)
                bytes_done += sum(self._copying.copied.values())
                if sizes:  # (an unanswered read says nothing about progress)
                    self.stall.copied(self._copying.copied, time.monotonic())
            self._bytes_done = bytes_done if (not in_flight or sizes) else None
        return Snapshot(
            done=len(j.moves_in(DONE, MISMATCH, REJECTED)),
            total=len(j.moves),
            in_flight=len(in_flight),
            pending=len(j.moves_in(PENDING)),
            bytes_done=bytes_done,
            bytes_total=self.bytes_total,
            note="halted" if j.state == HALTED else ("stalled" if self.stall.waiting_on_down else ""),
            throttle=self.throttles.rate,
        )

    def moves_finished(self) -> bool:
        """Cheap check between ticks (one ListPartitionReassignments): has the controller
        finished one of the moves that were reassigning at the last tick? Then the next tick
        runs at once, to lift throttles, start the next wave or end, without waiting out the
        poll interval."""
        return self.lag.wake(time.monotonic(), lambda: admin.ongoing(self.conn), ending_soon=self._copying.ending_soon)

    # -- end --------------------------------------------------------------------------------
    def finish(self, *, preserve_throttles: bool = False, final_state: str | None = None) -> None:
        """The work has ended: lift kops' throttles, close the journal, release the lock."""
        if self.probe is not None:
            self.probe.close()
        summary = self.auto.summary() if self.auto is not None else None
        if summary:
            self.record.note(summary)
        if not preserve_throttles:
            self.throttles.lift_all(self._last_topo)
        if final_state:
            self.j.state = final_state
        elif self.j.moves_in(MISMATCH, REJECTED):
            self.j.state = FAILED
        else:
            self.j.state = COMPLETE
        self.record.event(f"execution {self.j.state}")
        self.record.save()
        if self.lock is not None:
            try:
                self.lock.release(self.j.id)
            except ClusterError as e:
                self.record.note(f"could not release the cluster lock: {e.message}")

    def run(self) -> Outcome:
        """Tick until done (with ``opts.wait``) or once (without)."""
        t0 = time.monotonic()
        reporter = self.record.reporter
        reporter.start(len(self.j.moves), self.bytes_total)
        try:
            if self.opts.wait:
                def done(_s: Snapshot) -> bool:
                    return (not self.work_left) or self.j.state == HALTED or self.stall.stalled

                unanswered: dict[str, Any] = {}  # since when the cluster has not answered, and why

                def step() -> Snapshot:
                    try:
                        s = self.tick()
                    except ClusterError as e:
                        unanswered.setdefault("since", time.monotonic())
                        unanswered["error"] = e.message
                        raise
                    unanswered.clear()
                    reporter.update(s)
                    return s

                # --timeout bounds every read too: a cluster that stops answering mid-tick (this
                # host cut off) ends the run at its timeout, not after each read's own retries
                deadline = None if self.opts.timeout_s is None else t0 + self.opts.timeout_s
                with self.conn.bounded_by(deadline):
                    poll(step, done, interval_s=self.opts.poll_interval_s, timeout_s=self.opts.timeout_s,
                         wake=self.moves_finished, wake_interval_s=WAKE_SOON_S)
                if unanswered:  # the wait ended with the cluster silent: say so, not only "timed out"
                    self.record.note(
                        f"no answer from the cluster for the last {time.monotonic() - unanswered['since']:.0f} s "
                        f"({unanswered['error']}): the progress shown is as last read; the moves go on in the "
                        "cluster under their throttles, which kops could not lift")
            else:
                reporter.update(self.tick())
        except KeyboardInterrupt:
            reporter.stop()
            reporter.message(
                f"interrupted: execution {self.j.id} continues in the cluster (moves in flight, their "
                "throttles stay); `kops reassign resume` to drive it, `verify` to check, `cancel` to roll back"
            )
            raise
        finally:
            reporter.stop()
        elapsed = time.monotonic() - t0
        if not self.work_left and self.j.state in (RUNNING, HALTED):
            self.finish()
        return Outcome.of(self.j, waited=self.opts.wait, halt=self.halt,
                          stalled=self.stall.reason if self.stall.stalled else None,
                          notes=self.notes, bytes_total=self.bytes_total, elapsed_s=elapsed)
