"""Run a playbook: steps in order, a state file after every transition, resume, dry-run.

State file (``$KOPS_HOME/playbook-runs/<run-id>.json``, default ``~/.kops``): the playbook (name,
path, content hash), the parameters, and per step its status (pending / running / done /
failed / interrupted), start and end times, and what it did (plan file, journal/execution ids,
partitions and leaders moved). ``--resume RUN_ID`` skips the steps that are done and runs the
first unfinished step again: every step is idempotent (a demote that already happened demotes
nothing, an execute whose journal says it is running is resumed rather than re-submitted).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kops.errors import BadInput, KopsError
from kops.playbook.spec import Playbook, bind_params, resolve_all


from kops.paths import kops_home  # noqa: E402


def runs_dir() -> Path:
    return kops_home() / "playbook-runs"


def _now() -> str:
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
    created_at: str = field(default_factory=_now)
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "playbook": self.playbook, "source": self.source,
            "sha256": self.sha256, "params": self.params, "status": self.status,
            "dry_run": self.dry_run, "created_at": self.created_at, "steps": self.steps,
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
        from kops.inputs import values as V
        from kops.inputs.files import read_json

        V.check("--resume", V.ident, run_id, what="a run id")
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
        if d.get("run_id") not in (None, run_id) and not problems:
            problems.add("run_id", f"{d.get('run_id')!r}, not {run_id!r}")
        problems.raise_if_any(recover)
        return cls(d["run_id"], d["playbook"], d["source"], d["sha256"], d["params"], d["steps"],
                   str(d.get("status", "running")), False, str(d.get("created_at", _now())), path)

    def step(self, sid: str) -> dict[str, Any]:
        return next(s for s in self.steps if s["id"] == sid)

    def result_of(self, sid: str) -> dict[str, Any]:
        return self.step(sid).get("result") or {}


#: a step's status in the state file
STEP_STATUSES = ("pending", "running", "done", "failed", "interrupted", "paused", "skipped")


class StepFailed(KopsError):
    """A step could not do its work; the run stops there and can be resumed."""


class PausedForOperator(KopsError):
    """A pause step without a terminal and without --yes: the run stops, resumable (exit 3)."""

    exit_code = 3


@dataclass
class RunContext:
    """What steps get: the connection context, the run's state, and how to behave."""

    cli: Any  # kops.cli.common.Context
    state: RunState
    dry_run: bool
    yes: bool
    say: Any  # callable(str)
    params: dict[str, Any]
    interactive: bool = True
    topology_file: str | None = None  # dry runs may plan on a snapshot instead of a live cluster
    current_step: str = ""

    def connection(self):
        return self.cli.connection()

    def topology(self):
        from kops.cluster.topology import ReadOptions, read_topology

        if self.topology_file:
            from kops.cluster.snapshot import load_topology

            topo = load_topology(self.topology_file)
        else:
            with self.connection() as conn:
                topo = read_topology(conn, ReadOptions(with_sizes=False))
        if self.dry_run:
            # what the earlier steps of this dry run would have done: executed plans applied
            for rec in self.state.steps:
                plan = (rec.get("result") or {}).get("applied_plan")
                if rec.get("status") == "done" and plan:
                    topo = topo.with_assignment(
                        {(e["topic"], e["partition"]): e["replicas"] for e in plan["partitions"]})
        return topo

    def run_dir(self) -> Path:
        d = runs_dir() / self.state.run_id
        if not self.dry_run:
            d.mkdir(parents=True, exist_ok=True)
        return d


def new_state(pb: Playbook, params: dict[str, Any], *, dry_run: bool) -> RunState:
    run_id = f"{pb.name}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"
    sha = hashlib.sha256(pb.text.encode()).hexdigest()
    steps = [{"id": s.id, "type": s.type, "status": "pending", "line": s.line} for s in pb.steps]
    return RunState(run_id, pb.name, pb.source, sha, params, steps, dry_run=dry_run,
                    path=None if dry_run else runs_dir() / f"{run_id}.json")


def run(
    pb: Playbook,
    given_params: dict[str, str],
    cli_ctx: Any,
    *,
    dry_run: bool = False,
    yes: bool = False,
    resume: str | None = None,
    say=print,
    interactive: bool = True,
    topology_file: str | None = None,
) -> RunState:
    """Run (or resume, or dry-run) a playbook. Returns the final state; raises on failure."""
    from kops.playbook import steps as step_impls

    if resume:
        state = RunState.load(resume)
        if state.playbook != pb.name:
            raise BadInput(f"--resume {resume}: that run is of playbook {state.playbook!r}, not {pb.name!r}")
        if state.sha256 != hashlib.sha256(pb.text.encode()).hexdigest():
            say(f"warning: playbook {pb.source} changed since run {resume} started; resuming by step id")
        if given_params:
            raise BadInput("--resume takes the parameters of the original run; do not pass --param")
        params = state.params
        if state.status == "done":
            say(f"run {resume} already finished")
            return state
        state.status = "running"
    else:
        params = bind_params(pb, given_params)
        state = new_state(pb, params, dry_run=dry_run)

    if topology_file and not dry_run:
        raise BadInput("--topology works only with --dry-run: a run acts on a live cluster")
    ctx = RunContext(cli_ctx, state, dry_run, yes, say, params, interactive, topology_file)
    resolved = resolve_all(pb, params)
    # pre-flight: every step checks its inputs against the live cluster before anything changes
    if any(s["status"] != "done" for s in state.steps):
        step_impls.preflight(pb, resolved, ctx)
    state.save()
    say(f"run {state.run_id}" + (" (dry run: nothing will change)" if dry_run else f"  state: {state.path}"))
    pause_source = f"playbook {pb.name} run {state.run_id}"
    if not dry_run:  # kops' cron jobs step aside while the run lasts (lifted when it is done)
        _pause_cron_jobs(ctx, pb, state, pause_source, say)

    for spec in pb.steps:
        rec = state.step(spec.id) if any(s["id"] == spec.id for s in state.steps) else None
        if rec is None:  # the playbook gained a step since the run started
            rec = {"id": spec.id, "type": spec.type, "status": "pending", "line": spec.line}
            state.steps.append(rec)
        if rec["status"] in ("done", "skipped"):
            continue
        if rec["status"] == "paused":  # resuming the run is the operator's go-ahead
            rec.update(status="done", finished_at=_now(), result={"summary": "operator resumed the run"})
            state.save()
            say(f"[{spec.id}] pause: operator resumed the run")
            continue
        rec.update(status="running", started_at=_now())
        rec.pop("error", None)
        state.save()
        t0 = time.monotonic()
        ctx.current_step = spec.id
        label = f"[{spec.id}] {spec.type}"
        say(f"{label} ...")
        try:
            result = step_impls.run_step(spec, resolved[spec.id], ctx)
        except KeyboardInterrupt as e:
            e.run_state = state  # type: ignore[attr-defined]
            rec.update(status="interrupted", duration_s=round(time.monotonic() - t0, 3))
            state.status = "interrupted"
            state.save()
            say(f"{label} interrupted; continue with: kops playbook run {pb.name} --resume {state.run_id}")
            raise
        except PausedForOperator as e:
            e.run_state = state  # type: ignore[attr-defined]
            rec.update(status="paused", duration_s=round(time.monotonic() - t0, 3))
            state.status = "paused"
            state.save()
            say(f"{label} waiting for the operator: {e.message}")
            say(f"when ready: kops playbook run {pb.name} --resume {state.run_id}")
            raise
        except KopsError as e:
            e.run_state = state  # type: ignore[attr-defined]
            rec.update(status="failed", error=e.message, details=e.details, duration_s=round(time.monotonic() - t0, 3))
            state.status = "failed"
            state.save()
            say(f"{label} FAILED: {e.message}")
            if not dry_run:
                say(f"fix the cause, then: kops playbook run {pb.name} --resume {state.run_id}")
            raise
        rec.update(status="done", finished_at=_now(), duration_s=round(time.monotonic() - t0, 3),
                   result=result or {})
        state.save()
        summary = (result or {}).get("summary")
        say(f"{label} {'(dry run)' if dry_run else 'done'}" + (f": {summary}" if summary else ""))
    state.status = "done" if not dry_run else "dry-run"
    state.save()
    if not dry_run:
        _lift_cron_pause(ctx, pause_source, say)
    return state


#: how long a run pauses kops' cron jobs (renewed by --resume); a run that is never finished
#: (killed, abandoned) does not keep them paused for longer
CRON_PAUSE_S = 12 * 3600.0


def _pause_cron_jobs(ctx: RunContext, pb: Playbook, state: RunState, source: str, say) -> None:
    """Best effort: a run whose cluster cannot take the record still runs, and says so."""
    from kops.ops import maintenance

    if not getattr(ctx.cli, "bootstrap_server", None):
        return  # no cluster given: only steps that need none can run, and no cron job to pause
    try:
        with ctx.connection() as conn:
            maintenance.pause(conn, reason=f"playbook {pb.name} is running (run {state.run_id})",
                              duration_s=CRON_PAUSE_S, source=source)
    except KopsError as e:
        say(f"warning: could not pause kops' cron jobs ({e.message}); they may act during this run")
        return
    say(f"kops' cron jobs (rebalance step, leader rebalance) step aside while this run lasts "
        f"(at most {CRON_PAUSE_S / 3600:.0f} h unless resumed)")


def _lift_cron_pause(ctx: RunContext, source: str, say) -> None:
    from kops.ops import maintenance

    if not getattr(ctx.cli, "bootstrap_server", None):
        return
    try:
        with ctx.connection() as conn:
            if maintenance.unpause(conn, source=source) is not None:
                say("kops' cron jobs resume")
    except KopsError as e:  # the run is done; the pause ends by itself
        say(f"warning: could not lift the cron pause ({e.message}); it ends by itself")


def report(state: RunState) -> dict[str, Any]:
    """Final report: duration per step, partitions moved, leaders moved."""
    steps = []
    moved = leaders = 0
    for s in state.steps:
        r = s.get("result") or {}
        moved += _count(r.get("partitions_moved"))
        leaders += _count(r.get("leaders_moved"))
        steps.append({
            "id": s["id"], "type": s["type"], "status": s["status"],
            "duration_s": None if s.get("duration_s") is None else _count(s.get("duration_s")),
            "summary": _text(r.get("summary")), "error": _text(s.get("error")),
        })
    return {
        "run_id": state.run_id, "playbook": state.playbook, "status": state.status,
        "params": state.params, "partitions_moved": moved, "leaders_moved": leaders,
        "duration_s": round(sum(_count(s.get("duration_s")) for s in state.steps), 3), "steps": steps,
    }


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def _count(v: Any) -> int | float:
    """A figure from a state file (which a person may have edited): a number, else 0."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else 0
