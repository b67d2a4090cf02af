"""The ZooKeeper -> KRaft playbooks (zk-to-kraft, zk-to-kraft-rollback): validation, the dry run
naming every phase and hook, and the pure parts of their conditions, checks and snapshot compare."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from kops.cli.main import app
from kops.cluster import migration as zkm
from kops.errors import BadInput
from kops.model import Quorum, QuorumReplica
from kops.playbook import migration as pm
from kops.playbook.library import find
from kops.playbook.spec import parse_playbook

DATA = Path(__file__).parent / "data"
runner = CliRunner()
HOOKS = {"controllers_command": "ctl-up --migration", "migrate_command": "roll {broker} {host}:{port} {rack} migrate",
         "kraft_command": "roll {broker} kraft", "finalize_command": "ctl-finalize"}


def _dry_run(tmp_path, monkeypatch, name: str, params: dict[str, str]) -> tuple[dict, str]:
    monkeypatch.setenv("KOPS_HOME", str(tmp_path))
    args = ["playbook", "run", name, "--dry-run", "--topology", str(DATA / "topo6.json"), "--output", "json"]
    for k, v in params.items():
        args += ["--param", f"{k}={v}"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_the_migration_playbooks_validate():
    for name in ("zk-to-kraft", "zk-to-kraft-rollback"):
        pb = find(name)
        assert all(p.help for p in pb.params.values()), name  # every parameter says what it is


def test_zk_to_kraft_dry_run_prints_every_phase_and_hook_with_its_parameters(tmp_path, monkeypatch):
    rep, _ = _dry_run(tmp_path, monkeypatch, "zk-to-kraft", HOOKS)
    assert rep["status"] == "dry-run"
    ids = [s["id"] for s in rep["steps"]]
    top = [i for i in ids if "." not in i]
    assert top == ["ready", "preflight", "no-moves", "before", "controllers", "quorum", "migrated", "all-kraft",
                   "quorum-kraft", "same", "finalize", "finalize-controllers", "kraft-quorum",
                   "kraft-brokers", "healthy"]
    by = {s["id"]: s["summary"] for s in rep["steps"]}
    assert "would run: ctl-up --migration" in by["controllers"]
    assert "would run: ctl-finalize" in by["finalize-controllers"]
    assert "would pause" in by["finalize"] and "last point" in by["finalize"]
    assert "would wait" in by["migrated"] and "migration_state" in by["migrated"]
    # every broker rolled twice, each with its own values in the hook
    for b in range(6):
        assert f"would restart broker {b} with: roll {b} 127.0.0.1:" in by[f"migrate.{b}.restart"]
        assert by[f"migrate.{b}.restart"].split(" with: ")[1].split(" (timeout")[0].endswith(" migrate")
        assert f"would restart broker {b} with: roll {b} kraft" in by[f"kraft.{b}.restart"]
    assert ids.index("migrated") > max(ids.index(f"migrate.{b}.restore") for b in range(6))
    assert ids.index("same") < ids.index("finalize") < ids.index("finalize-controllers")


def test_rollback_dry_run_names_its_hooks(tmp_path, monkeypatch):
    rep, _ = _dry_run(tmp_path, monkeypatch, "zk-to-kraft-rollback",
                      {"migrate_command": "back {broker}", "controllers_stop_command": "ctl-stop",
                       "zookeeper_command": "zk {broker}"})
    by = {s["id"]: s["summary"] for s in rep["steps"]}
    assert "would check" in by["possible"]
    assert "would run: ctl-stop" in by["stop-controllers"]
    assert "would restart broker 3 with: back 3" in by["to-migration-mode.3.restart"]
    assert "would restart broker 3 with: zk 3" in by["to-zookeeper.3.restart"]
    ids = list(by)
    assert ids.index("to-migration-mode.0.back") < ids.index("stop-controllers") < ids.index("clear") \
        < ids.index("to-zookeeper.2.restart")


def test_a_missing_hook_is_refused_with_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path))
    r = runner.invoke(app, ["playbook", "run", "zk-to-kraft", "--dry-run", "--topology", str(DATA / "topo6.json"),
                            "--param", "migrate_command=x"])
    assert r.exit_code == 2
    assert "controllers_command" in r.stderr and "finalize_command" in r.stderr


def test_migration_fields_are_validated_with_their_line():
    bad = """\
name: m
steps:
  - {id: a, type: wait_for, condition: migration_state, timeout: 1m}
  - {id: b, type: wait_for, condition: migration_state, state: DONE, timeout: 1m}
  - {id: c, type: wait_for, condition: healthy, state: MIGRATION, timeout: 1m}
  - {id: d, type: compare_snapshot, snapshot: nowhere}
  - {id: e, type: migration_check, check: sideways}
"""
    with pytest.raises(BadInput) as e:
        parse_playbook(bad, source="m.yaml")
    text = "\n".join(e.value.details)
    assert "m.yaml:3:" in text and "'state' goes with condition migration_state" in text
    assert "m.yaml:4:" in text and "DONE" in text and "POST_MIGRATION" in text
    assert "m.yaml:5:" in text
    assert "m.yaml:6:" in text and "nowhere" in text
    assert "m.yaml:7:" in text and "sideways" in text


def test_quorum_ready_needs_a_leader_and_every_voter_caught_up():
    def q(leader, *leos):
        return Quorum(leader=leader, epoch=4, high_watermark=100,
                      voters=tuple(QuorumReplica(1000 + i, leo) for i, leo in enumerate(leos)))

    assert pm.quorum_ready_from(q(1000, 100, 100, 100))[0]
    ok, why = pm.quorum_ready_from(q(1000, 100, 90, -1))
    assert not ok and "1001 (10 records)" in why and "1002 (unknown)" in why
    assert pm.quorum_ready_from(q(-1, 100, 100, 100)) == (False, "the KRaft quorum has no leader")


def test_kraft_brokers_names_the_ones_left():
    assert pm.kraft_brokers_from({0: "kraft", 1: "kraft"})[0]
    ok, why = pm.kraft_brokers_from({0: "kraft", 1: "zookeeper", 2: None})
    assert not ok and "1 (zookeeper)" in why and "2 (unread)" in why
    assert not pm.kraft_brokers_from({})[0]


def test_migration_states_in_order_and_finalization_told_from_the_epochs():
    assert zkm.at_least(zkm.MIGRATION, zkm.PRE_MIGRATION) and not zkm.at_least(zkm.PRE_MIGRATION, zkm.MIGRATION)
    assert zkm.finalized_from(5, 8, True)
    assert not zkm.finalized_from(5, 5, True)  # dual write: the active controller holds /controller
    assert not zkm.finalized_from(5, 8, False)  # a broker still in migration mode: not finalized
    assert not zkm.finalized_from(None, 8, True)


def test_zk_to_kraft_preconditions_name_what_is_wrong():
    ok = pm.zk_to_kraft_problems("zookeeper", {0: "3.9", 1: "3.9"}, {0: "3.9-IV0", 1: "3.9"}, zkm.NONE)
    assert ok == []
    probs = pm.zk_to_kraft_problems("zookeeper", {0: "3.9", 1: "3.7"}, {0: "3.9", 1: "3.7"}, zkm.NONE)
    assert any("Kafka 3.9.x" in p and "broker 1 runs 3.7" in p for p in probs)
    assert any("inter.broker.protocol.version must be 3.9" in p and "broker 1 has 3.7" in p for p in probs)
    assert any("broker 0 has none readable" in p for p in pm.zk_to_kraft_problems("zookeeper", {0: "3.9"}, {0: None},
                                                                                 zkm.NONE))
    assert any("KRaft mode" in p or "kraft mode" in p for p in pm.zk_to_kraft_problems("kraft", {}, {}, zkm.NONE))
    assert any("--zookeeper" in p for p in pm.zk_to_kraft_problems("zookeeper", {}, {}, None))
    assert any("under way" in p for p in pm.zk_to_kraft_problems("zookeeper", {}, {}, zkm.MIGRATION))


def test_rollback_is_refused_after_finalization_and_without_a_migration():
    assert pm.rollback_problems(zkm.MIGRATION) == [] and pm.rollback_problems(zkm.PRE_MIGRATION) == []
    (p,) = pm.rollback_problems(zkm.POST_MIGRATION)
    assert "finalized" in p and "cannot go back" in p
    assert "NONE" in pm.rollback_problems(zkm.NONE)[0]
    assert "ZooKeeper" in pm.rollback_problems(None)[0]


def test_a_rollback_run_after_finalization_stops_before_any_step(tmp_path, monkeypatch):
    """The engine's preflight reads the migration state: POST_MIGRATION refuses with exit 2, no
    step runs, no hook is called."""
    from kops.cluster.snapshot import load_topology
    from kops.playbook import engine

    monkeypatch.setenv("KOPS_HOME", str(tmp_path))
    monkeypatch.setattr(engine.RunContext, "topology", lambda self: load_topology(DATA / "topo6.json"))
    monkeypatch.setattr(pm, "read_state", lambda ctx, topo=None: zkm.MigrationStatus(zkm.POST_MIGRATION, 1000, 5, {}))

    class Conn:
        zookeeper = "127.0.0.1:2181"

    @contextmanager
    def connect():
        yield Conn()

    marker = tmp_path / "hook-ran"
    pb = find("zk-to-kraft-rollback")
    with pytest.raises(BadInput) as e:
        engine.run(pb, {"migrate_command": f"touch {marker}", "controllers_stop_command": f"touch {marker}",
                        "zookeeper_command": f"touch {marker}"}, connect, has_cluster=False, say=lambda m: None,
                   interactive=False)
    assert e.value.exit_code == 2 and "refused before any change" in e.value.message
    text = "\n".join(e.value.details)
    assert "step 'possible'" in text and "finalized" in text and "cannot go back" in text
    assert not marker.exists() and not (tmp_path / "playbook-runs").exists()


SNAP = {"topics": {"t": {"internal": False, "partitions": {"0": [0, 1], "1": [1, 2]}, "configs": {"min.insync.replicas": "2"}}},
        "brokers": {"0": {"rack": "a", "configs": {"log.cleaner.threads": "2"}}, "1": {"rack": "b", "configs": {}}},
        "acls": [["TOPIC", "t", "LITERAL", "User:a", "*", "READ", "ALLOW"]], "acl_note": "1 ACLs"}


def test_compare_snapshot_names_each_difference():
    assert pm.compare(SNAP, json.loads(json.dumps(SNAP))) == []
    after = json.loads(json.dumps(SNAP))
    after["topics"]["t"]["partitions"]["1"] = [2, 1]
    after["topics"]["t"]["configs"]["min.insync.replicas"] = "1"
    after["topics"]["__consumer_offsets"] = {"internal": True, "partitions": {"0": [0]}, "configs": {}}
    after["topics"]["new"] = {"internal": False, "partitions": {"0": [0]}, "configs": {}}
    after["brokers"]["0"]["configs"] = {}
    after["brokers"]["1"]["rack"] = "c"
    after["acls"] = []
    diffs = pm.compare(SNAP, after)
    assert diffs == [
        "topic new is new",
        "t-1: replicas [1, 2] before, [2, 1] now",
        "topic t config min.insync.replicas: 2 before, 1 now",
        "broker 0 dynamic config log.cleaner.threads: 2 before, (unset) now",
        "broker 1: rack b before, c now",
        "ACL gone: resource=TOPIC name=t pattern=LITERAL principal=User:a host=* operation=READ permission=ALLOW",
    ]


def test_compare_snapshot_names_scram_users_gone_new_or_changed():
    """A secured cluster's SCRAM users (mechanism/iterations, never a secret) are kept across the
    migration; a snapshot written before kops read them (no key) is not compared on them."""
    before = {**json.loads(json.dumps(SNAP)), "scram_users": {"admin": ["SCRAM-SHA-512/4096"],
                                                              "app": ["SCRAM-SHA-256/8192"]}, "scram_note": "2 SCRAM users"}
    after = json.loads(json.dumps(before))
    assert pm.compare(before, after) == []
    after["scram_users"] = {"admin": ["SCRAM-SHA-512/8192"], "other": ["SCRAM-SHA-512/4096"]}
    assert pm.compare(before, after) == [
        "SCRAM user admin: credentials ['SCRAM-SHA-512/4096'] before, ['SCRAM-SHA-512/8192'] now",
        "SCRAM user app is gone (credentials ['SCRAM-SHA-256/8192'])",
        "SCRAM user other is new",
    ]
    assert pm.compare(SNAP, after) == []  # (an older snapshot: no SCRAM users recorded)


def test_scram_users_are_read_without_secrets_and_an_old_kafka_is_a_note():
    from types import SimpleNamespace

    from confluent_kafka.admin import ScramMechanism

    from kops.cluster.acls import read_scram_users

    class Future:
        def __init__(self, v):
            self.v = v

        def result(self):
            if isinstance(self.v, Exception):
                raise self.v
            return self.v

    def conn(answer):
        admin = SimpleNamespace(describe_user_scram_credentials=lambda request_timeout: Future(answer))
        return SimpleNamespace(admin=lambda: admin, timeout_s=5.0, map_error=lambda e, what: RuntimeError(what))

    info = SimpleNamespace(mechanism=ScramMechanism.SCRAM_SHA_512, iterations=4096)
    users, note = read_scram_users(conn({"kops-user": SimpleNamespace(scram_credential_infos=[info]),
                                         "admin": SimpleNamespace(scram_credential_infos=[info])}))
    assert users == {"admin": ["SCRAM-SHA-512/4096"], "kops-user": ["SCRAM-SHA-512/4096"]} and note == "2 SCRAM users"
    assert list(users) == ["admin", "kops-user"]
    assert read_scram_users(conn(Exception("KafkaError{code=UNSUPPORTED_VERSION}")))[0] == {}
    with pytest.raises(RuntimeError, match="describe SCRAM users"):
        read_scram_users(conn(Exception("CLUSTER_AUTHORIZATION_FAILED")))


def test_broker_configs_are_read_one_broker_per_request_and_a_silent_broker_is_not_read_as_empty():
    """The migration's reads go through kops.cluster.broker_configs (one BROKER resource per
    DescribeConfigs call: tests/unit/test_broker_configs.py): mode, ibp and dynamic configs per
    broker; a snapshot (strict) refuses a broker that does not answer."""
    from types import SimpleNamespace

    from confluent_kafka.admin import ConfigSource

    from kops.errors import ClusterError

    def entry(value, source=ConfigSource.STATIC_BROKER_CONFIG):
        return SimpleNamespace(value=value, source=source.value, is_sensitive=False, is_default=False)

    answers = {
        "0": {"process.roles": entry("broker"), "zookeeper.connect": entry(None),
              "log.cleaner.threads": entry("2", ConfigSource.DYNAMIC_BROKER_CONFIG)},
        "1": {"process.roles": entry(""), "zookeeper.connect": entry("zk:2181"),
              "inter.broker.protocol.version": entry("3.9-IV0")},
    }

    class Admin:
        def describe_configs(self, resources, request_timeout):
            assert len(resources) == 1, "one BROKER resource per call"
            return {resources[0]: resources[0].name}

    class Conn:
        timeout_s = 5.0

        def admin(self):
            return Admin()

        def wait(self, fut, what):
            if fut not in answers:
                raise ClusterError(f"{what}: timed out")
            return answers[fut]

    got = pm.read_broker_configs(Conn(), [0, 1, 2], strict=False)
    assert got[0] == {"mode": "kraft", "ibp": None, "dynamic": {"log.cleaner.threads": "2"}}
    assert got[1] == {"mode": "zookeeper", "ibp": "3.9-IV0", "dynamic": {}}
    assert got[2]["mode"] is None
    with pytest.raises(ClusterError):
        pm.read_broker_configs(Conn(), [0, 1, 2])


class _Zk:
    """The znodes a kazoo client would hold (exists / get / delete / transaction), each with a
    version that a write bumps; a transaction applies all its operations or none, as ZooKeeper's
    multi does (a failed one answers BadVersionError, the others RolledBackError). ``meddle``: a
    write made by someone else between the reads and the transaction."""

    def __init__(self, nodes: dict[str, bytes], meddle=None):
        self.nodes = dict(nodes)
        self.versions = dict.fromkeys(nodes, 0)
        self.meddle = meddle

    def exists(self, path):
        return path in self.nodes

    def delete(self, path):
        del self.nodes[path]

    def get(self, path):
        from types import SimpleNamespace

        from kazoo.exceptions import NoNodeError

        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path], SimpleNamespace(version=self.versions[path])

    def transaction(self):
        zk, ops = self, []

        class Tx:
            def set_data(self, path, value, version=-1):
                ops.append(("set", path, value, version))

            def create(self, path, value):
                ops.append(("create", path, value, None))

            def delete(self, path, version=-1):
                ops.append(("delete", path, None, version))

            def commit(self):
                from kazoo.exceptions import BadVersionError, NodeExistsError, RolledBackError

                if zk.meddle:
                    zk.meddle(zk)
                bad = [i for i, (op, path, _, v) in enumerate(ops)
                       if (op == "create" and path in zk.nodes)
                       or (op != "create" and (path not in zk.nodes or v not in (-1, zk.versions[path])))]
                if bad:
                    err = NodeExistsError if ops[bad[0]][0] == "create" else BadVersionError
                    return [err() if i == bad[0] else RolledBackError() for i in range(len(ops))]
                for op, path, value, _ in ops:
                    if op == "delete":
                        del zk.nodes[path], zk.versions[path]
                    else:
                        zk.nodes[path] = value
                        zk.versions[path] = zk.versions.get(path, -1) + 1
                return [True] * len(ops)

        return Tx()


def test_clear_deletes_controller_and_migration_znodes_that_exist_and_says_what_they_held():
    zk = _Zk({"/controller": b'{"brokerid": 3000}', "/migration": b"{}", "/brokers": b""})
    done = zkm.clear(zk)
    assert set(zk.nodes) == {"/brokers"}
    assert (done.before.state, done.before.controller, done.before.migration_znode) == (zkm.PRE_MIGRATION, 3000, {})
    zk = _Zk({"/migration": b"{}"})
    assert zkm.clear(zk).before.controller is None and zk.nodes == {}
    assert zkm.clear(_Zk({})).before.state == zkm.NONE


def test_the_controller_epoch_is_raised_above_the_kraft_epoch_in_the_same_transaction_as_the_delete():
    """KAFKA-20488: a KRaft controller whose raft epoch (17) is past ZooKeeper's controller epoch
    (9): /controller_epoch becomes 18 as /controller goes, so the next ZooKeeper controller (19) is
    above every partition state the KRaft controller stamped. Above already: left as it is."""
    ctrl = json.dumps({"brokerid": 3000, "kraftControllerEpoch": 17}).encode()
    zk = _Zk({"/controller": ctrl, "/controller_epoch": b"9", "/migration": b"{}"})
    done = zkm.clear(zk)
    assert (done.controller_epoch, done.raised_to, zk.nodes) == (9, 18, {"/controller_epoch": b"18"})
    assert "raised from 9 to 18, above the KRaft controller's epoch 17 (KAFKA-20488" in done.epoch_note()
    for ours, raised in ((b"17", 18), (b"18", None), (b"40", None)):
        zk = _Zk({"/controller": ctrl, "/controller_epoch": ours})
        done = zkm.clear(zk)
        assert done.raised_to == raised and zk.nodes == {"/controller_epoch": str(raised).encode() if raised else ours}
    zk = _Zk({"/controller": ctrl})  # no /controller_epoch at all: created
    assert zkm.clear(zk).raised_to == 18 and zk.nodes == {"/controller_epoch": b"18"}
    zk = _Zk({"/controller": b'{"brokerid": 2}', "/controller_epoch": b"5"})  # a ZooKeeper broker held it
    done = zkm.clear(zk)
    assert done.raised_to is None and zk.nodes == {"/controller_epoch": b"5"}
    assert "no KRaft controller" in done.epoch_note()


def test_a_controller_epoch_written_in_between_changes_nothing_and_says_a_controller_may_still_run():
    from kops.errors import ClusterError

    def kraft_claims_again(zk):  # a KRaft controller still running: it bumps /controller_epoch
        zk.nodes["/controller_epoch"] = b"10"
        zk.versions["/controller_epoch"] += 1

    nodes = {"/controller": json.dumps({"brokerid": 3000, "kraftControllerEpoch": 17}).encode(),
             "/controller_epoch": b"9", "/migration": b"{}"}
    zk = _Zk(nodes, meddle=kraft_claims_again)
    with pytest.raises(ClusterError, match="is a KRaft controller of the migration still running"):
        zkm.clear(zk)
    assert zk.nodes == {**nodes, "/controller_epoch": b"10"}  # /controller and /migration still there

    def kraft_rewrites_controller(zk):  # /controller_epoch above already: /controller's version guards
        zk.versions["/controller"] += 1

    zk = _Zk({**nodes, "/controller_epoch": b"30"}, meddle=kraft_rewrites_controller)
    with pytest.raises(ClusterError, match="changed while kops deleted /controller"):
        zkm.clear(zk)
    assert set(zk.nodes) == set(nodes)


@given(st.one_of(st.none(), st.integers(0, 10**6)), st.one_of(st.none(), st.integers(0, 10**6)))
def test_epoch_to_raise_puts_the_next_zookeeper_controller_above_the_kraft_epoch(zk_epoch, kraft_epoch):
    raised = zkm.epoch_to_raise(zk_epoch, kraft_epoch)
    if kraft_epoch is None:
        assert raised is None
    else:
        assert (raised if raised is not None else zk_epoch) > kraft_epoch  # the next controller: that + 1
        assert raised is None or zk_epoch is None or raised > zk_epoch  # never lowered


def test_clear_migration_step_deletes_through_the_cluster_adapter_and_reports_what_was_there():
    from types import SimpleNamespace

    from kops.playbook.registry import REGISTRY

    zk = _Zk({"/controller": json.dumps({"brokerid": 3000, "kraftControllerEpoch": 2}).encode(),
              "/migration": json.dumps({"kraft_metadata_offset": 40}).encode()})

    class Conn:
        zookeeper = "zk:2181"

        def zk(self, migrating=False):
            assert migrating
            return zk

    @contextmanager
    def connection():
        yield Conn()

    ctx = SimpleNamespace(topology_file=None, dry_run=True, connection=connection)
    got = REGISTRY["clear_migration"]({}, ctx)
    assert got == {"summary": "would delete /controller (3000) and /migration ({'kraft_metadata_offset': 40}); "
                              "/controller_epoch would be raised (it held no epoch) to 3, above the KRaft "
                              "controller's epoch 2 (KAFKA-20488: else the next ZooKeeper controller cannot elect "
                              "leaders for the partitions the KRaft controller wrote)"}
    assert set(zk.nodes) == {"/controller", "/migration"}
    ctx.dry_run = False
    got = REGISTRY["clear_migration"]({}, ctx)
    assert got["summary"].startswith("deleted /controller (held by 3000) and /migration; /controller_epoch raised")
    assert got["was"] == {"state": zkm.MIGRATION, "controller": 3000, "kraft_controller_epoch": 2,
                          "migration_znode": {"kraft_metadata_offset": 40}, "controller_epoch": None}
    assert got["raised_to"] == 3 and zk.nodes == {"/controller_epoch": b"3"}
