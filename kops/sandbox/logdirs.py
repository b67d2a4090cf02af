"""A failed log dir of a JBOD broker (``kops sandbox up --log-dirs N``, then ``kops sandbox
fail-log-dir``), for real: Kafka itself finds the dir broken and takes it offline.

Two ways, chosen by :func:`failure_method`:

* a dir that is a disk of its own (``--engine docker --data-disk B:SIZE``: each of broker B's
  log dirs is a loop-mounted ext4 file system, :mod:`kops.sandbox.disks`) fails as a failing
  disk does: the file system is shut down (``EXT4_IOC_SHUTDOWN``, :func:`disks.shut_down`) and
  every write, create and fsync on it fails with EIO from then on, appends to the open segments
  included. (``mount -o remount,ro`` is refused by the kernel, "mount point is busy", while
  the broker holds segments open for writing.) Kafka takes the dir offline at its next write
  there: within 5 s (the high-watermark and recovery-point checkpoints, see below) and at once
  when a partition there takes a write. :func:`restore` unmounts the disk; the broker's restart
  mounts it afresh (ext4 replays its journal; what was synced before the shutdown is there).
  Measured (Kafka 3.9.2, ZooKeeper mode, containers, tests/faults/test_jbod_disk_faults.py, two
  runs): the broker reports the dir offline 1.4 s and 3.9 s after the shutdown (its log:
  "Error while writing to checkpoint file .../replication-offset-checkpoint", "(Input/output
  error)"); the restore (controlled stop, remount, start, every dir online) takes 9.6 s and 6.3 s.
* any other dir: its contents are moved aside to ``<dir>.kops-failed`` and a regular file takes
  the dir's place. The broker's open segment files keep working, but the next file Kafka opens in
  the dir fails with an IOException ("Not a directory"): within 5 s the high-watermark or
  recovery-point checkpoint (the sandbox sets ``log.flush.offset.checkpoint.interval.ms=5000``
  for JBOD), a new segment or a new partition. As a disk vanishing under a running broker (a
  failed mount); it needs no root and works for local JVMs and containers (the work dir is
  mounted into them at the same path). A mount point kops did not make cannot be moved: refused.
  :func:`restore` puts the contents back.

Either way Kafka's LogDirFailureChannel then takes the dir offline:
ReplicaManager.handleLogDirFailure stops its replicas (their partitions lose the broker from
their ISR, leaders move), the broker stays up while it has another online dir (in KRaft mode
the first dir holds the metadata log: its failure stops the broker), and DescribeLogDirs answers
KAFKA_STORAGE_ERROR for the dir. Kafka brings an offline dir back only at a restart: the
restore restarts the broker.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from kops.errors import BadInput, ClusterError

SUFFIX = ".kops-failed"
#: what the regular file in a failed dir's place says
NOTE = ("kops sandbox fail-log-dir: this log dir failed on purpose; its data is in {aside}. "
        "`kops sandbox fail-log-dir --broker {broker} --restore` puts it back and restarts the broker.\n")


#: :func:`failure_method`: the dir's own disk is shut down / the dir's contents are moved aside
SHUT_DOWN_DISK, MOVE_ASIDE = "shut-down-disk", "move-aside"


def failure_method(config: Any, broker: int) -> str:
    """How a log dir of ``broker`` is failed (a :class:`~kops.sandbox.config.SandboxConfig`):
    :data:`SHUT_DOWN_DISK` when each of its log dirs is a disk of its own (``--data-disk``),
    else :data:`MOVE_ASIDE`."""
    return SHUT_DOWN_DISK if broker in config.data_disk_mb else MOVE_ASIDE


def aside(log_dir: Path) -> Path:
    """Where a failed dir's contents are kept (:data:`MOVE_ASIDE`): ``<dir>.kops-failed`` next to it."""
    return log_dir.with_name(log_dir.name + SUFFIX)


def is_failed(log_dir: Path) -> bool:
    from kops.sandbox import disks

    return aside(log_dir).is_dir() or disks.is_shut_down(log_dir)


def fail(log_dir: Path, broker: int, method: str = MOVE_ASIDE) -> bool:
    """Make ``log_dir`` fail by ``method`` (see the module doc); False when it had failed already."""
    from kops.sandbox import disks

    if is_failed(log_dir):
        return False
    if method == SHUT_DOWN_DISK:
        if not disks.is_mounted(log_dir):
            raise ClusterError(f"{log_dir} should be a data disk of its own (--data-disk) but nothing is mounted "
                               f"there: restart the broker (`kops sandbox restart --broker {broker}`)")
        return disks.shut_down(log_dir)
    if method != MOVE_ASIDE:
        raise ValueError(f"failure method {method!r}")
    if disks.is_mounted(log_dir):
        raise BadInput(f"{log_dir} is a mount point kops did not make: it cannot be failed by moving it; "
                       "fail another of the broker's log dirs (--dir)")
    if not log_dir.is_dir():
        raise ClusterError(f"{log_dir} is not a directory: the broker has not created its log dir yet")
    note = log_dir.with_name(log_dir.name + ".kops-note")
    note.write_text(NOTE.format(aside=aside(log_dir), broker=broker))
    os.rename(log_dir, aside(log_dir))
    os.rename(note, log_dir)  # the file in the dir's place: every path under it is "Not a directory"
    return True


def restore(log_dir: Path) -> bool:
    """Undo :func:`fail` of a dir whose broker is stopped: unmount its shut-down disk (the
    broker's next start mounts it afresh) or put its contents back in place; False when it had
    not failed."""
    from kops.sandbox import disks

    if disks.is_shut_down(log_dir):
        disks.unmount(log_dir)
        return True
    if not aside(log_dir).is_dir():
        return False
    if log_dir.is_dir() and not log_dir.is_symlink():
        raise ClusterError(f"{log_dir} is a directory again and {aside(log_dir)} holds the failed dir's data: "
                           "move one of them away by hand")
    log_dir.unlink(missing_ok=True)
    os.rename(aside(log_dir), log_dir)
    return True


class LogDirFaults:
    """The log-dir verbs of ``Sandbox.faults`` (both engines): fail one log dir of a running
    broker and wait until Kafka reports it offline; restore a broker's failed dirs (a restart)."""

    def __init__(self, sandbox: Any):
        self.sb = sandbox  # a kops.sandbox.cluster.Sandbox (not imported: it imports this module's user)

    def offline(self, broker: int, timeout_s: float = 10.0) -> list[str] | None:
        """The log dirs ``broker`` reports offline (DescribeLogDirs); None when it does not answer."""
        from kops.cluster.connection import Connection
        from kops.cluster.topology import offline_log_dirs

        with Connection(self.sb.bootstrap_servers, self.sb.client_config(), timeout_s=timeout_s) as conn:
            got = offline_log_dirs(conn, [broker])
        return None if got is None or broker not in got else got[broker]

    def fail(self, broker: int, index: int | None = None, *, timeout_s: float = 60.0) -> Path:
        """Fail log dir ``index`` (default: the broker's last) of running ``broker``; returns once
        the broker reports it offline (ClusterError after ``timeout_s``). BadInput, nothing done,
        for a broker with one log dir, an index out of range, the dir holding a KRaft broker's
        metadata log or the broker's last online dir (Kafka would stop the broker), or a broker
        that is not running."""
        sb, cfg = self.sb, self.sb.config
        sb.select(broker, None)
        dirs = cfg.data_dirs(broker)
        if len(dirs) == 1:
            raise BadInput(f"broker {broker} has one log dir: Kafka stops a broker whose last log dir fails; start "
                           "the sandbox with `kops sandbox up --log-dirs 2` (JBOD) to fail one of several")
        if index is None:
            index = len(dirs) - 1
        if not 0 <= index < len(dirs):
            raise BadInput(f"--dir {index}: broker {broker} has log dirs 0..{len(dirs) - 1} ({', '.join(map(str, dirs))})")
        if cfg.mode == "kraft" and index == 0:
            raise BadInput(f"--dir 0 of a KRaft broker holds its metadata log ({dirs[0]}): Kafka stops the broker when "
                           "it fails; fail another dir (--dir 1..), or stop the broker (`kops sandbox stop --kill`)")
        online = [d for i, d in enumerate(dirs) if i != index and not is_failed(d)]
        if not online and not is_failed(dirs[index]):
            raise BadInput(f"log dir {index} is broker {broker}'s last online one: Kafka stops a broker without "
                           f"an online log dir; restore the others first (--restore)")
        if not sb.nodes.running(broker):
            raise BadInput(f"broker {broker} is not running: a failed log dir is found by a running broker "
                           f"(`kops sandbox start --broker {broker}` first)")
        target = dirs[index]
        method = failure_method(cfg, broker)
        if fail(target, broker, method):
            how = ("its disk shut down (every write fails with EIO)" if method == SHUT_DOWN_DISK
                   else f"its data moved to {aside(target)}")
            sb.log(f"broker {broker}: log dir {index} ({target}) failed: {how}")
        else:
            sb.log(f"broker {broker}: log dir {index} ({target}) had failed already")
        self._wait(broker, lambda off: str(target) in off, timeout_s,
                   f"broker {broker} to report its log dir {target} offline")
        return target

    def restore(self, broker: int, *, timeout_s: float = 120.0) -> list[Path]:
        """Put every failed log dir of ``broker`` back; a running broker is restarted (Kafka brings
        an offline dir back only at start-up) and the call returns once it reports every dir
        online. Returns the dirs restored (empty: none had failed, nothing done)."""
        sb = self.sb
        sb.select(broker, None)
        failed = [d for d in sb.config.data_dirs(broker) if is_failed(d)]
        if not failed:
            return []
        was_running = bool(sb.nodes.running(broker))
        if was_running:
            sb.stop(broker, timeout_s=timeout_s)
        for d in failed:
            restore(d)
            sb.log(f"broker {broker}: log dir {d} restored")
        if was_running:
            sb.start(broker, timeout_s=timeout_s)
            self._wait(broker, lambda off: not off, timeout_s, f"broker {broker} to report every log dir online")
        return failed

    def _wait(self, broker: int, done: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        last: list[str] | None = None
        while True:
            try:
                last = self.offline(broker, timeout_s=max(1.0, min(10.0, deadline - time.monotonic())))
            except Exception:  # noqa: BLE001 - the broker does not answer now: ask again
                last = None
            if last is not None and done(last):
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"timed out after {timeout_s:.0f} s waiting for {what}; it reports offline: "
                    + ("no answer" if last is None else (", ".join(last) or "none")),
                    details=[f"its log: {self.sb.config.log_dir(broker) / 'server.log'}",
                             f"undo: kops sandbox fail-log-dir --broker {broker} --restore"])
            time.sleep(0.5)


__all__ = ["MOVE_ASIDE", "SHUT_DOWN_DISK", "SUFFIX", "LogDirFaults", "aside", "fail", "failure_method", "is_failed",
           "restore"]
