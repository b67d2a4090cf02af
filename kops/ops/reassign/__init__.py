"""Reassignment orchestration: execute (in waves, throttled, journaled), verify, cancel,
resume, list.

Everything that changes the cluster goes through here (AlterPartitionReassignments via
kafka-python) or :mod:`kops.ops.throttle`; the topology is read only through
:mod:`kops.cluster.topology`; waiting goes through :func:`kops.ops.progress.poll`.

Where things are (each module has one job; this package re-exports the public names):

* :mod:`.options` — :class:`ExecuteOptions` and the engine's timing constants
* :mod:`.status` — pure helpers, unit-tested without a cluster: :func:`next_wave`,
  :func:`health_problems`, :func:`log_dir_states`, :func:`settle`, :func:`partition_statuses`
* :mod:`.admin` — cluster access: read, ongoing reassignments, submit (Admin API or ZooKeeper),
  log-dir moves
* :mod:`.guard` — one execution per cluster: journal store, lock, owners that died
* :mod:`.preflight` — the plan checked against the live cluster (:func:`prepare`)
* :mod:`.outcome` — what an execution ends with (:class:`Outcome`), and why it halted
* :mod:`.runner` — :class:`Runner`, the engine of one journaled execution: a coordinator that
  holds the trackers below, each with its own state and unit tests
* :mod:`.throttle_sync`, :mod:`.log_dirs`, :mod:`.disk_stages`, :mod:`.stall`, :mod:`.lag` — the
  trackers: throttles set and lifted, log-dir moves, the disk check before a later wave, when
  waiting is pointless, metadata trailing the controller; :mod:`.record` — notes, journal
  events and saves
* :mod:`.execution` — :func:`start` and :func:`resume`
* :mod:`.verify_cancel` — :func:`verify`, :func:`cancel`, :func:`list_all`
* :mod:`.watch` — ``reassign list --watch``: each broker's in/out rate for the moves in flight
"""

from __future__ import annotations

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
    WAKE_S,
    WAKE_SOON_S,
    ExecuteOptions,
    HealthStop,
)
from kops.ops.reassign.status import (
    LOG_DIR_DONE,
    LOG_DIR_ELSEWHERE,
    LOG_DIR_MOVING,
    LOG_DIR_WAITING,
    PartitionStatus,
    health_problems,
    log_dir_states,
    next_wave,
    partition_statuses,
    settle,
    status_exit_code,
)
from kops.ops.reassign.admin import (
    BUSY,
    ZK_REASSIGN,
    alter_log_dirs,
    ongoing,
    ongoing_in,
    read,
    submit,
    submit_zk,
    zk_reassign_pending,
)
from kops.ops.reassign.guard import (
    cluster_id_of,
    cluster_identity,
    find_journal,
    lock_stale_without_journal,
    raise_held,
    refuse_if_active,
)
from kops.ops.reassign.outcome import Outcome
from kops.ops.reassign.preflight import Prepared, prepare
from kops.ops.reassign.runner import Runner
from kops.ops.reassign.execution import resume, start
from kops.ops.reassign.verify_cancel import CancelResult, VerifyResult, cancel, list_all, verify

__all__ = [
    "BUSY", "ENDING_SOON_S", "FRESH_S", "HALT_DISK", "HALT_HEALTH", "LAG_RECHECK_EVERY_S",
    "LAG_RECHECK_S", "LIFT_ATTEMPTS", "LIFT_DEFER_MAX_S", "LOG_DIR_DONE", "LOG_DIR_ELSEWHERE",
    "LOG_DIR_MOVING", "LOG_DIR_WAITING", "NO_PROGRESS_S", "SETTLE_S", "WAKE_S", "WAKE_SOON_S",
    "ZK_REASSIGN", "CancelResult", "ExecuteOptions", "HealthStop", "Outcome", "PartitionStatus",
    "Prepared", "Runner", "VerifyResult", "alter_log_dirs", "cancel", "cluster_id_of",
    "cluster_identity", "find_journal", "health_problems", "list_all", "lock_stale_without_journal",
    "log_dir_states", "next_wave", "ongoing", "ongoing_in", "partition_statuses", "prepare",
    "raise_held", "read", "refuse_if_active", "resume", "settle", "start", "status_exit_code",
    "submit", "submit_zk", "verify", "zk_reassign_pending",
]
