"""When a node is ready, and why it is not: a broker's start-up read from its own server.log, the
brokers' metadata asked through the Admin API, and what a node that failed last logged."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

from kops.errors import ClusterError
from kops.sandbox import procs
from kops.sandbox.config import SandboxConfig
from kops.sandbox.deadline import Deadline
from kops.sandbox.nodes import log_time
from kops.sandbox.state import Node, SandboxState

#: what a KRaft controller logs once started (Kafka 3.x and 4.x)
CONTROLLER_STARTED = "[KafkaRaftServer nodeId={id}] Kafka Server started"


def failure_details(config: SandboxConfig, node: Node, lines: int = 25) -> list[str]:
    """The first error of the node's last run (the cause, above any stack trace) and the tails of
    its server.log and console.out."""
    out: list[str] = []
    cause = None
    for f in (config.log_dir(node) / "server.log", config.stdout_file(node)):
        recent = procs.tail(f, 400)
        for i, line in enumerate(recent):
            if (" ERROR " in line or " FATAL " in line) and cause is None:
                cause = line
                if i + 1 < len(recent) and not recent[i + 1].startswith("["):
                    cause += " -- " + recent[i + 1].strip()  # the exception's message
            elif line.startswith("# A fatal error has been detected") and cause is None:  # a JVM crash
                what = next((x for x in recent[i + 1 : i + 4] if x.strip("# \n")), "")
                cause = f"{line.strip('# ')} {what.strip('# ')}".strip()
        t = recent[-lines:]
        if t:
            out.append(f"--- last lines of {f}:")
            out.extend(t)
    if cause:
        out.insert(0, f"first error: {cause}")
    return out or [f"(no log output in {config.node_dir(node)})"]


def since_launch(state: SandboxState, node: Node, contains: str, log_file: str = "server.log") -> list[str]:
    """The lines with ``contains`` that ``node`` logged to ``log_file`` since its last launch
    (rolled files included, oldest first; a previous run's lines left out by the launch's offset
    and time)."""
    rec = state.procs.get(state.key(node)) or {}
    launched = rec.get("launched_ms", 0) / 1000.0
    offset = int(rec.get("log_offset", 0))
    log_dir = state.config.log_dir(node)
    files = sorted((p for p in log_dir.glob(f"{log_file}.*") if p.stat().st_mtime >= launched - 1),
                   key=lambda p: p.stat().st_mtime)
    out: list[str] = []
    for f in [*files, log_dir / log_file]:
        try:
            with open(f, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(offset if f.name == "server.log" and size >= offset else 0)
                data = fh.read().decode(errors="replace")
        except FileNotFoundError:
            continue
        out.extend(line for line in data.splitlines() if contains in line and log_time(line) >= launched - 2)
    return out


def startup_complete(state: SandboxState, broker_id: int, needle: str, log_file: str = "server.log") -> bool:
    """The broker logged the end of its start-up (``needle``) since its last launch. Until then
    Kafka refuses a graceful shutdown (it halts instead), so start-up waits for it. ``log_file``:
    another of the node's log4j files (a KRaft controller's ``controller.log``)."""
    return bool(since_launch(state, broker_id, needle, log_file))


_TRANSITION = re.compile(r"\[RaftManager id=(\d+)\] Completed transition to (\w+)\(.*?\bepoch=(\d+)(?:, leader=(\d+))?")


def raft_state(lines: list[str]) -> tuple[str, int, int | None] | None:
    """The last Raft state a controller's log shows: (state, epoch, leader id) -- ``("Leader", 4,
    1000)`` on the leader, ``("FollowerState", 4, 1000)`` on a follower, the leader None in the
    other states; None before the first transition."""
    for line in reversed(lines):
        m = _TRANSITION.search(line)
        if m:
            node, what, epoch, leader = m.groups()
            lead = int(node) if what == "Leader" else (int(leader) if leader else None)
            return what, int(epoch), lead
    return None


def quorum_agreement(states: dict[int, tuple[str, int, int | None] | None]) -> int | None:
    """The leader every controller follows, if they all agree (pure): one in state ``Leader`` at
    epoch E, every other a ``FollowerState`` of it at E; None otherwise (an election under way,
    a controller that has not found the leader yet)."""
    leaders = [(c, s[1]) for c, s in states.items() if s is not None and s[0] == "Leader"]
    if len(leaders) != 1:
        return None
    leader, epoch = leaders[0]
    ok = all(s is not None and s[1] == epoch and s[2] == leader and (c == leader or s[0] == "FollowerState")
             for c, s in states.items())
    return leader if ok else None


def wait_quorum_leader(state: SandboxState, ctrls: list[int], deadline: float) -> int | None:
    """Wait until the controllers agree on a leader (:func:`quorum_agreement`, read from their
    server.logs since their launch) and return it; None when they did not by ``deadline`` (the
    caller goes on: the brokers' own start-up reports a quorum that never formed).

    Why: on a dynamic quorum (Kafka 3.9.2) a broker started while the first election was still
    being decided could take the leader of a superseded epoch for the active controller, never
    look again and give up registering after 60 s ("unable to register with the controller
    quorum"): seen in 3 of 10 ``sandbox up --dynamic-quorum`` on a loaded 2-core machine; 12 of 12
    came up with this wait."""
    while True:
        leader = quorum_agreement({c: raft_state(since_launch(state, c, "Completed transition to")) for c in ctrls})
        if leader is not None or time.monotonic() > deadline:
            return leader
        time.sleep(0.3)


def view_agrees(ids: set[int], ctrl: int | None, *, present: set[int], absent: set[int], controller: bool = True) -> bool:
    """One view of the cluster (broker ids, controller id) has ``present`` in it, ``absent`` not,
    and (``controller``) a controller named that is not absent (pure)."""
    return present <= ids and not (absent & ids) and (not controller or (ctrl is not None and ctrl not in absent))


def lagging_brokers(views: dict[int, tuple[set[int], int | None]], *, present: set[int], absent: set[int],
                    controller: bool = True) -> list[int]:
    """The brokers whose own metadata does not agree yet (:func:`view_agrees`), sorted (pure).

    Why each broker, not one: a client bootstraps from any broker of its list, and librdkafka
    (2.16) takes the first Metadata answer for the cluster's. A ZooKeeper-mode broker answers
    from a cache that stays empty (no broker, controller -1) until the controller's first
    UpdateMetadata reaches it, which on a loaded machine with SASL_SSL between the brokers came
    1.9 s after the controller's own (CI: tests/cluster/test_security.py's CreateTopics right
    after "ready" went to such a broker, and librdkafka, given no broker and no controller,
    asked nothing again and gave up after 60 s)."""
    return sorted(b for b, (ids, ctrl) in views.items()
                  if not view_agrees(ids, ctrl, present=present, absent=absent, controller=controller))


def wait_metadata(config: SandboxConfig, live: list[int], *, present: set[int], absent: set[int], deadline: Deadline,
                  client_config: Any = None, controller: bool = True) -> None:
    """Wait until the brokers' metadata agrees (what clients will see next), in DescribeCluster's
    answer and in each live broker's own (:func:`lagging_brokers`): ``present`` in it, ``absent``
    not, and (``controller``) a controller named that is not absent."""
    from kops.sandbox import probe

    if not live:
        return
    bootstrap = ",".join(f"{config.host}:{config.broker_port(b)}" for b in live)
    last: Any = None
    while True:
        try:
            timeout_s = max(1.0, min(5.0, deadline.left()))
            ids, ctrl = probe.kafka_cluster(bootstrap, timeout_s=timeout_s, client_config=client_config)
            last = (sorted(ids), ctrl)
            if view_agrees(ids, ctrl, present=present, absent=absent, controller=controller):
                views = probe.broker_views(bootstrap, live, timeout_s=timeout_s, client_config=client_config)
                late = lagging_brokers(views, present=present, absent=absent, controller=controller)
                if not late:
                    return
                last = "not yet in the metadata of " + ", ".join(
                    f"broker {b} (it sees brokers {sorted(views[b][0])}, controller {views[b][1]})" for b in late)
        except Exception as e:  # noqa: BLE001 - client errors while brokers settle
            last = f"{type(e).__name__}: {e}"
        if deadline.passed(present):
            raise ClusterError(
                f"the cluster metadata did not settle in time (want brokers {sorted(present)} present and "
                f"{sorted(absent)} absent; last seen {last})"
            )
        time.sleep(0.2)


def fail_if_exited(running: Callable[[Node], bool], config: SandboxConfig, brokers: list[int], what: str) -> None:
    """ClusterError for the first of ``brokers`` whose process is gone (``what``: "registered in
    ZooKeeper", "joined the cluster")."""
    for b in sorted(brokers):
        if not running(b):
            raise ClusterError(
                f"broker {b} (rack {config.rack_map[b]}, port {config.broker_port(b)}) exited before it {what}",
                details=failure_details(config, b),
            )


def wait_controllers(state: SandboxState, nodes: Any, ctrls: list[int], deadline: Deadline,
                     needle: str = CONTROLLER_STARTED) -> None:
    """Wait until each of ``ctrls`` logged ``needle`` (``{id}``: its id) since its launch;
    ClusterError for one that exited or not in time (``nodes``: the engine's
    :class:`kops.sandbox.hosts.Nodes`)."""
    cfg = state.config
    todo = list(ctrls)
    while todo:
        todo = [c for c in todo if not startup_complete(state, c, needle.format(id=c))]
        for c in todo:
            if not nodes.running(c):
                raise ClusterError(f"KRaft controller {c} (Kafka {cfg.version_of(c)}) exited during start-up",
                                   details=[nodes.why_not_running(c), *failure_details(cfg, c)])
        if todo and deadline.passed(todo):
            raise ClusterError(f"KRaft controllers {todo} did not start in time", details=failure_details(cfg, todo[0]))
        if todo:
            time.sleep(0.3)


__all__ = ["CONTROLLER_STARTED", "fail_if_exited", "failure_details", "lagging_brokers", "quorum_agreement", "raft_state",
           "since_launch", "startup_complete", "view_agrees", "wait_controllers", "wait_metadata", "wait_quorum_leader"]
