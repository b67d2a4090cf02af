"""The steps and wait_for conditions of the ``replace-controller`` playbook: a KRaft controller
replaced on a dynamic quorum (KIP-853, Kafka 3.9+), registered with
:func:`kops.playbook.registry.step` like the others. Everything is read from the quorum's leader
(DescribeQuorum through a broker), never timed.

Conditions (``wait_for``; fields ``controller``, ``old_controller``, ``max_lag``):

- ``quorum_observer``: ``controller`` follows the metadata log (an observer, or a voter already)
  with its log end within ``max_lag`` records of the high watermark;
- ``quorum_voter``: ``controller`` is a voter, caught up the same way, and the quorum has a leader;
- ``quorum_replaced``: the quorum has a leader, ``controller`` is a voter, ``old_controller`` is
  not, and no voter is more than ``max_lag`` behind; a quorum of fewer than 3 voters (which cannot
  lose one) is said so in the summary.

Steps: ``quorum_check`` (read before the run changes anything; refused with exit 2: not KRaft, a
static quorum or a Kafka without KIP-853, no leader or a voter behind, the old controller not a
voter, the new id taken, fewer voters left than ``min_voters``), ``add_voter`` (AddRaftVoter with
the observer's directory id from DescribeQuorum; a voter already is left alone) and
``remove_voter`` (RemoveRaftVoter with the voter's directory id; refused while its replacement is
not a caught-up voter, while another voter is behind, or when fewer than ``min_voters`` would be
left; a controller that is no voter any more is left alone).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kops.errors import BadInput, ClusterError
from kops.model import Quorum, QuorumReplica
from kops.playbook.registry import step
from kops.playbook.state import RunContext, StepFailed

CONDITIONS = ("quorum_observer", "quorum_voter", "quorum_replaced")
#: a quorum that can lose one voter and still elect a leader
SAFE_VOTERS = 3


# -- pure parts ---------------------------------------------------------------------------------
def _replica(quorum: Quorum, node: int):
    return next((r for r in (*quorum.voters, *quorum.observers) if r.id == node), None)


def _lag_text(quorum: Quorum, r) -> str:
    lag = quorum.lag(r)
    return "its log end unknown" if lag is None else f"{lag} records behind the high watermark {quorum.high_watermark}"


def caught_up(quorum: Quorum, r, max_lag: int) -> bool:
    lag = quorum.lag(r)
    return lag is not None and lag <= max_lag


def voters_text(quorum: Quorum) -> str:
    return f"voters {[v.id for v in quorum.voters]}, leader {quorum.leader if quorum.leader >= 0 else 'none'}"


def fragility(n_voters: int) -> str:
    """What a quorum of ``n_voters`` can survive, said when it cannot lose a voter."""
    if n_voters >= SAFE_VOTERS:
        return ""
    return (f"; WARNING: a quorum of {n_voters} voter{'s' if n_voters != 1 else ''} cannot lose one more voter "
            f"(majority {n_voters // 2 + 1}): add controllers until it has {SAFE_VOTERS}")


def observer_state(quorum: Quorum, node: int, max_lag: int) -> tuple[bool, str]:
    r = _replica(quorum, node)
    if quorum.leader < 0:
        return False, "the quorum has no leader"
    if r is None:
        return False, f"controller {node} does not follow the metadata log yet (observers {[o.id for o in quorum.observers]})"
    role = "a voter" if any(v.id == node for v in quorum.voters) else "an observer"
    if not caught_up(quorum, r, max_lag):
        return False, f"controller {node} is {role}, {_lag_text(quorum, r)}"
    return True, f"controller {node} is {role}, {_lag_text(quorum, r)} (leader {quorum.leader})"


def voter_state(quorum: Quorum, node: int, max_lag: int) -> tuple[bool, str]:
    if quorum.leader < 0:
        return False, "the quorum has no leader"
    v = next((v for v in quorum.voters if v.id == node), None)
    if v is None:
        return False, f"controller {node} is not a voter ({voters_text(quorum)})"
    if not caught_up(quorum, v, max_lag):
        return False, f"voter {node} is {_lag_text(quorum, v)}"
    return True, f"controller {node} is a voter, {_lag_text(quorum, v)} ({voters_text(quorum)})"


def replaced_state(quorum: Quorum, new: int, old: int, max_lag: int) -> tuple[bool, str]:
    if quorum.leader < 0:
        return False, "the quorum has no leader"
    ids = [v.id for v in quorum.voters]
    if new not in ids:
        return False, f"controller {new} is not a voter ({voters_text(quorum)})"
    if old in ids:
        return False, f"controller {old} is still a voter ({voters_text(quorum)})"
    behind = [f"{v.id} ({_lag_text(quorum, v)})" for v in quorum.voters if not caught_up(quorum, v, max_lag)]
    if behind:
        return False, "voters behind the leader: " + ", ".join(behind)
    return True, f"{voters_text(quorum)}, every voter caught up{fragility(len(ids))}"


def replace_problems(mode: str | None, dynamic_problem: str | None, quorum: Quorum | None, old: int, new: int,
                     min_voters: int, max_lag: int, brokers: set[int]) -> list[str]:
    """Why the replacement of ``old`` by ``new`` cannot start (empty: it can)."""
    if mode != "kraft":
        return [f"the cluster runs in {mode or 'an unknown'} mode: only a KRaft cluster has controllers to replace"]
    if dynamic_problem:
        return [dynamic_problem]
    if quorum is None:
        return ["the KRaft quorum cannot be read (DescribeQuorum)"]
    out = []
    if old == new:
        out.append(f"the new controller's id {new} is the old one's: give the new controller an id of its own")
    if new in brokers:
        out.append(f"id {new} is a broker's: the new controller needs an id no broker or controller has")
    if quorum.leader < 0:
        out.append("the quorum has no leader")
    ids = [v.id for v in quorum.voters]
    if old not in ids:
        out.append(f"controller {old} is not a voter of the quorum ({voters_text(quorum)}): name the controller "
                   "to replace")
    elif new in ids:
        out.append(f"controller {new} is a voter already ({voters_text(quorum)})")
    behind = [f"{v.id} ({_lag_text(quorum, v)})" for v in quorum.voters
              if v.id != old and not caught_up(quorum, v, max_lag)]
    if behind:
        out.append("the quorum is not healthy: voters behind the leader: " + ", ".join(behind))
    if len(ids) < max(1, min_voters):
        out.append(f"the quorum has {len(ids)} voter{'s' if len(ids) != 1 else ''}, fewer than min_voters "
                   f"{min_voters}: a replacement would leave it so (-p min_voters={len(ids)} to go on; "
                   f"a quorum of fewer than {SAFE_VOTERS} cannot lose a voter)")
    return out


def removal_problems(quorum: Quorum, old: int, replacement: int | None, min_voters: int, max_lag: int) -> list[str]:
    """Why ``old`` may not be removed now (empty: it may)."""
    out = []
    ids = [v.id for v in quorum.voters]
    if quorum.leader < 0:
        out.append("the quorum has no leader")
    if replacement is not None:
        ok, why = voter_state(quorum, replacement, max_lag)
        if not ok:
            out.append(f"its replacement is not ready: {why}")
    left = len(ids) - 1
    if left < 1:
        out.append(f"controller {old} is the last voter")
    elif left < min_voters:
        out.append(f"removing controller {old} would leave {left} voter{'s' if left != 1 else ''}, fewer than "
                   f"min_voters {min_voters}")
    behind = [f"{v.id} ({_lag_text(quorum, v)})" for v in quorum.voters
              if v.id != old and not caught_up(quorum, v, max_lag)]
    if behind:
        out.append("voters other than the one removed are behind the leader: " + ", ".join(behind))
    return out


def parse_endpoint(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) -> (host, port); BadInput for anything else."""
    host, sep, port = str(text).strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise BadInput(f"endpoint {text!r}: expected HOST:PORT, the new controller's controller listener")
    return host, int(port)


# -- reads --------------------------------------------------------------------------------------
def _quorum(ctx: RunContext) -> Quorum:
    from kops.cluster.topology import read_quorum

    with ctx.connection() as conn:
        return read_quorum(conn)


def evaluate(condition: str, fields: dict[str, Any], ctx: RunContext) -> tuple[bool, str]:
    if ctx.topology_file:
        return False, "not read (a dry run on a snapshot reads no quorum)"
    try:
        q = _quorum(ctx)
    except ClusterError as e:
        return False, f"the quorum cannot be read now ({e.message})"
    node, max_lag = int(fields["controller"]), int(fields.get("max_lag", 0))
    if condition == "quorum_observer":
        return observer_state(q, node, max_lag)
    if condition == "quorum_voter":
        return voter_state(q, node, max_lag)
    if condition == "quorum_replaced":
        return replaced_state(q, node, int(fields["old_controller"]), max_lag)
    raise BadInput(f"unknown condition {condition!r}")  # pragma: no cover - spec validated


def check_problems(f: dict[str, Any], ctx: RunContext) -> list[str]:
    """The problems of a ``quorum_check`` (read from the live cluster)."""
    from kops.cluster.features import read_features
    from kops.cluster.raft_voters import dynamic_quorum_problem

    topo = ctx.topology()
    if topo.mode != "kraft":
        return replace_problems(topo.mode, None, None, 0, 0, 0, 0, set())
    with ctx.connection() as conn:
        problem = dynamic_quorum_problem(read_features(conn))
    quorum = None
    if problem is None:
        try:
            quorum = _quorum(ctx)
        except ClusterError as e:
            return [f"the KRaft quorum cannot be read: {e.message}"]
    return replace_problems(topo.mode, problem, quorum, int(f["old_controller"]), int(f["new_controller"]),
                            int(f.get("min_voters", 1)), int(f.get("max_lag", 0)), {b.id for b in topo.brokers})


def preflight(steps, ctx: RunContext) -> list[str]:
    """The problems of the run's ``quorum_check`` steps not done yet (before anything changes)."""
    done = {s["id"] for s in ctx.state.steps if s.get("status") == "done"}
    out = []
    for s, f in steps:
        if s.type == "quorum_check" and s.id not in done and not ctx.topology_file:
            out += [f"step {s.id!r} (line {s.line}): {p}" for p in check_problems(f, ctx)]
    return out


# -- steps --------------------------------------------------------------------------------------
@step("quorum_check")
def _quorum_check(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    what = (f"KRaft, a dynamic quorum (kraft.version >= 1), a leader and every voter caught up, controller "
            f"{f['old_controller']} a voter, {f['new_controller']} not, at least {f.get('min_voters', 1)} voters")
    if ctx.topology_file:
        return {"summary": f"would check: {what} (not read: a dry run on a snapshot)"}
    problems = check_problems(f, ctx)
    if problems:
        raise BadInput(f"replace controller {f['old_controller']}: {problems[0]}", details=problems)
    q = _quorum(ctx)
    return {"summary": f"{'would go on' if ctx.dry_run else 'ok'}: {what} ({voters_text(q)}){fragility(len(q.voters))}",
            "voters": [v.id for v in q.voters]}


@step("add_voter")
def _add_voter(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """AddRaftVoter for ``controller`` at ``endpoint`` (``listener``, default CONTROLLER), with
    its directory id as the leader reports it for the observer; left alone when it is a voter."""
    from kops.cluster.raft_voters import add_voter

    node, listener = int(f["controller"]), str(f.get("listener") or "CONTROLLER")
    host, port = parse_endpoint(f["endpoint"])
    say = f"controller {node} ({listener}://{host}:{port})"
    if ctx.topology_file:
        return {"summary": f"would add {say} to the voters (not read: a dry run on a snapshot)"}
    q = _quorum(ctx)
    if any(v.id == node for v in q.voters):
        return {"summary": f"{say} is a voter already ({voters_text(q)})", "voters": [v.id for v in q.voters]}
    r = _replica(q, node)
    directory = r.directory_id if r is not None else None
    if ctx.dry_run:
        return {"summary": f"would add {say}, directory {directory or '(not an observer yet: read when it is)'}, "
                           f"to {voters_text(q)}"}
    ok, why = observer_state(q, node, int(f.get("max_lag", 0)))
    if not ok or directory is None:
        raise StepFailed(f"cannot add {say}: {why if not ok else 'the leader reports no directory id for it'}")
    with ctx.connection() as conn:
        late = add_voter(conn, node, directory, [(listener, host, port)], timeout_s=float(f.get("timeout", 60)))
    after = _quorum_after(ctx)
    return {"summary": f"added {say}, directory {directory}"
                       + (f" ({voters_text(after)})" if after is not None else " (committed)") + (f"; {late}" if late else ""),
            "directory_id": directory, **({"voters": [v.id for v in after.voters]} if after is not None else {})}


@step("remove_voter")
def _remove_voter(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """RemoveRaftVoter for ``controller`` with its directory id from DescribeQuorum, once its
    ``replacement`` is a caught-up voter and every other voter is caught up; never the last voter
    nor below ``min_voters``. A controller that is no voter is left alone."""
    from kops.cluster.raft_voters import remove_voter

    node = int(f["controller"])
    replacement = int(f["replacement"]) if f.get("replacement") is not None else None
    min_voters, max_lag = int(f.get("min_voters", 1)), int(f.get("max_lag", 0))
    if ctx.topology_file:
        return {"summary": f"would remove controller {node} from the voters (not read: a dry run on a snapshot)"}
    q = _quorum(ctx)
    v = next((v for v in q.voters if v.id == node), None)
    if v is None:
        return {"summary": f"controller {node} is no voter ({voters_text(q)})", "voters": [x.id for x in q.voters]}
    stranded = bootstrap_problems(ctx, q, node)
    problems = removal_problems(q, node, replacement, min_voters, max_lag) + stranded
    if ctx.dry_run:  # the steps before it have not run: the replacement is checked when this one runs
        planned = q  # as it will be when this step runs: the replacement a voter
        if replacement is not None and not any(x.id == replacement for x in q.voters):
            planned = replace(q, voters=(*q.voters, QuorumReplica(replacement, q.high_watermark)))
        now = removal_problems(planned, node, None, min_voters, max_lag) + stranded
        if now:
            return {"summary": f"would STOP before removing controller {node}: {now[0]}", "would_fail": True}
        left = len(planned.voters) - 1
        return {"summary": f"would remove controller {node}, directory {v.directory_id}, once "
                           f"{'controller ' + str(replacement) if replacement is not None else 'every other voter'} "
                           f"is a caught-up voter (now {voters_text(q)}), leaving {left} voters{fragility(left)}"}
    if problems:
        raise StepFailed(f"controller {node} not removed: {problems[0]}", details=problems)
    if v.directory_id is None:
        raise StepFailed(f"controller {node} not removed: the leader reports no directory id for it")
    with ctx.connection() as conn:
        late = remove_voter(conn, node, v.directory_id, timeout_s=float(f.get("timeout", 60)))
    late = f"; {late}" if late else ""
    after = _quorum_after(ctx)  # (the leader removed itself: it resigns, the quorum elects another)
    if after is None:
        left = len(q.voters) - 1
        return {"summary": f"removed controller {node}, directory {v.directory_id} (committed; the quorum is electing "
                           f"a leader){fragility(left)}{late}", "directory_id": v.directory_id}
    return {"summary": f"removed controller {node}, directory {v.directory_id} ({voters_text(after)})"
                       f"{fragility(len(after.voters))}{late}", "directory_id": v.directory_id,
            "voters": [x.id for x in after.voters]}


def bootstrap_problems(ctx: RunContext, quorum: Quorum, old: int) -> list[str]:
    """Brokers that would be stranded by removing ``old``: none of their
    ``controller.quorum.bootstrap.servers`` is an endpoint of a voter left. Kafka's observers find
    a new leader through those servers only; seen on Kafka 3.9.2: brokers whose bootstrap servers
    were all removed controllers stayed Unattached after the next leader change and the cluster's
    DescribeQuorum timed out."""
    from kops.cluster.raft_voters import bootstrap_servers, stranded_brokers, voter_endpoints

    with ctx.connection() as conn:
        endpoints = voter_endpoints(conn)
        left = set().union(*(endpoints.get(v.id, set()) for v in quorum.voters if v.id != old))
        if not left:  # the leader reports no endpoints (nothing to compare): no finding
            return []
        servers = bootstrap_servers(conn, [b.id for b in ctx.topology().brokers if b.alive])
    stranded = stranded_brokers(servers, left)
    if not stranded:
        return []
    return [f"brokers {stranded} find the quorum through controller.quorum.bootstrap.servers none of which is a "
            f"voter once controller {old} is removed ({', '.join(f'{h}:{p}' for h, p in servers[stranded[0]] or [])} on "
            f"broker {stranded[0]}): after the next leader change they could not find the leader. Put a remaining "
            f"voter's endpoint ({', '.join(f'{h}:{p}' for h, p in sorted(left))}) in their bootstrap servers and "
            "restart them (playbook rolling-restart), then --resume"]


def _quorum_after(ctx: RunContext) -> Quorum | None:
    """The quorum right after a committed change, for the step's summary; None while it does not
    answer (a leader that removed itself resigns): the next wait_for reads it again."""
    try:
        return _quorum(ctx)
    except ClusterError:
        return None
