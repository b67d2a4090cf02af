"""scripts/compat_report.py: the version matrix's table, written from the results and checked."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.compat import matrix

_spec = importlib.util.spec_from_file_location("compat_report", Path(__file__).parents[2] / "scripts" / "compat_report.py")
compat_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compat_report)


@pytest.fixture(autouse=True)
def _committed_code(monkeypatch):
    """The code as a commit holds it: these tests are about the table, not about whether the
    tree they run in has uncommitted changes (a dirty tree never matches, by design)."""
    monkeypatch.setattr(compat_report, "code_commit", lambda: "abc1234")
    monkeypatch.setattr(compat_report, "code_id", lambda: "0123456789ab")


def _rows(outcome_of=lambda mode, version, test: "passed"):
    return {(m, v): {t: {"mode": m, "version": v, "test": t, "when": "call", "outcome": outcome_of(m, v, t),
                         "seconds": 1.0, "notes": [], "error": "boom" if outcome_of(m, v, t) == "failed" else ""}
                     for t in compat_report.STEPS}
            for m, v in matrix.MATRIX}


def test_a_table_of_every_version_passing_checks_clean_the_legend_naming_failed_is_no_failure(tmp_path):
    doc = tmp_path / "compatibility.md"
    doc.write_text(compat_report.render(_rows(), "results.jsonl"))
    assert "**FAILED**" in doc.read_text()  # the legend explains the mark
    assert compat_report.check(doc) == []


def test_a_failed_step_a_missing_version_or_an_older_commit_fails_the_check(tmp_path):
    doc = tmp_path / "compatibility.md"
    first = matrix.MATRIX[0]
    failed = compat_report.render(_rows(lambda m, v, t: "failed" if (m, v) == first and t.endswith("health") else "passed"),
                                  "results.jsonl")
    doc.write_text(failed)
    assert compat_report.check(doc) == [f"{doc} has failed steps"]
    whole = compat_report.render(_rows(), "results.jsonl")
    doc.write_text(whole.replace(f"| {first[0]} | {first[1]} |", "| x | y |"))
    assert compat_report.check(doc) == [f"{first[0]} {first[1]} is not in {doc}"]
    doc.write_text(whole.replace(f"code id `{compat_report.code_id()}`", "code id `000000000000`"))
    assert [p for p in compat_report.check(doc) if "was not written from" in p]
