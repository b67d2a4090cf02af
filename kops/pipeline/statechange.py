"""Read, parse, filter and merge brokers' state-change logs with Spark's DataFrame API.

Pipeline (one shuffle: the final sort):

1. ``read_sources`` — ``spark.read.text`` per group of files, with the file path, the start of the file
   split and ``monotonically_increasing_id`` (increasing inside a split, so ``(file, split, id)`` is the
   file order).
2. ``line_numbers`` — a tiny per-split aggregate (one row per split, collected) gives each split's
   first line number; ``line = offset + id - min_id + 1`` is then exact with no shuffle. The same pass
   counts lines, record starts, continuation lines and lines that break the layout.
3. ``parse`` — ``regexp_extract``/``rlike`` with the patterns of :mod:`kops.pipeline.logformat`.
4. Continuation lines (stack traces) are attached to the record above them: runs of continuation
   lines are found on the (small) set of continuation lines, and joined to their record's first line.
5. ``merge`` — filter, then sort by (time, broker, file, record line, line): the records go to time
   ranges of roughly equal size, drawn from the first pass's per-split first and last times (no
   sampling pass over the input, which Spark's range partitioning would run), and each range is sorted.
"""

from __future__ import annotations

import glob as _glob
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kops.pipeline import logformat as lf
from kops.pipeline.order import in_merge_order, sort_keys

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

STATE_CHANGE_GLOB = "state-change.log*"
CONTROLLER_GLOB = "controller.log*"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_EXPLICIT = re.compile(r"^(\d+)=(.+)$")
# above this many continuation lines, they are joined with a shuffle instead of a broadcast
BROADCAST_CONTINUATIONS = 2_000_000


#: how ``--topic-regex`` runs (Java's regex, through Spark's rlike): it must match whole names
TOPIC_REGEX_WRAP = "^(?:{})$"


class LogInputError(ValueError):
    """Bad --logs / filter input (the CLI maps it to exit code 2)."""


@dataclass
class LogSource:
    paths: list[str]
    broker: int | None = None  # explicit ID=PATH mapping


@dataclass
class Filters:
    topic: str | None = None
    topic_regex: str | None = None
    partitions: list[int] | None = None
    start: str | None = None  # normalized 'yyyy-MM-dd HH:mm:ss,SSS'
    end: str | None = None
    events: list[str] | None = None
    brokers: list[int] | None = None

    @property
    def active(self) -> bool:
        return any(v for v in asdict(self).values())


@dataclass
class MergeStats:
    files: int = 0
    splits: int = 0
    lines: int = 0
    records: int = 0
    continuation_lines: int = 0
    unparsed_lines: int = 0
    unparsed_samples: list[dict] = field(default_factory=list)
    first_ts: str | None = None
    last_ts: str | None = None
    file_brokers: dict[str, int | None] = field(default_factory=dict)
    written: int | None = None
    #: per file split: (first time, last time, lines), times as yyyyMMddHHmmssSSS; where the sort's
    #: time ranges are drawn from (not part of the summary)
    split_times: list[tuple[int, int, int]] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["split_times"]
        return d


# -- inputs ----------------------------------------------------------------------------------
def _is_remote(p: str) -> bool:
    return bool(_SCHEME.match(p)) and not p.startswith("file://")


def _local(p: str) -> str:
    return p[len("file://"):] if p.startswith("file://") else p


def expand_sources(specs: list[str], *, include_controller: bool = False) -> list[LogSource]:
    """``--logs`` values -> groups of concrete paths.

    A value is a file, a directory (its ``state-change.log*``, plus ``controller.log*`` with
    ``include_controller``), or a glob; ``ID=PATH`` pins the broker id of those files. Remote
    (``hdfs://``, ``s3a://`` ...) values go to Spark unchanged (Spark expands their globs); a remote
    value ending in ``/`` means that directory's state-change logs.
    """
    out: list[LogSource] = []
    for spec in specs:
        broker = None
        m = _EXPLICIT.match(spec)
        if m:
            from kops.inputs import values as V

            try:
                broker, spec = V.broker_id(m.group(1)), m.group(2)
            except V.Invalid as e:
                raise LogInputError(f"--logs {spec[:60]!r}: {e}") from None
        if _is_remote(spec):
            paths = [spec + STATE_CHANGE_GLOB] if spec.endswith("/") else [spec]
            if spec.endswith("/") and include_controller:
                paths.append(spec + CONTROLLER_GLOB)
            out.append(LogSource(paths, broker))
            continue
        p = _local(spec)
        if os.path.isdir(p):
            # the directory and the directories below it (a fleet / sandbox root with one dir per broker)
            found = sorted(_glob.glob(os.path.join(p, "**", STATE_CHANGE_GLOB), recursive=True))
            if include_controller:
                found += sorted(_glob.glob(os.path.join(p, "**", CONTROLLER_GLOB), recursive=True))
            found = [f for f in found if os.path.isfile(f)]
            if not found:
                raise LogInputError(f"no state-change.log* in directory {spec} or below it")
        elif _glob.has_magic(p):
            found = sorted(f for f in _glob.glob(p, recursive=True) if os.path.isfile(f))
            if not found:
                raise LogInputError(f"no file matches {spec}")
        elif os.path.isfile(p):
            found = [p]
        else:
            raise LogInputError(f"no such file or directory: {spec}")
        found = [os.path.abspath(f) for f in found]
        out.append(LogSource(found, broker))
    if not out:
        raise LogInputError("no logs given: pass --logs PATH_OR_GLOB (repeatable)")
    return out


def validate_filters(
    *,
    topic: str | None,
    topic_regex: str | None,
    partitions: str | None,
    start_time: str | None,
    end_time: str | None,
    events: str | None = None,
    brokers: str | None = None,
    broker_of: str | None = None,
) -> Filters:
    """The filters, checked (:class:`LogInputError`); the regexes (``--topic-regex``,
    ``--broker-of``) by Java's rules, as Spark will run them (:class:`~kops.errors.BadInput`)."""
    from kops.inputs import javaregex
    from kops.inputs import values as V

    if topic and topic_regex:
        raise LogInputError("give --topic or --topic-regex, not both")
    if topic:
        why = V.topic_problem(topic)
        if why:
            raise LogInputError(f"--topic: {why}")
    regexes = {k: v for k, v in (("--topic-regex", topic_regex), ("--broker-of", broker_of)) if v is not None}
    if regexes:
        javaregex.check(regexes, wrap={"--topic-regex": TOPIC_REGEX_WRAP}, groups={"--broker-of": 1})
    parts = None
    if partitions:
        if not (topic or topic_regex):
            raise LogInputError("--partitions needs --topic or --topic-regex (as Kafka's merger)")
        try:
            parts = lf.parse_partitions(partitions)
        except ValueError as e:
            raise LogInputError(f"bad --partitions: {e}") from None
    try:
        start = lf.normalize_time(start_time) if start_time else None
        end = lf.normalize_time(end_time, end=True) if end_time else None
    except ValueError as e:
        raise LogInputError(str(e)) from None
    if start and end and start > end:
        raise LogInputError(f"--start-time {start} is after --end-time {end}")
    ev = None
    if events:
        known = {name for name, _ in lf.EVENTS} | {"other"}
        ev = [e.strip() for e in events.split(",") if e.strip()]
        bad = [e for e in ev if e not in known]
        if bad:
            raise LogInputError(f"unknown event(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")
    br = None
    if brokers:
        try:
            br = sorted(V.broker_ids(brokers))
        except V.Invalid as e:
            raise LogInputError(f"bad --brokers: {e}") from None
    return Filters(topic=topic, topic_regex=topic_regex, partitions=parts, start=start, end=end, events=ev, brokers=br)


# -- Spark -----------------------------------------------------------------------------------
def _F():
    from pyspark.sql import functions as F

    return F


def _could_match(col: Column, pattern: str) -> Column | None:
    """A cheap necessary condition for ``pattern`` to match ``col``: it contains one of the
    pattern's required texts (a byte search on Spark's own string, where every regex call first
    decodes the line into a Java string).  None when the pattern has no such text worth testing."""
    lits = lf.required_literals(pattern)
    if not lits or min(map(len, lits)) < 3:
        return None
    cond = col.contains(lits[0])
    for x in lits[1:]:
        cond = cond | col.contains(x)
    return cond


def _rlike(col: Column, pattern: str) -> Column:
    guard = _could_match(col, pattern)
    return col.rlike(pattern) if guard is None else guard & col.rlike(pattern)


def _extract(col: Column, pattern: str, idx: int) -> Column:
    """``regexp_extract`` with "" (no match) as null, the regex run only where it can match."""
    F = _F()
    got = F.nullif(F.regexp_extract(col, pattern, idx), F.lit(""))
    guard = _could_match(col, pattern)
    return got if guard is None else F.when(guard, got)


def _first_of(col: Column, patterns: list[str], idx: int = 1) -> Column:
    return _F().coalesce(*[_extract(col, p, idx) for p in patterns])


_CACHED: list = []


def release_cached() -> None:
    """Unpersist the small DataFrames a merge cached (per-split counts, continuation lines)."""
    while _CACHED:
        try:
            _CACHED.pop().unpersist()
        except Exception:  # the session may be gone
            pass


def _cache(df: DataFrame) -> DataFrame:
    df = df.cache()
    _CACHED.append(df)
    return df


def read_sources(spark: SparkSession, sources: list[LogSource]) -> DataFrame:
    """Raw lines: file, block_start, id, value, given_broker (``ID=PATH``'s id, else null; the broker
    of a path is read once per file split by :func:`number_lines`, not once per line).

    Every call's plan carries a fresh token, so that a DataFrame cached by an earlier merge in the same
    session (over files that may have grown, or with other split sizes) is never reused for this one.
    """
    import uuid

    F = _F()
    token = uuid.uuid4().hex
    dfs = []
    for src in sources:
        df = spark.read.option("lineSep", "\n").text(src.paths)
        dfs.append(
            df.select(
                F.col("_metadata.file_path").alias("file"),
                F.col("_metadata.file_block_start").alias("block_start"),
                F.monotonically_increasing_id().alias("id"),
                F.col("value"),
                F.lit(src.broker).cast("int").alias("given_broker"),
                F.lit(token).alias("_run"),
            )
        )
    out = dfs[0]
    for d in dfs[1:]:
        out = out.unionByName(d)
    return out


def _msg_broker(value: Column) -> Column:
    """The writer's id from the message prefix, read on the raw line (anchored regexes: they stop early).

    Both patterns match before the line's second ``]`` (the time's and the prefix's own), so they
    run on that much of the line only."""
    F = _F()
    head = F.substring_index(value, "]", 2)
    lead = r"^\[" + lf.TS_RE + r"\] [A-Z]+ "
    return F.coalesce(
        F.nullif(F.regexp_extract(head, lead + r"\[(?:Broker|Controller) id=(\d+)", 1), F.lit("")),
        F.nullif(F.regexp_extract(head, lead + lf.OTHER_PREFIX_RE[1:], 1), F.lit("")),
    ).cast("int")


def layout_fields(v: Column) -> tuple[Column, Column, Column]:
    """(level, message, logger) of a line that follows the layout (LINE_RE), cut out by position:
    the same as LINE_RE's groups 2, 3 and 4, with no second regex over the line.  The logger holds
    no " " nor "(", so the last " (" of the line opens it."""
    F = _F()
    level = F.substring_index(F.substring(v, 27, 6), " ", 1)  # after '[' + 23-char time + '] '
    msg_at = F.length(level) + 28
    tail = F.substring_index(v, " (", -1)  # 'logger)' (+ a final line terminator)
    msg = v.substr(msg_at, F.length(v) - F.length(tail) - 1 - msg_at)
    return level, msg, F.substring_index(tail, ")", 1)


def _ts_long(ts: Column) -> Column:
    """``yyyy-MM-dd HH:mm:ss,SSS`` as the long yyyyMMddHHmmssSSS (same order; a fixed-width value, so
    the per-split aggregate stays a hash aggregate instead of sorting every line)."""
    return _F().translate(ts, "- :,", "").cast("long")


def _ts_text(n: int | None) -> str | None:
    if n is None:
        return None
    s = f"{n:017d}"
    return f"{s[0:4]}-{s[4:6]}-{s[6:8]} {s[8:10]}:{s[10:12]}:{s[12:14]},{s[14:17]}"


def paths_name_brokers(sources: list[LogSource], broker_of: str | None = None) -> bool:
    """Does every file of ``sources`` have its broker from ``ID=PATH`` or from its path
    (``broker_of``)? A prediction, made in Python on the local paths (remote ones: no); the
    numbering pass then skips reading each line's writer, and falls back to reading it when Spark's
    own reading of the paths leaves a file without a broker."""
    import re

    pattern = broker_of or lf.DEFAULT_BROKER_OF_PATH
    try:
        return all(
            src.broker is not None or all(not _is_remote(p) and lf.broker_of_path(p, pattern) is not None
                                          for p in src.paths)
            for src in sources
        )
    except (re.error, IndexError, TypeError, ValueError):  # Java-only syntax, no group, no number
        return False


def number_lines(
    spark: SparkSession, raw: DataFrame, stats: MergeStats, *, broker_of: str | None = None,
    writers: bool = True,
) -> DataFrame:
    """Add exact per-file line numbers and the file's inferred broker; fill ``stats``.

    One pass: each line is tested against the layout once (``LINE_RE``) and, with ``writers``, its
    writer read once (the broker of a file its path does not name is the one writer its lines
    name); every aggregate is fixed-width, so Spark aggregates in a hash map (no sort of the
    lines). Without ``writers`` (every path names its broker: :func:`paths_name_brokers`) the
    writers are not read; if a file turns out to have no broker from its path after all, the
    pass runs again with them."""
    F = _F()
    v = F.col("value")
    is_start = v.startswith("[")
    lines = raw.select(
        "file", "block_start", "id", "given_broker",
        is_start.alias("_start"),
        (is_start & v.rlike(lf.LINE_RE)).alias("_ok"),
        F.substring(v, 2, 23).alias("_ts"),
        (F.when(is_start, _msg_broker(v)) if writers else F.lit(None).cast("int")).alias("_mb"),
    )
    ok = F.col("_ok")
    ts = F.when(ok, _ts_long(F.col("_ts")))
    per_split_df = lines.groupBy("file", "block_start").agg(
        F.count(F.lit(1)).alias("n"),
        F.min("id").alias("min_id"),
        F.sum(F.when(F.col("_start"), 0).otherwise(1)).alias("n_cont"),
        F.sum(F.when(F.col("_start") & ~ok, 1).otherwise(0)).alias("n_bad"),
        F.min(ts).alias("first_ts"),
        F.max(ts).alias("last_ts"),
        F.min("_mb").alias("bmin"),
        F.max("_mb").alias("bmax"),
        F.max("given_broker").alias("given_broker"),  # the same for every line of a file
    )
    per_split_df = per_split_df.withColumn("path_broker", F.coalesce(
        F.col("given_broker"),
        F.nullif(F.regexp_extract("file", broker_of or lf.DEFAULT_BROKER_OF_PATH, 1), F.lit("")).cast("int"),
    ))
    per_split_df = _cache(per_split_df)  # one row per file split: tiny; reused for the line offsets below
    per_split = per_split_df.collect()
    if not writers and any(r["path_broker"] is None for r in per_split):
        return number_lines(spark, raw, stats, broker_of=broker_of, writers=True)
    rows = sorted(per_split, key=lambda r: (r["file"], r["block_start"]))
    file_lines: dict[str, int] = {}
    file_bro: dict[str, set] = {}
    file_path_bro: dict[str, int | None] = {}
    for r in rows:
        off = file_lines.get(r["file"], 0)
        file_lines[r["file"]] = off + r["n"]
        s = file_bro.setdefault(r["file"], set())
        if r["bmin"] is not None:
            s.update({r["bmin"], r["bmax"]})
        if r["path_broker"] is not None:
            file_path_bro[r["file"]] = r["path_broker"]
    inferred = {f: (next(iter(s)) if len(s) == 1 else None) for f, s in file_bro.items()}
    stats.files = len(file_lines)
    stats.splits = len(rows)
    stats.lines = sum(r["n"] for r in rows)
    stats.continuation_lines = sum(r["n_cont"] for r in rows)
    bad = sum(r["n_bad"] for r in rows)
    stats.records = stats.lines - stats.continuation_lines - bad
    firsts = [r["first_ts"] for r in rows if r["first_ts"] is not None]
    lasts = [r["last_ts"] for r in rows if r["last_ts"] is not None]
    stats.first_ts = _ts_text(min(firsts)) if firsts else None
    stats.split_times = [(r["first_ts"], r["last_ts"], r["n"]) for r in rows if r["first_ts"] is not None]
    stats.last_ts = _ts_text(max(lasts)) if lasts else None
    stats.file_brokers = {
        _display_path(f): file_path_bro.get(f) if file_path_bro.get(f) is not None else inferred.get(f)
        for f in file_lines
    }
    stats.unparsed_lines = bad  # + orphan continuation lines, added by parse_records
    # the offsets are computed by Spark from the cached aggregate (no Python worker, no literal data)
    from pyspark.sql import Window

    wf = Window.partitionBy("file").orderBy("block_start").rowsBetween(Window.unboundedPreceding, -1)
    inferred_map = F.create_map(*[x for f, b in inferred.items() if b is not None for x in (F.lit(f), F.lit(b))]) \
        if any(b is not None for b in inferred.values()) else None
    off_df = per_split_df.select(
        "file",
        "block_start",
        F.coalesce(F.sum("n").over(wf), F.lit(0)).alias("line_offset"),
        "min_id",
        F.coalesce(F.col("path_broker"), inferred_map[F.col("file")] if inferred_map is not None else F.lit(None))
        .cast("int").alias("file_broker"),
    )
    numbered = raw.join(F.broadcast(off_df), ["file", "block_start"]).select(
        "file",
        (F.col("line_offset") + F.col("id") - F.col("min_id") + 1).alias("line"),
        "value",
        F.col("file_broker"),
    )
    return numbered


def _display_path(uri: str) -> str:
    if uri.startswith("file:///"):
        return uri[len("file://"):]
    if uri.startswith("file:/"):
        return uri[len("file:"):]
    return uri


def parse_starts(starts: DataFrame) -> DataFrame:
    """Lines that start with ``[`` -> parsed columns; ``_ok`` (the line follows the layout, ``LINE_RE``
    tested once per line) must be given.  Level, message and logger are cut out of a line that
    matched by position (no second regex); the fields of a line that breaks the layout are null,
    its ``broker`` is its file's and its ``kind`` is ``unparsed``."""
    F = _F()
    v = F.col("value")
    ok = F.col("_ok")
    level, msg, logger = layout_fields(v)
    df = starts.select(
        "file", "line", "value", "file_broker", "_ok",
        F.when(ok, F.substring(v, 2, 23)).alias("ts"),
        F.when(ok, level).alias("level"),
        F.when(ok, logger).alias("logger"),
        F.when(ok, msg).alias("message"),
        F.when(ok, _msg_broker(v)).alias("_msg_broker"),  # anchored on the line: stops early
    )
    m = F.col("message")
    event = F.lit("other")
    for name, pat in reversed(lf.EVENTS):
        event = F.when(_rlike(m, pat), F.lit(name)).otherwise(event)
    isr_bs = _extract(m, lf.ISR_BROKER_STATE_LIST, 1)
    isr_from_bs = F.expr(f"regexp_extract_all(isr_bs_tmp, '{_sql_str(lf.ISR_BROKER_STATE_ID)}', 1)")
    isr_plain = _first_of(m, lf.ISR_PATTERNS)
    df = (
        df.withColumn("event", F.when(ok, event))
        .withColumn("broker", F.coalesce(F.col("_msg_broker"), F.col("file_broker")))
        .withColumn("_tp_topic", _first_of(m, lf.TP_PATTERNS, 1))
        .withColumn("_tp_part", _first_of(m, lf.TP_PATTERNS, 2))
        .withColumn("topic", F.col("_tp_topic"))
        .withColumn("partition", F.col("_tp_part").cast("int"))
        .withColumn("isr_bs_tmp", isr_bs)
        .withColumn(
            "isr",
            F.when(F.col("isr_bs_tmp").isNotNull(), isr_from_bs.cast("array<int>")).otherwise(
                F.when(
                    isr_plain.isNotNull(),
                    F.filter(
                        F.split(F.regexp_replace(isr_plain, " ", ""), ",").cast("array<int>"),
                        lambda x: x.isNotNull(),
                    ),
                )
            ),
        )
        .withColumn(
            "leader",
            F.when(F.col("event") == "become_leader", F.col("broker")).otherwise(
                _first_of(m, lf.LEADER_PATTERNS).cast("int")
            ),
        )
        .withColumn("leader_epoch", _first_of(m, lf.LEADER_EPOCH_PATTERNS).cast("int"))
        .withColumn("controller_epoch", _first_of(m, lf.CONTROLLER_EPOCH_PATTERNS).cast("int"))
        .withColumn("partition_epoch", _first_of(m, lf.PARTITION_EPOCH_PATTERNS).cast("int"))
        .withColumn("controller_id", _first_of(m, lf.CONTROLLER_ID_PATTERNS).cast("int"))
        .withColumn("replica", _first_of(m, lf.REPLICA_PATTERNS).cast("int"))
        .withColumn(
            "from_state",
            F.when(
                F.col("event").isin("leader_change", "partition_state", "replica_state", "replica_state_failed"),
                F.nullif(F.regexp_extract(m, lf.STATES_RE, 1), F.lit("")),
            ),
        )
        .withColumn(
            "to_state",
            F.when(
                F.col("event").isin("leader_change", "partition_state", "replica_state", "replica_state_failed"),
                F.nullif(F.regexp_extract(m, lf.STATES_RE, 2), F.lit("")),
            ),
        )
        .withColumn("kind", F.when(ok, F.lit("record")).otherwise(F.lit("unparsed")))
        .withColumn("rec_line", F.col("line"))
        .drop("_tp_topic", "_tp_part", "isr_bs_tmp", "_msg_broker", "file_broker")
    )
    return df


def _sql_str(s: str) -> str:
    return s.replace("\\", "\\\\").replace("'", "\\'")


def filter_condition(f: Filters) -> Column | None:
    """The filters as one condition on parsed records (None: no filter)."""
    F = _F()
    conds = []
    if f.topic:
        conds.append(F.col("topic") == f.topic)
    if f.topic_regex:
        conds.append(F.col("topic").rlike(TOPIC_REGEX_WRAP.format(f.topic_regex)))
    if f.partitions:
        conds.append(F.col("partition").isin(f.partitions))
    if f.start:
        conds.append(F.col("ts") >= f.start)
    if f.end:
        conds.append(F.col("ts") <= f.end)
    if f.events:
        conds.append(F.col("event").isin(f.events))
    if f.brokers:
        conds.append(F.col("broker").isin(f.brokers))
    out = None
    for c in conds:
        out = c if out is None else out & c
    return out


PARENT_FIELDS = [
    "ts", "broker", "level", "logger", "event", "topic", "partition", "leader", "leader_epoch", "isr",
    "controller_epoch", "partition_epoch", "controller_id", "replica", "from_state", "to_state",
]


def merged_records(
    spark: SparkSession,
    sources: list[LogSource],
    filters: Filters,
    stats: MergeStats,
    *,
    broker_of: str | None = None,
    include_unparsed: bool | None = None,
    samples: int = 5,
) -> DataFrame:
    """All records (first lines, their continuation lines and, unfiltered, the unparsed lines),
    filtered, in merge order. Columns: :data:`kops.pipeline.logformat.RECORD_FIELDS` + ``rec_line``, ``value``.

    The lines are read in one pass: every line that starts with ``[`` is parsed (or marked
    unparsed), and the continuation lines (a small set, found and cached by the numbering pass's
    counts) ride along with the line above them through one join and an explode; only the
    continuation lines at the top of a file come from that small set on their own."""
    from pyspark.sql import Window

    F = _F()
    raw = read_sources(spark, sources)
    numbered = number_lines(spark, raw, stats, broker_of=broker_of,
                            writers=not paths_name_brokers(sources, broker_of))
    if include_unparsed is None:
        include_unparsed = not filters.active
    v = F.col("value")
    is_start = v.startswith("[")
    starts = parse_starts(numbered.filter(is_start).withColumn("_ok", v.rlike(lf.LINE_RE)))
    bad = numbered.filter(is_start & ~v.rlike(lf.LINE_RE))  # read only when the first pass counted such lines
    cond = filter_condition(filters)
    keep = F.col("_ok") if cond is None else F.col("_ok") & cond
    starts = starts.filter(keep | ~F.col("_ok") if include_unparsed else keep)
    cols = [*lf.RECORD_FIELDS, "rec_line", "value"]
    own = F.array(F.struct(F.col("line").alias("l"), F.col("value").alias("v")))

    small_parts = []
    unparsed = []
    if stats.continuation_lines:
        cont = numbered.filter(~is_start)
        w = Window.partitionBy("file").orderBy("line")
        cont = cont.withColumn("_grp", F.col("line") - F.row_number().over(w))
        cont = cont.withColumn(
            "parent_line", F.min("line").over(Window.partitionBy("file", "_grp")) - 1
        ).drop("_grp")
        small = stats.continuation_lines <= BROADCAST_CONTINUATIONS
        if small:
            cont = _cache(cont)  # few rows; used by the orphan count, the join and the output
        runs = cont.filter(F.col("parent_line") > 0).groupBy("file", F.col("parent_line").alias("line")).agg(
            F.sort_array(F.collect_list(F.struct(F.col("line").alias("l"), F.col("value").alias("v")))).alias("_cont")
        )
        starts = starts.join(F.broadcast(runs) if small else runs, ["file", "line"], "left")
        items = F.when(F.col("_cont").isNull(), own).otherwise(F.concat(own, F.col("_cont")))
        rows = starts.select("*", F.posexplode(items).alias("_pos", "_it"))
        kind = F.when(F.col("_pos") == 0, F.col("kind")).otherwise(
            F.when(F.col("_ok"), F.lit("continuation")).otherwise(F.lit("unparsed"))
        )
        # continuation lines whose record is not a parsed record: at the top of a file, or below a
        # line that breaks the layout (rare: only looked for when the first pass counted such lines)
        orphans = cont.filter(F.col("parent_line") == 0)
        top = orphans
        if stats.unparsed_lines:
            bad_starts = bad.select("file", F.col("line").alias("parent_line"))
            orphans = orphans.unionByName(cont.join(bad_starts, ["file", "parent_line"], "left_semi"))
        n_orphans = orphans.count()
        stats.unparsed_lines += n_orphans
        unparsed.append(orphans.select("file", "line", "value", "file_broker"))
        if include_unparsed and n_orphans:
            small_parts.append(top.select(
                F.lit(None).cast("string").alias("ts"),
                F.col("file_broker").alias("broker"),
                *[F.lit(None).cast(t).alias(c) for c, t in _NULL_FIELDS],
                F.lit("unparsed").alias("kind"),
                "file",
                "line",
                F.col("value").alias("message"),
                F.col("line").alias("rec_line"),
                "value",
            ))
    else:
        rows = starts.select("*", F.lit(0).alias("_pos"), own[0].alias("_it"))
        kind = F.col("kind")
    rows = rows.withColumn("kind", kind)
    unp = F.col("kind") == "unparsed"
    out = rows.select(
        *PARENT_FIELDS,  # a continuation line's are its record's; below an unparsed line, all null
        "kind",
        "file",
        F.col("_it.l").alias("line"),
        F.when(F.col("kind") == "record", F.col("message")).otherwise(F.col("_it.v")).alias("message"),
        F.when(unp | (F.col("_pos") == 0), F.col("_it.l")).otherwise(F.col("rec_line")).alias("rec_line"),
        F.col("_it.v").alias("value"),
    ).select(*cols)
    if stats.unparsed_lines:
        u = bad.select("file", "line", "value", "file_broker")
        for o in unparsed:
            u = u.unionByName(o)
        stats.unparsed_samples = [
            {"file": _display_path(r["file"]), "line": r["line"], "text": r["value"][:300]}
            for r in u.orderBy("file", "line").limit(samples).collect()
        ]
    for p in small_parts:
        out = out.unionByName(p)
    return out


_NULL_FIELDS = [
    ("level", "string"), ("logger", "string"), ("event", "string"), ("topic", "string"),
    ("partition", "int"), ("leader", "int"), ("leader_epoch", "int"), ("isr", "array<int>"),
    ("controller_epoch", "int"), ("partition_epoch", "int"), ("controller_id", "int"), ("replica", "int"),
    ("from_state", "string"), ("to_state", "string"),
]


def text_column() -> Column:
    F = _F()
    b = F.coalesce(F.col("broker").cast("string"), F.lit("?"))
    return F.when(
        F.col("kind") == "unparsed",
        F.concat(F.lit("broker="), b, F.lit(" UNPARSED "), _display_file_col(), F.lit(":"), F.col("line").cast("string"),
                 F.lit(" "), F.col("value")),
    ).otherwise(F.concat(F.lit("broker="), b, F.lit(" "), F.col("value")))


def json_column() -> Column:
    F = _F()
    fields = [F.col(c) for c in lf.RECORD_FIELDS if c != "file"]
    return F.to_json(F.struct(*fields, _display_file_col().alias("file")), {"ignoreNullFields": "true"})


def _display_file_col() -> Column:
    F = _F()
    return F.regexp_replace(F.col("file"), r"^file:(?://(?=/))?", "")


#: lines per sorted partition streamed to the driver: a partition is the unit the driver holds
LINES_PER_STREAMED_PARTITION = 100_000


def iter_lines(df: DataFrame, fmt: str, stats: MergeStats) -> Iterator[str]:
    """Stream the sorted records to the driver one partition at a time (never the whole log).

    The time ranges are kept small (``LINES_PER_STREAMED_PARTITION``, from the lines counted): the
    driver receives one whole partition at a time, and a few hundred MB per partition would not fit
    a default driver heap (measured: 2.2 GB in 8 partitions ran a 2 GB driver out of memory)."""
    col = text_column() if fmt == "text" else json_column()
    n = max(_shuffle_partitions(df), -(-stats.lines // LINES_PER_STREAMED_PARTITION))
    ordered = in_merge_order(df, stats.split_times, n)
    for row in ordered.select(col.alias("l")).toLocalIterator(prefetchPartitions=False):
        yield row["l"]


def write_parquet(df: DataFrame, out: str) -> None:
    F = _F()
    (
        df.withColumn("file", _display_file_col())
        .withColumn("date", F.to_date(F.substring("ts", 1, 10)))
        .withColumn("time", F.to_timestamp_ntz(F.col("ts"), F.lit("yyyy-MM-dd HH:mm:ss,SSS")))
        .drop("value")
        .repartition("date", "topic")
        .sortWithinPartitions(*sort_keys())
        .write.mode("overwrite")
        .partitionBy("date", "topic")
        .parquet(out)
    )


def _shuffle_partitions(df: DataFrame) -> int:
    return int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))


def write_spark_text(df: DataFrame, out: str, fmt: str, stats: MergeStats) -> None:
    """Text/JSON lines written by Spark as a directory of ordered part files (part-00000 first)."""
    col = text_column() if fmt == "text" else json_column()
    ordered = in_merge_order(df, stats.split_times, _shuffle_partitions(df))
    ordered.select(col.alias("value")).write.mode("overwrite").text(out)


def write_local_file(df: DataFrame, out: str, fmt: str, stats: MergeStats) -> int:
    """One local text/JSON file in merge order, assembled from Spark's range-ordered part files:
    the executors write, the driver only concatenates bytes (no record passes through its heap,
    so a multi-GB merge fits a default driver). Local masters only (the parts must be on this
    machine's disk). Returns the number of lines written."""
    import os
    import shutil
    import uuid

    target = os.path.abspath(out)
    tmp = f"{target}.kops-parts-{uuid.uuid4().hex[:8]}"
    try:
        write_spark_text(df, "file://" + tmp, fmt, stats)
        parts = sorted(n for n in os.listdir(tmp) if n.startswith("part-"))  # part-00000 ... in range order
        lines = 0
        with open(target, "wb") as f:
            for name in parts:
                with open(os.path.join(tmp, name), "rb") as part:
                    while chunk := part.read(1 << 20):
                        f.write(chunk)
                        lines += chunk.count(b"\n")
        return lines
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def is_remote_path(p: str) -> bool:
    return _is_remote(p)
