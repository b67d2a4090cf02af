"""Fixtures for tests against a real Kafka cluster (one cluster per test session).

- ``sandbox``: a :class:`kops.sandbox.Sandbox` (ZooKeeper + 6 brokers, racks a,a,b,b,c,c) started
  once per session in a temporary work dir on free ports, so it never clashes with a demo
  cluster on the default ports; always torn down (also on failures and Ctrl-C; a watchdog
  process stops it if the test process is killed outright).
- ``bootstrap`` (str), ``zk_connect`` (str): its connection strings.
- ``unique_topic`` (tests/conftest.py): ``unique_topic("health")`` -> ``"health-1a2b3c4d"``.

KRaft clusters and the other Kafka versions: the version matrix (tests/compat/) runs kops'
workflow on a cluster of its own per version, both modes.

Tests must leave the cluster healthy: restart whatever they stop, in ``finally``.

Environment:
- ``KOPS_TEST_CLUSTER=docker``: the same cluster in containers (``--engine docker``,
  :mod:`kops.sandbox.containers`) instead of local JVMs; the engine at ``$DOCKER_HOST`` or a
  private dockerd started for the session (root and Debian's docker.io).
- ``KOPS_TEST_CLUSTER=kraft``: the same cluster shape in KRaft mode (Kafka 4.x, one controller);
  ``zk_connect`` skips.
- ``KOPS_TEST_KAFKA_VERSION=V``: the session's cluster runs Kafka V (default: the sandbox's
  default of the mode, 3.9.2 / 4.4.0), e.g. the whole cluster suite on Kafka 2.8.2.
- ``KOPS_TEST_CLUSTER=existing``: reuse the sandbox already running in ``$KOPS_SANDBOX_DIR``
  (``kops sandbox up``) and leave it running afterwards; fast for development.
- ``KOPS_TEST_KEEP_LOGS=1``: keep the work dir (data and logs) after the session (default: kept
  only when a test failed; pytest's tmp dirs are cleaned up after a few runs anyway).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import warnings
from collections.abc import Callable, Iterator

import pytest

from kops.errors import KopsError


def _local_sandbox(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, mode: str = "zookeeper",
    engine: str = "jvm",
) -> Iterator:
    """Start the cluster; when it does not come up, say why (a warning in the run's summary, with
    the first error and log tails of the node that failed) and try once more on new ports in a
    new work dir, without class-data sharing. A second failure errors the tests that need it."""
    failed_before = request.session.testsfailed
    current: list[Callable[[], None]] = []
    prev_term = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):  # a SIGTERM'd test run still tears the cluster down
        for teardown in current:
            teardown()
        if callable(prev_term):
            prev_term(signum, frame)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        try:
            sb, workdir, teardown = _start_local(tmp_path_factory, mode, current, engine)
        except KopsError as e:
            warnings.warn(
                f"the {mode} test cluster did not start; trying once more on other ports without "
                f"class-data sharing. {_explained(e)}",
                stacklevel=1,
            )
            os.environ["KOPS_SANDBOX_CDS"] = "0"
            try:
                sb, workdir, teardown = _start_local(tmp_path_factory, mode, current, engine)
            except KopsError as again:  # pytest shows only str(e)
                raise type(again)(_explained(again), details=again.details) from again
        try:
            yield sb
        finally:
            teardown()
            keep = os.environ.get("KOPS_TEST_KEEP_LOGS") or request.session.testsfailed > failed_before
            if not keep:
                shutil.rmtree(workdir, ignore_errors=True)
    finally:
        signal.signal(signal.SIGTERM, prev_term)


def _explained(e: KopsError) -> str:
    return "\n".join([e.message, *e.details])


def _start_local(tmp_path_factory: pytest.TempPathFactory, mode: str, current: list, engine: str = "jvm") -> tuple:
    """A started sandbox in a new work dir on free ports: (sandbox, work dir, teardown). When it
    does not come up, whatever started is stopped (the work dir stays, for its logs) and the
    error is raised."""
    from kops.sandbox import SandboxConfig
    from kops.sandbox import Sandbox
    from kops.sandbox.procs import free_ports
    from kops.sandbox.watchdog import spawn_watchdog, stop_watchdog

    workdir = tmp_path_factory.mktemp("kops-sandbox", numbered=True)
    ports = free_ports(7)
    cfg = SandboxConfig(
        mode=mode,
        workdir=workdir,
        zookeeper_port=ports[0],
        controller_ports=[ports[0]] if mode == "kraft" else None,
        broker_ports=ports[1:],
        heap=os.environ.get("KOPS_TEST_HEAP", "384m"),
        engine=engine,
        kafka_version=os.environ.get("KOPS_TEST_KAFKA_VERSION") or None,
    )
    sb = Sandbox(cfg, log=lambda m: print(f"[sandbox] {m}", flush=True))
    watchdog = spawn_watchdog(workdir)
    torn_down = False

    def teardown(*_: object) -> None:
        nonlocal torn_down
        if torn_down:
            return
        torn_down = True
        # a down() that fails (a SIGTERM mid-operation, the sandbox busy) leaves the watchdog
        # running, to tear down what is left once this process is gone
        sb.down()
        stop_watchdog(watchdog)

    atexit.register(teardown)
    current[:] = [teardown]
    try:
        sb.up()
    except BaseException:
        teardown()
        raise
    return sb, workdir, teardown


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """The session's real cluster (see the module doc)."""
    kind = os.environ.get("KOPS_TEST_CLUSTER", "local").lower()
    if kind == "docker":
        yield from _local_sandbox(tmp_path_factory, request, engine="docker")
    elif kind == "existing":
        from kops.sandbox import attach

        sb = attach(os.environ.get("KOPS_SANDBOX_DIR"))
        sb.up()  # checks readiness; starts whatever is stopped
        yield sb
    elif kind in ("local", "jvm", "zookeeper", ""):
        yield from _local_sandbox(tmp_path_factory, request)
    elif kind == "kraft":
        yield from _local_sandbox(tmp_path_factory, request, mode="kraft")
    else:
        raise pytest.UsageError(f"KOPS_TEST_CLUSTER={kind!r}: expected local, kraft, docker or existing")


@pytest.fixture(scope="session")
def bootstrap(sandbox) -> str:
    """``127.0.0.1:p1,...`` of the session's cluster."""
    return sandbox.bootstrap_servers


@pytest.fixture(scope="session")
def zk_connect(sandbox) -> str:
    """ZooKeeper connect string of the session's cluster."""
    if not sandbox.zookeeper_connect:
        pytest.skip("the cluster runs in KRaft mode: no ZooKeeper")
    return sandbox.zookeeper_connect

