"""Growing and shrinking the sandbox (`kops sandbox add / remove`): the configuration part —
broker ids, racks, ports, generated properties, the state file and what another process sees.
Pure: no cluster, no JVM, no container."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kops.errors import BadInput
from kops.sandbox.cluster import Sandbox
from kops.sandbox.opening import attach, open_sandbox
from kops.inputs.properties import parse_properties, render_properties
from kops.sandbox.config import SandboxConfig


def _cfg(tmp_path, **kw) -> SandboxConfig:
    return SandboxConfig(workdir=tmp_path, **kw)


def test_added_broker_is_a_broker_like_the_others(tmp_path):
    cfg = _cfg(tmp_path).with_broker_added(6, "b", 9200)
    assert cfg.broker_ids == [0, 1, 2, 3, 4, 5, 6]
    assert cfg.base_broker_ids == [0, 1, 2, 3, 4, 5]
    assert cfg.rack_map[6] == "b" and cfg.rack_map[0] == "a"
    assert cfg.broker_port(6) == 9200 and cfg.broker_port(5) == 9097
    assert cfg.all_ports()["broker 6 port"] == 9200
    assert cfg.bootstrap_servers.endswith(",127.0.0.1:9097,127.0.0.1:9200")
    props = cfg.broker_properties(6)
    assert props["broker.id"] == "6" and props["broker.rack"] == "b"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9200"
    assert props["log.dirs"] == str(tmp_path / "broker-6" / "data")
    # every other setting exactly as the other brokers have it
    same = {k: v for k, v in cfg.broker_properties(2).items() if k not in ("broker.id", "listeners",
                                                                             "advertised.listeners", "log.dirs")}
    assert {k: props[k] for k in same} == same
    assert cfg.properties_file(6) == tmp_path / "config" / "broker-6.properties"
    # the base ids keep their ports and racks
    assert [cfg.broker_port(b) for b in range(6)] == list(range(9092, 9098))


def test_added_brokers_with_explicit_base_ports_and_ids_out_of_order(tmp_path):
    cfg = _cfg(tmp_path, brokers=3, broker_ports=[20001, 20002, 20003], first_broker_id=10)
    cfg = cfg.with_broker_added(2, "c", 20010).with_broker_added(100, "a", 20011)
    assert cfg.broker_ids == [2, 10, 11, 12, 100]
    assert [cfg.broker_port(b) for b in cfg.broker_ids] == [20010, 20001, 20002, 20003, 20011]
    assert list(cfg.rack_map) == [2, 10, 11, 12, 100]
    assert cfg.rack_map == {2: "c", 10: "a", 11: "b", 12: "c", 100: "a"}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((3, "b", 9200), "broker 3 exists already (rack b, port 9095)"),
        ((-1, "b", 9200), "broker id is >= 0"),
        ((6, "", 9200), "empty rack id"),
        ((6, "a b", 9200), "contains a space"),
        ((6, "x=y", 9200), "contains a space or one of"),
        ((6, "/dc1/r1", 9200), "multi-level racks must all be paths"),
        ((6, "b", 9094), "--port 9094 is the sandbox's broker 2 port already"),
        ((6, "b", 2181), "zookeeper port"),
        ((6, "b", 80), "not a port in 1024..65535"),
    ],
)
def test_add_refuses_bad_input(tmp_path, args, needle):
    with pytest.raises(BadInput) as e:
        _cfg(tmp_path).with_broker_added(*args)
    assert needle in " ".join([e.value.message, *e.value.details])


def test_add_multi_level_racks_need_the_same_depth(tmp_path):
    cfg = _cfg(tmp_path, brokers=4, racks="/dc1/r1,/dc1/r2,/dc2/r1,/dc2/r2")
    assert cfg.with_broker_added(4, "/dc2/r3", 9300).rack_map[4] == "/dc2/r3"
    with pytest.raises(BadInput):
        cfg.with_broker_added(4, "/dc2", 9300)
    with pytest.raises(BadInput):
        cfg.with_broker_added(4, "c", 9300)


def test_kraft_controller_ids_are_not_broker_ids(tmp_path):
    cfg = _cfg(tmp_path, mode="kraft")
    with pytest.raises(BadInput, match="KRaft controller"):
        cfg.with_broker_added(1000, "a", 9300)
    added = cfg.with_broker_added(6, "c", 9300)
    props = added.broker_properties(6)
    assert props["node.id"] == "6" and props["process.roles"] == "broker" and props["broker.rack"] == "c"
    assert props["controller.quorum.voters"] == cfg.quorum_voters


def test_removed_broker_is_gone_and_its_id_can_come_back(tmp_path):
    cfg = _cfg(tmp_path).with_broker_removed(3)
    assert cfg.broker_ids == [0, 1, 2, 4, 5] and 3 not in cfg.rack_map
    assert "broker 3 port" not in cfg.all_ports()
    assert cfg.broker_port(4) == 9096  # the others keep their ports
    with pytest.raises(BadInput, match="no broker 3"):
        cfg.broker_port(3)
    with pytest.raises(BadInput, match="no broker 3"):
        cfg.broker_properties(3)
    with pytest.raises(BadInput, match="no broker 3"):
        cfg.with_broker_removed(3)
    # the id is free again: back (a new broker with that id), on its old port or another one
    back = cfg.with_broker_added(3, "b", 9095)
    assert back.broker_ids == [0, 1, 2, 3, 4, 5] and back.rack_map == _cfg(tmp_path).rack_map
    assert back.all_ports() == _cfg(tmp_path).all_ports()
    assert back.removed_brokers == (3,) and back.extra_brokers == {3: {"rack": "b", "port": 9095}}
    # and out again: both records go
    again = back.with_broker_removed(3)
    assert again.broker_ids == [0, 1, 2, 4, 5] and again.extra_brokers == {}


def test_remove_an_added_broker_and_the_last_one(tmp_path):
    cfg = _cfg(tmp_path, brokers=1).with_broker_added(7, "b", 9300)
    assert cfg.with_broker_removed(7) == _cfg(tmp_path, brokers=1)
    one = cfg.with_broker_removed(0)
    assert one.broker_ids == [7] and one.bootstrap_servers == "127.0.0.1:9300"
    with pytest.raises(BadInput, match="last broker"):
        one.with_broker_removed(7)


def test_validation_of_recorded_membership(tmp_path):
    with pytest.raises(BadInput, match="exists already"):
        _cfg(tmp_path, extra_brokers={2: {"rack": "a", "port": 9300}}).validate()
    with pytest.raises(BadInput, match="not among the first brokers"):
        _cfg(tmp_path, removed_brokers=[9]).validate()
    with pytest.raises(BadInput, match="used twice"):
        _cfg(tmp_path, extra_brokers={6: {"rack": "a", "port": 9300}, 7: {"rack": "b", "port": 9300}}).validate()
    with pytest.raises(BadInput, match="expected"):
        _cfg(tmp_path, extra_brokers={6: {"rack": "a"}})
    with pytest.raises(BadInput, match="at least one broker"):
        _cfg(tmp_path, brokers=1, removed_brokers=[0]).validate()


def test_next_free_port(tmp_path):
    cfg = _cfg(tmp_path)
    assert cfg.next_free_port() == 9098
    assert cfg.next_free_port(lambda p: p in (9098, 9099)) == 9100
    assert cfg.with_broker_added(6, "a", 9098).next_free_port() == 9099
    high = _cfg(tmp_path, brokers=1, base_port=65535, zookeeper_port=2181)
    assert high.next_free_port() == 1024


def test_round_trip_keeps_added_and_removed_brokers(tmp_path):
    cfg = _cfg(tmp_path, racks="/d1/r1,/d1/r1,/d1/r2,/d1/r2,/d2/r1,/d2/r1")
    cfg = cfg.with_broker_removed(1).with_broker_added(6, "/d2/r2", 9300).with_broker_added(1, "/d1/r2", 9301)
    doc = json.loads(json.dumps(cfg.to_dict()))
    assert doc["extra_brokers"] == {"1": {"rack": "/d1/r2", "port": 9301}, "6": {"rack": "/d2/r2", "port": 9300}}
    assert doc["removed_brokers"] == [1]
    assert doc["racks"]["1"] == "/d1/r1"  # the base rack of the id; the added broker's own rack is its entry
    back = SandboxConfig.from_dict(doc)
    assert back == cfg and back.rack_map == cfg.rack_map and back.broker_ids == [0, 1, 2, 3, 4, 5, 6]
    # an older state file without the new keys still loads
    del doc["extra_brokers"], doc["removed_brokers"]
    assert SandboxConfig.from_dict(doc).broker_ids == list(range(6))


def test_state_file_tells_other_processes(tmp_path):
    """A broker added or removed by one process (the CLI) is known to a Sandbox object made
    earlier (a test fixture) at its next operation, and to `attach` and `up`."""
    early = Sandbox(_cfg(tmp_path, zookeeper_port=12345))
    early.state.save()
    other = attach(tmp_path)
    other.config = other.config.with_broker_added(6, "c", 9300).with_broker_removed(0)
    other.state.save()
    assert attach(tmp_path).broker_ids == [1, 2, 3, 4, 5, 6]
    assert early.broker_ids == list(range(6))  # not yet ...
    names = [s.name for s in early.status()]  # ... status reads the state file
    assert names == ["zookeeper", *(f"broker-{b}" for b in (1, 2, 3, 4, 5, 6))]
    assert early.rack_of(6) == "c" and early.broker_port(6) == 9300
    with pytest.raises(BadInput):
        early.stop(broker=0)
    # `up` without flags keeps them; a new broker count starts from a plain shape
    assert open_sandbox(tmp_path).broker_ids == [1, 2, 3, 4, 5, 6]
    assert open_sandbox(tmp_path, brokers=3).broker_ids == [0, 1, 2]
    # a sandbox of another base shape does not take them over
    assert Sandbox(_cfg(tmp_path, brokers=3, zookeeper_port=12345)).broker_ids == [0, 1, 2]


def test_generated_config_of_an_added_broker(tmp_path):
    sb = Sandbox(_cfg(tmp_path))
    sb.config = sb.config.with_broker_added(6, "b", 9300)
    sb._write_configs()
    props = parse_properties((tmp_path / "config" / "broker-6.properties").read_text())
    assert props == parse_properties(render_properties(sb.config.broker_properties(6)))


def test_docker_listeners_of_an_added_broker(tmp_path):
    sb = Sandbox(_cfg(tmp_path, engine="docker"))
    sb.config = sb.config.with_broker_added(6, "b", 9300)
    over = sb.containers.broker_overrides(6)
    assert over["advertised.listeners"] == "INTERNAL://broker-6:9091,EXTERNAL://127.0.0.1:9300"
    assert over["listeners"].endswith("EXTERNAL://0.0.0.0:9300")
    assert "broker-6:9091" in sb.containers.internal_bootstrap


def _kops(*args: str):
    from kops.cli.main import app

    return CliRunner().invoke(app, list(args))


def test_cli_add_remove_bad_input_changes_nothing(tmp_path):
    r = _kops("sandbox", "add", "--workdir", str(tmp_path), "--broker", "6", "--rack", "b")
    assert r.exit_code == 1 and "no sandbox" in r.stderr
    Sandbox(_cfg(tmp_path, zookeeper_port=12345)).state.save()
    before = (tmp_path / "sandbox.json").read_text()
    r = _kops("sandbox", "add", "--workdir", str(tmp_path), "--broker", "2", "--rack", "b")
    assert r.exit_code == 2 and "broker 2 exists already" in r.stderr
    r = _kops("sandbox", "add", "--workdir", str(tmp_path), "--broker", "6", "--rack", "b c")
    assert r.exit_code == 2 and "contains a space" in r.stderr
    r = _kops("sandbox", "add", "--workdir", str(tmp_path), "--broker", "6", "--rack", "b", "--port", "9093")
    assert r.exit_code == 2 and "broker 1 port already" in r.stderr
    r = _kops("sandbox", "remove", "--workdir", str(tmp_path), "--broker", "9")
    assert r.exit_code == 2 and "no broker 9" in r.stderr
    assert (tmp_path / "sandbox.json").read_text() == before
    # a valid add on a sandbox that does not run: nothing to grow (exit 1), nothing recorded
    r = _kops("sandbox", "add", "--workdir", str(tmp_path), "--broker", "6", "--rack", "b")
    assert r.exit_code == 1 and "not running" in r.stderr
    assert attach(tmp_path).broker_ids == list(range(6))
    # removing a stopped broker only forgets it
    r = _kops("sandbox", "remove", "--workdir", str(tmp_path), "--broker", "5", "--output", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["action"] == "remove" and doc["was_running"] is False and doc["brokers"] == [5]
    assert [p["name"] for p in doc["processes"]][-1] == "broker-4"
    assert attach(tmp_path).broker_ids == [0, 1, 2, 3, 4]


def test_cli_help_explains_add_and_remove():
    r = _kops("sandbox", "--help")
    assert "add" in r.stdout and "remove" in r.stdout
    r = _kops("sandbox", "add", "--help")
    assert r.exit_code == 0 and "--broker" in r.stdout and "--rack" in r.stdout and "--port" in r.stdout
    r = _kops("sandbox", "remove", "--help")
    assert r.exit_code == 0 and "--purge" in r.stdout
