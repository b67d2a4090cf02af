"""A JBOD sandbox (``kops sandbox up --log-dirs N``) and its failed log dir (``kops sandbox
fail-log-dir``): the configuration, the file-system fault and what the verb refuses -- no
cluster, no JVM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kops.cli.main import app
from kops.errors import BadInput, ClusterError
from kops.model import Broker, LogDir
from kops.sandbox import Sandbox, disks, dist, logdirs
from kops.sandbox.config import SandboxConfig
from kops.sandbox.opening import open_sandbox


def test_one_log_dir_by_default(tmp_path):
    cfg = SandboxConfig(workdir=tmp_path, brokers=3).validate()
    assert cfg.log_dirs == 1
    assert cfg.data_dirs(1) == [tmp_path / "broker-1" / "data"]
    props = cfg.broker_properties(1)
    assert props["log.dirs"] == str(tmp_path / "broker-1" / "data")
    assert "log.flush.offset.checkpoint.interval.ms" not in props  # Kafka's default unless JBOD


@pytest.mark.parametrize("mode", ["zookeeper", "kraft"])
def test_log_dirs_n_in_log_dirs_order(tmp_path, mode):
    cfg = SandboxConfig(workdir=tmp_path, brokers=3, log_dirs=3, mode=mode).validate()
    want = [tmp_path / "broker-2" / d for d in ("data", "data-1", "data-2")]
    assert cfg.data_dirs(2) == want
    assert cfg.data_dir(2) == want[0]  # the first dir is where it always was (data disks, KRaft metadata log)
    props = cfg.broker_properties(2)
    assert props["log.dirs"] == ",".join(map(str, want))
    assert props["log.flush.offset.checkpoint.interval.ms"] == "5000"  # a failed dir is found within 5 s
    if mode == "kraft":  # controllers keep their one metadata dir
        assert cfg.data_dirs(1000) == [tmp_path / "controller-1000" / "data"]
        assert cfg.controller_properties(1000)["log.dirs"] == str(tmp_path / "controller-1000" / "data")


@pytest.mark.parametrize("n", [0, 9, True, "2"])
def test_log_dirs_out_of_range_refused(tmp_path, n):
    with pytest.raises(BadInput, match="--log-dirs"):
        SandboxConfig(workdir=tmp_path, log_dirs=n).validate()


def test_kraft_jbod_needs_kafka_3_7(tmp_path, monkeypatch):
    # the sandbox runs KRaft from 3.7 anyway; were an older KRaft line allowed, JBOD would still be refused
    monkeypatch.setattr(dist, "OLDEST_KRAFT", (3, 5))
    SandboxConfig(workdir=tmp_path, mode="kraft", kafka_version="3.6.2").validate()
    with pytest.raises(BadInput, match=r"needs Kafka 3\.7 or later \(KIP-858"):
        SandboxConfig(workdir=tmp_path, mode="kraft", kafka_version="3.6.2", log_dirs=2).validate()
    SandboxConfig(workdir=tmp_path, mode="kraft", kafka_version="3.7.2", log_dirs=2).validate()
    SandboxConfig(workdir=tmp_path, mode="zookeeper", kafka_version="2.8.2", log_dirs=2).validate()


def test_log_dirs_kept_in_the_state_and_summary(tmp_path):
    sb = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3, log_dirs=2))
    sb.state.save()
    again = open_sandbox(tmp_path)  # `up` (or start/add/restart through attach) without --log-dirs
    assert again.config.log_dirs == 2
    assert SandboxConfig.from_dict(json.loads((tmp_path / "sandbox.json").read_text())["config"]).log_dirs == 2
    b0 = again.to_dict()["brokers"][0]
    assert b0["data_dirs"] == [str(tmp_path / "broker-0" / "data"), str(tmp_path / "broker-0" / "data-1")]
    assert "failed_log_dirs" not in b0
    assert again.broker_data_dirs(0) == [tmp_path / "broker-0" / "data", tmp_path / "broker-0" / "data-1"]


def test_added_broker_gets_as_many_dirs(tmp_path):
    cfg = SandboxConfig(workdir=tmp_path, brokers=3, log_dirs=2).with_broker_added(7, "c", 19999)
    assert cfg.broker_properties(7)["log.dirs"].split(",") == [str(tmp_path / "broker-7" / d) for d in ("data", "data-1")]


def test_fail_and_restore_a_dir(tmp_path):
    d = tmp_path / "broker-1" / "data-1"
    (d / "t-0").mkdir(parents=True)
    (d / "t-0" / "00000000000000000000.log").write_bytes(b"x")
    assert logdirs.fail(d, 1) is True
    assert logdirs.is_failed(d) and d.is_file() and "--restore" in d.read_text()
    with pytest.raises(NotADirectoryError):  # what Kafka's next checkpoint in the dir meets
        open(d / "replication-offset-checkpoint.tmp", "w")
    with pytest.raises(OSError):  # nor can a new partition's dir be made there
        (d / "t-1").mkdir(parents=True)
    assert logdirs.fail(d, 1) is False  # failed already
    assert logdirs.restore(d) is True
    assert (d / "t-0" / "00000000000000000000.log").read_bytes() == b"x"
    assert not logdirs.is_failed(d) and logdirs.restore(d) is False


def test_a_failed_dir_is_in_the_summary(tmp_path):
    sb = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3, log_dirs=2))
    d = sb.config.data_dirs(2)[1]
    d.mkdir(parents=True)
    logdirs.fail(d, 2)
    assert sb.to_dict()["brokers"][2]["failed_log_dirs"] == [str(d)]


@pytest.mark.parametrize(
    ("cfg", "broker", "index", "needle"),
    [
        ({}, 1, None, "has one log dir"),
        ({"log_dirs": 2}, 1, 2, r"--dir 2: broker 1 has log dirs 0\.\.1"),
        ({"log_dirs": 2, "mode": "kraft"}, 1, 0, "metadata log"),
        ({"log_dirs": 2}, 9, None, "no broker 9"),
        ({"log_dirs": 2}, 1, None, "broker 1 is not running"),
    ],
)
def test_fail_log_dir_refusals(tmp_path, cfg, broker, index, needle):
    sb = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3, **cfg))
    with pytest.raises(BadInput, match=needle):
        sb.faults.fail_log_dir(broker, index)
    assert not list(tmp_path.glob(f"broker-*/*{logdirs.SUFFIX}"))  # nothing done


def test_the_last_online_dir_is_refused(tmp_path):
    sb = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3, log_dirs=2))
    first, second = sb.config.data_dirs(0)
    second.mkdir(parents=True)
    logdirs.fail(second, 0)
    with pytest.raises(BadInput, match="last online one"):
        sb.faults.fail_log_dir(0, 0)


def test_restore_without_a_failed_dir_does_nothing(tmp_path):
    sb = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3, log_dirs=2))
    assert sb.faults.restore_log_dirs(1) == []


def test_a_mount_point_kops_did_not_make_is_not_moved_aside(tmp_path, monkeypatch):
    from kops.sandbox import disks

    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setattr(disks, "is_mounted", lambda p: p == d)
    with pytest.raises(BadInput, match="mount point kops did not make"):
        logdirs.fail(d, 1)
    assert d.is_dir()


def test_each_log_dir_of_a_broker_with_data_disks_is_a_disk_of_its_own(tmp_path):
    cfg = SandboxConfig(engine="docker", workdir=tmp_path, brokers=3, log_dirs=3, data_disk_mb={"1": 64}).validate()
    b1 = tmp_path / "broker-1"
    assert cfg.data_disks(1) == [(b1 / "disk.img", b1 / "data"), (b1 / "disk-1.img", b1 / "data-1"),
                                 (b1 / "disk-2.img", b1 / "data-2")]
    assert [m for _i, m in cfg.data_disks(1)] == cfg.data_dirs(1)
    assert cfg.data_disks(0) == []  # no --data-disk: its dirs are on this machine's disk
    assert SandboxConfig.from_dict(cfg.to_dict()).data_disks(1) == cfg.data_disks(1)
    one = SandboxConfig(engine="docker", workdir=tmp_path, brokers=3, data_disk_mb={1: 64}).validate()
    assert one.data_disks(1) == [(b1 / "disk.img", b1 / "data")]  # as before JBOD: the data dir's disk


def test_the_failure_method_follows_the_disks(tmp_path):
    cfg = SandboxConfig(engine="docker", workdir=tmp_path, brokers=3, log_dirs=2, data_disk_mb={1: 64}).validate()
    assert logdirs.failure_method(cfg, 1) == logdirs.SHUT_DOWN_DISK
    assert logdirs.failure_method(cfg, 0) == logdirs.MOVE_ASIDE
    assert logdirs.failure_method(SandboxConfig(workdir=tmp_path, log_dirs=2), 1) == logdirs.MOVE_ASIDE


def test_a_disk_that_is_not_mounted_is_not_failed_another_way(tmp_path):
    d = tmp_path / "broker-1" / "data-1"
    (d / "t-0").mkdir(parents=True)
    with pytest.raises(ClusterError, match="nothing is mounted there"):
        logdirs.fail(d, 1, logdirs.SHUT_DOWN_DISK)
    assert (d / "t-0").is_dir() and not logdirs.is_failed(d)  # not moved aside instead
    with pytest.raises(BadInput, match="not a sandbox data disk"):
        disks.shut_down(d)


def test_a_shut_down_disk_is_failed_until_unmounted(tmp_path, monkeypatch):
    d = tmp_path / "broker-1" / "data-1"
    d.mkdir(parents=True)
    mounted = {d}
    monkeypatch.setattr(disks, "is_mounted", lambda p: p in mounted)
    monkeypatch.setattr(disks, "_run", lambda cmd, what: mounted.discard(Path(cmd[-1])))  # umount -l <dir>
    ioctls = []
    monkeypatch.setattr(disks.fcntl, "ioctl", lambda fd, req, arg: ioctls.append((req, arg)))
    assert logdirs.fail(d, 1, logdirs.SHUT_DOWN_DISK) is True
    assert ioctls == [(disks.EXT4_IOC_SHUTDOWN, b"\0\0\0\0")]  # synced first, then every write fails (EIO)
    assert logdirs.is_failed(d) and disks.is_shut_down(d) and d.is_dir()
    assert logdirs.fail(d, 1, logdirs.SHUT_DOWN_DISK) is False and len(ioctls) == 1  # failed already
    assert logdirs.restore(d) is True  # unmounted: the broker's next start mounts it afresh
    assert d not in mounted and not logdirs.is_failed(d)
    assert not list(d.parent.glob("*" + disks.SHUT_DOWN))
    assert logdirs.restore(d) is False
    mounted.add(d)  # mounted afresh (`up` after `down` too): a new file system, not failed
    assert not logdirs.is_failed(d)


def test_broker_offline_log_dirs():
    b = Broker(id=1, log_dirs=(LogDir("/d/data"), LogDir("/d/data-1", offline=True)))
    assert b.offline_log_dirs == ("/d/data-1",)
    assert Broker(id=2).offline_log_dirs == ()


def test_cli_refusals_exit_2(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["sandbox", "up", "--workdir", str(tmp_path), "--log-dirs", "0"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["sandbox", "fail-log-dir", "--workdir", str(tmp_path), "--broker", "1", "--dir", "1",
                            "--restore"])
    assert r.exit_code == 2 and "leave --dir out" in r.output
    r = runner.invoke(app, ["sandbox", "up", "--workdir", str(tmp_path), "--engine", "docker", "--log-dirs", "2",
                            "--data-disk", "0:8MB"])
    assert r.exit_code == 2 and "a size from 16 MiB" in r.output, r.output
    r = runner.invoke(app, ["sandbox", "up", "--workdir", str(tmp_path), "--log-dirs", "2", "--data-disk", "0:64MB"])
    assert r.exit_code == 2 and "--data-disk needs --engine docker" in r.output, r.output
    assert not list(tmp_path.iterdir())  # nothing started, nothing written
    r = runner.invoke(app, ["sandbox", "up", "--help"])
    assert "--log-dirs" in r.output
