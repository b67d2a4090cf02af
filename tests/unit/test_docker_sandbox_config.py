"""The containerised sandbox's pure parts: the Debian mirror from apt sources, fault options,
the listeners of a broker in a container, the reliability table (no engine needed)."""

from __future__ import annotations


import pytest

from kops.errors import BadInput
from kops.inputs.properties import parse_properties
from kops.sandbox.config import SandboxConfig
from kops.sandbox import Sandbox
from kops.sandbox.containers import parse_duration_ms, parse_percent
from kops.sandbox.netfaults import NetworkFaults
from kops.sandbox.image import mirrors_in_apt_sources

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
"""


def test_mirror_from_deb822_sources_skips_security_and_other_suites():
    texts = [("debian.sources", DEB822), ("nodesource.sources",
             "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n")]
    assert mirrors_in_apt_sources(texts) == ["http://deb.debian.org/debian"]


def test_mirror_from_one_line_lists_with_options_and_comments():
    text = ("# deb http://old.example/debian bookworm main\n"
            "deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian/ bookworm main contrib\n"
            "deb-src http://mirror.example/debian bookworm main\n"
            "deb http://mirror.example/debian bookworm-updates main\n")
    assert mirrors_in_apt_sources([("sources.list", text)]) == ["http://mirror.example/debian"]
    assert mirrors_in_apt_sources([("sources.list", "deb cdrom:[x]/ bookworm main\n")]) == []


@pytest.mark.parametrize("text,ms", [("300ms", 300), ("0.3s", 300), ("1s", 1000), ("250", 250), ("0ms", 0)])
def test_durations(text, ms):
    assert parse_duration_ms(text) == pytest.approx(ms)


@pytest.mark.parametrize("text", ["fast", "-5ms", "2h", "nanms", "61s"])
def test_bad_durations(text):
    with pytest.raises(BadInput, match="--delay"):
        parse_duration_ms(text)


def test_percentages():
    assert parse_percent("5%") == 5.0 and parse_percent("0.5") == 0.5
    for bad in ("101%", "-1", "lots"):
        with pytest.raises(BadInput, match="--loss"):
            parse_percent(bad)


def test_a_broker_in_a_container_has_an_internal_and_a_published_listener(tmp_path):
    sb = Sandbox(SandboxConfig(engine="docker", workdir=tmp_path, broker_ports=[19092 + i for i in range(6)],
                                     zookeeper_port=12181))
    o = sb.containers.broker_overrides(2)
    assert o["listeners"] == "INTERNAL://0.0.0.0:9091,EXTERNAL://0.0.0.0:19094"
    assert o["advertised.listeners"] == "INTERNAL://broker-2:9091,EXTERNAL://127.0.0.1:19094"
    assert o["inter.broker.listener.name"] == "INTERNAL"
    assert o["zookeeper.connect"] == "zookeeper:12181"
    assert sb.bootstrap_servers.startswith("127.0.0.1:19092,")
    assert sb.containers.internal_bootstrap.split(",")[0] == "broker-0:9091"
    # the rest of the broker's settings are the JVM sandbox's own (rack, data dir in the work dir)
    props = sb.config.broker_properties(2) | o
    assert props["broker.rack"] == "b" and props["log.dirs"] == str(tmp_path / "broker-2" / "data")
    assert "broker-2" in parse_properties(f"advertised.listeners={o['advertised.listeners']}")["advertised.listeners"]


def test_kraft_brokers_in_containers_reach_the_controllers_by_name(tmp_path):
    sb = Sandbox(SandboxConfig(engine="docker", mode="kraft", workdir=tmp_path, controllers=3))
    o = sb.containers.broker_overrides(0)
    assert o["controller.quorum.voters"] == "1000@controller-1000:9192,1001@controller-1001:9193,1002@controller-1002:9194"
    assert "CONTROLLER:PLAINTEXT" in o["listener.security.protocol.map"] and "zookeeper.connect" not in o


def test_engine_is_checked(tmp_path):
    with pytest.raises(BadInput, match="engine 'podman'"):
        SandboxConfig(engine="podman", workdir=tmp_path).validate()


def test_secured_brokers_in_containers(tmp_path):
    """--security sasl_ssl in containers: both listeners SASL_SSL, the brokers log in to each other
    on INTERNAL as the super user, and the certificate carries the containers' names."""
    from cryptography import x509

    from kops.sandbox import security

    sb = Sandbox(SandboxConfig(engine="docker", security="sasl_ssl", workdir=tmp_path, brokers=3,
                                     racks=("a", "b", "c")))
    sb._write_configs()
    props = parse_properties(sb.config.properties_file(1).read_text())
    assert props["listener.security.protocol.map"] == "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL"
    assert props["inter.broker.listener.name"] == "INTERNAL" and "security.inter.broker.protocol" not in props
    s = security.load_secrets(sb.config.security_files)
    for name in ("internal", "external"):
        assert s.admin_password in props[f"listener.name.{name}.scram-sha-512.sasl.jaas.config"]
    assert (sb.config.properties_file(1).stat().st_mode & 0o777) == 0o600
    pem = sb.config.security_files.broker_pem.read_bytes()
    sans = x509.load_pem_x509_certificates(pem)[0].extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert {"broker-0", "broker-1", "broker-2", "localhost"} <= set(sans.value.get_values_for_type(x509.DNSName))
    ca_before = sb.config.security_files.ca_cert.read_bytes()
    # a broker added later: the broker certificate is issued again by the same CA, with its name
    security.ensure_certificates(sb.config.security_files, "127.0.0.1", names=("broker-0", "broker-7"))
    again = x509.load_pem_x509_certificates(sb.config.security_files.broker_pem.read_bytes())
    assert "broker-7" in again[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert sb.config.security_files.ca_cert.read_bytes() == ca_before
    assert again[0].issuer == x509.load_pem_x509_certificate(ca_before).subject
    # nothing to add: kept as it is
    kept = sb.config.security_files.broker_pem.read_bytes()
    security.ensure_certificates(sb.config.security_files, "127.0.0.1", names=("broker-7",))
    assert sb.config.security_files.broker_pem.read_bytes() == kept


def test_data_disks_are_checked_and_kept_with_their_broker(tmp_path):
    cfg = SandboxConfig(engine="docker", workdir=tmp_path, data_disk_mb={"5": 256}).validate()
    assert cfg.data_disk_mb == {5: 256}
    assert SandboxConfig.from_dict(cfg.to_dict()).data_disk_mb == {5: 256}
    with pytest.raises(BadInput, match="needs --engine docker"):
        SandboxConfig(workdir=tmp_path, data_disk_mb={5: 256}).validate()
    with pytest.raises(BadInput, match=r"brokers \[9\]"):
        SandboxConfig(engine="docker", workdir=tmp_path, data_disk_mb={9: 256}).validate()
    with pytest.raises(BadInput, match="from 16 MiB"):
        SandboxConfig(engine="docker", workdir=tmp_path, data_disk_mb={5: 8}).validate()
    with pytest.raises(BadInput, match="data disk of its own"):
        cfg.with_broker_removed(5)


def test_fault_verbs_keep_what_another_process_wrote_to_the_state_file(tmp_path, monkeypatch):
    """A long-lived sandbox object (a test's, a game-day script's) must not write back what it
    remembers: a `kops sandbox restart` hook ran in another process in between and gave a broker
    a new container; a fault set by one object is healed by another that never saw it. Whether
    the broker runs is asked of the state as it is now, not as the object remembers it (the
    whole suite's run of the fault lab found a stale check refusing a running rack)."""
    from kops.sandbox.nodes import read_state

    from kops.sandbox.containers import ContainerNodes

    monkeypatch.setattr(NetworkFaults, "apply", lambda self: None)  # no engine here
    # running: the container the state file names now (the restarted one), as the engine says
    monkeypatch.setattr(ContainerNodes, "running", lambda self, node: self.state.procs.get(
        self.state.key(node), {}).get("container") == "after-restart")
    cfg = SandboxConfig(engine="docker", workdir=tmp_path)
    here, there = Sandbox(cfg), Sandbox(cfg)
    here.state.procs = {"broker-0": {"container": "before-restart"}}
    here.state.save()
    there.state.load()
    here.state.procs = {"broker-0": {"container": "after-restart"}}
    here.state.save()
    assert there.faults.slow(broker=0, delay_ms=300, loss_pct=5) == [0]
    doc = read_state(tmp_path)
    assert doc["processes"]["broker-0"]["container"] == "after-restart"
    assert [f["kind"] for f in doc["faults"]] == ["slow"]
    assert here.faults.heal() == 1
    doc = read_state(tmp_path)
    assert "faults" not in doc and doc["processes"]["broker-0"]["container"] == "after-restart"


def test_fault_verbs_refuse_a_sandbox_they_cannot_act_on(tmp_path):
    """Every fault verb on a sandbox of local JVMs says which flag it needs and does nothing; the
    brokers a verb hits are chosen as stop/start choose them; a KRaft sandbox has no ZooKeeper."""
    jvm = Sandbox(SandboxConfig(workdir=tmp_path / "jvm"))
    verbs = [lambda f: f.partition(broker=0), lambda f: f.slow(rack="a", delay_ms=10), lambda f: f.heal(),
             lambda f: f.fill_disk(0, leave_bytes=1), lambda f: f.release_disk(0), lambda f: f.disk_usage(0),
             lambda f: f.stop_node("zookeeper"), lambda f: f.start_node("zookeeper"),
             lambda f: f.restart_zookeeper(), lambda f: f.slow_node(1000, delay_ms=10),
             lambda f: f.cut_host()]
    for verb in verbs:
        with pytest.raises(BadInput, match="--engine docker"):
            verb(jvm.faults)
    assert not (tmp_path / "jvm" / "sandbox.json").exists()
    docker = Sandbox(SandboxConfig(engine="docker", workdir=tmp_path / "docker"))
    with pytest.raises(BadInput, match="exactly one of"):
        docker.faults.partition(broker=0, rack="a")
    with pytest.raises(BadInput, match="exactly one of"):
        docker.faults.slow(delay_ms=10)
    with pytest.raises(BadInput, match="only a KRaft sandbox has controllers"):
        docker.faults.slow_node(1000, delay_ms=10)
    kraft = Sandbox(SandboxConfig(engine="docker", mode="kraft", workdir=tmp_path / "kraft"))
    with pytest.raises(BadInput, match="no ZooKeeper"):
        kraft.faults.restart_zookeeper()


def test_a_fault_aimed_at_a_stopped_node_is_an_error_not_a_silent_skip(tmp_path, monkeypatch):
    """A network fault on a broker that is not running would not bite: refused, nothing
    recorded. A command in a container that is not running did not run: with ``check`` an error,
    without it a non-zero code (a readiness probe keeps waiting instead of taking it for up)."""
    from types import SimpleNamespace

    from kops.errors import ClusterError
    from kops.sandbox.containers import NOT_RUNNING, ContainerNodes
    from kops.sandbox.nodes import read_state

    applied = []
    monkeypatch.setattr(NetworkFaults, "apply", lambda self: applied.append(1))
    monkeypatch.setattr(ContainerNodes, "running", lambda self, node: node != 1)
    sb = Sandbox(SandboxConfig(engine="docker", workdir=tmp_path))
    sb.state.save()
    with pytest.raises(BadInput, match=r"brokers \[1\] are not running"):
        sb.faults.partition(broker=1)
    with pytest.raises(BadInput, match=r"brokers \[1\] are not running"):
        sb.faults.slow(rack=sb.rack_of(1), delay_ms=100)
    assert applied == [] and "faults" not in read_state(tmp_path)
    assert sb.faults.slow(broker=0, delay_ms=100) == [0] and applied == [1]

    nodes = sb.containers
    monkeypatch.setattr(ContainerNodes, "_container", lambda self, node: SimpleNamespace(status="exited"))
    with pytest.raises(ClusterError, match="is not running"):
        nodes.exec(2, ["iptables", "-F"])
    assert nodes.exec(2, ["nc", "-z", "127.0.0.1", "9092"], check=False) == (NOT_RUNNING, "")
    monkeypatch.setattr(ContainerNodes, "_container", lambda self, node: None)
    assert nodes.exec(2, ["true"], check=False)[0] == NOT_RUNNING


def test_a_host_cut_drops_the_host_on_every_node_and_nothing_between_nodes(tmp_path, monkeypatch):
    """cut_host: every running node (brokers and ZooKeeper) drops what comes from or goes to the
    host (the network's gateway), and no node drops another node; a rack partition drops
    between nodes. heal removes both."""
    from kops.sandbox.containers import ContainerNodes

    set_rules: dict = {}
    monkeypatch.setattr(ContainerNodes, "running", lambda self, node: True)
    monkeypatch.setattr(ContainerNodes, "ip", lambda self, node: f"10.9.0.{self.state.key(node)}")
    monkeypatch.setattr(ContainerNodes, "gateway", lambda self: "10.9.0.1")
    monkeypatch.setattr(NetworkFaults, "_set_rules",
                        lambda self, node, drops, delay, loss: set_rules.__setitem__(self.state.key(node), drops))
    sb = Sandbox(SandboxConfig(engine="docker", workdir=tmp_path))
    sb.state.save()
    sb.faults.cut_host()
    gateway = [["-s", "10.9.0.1", "-j", "DROP"], ["-d", "10.9.0.1", "-j", "DROP"]]
    nodes = [sb.state.key(n) for n in sb.state.nodes()]
    assert "zookeeper" in nodes and len(nodes) == 7
    assert set(set_rules) == set(nodes) and all(set_rules[n] == gateway for n in nodes)
    assert sb.faults.heal() == 1 and all(r == [] for r in set_rules.values())
    sb.faults.partition(rack="a")
    cut = [sb.state.key(b) for b in sb.brokers_in_rack("a")]
    assert all(r and all(rule[1] != "10.9.0.1" for rule in r) for n, r in set_rules.items() if n in cut)
