"""``kops broker cordon | uncordon | cordons``: brokers that get no new replicas.

Thin commands: parse, call :mod:`kops.ops.cordon`, render. Heavy imports stay inside the
command bodies.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kops.cli.common import Context, cluster_command, emit_json, handle_errors, out_console

app = typer.Typer(
    help="Cordon brokers: a cordoned broker keeps its replicas and gets no new one from any kops plan, "
    "cron step or heal step (it is being drained, or is suspect).",
    no_args_is_help=True,
)

BrokersArg = Annotated[list[int], typer.Argument(metavar="ID...", help="Broker ids.", show_default=False)]


def _read(conn):
    from kops.cluster.topology import ReadOptions, read_topology

    # configs: Kafka's own cordon (cordoned.log.dirs, KIP-1066) is a broker config
    return read_topology(conn, ReadOptions(with_sizes=False, with_reassignments=False))


def _say(out) -> None:
    verb = out.action + "ed"
    lines = []
    if out.changed:
        lines.append(f"{verb}: broker{'s' if len(out.changed) > 1 else ''} {', '.join(map(str, out.changed))}")
    if out.unchanged:
        lines.append(f"already {'cordoned' if out.action == 'cordon' else 'not cordoned'}: "
                     f"{', '.join(map(str, out.unchanged))}")
    for b, what in sorted(out.kafka.items()):
        lines.append(f"  broker {b}: Kafka's own cordon: {what}")
    typer.echo("\n".join(lines), err=True)


@app.command()
@handle_errors
@cluster_command
def cordon(
    c: Context,
    brokers: BrokersArg,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (shown by `kops broker cordons`).")] = None,
) -> None:
    """Cordon brokers: no kops plan (`plan ...`, `rebalance step`, `heal step`, the playbooks)
    gives them a new replica; what they hold stays (a decommission still empties them). Kept in
    the cluster (topic __kops_cordons), seen from every host; where the Kafka supports its own
    cordon (KIP-1066: Kafka 4.3+, metadata.version 4.3-IV0), `cordoned.log.dirs=*` is set on the
    broker too, so that new topics avoid it. Exit 2 (nothing changed) for a broker that is not in
    the cluster."""
    from kops.ops import cordon as cordons

    with c.connection() as conn:
        out = cordons.cordon(conn, _read(conn), brokers, reason=reason)
    emit_json(out.to_dict()) if c.json else _say(out)


@app.command()
@handle_errors
@cluster_command
def uncordon(
    c: Context,
    brokers: BrokersArg,
) -> None:
    """Lift the cordon of brokers (kops' record and Kafka's own `cordoned.log.dirs`, whoever set
    it): plans may give them replicas again."""
    from kops.ops import cordon as cordons

    with c.connection() as conn:
        out = cordons.uncordon(conn, _read(conn), brokers)
    emit_json(out.to_dict()) if c.json else _say(out)


@app.command("cordons")
@handle_errors
@cluster_command
def list_cordons(
    c: Context,
) -> None:
    """The cordoned brokers: since when, why and from which host (kops' records), and whether
    Kafka's own cordon is set."""
    from kops.ops import cordon as cordons

    with c.connection() as conn:
        topo = _read(conn)
        records = cordons.read(conn)
    rows = []
    for b in topo.brokers:
        rec = records.get(b.id)
        if rec is None and not b.cordoned:
            continue
        rows.append({"broker": b.id, "rack": b.rack, "alive": b.alive, "kafka_cordon": b.cordoned,
                     "since": rec.since if rec else None, "reason": rec.reason if rec else None,
                     "host": rec.host if rec else None})
    if c.json:
        emit_json({"cordoned": rows})
        return
    if not rows:
        typer.echo("no broker is cordoned", err=True)
        return
    from rich.table import Table

    t = Table(title="Cordoned brokers", title_justify="left")
    for col in ("id", "rack", "alive", "since", "reason", "from host", "Kafka's own cordon"):
        t.add_column(col)
    for r in rows:
        t.add_row(str(r["broker"]), r["rack"] or "-", "yes" if r["alive"] else "DOWN", r["since"] or "-",
                  r["reason"] or "-", r["host"] or "-", "set" if r["kafka_cordon"] else "-")
    out_console().print(t)
