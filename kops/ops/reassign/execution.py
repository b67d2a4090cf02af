"""Starting and resuming executions: the entry points (the guard and the runner do the work)."""

from __future__ import annotations

from kops.errors import EXIT_OK, BadInput
from kops.ops import failpoints
from kops.ops.journal import HALTED, Journal, JournalStore, RUNNING, new_execution_id, owner_identity
from kops.ops.reassign.guard import cluster_id_of, cluster_identity, find_journal, owner_alive, refuse_if_active
from kops.ops.reassign.options import ExecuteOptions
from kops.ops.reassign.outcome import Outcome
from kops.ops.reassign.preflight import Prepared
from kops.ops.reassign.runner import Runner


def start(conn, prepared: Prepared, opts: ExecuteOptions, *, reporter=None) -> Outcome:
    """Journal, lock and run an execution of a validated plan."""
    from kops.ops.lock import ClusterLock

    topo = prepared.topology
    probe = _probe(conn, opts)  # a --probe-topic that does not exist: refused before anything changes
    store = JournalStore(conn, cluster_id_of(topo))
    lock = ClusterLock(conn)
    refuse_if_active(store, lock)
    options = opts.to_dict()
    options["baseline_offline"] = sorted([list(p.tp) for p in topo.partitions() if p.offline])
    journal = Journal(id=new_execution_id(), cluster_id=cluster_id_of(topo), moves=prepared.moves, options=options)
    lock.acquire(journal.id, journal.owner)
    failpoints.reach("execute.lock-taken")
    try:
        journal.event(f"execution created by {journal.owner}; journal in {store.where} and {store.local.dir}")
        store.save(journal)
    except Exception:
        lock.release(journal.id)
        raise
    runner = Runner.after_preflight(conn, store, journal, opts, prepared, reporter=reporter, lock=lock, probe=probe)
    if not runner.work_left:
        runner.finish()
        return Outcome(journal, True, EXIT_OK, "nothing to do: every partition is already at its target",
                       runner.notes)
    return runner.run()



def resume(conn, opts: ExecuteOptions, *, execution_id: str | None = None, reporter=None,
           force: bool = False) -> Outcome:
    """Continue an interrupted (killed, timed-out or halted) execution from its journal."""
    from kops.ops.lock import ClusterLock, LockHeld

    topo = cluster_identity(conn)
    store = JournalStore(conn, cluster_id_of(topo))
    j = find_journal(store, execution_id=execution_id, unfinished_only=execution_id is None)
    if j is None:
        raise BadInput("nothing to resume: no unfinished kops execution on this cluster")
    lock = ClusterLock(conn)
    if j.finished:
        if not j.throttles.empty:
            runner = Runner(conn, store, j, opts.with_journal(j.options), reporter=reporter, lock=lock)
            runner.finish(final_state=j.state)
            return Outcome(j, True, EXIT_OK, f"execution {j.id} was already {j.state}; leftover throttles removed",
                           runner.notes)
        return Outcome(j, True, EXIT_OK, f"execution {j.id} is already {j.state}")
    opts = opts.with_journal(j.options)
    if opts.probe_topic and opts.auto_throttle is None:
        raise BadInput(f"--probe-topic is read by the adaptive throttle, and execution {j.id} runs at a fixed rate: "
                       "give --throttle auto[:MIN-MAX] too")
    probe = _probe(conn, opts) if not j.finished else None
    if not force and owner_alive(j, opts.poll_interval_s):
        raise LockHeld({"execution_id": j.id, "owner": j.owner, "acquired_at": j.created_at})
    holder = lock.holder()
    if holder is not None and holder.get("execution_id") not in (None, j.id):
        raise LockHeld(holder)
    me = owner_identity()
    prev = j.owner
    j.owner = me
    if holder is None:
        lock.acquire(j.id, me)
    else:
        lock.update_owner(j.id, me)
    if j.state == HALTED:
        j.state = RUNNING
    j.event(f"resumed by {me} (previous owner {prev})")
    store.save(j)
    runner = Runner(conn, store, j, opts, reporter=reporter, lock=lock, probe=probe)
    return runner.run()


def _probe(conn, opts: ExecuteOptions):
    """The ``--probe-topic`` latency probe of an adaptive throttle (None: no probe)."""
    if not (opts.probe_topic and opts.auto_throttle):
        return None
    from kops.cluster.probe import LatencyProbe

    return LatencyProbe(conn, opts.probe_topic)


# ------------------------------------------------------------------------------------------
