"""scripts/reliability.py: the fault lab's table, written from a run's results and checked."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("reliability", Path(__file__).parents[2] / "scripts" / "reliability.py")
reliability = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reliability)  # (it puts the checkout on sys.path: ``scripts`` imports)

SCENARIOS = ["tests/faults/test_a.py::test_one", "tests/faults/test_b.py::test_two[x]"]


def _row(test: str, **kw) -> dict:
    return {"test": test, "scenario": test.split("::")[1], "commit": "abc1234", "mode": "zookeeper",
            "kafka_version": "3.9.1", "started": "2026-11-28T06:00:00Z", "acknowledged": 100, "lost": 0,
            "throttles_left": 0, "outcome": "passed"} | kw


def _doc(*rows: dict) -> dict:
    return {"results": list(rows)}


@pytest.fixture(autouse=True)
def _code_ids(monkeypatch):
    """The rows' commit abc1234 has the code id c0de (the real one needs the commit in git)."""
    monkeypatch.setattr(reliability, "code_id", lambda rev="HEAD": {"abc1234": "c0de"}.get(rev, "?"))


def test_a_complete_passing_run_of_this_code_has_no_problem_and_its_table_checks():
    doc = _doc(*(_row(t) for t in SCENARIOS))
    assert reliability.problems(doc, SCENARIOS, "abc1234") == []
    text = reliability.render(doc, "build/fault-results.json")
    assert "Written from kops commit `abc1234` (code id `c0de`)" in text
    assert "6 Kafka 3.9.1 brokers" in text and "| zookeeper | 3.9.1 | 100 | 0 |" in text
    assert reliability.check_table(text, SCENARIOS, "c0de", "r.md") == []


def test_every_kind_of_bad_run_is_named():
    doc = _doc(_row(SCENARIOS[0], outcome="failed", lost=3, throttles_left=2))
    bad = reliability.problems(doc, SCENARIOS, "abc1234")
    assert any(SCENARIOS[1] in b and "no result" in b for b in bad)
    assert "test_one: failed" in bad
    assert "test_one: 3 acknowledged messages lost" in bad
    assert "test_one: 2 throttles left" in bad


def test_results_of_other_or_uncommitted_code_are_stale():
    doc = _doc(*(_row(t) for t in SCENARIOS))
    assert any("not on this code" in b for b in reliability.problems(doc, SCENARIOS, "def5678"))
    assert any("not on this code" in b for b in reliability.problems(doc, SCENARIOS, "abc1234-dirty"))
    text = reliability.render(doc, "r.json")
    assert any("was not written from" in p for p in reliability.check_table(text, SCENARIOS, "d1ff", "r.md"))
    assert any("was not written from" in p for p in reliability.check_table(text, SCENARIOS, "c0de-dirty", "r.md"))


def test_a_table_with_a_missing_or_failed_row_fails_the_check():
    short = reliability.render(_doc(_row(SCENARIOS[0])), "r.json")
    assert any("1 rows, the suite 2" in p for p in reliability.check_table(short, SCENARIOS, "c0de", "r.md"))
    failed = reliability.render(_doc(_row(SCENARIOS[0]), _row(SCENARIOS[1], outcome="error")), "r.json")
    assert any("did not pass" in p for p in reliability.check_table(failed, SCENARIOS, "c0de", "r.md"))


def test_the_code_id_is_the_same_in_any_clone_and_tells_other_code_apart():
    """A fingerprint of the code's content: HEAD's is computed without history (a shallow clone
    has HEAD's trees), a commit that changed kops has another, a commit that is not there none."""
    from scripts import provenance

    here = provenance.code_id("HEAD", *reliability.CODE_PATHS)
    assert len(here) == 12 and here == provenance.code_id("HEAD", *reliability.CODE_PATHS)
    older = provenance._git("log", "-1", "--format=%H", "--", "kops/inputs/window.py")  # a commit that changed kops
    assert provenance.code_id(f"{older}^", *reliability.CODE_PATHS) != here
    assert provenance.code_id("0" * 40, *reliability.CODE_PATHS) == "?"


def test_the_scenarios_are_the_fault_suites_tests_that_record_a_row():
    ids = reliability.scenarios()
    assert "tests/faults/test_reassign_faults.py::test_controller_killed_mid_execute" in ids
    assert any(i.startswith("tests/faults/test_concurrency_faults.py::test_kops_killed_at_each_failpoint") for i in ids)
    # the migration runbook's cluster tests record rows too
    assert "tests/cluster/test_zk_to_kraft_playbook.py::test_the_zk_to_kraft_playbook_migrates_a_zookeeper_sandbox" in ids
    assert "tests/cluster/test_zk_to_kraft_secured.py::test_the_zk_to_kraft_playbook_migrates_a_secured_sandbox" in ids
    # tests without a row (the compose file, the secured cluster) are not scenarios
    assert not any("test_compose" in i or "test_security_docker" in i for i in ids)


def _append_rows(path: str, who: int, n: int) -> None:
    import os

    os.environ["KOPS_FAULT_RESULTS"] = path
    from tests import recording

    for i in range(n):
        recording._append({"test": f"p{who}::row{i}"})


def test_two_processes_recording_rows_at_once_lose_none(tmp_path):
    """scripts/test.sh runs two test processes side by side, both of which may record rows."""
    import json
    import multiprocessing

    path = str(tmp_path / "fault-results.json")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_rows, args=(path, who, 60)) for who in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    rows = [r["test"] for r in json.loads(Path(path).read_text())["results"]]
    assert sorted(rows) == sorted(f"p{w}::row{i}" for w in (1, 2) for i in range(60))
