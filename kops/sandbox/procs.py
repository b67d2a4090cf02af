"""Detached JVM processes: start, identify (is this pid still ours?), signal, wait, reap.

A recorded pid is only ever signalled when ``/proc/<pid>/cmdline`` still mentions the
sandbox's work directory and its start time matches the one recorded at launch, so a reused
pid or someone else's process is never touched.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path

# Popen objects of children started by this Python process, by pid: polled to reap zombies.
_CHILDREN: dict[int, subprocess.Popen] = {}


def spawn(cmd: Sequence[str], *, stdout_file: Path, cwd: Path, env: dict[str, str] | None = None) -> int:
    """Start ``cmd`` detached (own session, no stdin, stdout+stderr appended to ``stdout_file``)."""
    stdout_file.parent.mkdir(parents=True, exist_ok=True)
    with open(stdout_file, "ab") as out:
        out.write(f"\n===== kops sandbox: starting at {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n".encode())
        out.flush()
        p = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(cwd),
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN[p.pid] = p
    _wait_exec(p)
    return p.pid


def _wait_exec(p: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Wait until the child's exec has finished: Popen returns once the child has let go of this
    process's memory, while the kernel may still be setting up the new program, and until then
    /proc/<pid>/cmdline is empty -- a node checked at that moment was taken for one that had
    exited ("ZooKeeper exited during start-up" under load, its JVM running fine)."""
    deadline = time.monotonic() + timeout_s
    while not cmdline(p.pid) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)


def _reap(pid: int) -> None:
    p = _CHILDREN.get(pid)
    if p is not None and p.poll() is not None:
        _CHILDREN.pop(pid, None)


def start_time(pid: int) -> int | None:
    """Process start time (clock ticks since boot, /proc/<pid>/stat field 22), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm may contain spaces/parens: split after the last ')'
    rest = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


def _state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rest = stat[stat.rfind(")") + 2 :].split()
    return rest[0] if rest else None


def alive(pid: int) -> bool:
    """The process runs (exists and is not a zombie)."""
    return _state(pid) not in (None, "Z", "X")


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\x00", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def is_ours(pid: int | None, *, marker: str, started: int | None = None) -> bool:
    """True when ``pid`` runs (not a zombie), its command line contains ``marker`` (our
    work dir / node tag) and, if given, its start time equals ``started``."""
    if not pid:
        return False
    _reap(pid)
    st = _state(pid)
    if st is None or st in ("Z", "X"):
        return False
    if marker not in cmdline(pid):
        return False
    if started is not None and start_time(pid) != started:
        return False
    return True


def why_not_ours(pid: int | None, *, marker: str, started: int | None = None) -> str:
    """Why :func:`is_ours` is false for ``pid`` (for an error message)."""
    if not pid:
        return "no process recorded"
    child = _CHILDREN.get(pid)
    code = child.poll() if child is not None else None
    st = _state(pid)
    if st is None or st in ("Z", "X"):
        return f"process {pid} has exited" + (f" (exit status {code})" if code is not None else "")
    cmd = cmdline(pid)
    if marker not in cmd:
        return f"process {pid} (state {st}) is not ours: its command line lacks {marker!r}: {cmd[:300]!r}"
    if started is not None and start_time(pid) != started:
        return f"process {pid} started at tick {start_time(pid)}, not {started}: another process took its pid"
    return f"process {pid} runs (state {st})"


def signal_pid(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def wait_gone(pids: Iterable[int], *, marker: str, timeout_s: float, poll_s: float = 0.1) -> list[int]:
    """Wait until none of ``pids`` is our running process; return those still running."""
    pending = list(pids)
    deadline = time.monotonic() + timeout_s
    while pending:
        pending = [p for p in pending if is_ours(p, marker=marker)]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    return pending


def terminate(
    pids: Iterable[int], *, marker: str, timeout_s: float, kill: bool = False
) -> tuple[list[int], list[int]]:
    """SIGTERM (or SIGKILL with ``kill``) our processes among ``pids``, wait, then SIGKILL the
    ones still running after ``timeout_s``. Returns (signalled pids, pids that needed SIGKILL)."""
    ours = [p for p in pids if is_ours(p, marker=marker)]
    for p in ours:
        signal_pid(p, signal.SIGKILL if kill else signal.SIGTERM)
    left = wait_gone(ours, marker=marker, timeout_s=timeout_s if not kill else 10.0)
    forced = []
    for p in left:
        if is_ours(p, marker=marker):
            signal_pid(p, signal.SIGKILL)
            forced.append(p)
    if forced:
        wait_gone(forced, marker=marker, timeout_s=10.0)
    return ours, forced


def port_in_use(host: str, port: int) -> bool:
    """Something listens on (host, port)?  (A failed bind also counts.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def _ephemeral_range() -> tuple[int, int]:
    """The range the kernel draws the local ports of outgoing connections from."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def port_range() -> tuple[int, int]:
    """Where :func:`free_ports` draws from: ``$KOPS_PORT_RANGE`` (``LO-HI``, e.g. ``20000-26143``:
    two test processes side by side each get a range of their own, so neither takes a port the
    other chose and has not bound yet), else the 12,288 ports below the kernel's ephemeral range."""
    env = os.environ.get("KOPS_PORT_RANGE")
    if env:
        lo_s, sep, hi_s = env.partition("-")
        if not (sep and lo_s.strip().isdigit() and hi_s.strip().isdigit() and 1024 <= int(lo_s) < int(hi_s) <= 65535):
            raise ValueError(f"KOPS_PORT_RANGE={env!r}: expected LO-HI with 1024 <= LO < HI <= 65535")
        return int(lo_s), int(hi_s)
    hi = _ephemeral_range()[0]
    return max(1024, hi - 12288), hi


#: the ports :func:`free_ports` handed out lately in this process, the oldest first
_handed_out: deque[int] = deque(maxlen=1024)


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports that are free right now, from :func:`port_range` (below the kernel's
    ephemeral range; kept open until all are chosen so they differ).

    Below it because a client that connects again and again to a port of that range where nothing
    listens yet (a probe waiting for ZooKeeper, kazoo retrying through a restart) can be given that
    same port as its own local port and connect to itself, and the server then cannot bind it: seen
    as "ZooKeeper exited during start-up" once in a full test run.

    A port this process handed out lately is taken last (the longest ago first): a port handed out
    is free until its server binds it, so two calls before that could otherwise both hand it out
    (seen as "port 20493 is used twice" in the fault lab), and a port a stopped server left is
    better not given to the next one while clients still know its old address. In a range too
    small for that, such ports are taken again rather than leaving the range. Falls back to the
    kernel's choice if no port of the range is free."""
    import random

    lo, hi = port_range()
    recent = [p for p in _handed_out if lo <= p < hi]
    seen = set(recent)
    fresh = [p for p in random.sample(range(lo, hi), min(max(0, hi - lo), 64 * n + 64 + len(seen))) if p not in seen]
    socks: list[socket.socket] = []
    try:
        for port in [*fresh, *recent]:
            if len(socks) == n:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        while len(socks) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        ports = [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
    for port in ports:
        if port in _handed_out:
            _handed_out.remove(port)
        _handed_out.append(port)
    return ports


def tail(path: Path, lines: int = 30, *, max_bytes: int = 64_000) -> list[str]:
    """Last lines of a text file ([] if missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read().decode(errors="replace")
    except FileNotFoundError:
        return []
    return data.splitlines()[-lines:]
