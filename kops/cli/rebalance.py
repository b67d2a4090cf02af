"""``kops rebalance step | pause | unpause | status``: unattended replica rebalancing for cron.

Thin commands: parse, call :mod:`kops.ops.replica_rebalance` / :mod:`kops.ops.maintenance`,
render. Heavy imports stay inside the command bodies.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kops.cli import params
from kops.cli.common import (
    Context,
    cluster_command,
    emit_json,
    err_console,
    handle_errors,
)
from kops.cli.params import CapacityFileOpt, GoalsOpt

app = typer.Typer(
    help="Unattended replica rebalancing: one bounded, rack-safe step per cron run that converges to "
    "`plan rebalance`'s balance; pause kops' cron jobs for maintenance.",
    no_args_is_help=True,
)

BOUNDS = params.CronBounds("step", "reorders of leaders are free", "the step")


@app.command()
@handle_errors
@cluster_command
def step(
    c: Context,
    max_moves: BOUNDS.moves = 10,
    max_bytes: BOUNDS.bytes = None,
    max_duration: BOUNDS.duration = None,
    throttle: BOUNDS.throttle = 50 * 1024 * 1024,
    balance_threshold: Annotated[
        float, typer.Option("--balance-threshold", click_type=params.number(0.0, 1000.0),
                            help="The balance goals' band: a broker within this percentage of the mean disk use, "
                                 "network-in or leaders' bytes-in (or within its largest partition of it) is "
                                 "balanced (data keeps arriving; 10 = as `plan rebalance`).")
    ] = 10.0,
    max_moves_per_broker: params.CronMovesPerBrokerOpt = 2,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Plan the step and report it; change nothing.")] = False,
    metrics_file: params.MetricsFileOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print the step's plan too.")] = False,
    goals: GoalsOpt = None,
    sample_seconds: Annotated[
        float | None,
        typer.Option("--sample-seconds", click_type=params.seconds(lo=1, hi=3600), metavar="N",
                     help="Measure each partition's bytes-in over N seconds before planning (as `cluster "
                          "describe --sample-seconds`): network-in goals and limits need it."),
    ] = None,
    capacity_file: CapacityFileOpt = None,
    window: params.WindowOpt = None,
    topics: params.TopicsRegexOpt = None,
    exclude_topics: params.ExcludeTopicsOpt = None,
) -> None:
    """The cron job: one bounded, rack-safe replica rebalancing step.

    Plans like `kops plan rebalance` (its default goal set: rack safety and capacity, then replica
    counts, disk use, topic spread, leaders, first followers, network-in and leaders' bytes-in
    where rates are known), cut to --max-moves / --max-bytes / --max-duration at --throttle, and
    executes it with the reassignment engine (journal, cluster lock, waves, throttles lifted at
    the end). A step that would leave a goal worse without a higher goal forcing it is refused.
    Repeated runs converge to the one-shot plan's balance; a run with nothing to move says
    `balanced` (every goal within its band, or as near as a move can bring it).
    --topics / --exclude-topics: only the topics kept are moved and balanced (the health check
    still covers every topic); the JSON report names those left out.
    Steps aside (exit 0, says why) while kops' cron jobs are paused
    (`kops rebalance pause`, or a playbook run), another execution or any reassignment is in
    progress, or the cluster is unhealthy (a broker down; partitions offline, under min ISR or
    under-replicated), and outside --window (saying when the next opens). A step an earlier run
    left unfinished (killed) is finished first.
    Quiet on success: one summary line on stderr.

    Workload-aware: --sample-seconds measures bytes-in, --capacity-file gives capacities and
    --goals orders the goals as for `kops plan`.

    Exit 0 balanced, step done or stepped aside; 3 step not done within its bound (it goes on in
    the cluster; the next run finishes it) or no move fits the bound; 1 failure; 2 bad input.
    """
    from kops.ops import replica_rebalance
    from kops.placement.goals import select_goals
    from kops.placement.topic_filter import TopicFilter

    chosen = select_goals(goals) if goals is not None else None  # checked before connecting (None: the default)
    capacities = params.read_capacities(capacity_file)
    bounds = replica_rebalance.StepBounds(max_moves=max_moves, max_bytes=max_bytes, max_duration_s=max_duration,
                           threshold_pct=balance_threshold)
    from kops.ops.reassign.options import ExecuteOptions  # --throttle auto: planned and bounded at its minimum

    res = None
    try:
        with c.connection() as conn:
            reporter = None
            if verbose and not c.json:
                from kops.cli.progress import make_reporter

                reporter = make_reporter()
            res = replica_rebalance.step(conn, bounds=bounds, **ExecuteOptions.rate(throttle), dry_run=dry_run,
                          max_moves_per_broker=max_moves_per_broker, reporter=reporter, goals=chosen,
                          sample_seconds=sample_seconds, capacities=capacities, window=window,
                          topics=TopicFilter.of(topics, exclude_topics))
    finally:
        if metrics_file and res is not None:
            replica_rebalance.write_metrics(metrics_file, res)
    if c.json:
        emit_json(res.to_dict())
    else:
        if (verbose or dry_run or res.exit_code) and res.plan is not None and res.plan.get("partitions"):
            import json

            err_console().print(json.dumps(res.plan), markup=False, highlight=False, soft_wrap=True)
        typer.echo(res.summary(), err=True)  # one unwrapped line (cron logs, grep)
    raise typer.Exit(res.exit_code)


@app.command()
@handle_errors
@cluster_command
def pause(
    c: Context,
    for_: Annotated[
        float, typer.Option("--for", click_type=params.seconds(1.0, 7 * 86400.0),
                            help="How long (e.g. 4h; at most 7d): the pause ends by itself then.")
    ] = 4 * 3600.0,
    reason: Annotated[str, typer.Option("--reason", help="Shown by every job that steps aside.")] = "maintenance",
) -> None:
    """Pause kops' cron jobs (`rebalance step`, `leader rebalance`) on this cluster for a
    maintenance window: they step aside (exit 0, saying why) until `unpause` or the end of
    --for. The pause is a record in the cluster (topic __kops_journal), seen from every host."""
    from kops.ops import maintenance

    with c.connection() as conn:
        p = maintenance.pause(conn, reason=reason, duration_s=for_)
    if c.json:
        emit_json({"paused": True, **p.to_dict()})
    else:
        typer.echo(f"kops' cron jobs {p.describe()}", err=True)


@app.command()
@handle_errors
@cluster_command
def unpause(
    c: Context,
) -> None:
    """Lift the pause (whoever set it); the next cron runs work again."""
    from kops.ops import maintenance

    with c.connection() as conn:
        p = maintenance.unpause(conn)
    if c.json:
        emit_json({"paused": False, "lifted": p.to_dict() if p else None})
    else:
        typer.echo("pause lifted: " + p.describe() if p else "no pause was active", err=True)


@app.command()
@handle_errors
@cluster_command
def status(
    c: Context,
) -> None:
    """Whether kops' cron jobs are paused on this cluster (exit 0 running, 3 paused)."""
    from kops.ops import maintenance

    with c.connection() as conn:
        p = maintenance.current(conn)
    if c.json:
        emit_json({"paused": p is not None, **(p.to_dict() if p else {})})
    else:
        typer.echo(f"kops' cron jobs are {p.describe()}" if p else "kops' cron jobs are not paused", err=True)
    raise typer.Exit(3 if p else 0)
