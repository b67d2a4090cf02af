"""What kops' cron steps share (``rebalance step``, ``heal step``): stepping aside while another
execution or any reassignment is in progress -- after finishing first a step of the same job
whose process is gone --, and executing a bounded plan with the reassignment engine (journal,
cluster lock, waves, throttles), waiting at most the step's duration bound plus a margin, or
simulating it for a dry run. Each job keeps its own planning, reports and metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kops.errors import EXIT_NOT_DONE, EXIT_OK

MOVED, NOT_DONE, DRY_RUN, STEPPED_ASIDE = "moved", "not_done", "dry_run", "stepped_aside"
#: the wait for a step is its duration bound times this, plus 30 s (catching up new writes, waves)
WAIT_MARGIN = 1.5


def execute_options(*, throttle: int | None, max_moves_per_broker: int | None, max_duration_s: float | None,
                    poll_interval_s: float, origin: str, auto_throttle=None, window=None):
    """The engine's options of a cron step: waits for the step, at most its duration bound
    (x :data:`WAIT_MARGIN` + 30 s); ``origin`` marks its executions in the journal as this job's;
    ``auto_throttle``: ``--throttle auto``'s bounds (``throttle`` is then its minimum, which the
    step's duration bound is planned at); ``window``: the step's maintenance windows (an
    adaptive throttle drops to its minimum once they close)."""
    from kops.ops import reassign

    return reassign.ExecuteOptions(throttle=throttle, auto_throttle=auto_throttle, window=window,
                                   max_moves_per_broker=max_moves_per_broker, wait=True,
                                   timeout_s=(max_duration_s * WAIT_MARGIN + 30) if max_duration_s else None,
                                   poll_interval_s=poll_interval_s, origin=origin)


@dataclass
class Busy:
    """Why a cron step must not start one of its own: ``reason`` (another execution, a
    reassignment in progress), or ``resumed``: the outcome of this job's earlier step, which
    this run finished instead (an :class:`kops.ops.reassign.Outcome`)."""

    reason: str | None = None
    resumed: Any | None = None


def busy(conn, opts, *, dry_run: bool, reporter=None) -> Busy | None:
    """None when the cluster is free for a step of ``opts.origin``'s job. An execution of this
    job whose process is gone is resumed (not on a dry run) within the bound of ``opts``."""
    from kops.cluster.topology import list_reassignments
    from kops.ops.leader_rebalance import kops_execution_in_progress
    from kops.placement.leadership import tp_str

    holder = kops_execution_in_progress(conn)
    if holder:
        left = resume_own(conn, opts, reporter) if not dry_run else None
        if left is None:
            return Busy(reason=f"a kops execution is in progress: {holder}")
        return Busy(resumed=left)
    ongoing = list_reassignments(conn)
    if ongoing:
        eg = ", ".join(tp_str(tp) for tp in sorted(ongoing)[:3])
        return Busy(reason=f"{len(ongoing)} partitions are being reassigned (e.g. {eg})")
    return None


def resume_own(conn, opts, reporter=None):
    """Resume the unfinished execution an earlier step of ``opts.origin``'s job left (its
    process gone); None when the execution in progress is someone else's (or still has a live
    owner)."""
    from kops.ops import journal
    from kops.ops import reassign
    from kops.ops.lock import LockHeld

    topo = reassign.cluster_identity(conn)
    store = journal.JournalStore(conn, reassign.cluster_id_of(topo))
    j = reassign.find_journal(store, unfinished_only=True)
    if j is None or (j.options or {}).get("origin") != opts.origin:
        return None
    try:
        return reassign.resume(conn, opts, execution_id=j.id, reporter=reporter)
    except LockHeld:
        return None  # its owner is alive: that run is still driving it


@dataclass
class Ran:
    """What executing a step's plan gave: ``moved`` (finished), ``not_done`` (with the
    engine's message), ``stepped_aside`` (another kops took the cluster lock first: nothing
    changed, ``reason`` names it) or ``dry_run`` (simulated: the waves, throttles, bytes and
    disks)."""

    status: str
    exit_code: int
    reason: str | None
    execution: dict[str, Any] | None


def execute(conn, plan, opts, *, dry_run: bool, reporter=None) -> Ran:
    """Validate the whole plan against the cluster (disk at the peak, health: writes nothing),
    then simulate it (``dry_run``) or execute it with the reassignment engine and wait.

    Two cron hosts firing at once both find the cluster free (:func:`busy`) and plan; the one
    whose engine takes the cluster lock second steps aside (exit 0, nothing changed: the lock is
    the engine's first write), as it would have had it looked a moment later."""
    from kops.ops import reassign
    from kops.ops.lock import LockHeld, describe_holder

    try:
        prepared = reassign.prepare(conn, plan, opts)  # (refuses first when another execution is active)
        if dry_run:
            from kops.ops.dryrun import simulate

            return Ran(DRY_RUN, EXIT_OK, None, simulate(prepared, opts))
        outcome = reassign.start(conn, prepared, opts, reporter=reporter)
    except LockHeld as e:
        return Ran(STEPPED_ASIDE, EXIT_OK, f"another kops took the cluster lock first: {describe_holder(e.holder)}",
                   None)
    if outcome.exit_code == EXIT_OK and outcome.finished:
        return Ran(MOVED, EXIT_OK, None, outcome.to_dict())
    return Ran(NOT_DONE, outcome.exit_code or EXIT_NOT_DONE, outcome.message, outcome.to_dict())
