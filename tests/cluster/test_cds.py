"""The sandbox's class-data-sharing archive (kops/sandbox/dist.py) with a real JVM and Kafka's jars:
a truncated archive -- what a dumping broker killed mid-write or out of disk space leaves -- crashes
every JVM that maps it, so it is never installed and never used."""

from __future__ import annotations

import subprocess

import pytest

from kops.sandbox import dist


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """A real dynamic archive of Kafka's classes (a JVM that ran ``kafka.Kafka --version``)."""
    cp = str(dist.ensure_kafka() / "*")
    path = tmp_path_factory.mktemp("cds") / "dumped.jsa"
    subprocess.run(
        [dist.java_executable(), f"-XX:ArchiveClassesAtExit={path}", "-Xlog:cds=off", "-cp", cp, "kafka.Kafka", "--version"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return path, cp


def _kafka_version_with(flags: list[str], cp: str, cwd) -> subprocess.CompletedProcess:
    """``kafka.Kafka --version`` in ``cwd`` (where a crashed JVM writes its hs_err file)."""
    return subprocess.run(
        [dist.java_executable(), *flags, "-XX:-CreateCoredumpOnCrash", "-cp", cp, "kafka.Kafka", "--version"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_verify_tells_a_whole_archive_from_a_truncated_one(archive, tmp_path):
    whole, cp = archive
    assert dist.verify_cds_archive(whole, cp)
    cut = tmp_path / "cut.jsa"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    assert not dist.verify_cds_archive(cut, cp)
    # why it matters: -Xshare:auto does not save a JVM from a truncated archive
    crashed = _kafka_version_with([f"-XX:SharedArchiveFile={cut}", "-Xshare:auto", "-Xlog:cds=off"], cp, tmp_path)
    assert crashed.returncode != 0, crashed.stdout


def test_a_truncated_archive_is_not_installed_nor_used_and_a_whole_one_is(archive, tmp_path, monkeypatch):
    whole, cp = archive
    arch = tmp_path / "cds-test.jsa"
    monkeypatch.setattr(dist, "cds_archive", lambda version=dist.DEFAULT_VERSION: arch)
    monkeypatch.delenv("KOPS_SANDBOX_CDS", raising=False)
    claim, tmp = arch.with_name(arch.name + ".dumping"), arch.with_name(arch.name + ".tmp")

    # an archive left by an earlier run, truncated and never checked: deleted, not used
    arch.write_bytes(whole.read_bytes()[:1_000_000])
    assert dist.cds_flags(may_dump=False) == ([], None)
    assert not arch.exists()

    # a dump whose JVM died mid-write: finalize drops it
    tmp.write_bytes(whole.read_bytes()[:1_000_000])
    claim.write_text(str(_dead_pid()))
    dist.finalize_cds()
    assert not arch.exists() and not tmp.exists() and not claim.exists()

    # a whole dump: installed, checked once (the stamp), then used by the next JVM, which starts
    tmp.write_bytes(whole.read_bytes())
    claim.write_text(str(_dead_pid()))
    dist.finalize_cds()
    assert arch.is_file() and not tmp.exists() and not claim.exists()
    flags, claimed = dist.cds_flags(may_dump=False)
    assert claimed is None and f"-XX:SharedArchiveFile={arch}" in flags
    started = _kafka_version_with(flags, cp, tmp_path)
    assert started.returncode == 0 and dist.DEFAULT_VERSION in started.stdout, started.stdout + started.stderr
