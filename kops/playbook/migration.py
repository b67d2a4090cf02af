"""The steps and wait_for conditions of a ZooKeeper -> KRaft migration (playbooks ``zk-to-kraft``
and ``zk-to-kraft-rollback``), registered with :func:`kops.playbook.registry.step` like the others.

Conditions (``wait_for``), each read from the cluster, never a time:

- ``migration_state`` (field ``state``): Kafka's ZkMigrationState read from ZooKeeper
  (:mod:`kops.cluster.migration`) is ``state`` or later; needs ``--zookeeper``;
- ``quorum_ready``: the KRaft quorum has a leader and every voter is caught up (DescribeQuorum,
  which KRaft brokers and brokers in migration mode forward); where no broker answers it (ZooKeeper
  brokers before their migration roll), a KRaft controller leads the quorum: the active controller
  of a quorum in migration mode writes ``/migration`` when it becomes active (whether every voter
  is ready, Kafka's controller checks itself before it migrates anything);
- ``kraft_brokers``: every broker (or the ones named) runs as a KRaft broker (its configs list
  ``process.roles`` and no ``zookeeper.connect``).

Steps: ``migration_check`` (``check: zk-to-kraft | rollback``: refused before the run changes
anything, exit 2), ``snapshot`` (topics, partitions, replica assignments, topic configs, each
broker's rack and dynamic configs, ACLs, SCRAM users; a JSON file in the run's directory) and
``compare_snapshot`` (``snapshot: <step id>``: every difference named), ``clear_migration``
(deletes ``/controller`` and ``/migration``, Kafka's revert).
"""

from __future__ import annotations

import json
from typing import Any

from kops.cluster import migration as zkm
from kops.cluster.acls import read_acls, read_scram_users
from kops.errors import BadInput, ClusterError
from kops.model import Topology
from kops.playbook.state import RunContext, StepFailed
from kops.playbook.registry import step

#: the Kafka release whose documentation describes the migration that kops drives: Kafka 3.9's
#: docs/ops.html ("ZooKeeper to KRaft Migration") asks for brokers on 3.9.x with
#: inter.broker.protocol.version=3.9 (older releases' own procedures differ, and 4.0 has no ZooKeeper)
MIGRATION_RELEASE = "3.9"
CONDITIONS = ("migration_state", "quorum_ready", "kraft_brokers")
#: DescribeConfigs sources of broker configs an operator set at runtime (kept in the snapshot);
#: server.properties (STATIC_BROKER_CONFIG) changes across the migration by design
DYNAMIC_SOURCES = ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "DYNAMIC_BROKER_LOGGER_CONFIG")


# -- pure parts ---------------------------------------------------------------------------------
def quorum_ready_from(quorum) -> tuple[bool, str]:
    """A quorum (:class:`kops.model.Quorum`) with a leader and every voter at the high watermark."""
    if quorum.leader < 0:
        return False, "the KRaft quorum has no leader"
    behind = [(v.id, quorum.lag(v)) for v in quorum.voters if quorum.lag(v) != 0]
    if behind:
        return False, "voters behind the leader: " + ", ".join(
            f"{i} ({'unknown' if lag is None else f'{lag} records'})" for i, lag in behind)
    return True, (f"KRaft quorum: leader {quorum.leader} (epoch {quorum.epoch}), voters "
                  f"{[v.id for v in quorum.voters]} caught up")


def kraft_brokers_from(modes: dict[int, str | None]) -> tuple[bool, str]:
    """Every broker of ``modes`` (broker -> its mode from its configs, None: unread) a KRaft broker."""
    not_kraft = sorted(b for b, m in modes.items() if m != "kraft")
    if not modes:
        return False, "no broker answered"
    if not_kraft:
        return False, "not KRaft brokers yet: " + ", ".join(f"{b} ({modes[b] or 'unread'})" for b in not_kraft)
    return True, f"brokers {sorted(modes)} run as KRaft brokers"


def zk_to_kraft_problems(mode: str | None, releases: dict[int, str | None], ibp: dict[int, str | None],
                         state: str | None) -> list[str]:
    """Why a migration cannot start (empty: it can). ``state``: the migration state read from
    ZooKeeper (None when there is no ZooKeeper to read: refused)."""
    out = []
    if mode != "zookeeper":
        out.append(f"the cluster runs in {mode or 'an unknown'} mode, not ZooKeeper mode: nothing to migrate")
    wrong = {b: r for b, r in releases.items() if r != MIGRATION_RELEASE}
    if wrong:
        out.append(f"the migration needs every broker on Kafka {MIGRATION_RELEASE}.x (Kafka {MIGRATION_RELEASE}'s "
                   "documented procedure); " + ", ".join(f"broker {b} runs {r or 'an unknown release'}"
                                                        for b, r in sorted(wrong.items()))
                   + ": upgrade first (playbook rolling-restart with your upgrade hook)")
    old_ibp = {b: v for b, v in ibp.items() if not (v or "").startswith(MIGRATION_RELEASE)}
    if old_ibp:
        out.append(f"inter.broker.protocol.version must be {MIGRATION_RELEASE} on every broker before the migration; "
                   + ", ".join(f"broker {b} has {v or 'none readable'}" for b, v in sorted(old_ibp.items())))
    if state is None:
        out.append("the migration state cannot be read: pass --zookeeper HOST:PORT (the cluster's zookeeper.connect)")
    elif state != zkm.NONE:
        out.append(f"a migration is under way already (ZkMigrationState {state}): continue it with --resume RUN_ID, "
                   "or roll it back with playbook zk-to-kraft-rollback")
    return out


def rollback_problems(state: str | None) -> list[str]:
    """Why Kafka's revert to ZooKeeper mode is not possible (empty: it is)."""
    if state is None:
        return ["the migration state cannot be read from ZooKeeper (pass --zookeeper; after finalization "
                "ZooKeeper is usually decommissioned, and the rollback needs it)"]
    if state == zkm.POST_MIGRATION:
        return ["the migration was finalized (POST_MIGRATION: the KRaft controllers run without "
                "zookeeper.metadata.migration.enable and no longer write ZooKeeper): Kafka cannot go back to "
                "ZooKeeper mode after finalization"]
    if state == zkm.NONE:
        return ["no migration to roll back: the migration state in ZooKeeper is NONE"]
    return []


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Every difference between two :func:`snapshot_doc` documents (pure). A topic Kafka creates
    itself (internal, e.g. __consumer_offsets on a consumer's first group) may appear after."""
    diffs: list[str] = []
    bt, at = before.get("topics", {}), after.get("topics", {})
    for t in sorted(set(bt) - set(at)):
        diffs.append(f"topic {t} is gone")
    for t in sorted(set(at) - set(bt)):
        if not at[t].get("internal"):
            diffs.append(f"topic {t} is new")
    for t in sorted(set(bt) & set(at)):
        bp, ap = bt[t]["partitions"], at[t]["partitions"]
        if set(bp) != set(ap):
            diffs.append(f"topic {t}: partitions {sorted(map(int, bp))} before, {sorted(map(int, ap))} now")
        for p in sorted(set(bp) & set(ap), key=int):
            if bp[p] != ap[p]:
                diffs.append(f"{t}-{p}: replicas {bp[p]} before, {ap[p]} now")
        diffs += _dict_diff(f"topic {t} config", bt[t].get("configs", {}), at[t].get("configs", {}))
    bb, ab = before.get("brokers", {}), after.get("brokers", {})
    for b in sorted(set(bb) ^ set(ab), key=int):
        diffs.append(f"broker {b} {'is gone' if b in bb else 'is new'}")
    for b in sorted(set(bb) & set(ab), key=int):
        if bb[b].get("rack") != ab[b].get("rack"):
            diffs.append(f"broker {b}: rack {bb[b].get('rack')} before, {ab[b].get('rack')} now")
        diffs += _dict_diff(f"broker {b} dynamic config", bb[b].get("configs", {}), ab[b].get("configs", {}))
    ba, aa = before.get("acls", []), after.get("acls", [])
    for acl in sorted(set(map(tuple, ba)) - set(map(tuple, aa))):
        diffs.append(f"ACL gone: {_acl_text(acl)}")
    for acl in sorted(set(map(tuple, aa)) - set(map(tuple, ba))):
        diffs.append(f"ACL new: {_acl_text(acl)}")
    if "scram_users" in before and "scram_users" in after:  # (a snapshot of an older kops has none)
        bu, au = before["scram_users"], after["scram_users"]
        for u in sorted(set(bu) | set(au)):
            if u not in au:
                diffs.append(f"SCRAM user {u} is gone (credentials {bu[u]})")
            elif u not in bu:
                diffs.append(f"SCRAM user {u} is new")
            elif bu[u] != au[u]:
                diffs.append(f"SCRAM user {u}: credentials {bu[u]} before, {au[u]} now")
    return diffs


def _dict_diff(what: str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [f"{what} {k}: {a.get(k, '(unset)')} before, {b.get(k, '(unset)')} now"
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _acl_text(acl: tuple) -> str:
    return " ".join(f"{k}={v}" for k, v in zip(("resource", "name", "pattern", "principal", "host", "operation",
                                                "permission"), acl))


def snapshot_doc(topo: Topology, broker_configs: dict[int, dict[str, str]], acls: list[list[str]] | None,
                 acl_note: str, scram_users: dict[str, list[str]] | None = None,
                 scram_note: str = "") -> dict[str, Any]:
    """What the migration must keep (pure): topics with partitions and replica assignments and
    their configs as kops reads them, each broker's rack and dynamic configs, the ACLs, the SCRAM
    users (each credential's mechanism and iterations, no secret). Left out as
    what legitimately changes: the controller and the cluster's mode, leaders, ISRs and epochs,
    broker endpoints' registrations and releases, static broker configs (server.properties:
    process.roles, node.id, zookeeper.*, controller.*)."""
    return {
        "topics": {t.name: {"internal": t.internal,
                            "partitions": {str(p.partition): list(p.replicas) for p in t.partitions},
                            "configs": dict(t.configs)} for t in topo.topics},
        "brokers": {str(b.id): {"rack": b.rack, "configs": broker_configs.get(b.id, {})} for b in topo.brokers},
        "acls": acls or [],
        "acl_note": acl_note,
        "scram_users": scram_users or {},
        "scram_note": scram_note,
    }


# -- reads --------------------------------------------------------------------------------------
def read_broker_configs(conn, ids: list[int], *, strict: bool = True) -> dict[int, dict[str, Any]]:
    """broker -> {"mode", "ibp", "dynamic": {name: value}} from each broker's configs
    (:func:`kops.cluster.broker_configs.read`). ``strict``: a broker that does not answer raises (a
    snapshot never records a broker's configs as empty); otherwise its mode is None."""
    from kops.cluster import broker_configs
    from kops.cluster.connection import mode_of_broker_configs
    from kops.cluster.topology import config_source

    out: dict[int, dict[str, Any]] = {}
    for b, entries in broker_configs.read(conn, ids, strict=strict).items():
        if entries is None:
            out[b] = {"mode": None, "ibp": None, "dynamic": {}}
            continue
        ibp = entries.get("inter.broker.protocol.version")
        out[b] = {
            "mode": mode_of_broker_configs(entries),
            "ibp": ibp.value if ibp is not None else None,
            "dynamic": {k: e.value for k, e in entries.items()
                        if e.value is not None and not getattr(e, "is_sensitive", False)
                        and config_source(e) in DYNAMIC_SOURCES},
        }
    return out


def read_state(ctx: RunContext, topo: Topology | None = None) -> zkm.MigrationStatus:
    """The migration state (ZooKeeper; POST_MIGRATION told by :func:`kops.cluster.migration.finalized_from`)."""
    with ctx.connection() as conn:
        if not conn.zookeeper:
            raise BadInput("the migration state is read from ZooKeeper: pass --zookeeper HOST:PORT "
                           "(the cluster's zookeeper.connect). Nothing was changed.")
        st = zkm.read_status(conn.zk(migrating=True))
        if st.state != zkm.MIGRATION:
            return st
        topo = topo or ctx.topology()
        modes = read_broker_configs(conn, [b.id for b in topo.brokers if b.alive], strict=False)
        ok, _ = kraft_brokers_from({b: m["mode"] for b, m in modes.items()})
        if not ok:
            return st
        try:
            from kops.cluster.topology import read_quorum

            epoch = read_quorum(conn).epoch
        except ClusterError:
            return st
    if zkm.finalized_from(st.kraft_controller_epoch, epoch, True):
        return zkm.MigrationStatus(zkm.POST_MIGRATION, st.controller, st.kraft_controller_epoch, st.migration_znode)
    return st


# -- conditions ---------------------------------------------------------------------------------
def evaluate(condition: str, fields: dict[str, Any], topo: Topology, ctx: RunContext) -> tuple[bool, str]:
    if ctx.topology_file:
        return False, "not read (a dry run on a snapshot reads neither ZooKeeper nor the quorum)"
    if condition == "migration_state":
        st = read_state(ctx, topo)
        want = fields["state"]
        # NONE means NONE (what a rollback ends in); any other state: that state or later
        ok = st.state == zkm.NONE if want == zkm.NONE else zkm.at_least(st.state, want)
        return ok, f"migration state {st.state} (waiting for {want}{'' if want == zkm.NONE else ' or later'})"
    if condition == "kraft_brokers":
        ids = list(fields.get("brokers") or []) or [b.id for b in topo.brokers]
        if fields.get("broker") is not None:
            ids = [int(fields["broker"])]
        with ctx.connection() as conn:
            modes = read_broker_configs(conn, ids, strict=False)
        return kraft_brokers_from({b: (modes.get(b) or {}).get("mode") for b in ids})
    if condition == "quorum_ready":
        from kops.cluster.topology import read_quorum

        with ctx.connection() as conn:
            try:
                return quorum_ready_from(read_quorum(conn))
            except ClusterError as e:
                why = e.message
            if not conn.zookeeper:
                return False, f"the quorum cannot be read through the brokers ({why}); with --zookeeper kops reads /migration"
            st = zkm.read_status(conn.zk(migrating=True))
        if st.migration_znode is not None:
            return True, (f"the brokers do not answer DescribeQuorum yet (ZooKeeper brokers); a KRaft controller "
                          f"leads the quorum: it wrote /migration on becoming active (state {st.state}; Kafka's "
                          "controller itself waits for every voter to be ready before it migrates)")
        return False, f"no KRaft controller wrote /migration yet (the brokers do not answer DescribeQuorum: {why})"
    raise BadInput(f"unknown condition {condition!r}")  # pragma: no cover - spec validated


# -- steps --------------------------------------------------------------------------------------
def check_problems(check: str, ctx: RunContext) -> list[str]:
    """The problems of a ``migration_check`` (read from the live cluster)."""
    from kops.cluster.topology import ReadOptions, read_topology

    with ctx.connection() as conn:
        has_zk = bool(conn.zookeeper)
    state: str | None = None
    if has_zk:
        try:
            state = read_state(ctx).state
        except ClusterError as e:
            if check == "rollback":
                return [f"ZooKeeper does not answer ({e.message}); the rollback needs it"]
            raise
    if check == "rollback":
        return rollback_problems(state)
    with ctx.connection() as conn:
        topo = read_topology(conn, ReadOptions(with_sizes=False))
        cfgs = read_broker_configs(conn, [b.id for b in topo.brokers])
    return zk_to_kraft_problems(topo.mode, {b.id: b.kafka_version for b in topo.brokers},
                                {b: c["ibp"] for b, c in cfgs.items()}, state)


def preflight(steps, ctx: RunContext) -> list[str]:
    """The problems of the run's ``migration_check`` steps not done yet (before anything changes)."""
    done = {s["id"] for s in ctx.state.steps if s.get("status") == "done"}
    out = []
    for s, f in steps:
        if s.type == "migration_check" and s.id not in done and not ctx.topology_file:
            out += [f"step {s.id!r} (line {s.line}): {p}" for p in check_problems(f["check"], ctx)]
    return out


@step("migration_check")
def _migration_check(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    what = {"zk-to-kraft": "every broker on Kafka 3.9 with inter.broker.protocol.version 3.9, ZooKeeper mode, "
                           "no migration under way",
            "rollback": "a migration under way and not finalized"}[f["check"]]
    if ctx.topology_file:
        return {"summary": f"would check: {what} (not read: a dry run on a snapshot)"}
    problems = check_problems(f["check"], ctx)
    if problems:
        raise BadInput(f"{f['check']}: {problems[0]}", details=problems)
    return {"summary": f"{'would go on' if ctx.dry_run else 'ok'}: {what}"}


@step("snapshot")
def _snapshot(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    if ctx.topology_file:
        return {"summary": "would save topics, assignments, topic and broker configs and ACLs (not read: a snapshot)"}
    doc = take_snapshot(ctx)
    summary = (f"{len(doc['topics'])} topics, {sum(len(t['partitions']) for t in doc['topics'].values())} partitions, "
               f"{len(doc['brokers'])} brokers, {doc['acl_note']}, {doc['scram_note']}")
    if ctx.dry_run:
        return {"summary": "would save " + summary}
    path = ctx.run_dir() / f"snapshot-{ctx.current_step}.json"
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return {"summary": f"saved {summary}", "snapshot_file": str(path)}


def take_snapshot(ctx: RunContext) -> dict[str, Any]:
    from kops.cluster.topology import ReadOptions, read_topology

    with ctx.connection() as conn:
        topo = read_topology(conn, ReadOptions(with_sizes=False, with_reassignments=False))
        cfgs = read_broker_configs(conn, [b.id for b in topo.brokers])
        acls, note = read_acls(conn)
        users, users_note = read_scram_users(conn)
    return snapshot_doc(topo, {b: c["dynamic"] for b, c in cfgs.items()}, acls, note, users, users_note)


@step("compare_snapshot")
def _compare_snapshot(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    if ctx.dry_run:
        return {"summary": f"would compare topics, assignments, configs and ACLs with snapshot {f['snapshot']!r}"}
    path = ctx.state.result_of(f["snapshot"]).get("snapshot_file")
    if not path or not isinstance(path, str):
        raise StepFailed(f"step {f['snapshot']!r} has not saved a snapshot (run it first)")
    from kops.inputs.files import read_json

    before = read_json(path, what=f"snapshot of step {f['snapshot']!r}")
    now = take_snapshot(ctx)
    diffs = compare(before, now)
    if diffs:
        raise StepFailed(f"{len(diffs)} differences from the snapshot of step {f['snapshot']!r}", details=diffs[:100])
    return {"summary": f"same topics, assignments, topic and broker configs, ACLs and SCRAM users as step "
                       f"{f['snapshot']!r} ({now['acl_note']}, {now['scram_note']})"}


@step("clear_migration")
def _clear_migration(f: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """Kafka's revert, the KRaft controllers stopped: raise ``/controller_epoch`` above the KRaft
    controller's epoch where it is not (KAFKA-20488), delete ``/controller`` (a ZooKeeper broker
    becomes the controller) and ``/migration`` (a later migration starts over); what they held goes
    into the result (:func:`kops.cluster.migration.clear`)."""
    if ctx.topology_file:
        return {"summary": "would delete /controller and /migration in ZooKeeper (not read: a dry run on a snapshot)"}
    with ctx.connection() as conn:
        if not conn.zookeeper:
            raise BadInput("clear_migration deletes znodes in ZooKeeper: pass --zookeeper HOST:PORT")
        zk = conn.zk(migrating=True)
        if ctx.dry_run:
            plan = zkm.planned_clear(zk)
            return {"summary": f"would delete /controller ({plan.before.controller}) and /migration "
                               f"({plan.before.migration_znode}); {plan.epoch_note(done=False)}"}
        done = zkm.clear(zk)
    return {"summary": f"deleted /controller (held by {done.before.controller}) and /migration; {done.epoch_note()}",
            "was": {**done.before.to_dict(), "controller_epoch": done.controller_epoch}, "raised_to": done.raised_to}
