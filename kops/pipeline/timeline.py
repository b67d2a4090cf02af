"""Leadership / ISR history per partition and per-broker leadership gained/lost over time.

Sources of truth in the logs (Kafka 3.9, ZooKeeper mode):

* controller: ``Changed partition T-P from X to OnlinePartition with state LeaderAndIsr(leader=..,
  leaderEpoch=.., isrWithBrokerEpoch=List(..), ..)`` (event ``leader_change``) and
  ``Partition T-P state changed to (Leader:..,ISR:..,LeaderEpoch:..,..)`` (``isr_change``);
* brokers: ``Leader T-P ... starts at leader epoch E ... ISR [..]`` (``become_leader``) and
  ``Follower T-P starts at leader epoch E ... Current leader is L`` (``become_follower``);
* KRaft: the brokers' ``become_leader``/``become_follower`` lines, and the controller's
  ``Replayed PartitionRecord`` lines in controller.log.

The same leadership (topic, partition, leader epoch, leader) is reported by the controller and by
several brokers; it is kept once, at its earliest time, with the list of brokers that reported it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from kops.pipeline import statechange as sc

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

LEADERSHIP_EVENTS = (
    "leader_change", "isr_change", "become_leader", "become_follower", "partition_create", "partition_change", "reassignment",
)
ISR_EVENTS = ("leader_change", "isr_change", "become_leader", "partition_create", "partition_change", "reassignment")
_BUCKET = re.compile(r"^\s*(\d+)\s*(s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hour|hours|d|day|days)\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_bucket(value: str) -> int:
    from kops.inputs.values import MAX_SECONDS, Invalid, integer

    m = _BUCKET.match(value.lower())
    try:
        seconds = integer(m.group(1), lo=1, hi=None) * _UNIT[m.group(2)[0]] if m else 0
    except Invalid:
        seconds = 0
    if not 1 <= seconds <= MAX_SECONDS:
        raise ValueError(f"bad --bucket {value[:40]!r}: e.g. '10 seconds', '1 minute', '1h' (at most 30 days)")
    return seconds


@dataclass
class Timeline:
    leadership: DataFrame  # topic, partition, ts, leader, prev_leader, leader_epoch, isr, reported_by
    isr: DataFrame  # topic, partition, ts, isr, prev_isr, leader, leader_epoch, reported_by
    broker_counts: DataFrame  # bucket_start, broker, gained, lost, net
    bucket_s: int


def build_timeline(
    spark: SparkSession, sources, filters, stats, *, broker_of: str | None = None, bucket_s: int = 60
) -> Timeline:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    recs = sc.merged_records(spark, sources, filters, stats, broker_of=broker_of, include_unparsed=False)
    recs = recs.filter((F.col("kind") == "record") & F.col("topic").isNotNull() & F.col("partition").isNotNull())
    # each table (and the chart) reads the records: parsed once, only the fields the tables use kept
    recs = sc.cache_for_run(recs.select("ts", "broker", "event", "topic", "partition", "leader", "leader_epoch", "isr",
                                        "partition_epoch"))

    lead = recs.filter(F.col("event").isin(*LEADERSHIP_EVENTS) & F.col("leader").isNotNull())
    lead = lead.groupBy("topic", "partition", "leader_epoch", "leader").agg(
        F.min("ts").alias("ts"),
        F.min_by("isr", F.when(F.col("isr").isNotNull(), F.col("ts"))).alias("isr"),
        F.array_sort(F.collect_set("broker")).alias("reported_by"),
    )
    w = Window.partitionBy("topic", "partition").orderBy(F.col("ts"), F.col("leader_epoch").asc_nulls_first())
    lead = (
        lead.withColumn("prev_leader", F.lag("leader").over(w))
        .filter(F.col("prev_leader").isNull() | (F.col("prev_leader") != F.col("leader")) | F.col("leader_epoch").isNotNull())
        .select("topic", "partition", "ts", "leader", "prev_leader", "leader_epoch", "isr", "reported_by")
    )

    isr = recs.filter(F.col("event").isin(*ISR_EVENTS) & F.col("isr").isNotNull())
    isr = isr.withColumn("isr", F.array_sort("isr")).groupBy("topic", "partition", "leader_epoch", "partition_epoch", "isr").agg(
        F.min("ts").alias("ts"),
        F.first("leader", ignorenulls=True).alias("leader"),
        F.array_sort(F.collect_set("broker")).alias("reported_by"),
    )
    wi = Window.partitionBy("topic", "partition").orderBy("ts", F.col("partition_epoch").asc_nulls_first())
    isr = (
        isr.withColumn("prev_isr", F.lag("isr").over(wi))
        .filter(F.col("prev_isr").isNull() | (F.col("prev_isr") != F.col("isr")))
        .select("topic", "partition", "ts", "isr", "prev_isr", "leader", "leader_epoch", "partition_epoch", "reported_by")
    )

    changes = lead.filter(F.col("prev_leader").isNull() | (F.col("prev_leader") != F.col("leader")))
    bucket = F.timestamp_seconds(F.floor(F.unix_seconds(F.to_timestamp(F.col("ts"), "yyyy-MM-dd HH:mm:ss,SSS")) / bucket_s) * bucket_s)
    gained = changes.filter(F.col("leader") >= 0).select(bucket.alias("bucket_start"), F.col("leader").alias("broker"), F.lit(1).alias("g"), F.lit(0).alias("l"))
    lost = changes.filter(F.col("prev_leader").isNotNull() & (F.col("prev_leader") >= 0)).select(
        bucket.alias("bucket_start"), F.col("prev_leader").alias("broker"), F.lit(0).alias("g"), F.lit(1).alias("l")
    )
    counts = (
        gained.unionByName(lost)
        .groupBy("bucket_start", "broker")
        .agg(F.sum("g").alias("gained"), F.sum("l").alias("lost"))
        .withColumn("net", F.col("gained") - F.col("lost"))
        .withColumn("bucket_start", F.date_format("bucket_start", "yyyy-MM-dd HH:mm:ss"))
    )
    return Timeline(
        leadership=lead.orderBy("topic", "partition", "ts"),
        isr=isr.orderBy("topic", "partition", "ts"),
        broker_counts=counts.orderBy("bucket_start", "broker"),
        bucket_s=bucket_s,
    )


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, list):
        return "[" + ",".join(map(str, v)) + "]"
    return str(v)


def _print(df: DataFrame, out: TextIO, title: str) -> None:
    cols = df.columns
    out.write(f"# {title}\n")
    out.write("\t".join(cols) + "\n")
    for row in df.toLocalIterator():
        out.write("\t".join(_fmt(row[c]) for c in cols) + "\n")
    out.write("\n")


def print_tables(t: Timeline, out: TextIO) -> None:
    _print(t.leadership, out, "leadership history (topic, partition, time, leader, previous leader, leader epoch, ISR, reported by)")
    _print(t.isr, out, "ISR history")
    _print(t.broker_counts, out, f"leadership gained/lost per broker per {t.bucket_s}s")


def write_tables(t: Timeline, out: str, fmt: str) -> dict[str, str]:
    from pyspark.sql import functions as F

    paths = {}
    for name, df in (("leadership", t.leadership), ("isr", t.isr), ("broker_counts", t.broker_counts)):
        p = out.rstrip("/") + "/" + name
        if fmt == "csv":  # CSV has no arrays
            for c, typ in df.dtypes:
                if typ.startswith("array"):
                    df = df.withColumn(c, F.array_join(F.col(c), ","))
            df.coalesce(1).write.mode("overwrite").option("header", "true").csv(p)
        elif fmt == "json":
            df.coalesce(1).write.mode("overwrite").json(p)
        else:
            w = df.write.mode("overwrite")
            if name != "broker_counts":
                w = w.partitionBy("topic")
            w.parquet(p)
        paths[name] = p
    return paths


def leaders_over_time(rows: list[dict]) -> tuple[list[str], dict[int, list[int]]]:
    """From leadership changes (ordered by time): the number of partitions each broker leads after each
    change (partitions count from their first appearance in the logs)."""
    current: dict[tuple[str, int], int] = {}
    counts: dict[int, int] = {}
    times: list[str] = []
    series: dict[int, list[int]] = {}
    for r in rows:
        key = (r["topic"], r["partition"])
        old = current.get(key)
        new = r["leader"]
        if old is not None and old >= 0:
            counts[old] = counts.get(old, 0) - 1
        if new is not None and new >= 0:
            counts[new] = counts.get(new, 0) + 1
        current[key] = new
        times.append(r["ts"])
        for b in set(counts) | set(series):
            series.setdefault(b, [0] * (len(times) - 1)).append(counts.get(b, 0))
    return times, series


def write_chart(t: Timeline, path: str, *, max_rows: int = 2_000_000) -> str:
    """PNG: partitions led per broker over time (step lines) and gained/lost markers."""
    from datetime import datetime

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r.asDict() for r in t.leadership.orderBy("ts", "topic", "partition").limit(max_rows).toLocalIterator()]
    times, series = leaders_over_time(rows)
    x = [datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f") for s in times]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(11, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    for b in sorted(series):
        ax.step(x, series[b], where="post", label=f"broker {b}")
    ax.set_ylabel("partitions led")
    ax.set_title("Leadership per broker over time (from state-change logs)")
    ax.legend(loc="upper left", fontsize="small", ncol=3)
    ax.grid(True, alpha=0.3)
    counts = [r.asDict() for r in t.broker_counts.toLocalIterator()]
    for r in counts:
        xb = datetime.strptime(r["bucket_start"], "%Y-%m-%d %H:%M:%S")
        if r["gained"]:
            ax2.scatter([xb], [r["broker"]], marker="^", color="tab:green", s=12 + 6 * r["gained"])
        if r["lost"]:
            ax2.scatter([xb], [r["broker"]], marker="v", color="tab:red", s=12 + 6 * r["lost"])
    ax2.set_ylabel("broker\n(▲ gained ▼ lost)")
    ax2.grid(True, alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
