"""The sandbox itself, against the session's real cluster: up state, stop/start of a broker and of
a rack (graceful and --kill) with the ZooKeeper registration checks, status, the CLI.

Every test leaves all brokers running (``finally: start``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kops.sandbox import Sandbox, attach

pytestmark = pytest.mark.cluster


def zk_state(zk_connect: str | None, sandbox=None) -> tuple[dict[int, str | None], int | None]:
    """(broker id -> rack as registered in /brokers/ids, controller id); in KRaft mode (no
    ZooKeeper) the brokers and racks of the cluster metadata and no controller."""
    if zk_connect is None:
        from kops.cluster.config import ClientConfig
        from kops.cluster.connection import Connection

        live = [sandbox.broker_address(s.id) for s in sandbox.status() if s.role == "broker" and s.running]
        with Connection(",".join(live), ClientConfig(), timeout_s=10) as conn:
            desc = conn.describe_cluster()
        return {n.id: n.rack for n in desc.nodes}, None
    from kops.sandbox import probe

    with probe.zk_client(zk_connect) as zk:
        regs = probe.zk_registrations(zk)
        return {b: r.rack for b, r in regs.items()}, probe.zk_controller(zk)


@pytest.fixture
def zk(sandbox):
    """ZooKeeper connect string, or None on a KRaft sandbox."""
    return sandbox.zookeeper_connect


def kops(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kops", *args], capture_output=True, text=True, timeout=timeout)


def by_name(sb: Sandbox) -> dict[str, object]:
    return {s.name: s for s in sb.status()}


def test_up_state(sandbox, bootstrap, zk):
    if not isinstance(sandbox, Sandbox):
        pytest.skip("local JVM sandbox only")
    assert sandbox.broker_ids == [0, 1, 2, 3, 4, 5]
    assert [sandbox.rack_of(b) for b in sandbox.broker_ids] == ["a", "a", "b", "b", "c", "c"]
    assert sandbox.brokers_in_rack("b") == [2, 3]
    assert bootstrap == ",".join(f"127.0.0.1:{sandbox.broker_port(b)}" for b in sandbox.broker_ids)
    racks, ctrl = zk_state(zk, sandbox)
    assert racks == sandbox.racks  # every broker registered with its broker.rack
    assert ctrl in sandbox.broker_ids or (zk is None and ctrl is None)
    st = sandbox.status()
    first = ["zookeeper"] if zk else [f"controller-{c}" for c in sandbox.controller_ids]
    assert [s.name for s in st] == [*first, *(f"broker-{b}" for b in sandbox.broker_ids)]
    assert all(s.alive and s.running and s.pid for s in st)
    if zk:
        assert [s.id for s in st if s.controller] == [ctrl]
    # state persisted for other processes; attach sees the same cluster
    other = attach(sandbox.workdir)
    assert other.bootstrap_servers == bootstrap and other.zookeeper_connect == zk
    assert [s.pid for s in other.status()] == [s.pid for s in st]
    # idempotent up: nothing started twice
    assert other.up().started_now == []
    # Kafka's log files where broker_log_dir says
    for b in sandbox.broker_ids:
        d = sandbox.broker_log_dir(b)
        assert (d / "server.log").is_file() and (d / "state-change.log").exists()
        assert sandbox.broker_data_dir(b).is_dir()
        if zk:
            assert (d / "controller.log").exists()


def test_graceful_stop_and_start_of_the_controller(sandbox, zk):
    _, ctrl = zk_state(zk, sandbox)
    if zk is None:
        ctrl = 1  # KRaft: the controller is a separate process; stop a broker
    assert ctrl is not None
    try:
        assert sandbox.stop(broker=ctrl) == [ctrl]
        racks, new_ctrl = zk_state(zk, sandbox)
        assert ctrl not in racks and len(racks) == len(sandbox.broker_ids) - 1
        if zk:
            assert new_ctrl is not None and new_ctrl != ctrl  # a new controller was elected
        st = by_name(sandbox)[f"broker-{ctrl}"]
        assert not st.alive and not st.running and st.pid is None
        if isinstance(sandbox, Sandbox) and zk:
            log = (sandbox.broker_log_dir(ctrl) / "server.log").read_text()
            assert f"[KafkaServer id={ctrl}] Starting controlled shutdown" in log
            assert sandbox.stop(broker=ctrl) == []  # already stopped: nothing to do
    finally:
        started = sandbox.start(broker=ctrl)
    assert started == [ctrl]
    racks, _ = zk_state(zk, sandbox)
    assert racks == sandbox.racks
    assert by_name(sandbox)[f"broker-{ctrl}"].alive


def test_kill_and_start_a_rack(sandbox, zk):
    rack = "b"
    ids = sandbox.brokers_in_rack(rack)
    before = {s.name: s.pid for s in sandbox.status()}
    try:
        assert sandbox.stop(rack=rack, kill=True) == ids
        racks, ctrl = zk_state(zk, sandbox)
        assert set(racks) == set(sandbox.broker_ids) - set(ids)
        if zk:
            assert ctrl is not None and ctrl not in ids
        st = by_name(sandbox)
        assert all(not st[f"broker-{b}"].alive for b in ids)
        assert all(st[f"broker-{b}"].alive for b in sandbox.broker_ids if b not in ids)
    finally:
        started = sandbox.start(rack=rack)
    assert started == ids
    assert set(zk_state(zk, sandbox)[0]) == set(sandbox.broker_ids)
    after = {s.name: s.pid for s in sandbox.status()}
    assert all(after[f"broker-{b}"] != before[f"broker-{b}"] for b in ids)  # new processes
    assert all(after[n] == before[n] for n in before if n not in {f"broker-{b}" for b in ids})


def test_graceful_stop_of_a_rack(sandbox, zk):
    rack = "c"
    ids = sandbox.brokers_in_rack(rack)
    try:
        assert sandbox.stop(rack=rack) == ids
        racks, ctrl = zk_state(zk, sandbox)
        assert not set(ids) & set(racks) and (ctrl in racks or not zk)
    finally:
        sandbox.start(rack=rack)
    assert set(zk_state(zk, sandbox)[0]) == set(sandbox.broker_ids)


def test_cli_against_the_session_cluster(sandbox, bootstrap):
    if not isinstance(sandbox, Sandbox):
        pytest.skip("local JVM sandbox only")
    wd = str(sandbox.workdir)
    r = kops("sandbox", "status", "--workdir", wd, "--output", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["all_alive"] and doc["bootstrap_servers"] == bootstrap
    assert [p["rack"] for p in doc["processes"] if p["role"] == "broker"] == ["a", "a", "b", "b", "c", "c"]

    r = kops("sandbox", "up", "--workdir", wd, "--output", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["already_running"] is True and doc["started"] == []
    assert doc["zookeeper_connect"] == sandbox.zookeeper_connect

    r = kops("sandbox", "up", "--workdir", wd, "--brokers", "3")
    assert r.returncode == 2 and "different settings" in r.stderr

    r = kops("sandbox", "stop", "--rack", "nope", "--workdir", wd)
    assert r.returncode == 2 and "no rack 'nope'" in r.stderr
    r = kops("sandbox", "stop", "--broker", "99", "--workdir", wd)
    assert r.returncode == 2 and "no broker 99" in r.stderr
    r = kops("sandbox", "start", "--workdir", wd)
    assert r.returncode == 2

    # a stopped broker makes status exit 3 (problems found); start brings it back
    try:
        r = kops("sandbox", "stop", "--broker", "5", "--workdir", wd, "--output", "json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["brokers"] == [5]
        r = kops("sandbox", "status", "--workdir", wd)
        assert r.returncode == 3 and "stopped" in r.stdout
    finally:
        r = kops("sandbox", "start", "--broker", "5", "--workdir", wd)
    assert r.returncode == 0, r.stderr
    assert kops("sandbox", "status", "--workdir", wd).returncode == 0


def test_restart_hook_of_the_local_sandbox(sandbox, zk):
    """`kops sandbox restart --broker N`, the rolling-restart playbook's sandbox hook: a graceful
    stop and a start; the broker registers anew (a new process) and the sandbox is healthy."""
    if not isinstance(sandbox, Sandbox):
        pytest.skip("local JVM sandbox only (the containerised one: tests/faults/test_rolling_restart.py)")
    wd = str(sandbox.workdir)
    pid = by_name(sandbox)["broker-4"].pid
    r = kops("sandbox", "restart", "--broker", "4", "--workdir", wd, "--output", "json")
    try:
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["action"] == "restart" and doc["brokers"] == [4] and doc["was_running"] is True
        now = by_name(sandbox)["broker-4"]
        assert now.alive and now.pid != pid
        assert 4 in zk_state(zk, sandbox)[0]
    finally:
        sandbox.start(broker=4)
    assert kops("sandbox", "status", "--workdir", wd).returncode == 0


def test_add_and_remove_a_broker(sandbox, zk):
    """`kops sandbox add` grows the running cluster by a new broker id in a rack (registered with
    its rack, in the metadata, known to status/stop/start and to another process); `remove`
    stops and forgets it, data kept (an add of the same id brings it back) or purged. The
    session's cluster is left as found."""
    if not isinstance(sandbox, Sandbox) or getattr(sandbox.config, "engine", "jvm") != "jvm":
        pytest.skip("local JVM sandbox only (the containerised one: tests/faults/test_playbook_faults.py)")
    wd = str(sandbox.workdir)
    new = max(sandbox.broker_ids) + 1
    base = list(sandbox.broker_ids)
    try:
        r = kops("sandbox", "add", "--broker", str(new), "--rack", "b", "--workdir", wd, "--output", "json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        port = doc["port"]
        assert doc["brokers"] == [new] and doc["rack"] == "b"
        assert doc["bootstrap_servers"].endswith(f",127.0.0.1:{port}")
        row = next(p for p in doc["processes"] if p["id"] == new)
        assert row["alive"] and row["rack"] == "b" and row["port"] == port
        racks, _ = zk_state(zk, sandbox)
        assert racks.get(new) == "b"  # registered with broker.rack = b (in the metadata: add waited for it)
        # the session's Sandbox object learns it from the state file at its next operation
        assert by_name(sandbox)[f"broker-{new}"].alive
        assert sandbox.brokers_in_rack("b") == [2, 3, new] and sandbox.broker_port(new) == port
        assert attach(wd).broker_ids == [*base, new]
        props = (sandbox.workdir / "config" / f"broker-{new}.properties").read_text()
        assert "broker.rack=b" in props and f":{port}" in props
        # an id in use, a taken port: exit 2, nothing changed
        r = kops("sandbox", "add", "--broker", str(new), "--rack", "c", "--workdir", wd)
        assert r.returncode == 2 and "exists already" in r.stderr
        r = kops("sandbox", "add", "--broker", str(new + 1), "--rack", "c", "--port", str(port), "--workdir", wd)
        assert r.returncode == 2 and "already" in r.stderr
        # stop / start know it
        assert sandbox.stop(broker=new) == [new]
        assert new not in zk_state(zk, sandbox)[0]
        assert sandbox.start(broker=new) == [new]
        # remove, data kept: gone from the cluster and the sandbox; add brings the same data back
        r = kops("sandbox", "remove", "--broker", str(new), "--workdir", wd, "--output", "json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["was_running"] is True
        assert new not in zk_state(zk, sandbox)[0]
        assert f"broker-{new}" not in by_name(sandbox) and sandbox.broker_ids == base  # (status reads the state)
        data = sandbox.config.data_dir(new)
        assert (data / "meta.properties").exists()
        r = kops("sandbox", "status", "--workdir", wd)
        assert r.returncode == 0, r.stdout  # every broker the sandbox knows is alive
        meta = (data / "meta.properties").read_text()
        r = kops("sandbox", "add", "--broker", str(new), "--rack", "b", "--workdir", wd)
        assert r.returncode == 0, r.stderr
        assert zk_state(zk, sandbox)[0].get(new) == "b"
        assert "cluster.id" in meta and (data / "meta.properties").read_text().split("cluster.id")[1] == meta.split("cluster.id")[1]
    finally:
        r = kops("sandbox", "remove", "--broker", str(new), "--purge", "--workdir", wd)
    assert r.returncode == 0, r.stderr
    assert not sandbox.config.node_dir(new).exists()
    assert not (sandbox.workdir / "config" / f"broker-{new}.properties").exists()
    assert set(zk_state(zk, sandbox)[0]) == set(base)
    assert all(s.alive for s in sandbox.status())
    assert sandbox.broker_ids == base
