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
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from kops.errors import BadInput, KopsError
from kops.playbook import steps as step_impls
from kops.model import Topology
from kops.playbook.spec import LOOP_VAR, Playbook, StepSpec, bind_params, resolve_all, resolve_fields
from kops.playbook.state import (  # noqa: F401  (re-exported: the engine's public names)
    STEP_STATUSES,
    HookFailed,
    PausedForOperator,
    RunContext,
    RunState,
    StepFailed,
    now_iso,
    runs_dir,
)

def new_state(pb: Playbook, params: dict[str, Any], *, dry_run: bool) -> RunState:
    run_id = f"{pb.name}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"
    sha = hashlib.sha256(pb.text.encode()).hexdigest()
    return RunState(run_id, pb.name, pb.source, sha, params, [], dry_run=dry_run,
                    path=None if dry_run else runs_dir() / f"{run_id}.json")


@dataclass(frozen=True)
class Planned:
    """One step as the run executes it: a playbook step, or one iteration's copy of a for_each
    body step (id ``<loop>.<broker>.<step>``, ``{broker}`` resolved)."""

    spec: StepSpec
    fields: dict[str, Any]
    loop: str | None = None
    broker: int | None = None
    first_of_iteration: bool = False
    pause_before_s: float = 0.0


def loop_brokers(fields: dict[str, Any], topo: Topology) -> list[int]:
    """The brokers a for_each goes through, in order. ``order: safe`` (the default): rack by
    rack (racks by name), the active controller's rack last and the controller last in it, so
    leadership of the cluster moves once, at the end; ``order: given``: as ``brokers`` lists them."""
    known = {b.id: b for b in topo.brokers}
    if fields.get("brokers"):
        ids = list(dict.fromkeys(fields["brokers"]))
        unknown = [b for b in ids if b not in known]
        if unknown:
            raise BadInput(f"for_each: unknown brokers {unknown} (cluster: {sorted(known)})")
    elif fields.get("rack") is not None:
        ids = topo.brokers_in_rack(fields["rack"])
        if not ids:
            raise BadInput(f"for_each: rack {fields['rack']!r} has no brokers (racks: {', '.join(topo.racks) or 'none'})")
    else:
        ids = sorted(known)
    if fields.get("order", "safe") == "given" and fields.get("brokers"):
        return ids
    controller = topo.controller
    controller_rack = known[controller].rack if controller in known else None

    def key(b: int) -> tuple:
        rack = known[b].rack or ""
        return (controller is not None and rack == (controller_rack or ""), rack, b == controller, b)

    return sorted(ids, key=key)


def expand(pb: Playbook, params: dict[str, Any], resolved: dict[str, dict[str, Any]],
           loops: dict[str, list[int]]) -> list[Planned]:
    """The steps the run executes, loops unrolled over the brokers in ``loops``."""
    out: list[Planned] = []
    for s in pb.steps:
        if s.type != "for_each":
            out.append(Planned(s, resolved[s.id]))
            continue
        pause = float(resolved[s.id].get("pause_between", 0.0))
        for n, b in enumerate(loops.get(s.id, [])):
            for i, body in enumerate(s.body):
                fields = resolve_fields(body, {**params, LOOP_VAR: b})
                out.append(Planned(replace(body, id=f"{s.id}.{b}.{body.id}"), fields, s.id, b,
                                   first_of_iteration=i == 0, pause_before_s=pause if i == 0 and n else 0.0))
    return out


def _broker_now(topo: Topology, b: int) -> str:
    """What a resumed loop re-checks about the broker it was on."""
    broker = next((x for x in topo.brokers if x.id == b), None)
    if broker is None or not broker.alive:
        return f"broker {b} is not registered"
    parts = list(topo.partitions())
    led = sum(1 for p in parts if p.leader == b)
    preferred = sum(1 for p in parts if p.preferred_leader == b)
    out_of_isr = sum(1 for p in parts if b in p.replicas and b not in p.isr)
    return (f"broker {b} is registered, leads {led} partition(s) ({preferred} prefer it), "
            f"{out_of_isr} of its replicas out of the ISR")


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
    again: str = "",
) -> RunState:
    """Run (or resume, or dry-run) a playbook. Returns the final state; raises on failure.

    ``connect()`` opens a :class:`~kops.cluster.connection.Connection` (a context manager);
    ``has_cluster`` says whether a cluster was given at all (without one only the steps that need
    no cluster can run, and there is no cron job to pause). ``again``: the options the operator
    gave to reach the cluster (`` --bootstrap-server ...``), repeated in the ``--resume`` lines.
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
    # the brokers of each loop, in order, fixed for the whole run (a resumed run keeps them; a loop
    # the playbook gained since the run started gets its brokers now)
    new_loops = [s for s in pb.steps if s.type == "for_each" and s.id not in state.loops]
    if new_loops:
        topo = ctx.topology()
        for s in new_loops:
            state.loops[s.id] = loop_brokers(resolved[s.id], topo)
            say(f"[{s.id}] for each broker, in this order: {state.loops[s.id]}")
    planned = expand(pb, params, resolved, state.loops)
    if not resume:
        state.steps = [{"id": p.spec.id, "type": p.spec.type, "status": "pending", "line": p.spec.line}
                       for p in planned]
    # pre-flight: every step checks its inputs against the live cluster before anything changes
    if any(s["status"] != "done" for s in state.steps):
        step_impls.preflight(pb.name, [(p.spec, p.fields) for p in planned], ctx)
    state.save()
    say(f"run {state.run_id}" + (" (dry run: nothing will change)" if dry_run else f"  state: {state.path}"))
    pause_source = f"playbook {pb.name} run {state.run_id}"
    if not dry_run:  # kops' cron jobs step aside while the run lasts (lifted when it is done)
        _pause_cron_jobs(ctx, pb, state, pause_source, say)

    resumed_at: str | None = None  # the loop iteration a resumed run continues in
    ran_here = False
    for item in planned:
        spec = item.spec
        rec = state.step(spec.id) if any(s["id"] == spec.id for s in state.steps) else None
        if rec is None:  # the playbook gained a step since the run started
            rec = {"id": spec.id, "type": spec.type, "status": "pending", "line": spec.line}
            state.steps.append(rec)
        if rec["status"] in ("done", "skipped"):
            continue
        if rec["status"] == "paused":  # resuming the run is the operator's go-ahead
            rec.update(status="done", finished_at=now_iso(), result={"summary": "operator resumed the run"})
            state.save()
            say(f"[{spec.id}] pause: operator resumed the run")
            continue
        if item.loop is not None and resume and not ran_here and resumed_at is None:
            # a resumed run continues with the broker it was on: say where that broker stands
            resumed_at = f"{item.loop}.{item.broker}"
            started = any(r["id"].startswith(resumed_at + ".") and r["status"] != "pending" for r in state.steps)
            if started:
                now = _broker_now(ctx.topology(), item.broker)
                say(f"[{item.loop}] resuming at broker {item.broker} (step {spec.id}): {now}")
                rec["resume_check"] = now
        if item.pause_before_s and ran_here and not dry_run:
            say(f"[{item.loop}] pausing {item.pause_before_s:.0f} s before broker {item.broker}")
            time.sleep(item.pause_before_s)
        rec.update(status="running", started_at=now_iso())
        rec.pop("error", None)
        state.save()
        ran_here = True
        t0 = time.monotonic()
        ctx.current_step = spec.id
        label = f"[{spec.id}] {spec.type}"
        say(f"{label} ...")
        try:
            result = step_impls.run_step(spec, item.fields, ctx)
        except KeyboardInterrupt as e:
            e.run_state = state  # type: ignore[attr-defined]
            rec.update(status="interrupted", duration_s=round(time.monotonic() - t0, 3))
            state.status = "interrupted"
            state.save()
            say(f"{label} interrupted; continue with: kops playbook run {pb.name} --resume {state.run_id}{again}")
            raise
        except PausedForOperator as e:
            e.run_state = state  # type: ignore[attr-defined]
            rec.update(status="paused", duration_s=round(time.monotonic() - t0, 3))
            state.status = "paused"
            state.save()
            say(f"{label} waiting for the operator: {e.message}")
            say(f"when ready: kops playbook run {pb.name} --resume {state.run_id}{again}")
            raise
        except KopsError as e:
            e.run_state = state  # type: ignore[attr-defined]
            rec.update(status="failed", error=e.message, details=e.details, duration_s=round(time.monotonic() - t0, 3))
            state.status = "failed"
            state.save()
            say(f"{label} FAILED: {e.message}")
            if not dry_run:
                say(f"fix the cause, then: kops playbook run {pb.name} --resume {state.run_id}{again}")
            raise
        rec.update(status="done", finished_at=now_iso(), duration_s=round(time.monotonic() - t0, 3),
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
    """Lift the pause this run set, and read the record back (each try on a fresh connection):
    a pause left behind would keep the cron jobs aside for hours. Tried 3 times, 1 s apart."""
    from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed

    from kops.ops import maintenance

    if not ctx.has_cluster:
        return
    lifted = None
    try:
        for attempt in Retrying(retry=retry_if_exception_type(KopsError), stop=stop_after_attempt(3),
                                wait=wait_fixed(1.0), reraise=True):
            with attempt:
                with ctx.connection() as conn:
                    lifted = maintenance.unpause(conn, source=source) or lifted
                with ctx.connection() as conn:
                    left = maintenance.current(conn)
                if left is not None and left.source == source:
                    raise KopsError(f"the pause is still recorded after lifting it ({left.describe()})")
    except KopsError as e:  # the run is done; the pause ends by itself
        say(f"warning: could not lift the cron pause ({e.message}); it ends by itself, or "
            "`kops rebalance unpause`")
        return
    if lifted is not None:
        say("kops' cron jobs resume")


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
