"""Tear a sandbox down when its owner process dies (e.g. a test run killed with SIGKILL).

``spawn_watchdog(workdir, owner_pid)`` starts ``python -m kops.sandbox.watchdog OWNER WORKDIR``
detached; it checks every second whether OWNER still runs and, once it is gone, runs
``kops.sandbox.opening.attach(workdir).down()``. The owner stops the watchdog (``stop_watchdog``) when it
tears the sandbox down itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kops.sandbox.procs import alive


def spawn_watchdog(workdir: str | Path, owner_pid: int | None = None) -> int:
    owner = owner_pid or os.getpid()
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    with open(wd / "watchdog.out", "ab") as out:
        p = subprocess.Popen(
            [sys.executable, "-m", "kops.sandbox.watchdog", str(owner), str(wd)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    return p.pid


def stop_watchdog(pid: int) -> None:
    cmd = ""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return
    if "kops.sandbox.watchdog" in cmd:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def main(argv: list[str]) -> int:
    owner, workdir = int(argv[0]), argv[1]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while alive(owner):
        time.sleep(1.0)
    from kops.sandbox import opening

    if opening.exists(workdir):
        sb = opening.attach(workdir, log=lambda m: print(m, flush=True))
        print(f"owner {owner} is gone: stopping the sandbox in {workdir}", flush=True)
        sb.down()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
