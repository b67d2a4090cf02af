"""The rows of docs/reliability.md, as the scenarios measure them (a pytest plugin, loaded by
tests/conftest.py for the fault lab and the cluster tests that record a row).

- ``record``: what a scenario measured (messages acknowledged / lost, kops' exit codes, time to
  recover, throttles left, the cluster's mode and Kafka version); written to
  ``$KOPS_FAULT_RESULTS`` (default ``build/fault-results.json``) with the test's outcome and the
  code's commit when the test ends, from which ``scripts/reliability.py`` writes
  docs/reliability.md. A test whose set-up failed gets a row that says so.
- ``fresh_results``: a run starts a new results file before the first set-up of a test that
  records (a run whose set-up fails leaves no older rows to be rendered again;
  ``KOPS_FAULT_RESULTS_APPEND=1`` keeps the old rows; scripts/test.sh removes the file itself and
  sets it, as its two processes both record rows).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

import pytest

from scripts.reliability import CODE_PATHS, ROOT


def results_file() -> Path:
    return Path(os.environ.get("KOPS_FAULT_RESULTS") or ROOT / "build" / "fault-results.json")


def _append(row: dict) -> None:
    """Add ``row`` to the results file (under a lock, replaced whole: the two test processes of
    scripts/test.sh both record rows)."""
    f = results_file()
    f.parent.mkdir(parents=True, exist_ok=True)
    with open(f.with_name(f.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        doc = json.loads(f.read_text()) if f.exists() else {"results": []}
        doc["results"].append(row)
        tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, f)


def _row(nodeid: str) -> dict:
    from scripts.provenance import code_commit

    return {"test": nodeid, "commit": code_commit(*CODE_PATHS),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


@pytest.fixture(scope="session")
def fresh_results():
    f = results_file()
    if f.exists() and not os.environ.get("KOPS_FAULT_RESULTS_APPEND"):
        f.unlink()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item._fault_outcome = rep.outcome  # read by the ``record`` fixture's teardown
    elif rep.when == "setup" and rep.failed and "record" in getattr(item, "fixturenames", ()):
        # the scenario never ran (its cluster did not come up): a row that says so
        row = _row(item.nodeid)
        row.update(outcome="error", detail=f"set-up failed: {str(rep.longrepr).strip().splitlines()[-1][:300]}")
        _append(row)


@pytest.fixture
def record(request, fresh_results):
    """``record(scenario=..., workload=WorkloadResult, kops_exit=..., mode=..., kafka_version=...)``:
    kept and written with the test's outcome when the test ends, with the code's commit."""
    rec = _row(request.node.nodeid)

    def add(**kw):
        w = kw.pop("workload", None)
        if w is not None:
            rec.update({"acknowledged": w.acknowledged, "lost": w.lost, "read": w.read, "failed_sends": w.failed})
        rec.update(kw)

    yield add
    rec["outcome"] = getattr(request.node, "_fault_outcome", "error")
    _append(rec)
