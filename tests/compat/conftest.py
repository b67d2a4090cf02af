"""The version matrix: the operator's workflow (tests/compat/test_workflow.py) on a real
6-broker, 3-rack cluster of each Kafka version and mode that tests/compat/matrix.py lists.

- ``kafka``: ``(mode, version)``, one module-scoped parameter per cluster, so that every test of
  the workflow runs on one version before the next version's cluster starts (the versions a run
  takes: ``KOPS_COMPAT``, see matrix.py; default: the four corners).
- ``cluster``: that version's sandbox (ZooKeeper + 6 brokers, or 1 KRaft controller + 6 brokers;
  racks a,a,b,b,c,c), started on free ports and torn down after its tests.
  ``KOPS_COMPAT_DIR=DIR``: the sandbox already running in DIR instead (left running).
- ``note("...")``: a remark for docs/compatibility.md (e.g. what the version lacks and why).
- ``KOPS_COMPAT_RESULTS=FILE``: each test's outcome, its version, duration, notes and, on a
  failure, the first lines of the error, appended as one JSON line (scripts/compat.sh writes the
  matrix's table from them: scripts/compat_report.py).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.compat import matrix


def pytest_generate_tests(metafunc):
    if "kafka" in metafunc.fixturenames:
        try:
            pairs = matrix.selected()
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        metafunc.parametrize("kafka", pairs, ids=[matrix.label(*p) for p in pairs], indirect=True, scope="module")


@pytest.fixture(scope="module")
def kafka(request) -> tuple[str, str]:
    """``(mode, version)`` of this run of the workflow."""
    return request.param


@pytest.fixture(scope="module")
def cluster(kafka, tmp_path_factory, request):
    mode, version = kafka
    existing = os.environ.get("KOPS_COMPAT_DIR")
    if existing:
        from kops.sandbox import attach

        sb = attach(existing)
        if (sb.mode, sb.kafka_version) != (mode, version):
            pytest.skip(f"KOPS_COMPAT_DIR={existing} runs {sb.mode} Kafka {sb.kafka_version}, not {mode} {version}")
        sb.up()
        yield sb
        return
    from kops.sandbox import Sandbox
    from tests.cluster.sandboxes import own_sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, f"kops-compat-{matrix.label(mode, version)}",
                           f"{mode} {version}", brokers=6, mode=mode, kafka_version=version)


@pytest.fixture
def note(request):
    """``note(text)``: a remark on this version for the matrix's table."""
    def add(text: str) -> None:
        request.node.user_properties.append(("note", text))

    return add


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    path = os.environ.get("KOPS_COMPAT_RESULTS")
    callspec = getattr(item, "callspec", None)
    if not path or callspec is None or "kafka" not in callspec.params:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        mode, version = callspec.params["kafka"]
        error = ""
        if report.failed:
            text = str(report.longrepr)
            lines = [ln for ln in text.splitlines() if ln.startswith("E ")] or text.splitlines()[-3:]
            error = " ".join(ln[1:].strip() if ln.startswith("E ") else ln for ln in lines[:3])[:400]
        elif report.skipped:
            error = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            error = error.removeprefix("Skipped: ")
        row = {
            "mode": mode, "version": version, "test": item.originalname, "when": report.when,
            "outcome": report.outcome, "seconds": round(report.duration, 1),
            "notes": [v for k, v in item.user_properties if k == "note"], "error": error,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        with open(path, "a") as fh:
            fh.write(json.dumps(row) + "\n")
