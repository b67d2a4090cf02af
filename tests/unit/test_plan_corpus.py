"""The default plan on a corpus of realistic clusters (tests/unit/plan_corpus.py), goal by goal.

For every cluster: no goal of the default set ends further off its band than it began unless a
higher goal (or the moves the plan must make) forced it -- and then the report says which, and
why; the hard goals hold; goals without their data are reported, not dropped; and the plan moves
less data than Kafka's ``--generate`` would for the same goal. The live case of issue 39 evens
replicas, leaders and first followers within one and leaves topic spread no worse. The plans
themselves are pinned (a digest per cluster): a change that alters one on purpose updates the
digests (``KOPS_PIN_PLANS=1``), and the diff shows which."""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path

import pytest

from kops.placement.balancer import PlanResult, plan
from kops.placement.goals import DEFAULT_GOALS, HARD
from tests.unit.plan_corpus import cases

PINS = Path(__file__).resolve().parent / "data" / "corpus_plan_digests.json"
CASES = cases()


@cache
def _plan(name: str) -> PlanResult:
    topo, goal = CASES[name]
    return plan(topo, goal)


def _digest(res: PlanResult) -> str:
    body = [sorted([list(k), list(v)] for k, v in res.target.items()), res.report]
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


@pytest.mark.parametrize("name", list(CASES))
def test_no_goal_of_the_default_set_worse_unless_a_higher_goal_forced_it(name):
    res = _plan(name)
    rep, goals = res.report, res.report["goals"]
    kind = CASES[name][1].kind
    order = [g for g in DEFAULT_GOALS if g not in HARD]
    judged = 0
    for g in order:
        v = goals[g]
        if v["status"] == "unknown":
            continue
        judged += 1
        assert v["verdict"] in ("better", "unchanged", "worse"), (g, v)
        if v["verdict"] == "worse":
            # forced: named, and every one it names comes before it (or is the plan's own moves)
            assert v.get("why") and v.get("forced_by"), (name, g, v)
            for f in v["forced_by"]:
                assert f == kind or order.index(f) < order.index(g), (name, g, f, v["why"])
    assert judged >= 4, goals
    # the hard goals hold
    assert rep["rack_violations_after"] == 0
    for g in ("disk-capacity", "nw-in-capacity"):
        v = goals[g]
        if v["status"] != "unknown":
            assert v["status"] == "met" or v["after"] <= v["before"], (name, g, v)


@pytest.mark.parametrize("name", list(CASES))
def test_goals_without_their_data_are_reported_not_dropped(name):
    res = _plan(name)
    goals, optimised = res.report["goals"], res.report["goals_optimised"]
    assert list(optimised["order"]) == list(DEFAULT_GOALS)
    for g, needs in optimised["without_data"].items():
        assert goals[g]["status"] == "unknown" and goals[g]["needs"], (g, goals[g])
        assert needs
    topo = CASES[name][0]
    sizes = all(p.size_bytes is not None for p in topo.partitions())
    rates = all(p.bytes_in_per_s is not None for p in topo.partitions())
    assert ("disk-usage" in optimised["without_data"]) == (not sizes)
    assert ("nw-in-usage" in optimised["without_data"]) == ("leader-bytes-in" in optimised["without_data"]) == (not rates)


@pytest.mark.parametrize("name", list(CASES))
def test_less_data_moves_than_kafkas_generate(name):
    rep = _plan(name).report
    kafka = rep["kafka_generate"]
    assert kafka["available"], kafka
    assert rep["replicas_moved"] < kafka["replicas_moved"], (rep["replicas_moved"], kafka)
    if rep["bytes_moved"] is not None and kafka["bytes_moved"]:
        assert rep["bytes_moved"] < kafka["bytes_moved"], (rep["bytes_moved"], kafka)


def test_the_live_case_evens_replicas_leaders_and_first_followers_and_topic_spread_is_no_worse():
    """Issue 39's live repro: a dozen topics of mixed sizes placed by Kafka plus one topic
    stacked on brokers 0, 2 and 4 (a sandbox snapshot). The old default (disk use, leaders,
    first followers) made replica and topic spread worse; the default plans them even."""
    g = _plan("live-mixed-stacked").report["goals"]
    for name in ("replicas", "leaders", "first-followers"):
        assert g[name]["before"] > 1 and g[name]["after"] <= 1 and g[name]["status"] == "met", (name, g[name])
    ts = g["topic-spread"]
    assert ts["after"] <= ts["before"] and ts["off_band_after"] <= ts["off_band_before"], ts
    assert g["disk-usage"]["verdict"] != "worse", g["disk-usage"]
    old = plan(*CASES["live-mixed-stacked"], goals="disk-usage,leaders,first-followers").report["goals"]
    assert old["topic-spread"]["after"] > old["topic-spread"]["before"]  # (what the issue saw)


def test_the_plans_are_pinned():
    got = {name: _digest(_plan(name)) for name in CASES}
    if os.environ.get("KOPS_PIN_PLANS"):
        PINS.write_text(json.dumps(got, indent=1) + "\n")
    pinned = json.loads(PINS.read_text())
    changed = sorted(name for name in got if got[name] != pinned.get(name))
    assert not changed and set(pinned) == set(got), (
        f"plans changed for {changed}: if on purpose, run with KOPS_PIN_PLANS=1 and commit the digests")
