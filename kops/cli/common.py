"""Shared CLI plumbing: connection options, output mode, error -> exit code mapping.

Light imports only (typer, stdlib): ``kops --help`` must start fast. Commands import heavy
modules (Kafka clients, pyspark) inside their bodies.

Every command that talks to a cluster accepts the connection options both globally
(``kops --bootstrap-server X cluster describe``) and on the command itself
(``kops cluster describe --bootstrap-server X``), as Kafka's tools take them.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from typing import Annotated, Any, TypeVar, get_type_hints

import typer

from kops.cli import params
from kops.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_NOT_DONE, BadInput, KopsError


class Output(str, Enum):
    table = "table"
    json = "json"


# -- reusable option types ------------------------------------------------------------------
BootstrapOpt = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        envvar="KOPS_BOOTSTRAP_SERVER",
        click_type=params.BOOTSTRAP,
        help="Kafka bootstrap server(s) HOST:PORT[,HOST:PORT] (env KOPS_BOOTSTRAP_SERVER).",
        rich_help_panel="Connection",
    ),
]
CommandConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--command-config",
        envvar="KOPS_COMMAND_CONFIG",
        help="Kafka client properties file (security.protocol, sasl.*, ssl.*), as Kafka's tools take it.",
        rich_help_panel="Connection",
    ),
]
ZookeeperOpt = Annotated[
    str | None,
    typer.Option(
        "--zookeeper",
        envvar="KOPS_ZOOKEEPER",
        click_type=params.ZOOKEEPER,
        help="ZooKeeper connect string HOST:PORT[/chroot] (env KOPS_ZOOKEEPER); also read ZooKeeper.",
        rich_help_panel="Connection",
    ),
]
ZOOKEEPER_AUTH_ENV = "KOPS_ZOOKEEPER_AUTH_FILE"
ZookeeperAuthOpt = Annotated[
    str | None,
    typer.Option(
        "--zookeeper-auth-file",
        envvar=ZOOKEEPER_AUTH_ENV,
        help=(
            "ZooKeeper SASL/DIGEST-MD5 credentials: a file with username=... and password=... "
            "(env KOPS_ZOOKEEPER_AUTH_FILE). Never give the password itself on the command line."
        ),
        rich_help_panel="Connection",
    ),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--request-timeout",
        envvar="KOPS_REQUEST_TIMEOUT",
        click_type=params.seconds(0.5, 86400.0),
        help="Seconds to wait for the cluster before failing (default 10; 0.5 to 86400).",
        rich_help_panel="Connection",
    ),
]
OutputOpt = Annotated[
    Output | None,
    typer.Option(
        "--output",
        "-o",
        envvar="KOPS_OUTPUT",
        help="table for people (stderr/stdout), json: exactly one JSON document on stdout.",
    ),
]
TopologyOpt = Annotated[
    str | None,
    typer.Option(
        "--topology",
        help="Read a topology snapshot (kops cluster describe --output json) instead of a live cluster.",
    ),
]

DEFAULT_TIMEOUT_S = 10.0


@dataclass
class GlobalOptions:
    bootstrap_server: str | None = None
    command_config: str | None = None
    zookeeper: str | None = None
    request_timeout: float | None = None
    output: Output | None = None
    zookeeper_auth_file: str | None = None


@dataclass(frozen=True)
class Context:
    """What a command needs to reach a cluster and to render."""

    bootstrap_server: str | None
    command_config: str | None
    zookeeper: str | None
    timeout_s: float
    output: Output
    zookeeper_auth_file: str | None = None

    @property
    def json(self) -> bool:
        return self.output is Output.json

    def connection_args(self) -> str:
        """The options that reach this cluster, as a command line repeats them (``--bootstrap-server
        ...``; shell-quoted, empty when none): for a hint the operator copies, such as a playbook's
        ``--resume`` line. Paths only, never a secret (those stay in the files named)."""
        import shlex

        given = (("--bootstrap-server", self.bootstrap_server), ("--command-config", self.command_config),
                 ("--zookeeper", self.zookeeper), ("--zookeeper-auth-file", self.zookeeper_auth_file))
        return "".join(f" {flag} {shlex.quote(value)}" for flag, value in given if value)

    def connection(self, *, need_bootstrap: bool = True):
        """A :class:`kops.cluster.connection.Connection` (imports the cluster layer lazily)."""
        from kops.cluster.connection import Connection

        if need_bootstrap and not self.bootstrap_server:
            raise BadInput(
                "no cluster given: pass --bootstrap-server HOST:PORT (or set KOPS_BOOTSTRAP_SERVER), "
                "or --topology FILE where the command plans offline"
            )
        return Connection.from_options(
            bootstrap_server=self.bootstrap_server,
            command_config=self.command_config,
            zookeeper=self.zookeeper,
            timeout_s=self.timeout_s,
            zookeeper_auth_file=self.zookeeper_auth_file,
        )


def make_context(
    ctx: typer.Context,
    *,
    bootstrap_server: str | None = None,
    command_config: str | None = None,
    zookeeper: str | None = None,
    request_timeout: float | None = None,
    output: Output | None = None,
    zookeeper_auth_file: str | None = None,
) -> Context:
    """Merge command-level options over the global ones given before the command name.

    The ZooKeeper credentials file comes from the command, else the global
    ``--zookeeper-auth-file``, else ``$KOPS_ZOOKEEPER_AUTH_FILE`` (so it reaches every command,
    also those that do not declare the option)."""
    g: GlobalOptions = (ctx.find_root().obj if ctx.find_root().obj else GlobalOptions())
    return Context(
        bootstrap_server=bootstrap_server or g.bootstrap_server,
        command_config=command_config or g.command_config,
        zookeeper=zookeeper or g.zookeeper,
        timeout_s=request_timeout or g.request_timeout or DEFAULT_TIMEOUT_S,
        output=output or g.output or Output.table,
        zookeeper_auth_file=(
            zookeeper_auth_file or getattr(g, "zookeeper_auth_file", None) or os.environ.get(ZOOKEEPER_AUTH_ENV) or None
        ),
    )


#: the options every command that talks to a cluster takes, declared here once (Kafka's names)
CLUSTER_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("bootstrap_server", BootstrapOpt),
    ("command_config", CommandConfigOpt),
    ("zookeeper", ZookeeperOpt),
    ("request_timeout", TimeoutOpt),
    ("output", OutputOpt),
)


def _bundle_parameters(bundle: type) -> list[inspect.Parameter]:
    """The options of an option bundle (a dataclass whose fields are typed with option types), as
    the command parameters they stand for, in field order."""
    hints = get_type_hints(bundle, include_extras=True)
    return [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
            for f in fields(bundle)]


def _with_options(func: Callable[..., Any], options: tuple[tuple[str, Any], ...]) -> Callable[..., Any]:
    sig = inspect.signature(func, eval_str=True)
    params = list(sig.parameters.values())
    if not params or params[0].name != "c":
        raise TypeError(f"{func.__name__}: the first parameter must be `c: Context`")
    # a parameter typed with an option bundle takes the bundle's options in its place
    bundles = {p.name: p.annotation for p in params[1:]
               if isinstance(p.annotation, type) and is_dataclass(p.annotation)}
    field_names = {name: [f.name for f in fields(bundle)] for name, bundle in bundles.items()}
    own = [q for p in params[1:]
           for q in (_bundle_parameters(bundles[p.name]) if p.name in bundles else [p])]
    declared = [p.name for p in own] + [name for name, _ in options]
    taken = sorted({name for name in declared if declared.count(name) > 1})
    if taken:
        raise TypeError(f"{func.__name__}: declares {taken} twice (itself, in a bundle, or as a connection option)")
    names = [name for name, _ in options]

    @functools.wraps(func)
    def command(ctx: typer.Context, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name, None) for name in names}
        for name, bundle in bundles.items():
            kwargs[name] = bundle(**{f: kwargs.pop(f) for f in field_names[name]})
        return func(make_context(ctx, **given), **kwargs)

    kind = inspect.Parameter.KEYWORD_ONLY
    new_sig = sig.replace(parameters=[
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        *(p.replace(kind=kind) for p in own),
        *(inspect.Parameter(name, kind, default=None, annotation=ann) for name, ann in options),
    ])
    # typer reads the signature and the type hints of what it is given: this command's, evaluated
    del command.__wrapped__
    command.__signature__ = new_sig  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in new_sig.parameters.values()}
    return command


def cluster_command(func: Callable[..., Any]) -> Callable[..., Any]:
    """A command that talks to a cluster: it takes ``c: Context`` first, and gets the connection
    options (``--bootstrap-server``, ``--command-config``, ``--zookeeper``, ``--request-timeout``,
    ``--output``) added to its own, merged over the global ones given before the command name.

    A parameter typed with an option bundle (a dataclass whose fields are typed with option types
    and defaults, e.g. :class:`kops.cli.plan.PlanOptions`) stands for the bundle's options, in its
    place and in field order; the command gets them as one bundle object. Options shared by several
    commands are so declared once."""
    return _with_options(func, CLUSTER_OPTIONS)


def output_command(func: Callable[..., Any]) -> Callable[..., Any]:
    """A command that needs no cluster: ``c: Context`` first, and ``--output`` added."""
    return _with_options(func, (("output", OutputOpt),))


# -- rendering ------------------------------------------------------------------------------
_stderr_console = None
_stdout_console = None


def err_console():
    """Rich console on stderr: human text, progress and warnings."""
    global _stderr_console
    if _stderr_console is None:
        from rich.console import Console

        # messages are never cut into 80-column pieces: logs and cron mails stay greppable; no
        # emoji codes: a user's "5:a:1T" or a topic "x:b:y" is printed as typed, not as 🅱
        _stderr_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False,
                                  width=None if sys.stderr.isatty() else 200)
    return _stderr_console


def out_console():
    """Rich console on stdout: tables in human mode."""
    global _stdout_console
    if _stdout_console is None:
        from rich.console import Console

        # piped into a file or grep: no 80-column wrapping of names
        _stdout_console = Console(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 200)
    return _stdout_console


#: whether this command invocation has written its JSON document already (reset per command)
_json_written = False


def reset_json_state() -> None:
    """A new command invocation: it has written no JSON document yet."""
    global _json_written
    _json_written = False


def emit_json(doc: Any) -> None:
    """Exactly one JSON document on stdout."""
    global _json_written
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False, default=str))
    sys.stdout.write("\n")
    sys.stdout.flush()
    _json_written = True


def error_type(e: BaseException | None, exit_code: int) -> str:
    """The stable ``type`` of a JSON error document (what a script branches on)."""
    from kops.errors import AuthorizationError, ClusterError

    if isinstance(e, KeyboardInterrupt):
        return "interrupted"
    if isinstance(e, BadInput) or exit_code == EXIT_BAD_INPUT:
        return "bad_input"
    if isinstance(e, AuthorizationError):
        return "not_authorized"
    if type(e).__name__ == "AuthenticationError":
        return "authentication_failed"
    if isinstance(e, ClusterError):
        return "cluster_error"
    if exit_code == EXIT_NOT_DONE:
        return "not_done"  # e.g. another kops execution holds the cluster lock
    if isinstance(e, KopsError):
        return "failure"
    return "internal_error"


def emit_error_json(exit_code: int, message: str, details: list[str] | None = None, *,
                    exc: BaseException | None = None, kind: str | None = None) -> None:
    """With ``--output json``, a failure is one JSON document on stdout too (the human message
    still goes to stderr): ``{"error": {"exit_code", "type", "class", "message", "details"}}``.
    Nothing is written when the command already wrote its document (one document, never two)."""
    if _json_written:
        return
    emit_json({"error": {
        "exit_code": exit_code,
        "type": kind or error_type(exc, exit_code),
        "class": type(exc).__name__ if exc is not None else None,
        "message": message,
        "details": list(details or []),
    }})


def json_requested(*values: Any, args: list[str] | tuple[str, ...] = ()) -> bool:
    """Is JSON output asked for: by an ``--output`` value given (command or global option),
    in raw arguments not parsed yet, or by ``$KOPS_OUTPUT``."""
    for v in values:
        if v is not None:
            return str(getattr(v, "value", v)).lower() == "json"
    args = list(args)
    for i, a in enumerate(args):
        if a in ("--output", "-o") and i + 1 < len(args):
            return args[i + 1].lower() == "json"
        if a.startswith("--output="):
            return a.split("=", 1)[1].lower() == "json"
    return os.environ.get("KOPS_OUTPUT", "").lower() == "json"


def _json_mode(args: tuple, kwargs: dict) -> bool:
    """JSON mode of the running command: its own ``--output``, else the global one, else env."""
    ctx = kwargs.get("ctx") or next((a for a in args if isinstance(a, typer.Context)), None)
    if ctx is None:
        try:
            from typer._click.globals import get_current_context  # typer vendors click
        except ImportError:  # pragma: no cover - older typer on top of click
            from click import get_current_context
        ctx = get_current_context(silent=True)
    root = ctx.find_root().obj if ctx is not None else None
    return json_requested(kwargs.get("output"), getattr(root, "output", None))


def note(message: str) -> None:
    err_console().print(message)


F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(fn: F) -> F:
    """Turn :class:`KopsError` into a clear message and its exit code (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        reset_json_state()
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except KopsError as e:
            _report(e)
            if _json_mode(args, kwargs):
                emit_error_json(e.exit_code, e.message, e.details, exc=e)
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt as e:
            err_console().print("[red]interrupted[/red]")
            if _json_mode(args, kwargs):
                emit_error_json(130, "interrupted", exc=e)
            raise typer.Exit(130) from None
        except Exception as e:  # a bug or an unexpected client error: say what, exit 1
            if os.environ.get("KOPS_DEBUG"):
                raise
            from rich.markup import escape

            from kops.cluster.connection import is_authentication_error, is_authorization_error
            from kops.cluster.redact import redact

            kind = None
            if is_authorization_error(e) or is_authentication_error(e):
                kind = "not authorized" if is_authorization_error(e) else "authentication failed"
                message = f"{kind}: {type(e).__name__}: {redact(str(e))}"
                err_console().print(f"[red]error:[/red] {escape(message)}")
            else:
                message = f"{type(e).__name__}: {redact(str(e))}"
                err_console().print(f"[red]error:[/red] {escape(message)}")
                err_console().print("(set KOPS_DEBUG=1 for a traceback)")
            if _json_mode(args, kwargs):
                emit_error_json(EXIT_FAILURE, message, exc=e, kind=kind and kind.replace(" ", "_"))
            raise typer.Exit(EXIT_FAILURE) from None

    return wrapper  # type: ignore[return-value]


def _report(e: KopsError) -> None:
    from rich.markup import escape

    con = err_console()
    color = "red" if e.label == "error" else "yellow"
    con.print(f"[{color}]{e.label}:[/{color}] {escape(e.message)}")
    for d in e.details[:200]:
        con.print(f"  - {escape(d)}")
    if len(e.details) > 200:
        con.print(f"  ... and {len(e.details) - 200} more")


def load_topology(ctx: Context, topology_file: str | None, *, with_zookeeper: bool | None = None,
                  cordons: bool = False):
    """The topology a command works on: a snapshot file, or the live cluster.

    ``with_zookeeper`` defaults to "when --zookeeper was given"; ``cordons``: with the brokers
    kops' records cordon marked (:mod:`kops.ops.cordon`; a snapshot carries its own).
    """
    if topology_file:
        from kops.cluster.snapshot import load_topology as _load

        return _load(topology_file)
    from kops.cluster.topology import ReadOptions, read_topology

    use_zk = bool(ctx.zookeeper) if with_zookeeper is None else with_zookeeper
    with ctx.connection() as conn:
        topo = read_topology(conn, ReadOptions(with_zookeeper=use_zk))
        if cordons:
            from kops.ops import cordon

            topo = cordon.apply(conn, topo)
        return topo


def refuse(c: Context, problems, cluster_problems: Callable[[Any], list[str]], *,
           topology_file: str | None = None):
    """:func:`kops.cluster.references.refuse` with this command's cluster: its ``--topology``
    snapshot, or its bootstrap server when it answers at once."""
    from kops.cluster.references import refuse as refuse_with

    refuse_with(problems, cluster_problems, topology_file=topology_file, bootstrap=c.bootstrap_server,
                connect=c.connection)
