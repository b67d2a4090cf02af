"""`kops logs merge / timeline` on real state-change logs of the sandbox cluster (Kafka 3.9, ZooKeeper).

Real events: create a topic, stop (controlled shutdown) the leader of one partition, start it again, and
move leadership back with a preferred election. The merged log must hold those events in order,
attributed to the brokers that wrote them, and the topic / partition / time filters must select exactly
the lines the single-process reference reader selects from the same files.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

from kops.pipeline import baseline
from kops.pipeline import statechange as sc
from tests.cluster.kafka_helpers import wait_for as _wait

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="session")
def spark():
    from kops.pipeline.session import get_spark

    return get_spark("local[2]", shuffle_partitions=1, input_bytes=0)  # a sandbox's logs are small: the small-input JVM


def _partition(admin, topic, p):
    md = admin.list_topics(topic=topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None or p not in t.partitions:
        return None
    return t.partitions[p]


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f",{int(t * 1000) % 1000:03d}"


def test_merge_real_events(sandbox, bootstrap, unique_topic, spark, tmp_path):
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from kops.sandbox import probe

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = unique_topic("logs")
    _ids, controller = probe.kafka_cluster(bootstrap, timeout_s=10)
    t_start = _now()
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    # (each partition asked once per try: two metadata answers in a row may differ)
    _wait(lambda: all((pm := _partition(admin, topic, p)) is not None and pm.leader >= 0 for p in range(3)),
          what="leaders of the new topic")
    # a partition whose leader is not the controller: stopping it does not move the controller
    part, victim = next(
        (p, _partition(admin, topic, p).leader) for p in range(3) if _partition(admin, topic, p).leader != controller
    )
    stopped = False
    try:
        time.sleep(1.0)
        t_stop = _now()
        sandbox.stop(broker=victim)  # controlled shutdown: the controller moves leadership away
        stopped = True
        # a new client each time: one that was connected to the stopped broker can keep answering
        # from what it knew
        def fresh():
            return AdminClient({"bootstrap.servers": bootstrap})

        # (the leader in a tuple: broker 0 is a leader too, and 0 would read as "not yet")
        (new_leader,) = _wait(lambda: (lambda pm: (pm.leader,) if pm and pm.leader not in (-1, victim) else None)(
            _partition(fresh(), topic, part)), what="a new leader")
        time.sleep(1.0)
        sandbox.start(broker=victim)
        stopped = False
        _wait(lambda: (pm := _partition(fresh(), topic, part)) is not None and victim in pm.isrs,
              timeout=90, what="the broker back in the ISR")
        time.sleep(1.0)
        t_elect = _now()
        electing = fresh()  # (kept referenced until the leader is back: a dropped client cancels its requests)
        # waited on by its effect, which the merged log must show too (below): a CI run at load 10+
        # had the election done by the controller at once and its answer not back within 30 s
        electing.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, part)])
        _wait(lambda: (pm := _partition(fresh(), topic, part)) is not None and pm.leader == victim,
              what="preferred leader back")
        del electing
        time.sleep(2.0)  # let every broker write its lines
    finally:
        if stopped:
            sandbox.start(broker=victim)

    # a snapshot of the logs (the live brokers keep writing)
    snap = tmp_path / "logs"
    for b in sandbox.broker_ids:
        d = snap / f"broker-{b}"
        d.mkdir(parents=True)
        for f in sandbox.broker_log_dir(b).glob("state-change.log*"):
            shutil.copy(f, d / f.name)
        for f in sandbox.broker_log_dir(b).glob("controller.log*"):
            shutil.copy(f, d / f.name)

    # 1) the topic's history, in order, attributed to the right brokers
    from typer.testing import CliRunner

    from kops.cli.logs import app

    out = tmp_path / "topic.jsonl"
    r = CliRunner().invoke(app, ["merge", "--logs", str(snap), "--topic", topic, "--format", "json", "--output", str(out),
                                 "--summary-json", str(tmp_path / "summary.json")])
    assert r.exit_code == 0, r.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert recs and all(x["topic"] == topic for x in recs)
    heads = [x for x in recs if x["kind"] == "record"]
    assert [x["ts"] for x in heads] == sorted(x["ts"] for x in heads)
    for x in recs:  # every line comes from the file of the broker it is attributed to
        assert f"/broker-{x['broker']}/" in x["file"], x
    summary = json.loads((tmp_path / "summary.json").read_text())["summary"]
    assert summary["unparsed_lines"] == 0 and summary["written"] == len(recs)

    p = [x for x in heads if x["partition"] == part]

    def first(pred, after=-1):
        for i, x in enumerate(p):
            if i > after and pred(x):
                return i
        raise AssertionError(f"missing event after #{after}: {[(y['event'], y['broker'], y.get('leader')) for y in p]}")

    i_new = first(lambda x: x["event"] == "partition_state" and x["to_state"] == "NewPartition")
    i_online = first(lambda x: x["event"] == "leader_change" and x["from_state"] == "NewPartition", i_new)
    assert p[i_online]["broker"] == controller and p[i_online]["leader"] == victim
    i_bl = first(lambda x: x["event"] == "become_leader" and x["broker"] == victim, i_online)
    assert p[i_bl]["ts"] < t_stop
    i_move = first(lambda x: x["event"] == "leader_change" and x["leader"] == new_leader and x["ts"] >= t_stop, i_bl)
    assert p[i_move]["broker"] == controller and victim not in p[i_move]["isr"]
    i_nl = first(lambda x: x["event"] == "become_leader" and x["broker"] == new_leader, i_move)
    i_back = first(lambda x: x["event"] == "become_follower" and x["broker"] == victim and x["leader"] == new_leader, i_nl)
    i_elect = first(lambda x: x["event"] == "leader_change" and x["leader"] == victim and x["ts"] >= t_elect, i_back)
    assert p[i_elect]["from_state"] == "OnlinePartition" and p[i_elect]["broker"] == controller
    i_vl = first(lambda x: x["event"] == "become_leader" and x["broker"] == victim, i_elect)
    assert p[i_vl]["leader_epoch"] > p[i_nl]["leader_epoch"] > p[i_bl]["leader_epoch"]

    # 2) filters select exactly what the reference reader selects from the same files
    files = [(str(f), int(f.parent.name.split("-")[1])) for f in sorted(snap.glob("*/state-change.log*"))]

    # a full sort, not a heap merge: log4j files written by several threads can step back a few ms
    recs_all = sorted((rec for f, b in files for rec in baseline.read_records(f, b, parse=True)),
                      key=lambda rec: (rec.ts, rec.broker, rec.file, rec.line))

    def reference(keep):
        return [f"broker={rec.broker} {ln}" for rec in recs_all if keep(rec.parsed) for ln in rec.lines]

    def merged(**kw):
        f = sc.validate_filters(**{"topic": None, "topic_regex": None, "partitions": None, "start_time": None,
                                   "end_time": None} | kw)
        stats = sc.MergeStats()
        df = sc.merged_records(spark, sc.expand_sources([str(snap)]), f, stats)
        return list(sc.iter_lines(df, "text", stats))

    got = merged(topic=topic, partitions=str(part), start_time=t_elect)
    want = reference(lambda q: q.topic == topic and q.partition == part and q.ts >= t_elect)
    assert got == want and len(got) >= 3
    assert any("to OnlinePartition" in ln for ln in got) and any(f"[Broker id={victim}] Leader {topic}-{part} " in ln for ln in got)
    got = merged(start_time=t_start, end_time=t_stop)
    assert got == reference(lambda q: t_start <= q.ts <= t_stop)
    got = merged(topic_regex=topic.split("-")[0] + "-.*", partitions="0,2")
    assert got == reference(lambda q: q.topic is not None and q.topic.startswith("logs-") and q.partition in (0, 2))

    # 3) timeline: victim -> new leader -> victim for that partition
    from kops.pipeline import timeline as tl

    t = tl.build_timeline(spark, sc.expand_sources([str(snap)]), sc.Filters(topic=topic, partitions=[part]), sc.MergeStats())
    leaders = [row.leader for row in t.leadership.collect() if row.prev_leader != row.leader]
    assert leaders == [victim, new_leader, victim]
    png = tmp_path / "chart.png"
    tl.write_chart(t, str(png))
    assert png.stat().st_size > 1000


def test_controller_log_stack_traces(sandbox, spark, tmp_path):
    """controller.log carries multi-line records (stack traces of failed connections to a stopped
    broker): every line is kept and attributed (ID=PATH mapping), none is unparsed."""
    dirs = []
    for b in sandbox.broker_ids:
        d = tmp_path / f"h{b}x"  # a layout the default path pattern does not read: ID=PATH says it
        d.mkdir()
        for f in list(sandbox.broker_log_dir(b).glob("state-change.log*")) + list(sandbox.broker_log_dir(b).glob("controller.log*")):
            shutil.copy(f, d / f.name)
        dirs.append(f"{b}={d}")
    stats = sc.MergeStats()
    df = sc.merged_records(spark, sc.expand_sources(dirs, include_controller=True), sc.Filters(), stats)
    n = df.count()
    assert n == stats.lines
    assert df.filter("kind = 'unparsed'").count() == stats.unparsed_lines == 0
    assert df.filter("broker is null").count() == 0
