"""Step implementations. Each takes resolved fields and a RunContext and returns a result dict
(``summary`` for people, figures such as ``partitions_moved`` / ``leaders_moved`` for the report).

Every step is idempotent, and in a dry run computes from the live topology what it would do
and changes nothing.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from typing import Any

from kops.errors import BadInput, ClusterTimeout
from kops.model import Topology
from kops.playbook.state import HookFailed, PausedForOperator, RunContext, StepFailed
from kops.playbook.spec import HOOK_VARS, StepSpec

from kops.playbook.registry import REGISTRY as _REGISTRY, step


def run_step(spec: StepSpec, fields: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    fn = _REGISTRY.get(spec.type)
    if fn is None:  # the spec knows the type but this build has no implementation
        raise BadInput(f"step {spec.id!r}: step type {spec.type!r} is not available in this build")
    return fn(fields, ctx)


# -- selectors ----------------------------------------------------------------------------------
def target_brokers(fields: dict[str, Any], topo: Topology) -> list[int]:
    """The brokers a step is about: ``broker``, ``brokers`` or all brokers of ``rack``."""
    if fields.get("broker") is not None:
        return [int(fields["broker"])]
    if fields.get("brokers"):
        return list(fields["brokers"])
    if fields.get("rack") is not None:
        ids = topo.brokers_in_rack(fields["rack"])
        if not ids:
            raise BadInput(f"rack {fields['rack']!r} has no brokers (racks: {', '.join(topo.racks) or 'none'})")
        return ids
    return []


def preflight(name: str, steps: list[tuple[StepSpec, dict[str, Any]]], ctx: RunContext) -> None:
    """Check every step's inputs (loops unrolled) against the live cluster before the first change."""
    missing = [s.type for s, _ in steps if s.type not in _REGISTRY]
    if missing:
        raise BadInput(f"playbook {name}: step types not available in this build: {sorted(set(missing))}")
    topo = ctx.topology()
    known = {b.id for b in topo.brokers}
    problems = []
    for s, f in steps:
        if f.get("rack") is not None and not topo.brokers_in_rack(f["rack"]):
            problems.append(f"step {s.id!r} (line {s.line}): unknown rack {f['rack']!r} "
                            f"(racks: {', '.join(topo.racks) or 'none'})")
        for b in ([f["broker"]] if f.get("broker") is not None else []) + list(f.get("brokers") or []):
            if b not in known and s.type not in ("plan",):
                problems.append(f"step {s.id!r} (line {s.line}): unknown broker {b}")
        if s.type == "upgrade_features":  # a bad release is found before the first broker is upgraded
            from kops.cluster.features import refuse_on_zookeeper, wanted_levels

            try:
                refuse_on_zookeeper(wanted_levels(f.get("release_version") or None, list(f.get("features") or [])),
                                    topo.mode)
            except BadInput as e:
                problems.append(f"step {s.id!r} (line {s.line}): {e.message}")
    if not problems:  # a migration's preconditions (kops.playbook.migration), read once the inputs are right
        from kops.playbook import migration

        from kops.playbook import quorum

        refused = migration.preflight(steps, ctx) + quorum.preflight(steps, ctx)
        if refused:
            raise BadInput(f"playbook {name}: refused before any change", details=refused)
    if problems:
        raise BadInput(f"playbook {name}: bad parameters for this cluster", details=problems)


# -- conditions ---------------------------------------------------------------------------------
def evaluate(condition: str, fields: dict[str, Any], topo: Topology, ctx: RunContext) -> tuple[bool, str]:
    """(satisfied, explanation) for a wait_for condition on a fresh topology."""
    from kops.health import check_health
    from kops.playbook import migration

    from kops.playbook import quorum

    if condition in migration.CONDITIONS:
        return migration.evaluate(condition, fields, topo, ctx)
    if condition in quorum.CONDITIONS:
        return quorum.evaluate(condition, fields, ctx)
    brokers = target_brokers(fields, topo)
    alive = {b.id for b in topo.brokers if b.alive}
    if condition == "healthy":
        rep = check_health(topo)
        allow = set(fields.get("allow") or [])
        bad = [f for f in rep.findings if f.severity != "warning" and f.check not in allow]
        lost = set(fields.get("tolerate_down") or []) - alive
        tolerated = [f for f in bad if lost and _only_because_down(f, topo, lost)]
        bad = [f for f in bad if f not in tolerated]
        if bad:
            return False, f"{len(bad)} findings, e.g. {bad[0].subject}: {bad[0].message}"
        if tolerated:
            return True, (f"healthy but for broker(s) {sorted(lost)} being down ({len(tolerated)} findings "
                          "that only their replicas cause)")
        return True, "healthy"
    if condition == "no_leaders":
        led = [p for p in topo.partitions() if p.leader in brokers]
        return (not led, f"{len(led)} partitions still led by brokers {brokers}")
    if condition == "brokers_up":
        down = [b for b in brokers if b not in alive]
        return (not down, f"brokers {down} not registered" if down else f"brokers {brokers} up")
    if condition == "brokers_down":
        up = [b for b in brokers if b in alive]
        return (not up, f"brokers {up} still registered" if up else f"brokers {brokers} down")
    if condition == "in_sync":
        down = [b for b in brokers if b not in alive]
        lagging = [p for p in topo.partitions() for b in brokers if b in p.replicas and b not in p.isr]
        ok = not down and not lagging
        leaders = sorted({p.leader for p in lagging if p.leader is not None and p.leader >= 0})
        return (ok, f"brokers {down} down" if down else f"{len(lagging)} replicas on {brokers} out of ISR"
                + (f" (of partitions led by brokers {leaders})" if leaders else ""))
    if condition == "no_reassignment":
        moving = [p for p in topo.partitions() if p.reassigning]
        return (not moving, f"{len(moving)} partitions being reassigned")
    raise BadInput(f"unknown condition {condition!r}")  # pragma: no cover - spec validated


def _only_because_down(f: Any, topo: Topology, lost: set[int]) -> bool:
    """A health finding that the brokers ``lost`` being down explains entirely: one of them is
    down, or a partition misses from its ISR only replicas on them (under-replicated, at or
    under min.insync.replicas) while it still has a leader. An offline partition, or one that
    also misses a replica elsewhere, is never explained away."""
    if f.check == "broker_down":
        return f.broker in lost
    if f.check not in ("under_replicated", "at_min_isr", "under_min_isr") or f.topic is None:
        return False
    p = topo.partition(f.topic, f.partition)
    if p is None or p.offline:
        return False
    missing = set(p.replicas) - set(p.isr)
    return bool(missing) and missing <= lost


def observe(condition: str, fields: dict[str, Any], ctx: RunContext) -> tuple[bool | None, str]:
    """:func:`evaluate` on a fresh topology, or ``(None, why)`` for a read the cluster answered too
    late (:class:`ClusterTimeout`: a broker restarting, a controller moving, a request forwarded to
    a controller that is gone): "not yet". A wait polls the cluster while brokers restart, and one
    late answer must not end the run."""
    try:
        return evaluate(condition, fields, ctx.topology(), ctx)
    except ClusterTimeout as e:
        return None, f"the cluster did not answer in time ({e.message})"


def wait_until(condition: str, fields: dict[str, Any], ctx: RunContext, timeout: float, interval: float) -> str:
    """Poll ``condition`` every ``interval`` s until it holds; at ``timeout`` the step fails with
    what the last answered read said (the leaders a lagging replica waits on, say), and what
    timed out when the last reads were late."""
    from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

    last = {"why": "", "late": ""}

    def poll() -> bool:
        ok, why = observe(condition, fields, ctx)
        if ok is None:
            last["late"] = why
        else:
            last.update(why=why, late="")
        return bool(ok)

    try:
        Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(interval),
                 retry=retry_if_result(lambda ok: not ok))(poll)
    except RetryError:
        why = last["why"] + ("; then " if last["why"] and last["late"] else "") + last["late"]
        raise StepFailed(f"{condition} not reached within {timeout:.0f} s: {why}") from None
    return last["why"]


# -- generic steps ------------------------------------------------------------------------------
@step("health_gate")
def _health_gate(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    timeout = float(f.get("timeout", 0))
    ok, why = observe("healthy", f, ctx)
    if ok:
        what = "cluster healthy" if why == "healthy" else f"cluster {why}"
        return {"summary": what + (f" (allowed: {', '.join(f['allow'])})" if f.get("allow") else "")}
    if ctx.dry_run:
        return {"summary": f"would STOP here unless it becomes healthy: {why}", "would_fail": True}
    if timeout > 0:
        return {"summary": wait_until("healthy", f, ctx, timeout, 2.0)}
    raise StepFailed(f"health gate: {why}")


@step("wait_for")
def _wait_for(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    cond = f["condition"]
    if ctx.dry_run:
        ok, why = observe(cond, f, ctx)
        return {"summary": f"would wait up to {f['timeout']:.0f} s for {cond} (now: {'met' if ok else why})"}
    why = wait_until(cond, f, ctx, float(f["timeout"]), float(f.get("interval", 2.0)))
    return {"summary": f"{cond}: {why}"}


@step("pause")
def _pause(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    msg = f["message"]
    if ctx.dry_run:
        return {"summary": f"would pause for the operator: {msg}"}
    if ctx.yes:
        ctx.say(f"  {msg} (continuing: --yes)")
        return {"summary": "skipped (--yes)"}
    if not (ctx.interactive and sys.stdin.isatty()):
        raise PausedForOperator(f"{msg} (no terminal to confirm on: resuming the run continues after this pause)")
    ctx.say(f"  {msg}")
    while True:
        answer = input("  type 'continue' when ready (or 'abort'): ").strip().lower()
        if answer == "continue":
            return {"summary": "operator confirmed"}
        if answer == "abort":
            raise StepFailed("operator aborted at the pause")


def _hook_env(ctx: RunContext, **extra: Any) -> dict[str, str]:
    env = {**os.environ, "KOPS_RUN_ID": ctx.state.run_id}
    env.update({f"KOPS_PARAM_{k.upper()}": ",".join(map(str, v)) if isinstance(v, list) else str(v)
                for k, v in ctx.params.items()})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _run_hook(cmd: str, env: dict[str, str], timeout: float, tail_lines: int) -> tuple[int | None, list[str], float]:
    """(exit code or None when it timed out, the last lines of its output, seconds). The hook runs
    in its own process group: a timeout ends all of it, not only the shell."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, shell=True, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        import signal

        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        code = None
    return code, (out or "").strip().splitlines()[-tail_lines:], round(time.monotonic() - t0, 3)


@step("shell")
def _shell(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    cmd = f["command"]
    if ctx.dry_run:
        return {"summary": f"would run: {cmd}"}
    code, tail, _ = _run_hook(cmd, _hook_env(ctx), float(f.get("timeout", 600)), 5)
    if code is None:
        raise StepFailed(f"shell hook timed out: {cmd}", details=tail)
    if code != 0 and not f.get("allow_failure", False):
        raise StepFailed(f"shell hook exited {code}: {cmd}", details=tail)
    return {"summary": f"exit {code}", "exit_code": code, "output_tail": tail}


_HOOK_REF = re.compile(r"\{(" + "|".join(HOOK_VARS) + r")\}")


@step("restart")
def _restart(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """Restart one broker with the operator's command (``{broker}``, ``{host}``, ``{port}``,
    ``{rack}`` filled in, shell-quoted; also in ``KOPS_BROKER_ID`` / ``_HOST`` / ``_PORT`` /
    ``_RACK``). Its exit code and the end of its output go into the state file; a failure or a
    timeout stops the run with exit 3 (resumable: the step runs again)."""
    b = int(f["broker"])
    broker = ctx.brokers().get(b)
    values = {"broker": b, "host": getattr(broker, "host", None) or "", "port": getattr(broker, "port", None) or "",
              "rack": getattr(broker, "rack", None) or ""}
    cmd = _HOOK_REF.sub(lambda m: shlex.quote(str(values[m.group(1)])), f["command"])
    timeout = float(f.get("timeout", 600))
    if ctx.dry_run:
        return {"summary": f"would restart broker {b} with: {cmd} (timeout {timeout:.0f} s)", "command": cmd}
    env = _hook_env(ctx, KOPS_BROKER_ID=b, KOPS_BROKER_HOST=values["host"], KOPS_BROKER_PORT=values["port"],
                    KOPS_BROKER_RACK=values["rack"])
    code, tail, took = _run_hook(cmd, env, timeout, 20)
    if code is None:
        raise HookFailed(f"the restart hook for broker {b} did not finish within {timeout:.0f} s (stopped): {cmd}",
                         details=[f"command: {cmd}", "exit code: none (timed out)", *tail])
    if code != 0:
        raise HookFailed(f"the restart hook for broker {b} exited {code}: {cmd}",
                         details=[f"command: {cmd}", f"exit code: {code}", *tail])
    return {"summary": f"broker {b} restarted ({took:.1f} s, exit 0)", "command": cmd, "exit_code": code,
            "duration_s": took, "output_tail": tail}


@step("upgrade_features")
def _upgrade_features(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """Raise metadata.version (``release_version``) and other features (``features``:
    NAME=LEVEL) through :func:`kops.ops.features.raise_features`: validated by the active
    controller even in a dry run, and only validated with ``validate_only``; a level already
    finalized is left alone (so a resumed run passes)."""
    from kops.cluster.features import wanted_levels
    from kops.ops.features import raise_features

    wanted = wanted_levels(f.get("release_version") or None, [str(x) for x in f.get("features") or []])
    if ctx.dry_run and ctx.topology_file:  # a snapshot has no feature levels: say what would be asked
        return {"summary": "would raise " + ", ".join(f"{k} to {v}" for k, v in sorted(wanted.items()))
                + " (not validated: a dry run on a snapshot)"}
    with ctx.connection() as conn:
        res = raise_features(conn, wanted, dry_run=ctx.dry_run or bool(f.get("validate_only")))
    return {"summary": res.summary(), "raises": [r.to_dict() for r in res.raises], "changed": res.changed}


@step("notify")
def _notify(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    msg = f"[kops {ctx.state.playbook} {ctx.state.run_id}] {f['message']}"
    if ctx.dry_run:
        return {"summary": f"would notify: {f['message']}"}
    ctx.say(f"  notify: {f['message']}")
    if f.get("file"):
        with open(os.path.expanduser(f["file"]), "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {msg}\n")
    if f.get("command"):
        subprocess.run(f["command"], shell=True, env={**os.environ, "KOPS_MESSAGE": msg}, timeout=60, check=False)
    return {"summary": "sent"}


# -- reassignment steps (through kops.ops.reassign: one engine, one journal) ----------------------
def _plan_of(f: dict[str, Any], ctx: RunContext):
    """The plan a previous ``plan`` step computed (from its file, or inline in a dry run)."""
    from kops.model import ReassignmentPlan

    res = ctx.state.result_of(f["plan"])
    if "plan" in res:
        return ReassignmentPlan.from_dict(res["plan"], source=f"plan of step {f['plan']!r}")
    path = res.get("plan_file")
    if not path or not isinstance(path, str):
        raise StepFailed(f"step {f['plan']!r} has not produced a plan (run it first)")
    from kops.inputs.files import read_json

    what = f"plan of step {f['plan']!r}"
    return ReassignmentPlan.from_dict(read_json(path, what=what), source=f"{what} {path}")


def _execute_options(f: dict[str, Any]):
    from kops.ops.reassign import ExecuteOptions

    return ExecuteOptions(
        **ExecuteOptions.rate(f.get("throttle")),
        max_moves_per_broker=f.get("max_moves_per_broker"),
        max_moves_in_flight=f.get("max_moves_in_flight"),
        wait=True,
        timeout_s=f.get("timeout"),
    )


@step("execute")
def _execute(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    from kops.ops import journal
    from kops.ops import reassign
    plan = _plan_of(f, ctx)
    if not plan.entries:
        return {"summary": "the plan moves nothing", "partitions_moved": 0}
    opts = _execute_options(f)
    if ctx.dry_run:
        from kops.ops.validate import validate_plan

        moves = [m for m in validate_plan(plan, ctx.topology()) if not m.noop]
        nbytes = sum(m.bytes_to_move or 0 for m in moves)
        eta = nbytes / opts.throttle if nbytes and opts.throttle else None  # (auto: at its minimum)
        return {"summary": f"would move {len(moves)} partitions"
                           + (f", {nbytes / 1e6:.1f} MB" if nbytes else "")
                           + (f", about {eta:.0f} s at the throttle" if eta else ""),
                "partitions_moved": len(moves), "applied_plan": plan.to_dict()}
    with ctx.connection() as conn:
        # idempotent: an unfinished execution of this very plan (kops was killed) is resumed
        store = journal.JournalStore(conn, reassign.cluster_id_of(reassign.cluster_identity(conn)))
        earlier = reassign.find_journal(store, plan=plan, unfinished_only=True)
        if earlier is not None:
            ctx.say(f"  resuming execution {earlier.id} of this plan")
            outcome = reassign.resume(conn, opts, execution_id=earlier.id)
        else:
            prepared = reassign.prepare(conn, plan, opts)  # validates the whole plan before any write
            outcome = reassign.start(conn, prepared, opts)
    result = {"execution_id": outcome.journal.id, "partitions_moved": len(outcome.journal.moves),
              "bytes_moved": outcome.bytes_total, "summary": outcome.message}
    if outcome.exit_code != 0 or not outcome.finished:
        raise StepFailed(f"execution {outcome.journal.id}: {outcome.message}", details=outcome.notes)
    return result


@step("verify")
def _verify(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    from kops.ops import reassign
    plan = _plan_of(f, ctx)
    if ctx.dry_run:
        return {"summary": f"would verify {len(plan.entries)} partitions"}
    deadline = time.monotonic() + float(f.get("timeout", 600))
    while True:
        with ctx.connection() as conn:
            res = reassign.verify(conn, plan)
        states = res.to_dict()["summary"]
        if res.exit_code == 0:
            return {"summary": f"complete: {states}", "throttles_removed": len(res.throttles_removed)}
        if res.exit_code == 1 or time.monotonic() > deadline:
            bad = [s.message for s in res.statuses if s.state != "complete"][:20]
            raise StepFailed(f"verify: {states}", details=bad)
        time.sleep(3)


@step("elect")
def _elect(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    from kops.ops.elections import run_elections

    etype = f.get("election_type", "preferred")
    topo = ctx.topology()
    scope = set(target_brokers(f, topo))
    alive = {b.id for b in topo.brokers if b.alive}
    # preferred: only where the preferred replica is alive, in the ISR and not leading yet
    todo = [p.tp for p in topo.partitions()
            if p.leader != p.preferred_leader and p.preferred_leader in alive and p.preferred_leader in p.isr
            and (not scope or p.preferred_leader in scope)]
    if etype == "unclean":
        todo = [p.tp for p in topo.partitions() if p.offline]
    if ctx.dry_run or not todo:
        verb = "would elect" if ctx.dry_run else "nothing to elect:"
        return {"summary": f"{verb} {len(todo)} {etype} leaders"}
    with ctx.connection() as conn:
        res = run_elections(conn, etype, todo, needed=set(todo))  # (none led as asked when read)
    counts = res.counts()
    failed = [f"{o.topic}-{o.partition}: {o.reason}" for o in res.failed][:20]
    if failed:
        raise StepFailed(f"{len(res.failed)} elections failed", details=failed)
    return {"summary": ", ".join(f"{k} {v}" for k, v in counts.items()),
            "leaders_moved": len(res.elected)}


@step("plan")
def _plan(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """Compute the plan on the live topology and keep it (a file in the run's directory)."""
    from kops.model import ReassignmentPlan
    from kops.placement import balancer

    topo = ctx.topology()
    goal = f["goal"]
    if goal == "replace-broker":
        from kops.placement.replace import replace_broker

        olds = f.get("brokers") or []
        if len(olds) != 1 or f.get("new_broker") is None:
            raise BadInput("a replace-broker plan needs one broker in 'brokers' and 'new_broker'")
        changes = replace_broker(topo, olds[0], int(f["new_broker"]))
        plan = ReassignmentPlan.from_assignment(changes)
        summary = f"{len(changes)} partitions move from broker {olds[0]} to {f['new_broker']} (same positions)"
    else:
        g = balancer.Goal(goal, brokers=tuple(f.get("brokers") or ()), rack=f.get("rack"))
        res = balancer.plan(topo, g, max_moves=f.get("max_moves"), max_bytes=f.get("max_bytes"))
        plan = res.plan
        rep = res.report
        summary = (f"{len(plan.entries)} partitions change, {rep['replicas_moved']} replicas move "
                   f"(lower bound {rep['lower_bound']['moves']}; Kafka's --generate would move "
                   f"{rep['kafka_generate'].get('replicas_moved', '?')})")
        if not res.complete:
            summary += "; bounded: run again for the rest"
    out: dict[str, Any] = {"summary": summary, "partitions": len(plan.entries)}
    if ctx.dry_run:
        out["plan"] = plan.to_dict()
    else:
        path = ctx.run_dir() / f"plan-{ctx.current_step}.json"
        path.write_text(plan.to_json() + "\n")
        out["plan_file"] = str(path)
    return out


# -- leadership steps (through kops.ops.leader_rebalance: one demotion record per cluster) ---------
def _leadership(action: str, f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    from kops.ops import leader_rebalance
    broker = [int(f["broker"])] if f.get("broker") is not None else None
    rack = [f["rack"]] if f.get("rack") is not None else None
    if ctx.dry_run and ctx.topology_file:  # offline: the pure plan only
        from kops.placement.leadership import plan_demote

        topo = ctx.topology()
        ids = leader_rebalance.resolve_brokers(topo, broker, rack)
        if action == "restore":
            return {"summary": f"would give leadership back to brokers {ids} (from the demotion record)"}
        move = plan_demote(topo, ids)
        return {"summary": f"would reorder {len(move.reorder)} and elect {len(move.elect)} partitions; "
                           f"{len(move.unmovable)} cannot be moved", "leaders_moved": len(move.elect)}
    with ctx.connection() as conn:
        fn = leader_rebalance.demote if action == "demote" else leader_rebalance.restore
        res = fn(conn, broker=broker, rack=rack, dry_run=ctx.dry_run)
    out = {"summary": res.summary(), "leaders_moved": 0 if ctx.dry_run else len(res.elections.elected if res.elections else []),
           "unmovable": [u.to_dict() for u in res.move.unmovable][:50]}
    if not ctx.dry_run and res.exit_code != 0:
        raise StepFailed(res.summary(), details=[f"{u.tp[0]}-{u.tp[1]}: {u.reason}" for u in res.remaining][:50])
    return out


@step("demote")
def _demote(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    return _leadership("demote", f, ctx)


@step("restore")
def _restore(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    return _leadership("restore", f, ctx)


# step families in their own modules, registered with @step when imported
__import__("kops.playbook.migration")
__import__("kops.playbook.quorum")
