"""The fault-injection points (kops/ops/failpoints.py): unset, nothing happens; a hold point
keeps the process there until its release file exists."""

from __future__ import annotations

import threading
import time

from kops.ops import failpoints


def test_unset_points_do_nothing(monkeypatch):
    monkeypatch.delenv(failpoints.ENV, raising=False)
    monkeypatch.delenv(failpoints.HOLD_ENV, raising=False)
    failpoints.reach("wave.submitted")  # (returns: no kill, no hold)


def test_a_hold_point_holds_until_its_release_file_exists(monkeypatch, tmp_path):
    release = tmp_path / "release"
    monkeypatch.setenv(failpoints.HOLD_ENV, "wave.submitted")
    monkeypatch.setenv(failpoints.RELEASE_ENV, str(release))
    failpoints.reach("throttles.applied")  # another point: not held
    done = threading.Event()
    t = threading.Thread(target=lambda: (failpoints.reach("wave.submitted"), done.set()), daemon=True)
    t.start()
    assert not done.wait(0.5), "went on without its release"
    release.touch()
    assert done.wait(5), "not released"
    t0 = time.monotonic()
    failpoints.reach("wave.submitted")  # released: goes straight on
    assert time.monotonic() - t0 < 0.5
