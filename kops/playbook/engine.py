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
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from typing import Any

from kops.errors import BadInput, KopsError
from kops.playbook import steps as step_impls
from kops.playbook.spec import Playbook, bind_params, resolve_all
from kops.playbook.state import (  # noqa: F401  (re-exported: the engine's public names)
    STEP_STATUSES,
    PausedForOperator,
    RunContext,
    RunState,
    StepFailed,
    _now,
    runs_dir,
)

def new_state(pb: Playbook, params: dict[str, Any], *, dry_run: bool) -> RunState:
    run_id = f"{pb.name}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"
    sha = hashlib.sha256(pb.text.encode()).hexdigest()
    steps = [{"id": s.id, "type": s.type, "status": "pending", "line": s.line} for s in pb.steps]
    return RunState(run_id, pb.name, pb.source, sha, params, steps, dry_run=dry_run,
                    path=None if dry_run else runs_dir() / f"{run_id}.json")


def run(
    pb: Playbook,
    given_params: dict[str, str],
    connect: Callable[[], AbstractContextManager[Any]],
    *,
    has_cluster: bool = True,
    dry_run: bool = False,
    yes: bool = False,
    resume: str | None = None,
    say=print,
    interactive: bool = True,
    topology_file: str | None = None,
) -> RunState:
    """Run (or resume, or dry-run) a playbook. Returns the final state; raises on failure.

    ``connect()`` opens a :class:`~kops.cluster.connection.Connection` (a context manager);
    ``has_cluster`` says whether a cluster was given at all (without one only the steps that need
    no cluster can run, and there is no cron job to pause).
    """
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
    ctx = RunContext(connect, state, dry_run, yes, say, params, interactive, topology_file,
                     has_cluster=has_cluster)
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

    if not ctx.has_cluster:
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

    if not ctx.has_cluster:
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
