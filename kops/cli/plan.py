"""``kops plan ...``: offline/live planning commands (Kafka-exact assignment, minimal-movement plans)."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Compute replica plans: Kafka's own assignment, and minimal-movement rack-aware plans.",
    no_args_is_help=True,
)


# -- kops plan assign ------------------------------------------------------------------------------
import sys  # noqa: E402

from kops.cli import params  # noqa: E402
from kops.cli.common import (  # noqa: E402
    Context,
    cluster_command,
    emit_json,
    err_console,
    handle_errors,
    output_command,
)
from kops.inputs.values import human_bytes  # noqa: E402

#: ``plan assign`` computes at most this many partitions and replicas in one run (about a minute
#: on a 2-core machine); more is a typo, not a plan anyone reviews
MAX_ASSIGN_PARTITIONS = 1_000_000
MAX_ASSIGN_REPLICAS = 10_000_000
_INT32_MIN = "INT32_MIN"  # kops.inputs.values' constant, looked up when a value is converted


@app.command("assign")
@handle_errors
@output_command
def assign(
    c: Context,
    brokers: str = typer.Option(..., "--brokers", help="Broker ids, e.g. 0,1,2 (Kafka's order for rack-unaware)."),
    racks: str | None = typer.Option(
        None,
        "--racks",
        help="Broker racks, e.g. 0:r1,1:r2,2:r1. Path racks (0:/dc1/r1,...) use kops' multi-level algorithm."),
    partitions: int = typer.Option(..., "--partitions", click_type=params.count(_INT32_MIN, MAX_ASSIGN_PARTITIONS),
                                   help=f"Number of partitions (at most {MAX_ASSIGN_PARTITIONS:,})."),
    replication_factor: int = typer.Option(..., "--replication-factor", click_type=params.count(_INT32_MIN),
                                           help="Replicas per partition."),
    start_index: int = typer.Option(
        -1, "--start-index", click_type=params.count(_INT32_MIN),
        help="Kafka's fixedStartIndex; -1 (default) draws it at random, as Kafka does."),
    start_partition: int = typer.Option(-1, "--start-partition", click_type=params.count(_INT32_MIN),
                                        help="First partition id (Kafka's startPartitionId)."),
    disable_rack_aware: bool = typer.Option(
        False, "--disable-rack-aware", help="Ignore racks (rack-unaware assignment), as Kafka's tools."
    ),
    topic: str = typer.Option("topic", "--topic", click_type=params.TOPIC,
                              help="Topic name written into the reassignment JSON."),
) -> None:
    """Kafka's own replica assignment (AdminUtils.assignReplicasToBrokers), offline.

    Prints Kafka reassignment JSON on stdout (what kafka-topics.sh / --generate would place);
    a summary goes to stderr. Multi-level path racks (/dc/rack) use kops' multi-level algorithm.
    """
    from kops.errors import BadInput
    from kops.inputs import Problems
    from kops.inputs import values
    from kops.inputs.values import INT32_MAX
    from kops.model import ReassignmentPlan, parse_broker_list
    from kops.placement.kafka_assign import assign_replicas_to_brokers
    from kops.placement.racks import validate_racks

    ids = parse_broker_list(brokers, option="--brokers")
    rack_of: dict[int, str | None] = dict.fromkeys(ids)
    if racks:
        bad = Problems("--racks")
        for item in (s.strip() for s in racks.split(",")):
            if not item:
                continue
            b_text, sep, rack = item.partition(":")
            try:
                b = values.broker_id(b_text) if sep and rack else None
            except values.Invalid:
                b = None
            if b is None:
                bad.add(values.show(item), "is not BROKER:RACK (e.g. 0:r1,1:r2 or 0:/dc1/r1)")
            elif b not in rack_of:
                bad.add(values.show(item), f"broker {b} is not in --brokers {ids}")
            elif rack_of[b] is not None:
                bad.add(values.show(item), f"broker {b} is given a rack twice")
            else:
                rack_of[b] = rack
        bad.raise_if_any("")
    # (0 or fewer partitions or replicas: Kafka's own messages, from the assignment below)
    if partitions > 0 and replication_factor > 0 and partitions * min(replication_factor, len(ids)) > MAX_ASSIGN_REPLICAS:
        raise BadInput(f"--partitions {partitions} x --replication-factor {replication_factor}: more than "
                       f"{MAX_ASSIGN_REPLICAS:,} replicas in one plan (kops would compute for many minutes)")
    if start_partition > 0 and partitions > 0 and start_partition + partitions - 1 > INT32_MAX:
        raise BadInput(f"--start-partition {start_partition} + --partitions {partitions}: partition ids past "
                       f"{INT32_MAX} (Kafka's largest int32)")
    multilevel = False
    if not disable_rack_aware and any(r is not None for r in rack_of.values()):
        validate_racks(rack_of)
        multilevel = any(r is not None and r.startswith("/") for r in rack_of.values())
    pairs = [(b, rack_of[b]) for b in ids]
    if multilevel:
        from kops.placement.multilevel import assign_replicas_multilevel

        algorithm = "kops multi-level rack-aware (path racks; not Kafka's algorithm)"
        result = assign_replicas_multilevel(pairs, partitions, replication_factor, start_index, start_partition)
    else:
        result = assign_replicas_to_brokers(
            pairs, partitions, replication_factor, start_index, start_partition, rack_aware=not disable_rack_aware
        )
        rack_aware = not disable_rack_aware and all(r is not None for r in rack_of.values())
        algorithm = "Kafka 3.9 AdminUtils, " + ("rack-aware (KIP-36)" if rack_aware else "rack-unaware")
    plan = ReassignmentPlan.from_assignment({(topic, p): reps for p, reps in result.items()})
    if "." in topic or "_" in topic:  # kafka-topics.sh --create warns so too (stderr: stdout keeps the plan)
        err_console().print(f"warning: topic {topic!r} contains '.' or '_': Kafka's metric names turn both into "
                            "the same character, so it can collide with a topic named like it but for those "
                            "(Kafka refuses to create the second one)", markup=False)
    if c.json:
        if multilevel:  # say so, on stderr: stdout carries the JSON document only
            err_console().print(f"note: {algorithm}")
        emit_json(plan.to_dict())
        return
    shown_racks = dict.fromkeys(ids) if disable_rack_aware else rack_of
    _assign_summary(err_console(), algorithm, result, shown_racks, start_index)
    sys.stdout.write(plan.to_json() + "\n")


def _assign_summary(con, algorithm: str, result, rack_of, start_index: int) -> None:
    """Human summary on stderr; ``rack_of`` has every broker (rack None when not used)."""
    from collections import Counter

    from rich.markup import escape
    from rich.table import Table

    from kops.placement.racks import RackTree

    replicas = Counter(b for reps in result.values() for b in reps)
    leaders = Counter(reps[0] for reps in result.values())
    con.print(f"[bold]{escape(algorithm)}[/bold]")
    rf = len(next(iter(result.values())))
    con.print(
        f"{len(result)} partitions x RF {rf}; start index "
        + (f"{start_index} (fixed)" if start_index >= 0 else "drawn at random, as Kafka does (--start-index N to fix it)")
    )
    table = Table(box=None, pad_edge=False)
    for col in ("broker", "rack", "replicas", "leaders"):
        table.add_column(col, justify="right" if col in ("broker", "replicas", "leaders") else "left")
    ids = sorted(rack_of)
    for b in ids:
        table.add_row(str(b), escape(str(rack_of[b] or "-")), str(replicas.get(b, 0)), str(leaders.get(b, 0)))
    con.print(table)
    rc = [replicas.get(b, 0) for b in ids]
    lc = [leaders.get(b, 0) for b in ids]
    con.print(f"replicas per broker {min(rc)}..{max(rc)}, leaders per broker {min(lc)}..{max(lc)}")
    if all(r is not None for r in rack_of.values()):
        tree = RackTree.build(rack_of)
        spans = Counter(len({rack_of[b] for b in reps}) for reps in result.values())
        unsafe = sum(1 for reps in result.values() if tree.rack_violation(reps) is not None)
        con.print(
            "racks spanned per partition: "
            + ", ".join(f"{k} racks x {v}" for k, v in sorted(spans.items()))
            + f"; rack-unsafe partitions: {unsafe}"
        )
        if tree.paths:
            from kops.placement.multilevel import level_counts

            for depth, counts in enumerate(level_counts(result, rack_of)[:-1], 1):
                r = [v[0] for v in counts.values()]
                ld = [v[1] for v in counts.values()]
                con.print(
                    f"level {depth} ({len(counts)} domains): replicas {min(r)}..{max(r)}, leaders {min(ld)}..{max(ld)}"
                )


# -- kops plan rebalance | decommission | add-brokers | drain-rack | set-replication-factor |
#    move-topics: the minimal-movement planner (kops.placement.balancer) ----------------------------
from dataclasses import dataclass  # noqa: E402

from kops.cli.common import TopologyOpt  # noqa: E402
from kops.cli.params import (  # noqa: E402
    AddBrokerOpt,
    CapacityFileOpt,
    ChartOpt,
    DiskThresholdOpt,
    ExcludeTopicsOpt,
    GoalsOpt,
    MaxBytesOpt,
    MaxMovesOpt,
    NoBalanceOpt,
    ThrottleOpt,
    TopicsRegexOpt,
)


@dataclass(frozen=True)
class PlanOptions:
    """The options every minimal-movement plan command takes, declared once: a command's
    ``opts: PlanOptions`` parameter stands for all of them (see :func:`kops.cli.common.cluster_command`)."""

    topology: TopologyOpt = None
    max_moves: MaxMovesOpt = None
    max_bytes: MaxBytesOpt = None
    throttle: ThrottleOpt = None
    chart: ChartOpt = None
    capacity_file: CapacityFileOpt = None
    disk_threshold: DiskThresholdOpt = 80.0
    goals: GoalsOpt = None
    add_broker: AddBrokerOpt = None
    topics: TopicsRegexOpt = None
    exclude_topics: ExcludeTopicsOpt = None


def _what_if(topo, capacities: dict | None, add_broker: list[str] | None):
    """The topology with the capacity file's ``capacities`` applied and the what-if brokers added."""
    from dataclasses import replace

    from kops.inputs import Problems
    from kops.inputs import values
    from kops.model import Broker, Capacity

    added: list = []
    disks: dict[int, int] = {}
    if add_broker:
        problems = Problems("--add-broker")
        for spec in add_broker:
            parts = spec.split(":")
            if not 2 <= len(parts) <= 3:
                problems.add(spec, "expected ID:RACK or ID:RACK:DISK (e.g. 7:c:2T; ID: for no rack)")
                continue
            try:
                bid = values.broker_id(parts[0])
                rack = values.rack(parts[1]) if parts[1] else None
                disk = values.size(parts[2], lo=1) if len(parts) == 3 else None
            except values.Invalid as e:
                problems.add(spec, str(e))
                continue
            if topo.broker(bid) is not None:
                problems.add(spec, f"broker {bid} is in the cluster already")
            elif bid in {b.id for b in added}:
                problems.add(spec, f"broker {bid} is given twice")
            else:
                added.append(Broker(bid, rack))
                if disk:
                    disks[bid] = disk
        problems.raise_if_any()
    topo = replace(topo, brokers=topo.brokers + tuple(added)) if added else topo
    if capacities:  # (a file's entry or default entry applies to an added broker too)
        topo = topo.with_capacities(capacities)
    if disks:  # --add-broker's DISK wins over the file
        topo = replace(topo, brokers=tuple(
            replace(b, capacity=replace(b.capacity or Capacity(), disk_bytes=disks[b.id],
                                        source={**dict(b.capacity.source if b.capacity else {}), "DISK": "--add-broker"}))
            if b.id in disks else b for b in topo.brokers))
    return topo


def _run_goal(c: Context, make_goal, opts: PlanOptions, *, no_balance: bool = False) -> None:
    from kops.cli.common import load_topology
    from kops.inputs.files import CHART_FORMATS, output_file
    from kops.placement.balancer import plan

    from kops.placement.goals import select_goals

    chart_format = output_file(opts.chart, what="--chart", formats=CHART_FORMATS) if opts.chart else None
    chosen = select_goals(opts.goals)  # checked before connecting
    if opts.add_broker and not opts.topology:
        from kops.errors import BadInput

        raise BadInput("--add-broker plans against brokers that do not exist: it needs --topology FILE (a "
                       "snapshot from `kops cluster describe --output json`), so that nobody executes the plan "
                       "on the live cluster by mistake")
    capacities = params.read_capacities(opts.capacity_file)
    from kops.placement.topic_filter import TopicFilter

    topo = _what_if(load_topology(c, opts.topology, cordons=True), capacities, opts.add_broker)
    res = plan(topo, make_goal(topo), max_moves=opts.max_moves, max_bytes=opts.max_bytes, throttle=opts.throttle,
               rebalance=not no_balance, disk_threshold=opts.disk_threshold / 100, goals=chosen,
               topics=TopicFilter.of(opts.topics, opts.exclude_topics))
    if opts.chart:
        _write_chart(res.report, opts.chart, chart_format)
    if c.json:
        emit_json({"plan": res.plan.to_dict(), "report": res.report})
        return
    _render_goal_report(err_console(), res.report)
    if opts.chart:
        err_console().print(f"chart written to {opts.chart}")
    sys.stdout.write(res.plan.to_json() + "\n")


def _fmt_duration(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _render_goal_report(con, rep: dict) -> None:
    """The plan report, readable, on stderr."""
    from rich.markup import escape
    from rich.table import Table

    con.print(f"[bold]plan: {escape(rep['goal']['description'])}[/bold]  (balancing {rep['balance_by']}, "
              f"{rep['partitions_in_scope']} partitions in scope)")
    if "topics_left_out" in rep:
        from kops.placement.topic_filter import left_out_text

        con.print(escape(left_out_text(rep["topics_left_out"])) + " (the goals measure the topics kept; the broker "
                  "table and the disk and network limits count every topic)", soft_wrap=True)
    lb = rep["lower_bound"]
    kg = rep["kafka_generate"] or {}
    kav = kg.get("available")
    bal = rep["balance"]
    t = Table(box=None, pad_edge=False, title=None)
    t.add_column("")
    t.add_column("kops", justify="right")
    t.add_column("lower bound", justify="right")
    t.add_column("Kafka --generate", justify="right")
    t.add_row("replicas moved", str(rep["replicas_moved"]), f"{lb['moves']} (mandatory {lb['moves_mandatory']})",
              str(kg["replicas_moved"]) if kav else "-")
    t.add_row("bytes moved", human_bytes(rep["bytes_moved"]),
              human_bytes(lb["bytes_mandatory"]) + (f" (exact mean: {human_bytes(lb['bytes_to_reach_mean'])})"
                                                  if lb.get("bytes_to_reach_mean") is not None else ""),
              human_bytes(kg.get("bytes_moved")) if kav else "-")
    t.add_row("partitions changed", str(rep["partitions_changed"]), "", str(kg["partitions_changed"]) if kav else "-")
    t.add_row("rack violations after", str(rep["rack_violations_after"]), "0", str(kg["rack_violations"]) if kav else "-")
    t.add_row("replica spread after", str(bal["replica_spread_after"]), "", str(kg["replica_spread"]) if kav else "-")
    t.add_row("leader spread after", str(bal["leader_spread_after"]), "", str(kg["leader_spread"]) if kav else "-")
    con.print(t)
    if not kav:
        con.print(f"Kafka --generate: not available ({escape(str(kg.get('reason')))})")
    else:
        con.print(f"(Kafka --generate with its random start index drawn from a fixed seed ({kg['seed']}), per topic)")
    con.print(
        f"rack violations {rep['rack_violations_before']} -> {rep['rack_violations_after']}; "
        f"spread (max-min per broker) replicas {bal['replica_spread_before']} -> {bal['replica_spread_after']}, "
        f"leaders {bal['leader_spread_before']} -> {bal['leader_spread_after']}, first followers "
        f"{bal['first_follower_spread_before']} -> {bal['first_follower_spread_after']}"
        + (f", bytes {human_bytes(bal['bytes_spread_before'])} -> {human_bytes(bal['bytes_spread_after'])}"
           if "bytes_spread_before" in bal else "")
    )
    con.print(f"{rep['reorder_only_partitions']} partitions only reordered (no data), "
              f"{rep['preferred_leader_changes']} preferred-leader changes")
    for ex in rep["rack_violation_examples_before"][:3]:
        con.print(f"  before: {escape(ex)}")
    rows = rep["brokers"]
    changed = [r for r in rows if (r["replicas_before"], r["leaders_before"], r["first_followers_before"])
               != (r["replicas_after"], r["leaders_after"], r["first_followers_after"])]
    shown = rows if len(rows) <= 40 else changed[:40]
    if shown:
        bt = Table(box=None, pad_edge=False)
        for col in ("broker", "rack", "replicas", "leaders", "1st followers"):
            bt.add_column(col, justify="left" if col == "rack" else "right")
        has_bytes = "bytes_before" in rows[0]
        if has_bytes:
            bt.add_column("bytes", justify="right")
        for r in shown:
            cells = [
                str(r["id"]) + ("" if r["allowed"] else " (out)"),
                escape(str(r["rack"] or "-")),
                f"{r['replicas_before']} -> {r['replicas_after']}",
                f"{r['leaders_before']} -> {r['leaders_after']}",
                f"{r['first_followers_before']} -> {r['first_followers_after']}",
            ]
            if has_bytes:
                cells.append(f"{human_bytes(r['bytes_before'])} -> {human_bytes(r['bytes_after'])}")
            bt.add_row(*cells)
        con.print(bt)
        if len(shown) < len(rows):
            con.print(f"({len(rows)} brokers; {len(changed)} change; the first {len(shown)} shown -- --output json has all)")
    racks = rep["racks"]
    if 1 < len(racks) <= 40:
        rt = Table(box=None, pad_edge=False)
        for col in ("rack", "brokers", "replicas", "leaders"):
            rt.add_column(col, justify="left" if col == "rack" else "right")
        for r in racks:
            rt.add_row(escape(r["rack"]), str(r["brokers"]), f"{r['replicas_before']} -> {r['replicas_after']}",
                       f"{r['leaders_before']} -> {r['leaders_after']}")
        con.print(rt)
    _render_goals(con, rep.get("goals") or {})
    d = rep["duration"]
    if d:
        if d["seconds"] is None:
            con.print(f"duration: {escape(d['assumptions'])}")
        else:
            con.print(f"estimated duration at {human_bytes(d['throttle_bytes_per_s'])}/s: "
                      f"{_fmt_duration(d['seconds_parallel'])} with every broker copying in parallel, "
                      f"{_fmt_duration(d['seconds'])} if one stream at a time")
    b = rep["bounded"]
    if not b["complete"]:
        con.print(f"[yellow]bounded plan[/yellow] (max moves {b['max_moves']}, max bytes {b['max_bytes']}): "
                  "the goal is not reached yet; execute this plan, then run the same command again")
    if b["forced_over_budget"]:
        con.print("note: one partition needs more than the budget at once; it is included so that runs make progress")
    for n in rep["notes"]:
        con.print(f"note: {escape(n)}")
    if not rep["partitions_changed"]:
        con.print("nothing to change: the cluster already meets the goal")


def _render_goals(con, goals: dict) -> None:
    """Each goal before -> after against its bound and how far off its band, with its verdict
    (docs/planner.md); a goal made worse says why; goals without their data in one line."""
    from rich.markup import escape
    from rich.table import Table

    shown = {g: v for g, v in goals.items() if v.get("status") != "unknown"}
    if shown:
        gt = Table(box=None, pad_edge=False)
        for col in ("goal", "before", "after", "bound", "off band", "verdict", "status", "measure"):
            gt.add_column(col, justify="right" if col in ("before", "after", "bound", "off band") else "left")
        for g, v in shown.items():
            bound = "-" if v.get("bound") is None else str(v["bound"])
            off = f"{v['off_band_before']} -> {v['off_band_after']}" if "off_band_before" in v else "-"
            status = v["status"] + (" (hard)" if v.get("hard") else "")
            if v.get("blockers"):
                status += ": " + ", ".join(str(x) for x in v["blockers"][:3])
            gt.add_row(g, str(v["before"]), str(v["after"]), bound, off, v.get("verdict", "-"), escape(status),
                       escape(v["unit"]))
        con.print(gt)
    for g, v in shown.items():
        if v.get("rack_bound"):
            con.print(f"{g}: rack safety allows no spread below {v['bound']} ({escape('; '.join(v['rack_bound']))})")
        if v.get("cordon_bound"):
            con.print(f"{g}: the cordoned brokers allow no spread below {v['bound']} "
                      f"({escape('; '.join(v['cordon_bound']))}; they get no new replica)")
        if v.get("why"):
            forced = f" (forced by {', '.join(v['forced_by'])})" if v.get("forced_by") else ""
            con.print(f"{g} is worse{forced}: {escape(v['why'])}")
    unknown = [g for g, v in goals.items() if v.get("status") == "unknown"]
    if unknown:
        con.print("goals without their data (measured and optimised only with it): "
                  + "; ".join(f"{g} needs {goals[g]['needs']}" for g in unknown))


def _write_chart(rep: dict, path: str, fmt: str | None) -> None:
    """Per-broker replica and leader counts before/after, in ``fmt`` (png, svg, pdf; checked by
    the input layer before planning), drawn by matplotlib (Agg, imported lazily)."""
    from kops.errors import BadInput

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover
        raise BadInput(f"--chart needs matplotlib: {e}") from None
    rows = rep["brokers"]
    ids = [r["id"] for r in rows]
    x = list(range(len(ids)))
    fig, axes = plt.subplots(2, 1, figsize=(max(8.0, min(24.0, len(ids) * 0.25)), 7), sharex=True)
    many = len(ids) > 80
    for ax, key, title in ((axes[0], "replicas", "replicas per broker"), (axes[1], "leaders", "preferred leaders per broker")):
        before = [r[f"{key}_before"] for r in rows]
        after = [r[f"{key}_after"] for r in rows]
        if many:
            ax.plot(x, before, drawstyle="steps-mid", label="before", alpha=0.7)
            ax.plot(x, after, drawstyle="steps-mid", label="after")
        else:
            ax.bar([i - 0.2 for i in x], before, width=0.4, label="before", alpha=0.7)
            ax.bar([i + 0.2 for i in x], after, width=0.4, label="after")
        ax.set_title(title)
        ax.legend(loc="upper right")
        ax.grid(axis="y", alpha=0.3)
    if not many:
        axes[1].set_xticks(x)
        axes[1].set_xticklabels([str(i) for i in ids], rotation=90 if len(ids) > 30 else 0)
    axes[1].set_xlabel("broker" + (" (index in id order)" if many else ""))
    fig.suptitle(f"kops plan: {rep['goal']['description']}")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100, format=fmt)
    except OSError as e:
        raise BadInput(f"--chart: cannot write {path}: {e}") from None
    finally:
        plt.close(fig)


def _ids_opt(text: str, option: str) -> tuple[int, ...]:
    from kops.model import parse_broker_list

    return tuple(parse_broker_list(text, option=option))


@app.command("rebalance")
@handle_errors
@cluster_command
def rebalance(
    c: Context,
    *,
    opts: PlanOptions,
) -> None:
    """Balance replicas, preferred leaders and first followers over the alive brokers, rack-safe,
    moving as few replicas as possible (replicas on dead brokers are replaced).

    stdout: Kafka reassignment JSON of the partitions that change; the report goes to stderr
    (--output json: one document {"plan", "report"}).
    """
    from kops.placement.balancer import Goal

    _run_goal(c, lambda topo: Goal("rebalance"), opts)


@app.command("decommission")
@handle_errors
@cluster_command
def decommission(
    c: Context,
    brokers: str = typer.Option(..., "--brokers", help="Brokers to empty, e.g. 4,5."),
    no_balance: NoBalanceOpt = False,
    *,
    opts: PlanOptions,
) -> None:
    """Move every replica off BROKERS (to the same rack where that is balanced), then balance.

    Only the replicas on the removed brokers must move; the report compares with that lower bound
    and with what Kafka's --generate would move.
    """
    from kops.placement.balancer import Goal

    ids = _ids_opt(brokers, "--brokers")
    _run_goal(c, lambda topo: Goal("decommission", brokers=ids), opts, no_balance=no_balance)


@app.command("add-brokers")
@handle_errors
@cluster_command
def add_brokers(
    c: Context,
    brokers: str = typer.Option(..., "--brokers", help="New (empty) brokers to move load onto, e.g. 6,7."),
    *,
    opts: PlanOptions,
) -> None:
    """Move load onto new brokers: every copy goes to one of BROKERS, from the most loaded brokers."""
    from kops.placement.balancer import Goal

    ids = _ids_opt(brokers, "--brokers")
    _run_goal(c, lambda topo: Goal("add-brokers", brokers=ids), opts)


@app.command("drain-rack")
@handle_errors
@cluster_command
def drain_rack(
    c: Context,
    rack: str = typer.Option(..., "--rack", help="Rack to empty (a path prefix such as /dc1 drains a whole domain)."),
    no_balance: NoBalanceOpt = False,
    *,
    opts: PlanOptions,
) -> None:
    """Move every replica off the brokers of RACK, rack-safe over the racks that remain.

    Exits 2 naming the partitions when the remaining brokers cannot hold their replication factor.
    """
    from kops.errors import BadInput
    from kops.placement.balancer import Goal

    if not rack.strip():
        raise BadInput("--rack: an empty rack name")
    _run_goal(c, lambda topo: Goal("drain-rack", rack=rack), opts, no_balance=no_balance)


@app.command("set-replication-factor")
@handle_errors
@cluster_command
def set_replication_factor(
    c: Context,
    topic: list[str] = typer.Option(..., "--topic", help="Topic (repeat, or comma-separate, for several)."),
    replication_factor: int = typer.Option(..., "--replication-factor", click_type=params.count(1, 32767),
                                           help="The new replication factor."),
    *,
    opts: PlanOptions,
) -> None:
    """Raise or lower the replication factor of topics: existing replicas stay, new ones go to the
    least-loaded brokers that keep each partition rack-safe; lowering drops replicas without copying."""
    from kops.errors import BadInput
    from kops.inputs import values
    from kops.placement.balancer import Goal

    names = tuple(values.check("--topic", values.topics, topic))
    if not names:
        raise BadInput("--topic: no topic names given")
    _run_goal(c, lambda topo: Goal("set-replication-factor", topics=names, replication_factor=replication_factor),
              opts)


@app.command("move-topics")
@handle_errors
@cluster_command
def move_topics(
    c: Context,
    topics_to_move_json_file: str = typer.Option(
        ..., "--topics-to-move-json-file", help='Kafka\'s {"topics":[{"topic":"foo"}],"version":1} file.'
    ),
    broker_list: str = typer.Option(..., "--broker-list", help="Brokers the topics may use, e.g. 0,1,2."),
    *,
    opts: PlanOptions,
) -> None:
    """Kafka's --generate inputs, minimal-movement answer: place the topics on --broker-list,
    keeping every replica that already sits on a listed broker where balance allows."""
    from kops.inputs.files import read_json
    from kops.model import parse_topics_to_move
    from kops.placement.balancer import Goal

    what = "--topics-to-move-json-file"
    data = read_json(topics_to_move_json_file, what=what)
    names = tuple(parse_topics_to_move(data, source=f"{what} {topics_to_move_json_file}"))
    ids = _ids_opt(broker_list, "--broker-list")
    _run_goal(c, lambda topo: Goal("move-topics", topics=names, brokers=ids), opts)
