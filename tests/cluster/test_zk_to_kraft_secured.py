"""ZooKeeper -> KRaft with a secured cluster: a 6-broker, 3-rack (a,a,b,b,c,c) Kafka 3.9.2 ZooKeeper
sandbox with SASL/SCRAM (``--security sasl_plaintext``: SCRAM-SHA-512 on the brokers' listener and
between them, AclAuthorizer with ``super.users=User:admin``, ZooKeeper requiring SASL with
``zookeeper.set.acl=true``) is migrated by the zk-to-kraft playbook, the sandbox's verbs as its
hooks (the controllers' listener SASL with PLAIN, StandardAuthorizer on every KRaft node:
kops/sandbox/security.py). kops connects as the super user (``--command-config``, the
ZooKeeper credentials in ``KOPS_ZOOKEEPER_AUTH_FILE``); the acks=all producer and the consumer
run as the unprivileged user, allowed by ACLs only: every phase must authenticate it (its SCRAM
credential migrated) and authorize it (the ACLs migrated, AclAuthorizer then StandardAuthorizer).

What the test asks: no acknowledged message lost, no authentication or authorization error of
the producer, no partition offline or under min ISR in any sample, the ACLs, the SCRAM users,
topic and broker configs the same after (the playbook's snapshot comparison, and the test's own
reads), the user still refused where no ACL allows it. One run, no kill (the plain test,
tests/cluster/test_zk_to_kraft_playbook.py, proves --resume, the rollback and the upgrade)."""

from __future__ import annotations

import json
import shlex
import sys
import time

import pytest

from scripts.reliability import MIGRATION_SECURED
from tests.cluster.kafka_helpers import Producing, admin, consume_all, create_topic, kops
from tests.cluster.migration_helpers import assert_sampled, layout, record_row, run_mending_stuck_isr, sandbox_cli
from tests.cluster.sandboxes import own_sandbox
from tests.sampling import Sampler

pytestmark = pytest.mark.cluster

TOPIC = "secured-kept"
REFUSED = "secured-refused"  # no ACL names it: the user may neither write nor read it
USER = "User:kops-user"
#: the errors that would say the migration lost a credential or an ACL
AUTH_ERRORS = {"TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
               "SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION"}


@pytest.fixture(scope="module")
def secured39(tmp_path_factory, request):
    """ZooKeeper mode, Kafka 3.9.2, SASL_PLAINTEXT + SCRAM-SHA-512 and ACLs: 6 brokers in racks a,a,b,b,c,c."""
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-zk2k-secured", "secured zk-to-kraft sandbox",
                           brokers=6, racks="a,a,b,b,c,c", kafka_version="3.9.2", security="sasl_plaintext")


def _client(path) -> dict:
    from kops.cluster.config import ClientConfig

    return ClientConfig.load(str(path)).librdkafka()


def _acls(bs: str, client: dict) -> list[tuple]:
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    return sorted((b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                   b.permission_type.name) for b in admin(bs, client).describe_acls(flt).result(30))


def _grant(bs: str, client: dict) -> None:
    """What the unprivileged user may do: write and read the topic (an idempotent producer needs
    no more since Kafka 2.8), read its groups (prefixed), and expressly not alter the topic's
    configs (a DENY)."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    allow, deny, lit = AclPermissionType.ALLOW, AclPermissionType.DENY, ResourcePatternType.LITERAL
    acls = [AclBinding(ResourceType.TOPIC, TOPIC, lit, USER, "*", AclOperation.WRITE, allow),
            AclBinding(ResourceType.TOPIC, TOPIC, lit, USER, "*", AclOperation.READ, allow),
            AclBinding(ResourceType.GROUP, "kops-check-", ResourcePatternType.PREFIXED, USER, "*", AclOperation.READ,
                       allow),
            AclBinding(ResourceType.TOPIC, TOPIC, lit, USER, "*", AclOperation.ALTER_CONFIGS, deny)]
    for f in admin(bs, client).create_acls(acls).values():
        f.result(30)


def _set_configs(bs: str, client: dict) -> None:
    """A dynamic config on a topic and on a broker, for the snapshot to keep."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    res = [ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
               ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)]),
           ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
               ConfigEntry("log.cleaner.backoff.ms", "20000", incremental_operation=AlterConfigOpType.SET)])]
    for f in admin(bs, client).incremental_alter_configs(res).values():
        f.result(30)


def _refused(bs: str, user: dict) -> str | None:
    """The unprivileged user's write to REFUSED: the error's name (None: it was allowed)."""
    from confluent_kafka import Producer

    out: list = []
    p = Producer({"bootstrap.servers": bs, **user, "acks": "all", "message.timeout.ms": 20000})
    p.produce(REFUSED, b"no", on_delivery=lambda err, _m: out.append(err))
    p.flush(30)
    return out[0].name() if out and out[0] is not None else None


def _broker_config(bs: str, client: dict, broker: int, name: str) -> str | None:
    from confluent_kafka.admin import ConfigResource, ResourceType

    fut = admin(bs, client).describe_configs([ConfigResource(ResourceType.BROKER, str(broker))])
    entries = next(iter(fut.values())).result(30)
    return entries[name].value if name in entries else None


def test_the_zk_to_kraft_playbook_migrates_a_secured_sandbox(secured39, tmp_path, record):
    from kops.sandbox.procs import free_ports

    sb = secured39
    bs = sb.bootstrap_servers
    zk = sb.config.zookeeper_connect or f"{sb.config.host}:{sb.config.zookeeper_port}"
    su, user = _client(sb.admin_config), _client(sb.user_config)
    create_topic(bs, TOPIC, partitions=6, rf=3, min_isr=2, client=su)
    create_topic(bs, REFUSED, partitions=3, rf=3, min_isr=2, client=su)
    _grant(bs, su)
    _set_configs(bs, su)
    acls_before, layout_before = _acls(bs, su), layout(bs, su)
    assert len(acls_before) == 4, acls_before
    assert _refused(bs, user) == "TOPIC_AUTHORIZATION_FAILED"
    assert _broker_config(bs, su, 0, "authorizer.class.name") == "kafka.security.authorizer.AclAuthorizer"

    verb = f"{shlex.quote(sys.executable)} -m kops sandbox"
    wd = shlex.quote(str(sb.workdir))
    migrate = f"{verb} restart --broker {{broker}} --phase migrate --workdir {wd}"
    hooks = {
        "controllers_command": f"{verb} migration controllers-up --controllers 3 --controller-port {free_ports(1)[0]} "
                               f"--workdir {wd}",
        "migrate_command": migrate,
        "kraft_command": f"{verb} restart --broker {{broker}} --phase kraft --workdir {wd}",
        "finalize_command": f"{verb} migration finalize --workdir {wd}",
    }
    # kops as the super user: its client properties, and ZooKeeper's SASL credentials
    conn = ["--bootstrap-server", bs, "--zookeeper", zk, "--command-config", str(sb.admin_config), "--yes",
            "--output", "json"]
    run = ["playbook", "run", "zk-to-kraft", *conn, "-p", "gate_timeout=3m", "-p", "restart_timeout=5m",
           "-p", "catch_up_timeout=90s", "-p", "migration_timeout=3m"]
    for k, v in hooks.items():
        run += ["-p", f"{k}={v}"]
    env = {"KOPS_HOME": str(tmp_path), "KOPS_ZOOKEEPER_AUTH_FILE": str(sb.zookeeper_auth_file)}

    t0 = time.monotonic()
    with Producing(bs, TOPIC, client=user) as prod, Sampler(bs, [TOPIC], client=su) as sampler:
        r, exits, stuck = run_mending_stuck_isr(run, conn, "migrate.", migrate, sampler, env)
        took = time.monotonic() - t0
    got = consume_all(bs, prod.acked, TOPIC, client=user)
    record_row(record, "ZooKeeper -> KRaft migration of a secured cluster (SASL/SCRAM, ACLs; producer and consumer "
                       "as a user allowed by ACLs only) by `playbook run zk-to-kraft` (sandbox hooks), finalized",
               MIGRATION_SECURED, "3.9.2", prod, got, sampler, exits, took, stuck)
    assert_sampled(sampler)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-6000:])
    rep = json.loads(r.stdout)
    by = {s["id"]: s for s in rep["steps"]}
    assert all(s["status"] == "done" for s in rep["steps"]), [s for s in rep["steps"] if s["status"] != "done"]
    # the playbook's own check: the snapshot taken before, compared after the second roll
    assert "4 ACLs, 2 SCRAM users" in by["before"]["summary"], by["before"]
    assert by["same"]["summary"].startswith("same topics") and "4 ACLs, 2 SCRAM users" in by["same"]["summary"], \
        by["same"]
    snap = json.loads((tmp_path / "playbook-runs" / rep["run_id"] / "snapshot-before.json").read_text())
    assert sorted(snap["scram_users"]) == ["admin", "kops-user"], snap["scram_users"]
    assert sorted(map(tuple, snap["acls"])) == acls_before
    assert "migration state MIGRATION" in by["migrated"]["summary"] and "run as KRaft brokers" in by["kraft-brokers"]["summary"]

    # the end state: a KRaft cluster, StandardAuthorizer enforcing the same ACLs, nothing lost
    assert sandbox_cli(sb, "migration", "status")["migration"]["state"] == "POST_MIGRATION"
    d = kops("cluster", "describe", "--bootstrap-server", bs, "--command-config", str(sb.admin_config), "--output", "json")
    assert d.returncode == 0, d.stderr
    topo = json.loads(d.stdout)
    assert topo["mode"] == "kraft" and topo["controller"] in (1000, 1001, 1002)
    assert {b["id"]: b["rack"] for b in topo["brokers"]} == dict(zip(range(6), "aabbcc"))
    assert _broker_config(bs, su, 0, "authorizer.class.name") == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert _acls(bs, su) == acls_before
    assert layout(bs, su)[TOPIC] == layout_before[TOPIC]
    assert _broker_config(bs, su, 1, "log.cleaner.backoff.ms") == "20000"
    assert _refused(bs, user) == "TOPIC_AUTHORIZATION_FAILED"
    assert len(prod.acked) > 100
    assert not prod.errors & AUTH_ERRORS, prod.errors
    assert prod.acked <= got, f"{len(prod.acked - got)} acknowledged messages lost"
    durations = {k: v["duration_s"] for k, v in by.items() if "." not in k}
    print(f"secured zk-to-kraft playbook: {took:.1f}s (stuck ISR recovered: {stuck[:2] if stuck else None}); "
          f"{len(prod.acked)} acked, {prod.failed} failed deliveries ({sorted(prod.errors)}); {durations}")
