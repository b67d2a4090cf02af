"""kops against a secured cluster: SASL_SSL + SCRAM-SHA-512 to Kafka, AclAuthorizer, ZooKeeper
requiring SASL/DIGEST-MD5 with zookeeper.set.acl=true (``kops sandbox up --security sasl_ssl``).

One secured sandbox (ZooKeeper + 3 brokers over racks a, b, c) for this module, started by its own
module-scoped fixture on free ports; it does not use (or start) the session's open ``sandbox``.
The last test searches every stream and file the module's kops runs produced for the passwords.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kops.sandbox.security import zk_sasl
from tests.cluster.sandboxes import own_sandbox

pytestmark = pytest.mark.cluster

TOPIC = "secured-orders"
# every (args, CompletedProcess) of a kops run in this module, for the secret scan
RUNS: list[tuple[tuple[str, ...], subprocess.CompletedProcess]] = []


@pytest.fixture(scope="module")
def secured(tmp_path_factory, request):
    """A running secured sandbox (``Sandbox``), torn down after the module."""
    from kops.sandbox import Sandbox

    yield from secured_sandbox(Sandbox, tmp_path_factory, request, "kops-secured", "secured sandbox")


def secured_sandbox(cls, tmp_path_factory, request, name: str, label: str, **config):
    """``cls`` (the JVM or the containerised sandbox) secured with SASL_SSL, 3 brokers on free
    ports, with the module's topic; down (and its work dir removed unless a test failed) after."""
    yield from own_sandbox(cls, tmp_path_factory, request, name, label, brokers=3, security="sasl_ssl",
                           setup=_create_topic, **config)


def _create_topic(sb) -> None:
    """As admin, through confluent-kafka with the properties file the sandbox wrote."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from kops.cluster.config import ClientConfig

    conf = {"bootstrap.servers": sb.bootstrap_servers, **ClientConfig.load(str(sb.admin_config)).librdkafka()}
    admin = AdminClient(conf)
    fut = admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])[TOPIC]
    fut.result(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # all leaders known before the tests read it
        md = admin.list_topics(topic=TOPIC, timeout=10)
        t = md.topics.get(TOPIC)
        if t and t.error is None and len(t.partitions) == 3 and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.5)
    raise AssertionError(f"topic {TOPIC} did not get leaders")


@pytest.fixture(scope="module")
def kops_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kops-home")


@pytest.fixture(scope="module")
def secrets(secured) -> list[str]:
    from kops.sandbox.security import load_secrets

    s = load_secrets(secured.security_files)
    assert s is not None
    return s.all()


def kops(kops_home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("KOPS_")}
    e |= {"KOPS_HOME": str(kops_home), "COLUMNS": "200", **(env or {})}
    r = subprocess.run([sys.executable, "-m", "kops", *args], capture_output=True, text=True, timeout=timeout, env=e)
    RUNS.append((args, r))
    return r


def conn_args(sb, config: Path | str) -> list[str]:
    return ["--bootstrap-server", sb.bootstrap_servers, "--command-config", str(config)]


def test_files_private_and_up_prints_paths_only(secured, kops_home, secrets):
    sf = secured.security_files
    for f in (sf.secrets, sf.admin_properties, sf.user_properties, sf.zookeeper_auth, sf.broker_pem, sf.ca_key,
              sf.broker_jaas, sf.zookeeper_jaas, *(secured.broker_properties_file(b) for b in secured.broker_ids)):
        assert (f.stat().st_mode & 0o777) == 0o600, f
    assert (sf.dir.stat().st_mode & 0o777) == 0o700
    # `up` on the running sandbox: reuses it and shows where the client files are, not what is in them
    r = kops(kops_home, "sandbox", "up", "--workdir", str(secured.workdir))
    assert r.returncode == 0, r.stderr
    assert str(sf.admin_properties) in r.stdout and str(sf.zookeeper_auth) in r.stdout
    r = kops(kops_home, "sandbox", "up", "--workdir", str(secured.workdir), "--output", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["security"] == "sasl_ssl" and doc["security_files"]["user_command_config"] == str(sf.user_properties)


def test_describe_and_health_as_admin(secured, kops_home):
    r = kops(kops_home, "cluster", "describe", *conn_args(secured, secured.admin_config), "--output", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert sorted(b["id"] for b in doc["brokers"]) == secured.broker_ids
    assert TOPIC in {t["name"] for t in doc["topics"]}
    r = kops(kops_home, "cluster", "health", *conn_args(secured, secured.admin_config))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "HEALTHY" in r.stdout + r.stderr
    r = kops(kops_home, "cluster", "health", *conn_args(secured, secured.admin_config), "--output", "json")
    assert r.returncode == 0 and json.loads(r.stdout)


def test_unprivileged_user_refused_cleanly(secured, kops_home):
    before = kops(kops_home, "cluster", "describe", *conn_args(secured, secured.admin_config), "--output", "json")
    assert before.returncode == 0, before.stderr
    for cmd in (["cluster", "describe"], ["cluster", "health"], ["cluster", "describe", "--output", "json"]):
        r = kops(kops_home, *cmd, *conn_args(secured, secured.user_config))
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        err = " ".join(r.stderr.split())
        assert "not authorized" in err and "kops-user" in err, err
        assert "AUTHORIZATION_FAILED" in err and "Traceback" not in err
        if "json" in cmd:  # one JSON error document on stdout, never a half document
            e = json.loads(r.stdout)["error"]
            assert e["exit_code"] == 1 and e["type"] == "not_authorized", e
            assert "kops-user" in " ".join([e["message"], *e["details"]])
    after = kops(kops_home, "cluster", "describe", *conn_args(secured, secured.admin_config), "--output", "json")
    assert _stable(before.stdout) == _stable(after.stdout)  # nothing changed


def _stable(snapshot_json: str) -> dict:
    """A topology snapshot without what moves by itself: the time it was taken and the free bytes
    of the brokers' volumes (other processes write to the same disk)."""
    doc = json.loads(snapshot_json)
    doc.pop("captured_at", None)
    for b in doc.get("brokers", []):
        for d in b.get("log_dirs") or []:
            d.pop("usable_bytes", None)
    return doc


def test_wrong_password_is_an_authentication_error(secured, kops_home, tmp_path):
    wrong = tmp_path / "wrong.properties"
    text = secured.admin_config.read_text()
    import re

    wrong.write_text(re.sub(r'password="[^"]*"', 'password="Wrong-Pass-123456"', text))
    t0 = time.monotonic()
    r = kops(kops_home, "cluster", "describe", *conn_args(secured, wrong), "--output", "json")
    assert r.returncode == 1
    err = " ".join(r.stderr.split())
    assert "authentication" in err.lower() and "admin" in err and str(wrong) in err, err
    assert time.monotonic() - t0 < 30  # fails at the login, not at the request timeout
    assert "Wrong-Pass-123456" not in r.stdout + r.stderr


def test_zookeeper_reads_with_auth_file(secured, kops_home, tmp_path):
    zk = ["--zookeeper", secured.zookeeper_connect]
    auth = {"KOPS_ZOOKEEPER_AUTH_FILE": str(secured.zookeeper_auth_file)}
    r = kops(kops_home, "cluster", "describe", *conn_args(secured, secured.admin_config), *zk, "--output", "json", env=auth)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert sorted(b["id"] for b in doc["brokers"]) == secured.broker_ids
    # through the global option too (it is not on the command line of the password)
    r = kops(kops_home, "--zookeeper-auth-file", str(secured.zookeeper_auth_file), "cluster", "describe",
             *conn_args(secured, secured.admin_config), *zk)
    assert r.returncode == 0, r.stderr
    # without credentials: refused, and told how to give them (the same message however kazoo
    # reported the closed session: kops.cluster.zk_session)
    r = kops(kops_home, "cluster", "describe", *conn_args(secured, secured.admin_config), *zk, "--request-timeout", "5")
    assert r.returncode == 1
    err = " ".join(r.stderr.split())
    assert (f"error: ZooKeeper at {secured.zookeeper_connect} requires SASL authentication and closed the "
            "unauthenticated session: pass --zookeeper-auth-file FILE (username=..., password=...) or set "
            "KOPS_ZOOKEEPER_AUTH_FILE") in err, err
    assert "cannot reach" not in err and "Traceback" not in err, err
    # wrong ZooKeeper password: the same message whether kazoo's start or the first read saw the
    # refusal (a race a loaded machine decides either way), never "cannot reach"
    bad = tmp_path / "zk-wrong.properties"
    bad.write_text("username=kafka\npassword=Wrong-Zk-Pass-987654\n")
    r = kops(kops_home, "cluster", "describe", *conn_args(secured, secured.admin_config), *zk, "--request-timeout", "5",
             env={"KOPS_ZOOKEEPER_AUTH_FILE": str(bad)})
    assert r.returncode == 1
    err = " ".join(r.stderr.split())
    assert (f"error: ZooKeeper at {secured.zookeeper_connect} refused the SASL/DIGEST-MD5 login of user 'kafka'; "
            f"check the credentials in --zookeeper-auth-file {bad}") in err, err
    assert "cannot reach" not in err and "Traceback" not in err, err
    assert "Wrong-Zk-Pass-987654" not in r.stdout + r.stderr
    # the same as JSON: an authentication failure, exit 1
    r = kops(kops_home, "cluster", "describe", *conn_args(secured, secured.admin_config), *zk, "--request-timeout", "5",
             "--output", "json", env={"KOPS_ZOOKEEPER_AUTH_FILE": str(bad)})
    assert r.returncode == 1
    doc = json.loads(r.stdout)["error"]
    assert doc["type"] == "authentication_failed" and "refused the SASL/DIGEST-MD5 login of user 'kafka'" in doc["message"]
    assert "Wrong-Zk-Pass-987654" not in r.stdout + r.stderr


def test_kafka_own_tool_reads_the_properties_file(secured):
    """The client files are Kafka-format: Kafka's TopicCommand uses them as is."""
    from kops.sandbox.dist import java_tool, tool_class

    r = java_tool(tool_class("topic", secured.kafka_version),
                  ["--bootstrap-server", secured.bootstrap_servers, "--command-config", str(secured.admin_config),
                   "--describe", "--topic", TOPIC], timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"Topic: {TOPIC}" in r.stdout


def test_zookeeper_znodes_have_acls(secured):
    """zookeeper.set.acl=true: the brokers' znodes are writable by the ZooKeeper user only, and
    the SCRAM credentials are not world-readable."""
    from kazoo.security import Permissions

    from kops.sandbox import probe

    with probe.zk_client(secured.zookeeper_connect, sasl=zk_sasl(secured.config)) as zk:
        acls, _ = zk.get_acls("/brokers/topics")
        assert {a.id.scheme for a in acls} == {"sasl", "world"}
        assert all(a.perms == Permissions.READ for a in acls if a.id.scheme == "world")
        acls, _ = zk.get_acls("/config/users/admin")
        assert [a.id.scheme for a in acls] == ["sasl"]


# -- the engines on the secured cluster ---------------------------------------------------------------
MOVES = "secured-moves"
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def _admin(sb):
    from confluent_kafka.admin import AdminClient

    from kops.cluster.config import ClientConfig

    if not hasattr(sb, "_test_admin"):
        sb._test_admin = AdminClient({"bootstrap.servers": sb.bootstrap_servers,
                                      **ClientConfig.load(str(sb.admin_config)).librdkafka()})
    return sb._test_admin


def _replicas(sb, topic) -> dict[int, list[int]]:
    md = _admin(sb).list_topics(topic=topic, timeout=10)
    return {p: list(pm.replicas) for p, pm in md.topics[topic].partitions.items()}


def _throttles(sb, topic) -> dict[str, str]:
    """Every throttle config set on the topic or on any broker (dynamic, non-default)."""
    from confluent_kafka.admin import ConfigResource

    res = [ConfigResource("topic", topic)] + [ConfigResource("broker", str(b)) for b in sb.broker_ids]
    out: dict[str, str] = {}
    for one in res:  # one BROKER resource per call
        for r, fut in _admin(sb).describe_configs([one]).items():
            for k, e in fut.result(timeout=30).items():
                if k in THROTTLE_KEYS and e.value and not e.is_default:
                    out[f"{r.name}/{k}"] = e.value
    return out


@pytest.fixture(scope="module")
def moves_topic(secured):
    """3 partitions, RF 2 over 3 brokers (so replicas can move), ~1 MiB of data each."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    from kops.cluster.config import ClientConfig

    assign = {0: [0, 1], 1: [1, 2], 2: [2, 0]}
    fut = _admin(secured).create_topics([NewTopic(MOVES, num_partitions=3, replica_assignment=[assign[p] for p in range(3)])])[MOVES]
    fut.result(timeout=60)
    prod = Producer({"bootstrap.servers": secured.bootstrap_servers, "linger.ms": 20, "log_level": 0,
                     **ClientConfig.load(str(secured.admin_config)).librdkafka()})
    payload = b"x" * 10_000
    for i in range(300):
        prod.produce(MOVES, payload, partition=i % 3)
    assert prod.flush(60) == 0
    deadline = time.monotonic() + 60
    while _replicas(secured, MOVES) != assign and time.monotonic() < deadline:
        time.sleep(0.5)
    return assign


def _plan(path: Path, target: dict[int, list[int]]) -> Path:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": MOVES, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)} for p, r in sorted(target.items())]}))
    return path


def _other(r: list[int]) -> list[int]:
    """Replace the second replica by the broker not in the list (stays rack-safe: 3 racks)."""
    missing = ({0, 1, 2} - set(r)).pop()
    return [r[0], missing]


def test_unprivileged_reassign_execute_refused_before_any_throttle(secured, kops_home, moves_topic, tmp_path):
    target = {p: _other(r) for p, r in moves_topic.items()}
    plan = _plan(tmp_path / "plan.json", target)
    r = kops(kops_home, "reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", "1000000",
             "--yes", *conn_args(secured, secured.user_config), timeout=120)
    assert r.returncode == 1, (r.stdout, r.stderr)
    err = " ".join(r.stderr.split()).lower()
    print(f"[unprivileged reassign execute] exit {r.returncode}: {err}")
    assert "not authorized" in err or "authorization" in err, err
    assert "traceback" not in err
    assert _throttles(secured, MOVES) == {}
    assert _replicas(secured, MOVES) == moves_topic


def test_throttled_reassignment_and_verify_as_admin(secured, kops_home, moves_topic, tmp_path):
    target = {p: _other(r) for p, r in moves_topic.items()}
    plan = _plan(tmp_path / "plan.json", target)
    r = kops(kops_home, "reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", "2000000",
             "--wait", "--yes", "--poll-interval", "1", "--timeout", "90", *conn_args(secured, secured.admin_config),
             "--output", "json", timeout=150)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["state"] == "complete" and doc["throttles_left"] == []
    assert _replicas(secured, MOVES) == target
    r = kops(kops_home, "reassign", "verify", "--reassignment-json-file", str(plan), *conn_args(secured, secured.admin_config))
    assert r.returncode == 0, r.stderr
    assert _throttles(secured, MOVES) == {}


def test_zookeeper_reassignment_path_with_authenticated_zookeeper(secured, kops_home, moves_topic, tmp_path):
    plan = _plan(tmp_path / "back.json", moves_topic)  # back to the original replicas
    r = kops(kops_home, "reassign", "execute", "--reassignment-json-file", str(plan), "--via", "zookeeper",
             "--zookeeper", secured.zookeeper_connect, "--wait", "--yes", "--poll-interval", "1", "--timeout", "90",
             *conn_args(secured, secured.admin_config), timeout=150,
             env={"KOPS_ZOOKEEPER_AUTH_FILE": str(secured.zookeeper_auth_file)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert _replicas(secured, MOVES) == moves_topic
    assert _throttles(secured, MOVES) == {}


def test_preferred_election_and_cron_rebalance(secured, kops_home, moves_topic):
    r = kops(kops_home, "leader", "elect", "--election-type", "preferred", "--all-topic-partitions", "--yes", *conn_args(secured, secured.admin_config))
    assert r.returncode == 0, r.stdout + r.stderr
    r = kops(kops_home, "leader", "rebalance", *conn_args(secured, secured.admin_config), "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    json.loads(r.stdout)
    # the unprivileged user: Kafka hides the topics it may not describe, so --all-topic-partitions
    # finds nothing to elect (a no-op, exit 0) -- or, naming a topic, is refused (exit 1)
    r = kops(kops_home, "leader", "elect", "--election-type", "preferred", "--all-topic-partitions", "--yes",
             *conn_args(secured, secured.user_config))
    err = " ".join(r.stderr.split()).lower()
    assert (r.returncode == 0 and "0 elected" in err) or (r.returncode == 1 and "not authorized" in err), r.stderr
    r = kops(kops_home, "leader", "elect", "--election-type", "preferred", "--topic", MOVES, "--yes",
             *conn_args(secured, secured.user_config))
    err = " ".join(r.stderr.split()).lower()
    # the hidden topic is reported as an authorization failure, not as "unknown"
    assert r.returncode == 1 and "not authorized" in err and MOVES in err, r.stderr
    assert "traceback" not in err


def test_no_secret_in_any_output(secured, kops_home, secrets):
    """Every stdout/stderr of this module's kops runs, every file kops wrote under KOPS_HOME, and
    every log file of the sandbox (server.log, state-change.log, controller.log, console.out, ...)
    are free of the passwords. The only files that hold them are the 0600 ones the sandbox wrote
    for that purpose: security/*, config/broker-*.properties (the inter-broker login)."""
    assert len(RUNS) >= 10
    for args, r in RUNS:
        for pw in secrets:
            assert pw not in r.stdout and pw not in r.stderr, f"password in the output of kops {' '.join(args)}"
    scanned = 0
    for root in (kops_home, secured.workdir):
        for f in Path(root).rglob("*"):
            if not f.is_file() or secured.security_files.dir in f.parents:
                continue
            if f.parent == secured.workdir / "config" and f.name.startswith("broker-"):
                continue
            if "data" in f.relative_to(root).parts and f.suffix in (".log", ".index", ".timeindex"):
                continue  # partition data (no secrets are produced to topics here)
            try:
                data = f.read_bytes()
            except FileNotFoundError:  # gone since listed: a running broker's checkpoint .tmp, renamed
                continue
            scanned += 1
            for pw in secrets:
                assert pw.encode() not in data, f"password found in {f}"
    assert scanned > 5
    # the password-bearing files are private
    for f in (secured.workdir / "config").glob("broker-*.properties"):
        assert (f.stat().st_mode & 0o777) == 0o600
