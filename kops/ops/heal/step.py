"""``kops heal step``: one bounded self-healing run, for cron every few minutes.

Each run:

1. reads the cluster's metadata (configs only when it acts; sizes too, or every run when disks
   are watched: ``--disk-threshold``) and heal's memory
   (:mod:`kops.ops.heal.memory`, in the cluster);
2. observes the anomalies (:func:`kops.ops.heal.anomalies.observe`; topics matching
   ``--exclude-topics`` are neither watched nor moved) and merges them into the memory: the time
   each was first seen is kept across runs and hosts;
3. looks whether it may move anything: not while kops' cron jobs are paused (an operator's
   ``rebalance pause`` or a playbook run), the KRaft metadata quorum is at risk
   (:func:`quorum_blocks`), another kops execution holds the lock or any
   reassignment runs (:mod:`kops.ops.cron`; an execution an earlier heal step left behind, its
   process gone, is finished first);
4. decides (:func:`kops.ops.heal.decide.decide`): grace, outage, no ISR, ``--fix``;
5. plans the one fix with the existing planner (the decommission of the dead brokers, forced
   moves only; rack repairs; add-brokers), bounded like ``rebalance step`` (``--max-moves``,
   ``--max-bytes``, ``--max-duration`` at ``--throttle``: :func:`kops.ops.replica_rebalance.plan_step`),
   and executes it with the reassignment engine exactly as ``rebalance step`` does
   (:func:`kops.ops.cron.execute`: journal, lock, waves, throttles, disk check at the peak);
6. writes the memory back (only what changed; a dry run writes nothing) and reports one line,
   a JSON document and Prometheus textfile metrics.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from dataclasses import dataclass, field
from typing import Any

from kops.errors import EXIT_FAILURE, EXIT_NOT_DONE, EXIT_OK, BadInput, ClusterError, KopsError
from kops.ops import metrics
from kops.ops.cron import DRY_RUN, MOVED, NOT_DONE, STEPPED_ASIDE
from kops.ops.heal.anomalies import FIXING, IN_GRACE, KINDS, REFUSED, Anomaly, iso
from kops.ops.heal.decide import Settings
from kops.ops.metrics import GaugeSpec
from kops.ops.replica_rebalance import StepBounds

#: what marks an execution as a heal step's (in the journal's options)
ORIGIN = "heal-step"
NOTHING, WATCHING, REFUSED_RUN = "nothing_to_do", "watching", "refused"
STATES = (IN_GRACE, FIXING, REFUSED)


@dataclass
class HealResult:
    status: str
    exit_code: int
    settings: Settings
    bounds: StepBounds
    throttle: int | None
    anomalies: list[Anomaly] = field(default_factory=list)
    #: anomalies that ended this run (fixed, cleared)
    ended: list[Anomaly] = field(default_factory=list)
    reason: str | None = None
    fix: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    replicas_moved: int = 0
    bytes_moved: int | None = None
    estimated_s: float | None = None
    #: replica moves the fix still needs after this run (None: not known)
    moves_left: int | None = None
    held_back: list[str] = field(default_factory=list)
    execution: dict[str, Any] | None = None
    records_written: int = 0
    #: what went wrong beside the run's work (heal's memory not saved)
    notes: list[str] = field(default_factory=list)
    now: float = field(default_factory=time.time)
    duration_s: float = 0.0

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for a in self.anomalies:
            out[a.state] = out.get(a.state, 0) + 1
        return out

    def summary(self) -> str:
        d = f"{self.duration_s:.1f} s"
        what = "; ".join(f"{a.subject}: {a.kind} ({a.state})" for a in self.anomalies[:4])
        if len(self.anomalies) > 4:
            what += f"; and {len(self.anomalies) - 4} more"
        ended = "; ".join(f"{a.subject}: {a.kind} {a.state}" for a in self.ended[:3])
        tail = "".join(f"; {x}" for x in (what, ended, *self.notes) if x)
        if self.status == NOTHING:
            return f"heal step: nothing to do{tail}; {d}"
        if self.status in (WATCHING, STEPPED_ASIDE, REFUSED_RUN):
            why = f": {self.reason}" if self.reason else ""
            label = {WATCHING: "watching", STEPPED_ASIDE: "stepped aside", REFUSED_RUN: "nothing moved"}[self.status]
            return f"heal step: {label}{why}{tail}; {d}"
        if self.fix is None:  # this run finished an earlier step's execution instead
            return f"heal step: {self.reason}{tail}; {d}"
        mb = f", {self.bytes_moved / 1048576:.1f} MiB" if self.bytes_moved is not None else ""
        left = f"; {self.moves_left} replica moves left" if self.moves_left else ""
        fix = (self.fix or {}).get("what", "")
        if self.status == DRY_RUN:
            return f"heal step (dry run): would move {self.replicas_moved} replicas{mb} to {fix}{left}{tail}; {d}"
        if self.status == NOT_DONE:
            return f"heal step: not done: {self.reason}{tail}; {d}"
        return f"heal step: moved {self.replicas_moved} replicas{mb} to {fix}{left}{tail}; {d}"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": self.status,
            "exit_code": self.exit_code,
            "summary": self.summary(),
            "settings": self.settings.to_dict(),
            "bounds": {k: v for k, v in self.bounds.to_dict().items() if k != "balance_threshold_pct"},
            "throttle": self.throttle,
            "anomalies": [a.to_dict(self.now) for a in self.anomalies],
            "ended": [a.to_dict() for a in self.ended],
            "counts": self.counts(),
            "replicas_moved": self.replicas_moved,
            "bytes_moved": self.bytes_moved,
            "estimated_seconds": None if self.estimated_s is None else round(self.estimated_s, 1),
            "moves_left": self.moves_left,
            "records_written": self.records_written,
            "duration_s": round(self.duration_s, 3),
        }
        for key in ("reason", "fix", "plan", "execution"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        if self.held_back:
            d["held_back"] = self.held_back
        if self.notes:
            d["notes"] = self.notes
        return d


def check(settings: Settings, bounds: StepBounds, throttle: int | None) -> None:
    """What can be judged before connecting (exit 2, nothing changed)."""
    problems = []
    if settings.broker_grace_s < 0:
        problems.append(f"--broker-grace must be >= 0 s (got {settings.broker_grace_s:g})")
    if settings.max_dead_brokers < 0:
        problems.append(f"--max-dead-brokers must be >= 0 (got {settings.max_dead_brokers})")
    bad = sorted(set(settings.fix) - set(_fixable()))
    if bad:
        problems.append(f"--fix: {', '.join(bad)} cannot be fixed by heal; one or more of {', '.join(_fixable())}")
    if bounds.max_moves is not None and bounds.max_moves < 1:
        problems.append("--max-moves must be >= 1 for a step that moves anything")
    if bounds.max_duration_s is not None and not throttle:
        problems.append("--max-duration needs --throttle (the copy time is estimated at the throttle)")
    if problems:
        if len(problems) == 1:
            raise BadInput(problems[0])
        raise BadInput(f"{len(problems)} problems", details=problems)


def _fixable() -> tuple[str, ...]:
    from kops.ops.heal.anomalies import FIXABLE

    return FIXABLE


def step(conn, *, settings: Settings, bounds: StepBounds, throttle: int | None, exclude: re.Pattern[str] | None = None,
         dry_run: bool = False, max_moves_per_broker: int | None = 2, poll_interval_s: float = 2.0,
         reporter=None, now: float | None = None, notify_command: str | None = None, window=None,
         auto_throttle=None, capacities=None) -> HealResult:
    """One cron run (see the module doc). ``notify_command``: run for each anomaly new, changed
    or ended in this run, last of all (:mod:`kops.ops.heal.notify`; not on a dry run).
    ``window``: maintenance windows (:mod:`kops.inputs.window`): outside them only urgent fixes
    are made; anomalies are watched and remembered at any hour. ``auto_throttle``: ``--throttle
    auto``'s bounds, the executions' adaptive throttle (``throttle`` is its minimum).
    ``capacities``: a read capacity file (:mod:`kops.inputs.capacity`), for the disk threshold
    (``settings.disk_threshold``) and the fixes' plans."""
    from kops.cluster.topology import ReadOptions, read_topology
    from kops.ops import cordon, cron, maintenance, reassign
    from kops.ops.heal import anomalies, decide, memory

    t0 = time.monotonic()
    check(settings, bounds, throttle)
    reassign.cluster_identity(conn)  # reachable at all? (an unreachable cluster is named as such, at once)
    # what detection needs is the metadata (brokers, racks, replicas, ISR) and each broker's log
    # dirs (a failed disk: one DescribeLogDirs round asking for no partition): every run pays for
    # them; configs are read only when a fix is planned, sizes too unless disks are watched
    # (--disk-threshold)
    disks = settings.disk_threshold is not None
    topo = _with(read_topology(conn, ReadOptions(with_configs=False, with_sizes=True, size_topics=None if disks else (),
                                                 with_reassignments=False)), capacities)
    mem = memory.load(conn)
    cordons = cordon.read(conn)  # (its own small topic; none at all on a cluster never cordoned)
    topo = cordon.with_cordons(topo, cordons)
    remembered_before = dict(mem.anomalies)
    now = time.time() if now is None else now
    racks = anomalies.racks_seen(topo, mem.racks)
    observed = anomalies.observe(topo, racks, max_dead_brokers=settings.max_dead_brokers, exclude=exclude,
                                 disk_threshold=settings.disk_threshold)
    remembered = anomalies.remember(observed, mem.anomalies, now)
    res = HealResult(NOTHING, EXIT_OK, settings, bounds, throttle, ended=remembered.ended, now=now)
    if disks and (unjudged := anomalies.disk_use(topo).note()):
        res.notes.append(unjudged)

    blocked = None
    paused = maintenance.current(conn)
    opts = cron.execute_options(throttle=throttle, max_moves_per_broker=max_moves_per_broker,
                                max_duration_s=bounds.max_duration_s, poll_interval_s=poll_interval_s, origin=ORIGIN,
                                auto_throttle=auto_throttle)
    if paused is not None:
        blocked = f"kops' cron jobs are {paused.describe()}"
    elif (quorum := quorum_blocks(conn)) is not None:
        blocked = quorum
    else:
        occupied = cron.busy(conn, opts, dry_run=dry_run, reporter=reporter)
        if occupied is not None and occupied.reason:
            blocked = occupied.reason
        elif occupied is not None:
            left = occupied.resumed
            res.execution = left.to_dict()
            blocked = f"this run finished an earlier heal step's execution first ({left.message})"
            if left.exit_code != EXIT_OK:
                res.exit_code = left.exit_code
    closed = window.closed_reason(datetime.fromtimestamp(now, timezone.utc)) if window is not None else None
    decision = decide.decide(remembered.current, settings=settings, now=now, blocked=blocked, closed=closed)
    res.anomalies = decision.anomalies
    res.exit_code = _worse(res.exit_code, decision.exit_code)
    res.reason = decision.reason

    def persist(last: dict[str, Any] | None) -> None:
        """Write what changed in the memory (never on a dry run)."""
        if dry_run:
            return
        kept = [*res.anomalies, *res.ended, *remembered.history]
        try:
            res.records_written += memory.save(conn, memory.changes(mem, memory.records(kept, racks, last, now)), mem)
        except ClusterError as e:
            # e.g. the journal topic under its min.insync.replicas in an outage: what was seen is
            # still reported; unsaved first-seen times only make the grace start again (safe)
            res.notes.append(f"heal's memory was not saved ({e.message}): this run's first-seen times are lost "
                             "and graces start again")
            res.exit_code = _worse(res.exit_code, EXIT_NOT_DONE)

    if decision.fix is not None:
        _fix(conn, res, decision.fix, racks, exclude, opts, dry_run=dry_run, reporter=reporter,
             before_executing=lambda: persist(mem.last_run), capacities=capacities)
    res.status = _status(res, decision, blocked or closed)
    res.duration_s = time.monotonic() - t0  # the recorded summary's duration (the run's own is set last)
    persist({"at": iso(now), "status": res.status, "exit_code": res.exit_code, "summary": res.summary()})
    if notify_command and not dry_run:
        from kops.ops.heal import notify

        res.notes.extend(notify.notify(notify_command, notify.events(remembered_before, [*res.anomalies, *res.ended],
                                                                     now)))
    res.duration_s = time.monotonic() - t0
    return res


def quorum_blocks(conn) -> str | None:
    """Why no data may move because of the KRaft metadata quorum, or None. Moving data changes
    metadata on every move; with no leader, no majority in sync, or a majority that one more lost
    controller would break (:func:`kops.health.quorum_findings`: critical or problem), heal
    waits, as ``rebalance step`` does. A quorum that cannot be described blocks too: automation
    does not move data it cannot see the controllers of. ZooKeeper clusters have no quorum."""
    from kops.cluster.topology import read_quorum
    from kops.health import WARNING, quorum_findings

    if conn.cluster_mode() != "kraft":
        return None
    try:
        q = read_quorum(conn)
    except ClusterError as e:
        return f"the KRaft metadata quorum could not be described ({e.message})"
    bad = [f for f in quorum_findings(q) if f.severity != WARNING]
    return f"the KRaft metadata quorum is unwell: {bad[0].message}" if bad else None


def _with(topo, capacities):
    """``topo`` with a capacity file's capacities (where one was given)."""
    return topo.with_capacities(capacities) if capacities else topo


def _worse(a: int, b: int) -> int:
    """The exit code of two outcomes: a failure over not-done over ok."""
    rank = {EXIT_OK: 0, EXIT_NOT_DONE: 1, EXIT_FAILURE: 2}
    return max(a, b, key=lambda c: rank.get(c, 3))


def _status(res: HealResult, decision, blocked: str | None) -> str:
    """``blocked``: why no fix could be made now (a pause, an execution, the window closed)."""
    if res.status != NOTHING:  # the fix set it
        return res.status
    if res.execution is not None and blocked is not None:  # an earlier step's execution finished
        return MOVED if res.exit_code == EXIT_OK else NOT_DONE
    if not res.anomalies:
        return NOTHING
    if decision.exit_code != EXIT_OK:
        return REFUSED_RUN
    if blocked is not None and any(a.state == REFUSED and a.why and a.why.startswith("waits: ") for a in res.anomalies):
        return STEPPED_ASIDE
    return WATCHING


def _fix(conn, res: HealResult, fix, racks, exclude, opts, *, dry_run: bool, reporter, before_executing,
         capacities=None) -> None:
    """Plan the decision's fix (bounded), execute it, and note it on its anomalies: first as
    started (``before_executing`` saves the memory, so that a run killed while it moves data
    leaves its fix in the history), then with what it did."""
    from kops.ops import cordon, cron, reassign
    from kops.ops.heal import anomalies, decide
    from kops.ops.replica_rebalance import plan_step
    from kops.placement.balancer import plan
    from kops.placement.repair import OnlyCordonedRoom

    mine = [a for a in res.anomalies if a.key in fix.keys]
    res.fix = fix.to_dict()
    sized = _with(cordon.apply(conn, reassign.read(conn, sizes=True)), capacities)
    scope = decide.planning_topology(anomalies.without_topics(sized, exclude), racks, fix)
    res.held_back = list(scope.held_back[:50])
    try:
        planned, est, fits = plan_step(scope.topology, res.bounds, res.throttle, fix.goals, goal=fix.goal,
                                       rebalance=fix.rebalance, disk_threshold=res.settings.disk_threshold)
    except BadInput as e:  # the goal cannot be met (e.g. not enough brokers left for an RF)
        why = e.message
        if fix.kind == anomalies.LOG_DIR_FAILURE and isinstance(e, OnlyCordonedRoom):
            # the broker itself (cordoned while its dir is mended) is the only rack-safe place left
            why = (f"{e.topic}-{e.partition} needs a new replica, and no other broker can take it rack-safely. "
                   "Replace the disk, or take the failed dir out of the broker's log.dirs, and restart the "
                   "broker: Kafka then re-creates its replicas in its dirs that work")
        _not_done(res, mine, f"the planner cannot {fix.describe()}: {why}", EXIT_NOT_DONE)
        return
    res.plan = planned.plan.to_dict()
    res.estimated_s = est
    res.replicas_moved = int(planned.report.get("replicas_moved") or 0)
    res.bytes_moved = planned.report.get("bytes_moved")
    if not fits:
        _not_done(res, mine, f"no replica move fits within --max-duration {res.bounds.max_duration_s:g} s at the "
                  "throttle (raise the bound or the throttle); nothing was changed", EXIT_NOT_DONE)
        return
    if not planned.changes:
        why = "the planner finds nothing it may move" + (f" ({scope.held_back[0]}"
                                                         + (f", and {len(scope.held_back) - 1} more" if len(scope.held_back) > 1 else "")
                                                         + ")" if scope.held_back else "")
        _not_done(res, mine, why, EXIT_NOT_DONE)
        return
    try:
        limit = {} if res.settings.disk_threshold is None else {"disk_threshold": res.settings.disk_threshold}
        full = plan(planned.topology_after(scope.topology), fix.goal, compare_kafka=False, rebalance=fix.rebalance,
                    goals=fix.goals, **limit)
        res.moves_left = int(full.report.get("replicas_moved") or 0)
    except BadInput:
        res.moves_left = None
    if not dry_run:
        entry = {"at": iso(res.now), "at_ts": res.now, "execution_id": None, "replicas_moved": res.replicas_moved,
                 "bytes_moved": res.bytes_moved, "status": "started", "goal": fix.goal.to_dict()}
        for a in mine:
            a.add_fix(entry)
        before_executing()
    try:
        ran = cron.execute(conn, planned.plan, opts, dry_run=dry_run, reporter=reporter)
    except KopsError as e:  # the engine's preflight refused it (health, disk), or the execution failed
        _not_done(res, mine, f"the reassignment engine stopped the step: {e.message}",
                  e.exit_code if e.exit_code != EXIT_OK else EXIT_FAILURE)
        for a in [] if dry_run else mine:
            a.fixes[-1]["status"] = "failed"
        return
    if ran.status == STEPPED_ASIDE:  # another kops took the cluster first: nothing changed
        res.status, res.reason = STEPPED_ASIDE, ran.reason
        for a in mine:
            if not dry_run:
                a.fixes.pop()  # (the entry "started" above: this run started nothing)
            a.state, a.why = REFUSED, f"waits: {ran.reason}"
        return
    res.status, res.execution = ran.status, ran.execution
    if ran.exit_code != EXIT_OK:
        res.exit_code, res.reason = _worse(res.exit_code, ran.exit_code), ran.reason
    if dry_run:
        return
    for a in mine:
        a.fixes[-1].update(execution_id=(ran.execution or {}).get("execution_id"), status=ran.status)
        if ran.status == NOT_DONE:
            a.why = f"{fix.describe()}: not done yet ({ran.reason})"


def _not_done(res: HealResult, mine: list[Anomaly], why: str, code: int) -> None:
    res.status, res.reason = NOT_DONE, why
    res.exit_code = _worse(res.exit_code, code)
    for a in mine:
        a.state, a.why = REFUSED, why


# ------------------------------------------------------------------------------------------
# Prometheus textfile metrics
# ------------------------------------------------------------------------------------------


def gauges(res: HealResult, *, now: float | None = None) -> list[GaugeSpec]:
    """The step's textfile metrics (``--metrics-file``); operators' alerts read these names."""
    counts: dict[tuple[str, str], int] = {(k, s): 0 for k in KINDS for s in STATES}
    oldest: dict[str, float] = dict.fromkeys(KINDS, 0.0)
    for a in res.anomalies:
        counts[(a.kind, a.state)] = counts.get((a.kind, a.state), 0) + 1
        oldest[a.kind] = max(oldest.get(a.kind, 0.0), a.age(res.now))
    return [
        GaugeSpec("kops_heal_step_anomalies", "Anomalies seen by the last run, by kind and state.",
                  [({"kind": k, "state": s}, n) for (k, s), n in sorted(counts.items())], labels=("kind", "state")),
        GaugeSpec("kops_heal_step_oldest_anomaly_seconds", "Age of the oldest current anomaly of each kind (0: none).",
                  [({"kind": k}, round(v, 1)) for k, v in sorted(oldest.items())], labels=("kind",)),
        GaugeSpec.single("kops_heal_step_replicas_moved", "Replicas moved by the last run.", res.replicas_moved
                         if res.status == MOVED else 0),
        GaugeSpec.single("kops_heal_step_bytes_moved", "Bytes moved by the last run (0 when sizes are unknown).",
                         (res.bytes_moved or 0) if res.status == MOVED else 0),
        GaugeSpec.single("kops_heal_step_moves_left", "Replica moves the fix still needs after the last run (-1 unknown).",
                         -1 if res.moves_left is None else res.moves_left),
        GaugeSpec.single("kops_heal_step_stepped_aside", "1 when the last run stepped aside (pause, execution).",
                         1 if res.status == STEPPED_ASIDE else 0),
        GaugeSpec.single("kops_heal_step_exit_code", "Exit code of the last run.", res.exit_code),
        GaugeSpec.single("kops_heal_step_duration_seconds", "Duration of the last run.", round(res.duration_s, 3)),
        GaugeSpec.single("kops_heal_step_last_run_timestamp_seconds", "Unix time the last run ended.",
                         round(now if now is not None else time.time(), 3)),
    ]


def write_metrics(path: str, res: HealResult) -> None:
    metrics.write_textfile(path, gauges(res))


# ------------------------------------------------------------------------------------------
# heal status
# ------------------------------------------------------------------------------------------


@dataclass
class Status:
    """What heal remembers: current anomalies, the history (ended ones), the last run."""

    current: list[Anomaly]
    history: list[Anomaly]
    last_run: dict[str, Any] | None
    unreadable: list[str]
    now: float

    @property
    def exit_code(self) -> int:
        return EXIT_NOT_DONE if self.current else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        return {"anomalies": [a.to_dict(self.now) for a in self.current],
                "history": [a.to_dict() for a in self.history],
                "last_run": self.last_run, "unreadable_records": self.unreadable, "exit_code": self.exit_code}


def status(conn, *, now: float | None = None) -> Status:
    """Heal's memory as the last step left it (read-only)."""
    from kops.ops.heal import memory

    mem = memory.load(conn)
    found = sorted(mem.anomalies.values(), key=lambda a: (a.first_seen, a.key))
    return Status([a for a in found if a.active], [a for a in found if not a.active], mem.last_run, mem.unreadable,
                  time.time() if now is None else now)
