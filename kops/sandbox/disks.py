"""Small data disks for sandbox brokers, so that a disk can really fill (``--data-disk ID:SIZE``).

A broker's data dir becomes the mount point of its own ext4 file system of ``SIZE`` MiB: a file
``<node dir>/disk.img`` (made once, ``mkfs.ext4``) loop-mounted on ``<node dir>/data``. The
containerised sandbox mounts the work dir into the containers recursively, so the broker sees a
disk of that size, and Kafka's DescribeLogDirs reports its real total and usable bytes.
:func:`fill` takes the free space down to what is asked (a ``.kops-filler`` file at the root
of the file system, which Kafka ignores: it loads directories only) and :func:`release` gives
it back. With ``--log-dirs N`` every log dir of the broker (``data``, ``data-1``, ...) is a disk
of its own of that size (``disk.img``, ``disk-1.img``, ...: :meth:`SandboxConfig.data_disks`).
Needs root (mount) and util-linux/e2fsprogs, as on Debian.

A disk fails as a real one does with :func:`shut_down`: ext4's shutdown ioctl
(``EXT4_IOC_SHUTDOWN``, what ``xfs_io -x -c shutdown`` does; the file system is synced first),
after which every write, create and fsync on it, also through the containers' view of the same
file system, fails with EIO. (``mount -o remount,ro`` does not do: the kernel refuses it,
"mount point is busy", while a broker holds its segments open for writing.) The shutdown lasts
until the file system is unmounted: :func:`unmount` then :func:`ensure` mounts it afresh
(ext4 replays its journal; the data synced before the shutdown is all there).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

from kops.errors import BadInput, ClusterError

FILLER = ".kops-filler"
MIN_MB = 16
#: next to a mount point (not on its file system): the disk was shut down (:func:`shut_down`)
SHUT_DOWN = ".kops-shut-down"
EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_DEFAULT = 0  # sync (freeze) the file system, then shut it down


def is_mounted(mount_point: Path) -> bool:
    target = str(mount_point.absolute())
    try:
        with open("/proc/self/mounts") as fh:
            return any(line.split()[1] == target for line in fh if len(line.split()) > 1)
    except OSError:
        return False


def _run(cmd: list[str], what: str) -> None:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if p.returncode != 0:
        raise ClusterError(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}",
                           details=(p.stdout + p.stderr).strip().splitlines()[-5:])


def ensure(image: Path, mount_point: Path, size_mb: int) -> None:
    """``mount_point`` is an ext4 file system of ``size_mb`` MiB backed by ``image`` (made and
    mounted when needed; an existing image keeps its data)."""
    if size_mb < MIN_MB:
        raise BadInput(f"a data disk needs at least {MIN_MB} MiB, not {size_mb}")
    if is_mounted(mount_point):
        return
    if os.geteuid() != 0:
        raise ClusterError("small data disks are loop-mounted file systems: that needs root")
    for tool in ("mkfs.ext4", "mount", "losetup"):
        if shutil.which(tool) is None:
            raise ClusterError(f"{tool} is not installed (e2fsprogs / util-linux): needed for --data-disk")
    mount_point.mkdir(parents=True, exist_ok=True)
    if not image.exists():
        if any(mount_point.iterdir()):
            raise BadInput(f"{mount_point} already holds data: a data disk can only be given to a new broker "
                           "(`kops sandbox down --purge` first)")
        with open(image, "wb") as fh:
            fh.truncate(size_mb * 1024 * 1024)
        _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-L", "kops-data", str(image)], "making the data disk")
    _mount_loop(image, mount_point)
    lost = mount_point / "lost+found"
    if lost.is_dir() and not any(lost.iterdir()):
        lost.rmdir()  # Kafka would take it for a log directory it cannot parse


def _mount_loop(image: Path, mount_point: Path) -> None:
    """Mount ``image`` on ``mount_point`` through a loop device of its own. (``mount -o loop``
    would reuse a loop device still attached to the image -- a shut-down disk the containers'
    mount namespaces still hold -- and with it the shut-down file system.) The device is
    released once the file system is unmounted everywhere (``losetup -d`` of a busy device)."""
    p = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True, timeout=60,
                       check=False)
    if p.returncode != 0 or not p.stdout.strip():
        raise ClusterError(f"attaching {image} to a loop device failed (exit {p.returncode})",
                           details=(p.stdout + p.stderr).strip().splitlines()[-5:])
    dev = p.stdout.strip()
    try:
        _run(["mount", dev, str(mount_point)], f"mounting the data disk on {mount_point}")
    finally:
        _run(["losetup", "-d", dev], f"releasing {dev}")  # mounted: detached at the unmount


def unmount(mount_point: Path) -> None:
    """Unmount the disk (lazily: a process still in the dir lets go later); a shutdown ends with it."""
    if is_mounted(mount_point):
        _run(["umount", "-l", str(mount_point)], f"unmounting the data disk on {mount_point}")
    _marker(mount_point).unlink(missing_ok=True)


def _marker(mount_point: Path) -> Path:
    return mount_point.with_name(mount_point.name + SHUT_DOWN)


def is_shut_down(mount_point: Path) -> bool:
    """The mounted disk at ``mount_point`` was shut down (:func:`shut_down`) and not mounted afresh."""
    return _marker(mount_point).exists() and is_mounted(mount_point)


def shut_down(mount_point: Path) -> bool:
    """Make the data disk at ``mount_point`` fail: every write to it fails with EIO from now on
    (see the module doc) until :func:`unmount` and :func:`ensure`. False when it was shut down
    already; BadInput for a dir that is not a mounted data disk."""
    if not is_mounted(mount_point):
        raise BadInput(f"{mount_point} is not a sandbox data disk (start the sandbox with --data-disk ID:SIZE)")
    if is_shut_down(mount_point):
        return False
    fd = os.open(mount_point, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, EXT4_GOING_FLAGS_DEFAULT.to_bytes(4, "little"))
    except OSError as e:
        raise ClusterError(f"shutting down the data disk on {mount_point} failed: {e}",
                           details=["needs root (CAP_SYS_ADMIN) and an ext4 file system (Linux 4.10 or later)"]) from e
    finally:
        os.close(fd)
    _marker(mount_point).write_text("kops sandbox: this data disk was shut down on purpose (every write fails "
                                    "with EIO); unmounting it ends that\n")
    return True


def usage(mount_point: Path) -> tuple[int, int]:
    """(total bytes, free bytes) of the file system at ``mount_point``."""
    st = os.statvfs(mount_point)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def pending_deletes(mount_point: Path) -> list[str]:
    """Kafka's logs of deleted partitions (``<topic>-<p>.<id>-delete``) still on the disk: the
    broker removes them ``log.segment.delete.delay.ms`` after the deletion, and frees their space then."""
    try:
        return sorted(e.name for e in os.scandir(mount_point) if e.name.endswith("-delete"))
    except OSError:
        return []


def fill(mount_point: Path, leave_bytes: int, *, settle_s: float = 120.0) -> int:
    """Take the free space of the data disk down to about ``leave_bytes``; returns the filler's
    size. Only for a mounted data disk (never the machine's own file system). Waits first (at
    most ``settle_s``) until the broker has removed the logs of deleted partitions: space they
    free after the fill would undo it."""
    from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

    if not is_mounted(mount_point):
        raise BadInput(f"{mount_point} is not a sandbox data disk (start the sandbox with --data-disk ID:SIZE)")
    left = Retrying(retry=retry_if_result(bool), stop=stop_after_delay(settle_s), wait=wait_fixed(0.5),
                    retry_error_callback=lambda state: state.outcome.result())(pending_deletes, mount_point)
    if left:
        raise ClusterError(f"the broker has not removed the logs of {len(left)} deleted partition(s) from "
                           f"{mount_point} within {settle_s:.0f} s (e.g. {left[0]}): the disk cannot be filled to "
                           "a size that holds", details=left[:10])
    release(mount_point)
    _total, free = usage(mount_point)
    size = max(0, free - leave_bytes)
    if size:
        with open(mount_point / FILLER, "wb") as fh:
            os.posix_fallocate(fh.fileno(), 0, size)
    return size


def release(mount_point: Path) -> bool:
    """Remove the filler; True if there was one."""
    f = mount_point / FILLER
    if f.exists():
        f.unlink()
        return True
    return False
