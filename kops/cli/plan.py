"""``kops plan ...``: offline/live planning commands (Kafka-exact assignment, minimal-movement plans)."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Compute replica plans: Kafka's own assignment, and minimal-movement rack-aware plans.",
    no_args_is_help=True,
)
