"""Spark columns over one log line: whether it follows the layout, its time, level, message, logger
and writer, each cut out with as little work per line as Spark's string functions allow (measured
on the 2.27 GB bench, docs/benchmarks.md). Used by :mod:`kops.pipeline.statechange`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kops.pipeline import logformat as lf

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


def spark_functions():
    """``pyspark.sql.functions``, imported on first use (kops runs without PySpark until a Spark
    job is asked for)."""
    from pyspark.sql import functions as F

    return F


def msg_broker(value: Column, msg_at: Column | None = None) -> Column:
    """The writer's id from the message prefix of a line that follows the layout: one anchored regex
    that stops at the prefix. ``OTHER_PREFIX_RE`` reads ``[Broker id=N`` and ``[Controller id=N`` as
    ``SCL_PREFIX_RE`` does (its lazy part stops at their `` id=``), so it is the only pattern run.
    Where ``msg_at`` (the message's first byte, from :func:`with_layout_ok`) is known, the regex runs
    on the message up to its first ``]`` only (no match holds a ``]``), not on the whole line."""
    F = spark_functions()
    lead = r"^\[" + lf.TS_RE + r"\] [A-Z]+ "
    whole = F.regexp_extract(value, lead + lf.OTHER_PREFIX_RE[1:], 1)
    if msg_at is None:
        return whole.try_cast("int")
    head = F.substring_index(value.cast("binary").substr(msg_at, F.octet_length(value)).cast("string"), "]", 1)
    return F.when(msg_at.isNull(), whole).otherwise(F.regexp_extract(head, lf.OTHER_PREFIX_RE, 1)).try_cast("int")


def ascii_head(v: Column, pos: int, n: int) -> Column:
    """``substring(v, pos, n)`` where the characters up to ``pos + n`` are ASCII, or where only an ASCII
    match in them matters (a time, the layout's head): the bytes cut out of the line's, not its
    characters counted one by one (Spark's ``substring`` walks a string character by character; this
    costs a copy of the line's bytes, a few times cheaper)."""
    F = spark_functions()
    return F.substring(v.cast("binary"), pos, n).cast("string")


def with_layout_ok(df: DataFrame, clean: Column | None = None) -> DataFrame:
    """``df`` (a ``value`` column) with ``_ok``: ``value rlike LINE_RE`` (the line follows the layout).

    Where ``clean`` (its file holds none of Java's line terminators but the line feed, as
    :mod:`~kops.pipeline.localscan` finds), without a regex over the whole line: there ``(.*)``
    takes any characters and ``$`` is the line's end, so the line follows the layout when its head
    (at most 32 characters) is ``[time] LEVEL `` and the text after its last `` (`` is a logger and
    ``)``, that `` (`` starting after the head (a logger holds neither a space nor a ``(``: a match's
    `` (`` is always the last one). The head's length and the tail are columns of their own, so that
    each is computed once; ``_msg_at`` (where ``clean``: the byte the message starts at) is kept."""
    F = spark_functions()
    v = F.col("value")
    if clean is None:
        return df.withColumn("_ok", v.rlike(lf.LINE_RE))
    head = F.regexp_extract(ascii_head(v, 1, 32), r"^\[" + lf.TS_RE + r"\] (?:" + "|".join(lf.LEVELS) + ") ", 0)
    df = df.withColumn("_hl", F.when(clean, F.octet_length(head))).withColumn(
        "_tail", F.when(clean, F.substring_index(v, " (", -1)))
    hl, tail = F.col("_hl"), F.col("_tail")
    ok = (hl > 0) & tail.rlike(r"^[A-Za-z0-9_.$-]+\)$") & (F.octet_length(v) - F.octet_length(tail) - 2 >= hl)
    return df.withColumn("_ok", F.when(clean, ok).otherwise(v.rlike(lf.LINE_RE))).withColumn(
        "_msg_at", hl + 1).drop("_hl", "_tail")


def layout_fields(v: Column) -> tuple[Column, Column, Column]:
    """(level, message, logger) of a line that follows the layout (LINE_RE), cut out by position:
    the same as LINE_RE's groups 2, 3 and 4, with no second regex over the line.  The logger holds
    no " " nor "(", so the last " (" of the line opens it."""
    F = spark_functions()
    level = F.substring_index(F.substring(v, 27, 6), " ", 1)  # after '[' + 23-char time + '] '
    msg_at = F.length(level) + 28
    tail = F.substring_index(v, " (", -1)  # 'logger)' (+ a final line terminator)
    msg = v.substr(msg_at, F.length(v) - F.length(tail) - 1 - msg_at)
    return level, msg, F.substring_index(tail, ")", 1)
