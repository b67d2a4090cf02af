"""``kops logs merge / timeline``: the Spark pipeline over brokers' state-change logs.

Light imports only: pyspark and matplotlib are imported by the commands' bodies (via
:mod:`kops.pipeline`), so ``kops --help`` stays fast.

Here ``--output FILE`` names the output file (as the issue and Kafka's merger have it) and ``--format``
picks text/json/parquet; with no ``--output`` text goes to stdout. Human summaries go to stderr.
"""

from __future__ import annotations

import json
import sys
import time
from enum import Enum
from typing import Annotated

import typer

from kops.cli.common import handle_errors
from kops.errors import BadInput

app = typer.Typer(
    help=(
        "Merge and analyse brokers' state-change logs with Spark (local[*] by default, or any Spark "
        "master / spark-submit). Reads state-change.log and its rotated files (and controller.log "
        "when given) from every broker."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


class MergeFormat(str, Enum):
    text = "text"
    json = "json"
    parquet = "parquet"


class TableFormat(str, Enum):
    text = "text"
    json = "json"
    csv = "csv"
    parquet = "parquet"


LogsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--logs",
        help=(
            "A state-change.log file, a broker's log directory, or a glob (repeatable; comma-separated "
            "values are split). ID=PATH pins the broker id. Any Hadoop path (hdfs://, s3a://) works."
        ),
    ),
]
TopicOpt = Annotated[str | None, typer.Option("--topic", help="Only this topic.")]
TopicRegexOpt = Annotated[str | None, typer.Option("--topic-regex", help="Only topics fully matching this regex.")]
PartitionsOpt = Annotated[
    str | None, typer.Option("--partitions", help="Only these partitions, e.g. 0,1,2 or 0-5 (needs --topic/--topic-regex).")
]
StartOpt = Annotated[
    str | None,
    typer.Option("--start-time", help="Inclusive, 'yyyy-MM-dd HH:mm:ss,SSS' (log time) or ISO 8601."),
]
EndOpt = Annotated[str | None, typer.Option("--end-time", help="Inclusive, same forms as --start-time.")]
MasterOpt = Annotated[
    str | None,
    typer.Option(
        "--master",
        envvar="KOPS_SPARK_MASTER",
        help="Spark master URL (default local[*]; under spark-submit the submit's master).",
    ),
]
BrokerOfOpt = Annotated[
    str | None,
    typer.Option(
        "--broker-of",
        help=(
            "Regex with one group that reads the broker id from a file path (default: a directory "
            "named broker-N / kafka-N / logs-N / node-N / bN)."
        ),
    ),
]
ControllerOpt = Annotated[
    bool,
    typer.Option("--controller-log/--no-controller-log", help="Also read controller.log* from log directories."),
]
EventsOpt = Annotated[
    str | None, typer.Option("--events", help="Only these event types (comma-separated, e.g. leader_change,isr_change).")
]
BrokersOpt = Annotated[str | None, typer.Option("--brokers", help="Only lines written by these brokers (ids, comma-separated).")]
SummaryOpt = Annotated[
    str | None, typer.Option("--summary-json", help="Also write the run summary (counts, unparsed lines) as JSON to FILE ('-' = stderr).")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")]


PathsArg = Annotated[
    list[str] | None,
    typer.Argument(help="More logs (same forms as --logs), e.g. a shell glob /var/log/kafka/*/state-change.log*.", show_default=False),
]


def _split(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x for x in v.split(",") if x)
    return out


def _prepare(logs, topic, topic_regex, partitions, start_time, end_time, controller_log, events=None, brokers=None,
             broker_of=None):
    """Every input checked before Spark starts: the logs exist, the filters parse, the regexes
    compile by Java's rules."""
    from kops.pipeline import statechange as sc

    try:
        filters = sc.validate_filters(
            topic=topic, topic_regex=topic_regex, partitions=partitions, start_time=start_time,
            end_time=end_time, events=events, brokers=brokers, broker_of=broker_of,
        )
        sources = sc.expand_sources(_split(logs), include_controller=controller_log)
        sc.check_path_brokers(sources, broker_of)
    except sc.LogInputError as e:
        raise BadInput(str(e)) from None
    return sources, filters


def _check_outputs(output: str | None, fmt: str, *, directory: bool, chart: str | None = None,
                   summary_json: str | None = None) -> None:
    """Where the results go, checked before Spark starts (a remote path is Spark's to judge)."""
    from kops.inputs.files import CHART_FORMATS, output_dir, output_file
    from kops.pipeline.statechange import is_remote_path

    if output and output != "-" and not is_remote_path(output):
        if directory or output.endswith("/"):
            output_dir(output, what="--output")
        else:
            output_file(output, what="--output")
    if summary_json and summary_json != "-":
        output_file(summary_json, what="--summary-json")
    if chart:
        output_file(chart, what="--chart", formats=CHART_FORMATS)


def _global_json(ctx: typer.Context | None) -> bool:
    """``kops --output json logs ...``: the summary is the one JSON document on stdout (when the
    records do not go to stdout themselves)."""
    root = ctx.find_root().obj if ctx is not None else None
    out = getattr(root, "output", None)
    return getattr(out, "value", out) == "json"


def _summary(stats, *, quiet: bool, summary_json: str | None, elapsed: float, extra: dict | None = None,
             stdout_json: bool = False) -> None:
    doc = {"summary": stats.to_dict() | {"elapsed_s": round(elapsed, 2)} | (extra or {})}
    if stdout_json:
        from kops.cli.common import emit_json

        emit_json(doc)
    if summary_json:
        text = json.dumps(doc, indent=2, default=str)
        if summary_json == "-":
            sys.stderr.write(text + "\n")
        else:
            with open(summary_json, "w") as f:
                f.write(text + "\n")
    if quiet:
        return
    w = sys.stderr.write
    brokers = sorted({b for b in stats.file_brokers.values() if b is not None})
    unknown = [f for f, b in stats.file_brokers.items() if b is None]
    w(
        f"kops logs: {stats.lines} lines in {stats.files} files from brokers {brokers or '?'} "
        f"({stats.records} records, {stats.continuation_lines} continuation lines), "
        f"{stats.first_ts or '-'} .. {stats.last_ts or '-'}"
    )
    if stats.written is not None:
        w(f"; wrote {stats.written}")
    w(f" in {elapsed:.1f}s\n")
    if unknown:
        w(f"kops logs: no broker id for {len(unknown)} file(s) (use ID=PATH or --broker-of): {', '.join(unknown[:5])}\n")
    if stats.unparsed_lines:
        w(f"kops logs: {stats.unparsed_lines} line(s) do not follow the log4j layout [yyyy-MM-dd HH:mm:ss,SSS] LEVEL message (logger):\n")
        for s in stats.unparsed_samples:
            w(f"  {s['file']}:{s['line']}: {s['text'][:160]}\n")


def _stderr_joins_stdout(to_stdout: bool, summary_json: str | None, quiet: bool) -> bool:
    """Under ``spark-submit`` the Python driver's stderr is the same pipe as its stdout (Spark's
    ``PythonRunner`` merges them), so with the records on stdout a summary on stderr would land in
    the records: then no summary is written there (as ``-q``), and ``--summary-json -`` is refused."""
    from kops.pipeline.session import under_spark_submit

    if not (to_stdout and under_spark_submit()):
        return quiet
    if summary_json == "-":
        raise BadInput("--summary-json -: under spark-submit stderr is merged into stdout, where the records go; "
                       "give --summary-json FILE or --output")
    return True


def _open_out(output: str | None):
    if output is None or output == "-":
        return sys.stdout, False
    return open(output, "w", encoding="utf-8"), True


@app.command("merge")
@handle_errors
def merge(
    ctx: typer.Context,
    paths: PathsArg = None,
    logs: LogsOpt = None,
    topic: TopicOpt = None,
    topic_regex: TopicRegexOpt = None,
    partitions: PartitionsOpt = None,
    start_time: StartOpt = None,
    end_time: EndOpt = None,
    output: Annotated[
        str | None,
        typer.Option("--output", help="Output FILE (text/json) or directory (parquet, or any remote path). Default: stdout."),
    ] = None,
    fmt: Annotated[MergeFormat, typer.Option("--format", help="text (log lines prefixed broker=N), json (JSON lines), parquet (partitioned by date/topic).")] = MergeFormat.text,
    master: MasterOpt = None,
    broker_of: BrokerOfOpt = None,
    controller_log: ControllerOpt = False,
    events: EventsOpt = None,
    brokers: BrokersOpt = None,
    include_unparsed: Annotated[
        bool | None,
        typer.Option("--include-unparsed/--no-unparsed", help="Put unparsed lines (marked UNPARSED) at the end of the output; default: yes when no filter is given."),
    ] = None,
    summary_json: SummaryOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Merge the brokers' logs into one log in time order (ties: broker, file, line), broker id on every line."""
    t0 = time.time()
    sources, filters = _prepare((logs or []) + (paths or []), topic, topic_regex, partitions, start_time, end_time,
                                controller_log, events, brokers, broker_of)
    if fmt is MergeFormat.parquet and not output:
        raise BadInput("--format parquet needs --output DIR")
    _check_outputs(output, fmt.value, directory=fmt is MergeFormat.parquet, summary_json=summary_json)
    to_stdout = fmt is not MergeFormat.parquet and (not output or output == "-")
    quiet = _stderr_joins_stdout(to_stdout, summary_json, quiet)
    from kops.pipeline import statechange as sc
    from kops.pipeline.session import get_spark

    spark = get_spark(master, input_bytes=sc.local_bytes(sources))
    stats = sc.MergeStats()
    df = sc.merged_records(spark, sources, filters, stats, broker_of=broker_of, include_unparsed=include_unparsed)
    if fmt is MergeFormat.parquet:
        sc.write_parquet(df, output)
    elif output and (sc.is_remote_path(output) or output.endswith("/")):
        sc.write_spark_text(df, output, fmt.value, stats)
    elif output and output != "-" and spark.sparkContext.master.startswith("local"):
        stats.written = sc.write_local_file(df, output, fmt.value, stats)
    else:
        f, close = _open_out(output)
        n = 0
        try:
            for line in sc.iter_lines(df, fmt.value, stats):
                f.write(line)
                f.write("\n")
                n += 1
        except BrokenPipeError:  # | head
            pass
        finally:
            if close:
                f.close()
            else:
                try:
                    f.flush()
                except BrokenPipeError:
                    pass
        stats.written = n
    sc.settle(stats)  # the counts a single-read merge takes on the way
    sc.release_cached()
    _summary(stats, quiet=quiet, summary_json=summary_json, elapsed=time.time() - t0,
             stdout_json=_global_json(ctx) and not to_stdout)


@app.command("timeline")
@handle_errors
def timeline(
    ctx: typer.Context,
    paths: PathsArg = None,
    logs: LogsOpt = None,
    topic: TopicOpt = None,
    topic_regex: TopicRegexOpt = None,
    partitions: PartitionsOpt = None,
    start_time: StartOpt = None,
    end_time: EndOpt = None,
    output: Annotated[
        str | None,
        typer.Option("--output", help="Output directory for the tables (leadership/, isr/, broker_counts/); text to stdout without it."),
    ] = None,
    fmt: Annotated[TableFormat, typer.Option("--format", help="text (tables on stdout), json, csv, parquet.")] = TableFormat.text,
    chart: Annotated[str | None, typer.Option("--chart", help="Write a PNG of leadership per broker over time.")] = None,
    bucket: Annotated[str, typer.Option("--bucket", help="Time bucket of the per-broker counts, e.g. 10 seconds, 1 minute, 1 hour.")] = "1 minute",
    master: MasterOpt = None,
    broker_of: BrokerOfOpt = None,
    controller_log: ControllerOpt = False,
    summary_json: SummaryOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Per-partition leadership and ISR history, and per-broker leadership gained/lost over time."""
    t0 = time.time()
    sources, filters = _prepare((logs or []) + (paths or []), topic, topic_regex, partitions, start_time, end_time,
                                controller_log, broker_of=broker_of)
    if fmt is not TableFormat.text and not output:
        raise BadInput(f"--format {fmt.value} needs --output DIR")
    _check_outputs(output if fmt is not TableFormat.text else None, fmt.value, directory=True, chart=chart,
                   summary_json=summary_json)
    quiet = _stderr_joins_stdout(fmt is TableFormat.text, summary_json, quiet)
    from kops.pipeline import timeline as tl

    try:
        bucket_s = tl.parse_bucket(bucket)
    except ValueError as e:
        raise BadInput(str(e)) from None
    from kops.pipeline import statechange as sc
    from kops.pipeline.session import get_spark

    spark = get_spark(master, input_bytes=sc.local_bytes(sources))
    stats = sc.MergeStats()
    tables = tl.build_timeline(spark, sources, filters, stats, broker_of=broker_of, bucket_s=bucket_s)
    extra: dict = {}
    if fmt is TableFormat.text:
        tl.print_tables(tables, sys.stdout)
    else:
        extra["outputs"] = tl.write_tables(tables, output, fmt.value)
    if chart:
        extra["chart"] = tl.write_chart(tables, chart)
    sc.settle(stats)  # the counts a single-read merge takes on the way
    sc.release_cached()
    _summary(stats, quiet=quiet, summary_json=summary_json, elapsed=time.time() - t0, extra=extra,
             stdout_json=_global_json(ctx) and fmt is not TableFormat.text)
