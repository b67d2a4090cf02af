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

A ``for_each`` step repeats its ``steps`` once per broker (``{broker}`` in them is that broker):
the brokers of ``rack``, the ``brokers`` listed, or every broker; in a safe order by default
(rack by rack, the active controller last). The loop is expanded when the run starts, so the
state file, ``--resume`` and ``--dry-run`` see ordinary steps (``<loop id>.<broker>.<step id>``)::

      - id: each
        type: for_each
        rack: "{rack}"
        steps:
          - {id: demote, type: demote, broker: "{broker}"}
          - {id: restart, type: restart, broker: "{broker}", command: "{restart_command}"}

Every problem is reported with its line number: unknown step types, unknown or missing fields,
bad values, duplicate step ids, references to undeclared parameters or to unknown steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kops.errors import BadInput
from kops.inputs import guarded
from kops.inputs import values as input_values
PARAM_TYPES = ("str", "int", "bool", "broker", "brokers", "rack", "duration", "bytes", "topic", "throttle")
_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# field -> (kind, required). kinds (see convert): str, rack, step, bool, duration (seconds >= 0),
# period (seconds > 0), bytes (>= 0), throttle (bytes/s >= 1, or auto[:MIN-MAX]), broker, brokers, count (int >= 1),
# limit (int >= 0), list, choice:<a|b>
_COMMON = {"id": ("id", True), "type": ("str", True), "description": ("str", False)}
STEP_FIELDS: dict[str, dict[str, tuple[str, bool]]] = {
    "health_gate": {"allow": ("list", False), "timeout": ("duration", False), "tolerate_down": ("brokers", False)},
    "plan": {
        "goal": ("choice:rebalance|decommission|add-brokers|drain-rack|replace-broker", True),
        "brokers": ("brokers", False),
        "rack": ("rack", False),
        "new_broker": ("broker", False),
        "max_moves": ("limit", False),
        "max_bytes": ("bytes", False),
    },
    "execute": {
        "plan": ("step", True),
        "throttle": ("throttle", False),
        "max_moves_per_broker": ("count", False),
        "max_moves_in_flight": ("count", False),
        "timeout": ("period", False),
    },
    "verify": {"plan": ("step", True), "timeout": ("duration", False)},
    "elect": {"election_type": ("choice:preferred|unclean", False), "brokers": ("brokers", False), "rack": ("rack", False)},
    "demote": {"broker": ("broker", False), "rack": ("rack", False)},
    "restore": {"broker": ("broker", False), "rack": ("rack", False)},
    "wait_for": {
        "condition": ("choice:healthy|no_leaders|brokers_up|brokers_down|in_sync|no_reassignment"
                      "|migration_state|quorum_ready|kraft_brokers|quorum_observer|quorum_voter|quorum_replaced", True),
        "state": ("choice:NONE|PRE_MIGRATION|MIGRATION|POST_MIGRATION", False),  # migration_state only
        "broker": ("broker", False),
        "brokers": ("brokers", False),
        "rack": ("rack", False),
        "timeout": ("duration", True),
        "interval": ("period", False),
        "allow": ("list", False),
        # a KRaft controller's replacement (kops.playbook.quorum)
        "controller": ("limit", False),
        "old_controller": ("limit", False),
        "max_lag": ("limit", False),
    },
    "pause": {"message": ("str", True)},
    "shell": {"command": ("str", True), "timeout": ("period", False), "allow_failure": ("bool", False)},
    "notify": {"message": ("str", True), "command": ("str", False), "file": ("str", False)},
    "restart": {"broker": ("broker", True), "command": ("str", True), "timeout": ("period", False)},
    "upgrade_features": {"release_version": ("str", False), "features": ("list", False), "validate_only": ("bool", False)},
    # a ZooKeeper -> KRaft migration (kops.playbook.migration)
    "migration_check": {"check": ("choice:zk-to-kraft|rollback", True)},
    "snapshot": {},
    "compare_snapshot": {"snapshot": ("step", True)},
    "clear_migration": {},
    # a KRaft controller replaced on a dynamic quorum (kops.playbook.quorum)
    "quorum_check": {"old_controller": ("limit", True), "new_controller": ("limit", True),
                     "min_voters": ("count", False), "max_lag": ("limit", False)},
    "add_voter": {"controller": ("limit", True), "endpoint": ("str", True), "listener": ("str", False),
                  "max_lag": ("limit", False), "timeout": ("period", False)},
    "remove_voter": {"controller": ("limit", True), "replacement": ("limit", False), "min_voters": ("count", False),
                     "max_lag": ("limit", False), "timeout": ("period", False)},
    "for_each": {
        "brokers": ("brokers", False),
        "rack": ("rack", False),
        "order": ("choice:safe|given", False),
        "pause_between": ("duration", False),
        "steps": ("body", True),
    },
}
#: the loop variable of a ``for_each`` body
LOOP_VAR = "broker"
#: placeholders a ``restart`` command may use, filled in when it runs (the broker's own)
HOOK_VARS = ("broker", "host", "port", "rack")


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
    body: tuple[StepSpec, ...] = ()  # a for_each step's steps


@dataclass(frozen=True)
class Playbook:
    name: str
    description: str
    params: dict[str, ParamSpec]
    steps: tuple[StepSpec, ...]
    source: str
    text: str = field(repr=False, default="")


# -- values -------------------------------------------------------------------------------------
def convert(kind: str, value: Any) -> Any:
    """Convert ``value`` (from the YAML file, or a parameter's value) to ``kind``, or raise
    :class:`ValueError` (:class:`kops.inputs.values.Invalid`) with the reason. Numbers are
    finite and in range: no negative timeouts, throttles or move limits."""
    if kind in ("str", "step"):
        if not isinstance(value, (str, int)) or isinstance(value, bool) or str(value) == "":
            raise input_values.Invalid(f"{input_values.show(value)} is not a non-empty string")
        return str(value)
    if kind == "id":
        return input_values.ident(value, what="a step id")
    if kind == "rack":
        return input_values.rack(str(value) if isinstance(value, int) and not isinstance(value, bool) else value)
    if kind == "topic":
        return input_values.topic(value)
    if kind == "int":
        return input_values.integer(value, lo=-input_values.INT64_MAX - 1, hi=input_values.INT64_MAX)
    if kind == "broker":
        return input_values.broker_id(value)
    if kind == "count":
        return input_values.integer(value, lo=1)
    if kind == "limit":
        return input_values.integer(value, lo=0)
    if kind == "bool":
        return input_values.flag(value) if isinstance(value, str) else input_values.boolean(value)
    if kind == "duration":
        return input_values.duration(value)
    if kind == "period":
        return input_values.duration(value, lo=0.1)
    if kind == "bytes":
        return input_values.size(value)
    if kind == "throttle":
        return input_values.throttle_rate(value)
    if kind == "brokers":
        return input_values.broker_ids(value)
    if kind == "list":
        if isinstance(value, str):
            return [s.strip() for s in value.split(",") if s.strip()]
        if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
            raise input_values.Invalid(f"{input_values.show(value)} is not a list of names")
        return [str(v) for v in value]
    if kind.startswith("choice:"):
        choices = kind.split(":", 1)[1].split("|")
        if not isinstance(value, str) or value not in choices:
            raise input_values.Invalid(f"{input_values.show(value)} is not one of {', '.join(choices)}")
        return value
    raise input_values.Invalid(f"unknown kind {kind}")  # pragma: no cover


def convert_param(ptype: str, value: Any) -> Any:
    """A parameter's value, from ``--param KEY=VALUE`` (text) or the playbook's ``default``."""
    if ptype == "bool":
        return input_values.flag(value) if isinstance(value, str) else input_values.boolean(value)
    if ptype == "throttle":  # checked; kept as given (a run's state is JSON): a step field converts it
        rate = input_values.throttle_rate(value)
        return str(value).strip() if isinstance(rate, input_values.AutoRate) else rate
    return convert(ptype, value)


# -- loading ------------------------------------------------------------------------------------
def _line(node: Any) -> int:
    return node.start_mark.line + 1 if node is not None and hasattr(node, "start_mark") else 0


def load_playbook(path: str | Path) -> Playbook:
    from kops.inputs.files import read_yaml

    doc = read_yaml(str(path), what="playbook")
    return _parse(doc.text, doc.data, doc.root, source=str(path))


def parse_playbook(text: str, *, source: str = "<playbook>") -> Playbook:
    from kops.inputs.files import parse_yaml

    doc = parse_yaml(text, source=source)
    return _parse(text, doc.data, doc.root, source=source)


def _mapping_nodes(node: Any) -> dict[Any, tuple[Any, Any]]:
    """key value -> (key node, value node) of a YAML mapping node (empty for anything else)."""
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)}


@guarded
def _parse(text: str, data: Any, root: Any, *, source: str) -> Playbook:
    problems: list[str] = []

    def at(node: Any, msg: str) -> None:
        problems.append(f"{source}:{_line(node)}: {msg}")

    if not isinstance(data, dict):
        raise BadInput(f"{source}: a playbook is a mapping with name, params and steps")
    top = _mapping_nodes(root)

    def node_of(key: str, default: Any = root) -> Any:
        return top[key][1] if key in top else default

    for key in data:
        if key not in ("name", "description", "params", "steps"):
            at(top.get(key, (root,))[0], f"unknown top-level field {input_values.show(key)} (expected name, description, params, steps)")
    name = data.get("name")
    try:
        name = input_values.ident(name, what="a playbook name")
    except input_values.Invalid as e:
        at(node_of("name"), f"'name': {e}")
        name = "playbook"
    description = data.get("description", "")
    if not isinstance(description, str):
        at(node_of("description"), "'description' must be text")

    params: dict[str, ParamSpec] = {}
    raw_params = data.get("params") or {}
    if not isinstance(raw_params, dict):
        at(node_of("params"), "'params' must be a mapping of parameter name to its spec")
        raw_params = {}
    pnodes = _mapping_nodes(node_of("params", None))
    for pname, spec in raw_params.items():
        node = pnodes.get(pname, (None, node_of("params")))[1]
        label = f"parameter {input_values.show(pname)}"
        if not isinstance(pname, str) or not _PARAM_NAME.fullmatch(pname):
            at(node, f"{label}: a parameter name is a word (letters, digits, _), as in {{name}}")
            continue
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            at(node, f"{label}: expected a mapping like {{type: rack, required: true}}")
            continue
        fnodes = _mapping_nodes(node)
        unknown = [k for k in spec if k not in ("type", "required", "default", "help")]
        if unknown:
            at(node, f"{label}: unknown fields {sorted(map(str, unknown))} (allowed: type, required, default, help)")
        try:
            required = input_values.boolean(spec.get("required", False))
        except input_values.Invalid as e:
            at(fnodes.get("required", (node, node))[1], f"{label}: 'required': {e}")
            required = True
        help_text = spec.get("help", "")
        if not isinstance(help_text, (str, int, float)) or isinstance(help_text, bool):
            at(fnodes.get("help", (node, node))[1], f"{label}: 'help' must be text")
            help_text = ""
        ptype = spec.get("type", "str")
        if not isinstance(ptype, str) or ptype not in PARAM_TYPES:
            at(fnodes.get("type", (node, node))[1], f"{label}: unknown type {input_values.show(ptype)} (one of {', '.join(PARAM_TYPES)})")
            continue
        default = spec.get("default")
        if default is not None:
            try:
                convert_param(ptype, default)
            except input_values.Invalid as e:
                at(fnodes.get("default", (node, node))[1], f"{label}: default {e}")
        params[pname] = ParamSpec(pname, ptype, required, default, str(help_text))

    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        at(node_of("steps"), "'steps' must be a non-empty list")
        raw_steps = []
    steps = _parse_steps(raw_steps, node_of("steps", None), set(params), at, outer_seen=None)

    if problems:
        raise BadInput(f"playbook {source} is invalid ({len(problems)} problem{'s' if len(problems) > 1 else ''})",
                       details=problems)
    return Playbook(name, str(description), params, tuple(steps), source, text)


def _parse_steps(raw_steps: list[Any], snode: Any, names: set[str], at, *,
                 outer_seen: dict[str, int] | None) -> list[StepSpec]:
    """The steps of a playbook, or of a for_each body (``outer_seen``: the steps before the
    loop, which body steps may refer to; ``names``: what ``{...}`` may refer to)."""
    import yaml

    steps: list[StepSpec] = []
    snodes = snode.value if isinstance(snode, yaml.SequenceNode) else []
    seen: dict[str, int] = {}
    in_body = outer_seen is not None
    for i, step in enumerate(raw_steps):
        node = snodes[i] if i < len(snodes) else snode
        if not isinstance(step, dict):
            at(node, f"step {i + 1}: expected a mapping with id and type")
            continue
        fnodes = {k: kn for k, (kn, _v) in _mapping_nodes(node).items()}
        sid, stype = step.get("id"), step.get("type")
        label = f"step {input_values.show(sid)}" if isinstance(sid, str) and sid else f"step {i + 1}"
        try:
            sid = convert("id", sid)
        except input_values.Invalid as e:
            at(fnodes.get("id", node), f"{label}: 'id': {e}")
            sid = f"#{i + 1}"
        else:
            if sid in seen:
                at(node, f"{label}: duplicate id (first used on line {seen[sid]})")
        seen.setdefault(sid, _line(node))
        if not isinstance(stype, str) or stype not in STEP_FIELDS:
            at(fnodes.get("type", node), f"{label}: unknown step type {input_values.show(stype)} (known: {', '.join(STEP_FIELDS)})")
            continue
        if stype == "for_each" and in_body:
            at(node, f"{label}: a for_each step cannot hold another for_each")
            continue
        vnodes = _mapping_nodes(node)
        body: tuple[StepSpec, ...] = ()
        allowed = {**_COMMON, **STEP_FIELDS[stype]}
        fields: dict[str, Any] = {}
        for key, value in step.items():
            if key not in allowed:
                at(fnodes.get(key, node), f"{label}: unknown field {input_values.show(key)} for a {stype} step "
                   f"(allowed: {', '.join(sorted(set(allowed) - {'id', 'type'}))})")
                continue
            if key == "description" and not isinstance(value, str):
                at(fnodes.get(key, node), f"{label}: 'description' must be text")
            if key in _COMMON:
                continue
            kind = allowed[key][0]
            if kind == "body":
                if not isinstance(value, list) or not value:
                    at(fnodes.get(key, node), f"{label}: 'steps' must be a non-empty list of steps")
                else:
                    body = tuple(_parse_steps(value, vnodes[key][1] if key in vnodes else node,
                                              names | {LOOP_VAR}, at, outer_seen=seen))
                continue
            refs = _REF.findall(value) if isinstance(value, str) else []
            for r in refs:
                if r not in names and not (stype == "restart" and key == "command" and r in HOOK_VARS):
                    what = "parameter" if r != LOOP_VAR else "parameter ({broker} exists inside a for_each only)"
                    at(fnodes.get(key, node), f"{label}: field {key!r} uses undeclared {what} {{{r}}}")
            if not refs:
                try:
                    # a boolean written in the file is a YAML boolean: "false" (a string) is refused
                    input_values.boolean(value) if kind == "bool" else convert(kind, value)
                except input_values.Invalid as e:
                    at(fnodes.get(key, node), f"{label}: field {key!r}: {e}")
            if kind == "step" and not refs and value not in seen and value not in (outer_seen or {}):
                at(fnodes.get(key, node), f"{label}: field {key!r} refers to step {input_values.show(value)}, which does not come before it")
            fields[key] = value
        for key, (_kind, required) in STEP_FIELDS[stype].items():
            if required and key not in step:
                at(node, f"{label}: a {stype} step needs {key!r}")
        if stype == "wait_for" and (step.get("condition") == "migration_state") != ("state" in step):
            at(node, f"{label}: 'state' goes with condition migration_state, which needs it")
        cond = step.get("condition")
        if stype == "wait_for" and cond in ("quorum_observer", "quorum_voter", "quorum_replaced") and "controller" not in step:
            at(node, f"{label}: condition {cond} needs 'controller'")
        if stype == "wait_for" and (cond == "quorum_replaced") != ("old_controller" in step):
            at(node, f"{label}: 'old_controller' goes with condition quorum_replaced, which needs it")
        if stype in ("demote", "restore") and ("broker" in step) == ("rack" in step):
            at(node, f"{label}: give exactly one of 'broker' or 'rack'")
        if stype == "for_each" and "brokers" in step and "rack" in step and not any(
                isinstance(step[k], str) and _REF.search(step[k]) for k in ("brokers", "rack")):
            at(node, f"{label}: give at most one of 'brokers' or 'rack' (neither: every broker)")
        steps.append(StepSpec(sid, stype, fields, _line(node), str(step.get("description", "")), body))
    return steps


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
            values[name] = convert_param(spec.type, raw)
        except ValueError as e:
            problems.append(f"parameter {name!r}: {e}")
    if problems:
        raise BadInput(f"bad parameters for playbook {pb.name}", details=problems)
    return values


def resolve_all(pb: Playbook, params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every step's fields resolved (:func:`resolve_fields`), before the run starts: a value
    that a parameter makes bad (a negative timeout, a throttle of 0) is refused here, every such
    problem at once, never when its step comes."""
    out: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for s in pb.steps:
        try:
            out[s.id] = resolve_fields(s, params)
        except BadInput as e:
            problems.extend(e.details or [e.message])
        for b in s.body:  # checked with a stand-in broker; each iteration resolves its own
            try:
                resolve_fields(b, {**params, LOOP_VAR: 0})
            except BadInput as e:
                problems.extend(f"in for_each {s.id!r}: {d}" for d in (e.details or [e.message]))
    if problems:
        raise BadInput(f"playbook {pb.name}: {len(problems)} bad step field{'s' if len(problems) > 1 else ''} "
                       "with these parameters; nothing was run", details=problems)
    return out


def resolve_fields(step: StepSpec, params: dict[str, Any]) -> dict[str, Any]:
    """The step's fields with ``{param}`` references substituted and converted to their kinds;
    every bad field named in one :class:`BadInput`. A field that is just an optional parameter
    the run leaves unset (``rack: "{rack}"`` without ``--param rack=...``) is left out, as if
    the playbook did not give it."""
    kinds = {**{k: v[0] for k, v in STEP_FIELDS[step.type].items()}}
    out: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in step.fields.items():
        if isinstance(value, str):
            whole = _REF.fullmatch(value)
            if whole and whole.group(1) not in params and not (step.type == "restart" and key == "command"):
                continue
            if whole and whole.group(1) in params:
                value = params[whole.group(1)]
                if isinstance(value, list) and kinds[key] != "brokers":
                    value = ",".join(str(v) for v in value)
            else:
                value = _REF.sub(lambda m: _fmt(params.get(m.group(1), m.group(0))), value)
        try:
            out[key] = convert(kinds[key], value)
        except ValueError as e:
            problems.append(f"step {step.id!r} (line {step.line}): field {key!r}: {e}")
    if step.type == "for_each" and "brokers" in out and "rack" in out:
        problems.append(f"step {step.id!r} (line {step.line}): give at most one of 'brokers' or 'rack' "
                        "(neither: every broker)")
    if step.type in ("demote", "restore") and "broker" not in out and "rack" not in out:
        problems.append(f"step {step.id!r} (line {step.line}): needs 'broker' or 'rack', and the parameter it "
                        "names is not set")
    if problems:
        raise BadInput(problems[0] if len(problems) == 1 else f"step {step.id!r}: {len(problems)} bad fields",
                       details=problems)
    return out


def _fmt(v: Any) -> str:
    return ",".join(str(x) for x in v) if isinstance(v, list) else str(v)
