"""``kops heal step | status``: self-healing from cron.

Thin commands: parse, call :mod:`kops.ops.heal.step`, render. Heavy imports stay inside the
command bodies.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kops.cli import params
from kops.cli.common import Context, cluster_command, emit_json, err_console, handle_errors, out_console

app = typer.Typer(
    help="Self-healing: one bounded run per cron job notices dead brokers (and more), remembers in "
    "the cluster since when, and re-creates their replicas rack-safe once their grace is over.",
    no_args_is_help=True,
)

BOUNDS = params.CronBounds("run", "the next run goes on", "heal")

#: the anomalies ``--fix`` may name (kops.ops.heal.anomalies.FIXABLE; kept here so --help stays light)
FIX_KINDS = ("broker_failure", "log_dir_failure", "rack_unsafe", "new_broker", "unbalanced", "disk_over_threshold")


def _fix_kinds(value: str) -> frozenset[str]:
    from kops.errors import BadInput

    names = [v.strip() for v in value.split(",") if v.strip()]
    if names == ["none"]:
        return frozenset()
    bad = [n for n in names if n not in FIX_KINDS]
    if bad or not names:
        raise BadInput(f"--fix: {'nothing given' if not names else 'unknown kind ' + ', '.join(bad)}; "
                       f"one or more of {', '.join(FIX_KINDS)} (comma-separated), or none")
    return frozenset(names)


@app.command()
@handle_errors
@cluster_command
def step(
    c: Context,
    broker_grace: Annotated[
        float, typer.Option("--broker-grace", click_type=params.seconds(0.0),
                            help="How long a broker holding replicas may be down (or a log dir offline, a new "
                                 "broker empty, a partition rack-unsafe) before heal acts, e.g. 30m; first-seen times are kept "
                                 "in the cluster.")
    ] = 1800.0,
    max_dead_brokers: Annotated[
        int, typer.Option("--max-dead-brokers", click_type=params.count(0),
                          help="More brokers down than this (or every broker of a rack) is an outage: "
                               "reported (exit 3), nothing moved.")
    ] = 1,
    fix: Annotated[
        str, typer.Option("--fix", metavar="KIND,...",
                          help="What is mended automatically: broker_failure, log_dir_failure, rack_unsafe, "
                               "new_broker, unbalanced, disk_over_threshold (or none); the rest is reported.")
    ] = "broker_failure,log_dir_failure",
    exclude_topics: Annotated[
        Any, typer.Option("--exclude-topics", metavar="REGEX", click_type=params.Checked("REGEX", "topic_regex"),
                          help="Topics (whole name matching) heal neither watches nor moves.")
    ] = None,
    max_moves: BOUNDS.moves = 50,
    max_bytes: BOUNDS.bytes = None,
    max_duration: BOUNDS.duration = None,
    throttle: BOUNDS.throttle = 50 * 1024 * 1024,
    max_moves_per_broker: params.CronMovesPerBrokerOpt = 2,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Detect, decide and plan; change nothing (not even "
                                                            "heal's memory).")] = False,
    metrics_file: params.MetricsFileOpt = None,
    notify_command: Annotated[
        str | None, typer.Option("--notify-command", metavar="CMD",
                                 help="Run CMD (a shell command line) for each anomaly that is new, changed state or "
                                      "ended, with it as JSON on stdin; a failing hook is reported, never blocks a fix.")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print the run's plan and anomalies too.")] = False,
    window: params.WindowOpt = None,
    disk_threshold: Annotated[
        float | None,
        typer.Option("--disk-threshold", click_type=params.number(1, 100), metavar="PCT",
                     help="Watch disks: a broker using more than PCT % of its disk is disk_over_threshold, and "
                          "every fix's plan keeps its destinations under it. Each run then reads the log dirs' "
                          "sizes (DescribeLogDirs). Capacity: --capacity-file, else the log dirs' volumes "
                          "(Kafka 3.3+). Default: disks not watched (plans keep the planner's 80 %).")
    ] = None,
    capacity_file: params.CapacityFileOpt = None,
) -> None:
    """The cron job: notice, remember, decide, mend within bounds, report.

    Anomalies: a broker holding replicas that is not registered (broker_failure); a registered
    broker reporting log dirs offline, a failed JBOD disk (log_dir_failure: the replicas they
    held are re-created on other brokers, own rack first); more brokers
    down than --max-dead-brokers or a whole rack down (too_much_down: an outage, nothing is
    moved, exit 3); partitions with no in-sync replica (never fixed by moving data: exit 3, see
    docs/self-healing.md for the unclean-election runbook); registered brokers without replicas
    (new_broker); rack-unsafe partitions (rack_unsafe); replica counts or preferred leaders
    per broker outside the balance band, mean ± max(10 %, 1) (unbalanced: fixed by a bounded
    rebalance step); with --disk-threshold, a broker using more of its disk than that
    (disk_over_threshold: fixed by a bounded step of the disk-use balance). Each is remembered in
    the cluster (topic
    __kops_journal) with the time it was first seen, so cron on any host shares one history.

    Past its grace, a dead broker's replicas are re-created on live brokers, its own rack
    first, rack-safe, by the decommission planner, cut to --max-moves / --max-bytes /
    --max-duration at --throttle, and executed by the reassignment engine (journal, lock,
    throttles lifted at the end); later runs go on until none is left.

    Steps aside (nothing moved, exit 0, says why) while kops' cron jobs are paused (`kops
    rebalance pause` or a playbook run), another kops execution or any reassignment runs. Outside
    --window only a broker failure, a failed log dir or a disk over the threshold is mended; new brokers, rack
    repairs and balance wait for the window
    (anomalies are watched and remembered at any hour).

    Exit 0 nothing to do, watching, fixed a step, stepped aside; 3 too much down, partitions
    without ISR, or a fix not done within its bound; 1 failure; 2 bad input (nothing changed).
    """
    from kops.ops.heal import step as heal_step
    from kops.ops.heal.decide import Settings
    from kops.ops.replica_rebalance import StepBounds

    settings = Settings(broker_grace_s=broker_grace, max_dead_brokers=max_dead_brokers, fix=_fix_kinds(fix),
                        disk_threshold=None if disk_threshold is None else disk_threshold / 100)
    capacities = params.read_capacities(capacity_file)
    bounds = StepBounds(max_moves=max_moves, max_bytes=max_bytes, max_duration_s=max_duration)
    if notify_command is not None and not notify_command.strip():
        from kops.errors import BadInput

        raise BadInput("--notify-command: empty command")
    from kops.ops.reassign.options import ExecuteOptions

    rate = ExecuteOptions.rate(throttle)  # auto: planned and bounded at its minimum
    heal_step.check(settings, bounds, rate["throttle"])  # before connecting: exit 2, nothing changed
    res = None
    try:
        with c.connection() as conn:
            reporter = None
            if verbose and not c.json:
                from kops.cli.progress import make_reporter

                reporter = make_reporter()
            res = heal_step.step(conn, settings=settings, bounds=bounds, **rate, exclude=exclude_topics,
                                 dry_run=dry_run, max_moves_per_broker=max_moves_per_broker, reporter=reporter,
                                 notify_command=notify_command, window=window, capacities=capacities)
    finally:
        if metrics_file and res is not None:
            heal_step.write_metrics(metrics_file, res)
    if c.json:
        emit_json(res.to_dict())
    else:
        if verbose or dry_run:
            import json

            con = err_console()
            for a in res.anomalies:
                con.print(f"{a.key}: {a.state}: {a.why or a.detail}", markup=False, highlight=False, soft_wrap=True)
            if res.plan is not None and res.plan.get("partitions"):
                con.print(json.dumps(res.plan), markup=False, highlight=False, soft_wrap=True)
        typer.echo(res.summary(), err=True)  # one unwrapped line (cron logs, grep)
    raise typer.Exit(res.exit_code)


@app.command()
@handle_errors
@cluster_command
def status(
    c: Context,
) -> None:
    """What heal remembers: current anomalies (first seen, state, why) and the history of fixes
    (exit 0 none current, 3 some). Read-only: it does not look at the cluster afresh (`heal step
    --dry-run` does)."""
    from kops.ops.heal import memory as heal_memory
    from kops.ops.heal import step as heal_step

    with c.connection() as conn:
        st = heal_step.status(conn)
    if c.json:
        emit_json(st.to_dict())
        raise typer.Exit(st.exit_code)
    from rich.table import Table

    con = out_console()
    last = st.last_run
    every_h = heal_memory.LAST_RUN_EVERY_S / 3600
    con.print(f"last heal step recorded: {last['at']} ({last['status']}, exit {last['exit_code']}; a run like the "
              f"one before it is recorded at most every {every_h:g} h)" if last
              else "no heal step recorded on this cluster", markup=False, highlight=False)
    for title, rows in (("anomalies", st.current), ("history", st.history)):
        if not rows:
            con.print(f"{title}: none", markup=False, highlight=False)
            continue
        table = Table(title=title, title_justify="left")
        for col in ("key", "first seen", "state", "why", "fixes"):
            table.add_column(col, overflow="fold")
        for a in rows:
            d = a.to_dict(st.now)
            fixes = "; ".join(f"{f.get('at')} {f.get('replicas_moved')} moved ({f.get('status')})" for f in a.fixes[-3:])
            table.add_row(a.key, d["first_seen"] or "", a.state, a.why or a.detail, fixes or "-")
        con.print(table)
    for key in st.unreadable:
        con.print(f"unreadable record {key} in __kops_journal (ignored)", markup=False, highlight=False)
    raise typer.Exit(st.exit_code)
