"""The sandbox's start-up bound: past it, a wait goes on only while a node it waits on still logs,
and never past the cap (kops.sandbox.deadline)."""

from __future__ import annotations

import os

from kops.sandbox.deadline import Deadline


class Clocks:
    """A monotonic and a wall clock moved together by hand."""

    def __init__(self):
        self.t = 1000.0
        self.wall = 1_800_000_000.0

    def advance(self, s: float) -> None:
        self.t += s
        self.wall += s


def _deadline(tmp_path, clocks, timeout_s=120.0, **kw):
    return Deadline(lambda node: tmp_path / str(node) / "logs", timeout_s, clock=lambda: clocks.t,
                    wall=lambda: clocks.wall, **kw)


def _logged(tmp_path, clocks, node, ago: float = 0.0) -> None:
    """``node`` wrote to its server.log ``ago`` seconds before the wall clock's now."""
    f = tmp_path / str(node) / "logs" / "server.log"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("[x] INFO starting\n")
    os.utime(f, (clocks.wall - ago, clocks.wall - ago))


def test_before_the_bound_a_wait_goes_on_whatever_the_logs(tmp_path):
    c = Clocks()
    d = _deadline(tmp_path, c)
    c.advance(119.0)
    assert not d.passed([0]) and not d.passed()  # no log at all: still within the bound
    assert d.left() == 1.0


def test_past_the_bound_a_silent_or_missing_log_ends_the_wait(tmp_path):
    c = Clocks()
    d = _deadline(tmp_path, c, quiet_s=60.0)
    c.advance(121.0)
    _logged(tmp_path, c, 0, ago=61.0)
    assert d.passed([0])  # its last line 61 s ago: stuck
    assert d.passed([1])  # no server.log
    assert d.passed()  # a wait that names no starting node ends at the bound (a stop)


def test_past_the_bound_a_node_still_logging_keeps_the_wait_until_the_cap(tmp_path):
    c = Clocks()
    d = _deadline(tmp_path, c, quiet_s=60.0, cap=3.0)
    c.advance(150.0)
    _logged(tmp_path, c, 0, ago=48.0)  # the gap seen between two start-up lines on a loaded CI host
    assert not d.passed([0])
    assert d.passed([1])  # only the nodes the wait names count
    assert not d.passed([1, 0])
    assert d.left() == 360.0 - 150.0  # a client call's timeout runs to the cap now
    c.advance(360.0 - 150.0 + 0.5)
    _logged(tmp_path, c, 0)
    assert d.passed([0])  # the cap holds whatever the logs do
    assert d.left() == 0.0


def test_settle_is_a_short_wait_never_past_the_wait_itself(tmp_path):
    c = Clocks()
    d = _deadline(tmp_path, c, timeout_s=10.0)
    assert d.settle(3.0) == c.t + 3.0
    c.advance(8.0)
    assert d.settle(3.0) == c.t + 2.0


def test_zookeeper_and_controllers_are_nodes_too(tmp_path):
    c = Clocks()
    d = _deadline(tmp_path, c, timeout_s=1.0)
    c.advance(2.0)
    _logged(tmp_path, c, "zookeeper", ago=1.0)
    _logged(tmp_path, c, 1000, ago=5.0)
    assert not d.passed(["zookeeper"]) and not d.passed([1000])


def test_a_stuck_broker_among_brokers_still_logging_fails_at_the_bound(tmp_path, monkeypatch):
    """ZooKeeper registration: past the bound only the late brokers' logs keep the wait going, so
    broker 2 (silent, never registered) fails at the bound though 0 and 1 keep logging."""
    import contextlib

    from kops.errors import ClusterError
    from kops.sandbox import modes, probe
    from kops.sandbox.config import SandboxConfig
    from kops.sandbox.state import SandboxState

    cfg = SandboxConfig(workdir=tmp_path, brokers=3).validate()
    c = Clocks()
    d = Deadline(cfg.log_dir, 120.0, clock=lambda: c.t, wall=lambda: c.wall)

    def log_running_brokers(node) -> None:
        f = cfg.log_dir(node) / "server.log"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("[x] INFO still here\n")
        os.utime(f, (c.wall, c.wall))

    def sleep(s: float) -> None:
        c.advance(5.0)
        log_running_brokers(0)
        log_running_brokers(1)

    class Nodes:
        def running(self, node) -> bool:
            return True

    mode = modes.ZooKeeperMode(SandboxState(cfg), Nodes(), lambda *a: None)
    monkeypatch.setattr(mode, "_zk", lambda timeout_s: contextlib.nullcontext(None))
    regs = {b: probe.Registration(b, 0, None, ()) for b in (0, 1)}
    monkeypatch.setattr(probe, "zk_registrations", lambda zk: regs)
    monkeypatch.setattr(probe, "zk_controller", lambda zk: 0)
    monkeypatch.setattr(modes.time, "sleep", sleep)
    try:
        mode.wait_registered([0, 1, 2], d)
    except ClusterError as e:
        assert "broker(s) [2] did not register" in str(e)
    else:
        raise AssertionError("the wait did not fail")
    assert 120.0 < c.t - 1000.0 <= 130.0  # at the bound, not at the 360 s cap
