"""Textfile metrics (kops.ops.metrics): what is written parses back as Prometheus reads it, and
the cron jobs' metric names and labels -- which operators' alerts use -- stay put."""

from __future__ import annotations

import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kops.errors import ClusterError
from kops.ops import leader_rebalance, metrics, replica_rebalance
from kops.ops.metrics import GaugeSpec


def _families(text: str) -> dict[str, tuple[str, str, list[tuple[dict[str, str], float]]]]:
    return {f.name: (f.documentation, f.type, [(s.labels, s.value) for s in f.samples])
            for f in text_string_to_metric_families(text)}


def test_written_file_parses_back_with_escaped_labels(tmp_path):
    nasty = 'a "quoted" back\\slash\nand a newline'
    gauges = [
        GaugeSpec("kops_test_spread", "Spread per goal.", [({"goal": "disk"}, 1.5), ({"goal": nasty}, -2)],
                  labels=("goal",)),
        GaugeSpec("kops_test_two_labels", "Two labels, in this order.", [({"a": "1", "b": "x"}, 3)],
                  labels=("a", "b")),
        GaugeSpec("kops_test_empty", "A labelled family with no samples.", [], labels=("broker",)),
        GaugeSpec.single("kops_test_timestamp_seconds", "A big value.", 1700000000.123),
    ]
    path = tmp_path / "sub" / "dir" / "kops.prom"  # the directory is created
    metrics.write_textfile(str(path), gauges)
    text = path.read_text()
    assert os.listdir(path.parent) == ["kops.prom"]  # the temporary file was renamed, none left
    assert text == metrics.text(gauges)
    assert 'goal="a \\"quoted\\" back\\\\slash\\nand a newline"' in text  # escaped by the library
    assert 'kops_test_two_labels{a="1",b="x"}' in text
    assert _families(text) == {
        "kops_test_spread": ("Spread per goal.", "gauge", [({"goal": "disk"}, 1.5), ({"goal": nasty}, -2.0)]),
        "kops_test_two_labels": ("Two labels, in this order.", "gauge", [({"a": "1", "b": "x"}, 3.0)]),
        "kops_test_empty": ("A labelled family with no samples.", "gauge", []),
        "kops_test_timestamp_seconds": ("A big value.", "gauge", [({}, 1700000000.123)]),
    }
    # written again: replaced whole
    metrics.write_textfile(str(path), gauges[:1])
    assert list(_families(path.read_text())) == ["kops_test_spread"]


def test_bad_descriptions_and_unwritable_paths_are_refused(tmp_path):
    with pytest.raises(ValueError, match="one sample"):
        metrics.text([GaugeSpec("kops_x", "x.", [])])
    with pytest.raises(ValueError, match="labels"):
        metrics.text([GaugeSpec("kops_x", "x.", [({"goal": "a", "other": "b"}, 1)], labels=("goal",))])
    (tmp_path / "file").write_text("")
    with pytest.raises(ClusterError, match="--metrics-file .*cannot write"):
        metrics.write_textfile(str(tmp_path / "file" / "m.prom"), [GaugeSpec.single("kops_x", "x.", 1)])


def _names_and_labels(gauges) -> dict[str, tuple[str, ...]]:
    return {g.name: tuple(g.labels) for g in gauges}


def test_the_leader_rebalance_metric_names_stay():
    from kops.placement.leadership import leader_imbalance
    from tests.unit.test_leadership import topo

    rep = leader_imbalance(topo([("t", 0, [1, 2], 1, None)]), 10)
    res = leader_rebalance.RebalanceResult("elected", 0, 10.0, before=rep, after=rep)
    assert _names_and_labels(leader_rebalance.gauges(res, now=0)) == {
        "kops_leader_imbalance_ratio": ("broker",),
        "kops_leader_preferred_partitions": ("broker",),
        "kops_leader_not_preferred_partitions": ("broker",),
        "kops_leader_imbalance_ratio_before": ("broker",),
        "kops_leader_rebalance_elections": ("result",),
        "kops_leader_rebalance_blocked_partitions": (),
        "kops_leader_rebalance_threshold_ratio": (),
        "kops_leader_rebalance_balanced": (),
        "kops_leader_rebalance_stepped_aside": (),
        "kops_leader_rebalance_exit_code": (),
        "kops_leader_rebalance_duration_seconds": (),
        "kops_leader_rebalance_last_run_timestamp_seconds": (),
    }


def test_the_rebalance_step_metrics_stay(tmp_path):
    res = replica_rebalance.StepResult(
        replica_rebalance.MOVED, 0, replica_rebalance.StepBounds(), None,
        report={"replicas_moved": 4, "bytes_moved": 123456789012}, moves_left=7,
        goals={"disk": {"before": 3.5, "after": 1.25}, "leaders": {"before": 2, "after": None}},
        deviation_pct=12.34567, duration_s=33.33333)
    path = tmp_path / "rebalance.prom"
    replica_rebalance.write_metrics(str(path), res)
    got = {name: samples for name, (_, _, samples) in _families(path.read_text()).items()}
    [(labels, stamp)] = got.pop("kops_rebalance_step_last_run_timestamp_seconds")
    assert labels == {} and stamp > 1.7e9
    assert got == {
        "kops_rebalance_step_replicas_moved": [({}, 4)],
        "kops_rebalance_step_bytes_moved": [({}, 123456789012)],
        "kops_rebalance_step_moves_left": [({}, 7)],
        "kops_rebalance_step_balanced": [({}, 0)],
        "kops_rebalance_step_stepped_aside": [({}, 0)],
        "kops_rebalance_step_goal_spread": [({"goal": "disk"}, 1.25), ({"goal": "leaders"}, 2)],
        "kops_rebalance_step_bytes_deviation_ratio": [({}, 0.1235)],
        "kops_rebalance_step_exit_code": [({}, 0)],
        "kops_rebalance_step_duration_seconds": [({}, 33.333)],
    }
