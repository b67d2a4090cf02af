"""A sandbox of a module's own, beside the session's cluster: free ports, a watchdog that removes
it if the test run is killed outright, down at the end (its work dir kept when a test failed, or
with ``KOPS_TEST_KEEP_LOGS``)."""

from __future__ import annotations

import os
import shutil

from kops.errors import KopsError


def own_sandbox(cls, tmp_path_factory, request, name: str, label: str, *, brokers: int, setup=None, **config):
    """Yield a running ``cls`` (the JVM or the containerised sandbox) with ``brokers`` brokers
    and ``config`` (``mode="kraft"``: one controller, or ``controllers=3``); ``setup(sb)`` runs once it
    is up."""
    from kops.sandbox import SandboxConfig
    from kops.sandbox.procs import free_ports
    from kops.sandbox.watchdog import spawn_watchdog, stop_watchdog

    workdir = tmp_path_factory.mktemp(name, numbered=True)
    lead = config.get("controllers", 1) if config.get("mode") == "kraft" else 1
    ports = free_ports(brokers + lead)
    first = {"controller_ports": ports[:lead]} if config.get("mode") == "kraft" else {"zookeeper_port": ports[0]}
    cfg = SandboxConfig(workdir=workdir, brokers=brokers, broker_ports=ports[lead:],
                        heap=os.environ.get("KOPS_TEST_HEAP", "384m"), **first, **config)
    sb = cls(cfg, log=lambda m: print(f"[{label}] {m}", flush=True))
    watchdog = spawn_watchdog(workdir)
    failed_before = request.session.testsfailed
    started = False
    try:
        try:
            sb.up(timeout_s=240)
        except KopsError as e:  # pytest shows str(e) only: the logs' tails go into it
            raise type(e)("\n".join([e.message, *e.details]), details=e.details) from e
        if setup is not None:
            setup(sb)
        started = True
        yield sb
    finally:
        sb.down()  # (if it fails, the watchdog stays and tears down what is left once this run is gone)
        stop_watchdog(watchdog)
        # kept for its logs: a sandbox that did not start, or whose tests failed
        if started and not (os.environ.get("KOPS_TEST_KEEP_LOGS") or request.session.testsfailed > failed_before):
            shutil.rmtree(workdir, ignore_errors=True)
