"""The ``kops`` command. Only light imports at module level: ``kops --help`` starts fast."""

from __future__ import annotations

from typing import Annotated

import typer

from kops import __version__
from kops.cli import common
from kops.cli.common import (
    BootstrapOpt,
    CommandConfigOpt,
    GlobalOptions,
    OutputOpt,
    TimeoutOpt,
    ZookeeperOpt,
)

app = typer.Typer(
    name="kops",
    help=(
        "Rack-aware Kafka operations: read a cluster's live topology, plan rack-safe replica "
        "placements with minimal data movement, run throttled reassignments and leader elections, "
        "and verify that the work finished.\n\n"
        "Exit codes: 0 ok/complete/healthy, 1 runtime failure, 2 bad input (nothing changed), "
        "3 not done yet or problems found."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kops {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    zookeeper: ZookeeperOpt = None,
    request_timeout: TimeoutOpt = None,
    output: OutputOpt = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    ctx.obj = GlobalOptions(
        bootstrap_server=bootstrap_server,
        command_config=command_config,
        zookeeper=zookeeper,
        request_timeout=request_timeout,
        output=output,
    )


def _mount() -> None:
    from kops.cli import cluster, leader, plan, playbook, reassign, sandbox

    app.add_typer(sandbox.app, name="sandbox")
    app.add_typer(cluster.app, name="cluster")
    app.add_typer(plan.app, name="plan")
    app.add_typer(reassign.app, name="reassign")
    app.add_typer(leader.app, name="leader")
    app.add_typer(playbook.app, name="playbook")


_mount()


def main() -> None:
    app()


__all__ = ["app", "main", "common"]
