"""Topology snapshot files (``--topology FILE``), validated against the published schema."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

from kops.inputs import guarded
from kops.model import Topology


@lru_cache(maxsize=1)
def topology_schema() -> dict:
    return json.loads(resources.files("kops").joinpath("schemas/topology.schema.json").read_text())


@guarded
def parse_topology(data: object, *, source: str = "topology snapshot") -> Topology:
    """Validate ``data`` against the schema plus the rules a schema cannot say; name every
    problem with its JSON path (``topics[0].partitions[2].replicas``)."""
    import jsonschema

    from kops.inputs import Problems
    from kops.inputs.files import json_path
    from kops.inputs.values import topic_problem

    problems = Problems(source)
    validator = jsonschema.Draft202012Validator(topology_schema())
    shown: set[tuple[str, str]] = set()
    for e in sorted(validator.iter_errors(data),
                    key=lambda e: [(0, x, "") if isinstance(x, int) else (1, 0, str(x)) for x in e.absolute_path]):
        path = list(e.absolute_path)
        where = json_path(*path) or "(top level)"
        if path[-1:] == ["name"] and path[:1] == ["topics"] and isinstance(e.instance, str):
            message = topic_problem(e.instance) or e.message
        else:
            message = e.message if len(e.message) <= 300 else e.message[:300] + "..."
        if (where, message) not in shown and len(shown) < 200:
            shown.add((where, message))
            problems.add(where, message)
    # what a schema cannot say, over the parts that have the right shape
    doc = data if isinstance(data, dict) else {}
    brokers = [b for b in _list(doc.get("brokers")) if isinstance(b, dict)]
    ids = [b.get("id") for b in brokers if _is_int(b.get("id"))]
    for i in _twice(ids):
        problems.add("brokers", f"broker {i} is listed more than once")
    topics = [(ti, t) for ti, t in enumerate(_list(doc.get("topics"))) if isinstance(t, dict)]
    names = [t.get("name") for _, t in topics if isinstance(t.get("name"), str)]
    for n in _twice(names):
        problems.add("topics", f"topic {n!r} is listed more than once")
    for ti, t in topics:
        parts = [(pi, p) for pi, p in enumerate(_list(t.get("partitions"))) if isinstance(p, dict)]
        pids = [p.get("partition") for _, p in parts if _is_int(p.get("partition"))]
        for pid in _twice(pids):
            problems.add(f"topics[{ti}].partitions", f"{t.get('name')}: partition {pid} is listed more than once")
        for pi, p in parts:
            reps = [r for r in _list(p.get("replicas")) if _is_int(r)]
            if len(set(reps)) != len(reps):
                problems.add(json_path("topics", ti, "partitions", pi, "replicas"),
                             f"{t.get('name')}-{p.get('partition')}: a broker appears twice in replicas {reps}")
    problems.raise_if_any("")
    topo = Topology.from_dict(data)
    # replicas on brokers the snapshot does not list are on brokers that are down
    known = {b.id for b in topo.brokers}
    missing = sorted({r for p in topo.partitions() for r in p.replicas} - known)
    if missing:
        from dataclasses import replace

        from kops.model import Broker

        topo = replace(topo, brokers=topo.brokers + tuple(Broker(id=b, alive=False) for b in missing))
    return topo


def _list(v: object) -> list:
    return v if isinstance(v, list) else []


def _twice(items: list) -> list:
    from collections import Counter

    return sorted(k for k, n in Counter(items).items() if n > 1)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def load_topology(path: str | Path) -> Topology:
    from kops.inputs.files import read_json

    data = read_json(str(path), what="--topology")
    return parse_topology(data, source=f"--topology {path}")
