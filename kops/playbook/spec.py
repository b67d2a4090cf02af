"""Playbook files: YAML runbooks, validated completely before anything runs.

A playbook::

    name: rack-maintenance
    description: Move leadership off a rack, wait for the operator, give it back.
    params:
      rack: {type: rack, required: true, help: the rack to maintain}
      timeout: {type: duration, default: 30m}
    steps:
      - {id: gate, type: health_gate}
      - {id: demote, type: demote, rack: "{rack}"}
      - {id: leaders-off, type: wait_for, condition: no_leaders, rack: "{rack}", timeout: 5m}

Every problem is reported with its line number: unknown step types, unknown or missing fields,
bad values, duplicate step ids, references to undeclared parameters or to unknown steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kops.errors import BadInput

PARAM_TYPES = ("str", "int", "bool", "broker", "brokers", "rack", "duration", "bytes", "topic")
_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

# field -> (kind, required). kinds: str, int, bool, duration, bytes, brokers, list, choice:<a|b>, step
_COMMON = {"id": ("str", True), "type": ("str", True), "description": ("str", False)}
STEP_FIELDS: dict[str, dict[str, tuple[str, bool]]] = {
    "health_gate": {"allow": ("list", False), "timeout": ("duration", False), "tolerate_down": ("brokers", False)},
    "plan": {
        "goal": ("choice:rebalance|decommission|add-brokers|drain-rack|replace-broker", True),
        "brokers": ("brokers", False),
        "rack": ("str", False),
        "new_broker": ("int", False),
        "max_moves": ("int", False),
        "max_bytes": ("bytes", False),
    },
    "execute": {
        "plan": ("step", True),
        "throttle": ("bytes", False),
        "max_moves_per_broker": ("int", False),
        "max_moves_in_flight": ("int", False),
        "timeout": ("duration", False),
    },
    "verify": {"plan": ("step", True), "timeout": ("duration", False)},
    "elect": {"election_type": ("choice:preferred|unclean", False), "brokers": ("brokers", False), "rack": ("str", False)},
    "demote": {"broker": ("int", False), "rack": ("str", False)},
    "restore": {"broker": ("int", False), "rack": ("str", False)},
    "wait_for": {
        "condition": ("choice:healthy|no_leaders|brokers_up|brokers_down|in_sync|no_reassignment", True),
        "broker": ("int", False),
        "brokers": ("brokers", False),
        "rack": ("str", False),
        "timeout": ("duration", True),
        "interval": ("duration", False),
        "allow": ("list", False),
    },
    "pause": {"message": ("str", True)},
    "shell": {"command": ("str", True), "timeout": ("duration", False), "allow_failure": ("bool", False)},
    "notify": {"message": ("str", True), "command": ("str", False), "file": ("str", False)},
}


@dataclass(frozen=True)
class ParamSpec:
    name: str
    type: str = "str"
    required: bool = False
    default: Any = None
    help: str = ""


@dataclass(frozen=True)
class StepSpec:
    id: str
    type: str
    fields: dict[str, Any]
    line: int
    description: str = ""


@dataclass(frozen=True)
class Playbook:
    name: str
    description: str
    params: dict[str, ParamSpec]
    steps: tuple[StepSpec, ...]
    source: str
    text: str = field(repr=False, default="")


# -- values -------------------------------------------------------------------------------------
_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]i?[bB]?|[bB])?\s*$")


def parse_duration(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = _DUR.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a duration (e.g. 30, 90s, 5m, 2h)")
    n = float(m.group(1))
    return n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def parse_bytes(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _BYTES.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a byte count (e.g. 10485760, 10MB, 50MiB)")
    unit = (m.group(2) or "b").lower().rstrip("b").rstrip("i")
    return int(float(m.group(1)) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}[unit])


def parse_brokers(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list):
        items = value
    else:
        items = [s for s in str(value).replace(" ", "").split(",") if s]
    try:
        ids = [int(x) for x in items]
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a broker list (e.g. 1,2,3)") from None
    if not ids:
        raise ValueError("empty broker list")
    return ids


def convert(kind: str, value: Any) -> Any:
    """Convert ``value`` to ``kind`` or raise ValueError with the reason."""
    if kind in ("str", "rack", "topic", "step"):
        if not isinstance(value, (str, int)) or isinstance(value, bool) or str(value) == "":
            raise ValueError(f"{value!r} is not a non-empty string")
        return str(value)
    if kind in ("int", "broker"):
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not an integer")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{value!r} is not an integer") from None
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "yes", "1"):
            return True
        if str(value).lower() in ("false", "no", "0"):
            return False
        raise ValueError(f"{value!r} is not true/false")
    if kind == "duration":
        return parse_duration(value)
    if kind == "bytes":
        return parse_bytes(value)
    if kind == "brokers":
        return parse_brokers(value)
    if kind == "list":
        if isinstance(value, str):
            return [s.strip() for s in value.split(",") if s.strip()]
        if not isinstance(value, list):
            raise ValueError(f"{value!r} is not a list")
        return [str(v) for v in value]
    if kind.startswith("choice:"):
        choices = kind.split(":", 1)[1].split("|")
        if str(value) not in choices:
            raise ValueError(f"{value!r} is not one of {', '.join(choices)}")
        return str(value)
    raise ValueError(f"unknown kind {kind}")  # pragma: no cover


# -- loading ------------------------------------------------------------------------------------
def _line(node: Any) -> int:
    return node.start_mark.line + 1 if node is not None and hasattr(node, "start_mark") else 0


def load_playbook(path: str | Path) -> Playbook:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise BadInput(f"playbook {str(p)!r}: cannot read: {e}") from None
    return parse_playbook(text, source=str(p))


def parse_playbook(text: str, *, source: str = "<playbook>") -> Playbook:
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise BadInput(f"{source}{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
    problems: list[str] = []

    def at(node: Any, msg: str) -> None:
        problems.append(f"{source}:{_line(node)}: {msg}")

    if not isinstance(data, dict):
        raise BadInput(f"{source}: a playbook is a mapping with name, params and steps")
    top = {k.value: v for k, v in root.value} if root is not None else {}
    for key in data:
        if key not in ("name", "description", "params", "steps"):
            at(_key_node(root, key), f"unknown top-level field {key!r} (expected name, description, params, steps)")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        at(root, "'name' must be a non-empty string")

    params: dict[str, ParamSpec] = {}
    raw_params = data.get("params") or {}
    if not isinstance(raw_params, dict):
        at(top.get("params"), "'params' must be a mapping of parameter name to its spec")
        raw_params = {}
    pnodes = {k.value: v for k, v in top["params"].value} if "params" in top and raw_params else {}
    for pname, spec in raw_params.items():
        node = pnodes.get(pname)
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            at(node, f"parameter {pname!r}: expected a mapping like {{type: rack, required: true}}")
            continue
        unknown = set(spec) - {"type", "required", "default", "help"}
        if unknown:
            at(node, f"parameter {pname!r}: unknown fields {sorted(map(str, unknown))}")
        ptype = spec.get("type", "str")
        if ptype not in PARAM_TYPES:
            at(node, f"parameter {pname!r}: unknown type {ptype!r} (one of {', '.join(PARAM_TYPES)})")
            continue
        default = spec.get("default")
        if default is not None:
            try:
                convert(ptype, default)
            except ValueError as e:
                at(node, f"parameter {pname!r}: default {e}")
        params[pname] = ParamSpec(pname, ptype, bool(spec.get("required", False)), default, str(spec.get("help", "")))

    steps: list[StepSpec] = []
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        at(top.get("steps", root), "'steps' must be a non-empty list")
        raw_steps = []
    snodes = top["steps"].value if "steps" in top and isinstance(raw_steps, list) else []
    seen: dict[str, int] = {}
    for i, step in enumerate(raw_steps):
        node = snodes[i] if i < len(snodes) else None
        if not isinstance(step, dict):
            at(node, f"step {i + 1}: expected a mapping with id and type")
            continue
        sid, stype = step.get("id"), step.get("type")
        label = f"step {sid!r}" if sid else f"step {i + 1}"
        if not isinstance(sid, str) or not sid:
            at(node, f"{label}: 'id' must be a non-empty string")
            sid = f"#{i + 1}"
        elif sid in seen:
            at(node, f"{label}: duplicate id (first used on line {seen[sid]})")
        seen.setdefault(sid, _line(node))
        if stype not in STEP_FIELDS:
            at(node, f"{label}: unknown step type {stype!r} (known: {', '.join(STEP_FIELDS)})")
            continue
        allowed = {**_COMMON, **STEP_FIELDS[stype]}
        fields: dict[str, Any] = {}
        fnodes = {k.value: k for k, _ in node.value} if node is not None else {}
        for key, value in step.items():
            if key not in allowed:
                at(fnodes.get(key, node), f"{label}: unknown field {key!r} for a {stype} step "
                   f"(allowed: {', '.join(sorted(set(allowed) - {'id', 'type'}))})")
                continue
            if key in _COMMON:
                continue
            kind = allowed[key][0]
            refs = _REF.findall(value) if isinstance(value, str) else []
            for r in refs:
                if r not in params:
                    at(fnodes.get(key, node), f"{label}: field {key!r} uses undeclared parameter {{{r}}}")
            if not refs:
                try:
                    convert(kind, value)
                except ValueError as e:
                    at(fnodes.get(key, node), f"{label}: field {key!r}: {e}")
            if kind == "step" and not refs and value not in seen:
                at(fnodes.get(key, node), f"{label}: field {key!r} refers to step {value!r}, which does not come before it")
            fields[key] = value
        for key, (_kind, required) in STEP_FIELDS[stype].items():
            if required and key not in step:
                at(node, f"{label}: a {stype} step needs {key!r}")
        if stype in ("demote", "restore") and ("broker" in step) == ("rack" in step):
            at(node, f"{label}: give exactly one of 'broker' or 'rack'")
        steps.append(StepSpec(sid, stype, fields, _line(node), str(step.get("description", ""))))

    if problems:
        raise BadInput(f"playbook {source} is invalid ({len(problems)} problem{'s' if len(problems) > 1 else ''})",
                       details=problems)
    return Playbook(name, str(data.get("description", "")), params, tuple(steps), source, text)


def _key_node(root: Any, key: str) -> Any:
    for k, _v in getattr(root, "value", []):
        if getattr(k, "value", None) == key:
            return k
    return root


def bind_params(pb: Playbook, given: dict[str, str]) -> dict[str, Any]:
    """Check and convert ``--param KEY=VALUE`` values; every problem in one error."""
    problems = []
    unknown = sorted(set(given) - set(pb.params))
    for k in unknown:
        problems.append(f"unknown parameter {k!r} (this playbook takes: {', '.join(pb.params) or 'none'})")
    values: dict[str, Any] = {}
    for name, spec in pb.params.items():
        if name in given:
            raw = given[name]
        elif spec.default is not None:
            raw = spec.default
        elif spec.required:
            problems.append(f"missing parameter {name!r} ({spec.type}{': ' + spec.help if spec.help else ''}); "
                            f"pass --param {name}=VALUE")
            continue
        else:
            continue
        try:
            values[name] = convert(spec.type, raw)
        except ValueError as e:
            problems.append(f"parameter {name!r}: {e}")
    if problems:
        raise BadInput(f"bad parameters for playbook {pb.name}", details=problems)
    return values


def resolve_fields(step: StepSpec, params: dict[str, Any]) -> dict[str, Any]:
    """The step's fields with ``{param}`` references substituted and converted to their kinds."""
    kinds = {**{k: v[0] for k, v in STEP_FIELDS[step.type].items()}}
    out: dict[str, Any] = {}
    for key, value in step.fields.items():
        if isinstance(value, str):
            whole = _REF.fullmatch(value)
            if whole and whole.group(1) in params:
                value = params[whole.group(1)]
                if isinstance(value, list) and kinds[key] != "brokers":
                    value = ",".join(str(v) for v in value)
            else:
                value = _REF.sub(lambda m: _fmt(params.get(m.group(1), m.group(0))), value)
        try:
            out[key] = convert(kinds[key], value)
        except ValueError as e:
            raise BadInput(f"step {step.id!r} (line {step.line}): field {key!r}: {e}") from None
    return out


def _fmt(v: Any) -> str:
    return ",".join(str(x) for x in v) if isinstance(v, list) else str(v)
