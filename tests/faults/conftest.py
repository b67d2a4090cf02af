"""The fault lab: kops under real cluster faults, on the containerised sandbox (``--engine docker``).

- ``docker_engine``: the engine at ``$DOCKER_HOST`` or the default socket when one answers;
  otherwise a private ``dockerd`` that this fixture starts (root and Debian's docker.io needed)
  and stops by its pid at the end. An engine that cannot be had is an error, never a skip.
- ``dsandbox``: ZooKeeper + 6 brokers (racks a,a,b,b,c,c) in containers on a network of their
  own, ports published on 127.0.0.1 (free ports), image built locally or reused
  (:mod:`kops.sandbox.image`); removed at the end of the session.
- ``record``: what a scenario measured (messages acknowledged / lost, kops' exit codes, time to
  recover, throttles left); written to ``$KOPS_FAULT_RESULTS`` (default
  ``build/fault-results.json``) with the test's outcome, from which
  ``scripts/reliability.py`` writes docs/reliability.md.

Every scenario must leave the cluster as it found it: brokers started, faults healed, its
topics deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from kops.errors import KopsError

ROOT = Path(__file__).resolve().parents[2]


def results_file() -> Path:
    return Path(os.environ.get("KOPS_FAULT_RESULTS") or ROOT / "build" / "fault-results.json")


#: what a row's figures depend on: a results file or table from older code is stale
CODE_PATHS = ("kops", "tests/faults", "pyproject.toml")


def _append(row: dict) -> None:
    f = results_file()
    f.parent.mkdir(parents=True, exist_ok=True)
    doc = json.loads(f.read_text()) if f.exists() else {"results": []}
    doc["results"].append(row)
    f.write_text(json.dumps(doc, indent=2) + "\n")


def _row(nodeid: str) -> dict:
    from scripts.provenance import code_commit

    return {"test": nodeid, "commit": code_commit(*CODE_PATHS),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


@pytest.fixture(scope="session", autouse=True)
def _fresh_results():
    """A run starts a new results file before any set-up, so a run whose set-up fails leaves no
    older rows to be rendered again (``KOPS_FAULT_RESULTS_APPEND=1`` keeps the old rows)."""
    f = results_file()
    if f.exists() and not os.environ.get("KOPS_FAULT_RESULTS_APPEND"):
        f.unlink()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """The scenarios on the KRaft cluster in containers run in one block at the end of the
    session, so that cluster lives only while they run."""
    kraft = [i for i in items if "dsandbox_kraft" in getattr(i, "fixturenames", ())]
    if kraft:
        ids = {id(i) for i in kraft}
        items[:] = [i for i in items if id(i) not in ids] + kraft


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item._fault_outcome = rep.outcome  # read by the ``record`` fixture's teardown
    elif rep.when == "setup" and rep.failed and "record" in getattr(item, "fixturenames", ()):
        # the scenario never ran (its sandbox did not come up): a row that says so
        row = _row(item.nodeid)
        row.update(outcome="error", detail=f"set-up failed: {str(rep.longrepr).strip().splitlines()[-1][:300]}")
        _append(row)


@pytest.fixture(scope="session")
def docker_engine():
    from kops.sandbox import engine

    old = os.environ.get("DOCKER_HOST")
    try:
        daemon = engine.ensure(log=lambda m: print(f"[docker] {m}", flush=True))
    except KopsError as e:  # pytest shows only str(e)
        raise type(e)("\n".join([e.message, *e.details])) from e
    try:
        yield os.environ.get("DOCKER_HOST", "default")
    finally:
        if daemon is not None:
            if old is None:
                os.environ.pop("DOCKER_HOST", None)
            else:
                os.environ["DOCKER_HOST"] = old
            daemon.stop_if_idle()  # (another test run's containers may still run on it)


def _docker_sandbox(tmp_path_factory, request, **config):
    from kops.sandbox import SandboxConfig
    from kops.sandbox import Sandbox
    from kops.sandbox.procs import free_ports
    from kops.sandbox.watchdog import spawn_watchdog, stop_watchdog

    workdir = tmp_path_factory.mktemp("kops-docker-sandbox", numbered=True)
    ports = free_ports(1 + config.get("brokers", 6))
    cfg = SandboxConfig(engine="docker", workdir=workdir, zookeeper_port=ports[0], broker_ports=ports[1:],
                        heap=os.environ.get("KOPS_TEST_HEAP", "384m"), **config)
    sb = Sandbox(cfg, log=lambda m: print(f"[docker sandbox] {m}", flush=True))
    failed_before = request.session.testsfailed
    watchdog = spawn_watchdog(workdir)  # removes the containers if this test run is killed outright
    try:
        try:
            sb.up()
        except KopsError as e:
            raise type(e)("\n".join([e.message, *e.details])) from e
        from tests.faults.helpers import SANDBOXES

        SANDBOXES[sb.bootstrap_servers] = sb  # a failed wait for recovery quotes its brokers' logs
        yield sb
    finally:
        try:
            sb.down()
        finally:
            stop_watchdog(watchdog)
            if not os.environ.get("KOPS_TEST_KEEP_LOGS") and request.session.testsfailed == failed_before:
                shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def dsandbox(docker_engine, tmp_path_factory, request):
    """ZooKeeper + 6 brokers (Kafka 3.9) in containers; broker 5 has a 256 MiB data disk of its
    own (test_disk_faults.py fills it)."""
    yield from _docker_sandbox(tmp_path_factory, request, data_disk_mb={5: 256})


@pytest.fixture(scope="session")
def dsandbox_kraft(docker_engine, tmp_path_factory, request):
    """A KRaft quorum of 3 controllers + 6 brokers (Kafka 4.x) in containers, started by the first
    test that asks for it."""
    from kops.sandbox.procs import free_ports

    yield from _docker_sandbox(tmp_path_factory, request, mode="kraft", controllers=3, controller_ports=free_ports(3))


@pytest.fixture
def dbootstrap(dsandbox) -> str:
    return dsandbox.bootstrap_servers


@pytest.fixture
def kops_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path / "kops-home"))
    return tmp_path / "kops-home"


@pytest.fixture
def record(request):
    """``record(scenario=..., workload=WorkloadResult, kops_exit=..., ...)``: kept and written
    with the test's outcome when the test ends, with the code's commit and the mode and Kafka
    version of the sandbox the test ran on."""
    rec = _row(request.node.nodeid)
    for name in ("dsandbox_kraft", "dsandbox"):
        if name in request.fixturenames:
            sb = request.getfixturevalue(name)
            rec.update(mode=sb.mode, kafka_version=sb.kafka_version)
            break

    def add(**kw):
        w = kw.pop("workload", None)
        if w is not None:
            rec.update({"acknowledged": w.acknowledged, "lost": w.lost, "read": w.read, "failed_sends": w.failed})
        rec.update(kw)

    yield add
    rec["outcome"] = getattr(request.node, "_fault_outcome", "error")
    _append(rec)
