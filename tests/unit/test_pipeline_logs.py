"""The Spark merge / timeline on small Kafka 3.9-format samples (one shared local session)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from kops.pipeline import baseline, linecols, localscan, order
from tests import logsamples as s
from kops.pipeline import statechange as sc


@pytest.fixture(scope="session")
def spark():
    from kops.pipeline.session import get_spark

    return get_spark("local[2]", shuffle_partitions=1, input_bytes=0)  # small samples: the JVM of small inputs


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sclogs")
    s.write_zookeeper_logs(root)
    return root


def _merge(spark, root, filters=None, include_unparsed=None, fmt="text"):
    stats = sc.MergeStats()
    df = sc.merged_records(spark, sc.expand_sources([str(root)]), filters or sc.Filters(), stats,
                           include_unparsed=include_unparsed)
    lines = list(sc.iter_lines(df, fmt, stats))
    sc.release_cached()
    return lines, stats


def _reference(root, keep=lambda p: True):
    """The pure-Python heap merge with the same filter: the expected text lines."""
    out = []
    for r in baseline.heap_merge(baseline.files_of(str(root)), parse=True):
        if keep(r.parsed):
            out.extend(f"broker={r.broker} {ln}" for ln in r.lines)
    return out


def test_merge_everything(spark, logs):
    lines, stats = _merge(spark, logs)
    # every input line is in the output exactly once, unparsed ones marked at the end
    assert stats.lines == len(lines) == 30
    assert stats.unparsed_lines == 2
    assert lines[-2:] == [
        f"broker=1 UNPARSED {logs}/broker-1/logs/state-change.log:19 [2026-11-22 01:00:0 broken timestamp (state.change.logger)",
        f"broker=2 UNPARSED {logs}/broker-2/logs/state-change.log.2026-11-22-00:1   orphan continuation",
    ]
    assert lines[:-2] == _reference(logs)
    # the rotated file comes first (earlier time); ties (same ms) broken by broker id
    assert lines[0].startswith("broker=2 [2026-11-22 00:59:59,000]")
    i = lines.index(next(ln for ln in lines if "Handling LeaderAndIsr request correlationId 1 " in ln))
    assert lines[i].startswith("broker=1 ") and lines[i + 1].startswith("broker=2 ")
    # the stack trace stays under its record, attributed to its broker
    j = next(k for k, ln in enumerate(lines) if "Error while processing" in ln)
    assert lines[j + 1] == "broker=1 java.lang.IllegalStateException: boom"
    assert lines[j + 2].startswith("broker=1 \tat kafka.server.ReplicaManager")
    assert stats.file_brokers[f"{logs}/broker-2/logs/state-change.log.2026-11-22-00"] == 2
    assert (stats.first_ts, stats.last_ts) == ("2026-11-22 00:59:59,000", "2026-11-22 01:00:20,010")


def test_filters_select_exactly(spark, logs):
    f = sc.validate_filters(topic="orders", topic_regex=None, partitions="1", start_time="2026-11-22 01:00:05",
                            end_time="2026-11-22 01:00:12,010")
    lines, stats = _merge(spark, logs, f)
    expected = _reference(
        logs,
        lambda p: p.topic == "orders" and p.partition == 1 and "2026-11-22 01:00:05,000" <= p.ts <= "2026-11-22 01:00:12,010",
    )
    assert lines == expected
    assert [ln.split("]")[0] for ln in lines if ln.startswith("broker=1 [") or ln.startswith("broker=2 [")] == [
        "broker=1 [2026-11-22 01:00:05,010",
        "broker=1 [2026-11-22 01:00:05,030",
        "broker=1 [2026-11-22 01:00:05,040",
        "broker=2 [2026-11-22 01:00:12,010",
    ]
    assert not any("UNPARSED" in ln for ln in lines)
    assert stats.unparsed_lines == 2  # still counted and reported
    # topic regex + event filter
    f = sc.validate_filters(topic=None, topic_regex="ord.*", partitions=None, start_time=None, end_time=None,
                            events="become_leader")
    lines, _ = _merge(spark, logs, f)
    assert lines == _reference(logs, lambda p: p.event == "become_leader")
    assert len(lines) == 5  # includes the trailing continuation line of one record


def test_json_records(spark, logs):
    f = sc.validate_filters(topic="orders", topic_regex=None, partitions=None, start_time=None, end_time=None,
                            events="leader_change,isr_change,become_leader")
    recs = [json.loads(x) for x in _merge(spark, logs, f, fmt="json")[0]]
    heads = [r for r in recs if r["kind"] == "record"]
    assert [(r["ts"][-12:], r["broker"], r["event"], r["partition"], r.get("leader"), r.get("leader_epoch"), r.get("isr"))
            for r in heads] == [
        ("01:00:01,100", 1, "leader_change", 0, 1, 0, [1, 2]),
        ("01:00:01,100", 1, "leader_change", 1, 2, 0, [2, 1]),
        ("01:00:01,190", 2, "become_leader", 1, 2, 0, [2, 1]),
        ("01:00:01,200", 1, "become_leader", 0, 1, 0, [1, 2]),
        ("01:00:05,010", 1, "leader_change", 1, 1, 1, [1]),
        ("01:00:05,020", 1, "isr_change", 0, 1, 0, [1]),
        ("01:00:05,040", 1, "become_leader", 1, 1, 1, [1]),
        ("01:00:20,000", 1, "leader_change", 1, 2, 2, [1, 2]),
        ("01:00:20,010", 2, "become_leader", 1, 2, 2, [1, 2]),
    ]
    assert heads[0]["controller_epoch"] == 3 and heads[0]["file"].endswith("broker-1/logs/state-change.log")
    assert heads[0]["line"] == 4


def test_line_numbers_survive_many_splits(spark, logs, monkeypatch):
    """Files cut into many splits (here ~150 bytes) by the numbering pass (forced: no file is read
    once) give the same lines, numbers and order."""
    whole, _ = _merge(spark, logs, include_unparsed=True)
    monkeypatch.setattr(localscan, "MAX_FILE_BYTES", 0)
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "150")
    try:
        split, stats = _merge(spark, logs, include_unparsed=True)
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)
    assert stats.splits > 10
    assert split == whole


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_single_read_merges_as_the_numbering_pass(spark, logs, tmp_path, monkeypatch, fmt):
    """Local files read once (line numbers from each row's place in its file's partition, counts from
    the byte scan and the merge's own observed counts) give the numbering pass's lines and stats, with
    continuation lines at a file's top, below a broken line, after an empty line and at the end of a
    file with no final line feed, and an empty file."""
    root = tmp_path / "odd"
    shutil.copytree(logs, root)
    extra = root / "broker-3" / "state-change.log"
    extra.parent.mkdir()
    extra.write_bytes(b"  at the top\n[2026-11-22 01:00:03,000] INFO [Broker id=3] Handling x (state.change.logger)\n"
                      b"\n  after an empty line\n[2026-11-22 01:00:0 broken (state.change.logger)\n  below it\n"
                      b"[2026-11-22 01:00:04,000] WARN [Broker id=3] last\r\n  no line feed")
    (root / "broker-3" / "state-change.log.1").write_bytes(b"")
    # a clean file (its layout checked without a regex over whole lines) and one that is not
    (root / "broker-3" / "state-change.log.2").write_bytes(
        b"[2026-11-22 01:00:05,000] INFO (state.change.logger)\n[2026-11-22 01:00:05,001] INFO  (x)\n"
        b"[2026-11-22 01:00:05,002] INFO a (b) (c d)\n[2026-11-22 01:00:05,003] INFO a (b)(c)\n")
    (root / "broker-3" / "state-change.log.3").write_bytes(
        "[2026-11-22 01:00:06,000] INFO a\u2028b (l)\n[2026-11-22 01:00:06,001] INFO a (l)\u2029\n".encode())
    with monkeypatch.context() as m:
        m.setattr(sc, "number_lines", None)  # the single read must not need it
        once, once_stats = _merge(spark, root, include_unparsed=True, fmt=fmt)
    monkeypatch.setattr(localscan, "MAX_FILE_BYTES", 0)
    numbered, stats = _merge(spark, root, include_unparsed=True, fmt=fmt)
    assert once == numbered
    assert once_stats.to_dict() == stats.to_dict()
    # the samples: 2 unparsed, 4 continuation lines in 3 files; here 5 + 4 more unparsed, 5 more
    # continuation lines, 3 more files
    assert (stats.unparsed_lines, stats.continuation_lines, stats.files) == (11, 9, 6)


def test_the_byte_scan_reads_lines_as_spark_does(tmp_path):
    p = tmp_path / "state-change.log"
    data = (b"top\n[2026-11-22 01:00:03,000] INFO a (l)\n\n\tat x\r\n[bad\n"
            b"[2026-11-22 01:00:04,250] INFO b (l)\nend")
    p.write_bytes(data)
    s = localscan.scan_file(str(p))
    lines = data.split(b"\n")
    assert s.lines == len(lines)
    assert s.continuations == [(i + 1, ln) for i, ln in enumerate(lines) if not ln.startswith(b"[")]
    assert (s.first_ts, s.last_ts) == (20261122010003000, 20261122010004250)
    assert localscan.scan_file(str(p), max_continuations=3) is None
    assert not s.clean  # a carriage return
    for text, clean in [("a\u00e9\u65e5\u2027\u202a\n", True), ("a\u0085", False), ("\u2028", False), ("\u2029", False)]:
        p.write_bytes(text.encode())
        assert localscan.scan_file(str(p)).clean is clean, text
    assert not localscan.eligible(str(tmp_path / "a b.log")) and not localscan.eligible(str(p) + ".gz")


def test_paths_name_brokers_predicts_from_the_local_paths():
    src = [sc.LogSource(["/d/broker-1/state-change.log", "/d/kafka_2/state-change.log"])]
    assert sc.paths_name_brokers(src)
    assert not sc.paths_name_brokers([*src, sc.LogSource(["/d/one/state-change.log"])])
    assert sc.paths_name_brokers([*src, sc.LogSource(["/d/one/state-change.log"], broker=3)])  # ID=PATH
    assert not sc.paths_name_brokers([sc.LogSource(["hdfs://nn/broker-1/state-change.log"])])  # remote: unknown
    assert sc.paths_name_brokers([sc.LogSource(["/d/one-7/x.log"])], r"one-(\d+)/")
    assert not sc.paths_name_brokers([sc.LogSource(["/d/one-7/x.log"])], r"one-(\h+)/")  # Java-only syntax


@pytest.mark.parametrize("predicted", [False, True], ids=["writers read", "prediction wrong: read again"])
def test_brokers_from_the_writers_where_the_paths_name_none(spark, logs, tmp_path, monkeypatch, predicted):
    """Files in directories that name no broker: each file's broker is the one writer its lines
    name, and the merge equals the one over broker-N directories (also when the Python-side
    prediction wrongly says the paths name them, so that the numbering pass runs again)."""
    import shutil

    flat = tmp_path / "flat"
    for b, name in ((1, "one"), (2, "two")):
        shutil.copytree(logs / f"broker-{b}" / "logs", flat / name)
    if predicted:
        monkeypatch.setattr(sc, "paths_name_brokers", lambda *a, **k: True)
    else:
        assert not sc.paths_name_brokers(sc.expand_sources([str(flat)]))
    lines, stats = _merge(spark, flat, include_unparsed=True)
    ref, _ = _merge(spark, logs, include_unparsed=True)
    assert lines == [ln.replace(f"{logs}/broker-1/logs/", f"{flat}/one/").replace(f"{logs}/broker-2/logs/", f"{flat}/two/")
                     for ln in ref]
    assert stats.file_brokers == {f"{flat}/one/state-change.log": 1, f"{flat}/two/state-change.log": 2,
                                  f"{flat}/two/state-change.log.2026-11-22-00": 2}


def test_time_bounds_cut_the_lines_into_equal_time_ranges():
    # two files of 1,000 lines each over the same hour, one of 2,000 lines over the next hour
    splits = [(20261122000000000, 20261122005959999, 1000), (20261122000000000, 20261122005959999, 1000),
              (20261122010000000, 20261122015959999, 2000)]
    assert order.time_bounds(splits, 4) == ["2026-11-22 00:30:00,000", "2026-11-22 00:59:59,999",
                                         "2026-11-22 01:30:00,000"]
    assert order.time_bounds(splits, 1) == [] and order.time_bounds([], 8) == []
    # a split with one time is all at that time; equal cuts collapse into one bound
    assert order.time_bounds([(20261122000000005, 20261122000000005, 10)], 4) == ["2026-11-22 00:00:00,005"]
    # a split of the layout's shape but no date gives no guide
    assert order.time_bounds([(20261399000000000, 20261399000000001, 10)], 4) == []
    # across a midnight and a month end, in time (not in digits)
    b = order.time_bounds([(20261130230000000, 20261201010000000, 100)], 2)
    assert b == ["2026-12-01 00:00:00,000"]


def test_merge_order_across_many_time_ranges(spark, logs):
    """The records spread over many ordered partitions (own time ranges, a hash partitioning on one
    key per range, no sampling job): read partition by partition, the reference merge order."""
    from pyspark.sql import functions as F

    stats = sc.MergeStats()
    df = sc.merged_records(spark, sc.expand_sources([str(logs)]), sc.Filters(), stats, include_unparsed=False)
    rows = order.in_merge_order(df, stats.split_times, 7).select(
        sc.text_column().alias("l"), F.spark_partition_id().alias("pid")).collect()
    pids = [r["pid"] for r in rows]
    assert pids == sorted(pids) and len(set(pids)) >= 3  # (collect() returns the partitions in order)
    assert [r["l"] for r in rows] == _reference(logs)


def test_hash_keys_are_the_ones_spark_hash_partitions_by(spark):
    """order.hash_keys (Spark's Murmur3 in Python, no job) gives, for each partition, the least int
    that Spark's own pmod(hash(x), k) sends there."""
    from pyspark.sql import functions as F

    xs = [0, 1, 2, 7, 42, 1000, -1, -42, 2**31 - 1, -(2**31), 123456789]
    got = spark.range(1).select(*[F.hash(F.lit(x)).alias(f"h{i}") for i, x in enumerate(xs)]).first()
    assert [got[f"h{i}"] for i in range(len(xs))] == [order.spark_hash_int(x) for x in xs]
    for k in (1, 2, 3, 7, 16, 61):
        rows = (spark.range(0, 64 * k + 64).select(F.col("id").cast("int").alias("x"))
                .groupBy(F.expr(f"pmod(hash(x), {k})").alias("r")).agg(F.min("x").alias("x")).collect())
        assert order.hash_keys(k) == [x for _, x in sorted((r["r"], r["x"]) for r in rows)]


def test_cli_merge_outputs(spark, logs, tmp_path):
    from typer.testing import CliRunner

    from kops.cli.logs import app

    r = CliRunner()
    out = tmp_path / "m.jsonl"
    res = r.invoke(app, ["merge", "--logs", str(logs), "--topic", "orders", "--partitions", "0",
                         "--format", "json", "--output", str(out), "--summary-json", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert recs and all(x["topic"] == "orders" and x["partition"] == 0 for x in recs)
    summary = json.loads((tmp_path / "s.json").read_text())["summary"]
    assert summary["unparsed_lines"] == 2 and summary["written"] == len(recs)
    assert summary["unparsed_samples"][0]["line"] == 19

    pq = tmp_path / "pq"
    res = r.invoke(app, ["merge", str(logs), "--format", "parquet", "--output", str(pq), "-q"])
    assert res.exit_code == 0, res.output
    assert sorted(os.listdir(pq / "date=2026-11-22")) == ["topic=__HIVE_DEFAULT_PARTITION__", "topic=orders"]
    df = spark.read.parquet(str(pq))
    assert df.count() == 30 and df.filter("topic = 'orders'").count() == 18

    # bad input: exit 2, nothing run
    assert r.invoke(app, ["merge", "--logs", str(logs), "--partitions", "1"]).exit_code == 2
    assert r.invoke(app, ["merge", "--logs", str(tmp_path / "missing")]).exit_code == 2
    assert r.invoke(app, ["merge", "--logs", str(logs), "--start-time", "noon"]).exit_code == 2


def test_timeline(spark, logs, tmp_path):
    from kops.pipeline import timeline as tl

    stats = sc.MergeStats()
    t = tl.build_timeline(spark, sc.expand_sources([str(logs)]), sc.Filters(), stats, bucket_s=10)
    lead = [(r.partition, r.ts[-12:], r.leader, r.prev_leader, r.leader_epoch, r.reported_by) for r in t.leadership.collect()]
    assert lead == [
        (0, "01:00:01,100", 1, None, 0, [1, 2]),
        (1, "01:00:01,100", 2, None, 0, [1, 2]),
        (1, "01:00:05,010", 1, 2, 1, [1, 2]),
        (1, "01:00:20,000", 2, 1, 2, [1, 2]),
    ]
    isr = [(r.partition, r.isr, r.prev_isr) for r in t.isr.collect()]
    assert isr == [(0, [1, 2], None), (0, [1], [1, 2]), (1, [1, 2], None), (1, [1], [1, 2]), (1, [1, 2], [1])]
    counts = {(r.bucket_start[-8:], r.broker): (r.gained, r.lost) for r in t.broker_counts.collect()}
    assert counts == {("01:00:00", 1): (2, 0), ("01:00:00", 2): (1, 1), ("01:00:20", 1): (0, 1), ("01:00:20", 2): (1, 0)}
    assert tl.leaders_over_time([r.asDict() for r in t.leadership.orderBy("ts", "topic", "partition").collect()])[1] == {
        1: [1, 1, 2, 1], 2: [0, 1, 0, 1]}
    png = tmp_path / "lead.png"
    tl.write_chart(t, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    tl.write_tables(t, str(tmp_path / "tl"), "csv")
    assert (tmp_path / "tl" / "broker_counts").is_dir()


# -- KRaft (Kafka 4.1): real lines, brokers' state-change.log and the controller's controller.log --------
@pytest.fixture(scope="module")
def kraft_logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("kraftlogs")
    s.write_kraft_logs(root)
    return root


def test_kraft_merge_spark_reads_lines_as_the_python_parser(spark, kraft_logs):
    from kops.pipeline import logformat as lf

    stats = sc.MergeStats()
    df = sc.merged_records(spark, sc.expand_sources([str(kraft_logs)], include_controller=True), sc.Filters(), stats)
    recs = [json.loads(x) for x in sc.iter_lines(df, "json", stats)]
    n = sum(len(v) for v in s.KRAFT_BROKER_LINES.values()) + len(s.KRAFT_CONTROLLER_LINES)
    assert stats.unparsed_lines == 0 and stats.lines == len(recs) == n
    assert all(r["kind"] == "record" for r in recs)
    for r in recs:  # the Spark job (Java regexes) and parse_line (Python) agree on every field
        p = lf.parse_line(open(r["file"]).read().splitlines()[r["line"] - 1])
        got = {k: r.get(k) for k in ("event", "topic", "partition", "leader", "leader_epoch", "isr",
                                     "partition_epoch", "controller_epoch")}
        want = {"event": p.event, "topic": p.topic, "partition": p.partition, "leader": p.leader,
                "leader_epoch": p.leader_epoch, "isr": p.isr, "partition_epoch": p.partition_epoch,
                "controller_epoch": p.controller_epoch}
        assert got == want, r["message"]
    assert {r["broker"] for r in recs} == {0, 2, 4, 5, 1000}
    assert not [r for r in recs if r["event"] == "other"]


def test_kraft_timeline(spark, kraft_logs):
    from kops.pipeline import timeline as tl

    t = tl.build_timeline(spark, sc.expand_sources([str(kraft_logs)], include_controller=True), sc.Filters(),
                          sc.MergeStats(), bucket_s=60)
    lead = {}
    for r in t.leadership.orderBy("ts").collect():
        lead.setdefault((r.topic, r.partition), []).append((r.leader, r.leader_epoch))
    # orders-0: created on 5 (epoch 0), reassigned to 4,0,2 and led by 4 (epoch 1; the controller's
    # assignment change names the leader without an epoch); unc-0: unclean election to 2 (epoch 2)
    assert [x for x in lead[("orders", 0)] if x[1] is not None] == [(5, 0), (4, 1)]
    assert (4, None) in lead[("orders", 0)]
    assert lead[("unc", 0)] == [(0, 0), (2, 2)]


def test_the_writer_read_by_one_regex_is_the_one_both_prefix_patterns_read(spark):
    """Spark reads a line's writer with OTHER_PREFIX_RE alone (on the whole line, or on the message up
    to its first ']'); the Python parser tries SCL_PREFIX_RE first: for every line that follows the
    layout all read the same id (or none)."""
    from itertools import product

    from pyspark.sql import functions as F

    from kops.pipeline import logformat as lf

    heads = [f"[2026-11-22 01:00:00,123] {lv} " for lv in ("INFO", "ERROR", "WARN", "TRACE")]
    prefixes = ["[Broker id=3] ", "[Controller id=12 epoch=4] ", "[Controller id=x] ", "[ReplicaFetcher replicaId=7, "
                "leaderId=2, fetcherId=0] ", "[Broker id=] ", "[broker=5] ", "[Log partition=t-0, dir=/d] ",
                "no prefix [Broker id=4] ", "[Broker id=3", "[LogLoader partition=t-1 dir=/x id=9] ", "", "[]",
                "[Broker id=3]] ", "[a" + "b" * 80 + " brokerId=8] ", "[Controller id=7epoch=2] ",
                "[Broker id=99999999999] ", "[Broker Id=4 id=5] ", "[Controllerid=6] ", "[Brokerbroker=2 id=1] ",
                "[\u00e9 id=3] ", "[A\u00e9 id=3] ", "[Broker id=3\u00e9] "]
    lines = ["".join(p) for p in product(heads, prefixes, ["Handling x", "y ] z", ""], [" (state.change.logger)"])]
    v = F.col("value")
    df = linecols.with_layout_ok(spark.createDataFrame([(x,) for x in lines], "value string"), F.lit(True))
    got = df.filter("_ok").select("value", linecols.msg_broker(v).alias("b"),
                                  linecols.msg_broker(v, F.col("_msg_at")).alias("from_msg")).collect()
    assert len(got) == len(lines) and sum(r["b"] is not None for r in got) > 20
    for r in got:
        want = lf.parse_line(r["value"]).broker
        assert r["b"] == r["from_msg"] == (want if want is None or want < 2**31 else None), r["value"]


def test_the_layout_check_of_a_clean_file_is_line_re(spark):
    """with_layout_ok's check of a clean file's line (no regex over the whole line) says what
    rlike(LINE_RE) says for every line with none of Java's line terminators but the line feed: heads,
    messages and loggers a character off (every other line taken as not clean: the regex)."""
    from itertools import product

    from pyspark.sql import functions as F

    from kops.pipeline import localscan
    from kops.pipeline import logformat as lf

    ts = "2026-11-22 01:00:00,123"
    heads = [f"[{ts}] INFO ", f"[{ts}] ERROR ", f"[{ts}] FATAL ", f"[{ts}] WARN", f"[{ts}]  INFO ", f"[{ts}] INFO",
             f"[{ts}] info ", f"[{ts}] NOTICE ", "[2026-11-22 01:00:00,12] INFO ", f"[{ts}]INFO ", "", "[",
             f"[{ts}] WARNING ", "[2026-11-22 01:00:00,1234] INFO ", "[2026-1x-22 01:00:00,123] INFO ",
             f"\u00e9[{ts}] INFO ", "[\u0662026-11-22 01:00:00,123] INFO "]
    middles = ["", "x", "[Broker id=3] Leader t-0 with (epoch 5)", "a (b) c", " ", "(", " (", ")", "\u00e9 \u65e5",
               "a (b c)", "(x)", " (x)", "\t", "\u00a0(", "\ufffd"]
    tails = [" (state.change.logger)", " (x)", " ()", "(x)", " (x) ", " (a b)", " (a(b)", " (x)(y)", "",
             " (kafka.controller.KafkaController)", " (x$y-z_1.2)", " (\u00e9)", " (x))", " (x)a", " ((x)", "  (x)"]
    lines = ["".join(p) for p in product(heads, middles, tails)]
    assert not any(any(t.decode() in x for t in localscan.TERMINATORS) for x in lines)
    df = spark.createDataFrame([(x, i % 2 == 0) for i, x in enumerate(lines)], "value string, clean boolean")
    got = linecols.with_layout_ok(df.withColumn("want", F.col("value").rlike(lf.LINE_RE)), F.col("clean")).select(
        "value", "want", F.col("_ok").alias("got")).collect()
    assert len(got) == len(lines) and 200 < sum(r["want"] for r in got) < len(lines) - 200
    assert [r["value"] for r in got if r["got"] != r["want"]] == []


def test_layout_fields_equal_line_re_groups_in_the_jvm(spark):
    """layout_fields (cut by position, no second regex) reads every line that LINE_RE matches in
    Java as LINE_RE's groups do: line terminators in and at the end of lines, heads and loggers a
    character off."""
    from itertools import product

    from pyspark.sql import functions as F

    from kops.pipeline import logformat as lf

    ts = "2026-11-22 01:00:00,123"
    heads = [f"[{ts}] INFO ", f"[{ts}] ERROR ", f"[{ts}] TRACE ", f"[{ts}] WARN", f"[{ts}]  INFO ",
             f"[{ts}] info ", f"[{ts}] NOTICE ", "[2026-11-22 01:00:00,12] INFO ", f"[{ts}]INFO ", ""]
    middles = ["", "x", "[Broker id=3] Leader t-0 with (epoch 5)", "a (b) c", " ", "(", " (", "a\rb",
               "a\u2028b", "a\u0085b", "a\u2029b", "\u00e9 \u65e5\u672c", "a (b c)", "(x)"]
    tails = [" (state.change.logger)", " (x)", " ()", "(x)", " (x) ", " (x)\r", " (x)\u2028", " (x)\u0085",
             " (a b)", " (a(b)", " (kafka.controller.KafkaController)", "", " (x)\r\r", " (x$y-z_1.2)",
             " (x)\n"[:-1], " (\u00e9)"]
    lines = ["".join(p) for p in product(heads, middles, tails)]
    df = spark.createDataFrame([(x,) for x in lines], "value string")
    v = F.col("value")
    level, msg, logger = linecols.layout_fields(v)
    got = df.select(
        "value",
        v.rlike(lf.LINE_RE).alias("want"),
        F.regexp_extract(v, lf.LINE_RE, 2).alias("level_re"), level.alias("level"),
        F.regexp_extract(v, lf.LINE_RE, 3).alias("msg_re"), msg.alias("msg"),
        F.regexp_extract(v, lf.LINE_RE, 4).alias("logger_re"), logger.alias("logger"),
    ).collect()
    assert len(got) == len(lines) and sum(r["want"] for r in got) > 100
    for r in got:
        if r["want"]:
            assert (r["level"], r["msg"], r["logger"]) == (r["level_re"], r["msg_re"], r["logger_re"]), r["value"]


def test_the_embedded_jvm_runs_with_kops_jit_and_gc_options(spark, monkeypatch):
    """The session's JVM was started with embedded_java_opts (what docs/benchmarks.md measured: C1
    alone for small local inputs, as the fixture's); KOPS_SPARK_JAVA_OPTS replaces them, empty for
    the JVM's defaults."""
    from kops.pipeline import session

    if "KOPS_SPARK_JAVA_OPTS" in os.environ:
        pytest.skip("KOPS_SPARK_JAVA_OPTS is set: the JVM runs with the caller's options")
    args = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    want = session.embedded_java_opts(os.cpu_count() or 2, 0).split()
    assert want and all(a in args for a in want), args
    assert ("-XX:+UseSerialGC" in want) == ((os.cpu_count() or 2) <= 2)
    monkeypatch.setenv("KOPS_SPARK_JAVA_OPTS", "-XX:+UseParallelGC")
    assert session.embedded_java_opts(2) == "-XX:+UseParallelGC"
    monkeypatch.setenv("KOPS_SPARK_JAVA_OPTS", "")
    assert session.embedded_java_opts(2) == ""
    monkeypatch.delenv("KOPS_SPARK_JAVA_OPTS")
    assert session.embedded_java_opts(8) == "-XX:CompileThresholdScaling=10"
    assert session.embedded_java_opts(8, session.SMALL_INPUT_BYTES + 1) == "-XX:CompileThresholdScaling=10"
    assert session.embedded_java_opts(8, session.SMALL_INPUT_BYTES) == "-XX:TieredStopAtLevel=1"
    assert session.embedded_java_opts(2, 0) == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _listening(pid: int) -> list[tuple[str, int]]:
    """The TCP sockets process ``pid`` listens on (address, port), read from /proc."""
    import ipaddress

    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    out = []
    for table in ("tcp", "tcp6"):
        with open(f"/proc/net/{table}") as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] != "0A" or fields[9] not in inodes:  # (0A: LISTEN)
                    continue
                addr, port = fields[1].split(":")
                raw = bytes.fromhex(addr)  # (32-bit words in the host's order)
                ip = ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))
                out.append((str(getattr(ip, "ipv4_mapped", None) or ip), int(port, 16)))
    return out


def test_the_embedded_session_listens_on_the_loopback_only(spark):
    """The embedded session's JVM (the driver's RPC and block-manager servers, py4j's gateway)
    listens on 127.0.0.1 only: by default Spark binds the driver to the host name's address, here
    the host's network interface."""
    import ipaddress

    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    socks = _listening(pid)
    assert len(socks) >= 3, socks  # (the driver, its block manager, py4j: the check saw them)
    assert all(ipaddress.ip_address(a).is_loopback for a, _port in socks), socks
