"""``kops cluster features describe | upgrade``: Kafka's feature flags and metadata.version.

Thin commands: parse, call :mod:`kops.ops.features`, render. Heavy imports stay inside the
command bodies.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kops.cli.common import Context, cluster_command, emit_json, handle_errors, out_console

app = typer.Typer(
    help="Kafka's feature flags (KIP-584): metadata.version and friends, as `kafka-features.sh` shows and "
    "raises them.",
    no_args_is_help=True,
)


@app.command()
@handle_errors
@cluster_command
def describe(c: Context) -> None:
    """Show each feature the brokers support (its level range) and the level the cluster has
    finalized; metadata.version with its release name (3.9-IV0 is level 21)."""
    from kops.cluster.features import read_features

    with c.connection() as conn:
        feats = read_features(conn)
    if c.json:
        emit_json(feats.to_dict())
        return
    from rich.table import Table

    t = Table(title=f"Features (epoch {feats.epoch if feats.epoch is not None else '-'})", title_justify="left")
    for col in ("feature", "supported", "finalized"):
        t.add_column(col)
    for f in feats.features:
        rng = "-" if f.supported_max is None else f"{f.describe_level(f.supported_min)} - {f.describe_level(f.supported_max)}"
        t.add_row(f.name, rng, f.describe_level(f.finalized) if f.finalized is not None else "- (not finalized)")
    out_console().print(t)


@app.command()
@handle_errors
@cluster_command
def upgrade(
    c: Context,
    release_version: Annotated[
        str | None,
        typer.Option("--release-version", metavar="R",
                     help="Raise metadata.version to this release's newest level (3.9, 4.0 ...) or to a level "
                          "named exactly (4.0-IV3)."),
    ] = None,
    metadata: Annotated[
        str | None,
        typer.Option("--metadata", metavar="R", help="The same as --release-version (kafka-features.sh's name)."),
    ] = None,
    feature: Annotated[
        list[str] | None,
        typer.Option("--feature", metavar="NAME=LEVEL",
                     help="Raise another feature, e.g. group.version=1 (repeatable)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Have the active controller validate the raise; change nothing.")
    ] = False,
) -> None:
    """Raise feature levels -- the last step of a KRaft upgrade, once every broker and
    controller runs the new Kafka. Irreversible for metadata.version: kops only raises.

    The active controller validates the raise first (it refuses a level a registered broker or
    controller does not support); then kops applies it and waits until the cluster answers with
    the new level. A lower level, an unknown feature, or metadata.version on a ZooKeeper-mode
    cluster (its brokers take inter.broker.protocol.version from their configs) are refused
    with exit 2, nothing changed; a level already finalized is left as it is (exit 0).
    """
    from kops.cluster.features import wanted_levels
    from kops.errors import BadInput

    if release_version and metadata:
        raise BadInput("give --release-version or --metadata, not both (they both name metadata.version)")
    wanted = wanted_levels(release_version or metadata, feature or [])
    from kops.ops.features import raise_features

    with c.connection() as conn:
        res = raise_features(conn, wanted, dry_run=dry_run, wait_s=max(30.0, conn.timeout_s * 3))
    if c.json:
        emit_json(res.to_dict())
        return
    out_console().print(res.summary(), soft_wrap=True)
