"""Broker capacities from a capacity file in Cruise Control's format, so that operators reuse the
file they have (``config/capacity.json``, ``capacityJBOD.json``, ``capacityCores.json``)::

    {"brokerCapacities": [
      {"brokerId": "-1", "capacity": {"DISK": "500000", "CPU": "100", "NW_IN": "50000", "NW_OUT": "50000"},
       "doc": "the default: every broker without an entry of its own"},
      {"brokerId": "3", "capacity": {"DISK": {"/data1": "250000", "/data2": "250000"},
                                     "CPU": {"num.cores": "16"}, "NW_IN": "100000", "NW_OUT": "100000"}}
    ]}

Units are Cruise Control's: DISK in MB, NW_IN / NW_OUT in KB per second, CPU in percent (or
``{"num.cores": N}``); kops reads MB as 2^20 bytes and KB as 2^10 bytes, as Cruise Control
computes. A JBOD DISK entry (log dir -> MB) counts the sum of its dirs. Numbers may be JSON
strings (Cruise Control's own files quote them) or numbers. Every problem of the file is reported
at once (exit 2), with its JSON path.
"""

from __future__ import annotations

from typing import Any

from kops.inputs import Problems, guarded
from kops.inputs import values
from kops.inputs.files import json_path, read_json

MIB = 1 << 20
KIB = 1 << 10
_UNITS = {"DISK": MIB, "NW_IN": KIB, "NW_OUT": KIB, "CPU": 1}
_FIELDS = {"DISK": "disk_bytes", "NW_IN": "nw_in_bytes_per_s", "NW_OUT": "nw_out_bytes_per_s", "CPU": "cpu"}


def read_capacity_file(path: str, *, option: str = "--capacity-file"):
    """``{broker id: Capacity}`` from the file at ``path`` (-1: the default entry)."""
    return parse_capacities(read_json(path, what=option), source=f"{option} {path}")


@guarded
def parse_capacities(data: Any, *, source: str):
    from kops.model import RESOURCES, Capacity

    problems = Problems(source)
    entries = data.get("brokerCapacities") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        problems.add("", 'expected {"brokerCapacities": [...]} (Cruise Control\'s capacity file)')
        raise problems.error()
    out: dict[int, Capacity] = {}
    for i, e in enumerate(entries):
        where = json_path("brokerCapacities", i)
        if not isinstance(e, dict):
            problems.add(where, "not an object")
            continue
        try:
            broker = values.integer(e.get("brokerId"), lo=-1, what="a broker id")
        except values.Invalid as err:
            problems.add(json_path("brokerCapacities", i, "brokerId"), str(err))
            continue
        if broker in out:
            problems.add(json_path("brokerCapacities", i, "brokerId"), f"broker {broker} has two entries")
            continue
        cap = e.get("capacity")
        if not isinstance(cap, dict):
            problems.add(json_path("brokerCapacities", i, "capacity"), "missing or not an object")
            continue
        figures: dict[str, Any] = {}
        before = len(problems)
        for key, value in cap.items():
            at = json_path("brokerCapacities", i, "capacity", key)
            if key not in RESOURCES:
                problems.add(at, f"unknown resource (Cruise Control's are {', '.join(RESOURCES)})")
                continue
            n = _figure(key, value, at, problems)
            if n is not None:
                figures[_FIELDS[key]] = int(n) if key == "DISK" else n
        if len(problems) > before:
            continue
        out[broker] = Capacity(**figures, source={k: "capacity file" for k in RESOURCES if _FIELDS[k] in figures})
    if not entries:
        problems.add("brokerCapacities", "no entry (give at least the default one, brokerId -1)")
    problems.raise_if_any()
    return out


def _figure(key: str, value: Any, at: str, problems: Problems) -> float | None:
    """One resource's capacity in kops' units (bytes, bytes/s, CPU as given)."""
    unit = _UNITS[key]
    if key == "DISK" and isinstance(value, dict):  # JBOD: log dir -> MB
        if not value:
            problems.add(at, "no log dir listed")
            return None
        total = 0.0
        for d, mb in value.items():
            n = _number(mb, json_path(at, d) if d.isidentifier() else f"{at}[{d!r}]", problems)
            if n is None:
                return None
            total += n
        return total * unit
    if key == "CPU" and isinstance(value, dict):
        if set(value) != {"num.cores"}:
            problems.add(at, 'expected a percentage or {"num.cores": N}')
            return None
        return _number(value["num.cores"], json_path(at, "num.cores"), problems)
    n = _number(value, at, problems)
    return None if n is None else n * unit


def _number(value: Any, at: str, problems: Problems) -> float | None:
    try:
        n = values.number(value, lo=0, hi=float(values.INT64_MAX), what="a number")
    except values.Invalid as err:
        problems.add(at, str(err))
        return None
    return n
