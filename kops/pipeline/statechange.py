"""Read, parse, filter and merge brokers' state-change logs with Spark's DataFrame API.

Pipeline (one shuffle: the final sort):

1. ``read_sources`` — ``spark.read.text`` per group of files, with the file path, the start of the file
   split and ``monotonically_increasing_id`` (increasing inside a split, so ``(file, split, id)`` is the
   file order).
2. ``_read_once`` — local files: each file one partition, its lines numbered by their place in it,
   the counts below from a byte scan (:mod:`kops.pipeline.localscan`) and counted on the way;
   else ``number_lines`` — a tiny per-split aggregate (one row per split, collected) gives each split's
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

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kops.pipeline import localscan
from kops.pipeline import logformat as lf
from kops.pipeline.linecols import ascii_head, layout_fields, msg_broker, spark_functions, with_layout_ok
from kops.pipeline.order import in_merge_order, sort_keys
from kops.pipeline.sources import (  # noqa: F401  (the merge's inputs, re-exported: sc.expand_sources ...)
    TOPIC_REGEX_WRAP,
    Filters,
    LogInputError,
    LogSource,
    check_path_brokers,
    expand_sources,
    is_remote_path,
    local_bytes,
    validate_filters,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

# above this many continuation lines, they are joined with a shuffle instead of a broadcast
BROADCAST_CONTINUATIONS = 2_000_000


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
    #: continuation lines at the top of a file (no record above them: unparsed), counted by the first
    #: pass or the byte scan (not part of the summary)
    top_orphans: int = field(default=0, repr=False)
    #: a single-read merge's counts still to take once the writer's action ran (:func:`settle`)
    pending: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["split_times"], d["top_orphans"], d["pending"]
        return d


# -- Spark -----------------------------------------------------------------------------------
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
    F = spark_functions()
    got = F.nullif(F.regexp_extract(col, pattern, idx), F.lit(""))
    guard = _could_match(col, pattern)
    return got if guard is None else F.when(guard, got)


def _first_of(col: Column, patterns: list[str], idx: int = 1) -> Column:
    return spark_functions().coalesce(*[_extract(col, p, idx) for p in patterns])


_CACHED: list = []


def release_cached() -> None:
    """Unpersist what a merge cached (the numbering pass's continuation lines, the timeline's records)
    and put back the settings a single-read merge changed."""
    if _CONF:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is not None:
            restore_conf(spark)
    while _CACHED:
        try:
            _CACHED.pop().unpersist()
        except Exception:  # the session may be gone
            pass


def inline_table(spark: SparkSession, cols: list[tuple[str, str]], rows: list[tuple]) -> DataFrame:
    """A few rows of Python values as a table Spark keeps in the driver (``VALUES``, the values passed
    as parameters): a query that only projects or filters it is evaluated there, with no Spark job."""
    args: dict[str, Any] = {}
    tuples = []
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            args[f"v{i}_{j}"] = v
        tuples.append("(" + ", ".join(f"CAST(:v{i}_{j} AS {t})" for j, (_, t) in enumerate(cols)) + ")")
    return spark.sql(f"SELECT * FROM VALUES {', '.join(tuples)} AS t({', '.join(c for c, _ in cols)})", args=args)


def cache_for_run(df: DataFrame) -> DataFrame:
    """``df`` cached until :func:`release_cached`."""
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

    F = spark_functions()
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


def _ts_long(ts: Column) -> Column:
    """``yyyy-MM-dd HH:mm:ss,SSS`` as the long yyyyMMddHHmmssSSS (same order; a fixed-width value, so
    the per-split aggregate stays a hash aggregate instead of sorting every line)."""
    return spark_functions().translate(ts, "- :,", "").cast("long")


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
            src.broker is not None or all(not is_remote_path(p) and lf.broker_of_path(p, pattern) is not None
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
    F = spark_functions()
    v = F.col("value")
    is_start = v.startswith("[")
    lines = raw.select(
        "file", "block_start", "id", "given_broker",
        is_start.alias("_start"),
        (is_start & v.rlike(lf.LINE_RE)).alias("_ok"),
        ascii_head(v, 2, 23).alias("_ts"),  # read where the line follows the layout: ASCII there
        (F.when(is_start, msg_broker(v)) if writers else F.lit(None).cast("int")).alias("_mb"),
    )
    ok = F.col("_ok")
    ts = F.when(ok, _ts_long(F.col("_ts")))
    per_split_df = lines.groupBy("file", "block_start").agg(
        F.count(F.lit(1)).alias("n"),
        F.min("id").alias("min_id"),
        F.sum(F.when(F.col("_start"), 0).otherwise(1)).alias("n_cont"),
        F.sum(F.when(F.col("_start") & ~ok, 1).otherwise(0)).alias("n_bad"),
        F.min(F.when(F.col("_start"), F.col("id"))).alias("start_id"),  # the split's first line with a '['
        F.min(ts).alias("first_ts"),
        F.max(ts).alias("last_ts"),
        F.min("_mb").alias("bmin"),
        F.max("_mb").alias("bmax"),
        F.max("given_broker").alias("given_broker"),  # the same for every line of a file
    )
    per_split_df = per_split_df.withColumn("path_broker", F.coalesce(
        F.col("given_broker"),
        F.nullif(F.regexp_extract("file", broker_of or lf.DEFAULT_BROKER_OF_PATH, 1), F.lit("")).try_cast("int"),
    ))
    per_split_df = cache_for_run(per_split_df)  # one row per file split: tiny; reused for the line offsets below
    per_split = per_split_df.collect()
    if not writers and any(r["path_broker"] is None for r in per_split):
        return number_lines(spark, raw, stats, broker_of=broker_of, writers=True)
    rows = sorted(per_split, key=lambda r: (r["file"], r["block_start"]))
    file_lines: dict[str, int] = {}
    file_bro: dict[str, set] = {}
    file_path_bro: dict[str, int | None] = {}
    top: dict[str, int] = {}  # per file: the lines above its first line with a '[' (all, without one)
    for r in rows:
        off = file_lines.get(r["file"], 0)
        file_lines[r["file"]] = off + r["n"]
        if r["file"] not in top and r["start_id"] is not None:
            top[r["file"]] = off + r["start_id"] - r["min_id"]
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
    stats.top_orphans = sum(top.get(f, n) for f, n in file_lines.items())
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
    """Lines that start with ``[`` -> parsed columns; ``_ok`` (the line follows the layout, tested once
    per line) and ``ts`` (its time where ``_ok``) must be given, ``_msg_at`` (where its message starts)
    may be.  Level, message and logger are cut out of a line that matched by position (no second
    regex); the fields of a line that breaks the layout are null, its ``broker`` is its file's and its
    ``kind`` is ``unparsed``."""
    F = spark_functions()
    v = F.col("value")
    ok = F.col("_ok")
    level, msg, logger = layout_fields(v)
    df = starts.select(
        "file", "line", "value", "file_broker", "_ok", "ts",
        F.when(ok, level).alias("level"),
        F.when(ok, logger).alias("logger"),
        F.when(ok, msg).alias("message"),
        F.when(ok, msg_broker(v, F.col("_msg_at") if "_msg_at" in starts.columns else None)).alias("_msg_broker"),
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
                F.col("event").isin(*lf.STATE_EVENTS),
                F.nullif(F.regexp_extract(m, lf.STATES_RE, 1), F.lit("")),
            ),
        )
        .withColumn(
            "to_state",
            F.when(
                F.col("event").isin(*lf.STATE_EVENTS),
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
    F = spark_functions()
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


def _read_once(spark: SparkSession, sources: list[LogSource], stats: MergeStats,
               broker_of: str | None) -> tuple[DataFrame, DataFrame | None, DataFrame | None, dict] | None:
    """Local, uncompressed files whose paths name their brokers, read in one scan with one Spark
    partition per file: a line's number is its row's position in the partition
    (``monotonically_increasing_id``'s low 33 bits), its file and broker are looked up by the
    partition's index (Spark's own list of the scan's partitions, asked before the job: no join, no
    path per row), and what :func:`number_lines` reads the whole input for comes from a byte scan
    in Python (:mod:`kops.pipeline.localscan`). Returns (numbered lines, continuation lines or None,
    their runs under the lines above them or None, what the observed counts must be), or None where
    this does not apply (then the numbering pass runs). The continuation lines are all in Python here,
    so their runs are too: no Spark job finds them. A local master only: those continuation lines
    become a DataFrame of Python rows, whose tasks would start a Python worker on a cluster's
    executors (which run Spark SQL only, docs/logs-pipeline.md)."""
    F = spark_functions()
    if not spark.sparkContext.master.startswith("local") or not paths_name_brokers(sources, broker_of):
        return None
    given = {p: src.broker for src in sources for p in src.paths}
    scans = localscan.scan(list(given))
    if scans is None or not any(x.size for x in scans):
        return None
    scans = sorted((x for x in scans if x.size), key=lambda x: x.uri)  # file index = the paths' order
    # no file split, no two files in one partition: maxSplitBytes = the largest file, and opening a
    # file costs as much as a whole partition (Spark's packing then closes a partition per file)
    big = str(max([x.size for x in scans] + [1 << 20]))
    for key in ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes"):
        _CONF.setdefault(key, spark.conf.get(key, None))
        spark.conf.set(key, big)
    raw = spark.read.option("lineSep", "\n").text([x.path for x in scans])
    fid = {x.path: i for i, x in enumerate(scans)}
    of_part = [fid.get(p) for p in _partition_files(raw, {x.path: x.size for x in scans})]
    if sorted(of_part) != list(range(len(scans))):  # each file whole in a partition of its own
        restore_conf(spark)
        return None
    pattern = broker_of or lf.DEFAULT_BROKER_OF_PATH
    names = inline_table(spark, [("file", "string"), ("given", "int")], [(x.uri, given[x.path]) for x in scans])
    brokers = [r["b"] for r in names.select(F.coalesce(  # the path's broker by Spark's regex, as number_lines (no job)
        "given", F.nullif(F.regexp_extract("file", pattern, 1), F.lit("")).try_cast("int")).alias("b")).collect()]
    if any(b is None for b in brokers):
        restore_conf(spark)
        return None
    stats.files = stats.splits = len(scans)
    stats.lines = sum(x.lines for x in scans)
    stats.continuation_lines = sum(len(x.continuations) for x in scans)
    stats.top_orphans = sum(next((i for i, (n, _) in enumerate(x.continuations) if n != i + 1), len(x.continuations))
                            for x in scans)
    stats.file_brokers = {_display_path(x.uri): b for x, b in zip(scans, brokers)}
    stats.split_times = [(x.first_ts, x.last_ts, x.lines) for x in scans if x.first_ts and x.last_ts]
    part = F.spark_partition_id() + 1

    def by_part(values: list) -> Column:
        return F.element_at(F.array(*[F.lit(values[i]) for i in of_part]), part)

    numbered = raw.select(
        by_part([x.uri for x in scans]).alias("file"),
        (F.monotonically_increasing_id().bitwiseAND(F.lit((1 << 33) - 1)) + 1).alias("line"),
        "value", by_part(brokers).alias("file_broker"), by_part(list(range(1, len(scans) + 1))).alias("_fid"),
        by_part([x.clean for x in scans]).alias("_clean"))
    cont = runs = None
    if stats.continuation_lines:
        rows, run_rows = [], []  # run_rows: (file, the line above the run, [(line, text) ...])
        for x, b in zip(scans, brokers):
            parent, prev, run = 0, 0, None
            for n, t in x.continuations:
                if n != prev + 1:  # a new run, below line n - 1
                    parent, run = n - 1, None
                prev = n
                rows.append((x.uri, n, t, b, parent))
                if parent:
                    if run is None:
                        run = []
                        run_rows.append((x.uri, parent, run))
                    run.append((n, t))
        cont = spark.createDataFrame(rows, "file string, line long, b binary, file_broker int, parent_line long").select(
            "file", "line", F.col("b").cast("string").alias("value"), "file_broker", "parent_line")
        runs = spark.createDataFrame(run_rows, "file string, line long, c array<struct<l: long, b: binary>>").select(
            "file", "line", F.transform("c", lambda e: F.struct(e["l"].alias("l"), e["b"].cast("string").alias("v")))
            .alias("_cont"))
    starts = [(i + 1, x.lines * (x.lines + 1) // 2 - sum(n for n, _ in x.continuations),
               x.lines - len(x.continuations)) for i, x in enumerate(scans)]
    return numbered, cont, runs, {"n": sum(n for _, _, n in starts), "line_sum": sum(s for _, s, _ in starts),
                            "weighted": sum(i * s for i, s, _ in starts)}


def _partition_files(df: DataFrame, sizes: dict[str, int]) -> list[str | None]:
    """For each partition of a file scan, its one file's local path when it holds that whole file
    (else None): from Spark's own list of the scan's partitions, made as the job will make it."""
    try:
        out = []
        for p in df._jdf.queryExecution().toRdd().partitions():
            files = list(p.files())
            path = files[0].filePath().toPath().toUri().getPath() if len(files) == 1 else None
            ok = path is not None and files[0].start() == 0 and files[0].length() == sizes.get(path)
            out.append(path if ok else None)
        return out
    except Exception:  # another kind of scan or partition: not this path
        return []


_CONF: dict[str, str | None] = {}


def restore_conf(spark: SparkSession) -> None:
    """Put back the session settings a single-read merge changed (:func:`release_cached` calls this)."""
    while _CONF:
        key, old = _CONF.popitem()
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


def settle(stats: MergeStats) -> None:
    """Fill in what a single-read merge learns while the merge runs (records, times, unparsed lines
    and their samples); every writer calls this after its action. Idempotent."""
    fn, stats.pending = stats.pending, None
    if fn is not None:
        fn()


def _account_unparsed(stats: MergeStats, bad: DataFrame, n_bad: int, cont: DataFrame | None, samples: int) -> None:
    """``stats.unparsed_lines`` and samples of them: the lines that break the layout (``bad``, read
    only when there are some), and the continuation lines at the top of a file (counted already:
    ``stats.top_orphans``) or below such a line. With none of them, no Spark job runs here."""
    F = spark_functions()
    parts = [bad.select("file", "line", "value", "file_broker")] if n_bad else []
    n = n_bad + stats.top_orphans
    if cont is not None and (n_bad or stats.top_orphans):
        orphans = cont.filter(F.col("parent_line") == 0)
        if n_bad:
            bad_starts = bad.select("file", F.col("line").alias("parent_line"))
            below_bad = cont.join(bad_starts, ["file", "parent_line"], "left_semi")
            n += below_bad.count()
            orphans = orphans.unionByName(below_bad)
        parts.append(orphans.select("file", "line", "value", "file_broker"))
    stats.unparsed_lines = n
    if n:
        u = parts[0]
        for o in parts[1:]:
            u = u.unionByName(o)
        stats.unparsed_samples = [
            {"file": _display_path(r["file"]), "line": r["line"], "text": r["value"][:300]}
            for r in u.orderBy("file", "line").limit(samples).collect()
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
    unparsed), and the continuation lines (a small set, from the byte scan or found and cached by the
    numbering pass's counts) ride along with the line above them through one join and an explode;
    only the continuation lines at the top of a file come from that small set on their own. Local
    files are read once (:func:`_read_once`): the counts that pass would give come with the merge,
    and :func:`settle` puts them in ``stats`` after the writer's action."""
    from pyspark.sql import Observation, Window

    F = spark_functions()
    v = F.col("value")
    is_start = v.startswith("[")
    once = _read_once(spark, sources, stats, broker_of)
    if once is None:
        raw = read_sources(spark, sources)
        numbered = number_lines(spark, raw, stats, broker_of=broker_of,
                                writers=not paths_name_brokers(sources, broker_of))
        cont = numbered.filter(~is_start) if stats.continuation_lines else None
        runs = None
    else:
        numbered, cont, runs, expected = once
    if include_unparsed is None:
        include_unparsed = not filters.active
    ok = F.col("_ok")
    # a file with none of Java's line terminators but the line feed is checked without a regex over whole lines
    checked = with_layout_ok(numbered.filter(is_start), None if once is None else F.col("_clean")).withColumn(
        "ts", F.when(ok, ascii_head(v, 2, 23)))
    if once is not None:  # what the numbering pass would have counted, counted on the way
        counts = [F.count(F.lit(1)).alias("n"), F.sum(F.col("line")).alias("line_sum"),
                  F.sum(F.col("line") * F.col("_fid")).alias("weighted"),
                  F.count(F.when(ok, 1)).alias("ok"), F.min("ts").alias("first"), F.max("ts").alias("last")]
        obs = Observation()
        plain = checked
        checked = checked.observe(obs, *counts)
    starts = parse_starts(checked)
    bad = numbered.filter(is_start & ~v.rlike(lf.LINE_RE))  # read only when there are such lines
    cond = filter_condition(filters)
    keep = F.col("_ok") if cond is None else F.col("_ok") & cond
    starts = starts.filter(keep | ~F.col("_ok") if include_unparsed else keep)
    cols = [*lf.RECORD_FIELDS, "rec_line", "value"]
    own = F.array(F.struct(F.col("line").alias("l"), F.col("value").alias("v")))

    small_parts = []
    if cont is not None:
        small = stats.continuation_lines <= BROADCAST_CONTINUATIONS
        if runs is None:  # the numbering pass's continuation lines: their runs found by Spark
            w = Window.partitionBy("file").orderBy("line")
            cont = cont.withColumn("_grp", F.col("line") - F.row_number().over(w))
            cont = cont.withColumn(
                "parent_line", F.min("line").over(Window.partitionBy("file", "_grp")) - 1
            ).drop("_grp")
            if small:
                cont = cache_for_run(cont)  # few rows; used by the orphan count, the join and the output
            runs = cont.filter(F.col("parent_line") > 0).groupBy("file", F.col("parent_line").alias("line")).agg(
                F.sort_array(F.collect_list(F.struct(F.col("line").alias("l"), F.col("value").alias("v")))).alias("_cont")
            )
        starts = starts.join(F.broadcast(runs) if small else runs, ["file", "line"], "left")
        items = F.when(F.col("_cont").isNull(), own).otherwise(F.concat(own, F.col("_cont")))
        rows = starts.select("*", F.posexplode(items).alias("_pos", "_it"))
        kind = F.when(F.col("_pos") == 0, F.col("kind")).otherwise(
            F.when(F.col("_ok"), F.lit("continuation")).otherwise(F.lit("unparsed"))
        )
        # continuation lines at the top of a file: no record above them (those below a line that
        # breaks the layout are marked unparsed in place)
        if include_unparsed:
            small_parts.append(cont.filter(F.col("parent_line") == 0).select(
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
    for p in small_parts:
        out = out.unionByName(p)
    if once is None:
        _account_unparsed(stats, bad, stats.unparsed_lines, cont, samples)
        return out

    def _settle() -> None:
        if obs._jo.future().isCompleted():
            m = obs.get
        else:  # the writer stopped before the merge's first job ended (a closed pipe): count them now
            m = plain.agg(*counts).first().asDict()
        got = {k: m[k] for k in expected}
        if got != expected:
            raise RuntimeError(f"kops logs: the single read numbered the lines wrongly ({got} != {expected}); "
                               "please report it")
        stats.records = m["ok"]
        stats.first_ts, stats.last_ts = m["first"], m["last"]
        _account_unparsed(stats, bad, m["n"] - m["ok"], cont, samples)

    stats.pending = _settle
    return out


_NULL_FIELDS = [
    ("level", "string"), ("logger", "string"), ("event", "string"), ("topic", "string"),
    ("partition", "int"), ("leader", "int"), ("leader_epoch", "int"), ("isr", "array<int>"),
    ("controller_epoch", "int"), ("partition_epoch", "int"), ("controller_id", "int"), ("replica", "int"),
    ("from_state", "string"), ("to_state", "string"),
]


def text_column() -> Column:
    F = spark_functions()
    b = F.coalesce(F.col("broker").cast("string"), F.lit("?"))
    return F.when(
        F.col("kind") == "unparsed",
        F.concat(F.lit("broker="), b, F.lit(" UNPARSED "), _display_file_col(), F.lit(":"), F.col("line").cast("string"),
                 F.lit(" "), F.col("value")),
    ).otherwise(F.concat(F.lit("broker="), b, F.lit(" "), F.col("value")))


def json_column() -> Column:
    F = spark_functions()
    fields = [F.col(c) for c in lf.RECORD_FIELDS if c != "file"]
    return F.to_json(F.struct(*fields, _display_file_col().alias("file")), {"ignoreNullFields": "true"})


def _display_file_col() -> Column:
    F = spark_functions()
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
    settle(stats)


def write_parquet(df: DataFrame, out: str) -> None:
    F = spark_functions()
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
    settle(stats)


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
