"""Merge order: the sort keys of the merged log, and the records in that order as ordered partitions
without a sampling job (the time ranges come from the first pass's per-split first and last times).

Spark's ``orderBy`` range-partitions by sampling, and the sample runs the whole plan once more: one
more read of every input file. Here each record goes to the partition of its time range through a
hash partitioning on one int key per range (chosen so that Spark's own hash sends it there), and
each partition is sorted; partition i (part file i) sorts before partition i + 1.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


def sort_keys() -> list:
    from pyspark.sql import functions as F

    return [
        F.col("ts").asc_nulls_last(),
        F.col("broker").asc_nulls_last(),
        F.col("file").asc(),
        F.col("rec_line").asc(),
        F.col("line").asc(),
    ]


def _ms_of(n: int) -> int:
    """yyyyMMddHHmmssSSS -> milliseconds since the epoch (UTC)."""
    from datetime import datetime, timezone

    s = f"{n:017d}"
    d = datetime(int(s[0:4]), int(s[4:6]), int(s[6:8]), int(s[8:10]), int(s[10:12]), int(s[12:14]),
                 tzinfo=timezone.utc)
    return int(d.timestamp()) * 1000 + int(s[14:17])


def _ts_of_ms(ms: int) -> str:
    from datetime import datetime, timezone

    d = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    return f"{d:%Y-%m-%d %H:%M:%S},{ms % 1000:03d}"


def time_bounds(split_times: list[tuple[int, int, int]], k: int) -> list[str]:
    """Up to ``k - 1`` increasing record times (``yyyy-MM-dd HH:mm:ss,SSS``) that cut the lines into
    ``k`` time ranges of about equal size, each split's lines taken as spread evenly between its
    first and last time (a file's records are in time order, give or take). Pure."""
    if k <= 1:
        return []
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    mass: dict[int, float] = {}
    total = 0
    for first, last, n in split_times:
        try:
            lo, hi = _ms_of(first), _ms_of(last)
        except ValueError:  # a time of the layout's shape that is no date (month 13): no guide
            continue
        total += n
        if hi <= lo:
            mass[lo] = mass.get(lo, 0.0) + n
        else:
            starts[lo] = starts.get(lo, 0.0) + n / (hi - lo)
            ends[hi] = ends.get(hi, 0.0) + n / (hi - lo)
    # the lines' cumulative count: linear between breakpoints, a step at a point mass
    xs = sorted({*starts, *ends, *mass})
    if not xs:
        return []
    points = []  # (x, count before x's mass, count after it, slope after x)
    cum = slope = 0.0
    prev = xs[0]
    for x in xs:
        cum += slope * (x - prev)
        before = cum
        cum += mass.get(x, 0.0)
        slope += starts.get(x, 0.0) - ends.get(x, 0.0)
        points.append((x, before, cum, max(slope, 0.0)))
        prev = x
    out: list[str] = []
    i = 0
    for j in range(1, k):
        target = total * j / k
        while i + 1 < len(points) and points[i + 1][1] < target:
            i += 1
        x, before, after, sl = points[i]
        if after >= target or sl <= 0:
            ms = x
        else:
            ms = min(x + int(-(-(target - after) // sl)), points[i + 1][0] if i + 1 < len(points) else x)
        ts = _ts_of_ms(ms)
        if not out or ts > out[-1]:
            out.append(ts)
    return out


def spark_hash_int(x: int) -> int:
    """Spark's ``hash(x)`` of an int: Murmur3_x86_32 of its 4 little-endian bytes with seed 42 (the
    hash of a shuffle's hash partitioning), by the ``mmh3`` library. Pure."""
    import mmh3

    return mmh3.hash(struct.pack("<i", x), 42, signed=True)


def hash_keys(k: int) -> list[int]:
    """For each partition i < k the least int key that Spark's hash partitioning sends to partition i
    (``pmod(hash(key), k) == i``); computed here, so that no Spark job runs for them (a unit test
    checks them against Spark's own ``pmod(hash(x), k)``). Pure."""
    found: dict[int, int] = {}
    x = 0
    while len(found) < k:
        found.setdefault(spark_hash_int(x) % k, x)  # Python's % of a negative hash is Spark's pmod
        x += 1
    return [found[i] for i in range(k)]


def in_merge_order(df: DataFrame, split_times: list[tuple[int, int, int]], partitions: int) -> DataFrame:
    """``df`` in merge order as ``partitions`` ordered partitions (partition i's records all sort before
    partition i + 1's): each record goes to its time range (:func:`time_bounds`, from the first pass's
    per-split times, ``MergeStats.split_times``) through a hash partitioning on a key chosen per
    range, then each partition is sorted.
    Unlike ``orderBy`` this runs no sampling job (Spark's range partitioning runs the whole plan once
    more to sample it: another read of the input)."""
    from pyspark.sql import functions as F

    bounds = time_bounds(split_times, partitions)
    keys = hash_keys(len(bounds) + 1)
    ts = F.col("ts")

    def node(lo: int, hi: int) -> Column:  # a binary search over the bounds, as nested CASE WHENs
        if lo == hi:
            return F.lit(keys[lo])
        mid = (lo + hi + 1) // 2
        return F.when(ts >= F.lit(bounds[mid - 1]), node(mid, hi)).otherwise(node(lo, mid - 1))

    key = F.when(ts.isNull(), F.lit(keys[-1])).otherwise(node(0, len(bounds)))  # no time: last
    return df.repartition(len(bounds) + 1, key).sortWithinPartitions(*sort_keys())
