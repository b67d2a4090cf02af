"""Topology snapshot files (``--topology FILE``), validated against the published schema."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

from kops.errors import BadInput
from kops.model import Topology


@lru_cache(maxsize=1)
def topology_schema() -> dict:
    return json.loads(resources.files("kops").joinpath("schemas/topology.schema.json").read_text())


def parse_topology(data: object, *, source: str = "topology snapshot") -> Topology:
    """Validate ``data`` against the schema plus the rules a schema cannot say; name every problem."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(topology_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        details = [
            f"{'/'.join(str(x) for x in e.absolute_path) or '(top level)'}: {e.message}" for e in errors[:50]
        ]
        raise BadInput(f"{source} does not match the topology schema", details=details)
    problems: list[str] = []
    ids = [b["id"] for b in data["brokers"]]  # type: ignore[index]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        problems.append(f"brokers {dup} are listed more than once")
    names = [t["name"] for t in data["topics"]]  # type: ignore[index]
    for n in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"topic {n!r} is listed more than once")
    for t in data["topics"]:  # type: ignore[index]
        pids = [p["partition"] for p in t["partitions"]]
        for pid in sorted({p for p in pids if pids.count(p) > 1}):
            problems.append(f"topic {t['name']!r}: partition {pid} is listed more than once")
        for p in t["partitions"]:
            reps = p["replicas"]
            if len(set(reps)) != len(reps):
                problems.append(f"{t['name']}-{p['partition']}: a broker appears twice in replicas {reps}")
    if problems:
        raise BadInput(f"{source} is inconsistent", details=problems)
    topo = Topology.from_dict(data)
    # replicas on brokers the snapshot does not list are on brokers that are down
    known = {b.id for b in topo.brokers}
    missing = sorted({r for p in topo.partitions() for r in p.replicas} - known)
    if missing:
        from dataclasses import replace

        from kops.model import Broker

        topo = replace(topo, brokers=topo.brokers + tuple(Broker(id=b, alive=False) for b in missing))
    return topo


def load_topology(path: str | Path) -> Topology:
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"--topology: file {str(p)!r} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise BadInput(f"--topology {str(p)!r} is not valid JSON: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"--topology: cannot read {str(p)!r}: {e}") from None
    return parse_topology(data, source=f"--topology {str(p)!r}")


def save_topology(topo: Topology, path: str | Path) -> None:
    Path(path).write_text(topo.to_json() + "\n", encoding="utf-8")
