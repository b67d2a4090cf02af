"""Topic filters (--topics / --exclude-topics): what they keep, what the planners do with the
topics left out, and bad input (issue 41, item 3)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kops.cli.main import app
from kops.errors import BadInput
from kops.inputs import values
from kops.placement.topic_filter import TopicFilter, left_out_text
from kops.model import Broker, Capacity, Partition, Topic, Topology
from kops.placement.balancer import Goal, plan

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def _filter(topics=None, exclude=None) -> TopicFilter | None:
    return TopicFilter.of(values.topic_regex(topics) if topics is not None else None,
                          values.topic_regex(exclude) if exclude is not None else None)


def _topo(topics: dict[str, list[tuple[int, ...]]], *, size=1000, internal=(), disk=None) -> Topology:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    brokers = tuple(Broker(b, rack=r, capacity=Capacity(disk_bytes=disk) if disk else None) for b, r in racks.items())
    return Topology(brokers=brokers, topics=tuple(
        Topic(name, tuple(Partition(name, i, r, size_bytes=size) for i, r in enumerate(parts)), internal=name in internal)
        for name, parts in topics.items()))


def test_a_topic_is_kept_by_its_whole_name():
    f = _filter("orders|logs\\..*", "logs\\.debug")
    assert [t for t in ("orders", "orders2", "logs.app", "logs.debug", "xorders") if f.keeps(t)] == ["orders", "logs.app"]
    assert f.describe() == "--topics 'orders|logs\\\\..*' --exclude-topics 'logs\\\\.debug'"
    assert _filter() is None  # neither option: every topic, no filter at all
    assert _filter(exclude="__.*").keeps("orders") and not _filter(exclude="__.*").keeps("__consumer_offsets")


def test_bad_regexes_are_refused_naming_the_problem():
    with pytest.raises(values.Invalid, match="not a valid regular expression"):
        values.topic_regex("orders(")
    with pytest.raises(values.Invalid, match="empty regular expression"):
        values.topic_regex("  ")


def test_what_is_left_out_names_internal_topics_apart_and_a_filter_keeping_nothing_is_refused():
    topo = _topo({"orders": [(0, 2, 4)], "__consumer_offsets": [(1, 3, 5)] * 3, "__kops_journal": [(0, 2, 4)],
                  "logs": [(1, 3, 5)] * 2}, internal=("__consumer_offsets",))
    left = _filter("orders|logs").left_out(topo)
    assert left == {"filter": "--topics 'orders|logs'", "topics": 2, "partitions": 4,
                    "internal": ["__consumer_offsets", "__kops_journal"], "examples": [], "topics_kept": 2}
    assert "internal __consumer_offsets, internal __kops_journal" in left_out_text(left)
    with pytest.raises(BadInput, match="no topic of the cluster is kept"):
        _filter("order").left_out(topo)  # a typo: the whole name must match
    with pytest.raises(BadInput, match="orders named and left out by --exclude-topics 'ord.*'"):
        _filter(exclude="ord.*").check_named(["orders"], "set-replication-factor")


def _stacked() -> Topology:
    """Topic "stacked" on brokers 0, 2, 4 only; "even" spread evenly over the six brokers;
    "other" on 0, 2, 4 too."""
    even = [(0, 2, 4), (1, 3, 5), (2, 4, 0), (3, 5, 1), (4, 0, 2), (5, 1, 3)]
    return _topo({"stacked": [(0, 2, 4)] * 6, "even": even, "other": [(0, 2, 4)] * 4})


def test_a_rebalance_never_moves_a_topic_left_out_and_balances_the_rest():
    topo = _stacked()
    whole = plan(topo, Goal("rebalance"))
    assert any(tp[0] == "stacked" for tp in whole.changes)  # unfiltered, the stacked topic is spread
    f = _filter(exclude="stacked")
    res = plan(topo, Goal("rebalance"), topics=f)
    assert res.changes and all(tp[0] != "stacked" for tp in res.changes)
    assert all(tp[0] != "stacked" for tp in res.target)  # not even in scope
    assert res.report["partitions_in_scope"] == 10
    assert res.report["topics_left_out"] == {"filter": "--exclude-topics 'stacked'", "topics": 1, "partitions": 6,
                                             "internal": [], "examples": ["stacked"], "topics_kept": 2}
    assert "topics_left_out" not in whole.report
    with pytest.raises(BadInput, match="stacked named and left out by --exclude-topics 'stacked'"):
        plan(topo, Goal("set-replication-factor", topics=("stacked",), replication_factor=2), topics=f)
    only = plan(topo, Goal("rebalance"), topics=_filter("stacked"))
    assert only.changes and {tp[0] for tp in only.changes} == {"stacked"}


def test_hard_disk_limits_count_the_topics_left_out():
    """A broker filled by a topic left out is still full: no plan of the other topics may push
    it past the disk threshold (the limit counts every partition a broker holds)."""
    big = 10_000
    # brokers 0 and 1 (rack a) hold "full" (out of scope): 7 of their 10 kB disks used
    topics = {"full": [(0, 1)] * 7, "work": [(2, 4), (3, 5), (2, 5), (3, 4), (2, 4), (3, 5)]}
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    brokers = tuple(Broker(b, rack=r, capacity=Capacity(disk_bytes=big)) for b, r in racks.items())
    topo = Topology(brokers=brokers, topics=tuple(
        Topic(n, tuple(Partition(n, i, r, size_bytes=1000) for i, r in enumerate(ps))) for n, ps in topics.items()))
    res = plan(topo, Goal("rebalance"), topics=_filter(exclude="full"), disk_threshold=0.8)
    after = {b: 0 for b in racks}
    for p in topo.partitions():
        for b in res.target.get(p.tp, p.replicas):
            after[b] += p.size_bytes
    assert after[0] <= 8000 and after[1] <= 8000, after
    assert any(0 in r or 1 in r for r in res.changes.values())  # they did take some: up to the limit


def test_a_decommission_says_which_replicas_of_topics_left_out_stay():
    res = plan(_stacked(), Goal("decommission", brokers=(4,)), topics=_filter(exclude="stacked"))
    assert all(4 not in r for tp, r in res.target.items())
    notes = res.report["notes"]
    assert any("6 partitions of topics left out by the topic filter keep replicas on brokers 4" in n for n in notes), notes
    # a dead broker the goal does not name is not one this plan empties: not in the note
    topo = _stacked()
    topo = replace(topo, brokers=tuple(replace(b, alive=False) if b.id == 2 else b for b in topo.brokers))
    notes = plan(topo, Goal("decommission", brokers=(4,)), topics=_filter(exclude="stacked")).report["notes"]
    assert any("6 partitions of topics left out by the topic filter keep replicas on brokers 4:" in n
               for n in notes), notes


def test_the_cli_reports_what_it_left_out(tmp_path):
    snap = tmp_path / "topo.json"
    snap.write_text(json.dumps(json.loads((DATA / "live_mixed_stacked.json").read_text())))
    r = runner.invoke(app, ["plan", "rebalance", "--topology", str(snap), "--exclude-topics", "stacked",
                            "--output", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["report"]["topics_left_out"]["examples"] == ["stacked"]
    assert all(p["topic"] != "stacked" for p in doc["plan"]["partitions"])
    r = runner.invoke(app, ["plan", "rebalance", "--topology", str(snap), "--topics", "nothing-like-it"])
    assert r.exit_code == 2 and "no topic of the cluster is kept" in r.output
    r = runner.invoke(app, ["plan", "rebalance", "--topology", str(snap), "--topics", "(x"])
    assert r.exit_code == 2 and "not a valid regular expression" in r.output
    r = runner.invoke(app, ["leader", "rebalance", "--topology", str(snap), "--topics", "mixed0.", "--output", "json"])
    assert r.exit_code in (0, 3), r.output
    lr = json.loads(r.stdout)
    assert lr["topics_left_out"]["topics"] == 3  # mixed10, mixed11, stacked
    assert all(w["topic"].startswith("mixed0") for w in lr.get("would_elect", []))
    r = runner.invoke(app, ["leader", "balance-plan", "--topology", str(snap), "--exclude-topics", "mixed.*",
                            "--output", "json"])
    assert r.exit_code == 0, r.output
    bp = json.loads(r.stdout)
    assert {p["topic"] for p in bp["plan"]["partitions"]} <= {"stacked"}
    assert bp["topics_left_out"]["topics"] == 12


def test_unchanged_without_a_filter():
    """No filter: the plan is the planner's (the corpus digests hold it byte for byte)."""
    topo = _stacked()
    assert plan(topo, Goal("rebalance")).changes == plan(topo, Goal("rebalance"), topics=None).changes
    everything = plan(topo, Goal("rebalance"), topics=_filter(".*"))
    assert everything.changes == plan(topo, Goal("rebalance")).changes
    assert replace(everything, report={}).target == plan(topo, Goal("rebalance")).target
