"""The Docker engine the containerised sandbox runs on.

``client()`` connects to ``$DOCKER_HOST`` (or the default socket) and checks that the engine
answers. Where no engine runs, :class:`PrivateDaemon` starts one: Debian's ``dockerd`` (package
``docker.io``) as root with its defaults (overlay2, cgroupfs, bridge + iptables) and its own
``--data-root`` (under the kops cache, so built images are kept between runs), ``--exec-root``
and unix socket; it is stopped by its pid. The test suite and CI use it; an operator with a
running engine never needs it.

No image registry is needed anywhere: every image is built locally (:mod:`kops.sandbox.image`).
testcontainers drives the engine; Ryuk (its reaper container) is disabled because its image
cannot be pulled without a registry: the sandbox removes what it creates itself.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kops.errors import ClusterError
from kops.sandbox.procs import alive


def configure_testcontainers() -> None:
    """Environment testcontainers reads at import: no Ryuk, talk to the engine's own address
    (this host may itself be a container, where testcontainers would guess otherwise)."""
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")


def client(timeout_s: float = 120.0) -> Any:
    """A docker-py client of the engine at ``$DOCKER_HOST`` (default socket otherwise); a
    ClusterError that says how to get one when the engine does not answer."""
    import docker

    try:
        c = docker.from_env(timeout=int(timeout_s))
        c.ping()
        return c
    except Exception as e:  # noqa: BLE001 - docker-py raises several kinds
        where = os.environ.get("DOCKER_HOST") or "the default socket (/var/run/docker.sock)"
        raise ClusterError(
            f"no Docker engine answers at {where}: {e}",
            details=[
                "start one (`dockerd &` as root, or `systemctl start docker`) or point DOCKER_HOST at it;",
                "the test suite starts a private one itself (kops.sandbox.engine.PrivateDaemon)",
            ],
        ) from None


def answers(host: str | None = None) -> bool:
    """Whether an engine answers at ``host`` (default ``$DOCKER_HOST`` / the default socket)."""
    import docker

    try:
        c = docker.DockerClient(base_url=host, timeout=5) if host else docker.from_env(timeout=5)
        try:
            return bool(c.ping())
        finally:
            c.close()
    except Exception:  # noqa: BLE001
        return False


def ensure(root: Path | None = None, *, log=None) -> PrivateDaemon | None:
    """Make sure an engine answers: the one at ``$DOCKER_HOST`` or the default socket, else a
    private dockerd under ``root`` (default ``<kops cache>/docker/engine``), whose address is
    then put in ``$DOCKER_HOST`` for this process and its children. Returns the daemon this call
    started (the caller stops it), or None when one already answered -- also a private dockerd
    of ours that another kops process (another test run, ``kops sandbox up``) started: that one
    is used and left running, since its containers may be that other process's."""
    configure_testcontainers()
    if answers():
        return None
    if os.environ.get("DOCKER_HOST"):
        client()  # raises, naming the address that does not answer
    if root is None:
        from kops.paths import cache_root

        root = cache_root() / "docker" / "engine"
    daemon = PrivateDaemon(Path(root))
    if daemon.running_elsewhere():
        os.environ["DOCKER_HOST"] = daemon.host
        return None
    if log:
        log(f"no Docker engine answers: starting dockerd ({daemon.host}, images kept in {daemon.root})")
    daemon.start()
    os.environ["DOCKER_HOST"] = daemon.host
    return daemon


@dataclass
class PrivateDaemon:
    """A ``dockerd`` of our own. ``root`` keeps its images (``data``) between runs; the exec
    root and the socket live under a short path in /tmp (unix socket paths are limited to 107
    bytes). Stop it with :meth:`stop` (by pid): its containers stop with it."""

    root: Path
    pid: int | None = None

    @property
    def sock(self) -> Path:
        digest = hashlib.sha1(str(self.root.absolute()).encode()).hexdigest()[:10]
        return Path("/tmp") / f"kops-dockerd-{digest}" / "docker.sock"

    @property
    def host(self) -> str:
        return f"unix://{self.sock}"

    @property
    def log_file(self) -> Path:
        return self.root / "dockerd.log"

    def start(self, timeout_s: float = 60.0) -> PrivateDaemon:
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise ClusterError(
                "dockerd is not installed: `apt-get install -y --no-install-recommends docker.io iptables "
                "debootstrap` (Debian) gives the engine the containerised sandbox runs on"
            )
        if os.geteuid() != 0:
            raise ClusterError("dockerd must be started as root (or point DOCKER_HOST at a running engine)")
        exec_root = self.sock.parent
        data_root = self.root / "data"
        pidfile = exec_root / "dockerd.pid"
        exec_root.mkdir(parents=True, exist_ok=True)
        data_root.mkdir(parents=True, exist_ok=True)
        if answers(self.host):  # one of ours from an earlier run still runs: use it
            self.pid = _read_pid(pidfile)
            return self
        stale = _read_pid(pidfile)
        if stale and alive(stale):
            _stop_pid(stale, 20.0)  # an earlier daemon of ours that no longer answers (running_elsewhere: 30 s)
        for leftover in (self.sock, pidfile):
            leftover.unlink(missing_ok=True)
        cmd = [dockerd, "--data-root", str(data_root), "--exec-root", str(exec_root), "--pidfile", str(pidfile),
               "-H", self.host, "--group", "root"]
        with open(self.log_file, "ab") as log:
            p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        self.pid = p.pid
        deadline = time.monotonic() + timeout_s
        while not answers(self.host):
            if p.poll() is not None:
                raise ClusterError(f"dockerd exited at start-up (exit {p.returncode})", details=_tail(self.log_file))
            if time.monotonic() > deadline:
                self.stop()
                raise ClusterError(f"dockerd did not answer within {timeout_s:.0f}s", details=_tail(self.log_file))
            time.sleep(0.2)
        return self

    def running_elsewhere(self, patience_s: float = 30.0) -> bool:
        """A daemon of ours under this root runs already (its pid alive): it answers, if need be
        within ``patience_s`` (a daemon busy with another process's containers may answer a
        ping late; it is not killed as stale for that)."""
        pid = _read_pid(self.sock.parent / "dockerd.pid")
        if not pid or not alive(pid):
            return False
        deadline = time.monotonic() + patience_s
        while not answers(self.host):
            if not alive(pid) or time.monotonic() > deadline:
                return False
            time.sleep(0.5)
        return True

    def stop_if_idle(self, timeout_s: float = 30.0) -> bool:
        """Stop the daemon unless containers still run on it (another sandbox's, another test
        run's: they would die with it); returns whether it was stopped."""
        import docker

        try:
            c = docker.DockerClient(base_url=self.host, timeout=10)
            try:
                busy = c.containers.list()
            finally:
                c.close()
        except Exception:  # noqa: BLE001 - not answering: nothing of anyone's can run on it
            busy = []
        if busy:
            return False
        self.stop(timeout_s)
        return True

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.pid and alive(self.pid):
            _stop_pid(self.pid, timeout_s)
        self.pid = None

    def environ(self) -> dict[str, str]:
        return {"DOCKER_HOST": self.host}


def _read_pid(f: Path) -> int | None:
    try:
        return int(f.read_text().strip())
    except (OSError, ValueError):
        return None


def _stop_pid(pid: int, timeout_s: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _tail(f: Path, n: int = 15) -> list[str]:
    try:
        return f.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []
