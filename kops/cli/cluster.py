"""``kops cluster describe | health``."""

from __future__ import annotations

from typing import Annotated

import typer

from kops.cli import params
from kops.cli.features import app as features_app
from kops.cli.common import (
    Context,
    TopologyOpt,
    cluster_command,
    emit_json,
    handle_errors,
    load_topology,
    out_console,
)

app = typer.Typer(help="Read a cluster: live topology and health; its feature levels.", no_args_is_help=True)
app.add_typer(features_app, name="features")

TopicFilterOpt = Annotated[
    list[str] | None,
    typer.Option("--topic", click_type=params.TOPIC, help="Only these topics (repeatable). Default: all."),
]


@app.command()
@handle_errors
@cluster_command
def describe(
    c: Context,
    topic: TopicFilterOpt = None,
    exclude_internal: Annotated[
        bool, typer.Option("--exclude-internal", help="Leave out internal topics (__consumer_offsets ...).")
    ] = False,
    sample_seconds: Annotated[
        float | None,
        typer.Option("--sample-seconds", click_type=params.seconds(lo=1, hi=3600), metavar="N",
                     help="Also measure each partition's bytes-in rate over N seconds (end offsets and "
                          "sizes on disk at both ends; the snapshot says how each rate was obtained). "
                          "60 or more gives a steady figure for planning. Needs a live cluster."),
    ] = None,
    capacity_file: params.CapacityFileOpt = None,
    topology: TopologyOpt = None,
) -> None:
    """Show brokers (id, host, port, rack, alive), the controller, topics with partitions
    (replicas, ISR, leader), min.insync.replicas and replication throttles, and ongoing
    reassignments; on KRaft, the metadata quorum (leader, epoch, each voter's and observer's
    lag and when it was last caught up).

    Reads through the Admin API; with --zookeeper it also reads ZooKeeper and reports every
    disagreement between the two. --output json prints a topology snapshot
    (schemas/topology.schema.json) that every planning command accepts with --topology FILE;
    with --sample-seconds and --capacity-file it carries load and capacities, so that planning
    against it needs no cluster.
    """
    if sample_seconds is not None and topology:
        from kops.errors import BadInput

        raise BadInput("--sample-seconds measures a live cluster: it cannot be used with --topology")
    capacities = params.read_capacities(capacity_file)
    topo = _filter(c, topology, load_topology(c, topology, cordons=True), topic, exclude_internal)
    if sample_seconds is not None:  # the topics shown only
        from kops.cluster.sampling import sample_rates

        with c.connection() as conn:
            topo = sample_rates(conn, topo, sample_seconds)
    if capacities is not None:
        topo = topo.with_capacities(capacities)
    if c.json:
        emit_json(topo.to_dict())
        return
    from kops.cli.render import render_topology

    render_topology(out_console(), topo)


@app.command()
@handle_errors
@cluster_command
def health(
    c: Context,
    topic: TopicFilterOpt = None,
    fail_on: Annotated[
        str,
        typer.Option("--fail-on", help="Exit 3 on findings of this severity or worse: critical, problem, warning."),
    ] = "problem",
    topology: TopologyOpt = None,
) -> None:
    """Check health: offline, under-min-ISR (critical); under-replicated, at-min-ISR,
    rack-unsafe partitions and down brokers that still hold replicas (problems); leaders that
    are not the preferred replica and topics whose min.insync.replicas does not make an acks=all
    write reach two racks (warnings). On KRaft, the metadata quorum: no leader or no majority in
    sync (critical), a majority that one more lost controller would break (problem, the voters
    behind named), a quorum of 1 or 2 voters (warning).

    Exit 0 when healthy, 3 when problems are found (see --fail-on), 1 when the cluster cannot be
    read. A table for people; --output json for monitors.
    """
    from kops.errors import BadInput
    from kops.health import check_health

    if fail_on not in ("critical", "problem", "warning"):
        raise BadInput(f"--fail-on must be critical, problem or warning, not {fail_on!r}")
    topo = _filter(c, topology, load_topology(c, topology), topic, False)
    report = check_health(topo)
    if c.json:
        doc = report.to_dict(fail_on)
        doc["notes"] = list(topo.notes)
        emit_json(doc)
    else:
        from kops.cli.render import render_health

        render_health(out_console(), report, topo, fail_on)
    raise typer.Exit(0 if report.healthy(fail_on) else 3)


def _filter(c, topology_file, topo, topics, exclude_internal):
    from dataclasses import replace

    from kops.cluster.topology import missing_topics_error

    if topics:
        missing = sorted(set(topics) - set(topo.topic_map))
        if missing:
            if topology_file:
                raise missing_topics_error(None, missing)
            with c.connection() as conn:
                raise missing_topics_error(conn, missing)
    keep = tuple(
        t for t in topo.topics
        if (not topics or t.name in topics) and not (exclude_internal and t.internal)
    )
    return replace(topo, topics=keep)
