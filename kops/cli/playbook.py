"""``kops playbook list | show | run``: rack-maintenance runbooks."""

from __future__ import annotations

import shlex
import sys
from typing import Annotated

import typer

from kops.cli import params
from kops.cli.common import (
    Context,
    TopologyOpt,
    cluster_command,
    emit_json,
    err_console,
    handle_errors,
    out_console,
    output_command,
)

app = typer.Typer(
    help="Declarative runbooks (YAML) for rack maintenance: health gates, plans, throttled "
    "execution, leadership moves, operator pauses; resumable after a crash or Ctrl-C.",
    no_args_is_help=True,
)


@app.command("list")
@handle_errors
@output_command
def list_(c: Context) -> None:
    """List the playbooks kops ships (and those on $KOPS_PLAYBOOK_PATH)."""
    from kops.playbook.library import available
    from kops.playbook.spec import load_playbook

    rows = []
    for name, path in available().items():
        pb = load_playbook(path)
        rows.append({"name": name, "path": str(path), "description": " ".join(pb.description.split()),
                     "params": [p for p in pb.params]})
    if c.json:
        emit_json(rows)
        return
    from rich.table import Table

    t = Table()
    for col in ("name", "params", "description"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["name"], ", ".join(r["params"]), r["description"])
    out_console().print(t)


@app.command()
@handle_errors
@output_command
def show(c: Context, name: Annotated[str, typer.Argument(help="Playbook name or file.")]) -> None:
    """Show a playbook: its parameters and steps."""
    from kops.playbook.library import find

    pb = find(name)
    if c.json:
        emit_json({
            "name": pb.name, "source": pb.source, "description": pb.description,
            "params": {k: {"type": p.type, "required": p.required, "default": p.default, "help": p.help}
                       for k, p in pb.params.items()},
            "steps": [_step_doc(s) for s in pb.steps],
        })
        return
    con = out_console()
    con.print(f"[bold]{pb.name}[/bold]  ({pb.source})")
    con.print(" ".join(pb.description.split()))
    con.print("\nparameters:")
    for p in pb.params.values():
        req = "required" if p.required else ("optional" if p.default is None else f"default {p.default}")
        con.print(f"  {p.name} ({p.type}, {req}) {' '.join(p.help.split())}", markup=False)
    con.print("\nsteps:")
    for i, s in enumerate(pb.steps, 1):
        fields = " ".join(f"{k}={v}" for k, v in s.fields.items())
        con.print(f"  {i}. {s.id}: {s.type} {fields}", markup=False)
        for j, b in enumerate(s.body, 1):  # a for_each: its steps, once per broker ({broker})
            fields = " ".join(f"{k}={v}" for k, v in b.fields.items())
            con.print(f"     {i}.{j}. {b.id}: {b.type} {fields}", markup=False)


def _step_doc(s) -> dict:
    doc = {"id": s.id, "type": s.type, "line": s.line, **s.fields}
    if s.body:
        doc["steps"] = [_step_doc(b) for b in s.body]
    return doc


@app.command()
@handle_errors
@cluster_command
def run(
    c: Context,
    name: Annotated[str, typer.Argument(help="Playbook name (see `kops playbook list`) or a YAML file.")],
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="KEY=VALUE (repeatable).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what each step would do, from the live topology; change nothing.")] = False,
    resume: Annotated[str | None, typer.Option("--resume", click_type=params.RUN_ID,
                                               help="Continue run RUN_ID from its last completed step.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not stop at operator pauses or confirmations.")] = False,
    topology: TopologyOpt = None,
) -> None:
    """Run a playbook. The file and the parameters are validated before anything runs (exit 2
    with the line and the reason); a state file records every step, so a run stopped by a crash,
    Ctrl-C or a failed step continues with --resume RUN_ID. A pause without a terminal stops the
    run with exit 3; resuming it is the operator's go-ahead.
    """
    from kops.errors import BadInput, KopsError
    from kops.playbook import engine
    from kops.playbook.library import find

    given: dict[str, str] = {}
    for item in param or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--param {item!r}: expected KEY=VALUE")
        if key.strip() in given:
            raise BadInput(f"--param {key.strip()!r} is given twice")
        given[key.strip()] = value.strip()
    pb = find(name)
    migrating = any(s.type in ("migration_check", "clear_migration") for s in pb.steps)
    if c.zookeeper and not topology and not migrating:  # a migration's brokers turn KRaft brokers midway
        with c.connection() as conn:  # a KRaft cluster: exit 2 before the run starts (no state file)
            conn.require_zookeeper_mode("--zookeeper")
    con = err_console()
    try:
        def connect():
            conn = c.connection()
            conn.migrating = migrating
            return conn

        state = engine.run(pb, given, connect, has_cluster=bool(c.bootstrap_server), dry_run=dry_run, yes=yes, resume=resume,
                           say=lambda m: con.print(m, markup=False, highlight=False),
                           interactive=sys.stdin.isatty(), topology_file=topology,
                           again=c.connection_args() + (f" --topology {shlex.quote(topology)}" if topology else ""))
    except (KopsError, KeyboardInterrupt) as e:
        st = getattr(e, "run_state", None)
        if st is not None:
            emit_json(engine.report(st)) if c.json else _render_report(engine.report(st))
        raise
    rep = engine.report(state)
    emit_json(rep) if c.json else _render_report(rep)


def _render_report(rep: dict) -> None:
    from rich.table import Table

    t = Table(title=f"{rep['playbook']} {rep['run_id']}: {rep['status']}", title_justify="left")
    for col in ("step", "type", "status", "seconds", "summary"):
        t.add_column(col)
    for s in rep["steps"]:
        t.add_row(s["id"], s["type"], s["status"], f"{s['duration_s']:.1f}" if s["duration_s"] is not None else "-",
                  s.get("summary") or s.get("error") or "")
    out_console().print(t)
    out_console().print(f"partitions moved: {rep['partitions_moved']}, leaders moved: {rep['leaders_moved']}, "
                        f"total {rep['duration_s']:.1f} s")
