"""Sandbox configuration, generated files, rack parsing, validation, state and process
ownership — no cluster, no JVM."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kops.errors import BadInput, ClusterError
from kops.sandbox import procs
from kops.sandbox.cluster import Sandbox
from kops.sandbox.opening import attach, open_sandbox
from kops.inputs.properties import parse_properties, render_properties
from kops.sandbox.config import SandboxConfig, default_racks, parse_heap, parse_racks
from kops.paths import cache_root
from kops.sandbox.dist import is_cached, major_version, pom_resource, resource_path, tool_class


# -- racks ------------------------------------------------------------------------------------
def test_default_racks():
    assert default_racks(range(6)) == {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    assert default_racks(range(3)) == {0: "a", 1: "b", 2: "c"}
    assert list(default_racks(range(9)).values()) == list("aaabbbccc")
    assert list(default_racks(range(4)).values()) == list("aabb")
    assert default_racks([]) == {}
    assert SandboxConfig().rack_map == {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}


def test_parse_racks_positional_and_by_id():
    ids = [0, 1, 2, 3]
    assert parse_racks("x,x,y,y", ids) == {0: "x", 1: "x", 2: "y", 3: "y"}
    assert parse_racks(" x , x ,y,y ", ids) == {0: "x", 1: "x", 2: "y", 3: "y"}
    assert parse_racks("/dc1/r1,/dc1/r2,/dc2/r1,/dc2/r2", ids)[3] == "/dc2/r2"
    assert parse_racks("3:/dc2/r2,0:/dc1/r1,1:/dc1/r2,2:/dc2/r1", ids) == {
        0: "/dc1/r1", 1: "/dc1/r2", 2: "/dc2/r1", 3: "/dc2/r2"}
    assert parse_racks(["a", "b", "a", "b"], ids) == {0: "a", 1: "b", 2: "a", 3: "b"}
    assert parse_racks({"0": "a", 1: "a", 2: "b", 3: "b"}, ids)[0] == "a"
    assert parse_racks(None, ids) == default_racks(ids)
    assert parse_racks("", ids) == default_racks(ids)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("a,b,c", "3 racks for 4 brokers"),
        ("0:a,1:b,2:c", "no rack for brokers [3]"),
        ("0:a,1:b,2:c,3:d,9:e", "unknown brokers [9]"),
        ("0:a,0:b,1:c,2:d", "broker 0 is given twice"),
        ("0:a,b,c,d", "mix of 'id:rack' and plain"),
        ("x:a,1:b,2:c,3:d", "not an integer"),
        ("a,,b,b", "empty rack"),
        ("/dc1/r1,/dc1/r1,a,a", "multi-level racks must all be paths"),
        ("/dc1/r1,/dc1/r1,/dc2,/dc2", "same depth"),
        ("/dc1//r1,/dc1/r1,/dc2/r1,/dc2/r1", "malformed"),
        ("a b,a,b,b", "space"),
    ],
)
def test_parse_racks_errors(spec, needle):
    with pytest.raises(BadInput) as e:
        parse_racks(spec, [0, 1, 2, 3])
    assert needle in e.value.message + " ".join(e.value.details)


def test_racks_spec_on_config():
    cfg = SandboxConfig(brokers=4, racks="0:/dc1/r1,1:/dc1/r2,2:/dc2/r1,3:/dc2/r2", workdir="/tmp/x")
    assert cfg.rack_map[2] == "/dc2/r1"
    assert cfg.broker_properties(2)["broker.rack"] == "/dc2/r1"
    with pytest.raises(BadInput):
        SandboxConfig(brokers=4, racks="a,b", workdir="/tmp/x")


# -- generated files ----------------------------------------------------------------------------
def test_broker_properties_zookeeper_mode(tmp_path):
    cfg = SandboxConfig(workdir=tmp_path, zookeeper_port=12181, base_port=19092).validate()
    p = cfg.broker_properties(3)
    assert p["broker.id"] == "3"
    assert p["broker.rack"] == "b"
    assert p["listeners"] == "PLAINTEXT://127.0.0.1:19095" == p["advertised.listeners"]
    assert p["zookeeper.connect"] == "127.0.0.1:12181"
    assert p["zookeeper.session.timeout.ms"] == "18000"
    assert p["auto.leader.rebalance.enable"] == "false"
    assert p["offsets.topic.replication.factor"] == "3"
    assert p["group.initial.rebalance.delay.ms"] == "0"
    assert p["delete.topic.enable"] == "true"
    assert p["log.dirs"] == str(tmp_path / "broker-3" / "data")
    assert cfg.bootstrap_servers.split(",")[0] == "127.0.0.1:19092"
    assert cfg.zookeeper_connect == "127.0.0.1:12181"
    assert cfg.log_dir(3) == tmp_path / "broker-3" / "logs"
    with pytest.raises(BadInput):
        cfg.broker_properties(6)


def test_small_cluster_replication_factors_and_overrides(tmp_path):
    cfg = SandboxConfig(brokers=1, workdir=tmp_path, auto_leader_rebalance=True,
                        extra_properties={"min.insync.replicas": 2, "auto.create.topics.enable": False})
    p = cfg.validate().broker_properties(0)
    assert p["offsets.topic.replication.factor"] == "1"
    assert p["transaction.state.log.min.isr"] == "1"
    assert p["auto.leader.rebalance.enable"] == "true"
    assert p["min.insync.replicas"] == "2"
    assert p["auto.create.topics.enable"] == "false"
    cfg = SandboxConfig(workdir=tmp_path, extra_properties={"auto.leader.rebalance.enable": "true"})
    assert cfg.broker_properties(0)["auto.leader.rebalance.enable"] == "true"  # extra wins


def test_zookeeper_properties_and_chroot(tmp_path):
    cfg = SandboxConfig(workdir=tmp_path, zk_chroot="/kafka").validate()
    z = cfg.zookeeper_properties()
    assert z["clientPortAddress"] == "127.0.0.1" and z["admin.enableServer"] == "false"
    assert z["dataDir"] == str(tmp_path / "zookeeper" / "data")
    assert cfg.zookeeper_connect == "127.0.0.1:2181/kafka"
    assert cfg.broker_properties(0)["zookeeper.connect"] == "127.0.0.1:2181/kafka"


def test_properties_round_trip():
    props = {"a.b": "x=y:z", "path": "/tmp/with space", "broker.rack": "/dc1/r1", "c": "#hash", "d": "back\\slash"}
    text = render_properties(props, "header line")
    assert text.startswith("# header line\n")
    assert parse_properties(text) == props


def test_jvm_command(tmp_path):
    cfg = SandboxConfig(workdir=tmp_path, heap="512m").validate()
    cmd = cfg.jvm_command(2, java="java", classpath="/libs/*")
    assert cmd[0] == "java" and "-Xmx512m" in cmd
    assert "-XX:TieredStopAtLevel=1" in cmd and "-XX:+UseSerialGC" in cmd
    assert f"-Dkafka.logs.dir={tmp_path / 'broker-2' / 'logs'}" in cmd
    assert f"-Dlog4j.configuration=file:{tmp_path / 'config' / 'log4j.properties'}" in cmd
    assert cmd[-2:] == ["kafka.Kafka", str(tmp_path / "config" / "broker-2.properties")]
    zk = cfg.jvm_command("zookeeper", java="java", classpath="/libs/*")
    assert "org.apache.zookeeper.server.quorum.QuorumPeerMain" in zk and "-Xmx128m" in zk


def test_log4j_resource_has_kafka_appenders():
    text = resource_path("log4j.properties").read_text()
    for needle in ("state-change.log", "controller.log", "server.log", "[%d] %p %m (%c)%n",
                   "log4j.logger.state.change.logger=${kops.state.change.level}, stateChangeAppender",
                   "log4j.logger.kafka.controller=TRACE, controllerAppender"):
        assert needle in text
    assert resource_path("kafka-log4j1-pom.xml").is_file() and resource_path("kafka-log4j2-pom.xml").is_file()


def test_kraft_config(tmp_path):
    cfg = SandboxConfig(mode="kraft", workdir=tmp_path, controllers=3, controller_base_port=19192).validate()
    assert cfg.kafka_version.startswith("4.")
    assert cfg.zookeeper_connect is None
    assert cfg.controller_ids == [1000, 1001, 1002]
    assert cfg.quorum_voters == "1000@127.0.0.1:19192,1001@127.0.0.1:19193,1002@127.0.0.1:19194"
    b = cfg.broker_properties(4)
    assert b["process.roles"] == "broker" and b["node.id"] == "4" and b["broker.rack"] == "c"
    assert "zookeeper.connect" not in b and b["controller.quorum.voters"] == cfg.quorum_voters
    c = cfg.controller_properties(1001)
    assert c["process.roles"] == "controller" and c["listeners"] == "CONTROLLER://127.0.0.1:19193"
    assert cfg.log4j_file.name == "log4j2.yaml"
    assert resource_path("log4j2.yaml").is_file()


# -- validation ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"mode": "swarm"}, "mode 'swarm'"),
        ({"brokers": 0}, "brokers 0"),
        ({"mode": "zookeeper", "kafka_version": "4.1.1"}, "no ZooKeeper mode"),
        ({"mode": "zookeeper", "kafka_version": "2.7.2"}, "Kafka 2.8 or later"),
        ({"mode": "kraft", "kafka_version": "3.6.2"}, "--mode kraft needs Kafka 3.7 or later"),
        ({"kafka_version": "3.x"}, "bad Kafka version"),
        ({"kafka_version": "3.9/../1"}, "bad Kafka version"),
        ({"host": "0.0.0.0"}, "loopback"),
        ({"heap": "lots"}, "--heap"),
        ({"heap": "16m"}, "too small"),
        ({"zookeeper_port": 9093}, "used twice"),
        ({"base_port": 80}, "not a port"),
        ({"broker_ports": [20001, 20002]}, "2 broker ports for 6 brokers"),
        ({"zk_chroot": "kafka"}, "must start with '/'"),
        ({"mode": "kraft", "controllers": 2}, "quorum of 1, 3 or 5"),
        ({"state_change_log_level": "LOUD"}, "state-change log level"),
        ({"extra_properties": {"bad key": 1}}, "bad broker property names"),
    ],
)
def test_validation_errors(tmp_path, kwargs, needle):
    with pytest.raises(BadInput) as e:
        SandboxConfig(workdir=tmp_path, **kwargs).validate()
    assert needle in e.value.message


def test_heap_and_versions():
    assert parse_heap("384M") == "384m" and parse_heap("1g") == "1g"
    assert major_version("3.9.1") == 3 and pom_resource("3.9.1") == "kafka-log4j1-pom.xml"
    assert pom_resource("2.8.2") == "kafka-log4j1-pom.xml" and pom_resource("4.1.1") == "kafka-log4j2-pom.xml"


@pytest.mark.parametrize(("version", "log4j", "reassign"), [
    ("2.8.2", "log4j.properties", "kafka.admin.ReassignPartitionsCommand"),
    ("3.6.2", "log4j.properties", "kafka.admin.ReassignPartitionsCommand"),
    ("3.7.2", "log4j.properties", "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"),
    ("4.4.0", "log4j2.yaml", "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"),
])
def test_each_kafka_line_gets_its_logging_and_command_classes(tmp_path, version, log4j, reassign):
    mode = "kraft" if version.startswith("4.") else "zookeeper"
    cfg = SandboxConfig(workdir=tmp_path, mode=mode, kafka_version=version).validate()
    assert cfg.log4j_file.name == log4j and resource_path(log4j).is_file()
    flag = [a for a in cfg.jvm_command(0, java="java", classpath="/libs/*") if "log4j" in a]
    assert flag == [f"-Dlog4j2.configurationFile={cfg.log4j_file}" if log4j.endswith(".yaml")
                    else f"-Dlog4j.configuration=file:{cfg.log4j_file}"]
    assert tool_class("reassign", version) == reassign


def test_kraft_3x_logs_through_log4j1(tmp_path):
    cfg = SandboxConfig(workdir=tmp_path, mode="kraft", kafka_version="3.7.2").validate()
    assert cfg.log4j_file.name == "log4j.properties"
    assert "-Dlog4j.configuration=file:" + str(cfg.log4j_file) in cfg.jvm_command(1000, java="java", classpath="x")


def test_a_changed_pom_fetches_the_jars_again(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_CACHE_DIR", str(tmp_path))
    home = tmp_path / "kafka-3.9.2"
    (home / "libs").mkdir(parents=True)
    (home / ".kops-complete").write_text("kafka 3.9.2\nfetched 2026-01-01T00:00:00Z\n")  # no pom digest: an old cache
    assert not is_cached("3.9.2")
    from kops.sandbox.dist import _pom_digest

    (home / ".kops-complete").write_text(f"kafka 3.9.2\npom {_pom_digest('3.9.2')}\n")
    assert is_cached("3.9.2")


def test_cache_root_env(monkeypatch, tmp_path):
    monkeypatch.setenv("KOPS_CACHE_DIR", str(tmp_path / "c"))
    assert cache_root() == (tmp_path / "c").resolve()
    monkeypatch.delenv("KOPS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_root() == (tmp_path / "x" / "kops").resolve()


def test_default_workdir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("KOPS_SANDBOX_DIR", str(tmp_path / "sb"))
    assert SandboxConfig().workdir == tmp_path / "sb"


# -- state, attach, ownership ---------------------------------------------------------------------
def test_config_round_trip(tmp_path):
    cfg = SandboxConfig(workdir=tmp_path, brokers=4, racks="/d1/r1,/d1/r2,/d2/r1,/d2/r2",
                        broker_ports=[20001, 20002, 20003, 20004], extra_properties={"x.y": "1"})
    back = SandboxConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert back == cfg


def test_attach_and_open_sandbox(tmp_path):
    with pytest.raises(ClusterError):
        attach(tmp_path)
    sb = Sandbox(SandboxConfig(workdir=tmp_path, brokers=4, racks="x,x,y,y", zookeeper_port=12345))
    sb.state.save()
    other = attach(tmp_path)
    assert other.racks == {0: "x", 1: "x", 2: "y", 3: "y"} and other.zookeeper_connect == "127.0.0.1:12345"
    assert not other.any_running() and other.status()[0].alive is False
    # `up` without flags reuses the recorded settings; flags override them
    assert open_sandbox(tmp_path).config == other.config
    assert open_sandbox(tmp_path, brokers=6).racks == SandboxConfig().rack_map
    assert open_sandbox(tmp_path, base_port=30000).bootstrap_servers.startswith("127.0.0.1:30000,")
    assert open_sandbox(tmp_path, mode="kraft").kafka_version.startswith("4.")
    assert other.brokers_in_rack("y") == [2, 3]
    with pytest.raises(BadInput):
        other.brokers_in_rack("z")
    with pytest.raises(BadInput):
        other.stop(broker=1, rack="x")
    with pytest.raises(BadInput):
        other.broker_log_dir(7)
    assert other.down() == []  # nothing runs: nothing stopped


def test_unreadable_state_file(tmp_path):
    (tmp_path / "sandbox.json").write_text("{not json")
    with pytest.raises(ClusterError):
        attach(tmp_path)


def test_down_never_signals_a_foreign_process(tmp_path):
    """A recorded pid whose command line does not mention our config file is left alone."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        sb = Sandbox(SandboxConfig(workdir=tmp_path))
        sb.state.procs = {"broker-0": {"pid": other.pid, "started": procs.start_time(other.pid)},
                     "zookeeper": {"pid": other.pid, "started": None}}
        sb.state.save()
        assert not procs.is_ours(other.pid, marker=str(tmp_path / "config" / "broker-0.properties"))
        assert attach(tmp_path).down() == []
        assert other.poll() is None  # still running
    finally:
        other.kill()
        other.wait()


def test_process_identity_and_terminate(tmp_path):
    marker = str(tmp_path / "config" / "broker-9.properties")
    pid = procs.spawn([sys.executable, "-c", "import time,sys; time.sleep(60)", marker],
                      stdout_file=tmp_path / "out", cwd=tmp_path)
    started = procs.start_time(pid)
    assert procs.is_ours(pid, marker=marker, started=started)
    assert not procs.is_ours(pid, marker=marker, started=(started or 0) + 1)  # pid reused
    assert not procs.is_ours(pid, marker=marker + "0")
    t0 = time.monotonic()
    signalled, forced = procs.terminate([pid], marker=marker, timeout_s=5)
    assert signalled == [pid] and forced == [] and time.monotonic() - t0 < 5
    assert not procs.is_ours(pid, marker=marker)  # gone (and reaped, not a zombie)
    assert "kops sandbox: starting" in (tmp_path / "out").read_text()


def test_free_ports_and_port_in_use(monkeypatch):
    """(No check that a port is still free after free_ports returned: another process may take
    it in between — what the sandbox's own busy-port check is for.)"""
    import socket

    monkeypatch.delenv("KOPS_PORT_RANGE", raising=False)
    ports = procs.free_ports(5)
    lo = procs._ephemeral_range()[0]
    # below the range outgoing connections take their local ports from (no self-connect can take them)
    assert len(set(ports)) == 5 and all(1024 <= p < lo for p in ports)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        taken = procs.free_ports(1)[0]
        s.bind(("127.0.0.1", taken))
        s.listen()
        assert procs.port_in_use("127.0.0.1", taken)


def test_free_ports_from_the_range_kops_port_range_names(monkeypatch):
    """Two test processes side by side (scripts/test.sh) draw from ranges of their own."""
    monkeypatch.setenv("KOPS_PORT_RANGE", "21000-21040")
    for _ in range(20):
        ports = procs.free_ports(4)
        assert len(set(ports)) == 4 and all(21000 <= p < 21040 for p in ports), ports
    for bad in ("21000", "21040-21000", "80-2000", "a-b", "21000-70000"):
        monkeypatch.setenv("KOPS_PORT_RANGE", bad)
        with pytest.raises(ValueError, match="KOPS_PORT_RANGE"):
            procs.free_ports(1)


def test_free_ports_hands_out_the_ports_of_recent_calls_last(monkeypatch):
    """Two calls before anything binds what the first handed out do not share a port (the fault
    lab's "port 20493 is used twice"); in a range too small to avoid it, the oldest come back."""
    from collections import deque

    monkeypatch.setattr(procs, "_handed_out", deque(maxlen=1024))
    monkeypatch.setenv("KOPS_PORT_RANGE", "21000-21040")
    for _ in range(10):
        a, b = procs.free_ports(5), procs.free_ports(5)
        assert not set(a) & set(b), (a, b)
    # all 40 handed out: the next call takes the 5 handed out longest ago, in that order
    oldest = list(procs._handed_out)[:5]
    assert procs.free_ports(5) == oldest
    assert list(procs._handed_out)[-5:] == oldest


def test_tail(tmp_path: Path):
    f = tmp_path / "log"
    f.write_text("\n".join(f"line {i}" for i in range(100)))
    assert procs.tail(f, 3) == ["line 97", "line 98", "line 99"]
    assert procs.tail(tmp_path / "missing") == []


# -- CLI (no cluster) -----------------------------------------------------------------------------
def _kops(*args: str):
    from typer.testing import CliRunner

    from kops.cli.main import app

    return CliRunner().invoke(app, list(args))


def test_cli_bad_input_starts_nothing(tmp_path):
    r = _kops("sandbox", "up", "--workdir", str(tmp_path), "--racks", "a,b")
    assert r.exit_code == 2 and "2 racks for 6 brokers" in r.stderr
    r = _kops("sandbox", "up", "--workdir", str(tmp_path), "--heap", "huge")
    assert r.exit_code == 2
    r = _kops("sandbox", "up", "--workdir", str(tmp_path), "--mode", "zookeeper", "--kafka-version", "4.1.1")
    assert r.exit_code == 2 and "no ZooKeeper mode" in r.stderr
    r = _kops("sandbox", "up", "--workdir", str(tmp_path), "--racks", "0:/dc1/r1,1:/dc1,2:/dc2/r1,3:a,4:b,5:c")
    assert r.exit_code == 2
    assert not (tmp_path / "sandbox.json").exists()
    r = _kops("sandbox", "status", "--workdir", str(tmp_path))
    assert r.exit_code == 1 and "no sandbox" in r.stderr
    r = _kops("sandbox", "down", "--workdir", str(tmp_path), "--output", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["stopped"] == []
    r = _kops("sandbox", "stop", "--workdir", str(tmp_path), "--broker", "1")
    assert r.exit_code == 1 and "no sandbox" in r.stderr


def test_cli_help():
    r = _kops("sandbox", "--help")
    assert r.exit_code == 0
    for cmd in ("up", "down", "status", "stop", "start"):
        assert cmd in r.stdout
    r = _kops("sandbox", "up", "--help")
    assert "--racks" in r.stdout and "--zookeeper-port" in r.stdout and "--mode" in r.stdout


def test_cli_module_imports_stay_light():
    code = (
        "import sys; import kops.cli.sandbox\n"
        "print(','.join(m for m in ('kops.sandbox.cluster', 'kazoo', 'confluent_kafka') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_failure_details_name_a_jvm_crash_as_the_first_error(tmp_path):
    sb = Sandbox(SandboxConfig(workdir=tmp_path))
    out = sb.config.stdout_file("zookeeper")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        "===== kops sandbox: starting at 2026-11-23 12:00:00 =====\n"
        "#\n# A fatal error has been detected by the Java Runtime Environment:\n#\n"
        "#  SIGBUS (0x7) at pc=0x00007faef47d4d68, pid=10472, tid=10473\n#\n"
        "# JRE version:  (17.0.15+6) (build )\n"
    )
    details = sb.failure_details("zookeeper")
    assert details[0] == (
        "first error: A fatal error has been detected by the Java Runtime Environment: "
        "SIGBUS (0x7) at pc=0x00007faef47d4d68, pid=10472, tid=10473"
    )
    assert any("JRE version" in line for line in details)
