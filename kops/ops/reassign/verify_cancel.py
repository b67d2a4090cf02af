"""Verify, cancel and list reassignments."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kops.errors import EXIT_FAILURE, EXIT_OK, BadInput
from kops.model import ReassignmentPlan, Topology
from kops.ops.journal import (
    CANCELLED,
    DROPPED,
    HALTED,
    IN_FLIGHT,
    Journal,
    JournalStore,
    PENDING,
    ROLLED_BACK,
    RUNNING,
)
from kops.ops import throttle
from kops.ops.progress import poll, poll_while_progressing
from kops.ops.reassign import admin
from kops.ops.reassign.guard import cluster_id_of, cluster_identity, find_journal, owner_alive
from kops.ops.reassign.options import ExecuteOptions
from kops.ops.reassign.runner import Runner
from kops.ops.reassign.status import PartitionStatus, log_dir_states, partition_statuses, status_exit_code

#: how long ``verify`` keeps reading while the partitions it sees at another replica set than
#: their target get fewer (lagging metadata catching up); 2.5 s without one fewer ends it
MISMATCH_SETTLE_MAX_S = 60.0


@dataclass
class VerifyResult:
    statuses: list[PartitionStatus]
    exit_code: int
    journal: Journal | None
    notes: list[str]
    throttles_removed: list[str]
    throttles_present: list[str]

    def to_dict(self) -> dict[str, Any]:
        states: dict[str, int] = {}
        for s in self.statuses:
            states[s.state] = states.get(s.state, 0) + 1
        return {
            "result": {0: "complete", 3: "in_progress", 1: "mismatch"}[self.exit_code],
            "summary": states,
            "execution_id": self.journal.id if self.journal else None,
            "execution_state": self.journal.state if self.journal else None,
            "partitions": [s.to_dict() for s in self.statuses],
            "throttles_removed": self.throttles_removed,
            "throttles_present": self.throttles_present,
            "notes": self.notes,
        }


def verify(conn, plan: ReassignmentPlan | None, *, preserve_throttles: bool = False,
           execution_id: str | None = None) -> VerifyResult:
    """Per-partition states of ``plan`` (or of kops' latest execution); finishes kops'
    execution (lifts its throttles) when nothing of it is moving any more."""
    topo0 = cluster_identity(conn)
    store = JournalStore(conn, cluster_id_of(topo0))
    j = find_journal(store, execution_id=execution_id, plan=plan)
    if plan is None and j is None:
        raise BadInput("nothing to verify: give --reassignment-json-file, or run it after a kops execution")
    targets = [(e.tp, tuple(e.replicas)) for e in plan.entries] if plan else [(m.tp, m.target) for m in j.moves]
    topics = sorted({tp[0] for tp, _ in targets} | ({m.topic for m in j.moves} if j else set()))
    notes: list[str] = []
    removed: list[str] = []
    if j is not None:
        from kops.ops.lock import ClusterLock

        runner = Runner(conn, store, j, ExecuteOptions().with_journal(j.options), lock=ClusterLock(conn))
        topo = admin.read(conn, topics=topics)
        reassigning = admin.ongoing_in(topo)
        if not j.finished:
            runner.refresh(topo, reassigning, mismatch_after_s=3600)
            if runner.lag.mismatch_pending:  # confirm with a second read (metadata may lag)
                time.sleep(2.5)
                topo = admin.read(conn, topics=topics)
                reassigning = admin.ongoing_in(topo)
                runner.refresh(topo, reassigning, mismatch_after_s=2.0)
            in_flight = j.moves_in(IN_FLIGHT)
            if not preserve_throttles and in_flight:
                before = j.throttles.describe()
                runner.throttles.sync(topo, in_flight)  # lift throttles of finished moves
                removed = sorted(set(before) - set(j.throttles.describe()))
            if not runner.work_left:
                before = j.throttles.describe()
                runner.finish(preserve_throttles=preserve_throttles)
                removed = sorted(set(removed) | (set(before) - set(j.throttles.describe())))
            else:
                runner.record.save()
        elif not preserve_throttles and not j.throttles.empty:
            before = j.throttles.describe()
            runner.finish(final_state=j.state)
            removed = sorted(set(before) - set(j.throttles.describe()))
        notes.extend(runner.notes)
        pending = [m.tp for m in j.moves_in(PENDING)]
    else:
        pending = []
    # requested log dirs (plan entries or the execution's moves): verified with DescribeLogDirs
    wanted = ({e.tp: {b: d for b, d in zip(e.replicas, e.log_dirs) if d != "any"} for e in plan.entries
               if e.log_dirs} if plan else {m.tp: m.log_dir_moves for m in j.moves})
    wanted = {tp: w for tp, w in wanted.items() if w}
    driving = [m.tp for m in j.moves_in(IN_FLIGHT)] if j is not None and not j.finished else []

    def statuses_now() -> tuple[Topology, list[PartitionStatus]]:
        topo = admin.read(conn, topics=topics)
        reassigning = admin.ongoing_in(topo)
        states = None
        if wanted:
            from kops.cluster.topology import replica_log_dirs

            dirs = replica_log_dirs(conn, sorted({b for w in wanted.values() for b in w}),
                                    sorted({t for t, _ in wanted}))
            states = {tp: log_dir_states(w, tp[0], tp[1], dirs) for tp, w in wanted.items()}
        return topo, partition_statuses(targets, topo, reassigning, pending=pending, log_dirs=states,
                                        driving=driving)

    # a mismatch is confirmed by reading again: the answering broker's metadata may trail the
    # controller (seconds to tens of seconds after thousands of moves); read while it catches up
    topo, statuses = poll_while_progressing(
        statuses_now, lambda r: sum(1 for s in r[1] if s.state == "mismatch"),
        timeout_s=MISMATCH_SETTLE_MAX_S, quiet_s=2.5)
    present = throttle.throttles_in(topo, topics)
    if j is not None and pending and j.state in (RUNNING, HALTED):
        notes.append(f"{len(pending)} partition(s) wait for later waves of execution {j.id}: run "
                     "`kops reassign resume` to start them")
    if j is None and present:
        notes.append("throttles are set that kops did not set; kops leaves them alone: " + "; ".join(present[:10]))
    return VerifyResult(statuses, status_exit_code(statuses), j, notes, removed, present)


@dataclass
class CancelResult:
    cancelled: list[str]
    not_active: list[str]
    dropped: list[str]
    reordered: list[str]
    errors: list[str]
    journal: Journal | None
    notes: list[str]
    throttles_removed: list[str]
    #: the kops executions closed (``--all``: every unfinished one)
    executions: list[str] = field(default_factory=list)
    #: cancelled reassignments kops did not start (``--all``): original order unknown
    order_unknown: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_FAILURE if self.errors else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "cancelled": self.cancelled,
            "dropped_pending": self.dropped,
            "not_active": self.not_active,
            "order_restored": self.reordered,
            "errors": self.errors,
            "execution_id": self.journal.id if self.journal else None,
            "execution_state": self.journal.state if self.journal else None,
            "executions_cancelled": self.executions,
            "order_unknown": self.order_unknown,
            "throttles_removed": self.throttles_removed,
            "notes": self.notes,
        }


def cancel(conn, plan: ReassignmentPlan | None, *, preserve_throttles: bool = False,
           execution_id: str | None = None, timeout_s: float = 60.0, every: bool = False,
           force: bool = False) -> CancelResult:
    """KIP-455 cancel (rollback to the original replicas) of what kops started — or of the
    plan's partitions — including reassignments that only add replicas.

    ``every`` (``--all``): every reassignment in flight, whoever started it, and every unfinished
    kops execution closed (its waiting waves dropped, its original replica orders put back, its
    throttles lifted). Refused (nothing changed) while a kops execution whose owner is alive holds
    them, unless ``force``."""
    if force and not every:
        raise BadInput("--force goes with --all")
    if every and (plan is not None or execution_id):
        raise BadInput("--all cancels every reassignment in flight: give it without a plan file or --execution-id")
    topo0 = cluster_identity(conn)
    store = JournalStore(conn, cluster_id_of(topo0))
    reassigning = admin.ongoing(conn)
    if every:
        journals = store.unfinished()
        running = [j for j in journals if owner_alive(j, j.options.get("poll_interval_s") or 2.0)]
        if running and not force:
            from kops.ops.lock import LockHeld

            j = running[-1]
            err = LockHeld({"execution_id": j.id, "owner": j.owner, "acquired_at": j.created_at})
            err.details = ["nothing was cancelled; `kops reassign cancel --all --force` cancels every reassignment "
                           "under the running execution"]
            raise err
        tps = sorted(reassigning)
    else:
        j = find_journal(store, execution_id=execution_id, plan=plan, unfinished_only=True)
        if j is None and plan is None:
            raise BadInput("nothing to cancel: no unfinished kops execution; give --reassignment-json-file "
                           "to cancel the reassignments of a plan, or --all for every reassignment in flight")
        journals = [j] if j is not None else []
        tps = [m.tp for m in j.moves] if j is not None else [e.tp for e in plan.entries]
    # Scala semantics (2.6-3.6): reassigning = adding or removing non-empty
    active = [tp for tp in tps if tp in reassigning and (
        reassigning[tp].get("adding_replicas") or reassigning[tp].get("removing_replicas"))]
    results = admin.submit(conn, {tp: None for tp in active})
    cancelled = sorted(f"{t}-{p}" for (t, p), e in results.items() if e is None or "NoReassignmentInProgress" in e)
    errors = sorted(f"{t}-{p}: {e}" for (t, p), e in results.items() if e is not None and "NoReassignmentInProgress" not in e)
    active_set = set(active)
    not_active = sorted(f"{t}-{p}" for t, p in tps if (t, p) not in active_set)

    def settled() -> bool:
        now = admin.ongoing(conn)
        return not any(tp in now for tp in active)

    if active:
        poll(settled, bool, interval_s=0.5, timeout_s=timeout_s)
    res = CancelResult(cancelled, not_active, [], [], errors, journals[0] if journals else None, [], [])
    for j in journals:
        _close(conn, store, j, set(cancelled), res, preserve_throttles=preserve_throttles, timeout_s=timeout_s)
        res.executions.append(j.id)
    if every:
        known = {m.tp for j in journals for m in j.moves}
        res.order_unknown = sorted(f"{t}-{p}" for t, p in active if (t, p) not in known and f"{t}-{p}" in cancelled)
        if res.order_unknown:
            res.notes.append(
                f"{len(res.order_unknown)} cancelled reassignment(s) were not started by kops: their replica sets are "
                "the original ones again (KIP-455), but kops does not know their original replica order (a KRaft "
                "controller keeps the target's order of the replicas both share); check the preferred leaders with "
                "`kops leader balance-plan`: " + ", ".join(res.order_unknown[:10])
                + (" ..." if len(res.order_unknown) > 10 else ""))
    return res


def _close(conn, store: JournalStore, j: Journal, cancelled: set[str], res: CancelResult, *,
           preserve_throttles: bool, timeout_s: float) -> None:
    """End kops execution ``j`` after its moves in flight were cancelled (``cancelled``): waves not
    started dropped, the original replica orders put back, its throttles lifted (unless
    ``preserve_throttles``), the journal closed as cancelled; what was done added to ``res``."""
    from kops.ops.lock import ClusterLock

    runner = Runner(conn, store, j, ExecuteOptions().with_journal(j.options), lock=ClusterLock(conn))
    dropped = 0
    for m in j.moves:
        st = j.progress.get(m.name)
        if st == PENDING:
            j.progress[m.name] = DROPPED
            res.dropped.append(m.name)
            dropped += 1
        elif st == IN_FLIGHT and m.name in cancelled:
            j.progress[m.name] = ROLLED_BACK
    # KIP-455 cancel restores the original replica *set* (KRaft keeps the target's order for
    # the replicas both share); put back the original order too. The brokers' metadata trails
    # the controller, so wait until it shows the rolled-back sets before comparing orders.
    rolled = {m.tp: m.original for m in j.moves if j.progress.get(m.name) == ROLLED_BACK}
    shown, _ = (_await_replicas(conn, rolled, lambda now, want: set(now) == set(want), timeout_s)
                if rolled else ({}, True))
    fix = {tp: orig for tp, orig in rolled.items()
           if tp in (shown or {}) and shown[tp] != orig and set(shown[tp]) == set(orig)}
    if fix:
        answers = admin.submit(conn, fix)
        res.reordered.extend(sorted(f"{t}-{p}" for (t, p), e in answers.items() if e is None))
        poll(lambda: not any(tp in admin.ongoing(conn) for tp in fix), bool, interval_s=0.5, timeout_s=timeout_s)
        _, shown_ok = _await_replicas(conn, fix, lambda now, want: now == want, timeout_s)
        if not shown_ok:
            res.notes.append("the original replica orders were submitted but the brokers' metadata did "
                             f"not show them within {timeout_s:.0f} s; check with `kops reassign verify`")
    before = j.throttles.describe()
    rolled_back = sum(1 for m in j.moves if j.progress.get(m.name) == ROLLED_BACK)
    j.event(f"cancelled: {rolled_back} rolled back, {dropped} pending dropped")
    runner.finish(preserve_throttles=preserve_throttles, final_state=CANCELLED)
    res.throttles_removed.extend(sorted(set(before) - set(j.throttles.describe())))
    res.notes.extend(runner.notes)


def _await_replicas(conn, want: dict[tuple[str, int], tuple[int, ...]],
                    ok: Callable[[tuple[int, ...], tuple[int, ...]], bool],
                    timeout_s: float) -> tuple[dict[tuple[str, int], tuple[int, ...]] | None, bool]:
    """Poll the brokers' metadata until every partition of ``want`` satisfies ``ok(now, want)``;
    returns (the replicas last shown, finished)."""
    topics = sorted({t for t, _ in want})

    def shown() -> dict[tuple[str, int], tuple[int, ...]]:
        topo = admin.read(conn, topics=topics)
        out = {}
        for t, p in want:
            part = topo.partition(t, p)
            if part is not None:
                out[(t, p)] = tuple(part.replicas)
        return out

    return poll(shown, lambda now: all(tp in now and ok(now[tp], w) for tp, w in want.items()),
                interval_s=0.5, timeout_s=timeout_s)


def list_all(conn) -> dict[str, Any]:
    """Ongoing reassignments, marked with the kops execution that started them."""
    topo0 = cluster_identity(conn)
    store = JournalStore(conn, cluster_id_of(topo0))
    active = store.unfinished()
    by_tp = {}
    for j in active:
        for m in j.moves_in(IN_FLIGHT):
            by_tp[m.tp] = j.id
    rows = []
    for (t, p), r in sorted(admin.ongoing(conn).items()):
        rows.append({
            "topic": t, "partition": p,
            "replicas": list(r.get("replicas", [])),
            "adding": list(r.get("adding_replicas", [])),
            "removing": list(r.get("removing_replicas", [])),
            "kops_execution": by_tp.get((t, p)),
        })
    return {
        "reassignments": rows,
        "kops_executions": [j.summary() for j in active],
        "warnings": store.warnings,
    }
