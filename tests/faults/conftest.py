"""The fault lab: kops under real cluster faults, on the containerised sandbox (``--engine docker``).

- ``docker_engine``: the engine at ``$DOCKER_HOST`` or the default socket when one answers;
  otherwise a private ``dockerd`` that this fixture starts (root and Debian's docker.io needed)
  and stops by its pid at the end. An engine that cannot be had is an error, never a skip.
- ``dsandbox``: ZooKeeper + 6 brokers (racks a,a,b,b,c,c) in containers on a network of their
  own, ports published on 127.0.0.1 (free ports), image built locally or reused
  (:mod:`kops.sandbox.image`); removed at the end of the session.
- ``record``: what a scenario measured, a row of docs/reliability.md (tests/recording.py), with
  the mode and Kafka version of the sandbox it ran on.

Every scenario must leave the cluster as it found it: brokers started, faults healed, its
topics deleted.
"""

from __future__ import annotations

import os
import shutil

import pytest

from kops.errors import KopsError



@pytest.fixture(scope="session", autouse=True)
def _fresh_results(fresh_results):
    """The results file starts anew before any of the lab's set-ups (tests/recording.py)."""


@pytest.fixture
def record(record, request):
    """tests/recording.py's ``record``, with the mode and Kafka version of the containerised
    sandbox the scenario runs on."""
    for name in ("dsandbox_kraft", "dsandbox"):
        if name in request.fixturenames:
            sb = request.getfixturevalue(name)
            record(mode=sb.mode, kafka_version=sb.kafka_version)
            break
    return record


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """The scenarios on the KRaft cluster in containers run in one block at the end of the
    session, so that cluster lives only while they run."""
    kraft = [i for i in items if "dsandbox_kraft" in getattr(i, "fixturenames", ())]
    if kraft:
        ids = {id(i) for i in kraft}
        items[:] = [i for i in items if id(i) not in ids] + kraft


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
    # every port of the sandbox from one call: ports drawn by two calls can repeat (nothing listens
    # on them yet), seen as "port ... is used twice: controller 1002 port and broker 0 port"
    brokers = config.get("brokers", 6)
    controllers = config.get("controllers", 1) if config.get("mode") == "kraft" else 0
    ports = free_ports(1 + brokers + controllers)
    if controllers:
        config["controller_ports"] = ports[1 + brokers:]
    cfg = SandboxConfig(engine="docker", workdir=workdir, zookeeper_port=ports[0], broker_ports=ports[1:1 + brokers],
                        heap=os.environ.get("KOPS_TEST_HEAP", "384m"), **config)
    sb = Sandbox(cfg, log=lambda m: print(f"[docker sandbox] {m}", flush=True))
    failed_before = request.session.testsfailed
    watchdog = spawn_watchdog(workdir)  # removes the containers if this test run is killed outright
    started = False  # a failed set-up keeps its logs: pytest counts it as an error only after this fixture ends
    try:
        try:
            sb.up()
        except KopsError as e:
            raise type(e)("\n".join([e.message, *e.details])) from e
        started = True
        from tests.faults.helpers import SANDBOXES

        SANDBOXES[sb.bootstrap_servers] = sb  # a failed wait for recovery quotes its brokers' logs
        yield sb
    finally:
        sb.down()  # (if it fails, the watchdog stays and removes what is left once this run is gone)
        stop_watchdog(watchdog)
        if started and not os.environ.get("KOPS_TEST_KEEP_LOGS") and request.session.testsfailed == failed_before:
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
    yield from _docker_sandbox(tmp_path_factory, request, mode="kraft", controllers=3)


@pytest.fixture
def dbootstrap(dsandbox) -> str:
    return dsandbox.bootstrap_servers


@pytest.fixture
def kops_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path / "kops-home"))
    return tmp_path / "kops-home"
