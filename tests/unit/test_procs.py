"""kops.sandbox.procs: the sandbox's own processes, told apart from others by /proc."""

from __future__ import annotations

import time

from kops.sandbox import procs


def test_a_spawned_process_is_ours_the_moment_spawn_returns(tmp_path):
    # Popen returns once the child has let go of this process's memory, before the kernel has
    # finished its exec: a process checked then has an empty command line and was taken for one
    # that had exited (seen as "ZooKeeper exited during start-up" under load). spawn waits for the
    # exec. A long command line (a JVM's is) and a large environment widen the window: without
    # the wait, about one spawn in six returned with the command line still empty here.
    marker = str(tmp_path / "marker-arg")
    padding = ["x" * 1000] * 100
    for _ in range(100):
        pid = procs.spawn(["sh", "-c", "sleep 30", marker, *padding], stdout_file=tmp_path / "out", cwd=tmp_path,
                          env={"PADDING": "y" * 100_000})
        try:
            assert procs.cmdline(pid), "spawn returned before the exec finished"
            started = procs.start_time(pid)
            assert procs.is_ours(pid, marker=marker, started=started), procs.why_not_ours(pid, marker=marker, started=started)
        finally:
            procs.terminate([pid], marker=marker, timeout_s=10.0, kill=True)
        assert not procs.is_ours(pid, marker=marker)


def test_why_not_ours_names_a_stranger(tmp_path):
    pid = procs.spawn(["sleep", "30"], stdout_file=tmp_path / "out", cwd=tmp_path)
    try:
        assert "lacks 'elsewhere'" in procs.why_not_ours(pid, marker="elsewhere")
        assert "another process took its pid" in procs.why_not_ours(pid, marker="sleep", started=1)
    finally:
        procs.terminate([pid], marker="sleep", timeout_s=10.0, kill=True)
    deadline = time.monotonic() + 10  # an exiting process loses its command line before it is reaped
    while "has exited" not in (why := procs.why_not_ours(pid, marker="sleep")) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert why.startswith(f"process {pid} has exited"), why
