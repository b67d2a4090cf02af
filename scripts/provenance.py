"""Which code a generated doc or a results file describes: the newest commit that changed the
paths it depends on (a docs-only commit after a run does not make it stale), marked ``-dirty``
when those paths have changes not committed yet; and a fingerprint of those paths' content
(:func:`code_id`), the same in any clone of the same code, a shallow one too (where the commit
that last changed them may not be there to name). Used by scripts/compat_report.py,
scripts/reliability.py and the fault suite's ``record`` fixture."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIRTY = "-dirty"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def code_commit(*paths: str) -> str:
    """The newest commit that changed ``paths`` (short hash), with :data:`DIRTY` appended when
    the work tree has uncommitted changes under them."""
    commit = _git("log", "-1", "--format=%h", "--", *paths)
    if _git("status", "--porcelain", "--", *paths):
        commit += DIRTY
    return commit


def code_id(rev: str, *paths: str) -> str:
    """A fingerprint of ``paths`` as they are at ``rev`` (their git tree and blob ids): equal for
    equal content, whatever the history a clone holds; "?" when ``rev`` is not in this clone."""
    ids = [f"{p} {_git('rev-parse', f'{rev}:{p}')}" for p in paths]
    if any(i.endswith(" ?") for i in ids):
        return "?"
    return hashlib.sha1("\n".join(ids).encode()).hexdigest()[:12]
