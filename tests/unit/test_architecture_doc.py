"""docs/architecture.md, the design document, checked against the tree it describes: every part
of the package is in its layer map, every file it names exists, and its "Where to add" section
answers what a newcomer asks first. Each rule also runs on a small wrong document (a rule that
cannot fail checks nothing)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"

#: what a newcomer must be able to find in "Where to add ..." (issue 44's list)
MUST_ANSWER = ("goal", "tracker", "anomaly", "playbook step", "fault kops must survive in the sandbox",
               "fault-lab scenario", "command", "Kafka feature")

_PATH = re.compile(r"[`(\s](?P<p>(?:[\w.-]+/)+[\w.-]+\.(?:py|md|json|sh)|(?:[\w.-]+/)+)(?=[`)\s,:;.])")


def named_paths(text: str) -> set[str]:
    """File and folder paths the document names (``ops/move.py``, ``docs/planner.md``, ``tests/faults/``)."""
    return {m.group("p") for m in _PATH.finditer(text) if not m.group("p").startswith(("http", "/", "<"))}


_BARE = re.compile(r"`(?P<f>[\w-]+\.py)`")
_OWNED = re.compile(r"`(?P<m>(?:[\w]+/)+[\w]+)\.(?P<name>[A-Z]\w*)`")


#: what a run writes (ignored by git): named by the document, absent from a fresh clone
GENERATED = ("build/",)


def missing_paths(text: str, repo: Path) -> list[str]:
    """Named paths found neither from the repository's root nor from the package (``ops/x.py`` is
    ``kops/ops/x.py``), a run's outputs (:data:`GENERATED`) apart; bare module names
    (```kafka_assign.py```) found nowhere in the package; ``sandbox/hosts.Nodes`` whose module
    does not define the name."""
    out = [p for p in named_paths(text) if not p.startswith(GENERATED)
           and not (repo / p).exists() and not (repo / "kops" / p).exists()]
    out += [m.group("f") for m in _BARE.finditer(text) if not any((repo / "kops").rglob(m.group("f")))]
    for m in _OWNED.finditer(text):
        module = repo / "kops" / f"{m.group('m')}.py"
        if not module.exists() or not re.search(rf"^(class|def) {m.group('name')}\b|^{m.group('name')}\b",
                                                module.read_text(), re.M):
            out.append(f"{m.group('m')}.{m.group('name')}")
    return sorted(set(out))


def package_parts(package: Path) -> set[str]:
    """The package's subpackages (``ops/``) and top-level modules (``model.py``)."""
    parts = {f"{p.name}/" for p in package.iterdir() if p.is_dir() and not p.name.startswith("__")}
    parts |= {p.name for p in package.glob("*.py") if not p.name.startswith("__")}
    return parts


def unmapped_parts(text: str, parts: set[str]) -> list[str]:
    """Parts of the package missing from the layer map (the ``kops/`` tree under "## Layers")."""
    tree = text.split("## Layers", 1)[1].split("```")[1]
    mapped = {line.split()[0] for line in tree.splitlines() if line.startswith("  ") and line.strip()}
    return sorted(parts - mapped)


def unanswered(text: str, questions: tuple[str, ...]) -> list[str]:
    section = text.split("## Where to add", 1)[1].split("\n## ", 1)[0]
    bullets = [b for b in section.split("\n- ")[1:]]
    return [q for q in questions if not any(q in b.split("**")[1] for b in bullets if b.startswith("**"))]


def test_the_layer_map_names_every_part_of_the_package():
    assert unmapped_parts(DOC.read_text(), package_parts(REPO / "kops")) == []


def test_every_file_the_design_names_exists():
    text = DOC.read_text()
    assert len(named_paths(text)) > 40
    assert missing_paths(text, REPO) == []


def test_where_to_add_answers_a_newcomers_questions():
    assert unanswered(DOC.read_text(), MUST_ANSWER) == []


def test_the_rules_find_a_wrong_document(tmp_path):
    (tmp_path / "kops" / "ops").mkdir(parents=True)
    (tmp_path / "kops" / "ops" / "move.py").write_text("")
    (tmp_path / "kops" / "model.py").write_text("")
    (tmp_path / "kops" / "sandbox").mkdir()
    doc = """# A design
## Layers

```
kops/
  model.py          the model
  ops/              side effects
```

The move is in `ops/move.py`, the planner in `placement/gone.py` (docs/planner.md), its goals
in `goals.py`; a new engine implements `sandbox/hosts.Nodes`, the move is `ops/move.Move`; a run
writes `build/results.json` (absent here, and not missing: a run's output).

## Where to add ...

- **a planning goal**: somewhere.
- **a command**: in `cli/main.py`.

## Tests
"""
    assert missing_paths(doc, tmp_path) == ["cli/main.py", "docs/planner.md", "goals.py", "ops/move.Move",
                                           "placement/gone.py", "sandbox/hosts.Nodes"]
    assert unmapped_parts(doc, package_parts(tmp_path / "kops")) == ["sandbox/"]
    assert unanswered(doc, ("goal", "command", "anomaly")) == ["anomaly"]
