"""``kops leader elect | rebalance | balance-plan | demote | restore``.

Thin commands: parse, call one service (``kops.ops.elections``, ``kops.ops.leader_rebalance``,
``kops.placement``), render. Heavy imports stay inside the command bodies.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated

import typer

from kops.cli import params
from kops.ops.elections import DEFAULT_BATCH_SIZE
from kops.cli.common import (
    Context,
    TopologyOpt,
    cluster_command,
    emit_json,
    err_console,
    handle_errors,
)

app = typer.Typer(
    help="Leadership without data movement: preferred/unclean elections, cron leader rebalancing, "
    "reorder-only balance plans, demote/restore brokers or racks for maintenance.",
    no_args_is_help=True,
)


class ElectionTypeOpt(str, Enum):
    preferred = "preferred"
    unclean = "unclean"


BatchSizeOpt = Annotated[
    int, typer.Option("--batch-size", click_type=params.count(1, 100_000), help="Partitions per ElectLeaders request (default 10,000: one request on most clusters, as "
                                   "Kafka's tool; smaller, with --batch-wait, for gentle steps).")
]
BatchWaitOpt = Annotated[
    float, typer.Option("--batch-wait", click_type=params.seconds(0.0, 3600.0), help="Seconds to wait between batches.")
]
BrokerSelOpt = Annotated[
    list[int] | None, typer.Option("--broker", click_type=params.BROKER, help="Broker id (repeatable).")
]
RackSelOpt = Annotated[
    list[str] | None, typer.Option("--rack", click_type=params.RACK, help="Every broker of this rack (repeatable).")
]


def _list(tps, limit: int = 20) -> str:
    names = [f"{t}-{p}" for t, p in tps]
    more = f" ... and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


# ------------------------------------------------------------------------------------------
# elect
# ------------------------------------------------------------------------------------------


def _read_election_file(c, path: str) -> list[tuple[str, int]]:
    """Kafka's ``{"partitions": [{"topic": "foo", "partition": 1}]}`` (no version field), checked
    before connecting; with problems, the cluster (if it answers at once) adds the partitions
    that do not exist."""
    from kops.cli.common import refuse
    from kops.inputs.files import read_json
    from kops.model import PlanEntry, parse_election
    from kops.ops.validate import reference_problems

    what = "--path-to-json-file"
    tps, problems = parse_election(read_json(path, what=what), source=f"{what} {path}")
    if problems and tps:
        refuse(c, problems, lambda topo: reference_problems([PlanEntry(t, p, ()) for t, p in tps], topo))
    problems.raise_if_any()
    return tps


@app.command()
@handle_errors
@cluster_command
def elect(
    c: Context,
    election_type: Annotated[
        ElectionTypeOpt,
        typer.Option("--election-type", case_sensitive=False, help="preferred or unclean (as kafka-leader-election.sh)."),
    ],
    all_topic_partitions: Annotated[
        bool, typer.Option("--all-topic-partitions", help="Every partition of every topic.")
    ] = False,
    topic: Annotated[str | None, typer.Option("--topic", click_type=params.TOPIC,
                                              help="One topic (all its partitions unless --partition).")] = None,
    partition: Annotated[int | None, typer.Option("--partition", click_type=params.count(0),
                                                  help="One partition of --topic.")] = None,
    path_to_json_file: Annotated[
        str | None,
        typer.Option("--path-to-json-file", help='{"partitions": [{"topic": "foo", "partition": 1}, ...]}'),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before an unclean election.")] = False,
    batch_size: BatchSizeOpt = DEFAULT_BATCH_SIZE,
    batch_wait: BatchWaitOpt = 0.0,
) -> None:
    """Elect leaders like kafka-leader-election.sh, in batches, with a per-partition outcome:
    elected, not needed (a valid leader is already in place) or failed and why.

    preferred: make replicas[0] the leader where it is live and in the ISR. unclean: elect any
    live replica for partitions without a live leader -- this can LOSE acknowledged data, so it
    asks first unless --yes. Exit 0 when nothing failed, 1 when some partition could not be
    elected, 2 on bad input (nothing was elected).
    """
    from kops.errors import BadInput

    chosen = sum(1 for x in (all_topic_partitions, topic is not None, path_to_json_file is not None) if x)
    if chosen != 1:
        raise BadInput("One and only one of the following options is required: --topic, "
                       "--all-topic-partitions, --path-to-json-file")
    if partition is not None and topic is None:
        raise BadInput("Option --partition is only allowed if --topic is used")
    etype = election_type.value
    requested = _read_election_file(c, path_to_json_file) if path_to_json_file else None

    from kops.cluster.topology import ReadOptions, read_topology
    from kops.ops.elections import NOT_NEEDED, Outcome, run_elections
    from kops.placement.leadership import election_needed

    with c.connection() as conn:
        topo = read_topology(conn, ReadOptions(with_configs=False, with_sizes=False, with_reassignments=False))
        alive = set(topo.alive_broker_ids)
        parts = {p.tp: p for p in topo.partitions()}
        if all_topic_partitions:
            # like the broker does for "all partitions": drop those that need no election
            tps = sorted(parts)
            send = [tp for tp in tps if election_needed(parts[tp], etype, alive)]
            sent = set(send)
            local_not_needed = [tp for tp in tps if tp not in sent]
        else:
            if topic is not None:
                t = topo.topic(topic)
                if t is None:
                    from kops.cluster.topology import missing_topics_error

                    raise missing_topics_error(conn, [topic])
                requested = [(topic, partition)] if partition is not None else [p.tp for p in t.partitions]
            unknown = [tp for tp in requested if tp not in parts]
            if unknown:
                raise BadInput(f"{len(unknown)} partition(s) do not exist: {_list(unknown)}")
            send, local_not_needed = list(requested), []
        if etype == "unclean" and send and not yes:
            if c.json or not _interactive():
                raise BadInput("an unclean election can lose acknowledged data: pass --yes to confirm")
            err_console().print(
                f"[bold red]Unclean leader election[/bold red] for {len(send)} partition(s): {_list(send, 10)}\n"
                "A replica that is not in sync may become leader and acknowledged messages may be lost.")
            if not typer.confirm("Proceed?", default=False, err=True):
                raise typer.Exit(2)

        def progress(i, n, res):
            if n > 1 and not c.json:
                err_console().print(f"batch {i}/{n}: {res.counts()}")

        result = run_elections(conn, etype, send, batch_size=batch_size, batch_wait_s=batch_wait,
                               on_batch=progress, needed={tp for tp in send if election_needed(parts[tp], etype, alive)})
    result.outcomes = [Outcome(t, p, NOT_NEEDED, "valid replica already elected") for t, p in local_not_needed] + \
        result.outcomes
    if c.json:
        emit_json(result.to_dict(details=True))
    else:
        con = err_console()
        E = etype.upper()
        if result.elected:
            typer.echo(f"Successfully completed leader election ({E}) for partitions {_list([o.tp for o in result.elected])}")
        if result.not_needed:
            typer.echo(f"Valid replica already elected for partitions {_list([o.tp for o in result.not_needed])}")
        for o in result.failed:
            typer.echo(f"Error completing leader election ({E}) for partition: {o.topic}-{o.partition}: {o.reason}")
        n = result.counts()
        con.print(f"{n['elected']} elected, {n['not_needed']} not needed, {n['failed']} failed "
                  f"in {result.batches} batch(es), {result.duration_s:.2f} s")
        for why in result.resent:
            con.print(f"note: {why}", markup=False, highlight=False)
    if result.failed:
        raise typer.Exit(1)


def _interactive() -> bool:
    import sys

    return sys.stdin.isatty()


# ------------------------------------------------------------------------------------------
# rebalance (cron)
# ------------------------------------------------------------------------------------------


@app.command()
@handle_errors
@cluster_command
def rebalance(
    c: Context,
    imbalance_threshold: Annotated[
        float,
        typer.Option("--imbalance-threshold", click_type=params.number(0.0, 100.0),
                     help="leader.imbalance.per.broker.percentage: elect only for brokers whose share of "
                          "non-preferred-led partitions is strictly above this (Kafka default 10)."),
    ] = 10.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Compute and report; elect nothing.")] = False,
    max_elections: Annotated[
        int | None, typer.Option("--max-elections", click_type=params.count(0),
                                 help="Elect at most N partitions this run.")
    ] = None,
    batch_size: BatchSizeOpt = DEFAULT_BATCH_SIZE,
    batch_wait: BatchWaitOpt = 0.0,
    metrics_file: params.MetricsFileOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Run even while a partition reassignment is in progress.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print the per-broker table too.")] = False,
    topology: TopologyOpt = None,
    window: params.WindowOpt = None,
    topics: params.TopicsRegexOpt = None,
    exclude_topics: params.ExcludeTopicsOpt = None,
) -> None:
    """The cron job: restore preferred leaders the way Kafka's ZooKeeper controller would for
    leader.imbalance.per.broker.percentage, but on your schedule.

    Per broker B: ratio = (partitions whose preferred replica is B but B does not lead) /
    (partitions whose preferred replica is B). If ratio > threshold, elect the preferred replica
    for those partitions where it is live and in the ISR (live but out of the ISR as read: the
    controller is asked too, as the metadata read can lag it). Idempotent; quiet on success (one
    summary line on stderr). Never runs twice at once; steps aside (exit 0, says why) while a
    reassignment is in progress unless --force, and outside --window (saying when the next opens).
    --topics / --exclude-topics: only the topics kept are measured and elected (the summary says
    how many were left out).

    Exit 0 balanced or after successful elections; 3 when balance cannot be reached (preferred
    replicas down or out of the ISR -- named); 1 on failure; 2 bad input.
    """
    from kops.inputs.files import output_file
    from kops.ops.leader_rebalance import rebalance as run
    from kops.placement.topic_filter import TopicFilter

    scope = TopicFilter.of(topics, exclude_topics)
    if metrics_file:
        output_file(metrics_file, what="--metrics-file", create_parents=True)
    if topology:
        from kops.cluster.snapshot import load_topology

        res = run(None, threshold_pct=imbalance_threshold, max_elections=max_elections,
                  metrics_file=metrics_file, topology=load_topology(topology), window=window, topics=scope)
    else:
        with c.connection() as conn:
            res = run(conn, threshold_pct=imbalance_threshold, dry_run=dry_run, max_elections=max_elections,
                      batch_size=batch_size, batch_wait_s=batch_wait, force=force, metrics_file=metrics_file,
                      window=window, topics=scope)
    if c.json:
        emit_json(res.to_dict())
    else:
        if verbose or res.dry_run or res.exit_code:
            _render_imbalance(res)
        typer.echo(res.summary(), err=True)  # one unwrapped line (cron logs, grep)
    raise typer.Exit(res.exit_code)


def _render_imbalance(res) -> None:
    from rich.table import Table

    con = err_console()
    rep = res.before
    if rep is None:
        return
    after = {b.broker: b for b in res.after.brokers} if res.after else {}
    t = Table(title=f"Leader imbalance per broker (threshold {rep.threshold_pct:g}%)", title_justify="left")
    for col in ("broker", "rack", "up", "pref", "not led", "ratio", "over", "elect", "blocked", "after"):
        t.add_column(col, justify="left" if col in ("rack", "alive", "over") else "right")
    for b in rep.brokers:
        a = after.get(b.broker)
        t.add_row(str(b.broker), b.rack or "-", "yes" if b.alive else "DOWN", str(b.preferred), str(b.not_preferred),
                  f"{b.percent:.1f}%", "YES" if b.over_threshold else "", str(len(b.candidates)),
                  str(len(b.blocked)), f"{a.percent:.1f}%" if a else "-")
    con.print(t)
    for x in res.blocked[:50]:  # left blocked after the run (the controller refused those asked)
        typer.echo(f"  blocked {x.tp[0]}-{x.tp[1]}: {x.reason} (leader {x.leader})", err=True)
    if len(res.blocked) > 50:
        con.print(f"  ... and {len(res.blocked) - 50} more blocked")


# ------------------------------------------------------------------------------------------
# balance-plan
# ------------------------------------------------------------------------------------------


@app.command("balance-plan")
@handle_errors
@cluster_command
def balance_plan(
    c: Context,
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", click_type=params.TOPIC,
                     help="Balance within these topics only (repeatable). Default: the whole cluster."),
    ] = None,
    no_followers: Annotated[
        bool, typer.Option("--no-followers", help="Balance preferred leaders only, not first followers.")
    ] = False,
    out_file: Annotated[
        str | None, typer.Option("--reassignment-json-file", help="Also write the plan to this file.")
    ] = None,
    topology: TopologyOpt = None,
    topics: params.TopicsRegexOpt = None,
    exclude_topics: params.ExcludeTopicsOpt = None,
) -> None:
    """A reorder-only reassignment plan (replica sets unchanged, no data moves) that balances
    preferred leaders to within 1 per broker and first followers, so leadership stays balanced
    when any one broker fails.

    stdout: the plan in Kafka's reassignment format (run it with `kops reassign execute`, then
    `kops leader elect --election-type preferred ...` or `kops leader rebalance`); with
    --output json: one document with the plan and the before/after counts.
    """
    from kops.cli.common import load_topology
    from kops.inputs.files import output_file
    from kops.placement.leader_plan import leader_balance_plan
    from kops.placement.topic_filter import TopicFilter, left_out_text

    scope = TopicFilter.of(topics, exclude_topics)
    if out_file:
        output_file(out_file, what="--reassignment-json-file")
    topo = load_topology(c, topology, with_zookeeper=False)
    if scope is not None:
        scope.check_named(topic or (), "--topic")  # before naming missing topics: the options contradict
    missing = sorted(set(topic or ()) - set(topo.topic_map))
    if missing:
        from kops.cluster.topology import missing_topics_error

        if topology:
            raise missing_topics_error(None, missing)
        with c.connection() as conn:
            raise missing_topics_error(conn, missing)
    res = leader_balance_plan(topo, topics=topic or (), scope=scope, followers=not no_followers)
    plan, before, after = res.plan, res.before, res.after
    if out_file:
        with open(out_file, "w", encoding="utf-8") as f:
            f.write(plan.to_json() + "\n")
    if c.json:
        emit_json(res.to_dict())
        return
    con = err_console()
    if res.topics_left_out is not None:
        con.print(left_out_text(res.topics_left_out), markup=False, soft_wrap=True)
    con.print(f"{res.reordered} of {res.considered} partitions reordered (replica sets unchanged, no data moves); "
              f"preferred-leader spread {before['leader_spread']} -> {after['leader_spread']}, "
              f"first-follower spread {before['follower_spread']} -> {after['follower_spread']}, "
              f"per-rack spread {before['rack_spread']} -> {after['rack_spread']}", markup=False)
    if res.reordered:
        con.print("next: kops reassign execute --reassignment-json-file PLAN, then "
                  "kops leader rebalance --imbalance-threshold 0 (or kops leader elect --election-type preferred)",
                  markup=False)
    typer.echo(plan.to_json())


# ------------------------------------------------------------------------------------------
# demote / restore
# ------------------------------------------------------------------------------------------

StateFileOpt = Annotated[
    str | None,
    typer.Option("--state-file", envvar="KOPS_LEADER_STATE_FILE",
                 help="Demotion record (default $KOPS_HOME/leadership/<cluster id>.json; "
                      "KOPS_HOME defaults to ~/.kops)."),
]
WaitOpt = Annotated[
    float, typer.Option("--wait", click_type=params.seconds(1.0), help=(
        "Seconds to wait for the reorders to take effect, and again for the metadata to show the new "
        "leaders (while it catches up; after 10 s without progress a leader that did not move is reported)."))
]


@dataclass(frozen=True)
class MoveOptions:
    """What ``leader demote`` and ``leader restore`` both take, declared once: a command's
    ``opts: MoveOptions`` parameter stands for these options (see :func:`kops.cli.common.cluster_command`)."""

    broker: BrokerSelOpt = None
    rack: RackSelOpt = None
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the reorders and elections; change nothing.")] = False
    state_file: StateFileOpt = None
    wait: WaitOpt = 60.0


def _move_command(action: str, c: Context, opts: MoveOptions, topology: str | None) -> None:
    from kops.errors import BadInput

    if topology:
        if action != "demote" or not opts.dry_run:
            raise BadInput("--topology works only with demote --dry-run (restore needs the live cluster)")
        from kops.cluster.snapshot import load_topology
        from kops.ops.leader_rebalance import MoveResult, resolve_brokers
        from kops.placement.leadership import plan_demote

        topo = load_topology(topology)
        ids = resolve_brokers(topo, opts.broker, opts.rack)
        res = MoveResult("demote", ids, plan_demote(topo, ids), True, "-")
        res.remaining = list(res.move.unmovable)
    else:
        from kops.ops import leader_rebalance as lr

        fn = lr.demote if action == "demote" else lr.restore
        with c.connection() as conn:
            res = fn(conn, broker=opts.broker, rack=opts.rack, dry_run=opts.dry_run, state_file=opts.state_file,
                     wait_s=opts.wait)
    if c.json:
        emit_json(res.to_dict())
    else:
        con = err_console()
        m = res.move
        if res.dry_run:
            for (t, p), r in sorted(m.reorder.items()):
                typer.echo(f"  reorder {t}-{p}: {list(m.original[(t, p)])} -> {list(r)}", err=True)
            if m.elect:
                typer.echo(f"  elect: {_list(m.elect)}", err=True)
        for u in res.remaining:
            typer.echo(f"  not moved {u.tp[0]}-{u.tp[1]} (leader {u.leader}, replicas {list(u.replicas)}, "
                       f"isr {list(u.isr)}): {u.reason}", err=True)
        for n in m.notes:
            con.print(f"  note: {n}", markup=False)
        if res.still_open:
            con.print(f"  {len(res.still_open)} reorder(s) in effect but still open until a replica rejoins the ISR: "
                      f"{_list(res.still_open)}", markup=False)
        typer.echo(res.summary(), err=True)
        if not res.dry_run and res.state_file != "-":
            con.print(f"demotion record: {res.state_file}", markup=False)
    raise typer.Exit(res.exit_code)


@app.command()
@handle_errors
@cluster_command
def demote(c: Context, opts: MoveOptions, topology: TopologyOpt = None) -> None:
    """Move leadership off brokers or a whole rack before maintenance, without moving data.

    Each partition led by (or preferring) a demoted broker is reordered so that a live in-sync
    replica on another broker comes first -- the demoted brokers go last -- and its preferred
    replica is elected. A partition is never demoted when no other replica is live and in sync
    (it would have no in-sync leader); such partitions are listed with the reason. The original
    orders are kept in the demotion record for `kops leader restore`.

    Exit 0 when no partition is led by the demoted brokers any more, 3 when some still are.
    """
    _move_command("demote", c, opts, topology)


@app.command()
@handle_errors
@cluster_command
def restore(c: Context, opts: MoveOptions) -> None:
    """Give leadership back after maintenance: put demoted partitions back in the replica
    order they had before `kops leader demote` (from the demotion record) and elect the
    preferred replicas. Partitions with no record whose preferred replica is on these brokers get
    a preferred election. Idempotent: run it again until it exits 0.

    Exit 0 when every affected partition is led by its preferred replica again, 3 when some are
    not yet (e.g. a broker still catching up into the ISR; they are named).
    """
    _move_command("restore", c, opts, None)
