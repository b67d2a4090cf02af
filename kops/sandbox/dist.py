"""Apache Kafka jars from Maven Central, cached outside the work tree.

``ensure_kafka("3.9.2")`` resolves ``org.apache.kafka:kafka_2.13`` with its runtime
dependencies, ``org.apache.kafka:kafka-tools`` and a logging binding (reload4j for 2.8 - 3.9,
log4j2 for 4.x) with Maven, from a pom shipped in ``kops/sandbox/resources/``, into::

    $KOPS_CACHE_DIR/kafka-<version>/libs/          (default ~/.cache/kops/kafka-<version>/libs)

A marker file says the download completed (with the pom it used); a file lock keeps two
processes from fetching at once; later calls return at once. ``kafka_classpath()`` gives the
``libs/*`` classpath and ``java_tool()`` runs a Kafka command class (``tool_class("reassign",
version)``: Kafka moved them in 3.7) from those jars.

Versions: every Kafka from 2.8 (:data:`OLDEST`) runs, ZooKeeper mode up to 3.9 and KRaft mode
from 3.7 (:data:`OLDEST_KRAFT`); all of them on Java 17.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from kops.cluster import versions
from kops.cluster.versions import line
from kops.errors import BadInput, ClusterError
from kops.paths import cache_root

DEFAULT_VERSION = "3.9.2"
"""The newest patch of the last Kafka line with ZooKeeper mode."""
DEFAULT_KRAFT_VERSION = "4.4.0"
"""The newest Kafka (KRaft only) for ``mode="kraft"``."""

OLDEST = versions.OLDEST
"""The oldest Kafka the sandbox runs (and kops supports: DescribeCluster, KIP-700, came in 2.8)."""
LAST_ZOOKEEPER = (3, 9)
"""The last Kafka line with ZooKeeper mode (removed in 4.0)."""
OLDEST_KRAFT = (3, 7)
"""The oldest Kafka whose KRaft mode the sandbox runs (and the version matrix proves)."""
LOG4J2_SINCE = (4, 0)
"""Kafka 4.0 logs through log4j2 (``log4j2.yaml``); 2.8 - 3.9 through log4j 1.x (reload4j)."""
TOOLS_MOVED = (3, 7)
"""Kafka 3.7 moved the reassign / leader-election / topic commands from ``kafka.admin`` (Scala,
in the broker's jar) to ``org.apache.kafka.tools`` (the kafka-tools jar)."""

BROKER_MAIN = "kafka.Kafka"
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
STORAGE_TOOL = "kafka.tools.StorageTool"

#: Kafka's own command classes, by kops' name for them: (before 3.7, 3.7 and later)
_TOOLS = {
    "reassign": ("kafka.admin.ReassignPartitionsCommand", "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"),
    "leader-election": ("kafka.admin.LeaderElectionCommand", "org.apache.kafka.tools.LeaderElectionCommand"),
    "topic": ("kafka.admin.TopicCommand", "org.apache.kafka.tools.TopicCommand"),
}

_MARKER = ".kops-complete"
_FETCH_TIMEOUT_S = 1800


def release(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a Kafka version such as ``3.9.2`` (BadInput for anything else)."""
    parts = version.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]) or any(
        not p or any(c in p for c in "/\\ ") for p in parts
    ):
        raise BadInput(f"bad Kafka version {version!r}: expected e.g. 3.9.2 or 4.4.0")
    return int(parts[0]), int(parts[1])


def major_version(version: str) -> int:
    return release(version)[0]


def check_version(version: str) -> None:
    """BadInput unless ``version`` is a Kafka version kops supports (2.8 or later)."""
    if release(version) < OLDEST:
        raise BadInput(
            f"Kafka {version} is not supported: the sandbox (and kops) run Kafka {line(OLDEST)} or later "
            f"({versions.DESCRIBE_CLUSTER.kip}: {versions.DESCRIBE_CLUSTER.api} came in {line(OLDEST)})"
        )


def uses_log4j2(version: str) -> bool:
    """Kafka 4.x logs through log4j2; 2.8 - 3.9 through log4j 1.x (reload4j)."""
    return release(version) >= LOG4J2_SINCE


def pom_resource(version: str) -> str:
    """The shipped pom that fits a Kafka version (reload4j for 2.8 - 3.9, log4j2 for 4.x)."""
    return "kafka-log4j2-pom.xml" if uses_log4j2(version) else "kafka-log4j1-pom.xml"


def log4j_resource(version: str, *, tools: bool = False) -> str:
    """The shipped logging configuration of a node (or, ``tools``, of a command) of ``version``."""
    name = "log4j2.yaml" if uses_log4j2(version) else "log4j.properties"
    return f"tools-{name}" if tools else name


def log4j_flag(version: str, config: Path) -> str:
    """The JVM flag that points ``version``'s logging at ``config``."""
    return f"-Dlog4j2.configurationFile={config}" if uses_log4j2(version) else f"-Dlog4j.configuration=file:{config}"


def tool_class(tool: str, version: str) -> str:
    """The main class of Kafka's ``tool`` (``reassign``, ``leader-election``, ``topic``) in
    ``version``'s jars."""
    before, since = _TOOLS[tool]
    return since if release(version) >= TOOLS_MOVED else before


def resource_path(name: str) -> Path:
    """A file in ``kops/sandbox/resources`` (package data)."""
    p = resources.files("kops.sandbox").joinpath("resources", name)
    return Path(str(p))


def kafka_home(version: str = DEFAULT_VERSION) -> Path:
    return cache_root() / f"kafka-{version}"


def libs_dir(version: str = DEFAULT_VERSION) -> Path:
    return kafka_home(version) / "libs"


def _pom_digest(version: str) -> str:
    import hashlib

    return hashlib.sha256(resource_path(pom_resource(version)).read_bytes()).hexdigest()[:16]


def is_cached(version: str = DEFAULT_VERSION) -> bool:
    """The jars of ``version`` are in the cache, fetched with the pom kops ships now (a changed
    pom, e.g. another logging binding, fetches them again)."""
    try:
        marker = (kafka_home(version) / _MARKER).read_text()
    except OSError:
        return False
    return f"pom {_pom_digest(version)}\n" in marker and libs_dir(version).is_dir()


@contextmanager
def file_lock(path: Path, *, timeout_s: float | None = None, what: str = "lock"):
    """An exclusive ``flock`` on ``path`` (created if missing); released on exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() > deadline:
                    raise ClusterError(f"timed out after {timeout_s:.0f}s waiting for the {what} ({path})") from None
                time.sleep(0.2)
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def ensure_kafka(version: str = DEFAULT_VERSION, *, quiet: bool = True, log=None) -> Path:
    """Fetch Kafka ``version`` from Maven Central (once) and return its ``libs`` directory.

    ``log`` is an optional ``callable(str)`` told when a download starts and ends.
    Raises :class:`ClusterError` when Java/Maven are missing or Maven fails (its output tail
    is in the message), :class:`BadInput` for a malformed version.
    """
    check_version(version)
    home = kafka_home(version)
    libs = home / "libs"
    if is_cached(version):
        return libs
    with file_lock(home / ".lock", timeout_s=_FETCH_TIMEOUT_S, what=f"Kafka {version} download"):
        if is_cached(version):  # another process fetched it while we waited
            return libs
        mvn = shutil.which("mvn")
        if not mvn:
            raise ClusterError(
                "Maven (mvn) is not on PATH; the sandbox fetches Kafka's jars from Maven Central with it "
                "(install Maven 3.6+, e.g. apt-get install maven)"
            )
        pom = resource_path(pom_resource(version))
        tmp = home / f"libs.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            *(["-q"] if quiet else []),
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-Dkafka.version={version}",
            f"-DoutputDirectory={tmp}",
        ]
        if log:
            log(f"fetching Apache Kafka {version} from Maven Central into {libs} (once) ...")
        t0 = time.monotonic()
        try:
            # Maven writes target/ next to the pom; keep it out of the package directory.
            with _pom_copy(pom, home) as pom_copy:
                cmd[cmd.index(str(pom))] = str(pom_copy)
                proc = subprocess.run(
                    cmd, cwd=home, capture_output=True, text=True, timeout=_FETCH_TIMEOUT_S, check=False
                )
        except subprocess.TimeoutExpired:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ClusterError(f"Maven did not finish fetching Kafka {version} within {_FETCH_TIMEOUT_S}s") from None
        if proc.returncode != 0 or not any(tmp.glob("kafka_2.13-*.jar")):
            shutil.rmtree(tmp, ignore_errors=True)
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-25:]
            raise ClusterError(
                f"could not fetch Apache Kafka {version} from Maven Central (mvn exit {proc.returncode}); "
                "check the version exists and Maven Central is reachable",
                details=tail,
            )
        shutil.rmtree(libs, ignore_errors=True)
        tmp.rename(libs)
        jars = sorted(p.name for p in libs.glob("*.jar"))
        (home / _MARKER).write_text(
            f"kafka {version}\npom {_pom_digest(version)}\n"
            f"fetched {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
            + "\n".join(jars)
            + "\n"
        )
        if log:
            log(f"fetched {len(jars)} jars in {time.monotonic() - t0:.1f}s")
    return libs


@contextmanager
def _pom_copy(pom: Path, home: Path):
    home.mkdir(parents=True, exist_ok=True)
    dst = home / "pom.xml"
    shutil.copyfile(pom, dst)
    try:
        yield dst
    finally:
        shutil.rmtree(home / "target", ignore_errors=True)


def kafka_classpath(version: str = DEFAULT_VERSION) -> str:
    """The Java classpath of Kafka ``version`` (``<cache>/kafka-<ver>/libs/*``), fetching it if needed."""
    return str(ensure_kafka(version) / "*")


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` if set, else ``java`` on PATH."""
    jh = os.environ.get("JAVA_HOME")
    if jh and (Path(jh) / "bin" / "java").exists():
        return str(Path(jh) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise ClusterError("java is not on PATH (the sandbox needs Java 17: apt-get install openjdk-17-jre-headless)")
    return java


# -- class-data sharing (AppCDS): a dynamic archive of Kafka's classes, dumped once by a broker
# when it exits and mapped by every later JVM of that Kafka version. Cuts JVM start-up CPU, which
# is what a 7-JVM cluster on 2 cores is bound by. Best effort: without an archive nothing changes.
def cds_archive(version: str = DEFAULT_VERSION) -> Path:
    """The archive's path: per Kafka version and per java binary (an archive only fits the JVM
    that wrote it)."""
    import hashlib

    java = os.path.realpath(java_executable())
    st = os.stat(java)
    tag = hashlib.sha1(f"{java}:{st.st_mtime_ns}:{st.st_size}".encode()).hexdigest()[:10]
    return kafka_home(version) / f"cds-{tag}.jsa"


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def cds_flags(version: str = DEFAULT_VERSION, *, may_dump: bool = False) -> tuple[list[str], Path | None]:
    """JVM flags that use the archive, or (``may_dump`` and nobody else is dumping) that dump it at
    exit. Returns (flags, claim file to pass to :func:`cds_claimed` once the pid is known)."""
    if os.environ.get("KOPS_SANDBOX_CDS", "1") in ("0", "false", "no"):
        return [], None
    try:
        arch = cds_archive(version)
    except (OSError, ClusterError):
        return [], None
    if arch.is_file() and arch.stat().st_size > 0 and _archive_usable(arch, version):
        return [f"-XX:SharedArchiveFile={arch}", "-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"], None
    if not may_dump:
        return [], None
    finalize_cds(version)
    claim = arch.with_name(arch.name + ".dumping")
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return [], None
    os.close(fd)
    tmp = arch.with_name(arch.name + ".tmp")
    tmp.unlink(missing_ok=True)
    return [f"-XX:ArchiveClassesAtExit={tmp}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"], claim


def cds_claimed(claim: Path, pid: int) -> None:
    claim.write_text(str(pid))


def finalize_cds(version: str = DEFAULT_VERSION) -> None:
    """After the dumping JVM exited: move its archive into place (or drop a stale claim)."""
    try:
        arch = cds_archive(version)
    except (OSError, ClusterError):
        return
    claim = arch.with_name(arch.name + ".dumping")
    tmp = arch.with_name(arch.name + ".tmp")
    if not claim.exists():
        return
    try:
        pid = int(claim.read_text().strip() or "0")
    except (OSError, ValueError):
        pid = 0
    if pid and _pid_alive(pid):
        return
    if not pid and time.time() - claim.stat().st_mtime < 300:
        return  # claimed a moment ago, the JVM is being launched
    try:
        if tmp.is_file() and tmp.stat().st_size > 0 and verify_cds_archive(tmp, str(libs_dir(version) / "*")):
            os.replace(tmp, arch)
            _stamp(arch).write_text(_stamp_text(arch))
        else:
            tmp.unlink(missing_ok=True)
        claim.unlink(missing_ok=True)
    except OSError:
        pass  # another process finalized it meanwhile; best effort, never fails a stop


def verify_cds_archive(archive: Path, classpath: str, *, timeout_s: float = 60.0) -> bool:
    """Does ``archive`` map and pass its checksums? (``-Xshare:on -XX:+VerifySharedSpaces``: the
    JVM refuses a bad archive instead of using it.) A dumping JVM killed or out of disk space mid-
    write leaves a truncated archive, and a truncated archive crashes every JVM that maps it, even
    under ``-Xshare:auto`` (SIGBUS), so nothing is installed or used unchecked. About 0.2 s."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kops-cds-") as scratch:  # where a crash's hs_err goes
        cmd = [
            java_executable(),
            f"-XX:SharedArchiveFile={archive}",
            "-Xshare:on",
            "-XX:+VerifySharedSpaces",
            "-XX:-CreateCoredumpOnCrash",
            f"-XX:ErrorFile={scratch}/hs_err_%p.log",
            "-cp",
            classpath,
            "-version",
        ]
        try:
            done = subprocess.run(cmd, cwd=scratch, capture_output=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return done.returncode == 0


def _stamp(arch: Path) -> Path:
    return arch.with_name(arch.name + ".verified")


def _stamp_text(arch: Path) -> str:
    st = arch.stat()
    return f"{st.st_size}:{st.st_mtime_ns}\n"


def _archive_usable(arch: Path, version: str) -> bool:
    """The archive was verified as it is now (a stamp written by :func:`finalize_cds`, or a check
    made here once for an archive that has none). A bad archive is deleted, and the next broker
    dumps a new one."""
    stamp = _stamp(arch)
    try:
        if stamp.read_text() == _stamp_text(arch):
            return True
    except OSError:
        pass
    if verify_cds_archive(arch, str(libs_dir(version) / "*")):
        try:
            stamp.write_text(_stamp_text(arch))
        except OSError:
            pass
        return True
    arch.unlink(missing_ok=True)
    stamp.unlink(missing_ok=True)
    return False


TOOL_JVM_FLAGS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")


def java_command(
    main_class: str,
    args: Sequence[str] = (),
    *,
    version: str = DEFAULT_VERSION,
    jvm_flags: Sequence[str] = TOOL_JVM_FLAGS,
    log4j_config: Path | None = None,
) -> list[str]:
    """The ``java ... -cp <libs/*> main_class args`` command line (tools log to stderr, WARN+)."""
    cp = kafka_classpath(version)
    if log4j_config is None:
        log4j_config = resource_path(log4j_resource(version, tools=True))
    log_flag = log4j_flag(version, log4j_config)
    cds = cds_flags(version, may_dump=False)[0]  # map the sandbox's class archive when there is one
    return [java_executable(), *jvm_flags, *cds, log_flag, "-cp", cp, main_class, *map(str, args)]


def java_tool(
    main_class: str,
    args: Sequence[str] = (),
    *,
    version: str = DEFAULT_VERSION,
    jvm_flags: Sequence[str] = TOOL_JVM_FLAGS,
    **kwargs: Any,
) -> subprocess.CompletedProcess:
    """Run a Kafka tool class from the cached jars; ``kwargs`` go to :func:`subprocess.run`.

    Defaults: ``capture_output=True, text=True, check=False, timeout=300``. Example::

        java_tool(tool_class("reassign", version), ["--bootstrap-server", bs, "--verify",
                                  "--reassignment-json-file", "plan.json"])
    """
    kwargs.setdefault("text", True)
    kwargs.setdefault("check", False)
    kwargs.setdefault("timeout", 300)
    if not any(k in kwargs for k in ("stdout", "stderr", "capture_output")):
        kwargs["capture_output"] = True
    cmd = java_command(main_class, args, version=version, jvm_flags=jvm_flags)
    return subprocess.run(cmd, **kwargs)


__all__ = [
    "DEFAULT_VERSION",
    "DEFAULT_KRAFT_VERSION",
    "STORAGE_TOOL",
    "tool_class",
    "release",
    "ensure_kafka",
    "is_cached",
    "java_command",
    "java_tool",
    "kafka_classpath",
    "libs_dir",
]
