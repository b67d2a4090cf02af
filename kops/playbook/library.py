"""Where playbooks are found: files given by path, ``$KOPS_PLAYBOOK_PATH`` (':'-separated
directories), and the playbooks shipped with kops (``playbooks/`` beside the package)."""

from __future__ import annotations

import os
from pathlib import Path

from kops.errors import BadInput
from kops.playbook.spec import Playbook, load_playbook


def search_path() -> list[Path]:
    dirs = [Path(p).expanduser() for p in os.environ.get("KOPS_PLAYBOOK_PATH", "").split(":") if p]
    shipped = Path(__file__).resolve().parents[2] / "playbooks"
    return [d for d in dirs + [shipped] if d.is_dir()]


def available() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in search_path():
        for f in sorted(d.glob("*.y*ml")):
            found.setdefault(f.stem, f)
    return found


def find(name_or_file: str) -> Playbook:
    p = Path(name_or_file).expanduser()
    if p.is_file():
        return load_playbook(p)
    shipped = available()
    if name_or_file in shipped:
        return load_playbook(shipped[name_or_file])
    raise BadInput(
        f"no playbook {name_or_file!r}: not a file, and not one of {', '.join(sorted(shipped)) or 'none'} "
        f"(searched {', '.join(str(d) for d in search_path())})"
    )
