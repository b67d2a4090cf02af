"""Unattended replica rebalancing: one bounded, safe step per cron run (``kops rebalance step``).

Each run:

1. steps aside (exit 0, says why) while kops' cron jobs are paused (:mod:`kops.ops.maintenance`,
   a playbook run sets that by itself), another kops execution or any partition reassignment is
   in progress, or the cluster is unhealthy (a broker holding replicas down, partitions offline,
   under min.insync.replicas or under-replicated);
2. finishes first what an earlier step left running (an execution this job started whose
   process is gone: it is resumed within this run's bound);
3. plans with the same planner and goals as ``kops plan rebalance`` (the default goal set:
   rack-safe, minimal movement, replica counts, disk use, topic spread, leaders, first
   followers, network-in and leaders' bytes-in where rates are known), bounded by
   ``max_moves``, ``max_bytes`` and ``max_duration`` at the throttle — a plan whose copy time at
   the throttle would exceed the bound is cut down until it fits, and none starts when no move
   fits;
4. refuses a step that would make any goal of the set worse without a higher goal forcing it
   (the planner's report says, per goal, before / after / why; checked here, not assumed);
5. executes it with the reassignment engine (journal, cluster lock, waves, throttles, disk and
   health checks) and waits at most ``max_duration`` (+ a margin) for it;
6. reports one summary line, a JSON document, and Prometheus textfile metrics.

Repeated runs converge to the balance of a one-shot ``plan rebalance``: each step moves toward
the same target, and a step with nothing to move reports ``balanced``.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kops.errors import EXIT_NOT_DONE, EXIT_OK, BadInput
from kops.model import Topology
from kops.ops import metrics
from kops.ops.cron import DRY_RUN, MOVED, NOT_DONE, STEPPED_ASIDE
from kops.ops.metrics import GaugeSpec

BALANCED = "balanced"
#: what marks an execution as one of this job's steps (in the journal's options)
ORIGIN = "rebalance-step"
#: health findings that make the job step aside (moving data then slows the recovery down)
#: (the KRaft metadata quorum too: no data is moved while one more lost controller would stop
#: the metadata, and with it every reassignment in flight)
UNHEALTHY = ("offline", "under_min_isr", "under_replicated", "broker_down", "quorum_no_leader", "quorum_lost",
             "quorum_at_risk")
#: the balance goals' band: a broker within this percentage of the mean (disk use, network-in,
#: leaders' bytes-in) is balanced (data keeps arriving: without a band every run would find a
#: little to move); the planner's default band
DEFAULT_THRESHOLD_PCT = 10.0
#: a step whose estimate is over its duration bound is planned again with this share of the bytes
SHRINK = 0.5


@dataclass
class StepBounds:
    max_moves: int | None = 10
    max_bytes: int | None = None
    max_duration_s: float | None = None
    #: the balance goals' band, % of the mean (disk use, network-in, leaders' bytes-in)
    threshold_pct: float = DEFAULT_THRESHOLD_PCT

    def to_dict(self) -> dict[str, Any]:
        return {"max_moves": self.max_moves, "max_bytes": self.max_bytes, "max_duration_s": self.max_duration_s,
                "balance_threshold_pct": self.threshold_pct}


@dataclass
class StepResult:
    status: str
    exit_code: int
    bounds: StepBounds
    throttle: int | None
    reason: str | None = None
    #: the bounded plan's report (planner) and the plan itself
    report: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    estimated_s: float | None = None
    #: the execution (reassign engine outcome)
    execution: dict[str, Any] | None = None
    #: replica moves still needed for the full plan's balance after this step (None: not known)
    moves_left: int | None = None
    goals: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: by bytes: the largest distance of a broker from the mean, % of the mean, before the step
    deviation_pct: float | None = None
    duration_s: float = 0.0

    @property
    def replicas_moved(self) -> int:
        return int((self.report or {}).get("replicas_moved") or 0)

    @property
    def bytes_moved(self) -> int | None:
        return (self.report or {}).get("bytes_moved")

    def summary(self) -> str:
        d = f"{self.duration_s:.1f} s"
        left = (self.report or {}).get("topics_left_out")
        if left and left["topics"]:  # balanced means balanced over the topics kept: say so on the line
            d = f"{left['topics']} topics left out by {left['filter']}; {d}"
        if self.status == STEPPED_ASIDE:
            return f"rebalance step: stepped aside: {self.reason}; {d}"
        if self.status == BALANCED:
            band = (f", every broker within {self.deviation_pct:.1f}% of the mean bytes" if self.deviation_pct is not None
                    else "")
            return f"rebalance step: balanced ({_goals_text(self.goals, 'before')}{band}); nothing to move; {d}"
        mb = f", {self.bytes_moved / 1048576:.1f} MiB" if self.bytes_moved is not None else ""
        left = f"; {self.moves_left} replica moves left to balance" if self.moves_left else ""
        if self.status == DRY_RUN:
            est = f", ~{self.estimated_s:.0f} s at the throttle" if self.estimated_s is not None else ""
            return (f"rebalance step (dry run): would move {self.replicas_moved} replicas{mb}{est} "
                    f"({_goals_text(self.goals, 'before')} -> {_goals_text(self.goals, 'after')}){left}; {d}")
        if self.status == NOT_DONE:
            return f"rebalance step: not done: {self.reason}; {d}"
        return (f"rebalance step: moved {self.replicas_moved} replicas{mb} "
                f"({_goals_text(self.goals, 'before')} -> {_goals_text(self.goals, 'after')}){left}; {d}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": self.status,
            "exit_code": self.exit_code,
            "summary": self.summary(),
            "bounds": self.bounds.to_dict(),
            "throttle": self.throttle,
            "replicas_moved": self.replicas_moved,
            "bytes_moved": self.bytes_moved,
            "estimated_seconds": None if self.estimated_s is None else round(self.estimated_s, 1),
            "moves_left": self.moves_left,
            "goals": self.goals,
            "bytes_deviation_pct": None if self.deviation_pct is None else round(self.deviation_pct, 2),
            "duration_s": round(self.duration_s, 3),
        }
        if self.reason:
            d["reason"] = self.reason
        if self.plan is not None:
            d["plan"] = self.plan
        if self.report is not None:
            d["report"] = self.report
        if self.execution is not None:
            d["execution"] = self.execution
        return d


def _goals_text(goals: dict[str, dict[str, Any]], when: str) -> str:
    parts = [f"{g} {v[when]}" for g, v in goals.items() if v.get(when) is not None]
    return ", ".join(parts) or "-"


def goals_of(report: dict[str, Any], goals: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Each soft goal the planner pursued (``goals``, default the planner's default set), in
    priority order, before and after the plan, from its goal report (``report["goals"]``): the
    figure, its bound and status, how far off its band (``off_band_*``), the verdict and, for a
    goal made worse, why and which higher goals forced it. Goals without their data are left out
    (the report says what they need)."""
    from kops.placement.goals import HARD, select_goals

    rep = report.get("goals") or {}
    keys = ("before", "after", "bound", "status", "off_band_before", "off_band_after", "verdict", "why", "forced_by")
    return {g: {k: rep[g][k] for k in keys if k in rep[g]}
            for g in select_goals(goals) if g not in HARD and g in rep and rep[g].get("status") != "unknown"}


def bytes_deviation_pct(topo: Topology) -> float | None:
    """The largest distance of a live broker's bytes from the mean, in percent of the mean (None
    when sizes are unknown or there is no data)."""
    brokers = [b.id for b in topo.brokers if b.alive]
    load = dict.fromkeys(brokers, 0)
    for p in topo.partitions():
        if p.size_bytes is None:
            return None
        for b in p.replicas:
            if b in load:
                load[b] += p.size_bytes
    total = sum(load.values())
    if not brokers or total <= 0:
        return None
    mean = total / len(brokers)
    return 100.0 * max(abs(v - mean) for v in load.values()) / mean


def unhealthy(topo: Topology) -> list[str]:
    """Why the job must step aside for the cluster's health (empty: healthy enough)."""
    from kops.health import check_health

    rep = check_health(topo)
    # brokers down first: they explain the partitions offline or under-replicated after them
    found = sorted((f for f in rep.findings if f.check in UNHEALTHY), key=lambda f: f.check != "broker_down")
    return [f"{f.subject}: {f.message}" for f in found]


def plan_step(topo: Topology, bounds: StepBounds, throttle: int | None, goals: Sequence[str] | None = None, *,
              goal=None, rebalance: bool = True, topics=None, disk_threshold: float | None = None):
    """The bounded plan of one step (pure): ``(PlanResult, estimated seconds, fits)``.

    ``goal``: the planner's goal (default ``rebalance``; ``heal step`` gives a decommission of
    dead brokers); ``rebalance=False``: only the moves the goal forces (as ``plan``);
    ``topics``: the topic filter of the topics it may move (``--topics`` / ``--exclude-topics``,
    as ``plan``); ``disk_threshold``: the planner's hard disk limit (None: its default).

    ``max_duration_s`` at ``throttle`` caps the bytes; when the estimate (busiest broker's
    bytes in or out / throttle, as the planner reports it) is still over the bound, the byte
    budget shrinks until the step fits. ``fits`` is False when not even one data move fits
    within the bound (the plan then moves no data)."""
    from kops.placement.balancer import Goal, plan

    goal = goal or Goal("rebalance")
    limit = {} if disk_threshold is None else {"disk_threshold": disk_threshold}
    max_bytes = bounds.max_bytes
    if bounds.max_duration_s is not None:
        if not throttle:
            raise BadInput("--max-duration needs --throttle (the copy time is estimated at the throttle)")
        by_time = int(throttle * bounds.max_duration_s)
        max_bytes = by_time if max_bytes is None else min(max_bytes, by_time)
    shrunk = False
    band = bounds.threshold_pct / 100
    while True:
        res = plan(topo, goal, max_moves=bounds.max_moves, max_bytes=max_bytes, throttle=throttle,
                   compare_kafka=False, goals=goals, band=band, rebalance=rebalance, topics=topics, **limit)
        est = ((res.report.get("duration") or {}).get("seconds_parallel")) if throttle else None
        moved = res.report.get("replicas_moved") or 0
        if not moved:
            # nothing fits when shrinking ended here, or when the byte budget alone (by time)
            # leaves no move while the unbounded plan has some
            if not shrunk and bounds.max_duration_s is not None:
                shrunk = bool(plan(topo, goal, max_moves=bounds.max_moves, max_bytes=bounds.max_bytes,
                                   compare_kafka=False, goals=goals, band=band, rebalance=rebalance,
                                   topics=topics, **limit).report.get("replicas_moved"))
            return res, est, not shrunk
        if bounds.max_duration_s is None or est is None or est <= bounds.max_duration_s:
            return res, est, True
        # the bound counts the busiest broker: fewer bytes until it fits
        max_bytes = int(min(max_bytes if max_bytes is not None else est * throttle, res.report["bytes_moved"] or 0)
                        * SHRINK)
        shrunk = True


def worse_goals(goals: dict[str, dict[str, Any]]) -> list[str]:
    """The goals a step makes worse (further off their band) without a higher goal forcing it,
    in priority order (``goals_of``). As in Cruise Control's goal priorities a goal may yield to
    a higher one: the planner names the goals before it whose moves made it worse and from which
    its own pass could not get back (``forced_by``); such a goal is marked ``yielded``."""
    bad = []
    for g, v in goals.items():
        if v.get("verdict") != "worse":
            continue
        if v.get("forced_by"):
            v["yielded"] = True
            continue
        bad.append(f"{g} {v['before']} -> {v['after']} ({v.get('off_band_before')} -> {v.get('off_band_after')} "
                   "off its band)")
    return bad


def _step_aside(bounds, throttle, reason: str, t0: float) -> StepResult:
    return StepResult(STEPPED_ASIDE, EXIT_OK, bounds, throttle, reason=reason, duration_s=time.monotonic() - t0)


def step(conn, *, bounds: StepBounds, throttle: int | None, dry_run: bool = False,
         max_moves_per_broker: int | None = 2, poll_interval_s: float = 2.0, reporter=None,
         goals: Sequence[str] | None = None, sample_seconds: float | None = None, capacities=None,
         window=None, now: datetime | None = None, topics=None, auto_throttle=None) -> StepResult:
    """One cron run (see the module doc). ``goals``: as ``plan --goals`` (default: the planner's
    default set; the goals' bands decide what is balanced, ``bounds.threshold_pct`` the balance
    goals' band); ``sample_seconds``: measure each partition's bytes-in first (``cluster describe
    --sample-seconds``); ``capacities``: a read capacity file (``kops.inputs.capacity``);
    ``window``: maintenance windows (:mod:`kops.inputs.window`), judged at ``now`` (default: the
    clock) -- outside them the run steps aside before reading the cluster; ``topics``: a topic
    filter (:class:`kops.placement.topic_filter.TopicFilter`): only its topics are moved, and
    balanced (the health check still covers every topic), the report naming those left out;
    ``auto_throttle``: ``--throttle auto``'s bounds, the execution's adaptive throttle
    (``throttle``, its minimum, is what the step is planned and bounded at)."""
    from kops.ops import cordon, cron
    from kops.ops import maintenance
    from kops.ops import reassign

    t0 = time.monotonic()
    if bounds.max_moves is not None and bounds.max_moves < 1:
        raise BadInput("--max-moves must be >= 1 for a step that moves anything")
    if bounds.max_duration_s is not None and not throttle:
        raise BadInput("--max-duration needs --throttle (the copy time is estimated at the throttle)")
    closed = window.closed_reason(now or datetime.now(timezone.utc)) if window is not None else None
    if closed:
        return _step_aside(bounds, throttle, closed, t0)
    reassign.cluster_identity(conn)  # reachable at all? (an unreachable cluster is named as such, at once)
    paused = maintenance.current(conn)
    if paused is not None:
        return _step_aside(bounds, throttle, f"kops' cron jobs are {paused.describe()}", t0)
    opts = cron.execute_options(throttle=throttle, max_moves_per_broker=max_moves_per_broker,
                                max_duration_s=bounds.max_duration_s, poll_interval_s=poll_interval_s, origin=ORIGIN,
                                auto_throttle=auto_throttle, window=window)
    occupied = cron.busy(conn, opts, dry_run=dry_run, reporter=reporter)
    if occupied is not None and occupied.reason:
        return _step_aside(bounds, throttle, occupied.reason, t0)
    if occupied is not None:
        left = occupied.resumed
        res = StepResult(MOVED if left.exit_code == EXIT_OK else NOT_DONE, left.exit_code, bounds, throttle,
                         reason=None if left.exit_code == EXIT_OK else left.message, execution=left.to_dict())
        res.duration_s = time.monotonic() - t0
        return res
    topo = cordon.apply(conn, reassign.read(conn, sizes=True))  # (cordoned brokers get nothing)
    sick = unhealthy(topo)
    if sick:
        more = f" (and {len(sick) - 3} more)" if len(sick) > 3 else ""
        return _step_aside(bounds, throttle, "the cluster is not healthy: " + "; ".join(sick[:3]) + more, t0)

    if sample_seconds is not None:
        from kops.cluster.sampling import sample_rates

        topo = sample_rates(conn, topo, sample_seconds)
    if capacities is not None:
        topo = topo.with_capacities(capacities)
    chosen = goals
    res_plan, est, fits = plan_step(topo, bounds, throttle, chosen, topics=topics)
    goals = goals_of(res_plan.report, chosen)
    result = StepResult(BALANCED, EXIT_OK, bounds, throttle, report=res_plan.report, plan=res_plan.plan.to_dict(),
                        estimated_s=est, goals=goals)
    result.deviation_pct = bytes_deviation_pct(topo)
    if not fits:
        result.status, result.exit_code = NOT_DONE, EXIT_NOT_DONE
        result.reason = (f"no replica move fits within --max-duration {bounds.max_duration_s:g} s at the throttle "
                         "(raise the bound or the throttle); nothing was changed")
        result.duration_s = time.monotonic() - t0
        return result
    if not res_plan.changes:
        result.duration_s = time.monotonic() - t0
        result.moves_left = 0
        return result
    worse = worse_goals(goals)
    if worse:  # the planner never makes a goal worse unforced: a guard, not a path
        result.status, result.exit_code = NOT_DONE, EXIT_NOT_DONE
        result.reason = "the step would make a goal worse: " + ", ".join(worse) + "; nothing was changed"
        result.duration_s = time.monotonic() - t0
        return result
    result.moves_left = _moves_left(res_plan.topology_after(topo), chosen, bounds, topics)
    ran = cron.execute(conn, res_plan.plan, opts, dry_run=dry_run, reporter=reporter)
    result.status, result.execution = ran.status, ran.execution
    if ran.exit_code != EXIT_OK or ran.status == STEPPED_ASIDE:
        result.exit_code, result.reason = ran.exit_code, ran.reason
    result.duration_s = time.monotonic() - t0
    return result


def _moves_left(topo: Topology, goals: Sequence[str] | None, bounds: StepBounds, topics=None) -> int | None:
    """Replica moves the full (unbounded) plan would still make (of the topics kept)."""
    from kops.placement.balancer import Goal, plan

    try:
        return int(plan(topo, Goal("rebalance"), compare_kafka=False, goals=goals, band=bounds.threshold_pct / 100,
                        topics=topics).report.get("replicas_moved") or 0)
    except BadInput:
        return None


# ------------------------------------------------------------------------------------------
# Prometheus textfile metrics
# ------------------------------------------------------------------------------------------


def gauges(res: StepResult, *, now: float | None = None) -> list[GaugeSpec]:
    """The step's textfile metrics (``--metrics-file``); operators' alerts read these names."""
    return [
        GaugeSpec.single("kops_rebalance_step_replicas_moved", "Replicas moved by the last step.",
                         res.replicas_moved),
        GaugeSpec.single("kops_rebalance_step_bytes_moved", "Bytes moved by the last step (0 when sizes are unknown).",
                         res.bytes_moved or 0),
        GaugeSpec.single("kops_rebalance_step_moves_left",
                         "Replica moves the full plan still needs after the last step (-1 unknown).",
                         -1 if res.moves_left is None else res.moves_left),
        GaugeSpec.single("kops_rebalance_step_balanced", "1 when the last step found nothing to move.",
                         1 if res.status == BALANCED else 0),
        GaugeSpec.single("kops_rebalance_step_stepped_aside",
                         "1 when the last run stepped aside (pause, execution, unhealthy).",
                         1 if res.status == STEPPED_ASIDE else 0),
        GaugeSpec("kops_rebalance_step_goal_spread", "Each goal's spread after the last step (max - min over brokers).",
                  [({"goal": g}, v.get("after") if v.get("after") is not None else v.get("before"))
                   for g, v in res.goals.items()], labels=("goal",)),
        GaugeSpec.single("kops_rebalance_step_bytes_deviation_ratio",
                         "Largest distance of a broker's bytes from the mean, / mean, before the last step (-1 unknown).",
                         -1 if res.deviation_pct is None else round(res.deviation_pct / 100, 4)),
        GaugeSpec.single("kops_rebalance_step_exit_code", "Exit code of the last run.", res.exit_code),
        GaugeSpec.single("kops_rebalance_step_duration_seconds", "Duration of the last run.", round(res.duration_s, 3)),
        GaugeSpec.single("kops_rebalance_step_last_run_timestamp_seconds", "Unix time the last run ended.",
                         round(now if now is not None else time.time(), 3)),
    ]


def write_metrics(path: str, res: StepResult) -> None:
    metrics.write_textfile(path, gauges(res))
