"""A playbook run's state (the state file) and what steps are given (:class:`RunContext`).

State file (``$KOPS_HOME/playbook-runs/<run-id>.json``, default ``~/.kops``): see :mod:`kops.playbook.engine`.
The engine and the steps both use these; neither imports the other's internals.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kops.errors import BadInput, KopsError
from kops.paths import kops_home

if TYPE_CHECKING:
    from kops.cluster.connection import Connection

def runs_dir() -> Path:
    return kops_home() / "playbook-runs"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class RunState:
    run_id: str
    playbook: str
    source: str
    sha256: str
    params: dict[str, Any]
    steps: list[dict[str, Any]]
    status: str = "running"
    dry_run: bool = False
    created_at: str = field(default_factory=now_iso)
    path: Path | None = None
    #: each for_each step's brokers, in the order the run goes through them (fixed when the run
    #: starts: a resumed run continues the same order even if the controller moved meanwhile)
    loops: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "playbook": self.playbook, "source": self.source,
            "sha256": self.sha256, "params": self.params, "status": self.status,
            "dry_run": self.dry_run, "created_at": self.created_at, "loops": self.loops,
            "steps": self.steps,
        }

    def save(self) -> None:
        if self.path is None or self.dry_run:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2, default=str))
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, run_id: str) -> RunState:
        """The state of run ``run_id`` (an id, never a path); a missing or damaged state file is
        bad input (exit 2) that says how to recover."""
        from kops.inputs import Problems
        from kops.inputs import values
        from kops.inputs.files import read_json

        values.check("--resume", values.ident, run_id, what="a run id")
        path = runs_dir() / f"{run_id}.json"
        if not path.is_file():
            known = sorted(p.stem for p in runs_dir().glob("*.json"))[-5:]
            raise BadInput(f"--resume: no playbook run {run_id!r} in {runs_dir()}"
                           + (f" (recent: {', '.join(known)})" if known else ""))
        recover = (f"the run's state file {path} is damaged: restore it from a backup or repair it by hand "
                   "(a step marked \"pending\" runs again; every step is idempotent), or move it aside and "
                   "start a new run with the same --param values")
        try:
            d = read_json(str(path), what="playbook run state")
        except BadInput as e:
            raise BadInput(f"{e.message}; {recover}", details=e.details) from None
        problems = Problems(f"--resume {run_id}")
        if not isinstance(d, dict):
            problems.add("(top level)", "not a JSON object")
            d = {}
        for key, kind in (("run_id", str), ("playbook", str), ("source", str), ("sha256", str),
                          ("params", dict), ("steps", list)):
            if not isinstance(d.get(key), kind):
                problems.add(key, f"missing or not a {'string' if kind is str else kind.__name__}")
        for i, st in enumerate(d.get("steps") if isinstance(d.get("steps"), list) else []):
            if not isinstance(st, dict) or not all(isinstance(st.get(k), str) for k in ("id", "type", "status")):
                problems.add(f"steps[{i}]", "needs \"id\", \"type\" and \"status\" (strings)")
            elif st["status"] not in STEP_STATUSES:
                problems.add(f"steps[{i}].status", f"{st['status']!r} is not one of {', '.join(STEP_STATUSES)}")
            elif not isinstance(st.get("result", {}), dict):
                problems.add(f"steps[{i}].result", "not a JSON object")
        loops = d.get("loops", {})
        if not isinstance(loops, dict) or not all(
                isinstance(k, str) and isinstance(v, list) and all(isinstance(b, int) and not isinstance(b, bool) for b in v)
                for k, v in loops.items()):
            problems.add("loops", "not a mapping of loop id to a list of broker ids")
            loops = {}
        if d.get("run_id") not in (None, run_id) and not problems:
            problems.add("run_id", f"{d.get('run_id')!r}, not {run_id!r}")
        problems.raise_if_any(recover)
        return cls(d["run_id"], d["playbook"], d["source"], d["sha256"], d["params"], d["steps"],
                   str(d.get("status", "running")), False, str(d.get("created_at", now_iso())), path, loops)

    def step(self, sid: str) -> dict[str, Any]:
        return next(s for s in self.steps if s["id"] == sid)

    def result_of(self, sid: str) -> dict[str, Any]:
        return self.step(sid).get("result") or {}


#: a step's status in the state file
STEP_STATUSES = ("pending", "running", "done", "failed", "interrupted", "paused", "skipped")


class StepFailed(KopsError):
    """A step could not do its work; the run stops there and can be resumed."""


class HookFailed(StepFailed):
    """The operator's hook (a restart command) failed or timed out: the run stops, resumable (exit 3)."""

    exit_code = 3


class PausedForOperator(KopsError):
    """A pause step without a terminal and without --yes: the run stops, resumable (exit 3).
    Reported as a pause, not an error: the run did what it was told."""

    exit_code = 3
    label = "paused"


@dataclass
class RunContext:
    """What steps get: how to connect to the cluster, the run's state, and how to behave."""

    connect: Callable[[], AbstractContextManager[Connection]]  # opens a connection to the cluster
    state: RunState
    dry_run: bool
    yes: bool
    say: Any  # callable(str)
    params: dict[str, Any]
    interactive: bool = True
    topology_file: str | None = None  # dry runs may plan on a snapshot instead of a live cluster
    current_step: str = ""
    has_cluster: bool = True  # a cluster was given (steps that need none run without one)

    def connection(self) -> AbstractContextManager[Connection]:
        return self.connect()

    def topology(self):
        from kops.cluster.topology import ReadOptions, read_topology

        if self.topology_file:
            from kops.cluster.snapshot import load_topology

            topo = load_topology(self.topology_file)
        else:
            from kops.ops import cordon

            with self.connection() as conn:
                topo = cordon.apply(conn, read_topology(conn, ReadOptions(with_sizes=False)))
        if self.dry_run:
            # what the earlier steps of this dry run would have done: executed plans applied
            for rec in self.state.steps:
                plan = (rec.get("result") or {}).get("applied_plan")
                if rec.get("status") == "done" and plan:
                    topo = topo.with_assignment(
                        {(e["topic"], e["partition"]): e["replicas"] for e in plan["partitions"]})
        return topo

    def brokers(self) -> dict[int, Any]:
        """The live brokers by id (host, port, rack), read without the topics. A step that needs only
        these (``restart``) asks nothing that a broker forwards to the controller (a whole read asks
        for the reassignments): in a ZooKeeper -> KRaft rollback, between the KRaft controllers'
        stop and a ZooKeeper broker's taking over, the brokers in migration mode still forward such
        requests to the stopped controller, and they time out."""
        if self.topology_file:
            from kops.cluster.snapshot import load_topology

            return {b.id: b for b in load_topology(self.topology_file).brokers}
        from kops.cluster.topology import ReadOptions, read_topology

        with self.connection() as conn:
            topo = read_topology(conn, ReadOptions(with_configs=False, with_sizes=False, with_reassignments=False,
                                                   topics=()))
        return {b.id: b for b in topo.brokers}

    def run_dir(self) -> Path:
        d = runs_dir() / self.state.run_id
        if not self.dry_run:
            d.mkdir(parents=True, exist_ok=True)
        return d


