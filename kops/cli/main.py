"""The ``kops`` command. Only light imports at module level: ``kops --help`` starts fast."""

from __future__ import annotations

import importlib
import os
from typing import Annotated

import typer
import typer.main
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from kops import __version__
from kops.cli import common
from kops.cli.common import (
    BootstrapOpt,
    CommandConfigOpt,
    GlobalOptions,
    OutputOpt,
    TimeoutOpt,
    ZookeeperAuthOpt,
    ZookeeperOpt,
)

#: command groups, in help order: name -> module whose ``app`` is the group's Typer app
SUBCOMMANDS = {
    "sandbox": "kops.cli.sandbox",
    "cluster": "kops.cli.cluster",
    "plan": "kops.cli.plan",
    "reassign": "kops.cli.reassign",
    "leader": "kops.cli.leader",
    "rebalance": "kops.cli.rebalance",
    "heal": "kops.cli.heal",
    "broker": "kops.cli.broker",
    "playbook": "kops.cli.playbook",
    "logs": "kops.cli.logs",
}


class LazyGroup(TyperGroup):
    """Builds only the command group that runs.

    Typer turns every command's signature into options when it builds the command tree, which
    costs more than everything else at start-up; ``kops cluster health`` needs only ``cluster``,
    and ``kops --help`` needs only each group's one-line help.
    """

    def list_commands(self, ctx):
        return [*super().list_commands(ctx), *SUBCOMMANDS]

    # Usage errors (unknown option, bad value, missing argument) are raised while options are
    # parsed, before a command's own error handling runs: with --output json they still end in
    # one JSON error document on stdout (Click's message and usage stay on stderr).
    def make_context(self, info_name, args, parent=None, **extra):
        common.reset_json_state()  # a new invocation (also under CliRunner)
        raw = list(args)
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except UsageError as e:
            _usage_error_json(e, raw, None)
            raise

    def invoke(self, ctx):
        raw = [*getattr(ctx, "protected_args", ()), *ctx.args]
        try:
            return super().invoke(ctx)
        except UsageError as e:
            _usage_error_json(e, raw, ctx)
            raise

    def get_command(self, ctx, cmd_name):
        if cmd_name in SUBCOMMANDS:
            cmd = typer.main.get_command(_group_app(cmd_name))
            cmd.name = cmd_name
            _set_markup(cmd, HELP_MARKUP)
            return cmd
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx, formatter) -> None:
        rows = [(name, _first_sentence(_group_app(name).info.help)) for name in SUBCOMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


#: Plain help renders several times faster than Typer's boxed rich layout (which imports
#: rich.markdown, markdown-it and friends: ~0.3 s on a 2-core machine), and `kops --help` must
#: start fast. KOPS_RICH_HELP=1 brings the rich layout back.
HELP_MARKUP = "rich" if os.environ.get("KOPS_RICH_HELP") else None


def _usage_error_json(e, raw_args, ctx) -> None:
    g = ctx.find_root().obj if ctx is not None else None
    if not common.json_requested(getattr(g, "output", None), args=raw_args):
        return
    if isinstance(e, NoArgsIsHelpError):
        message = "a command or arguments are missing (see --help)"
    else:
        message = e.format_message()
        c = getattr(e, "ctx", None)
        if c is not None and getattr(c, "command_path", None):
            message = f"{c.command_path}: {message}"
    common.emit_error_json(e.exit_code, message, exc=e, kind="bad_input")


def _set_markup(cmd, mode) -> None:
    cmd.rich_markup_mode = mode
    for sub in getattr(cmd, "commands", {}).values():
        _set_markup(sub, mode)


def _group_app(name: str) -> typer.Typer:
    return importlib.import_module(SUBCOMMANDS[name]).app


def _first_sentence(text: object) -> str:
    text = " ".join(str(text or "").split())
    return text.split(". ")[0].rstrip(".")


app = typer.Typer(
    cls=LazyGroup,
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
    rich_markup_mode=HELP_MARKUP,
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
    zookeeper_auth_file: ZookeeperAuthOpt = None,
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
        zookeeper_auth_file=zookeeper_auth_file,
    )


def main() -> None:
    """The ``kops`` executable: run the command, then exit without the interpreter's teardown."""
    try:
        app()
    except SystemExit as e:
        _exit_now(e.code)
        raise
    _exit_now(0)


def _exit_now(code: object) -> None:
    """Leave the process once the command is done: run the ``atexit`` handlers (logging,
    PySpark's JVM shutdown), flush stdout and stderr, and end with ``os._exit``. Python's own
    teardown frees every module and object one by one (0.1-0.7 s after a reassignment on a busy
    two-core machine, measured), time a cron job or an operator waits for nothing: every kops
    write is acknowledged (the journal flushes each record) or closed before the command
    returns. Falls back to the normal exit while a non-daemon thread still runs, or for a
    non-integer exit status (Python prints it)."""
    import atexit
    import sys
    import threading

    code = 0 if code is None else code
    if not isinstance(code, int):
        return
    if any(t is not threading.main_thread() and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe: nothing left to deliver
            pass
    os._exit(code)


__all__ = ["app", "main", "common"]
