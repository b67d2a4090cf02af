"""``kops reassign execute | verify | cancel | resume | list | generate``.

Thin: parse, call one service in :mod:`kops.ops.reassign`, render. Flags follow
``kafka-reassign-partitions.sh`` where it has the same flag.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any

import typer

from kops.cli import params
from kops.cli.common import (
    Context,
    cluster_command,
    emit_json,
    err_console,
    handle_errors,
)
from kops.cli.progress import ProgressStyle
from kops.errors import BadInput
from kops.inputs.values import human_bytes

app = typer.Typer(
    help=(
        "Kafka-compatible partition reassignment with throttles, waves, progress and a durable "
        "journal. Plans use Kafka's reassignment JSON, so kops and kafka-reassign-partitions.sh "
        "run each other's plans."
    ),
    no_args_is_help=True,
)

PlanFileOpt = Annotated[
    str,
    typer.Option("--reassignment-json-file", help="Plan in Kafka's reassignment JSON format."),
]
OptionalPlanFileOpt = Annotated[
    str | None,
    typer.Option("--reassignment-json-file", help="Plan in Kafka's reassignment JSON format."),
]
ExecutionIdOpt = Annotated[
    str | None,
    typer.Option("--execution-id", click_type=params.EXECUTION_ID,
                 help="A kops execution id (default: the current/latest one)."),
]
PollOpt = Annotated[
    float,
    typer.Option("--poll-interval", click_type=params.seconds(0.2, 3600.0), help="Seconds between progress checks."),
]
TimeoutSecondsOpt = params.seconds(1.0)
RateOpt = params.count(1, "INT64_MAX")
DiskReserveOpt = Annotated[
    float | None,
    typer.Option(
        "--disk-reserve", click_type=params.number(0.0, 100.0), metavar="PCT",
        help="Percent of each destination volume to keep free: a plan (or a later wave) whose data "
             "would not fit in the usable bytes minus this is refused (default 5; resume: the "
             "execution's).",
    ),
]
DiskThresholdExecOpt = Annotated[
    float | None,
    typer.Option(
        "--disk-threshold", click_type=params.number(1.0, 100.0), metavar="PCT",
        help="How full a destination's volume may be at the peak of the move (both copies held until "
             "a move ends): a plan or a later wave that would pass it is refused (default 80, as the "
             "planners; 100: only the reserve; brokers sharing one volume are held to the reserve only; "
             "resume: the execution's).",
    ),
]


ProgressOpt = Annotated[
    ProgressStyle,
    typer.Option(
        "--progress", case_sensitive=False,
        help="How progress shows on stderr while waiting: auto (a bar on a terminal, a line per change "
             "otherwise), bar, lines, json (one JSON object per line and per poll: partitions and bytes "
             "done, the copy rate over the last 30 s, the throttle; for a program watching the "
             "execution) or none.",
    ),
]


@dataclass(frozen=True)
class DriveOptions:
    """How an execution is driven, as ``reassign execute`` and ``reassign resume`` both take it,
    declared once: a command's ``drive: DriveOptions`` parameter stands for these options (see
    :func:`kops.cli.common.cluster_command`)."""

    poll_interval: PollOpt = 2.0
    probe_topic: params.ProbeTopicOpt = None
    disk_reserve: DiskReserveOpt = None
    disk_threshold: DiskThresholdExecOpt = None
    progress: ProgressOpt = ProgressStyle.auto

    def execute_options(self) -> dict:
        """These options as :class:`kops.ops.reassign.ExecuteOptions` takes them."""
        return {"poll_interval_s": self.poll_interval, "disk_reserve_pct": self.disk_reserve,
                "disk_threshold_pct": self.disk_threshold, "probe_topic": self.probe_topic}


class Via(str, Enum):
    admin = "admin"
    zookeeper = "zookeeper"


class Strategy(str, Enum):
    minimal = "minimal"
    kafka = "kafka"


def _rate_words(opts) -> str:
    """The rate an estimate assumes: the fixed throttle, or the adaptive one's minimum."""
    rate = f"{human_bytes(opts.throttle)}/s"
    return rate + (f" (--throttle {opts.auto_throttle}: its minimum, where it starts)" if opts.auto_throttle else "")


def _read_plan(c, path: str):
    """The plan file, checked completely before connecting; when it has problems, the cluster
    (if it answers at once) adds the topics, partitions and brokers that do not exist."""
    from kops.cli.common import refuse
    from kops.inputs.files import read_json
    from kops.model import parse_plan
    from kops.ops.validate import reference_problems

    what = "--reassignment-json-file"
    parsed = parse_plan(read_json(path, what=what), source=f"{what} {path}", allow_empty=False)
    if parsed.problems and parsed.refs:
        refuse(c, parsed.problems, lambda topo: reference_problems(parsed.refs, topo))
    parsed.problems.raise_if_any()
    return parsed.plan


def _reporter(drive: DriveOptions):
    from kops.cli.progress import make_reporter

    return make_reporter(style=drive.progress)


def _render_outcome(c, outcome) -> None:
    if c.json:
        emit_json(outcome.to_dict())
        return
    con = err_console()
    con.print(outcome.message, markup=False, highlight=False)
    left = outcome.journal.throttles.describe()
    if left and outcome.finished:
        con.print("throttles still set by kops: " + "; ".join(left), markup=False)


@app.command()
@handle_errors
@cluster_command
def execute(
    c: Context,
    reassignment_json_file: PlanFileOpt,
    throttle: params.ExecThrottleOpt = None,
    replica_alter_log_dirs_throttle: Annotated[
        int | None,
        typer.Option("--replica-alter-log-dirs-throttle", click_type=RateOpt,
                     help="Throttle for moves between log dirs, bytes/s."),
    ] = None,
    max_moves_per_broker: Annotated[
        int | None,
        typer.Option("--max-moves-per-broker", click_type=params.count(1),
                     help="At most N data-copying moves per broker at a time."),
    ] = None,
    max_moves_in_flight: Annotated[
        int | None,
        typer.Option("--max-moves-in-flight", click_type=params.count(1),
                     help="At most M data-copying moves in the cluster at a time."),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Drive every wave and wait until done; then lift the throttles.")] = False,
    timeout: Annotated[
        float | None, typer.Option("--timeout", click_type=TimeoutSecondsOpt,
                                   help="With --wait: stop waiting after S seconds (exit 3).")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate everything, then show the waves in order, the throttles "
                           "per broker and topic, bytes per destination, the estimated duration and each "
                           "destination's disk before / at the peak / after; change nothing (exit 0).")
    ] = False,
    allow_offline: Annotated[
        bool, typer.Option("--allow-offline", help="Start even if target brokers are down or partitions are offline.")
    ] = False,
    via: Annotated[
        Via,
        typer.Option("--via", help="admin: AlterPartitionReassignments (default); zookeeper: "
                     "/admin/reassign_partitions as on legacy ZooKeeper clusters (needs --zookeeper; "
                     "refused on a KRaft cluster)."),
    ] = Via.admin,
    *,
    drive: DriveOptions,
) -> None:
    """Start the plan: validate it all first (exit 2, nothing changed, on any bad entry or if
    its data would not fit on a destination disk), set throttles on the brokers and replicas
    in flight, start moves in waves within the limits (health and disk check before each
    wave), and record everything in the journal. Without --wait it returns once the first
    wave started (follow with verify; resume drives further waves). Exit 0 done/started, 1
    failure or halted by the health or disk check, 2 bad plan, 3 not done in --timeout or
    another execution is running."""
    from kops.ops import reassign
    opts = reassign.ExecuteOptions(
        **reassign.ExecuteOptions.rate(throttle), log_dir_throttle=replica_alter_log_dirs_throttle,
        max_moves_per_broker=max_moves_per_broker, max_moves_in_flight=max_moves_in_flight,
        wait=wait, timeout_s=timeout, allow_offline=allow_offline, via=via.value, **drive.execute_options(),
    )
    opts.check(zookeeper=bool(c.zookeeper))
    plan = _read_plan(c, reassignment_json_file)
    with c.connection() as conn:
        if opts.via == "zookeeper":
            conn.require_zookeeper_mode("--via zookeeper")  # KRaft: exit 2 before anything else
        prepared = reassign.prepare(conn, plan, opts)
        if dry_run:
            from kops.ops.dryrun import simulate

            _render_dry_run(c, simulate(prepared, opts), prepared, opts)
            raise typer.Exit(0)
        _confirm(c, prepared, opts, yes)
        outcome = reassign.start(conn, prepared, opts, reporter=_reporter(drive))
    _render_outcome(c, outcome)
    raise typer.Exit(outcome.exit_code)


def _render_dry_run(c, doc: dict, prepared, opts) -> None:
    """The dry run: one JSON document, or readable lines on stderr."""

    if c.json:
        emit_json(doc)
        return
    con = err_console()

    def say(text: str) -> None:
        con.print(text, markup=False, highlight=False)

    est = doc["estimated_seconds"]
    say(f"dry run: {doc['partitions']} partitions change ({doc['data_moves']} copy data, {doc['reorders']} "
        f"reorders only), {len(doc['waves'])} wave(s)"
        + (f", {human_bytes(doc['bytes_to_move'])} to copy" if doc["bytes_to_move"] is not None else "")
        + (f", about {est:.0f} s at {_rate_words(opts)}" if est is not None else ""))
    for w in doc["waves"]:
        names = [f"{p['topic']}-{p['partition']}" for p in w["partitions"]]
        start = f" (after ~{w['starts_after_s']:.0f} s)" if w["starts_after_s"] else ""
        say(f"wave {w['wave']}{start}: {len(names)} partitions, {human_bytes(w['bytes'])}: "
            + ", ".join(names[:12]) + (f" ... and {len(names) - 12} more" if len(names) > 12 else ""))
        for b, cfg in w["throttles"]["brokers"].items():
            say(f"  throttle broker {b}: " + ", ".join(f"{k}={v}" for k, v in cfg.items()))
        for t, cfg in w["throttles"]["topics"].items():
            say(f"  throttle topic {t}: " + ", ".join(f"{k}={v}" for k, v in cfg.items()))
    if doc["bytes_by_destination"]:
        say("bytes per destination broker: " + ", ".join(f"{b}: {human_bytes(n)}"
                                                         for b, n in doc["bytes_by_destination"].items()))
    for d in doc["disk"]:
        say(f"broker {d['broker']} disk: {human_bytes(d['used_before'])} used before, {human_bytes(d['used_peak'])} "
            f"at the peak ({d['peak_pct']} % of {human_bytes(d['total_bytes'])}), {human_bytes(d['used_after'])} after")
    for line in _disk_lines(prepared, opts):
        say(line)
    say("nothing was changed (dry run)")


def _disk_lines(prepared, opts) -> list[str]:
    """The destination disks: the tightest fit, and what could not be checked."""

    disk = prepared.disk
    if disk is None:
        return []
    lines = []
    if disk.stages > 1:
        late = sorted({f.broker for f in disk.overflows})
        lines.append(
            f"destination disks: {len(disk.figures)} log dir(s) checked ({disk.rule()}); not all at once: the plan "
            f"runs in {disk.stages} disk stages, broker(s) {','.join(map(str, late))} receiving data only once "
            "moves off them have ended"
        )
    elif disk.figures:
        f = min(disk.figures, key=lambda f: (f.room_bytes - f.needed_bytes, f.broker))
        peak = [x.peak_pct for x in disk.figures if x.threshold_pct is not None and x.peak_pct is not None]
        lines.append(
            f"destination disks: {len(disk.figures)} log dir(s) checked, all fit keeping {opts.reserve_pct:g} % "
            f"free (tightest: broker "
            f"{f.broker} {f.log_dir}, {human_bytes(f.needed_bytes)} of {human_bytes(f.room_bytes)} room)"
            + (f"; at the peak of the move at most {max(peak):.1f} % full (threshold {opts.threshold_pct:g} %, "
               "--disk-threshold)" if peak else "")
        )
    lines.extend(f"warning: disk check: {w}" for w in disk.warnings)
    return lines


def _confirm(c, prepared, opts, yes: bool) -> None:

    work = prepared.work
    data = [m for m in work if m.moves_data]
    b = prepared.bytes_to_move
    lines = [
        f"{len(work)} of {len(prepared.moves)} partitions change ({len(data)} copy data"
        + (f", {human_bytes(b)} to copy" if b is not None else "") + ")",
    ]
    est = prepared.estimated_seconds(opts.throttle)
    if est:
        lines.append(f"at {_rate_words(opts)} per broker that takes at least {est:.0f} s "
                     "(without waves)")
    lines.extend(_disk_lines(prepared, opts))
    lines.append("Current assignment (save it to roll back): "
                 + _rollback_json(prepared))
    con = err_console()
    for line in lines:
        con.print(line, markup=False, highlight=False)
    if yes or not work:
        return
    if not sys.stdin.isatty():
        raise BadInput("refusing to start without --yes when not run from a terminal")
    if not typer.confirm("Start the reassignment?", err=True):
        raise typer.Exit(1)


def _rollback_json(prepared) -> str:
    import json

    return json.dumps({"version": 1, "partitions": [
        {"topic": m.topic, "partition": m.partition, "replicas": list(m.original),
         "log_dirs": ["any"] * len(m.original)} for m in prepared.moves]}, separators=(",", ":"))


@app.command()
@handle_errors
@cluster_command
def verify(
    c: Context,
    reassignment_json_file: OptionalPlanFileOpt = None,
    preserve_throttles: Annotated[
        bool, typer.Option("--preserve-throttles", help="Do not lift kops' throttles even if everything is complete.")
    ] = False,
    execution_id: ExecutionIdOpt = None,
) -> None:
    """Per partition: complete, in progress, waiting for a later wave, or mismatch. Lifts the
    throttles kops set as their moves finish (never others'). Exit 0 complete, 3 in progress,
    1 mismatch."""
    from kops.ops import reassign
    plan = _read_plan(c, reassignment_json_file) if reassignment_json_file else None
    with c.connection() as conn:
        res = reassign.verify(conn, plan, preserve_throttles=preserve_throttles, execution_id=execution_id)
    if c.json:
        emit_json(res.to_dict())
    else:
        out = typer.echo
        out("Status of partition reassignment:")
        for s in res.statuses:
            out(s.message())
        con = err_console()
        if res.throttles_removed:
            con.print("Removed kops throttles: " + "; ".join(res.throttles_removed), markup=False)
        for n in res.notes:
            con.print(n, markup=False, highlight=False)
    raise typer.Exit(res.exit_code)


@app.command()
@handle_errors
@cluster_command
def cancel(
    c: Context,
    reassignment_json_file: OptionalPlanFileOpt = None,
    preserve_throttles: Annotated[bool, typer.Option("--preserve-throttles", help="Leave kops' throttles set.")] = False,
    execution_id: ExecutionIdOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", click_type=TimeoutSecondsOpt,
                                           help="Seconds to wait for the rollback.")] = 60.0,
    every: Annotated[bool, typer.Option("--all", help="Cancel every reassignment in flight, whoever started it, "
                                                      "and close every unfinished kops execution.")] = False,
    force: Annotated[bool, typer.Option("--force", help="With --all: cancel even under a kops execution that is "
                                                        "still running.")] = False,
) -> None:
    """Cancel what kops started (its current execution), the plan's partitions, or with --all
    every reassignment in flight: moves in flight roll back to their original replicas (KIP-455),
    including moves that only add replicas; waves not started are dropped; the original replica
    order is put back where kops' journal knows it (--all says which partitions it does not
    know); kops' throttles are lifted. --all refuses (exit 3, nothing changed) while a kops
    execution is running, unless --force."""
    from kops.ops import reassign
    plan = _read_plan(c, reassignment_json_file) if reassignment_json_file else None
    with c.connection() as conn:
        res = reassign.cancel(conn, plan, preserve_throttles=preserve_throttles, execution_id=execution_id,
                       timeout_s=timeout, every=every, force=force)
    if c.json:
        emit_json(res.to_dict())
    else:
        out = typer.echo
        if res.cancelled:
            out("Successfully cancelled partition reassignments for: " + ",".join(res.cancelled))
        else:
            out("None of the specified partition reassignments are active.")
        if res.dropped:
            out(f"Dropped {len(res.dropped)} partition(s) waiting for later waves.")
        if res.reordered:
            out("Restored the original replica order of: " + ",".join(res.reordered))
        if every and res.executions:
            out("Closed kops executions: " + ",".join(res.executions))
        con = err_console()
        for e in res.errors:
            con.print(f"error: {e}", markup=False)
        if res.throttles_removed:
            con.print("Removed kops throttles: " + "; ".join(res.throttles_removed), markup=False)
        for n in res.notes:
            con.print(n, markup=False, highlight=False)
    raise typer.Exit(res.exit_code)


@app.command()
@handle_errors
@cluster_command
def resume(
    c: Context,
    execution_id: ExecutionIdOpt = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Drive it to the end (default) or one step.")] = True,
    timeout: Annotated[float | None, typer.Option("--timeout", click_type=TimeoutSecondsOpt,
                                                  help="Stop waiting after S seconds (exit 3).")] = None,
    throttle: Annotated[Any, typer.Option(
        "--throttle", click_type=params.Checked("RATE|auto[:MIN-MAX]", "throttle_rate"),
        help="Change the throttle: bytes/s per broker (a fixed rate ends an adaptive one), or auto[:MIN-MAX] "
             "(an adaptive throttle continues at the execution's last rate). Default: the execution's.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Take over even if the owner looks alive.")] = False,
    *,
    drive: DriveOptions,
) -> None:
    """Continue an execution that was interrupted (kops killed, --timeout, health or disk
    stop) from its journal in the cluster: re-applies its throttles, starts the remaining
    waves (each after the health and disk checks), waits, and lifts the throttles at the end."""
    from kops.ops import reassign
    opts = reassign.ExecuteOptions(**reassign.ExecuteOptions.rate(throttle), wait=wait, timeout_s=timeout,
                                   **drive.execute_options())
    with c.connection() as conn:
        outcome = reassign.resume(conn, opts, execution_id=execution_id, reporter=_reporter(drive), force=force)
    _render_outcome(c, outcome)
    raise typer.Exit(outcome.exit_code)


@app.command("list")
@handle_errors
@cluster_command
def list_(
    c: Context,
    watch: Annotated[bool, typer.Option(
        "--watch", help="Read again every --interval seconds until no reassignment is in flight (or Ctrl-C), "
                        "with how fast each broker receives (as a destination) and sends (as the leader) the "
                        "data of the moves, from the new replicas' growth on disk.")] = False,
    interval: Annotated[float, typer.Option(
        "--interval", click_type=params.seconds(1.0, 3600.0), help="Seconds between reads with --watch.")] = 5.0,
) -> None:
    """Ongoing reassignments (replicas, adding, removing) and which kops execution started them;
    --watch follows them with each broker's in/out rate."""
    from kops.ops import reassign
    if watch and c.json:
        raise BadInput("--watch draws for people; with --output json, poll `kops reassign list --output json`, "
                       "or follow a kops execution with `kops reassign execute|resume --wait --progress json`")
    with c.connection() as conn:
        if watch:
            _watch(conn, interval)
            return
        doc = reassign.list_all(conn)
    if c.json:
        emit_json(doc)
        return
    for line in _list_lines(doc):
        typer.echo(line)
    _list_notes(doc)


def _list_lines(doc: dict) -> list[str]:
    if not doc["reassignments"]:
        return ["No partition reassignments found."]
    lines = ["Current partition reassignments:"]
    for r in doc["reassignments"]:
        line = f"{r['topic']}-{r['partition']}: replicas: {','.join(map(str, r['replicas']))}."
        if r["adding"]:
            line += f" adding: {','.join(map(str, r['adding']))}."
        if r["removing"]:
            line += f" removing: {','.join(map(str, r['removing']))}."
        if r["kops_execution"]:
            line += f" (kops {r['kops_execution']})"
        lines.append(line)
    return lines


def _list_notes(doc: dict) -> None:
    for j in doc["kops_executions"]:
        o = j["owner"]
        progress = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in j["progress"].items()) or "no moves"
        rate = f", throttle {human_bytes(j['throttle'])}/s" if j.get("throttle") else ""
        if j.get("throttle_auto"):
            bounds = j["throttle_auto"]
            rate += f" (auto {human_bytes(bounds['min'])}/s-{human_bytes(bounds['max'])}/s" + (
                f"; last change {j['throttle_last_change']}" if j.get("throttle_last_change") else "") + ")"
        err_console().print(
            f"kops execution {j['id']}: {j['state']} ({progress}{rate}), by {o.get('user')}@{o.get('host')} "
            f"pid {o.get('pid')}, updated {j['updated_at']}", markup=False)
    for w in doc["warnings"]:
        err_console().print(f"warning: {w}", markup=False)


def _flow_lines(flows: dict) -> list[str]:
    """Per broker: what it receives and sends for the moves (``-``: nothing measured yet)."""
    if not flows:
        return ["brokers: no data copied since the last read"]
    lines = ["broker   in (as destination)   out (as leader)"]
    for b, f in flows.items():
        rate_in = f"{human_bytes(f.in_bps)}/s" if f.in_bps else "-"
        rate_out = f"{human_bytes(f.out_bps)}/s" if f.out_bps else "-"
        lines.append(f"{b:>6}   {rate_in:>19}   {rate_out:>15}")
    return lines


def _watch(conn, interval: float) -> None:
    """Refresh until no reassignment is in flight: a live view on a terminal, a block of lines
    per read otherwise (logs stay readable). kops' one polling loop runs the reads (fixed rate;
    a read that fails transiently is tried again at the next one)."""
    from datetime import datetime

    from kops.cli.common import out_console
    from kops.ops import reassign
    from kops.ops.progress import poll
    from kops.ops.reassign.watch import broker_flows, sample

    con = out_console()
    live = None
    if sys.stdout.isatty():
        from rich.live import Live

        live = Live(console=con, auto_refresh=False)
        live.start()
    seen: dict = {"before": None}

    def read() -> dict:
        doc = reassign.list_all(conn)
        now, before = sample(conn, doc["reassignments"]), seen["before"]
        head = f"{datetime.now().strftime('%H:%M:%S')}  {len(doc['reassignments'])} reassignments in flight"
        flows = ["brokers: measured from the next read on"] if before is None else _flow_lines(broker_flows(before, now))
        lines = [head, *(flows if doc["reassignments"] else []), *_list_lines(doc)]
        if live is not None:
            from rich.text import Text

            live.update(Text("\n".join(lines)), refresh=True)
        else:
            con.print("\n".join(lines) + "\n", markup=False, highlight=False)
        seen["before"] = now
        return doc

    try:
        doc, _ = poll(read, lambda d: not d["reassignments"], interval_s=interval)
    finally:
        if live is not None:
            live.stop()
    if doc is not None:
        _list_notes(doc)


@app.command()
@handle_errors
@cluster_command
def generate(
    c: Context,
    topics_to_move_json_file: Annotated[
        str, typer.Option("--topics-to-move-json-file", help='{"topics":[{"topic":"foo"}],"version":1}')
    ],
    broker_list: Annotated[str, typer.Option("--broker-list", help='Brokers to place the topics on, e.g. "0,1,2".')],
    strategy: Annotated[
        Strategy, typer.Option("--strategy", help="minimal (fewest moves, rack-safe; default) or kafka (Kafka's --generate).")
    ] = Strategy.minimal,
    disable_rack_aware: Annotated[
        bool, typer.Option("--disable-rack-aware", help="With --strategy kafka: ignore racks, as Kafka's flag.")
    ] = False,
    topology: Annotated[
        str | None, typer.Option("--topology", help="Plan on a topology snapshot instead of a live cluster.")
    ] = None,
) -> None:
    """Print the current and the proposed assignment of the topics, in Kafka's format, like
    kafka-reassign-partitions.sh --generate. Changes nothing; review, save the proposed JSON and
    run it with execute."""
    from kops.cli.common import load_topology
    from kops.inputs.files import read_json
    from kops.model import parse_broker_list, parse_topics_to_move
    from kops.ops.generate import generate as gen

    what = "--topics-to-move-json-file"
    data = read_json(topics_to_move_json_file, what=what)
    topics = parse_topics_to_move(data, source=f"{what} {topics_to_move_json_file}")
    brokers = parse_broker_list(broker_list)
    topo = load_topology(c, topology, with_zookeeper=False)
    g = gen(topo, topics, brokers, strategy=strategy.value, rack_aware=not disable_rack_aware)
    if c.json:
        emit_json(g.to_dict())
        return
    typer.echo("Current partition replica assignment")
    typer.echo(g.current.to_json())
    typer.echo("")
    typer.echo("Proposed partition reassignment configuration")
    typer.echo(g.proposed.to_json())
    r = g.report
    err_console().print(
        f"{r['partitions_changed']} of {r['partitions']} partitions change; {r['replicas_moved']} replicas "
        f"move" + (f" ({r['bytes_moved']} bytes)" if r["bytes_moved"] is not None else "")
        + f" [strategy {g.strategy}]", markup=False)
