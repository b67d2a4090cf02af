"""``kops sandbox up | down | status | stop | start | add | remove``, and faults: a real local multi-rack Kafka cluster.

Light imports only; the implementation (kops.sandbox.cluster) is imported inside the commands.
"""

from __future__ import annotations

import time
from enum import Enum
from typing import Annotated, Any

import typer

from kops.cli import params
from kops.cli.common import (
    Context,
    emit_json,
    err_console,
    handle_errors,
    out_console,
    output_command,
)
from kops.sandbox import dist

app = typer.Typer(
    help=(
        "A real local Kafka cluster for demos and tests: ZooKeeper + 6 brokers over racks a,a,b,b,c,c "
        f"(Kafka {dist.DEFAULT_VERSION} jars from Maven Central, cached in ~/.cache/kops), or KRaft with Kafka "
        f"{dist.DEFAULT_KRAFT_VERSION} (--mode kraft); any Kafka from 2.8 with --kafka-version. Processes listen on 127.0.0.1 only; state, configs, data and logs live in "
        "the work dir (~/.kops/sandbox, env KOPS_SANDBOX_DIR), so later commands find the cluster."
    ),
    no_args_is_help=True,
)


class Mode(str, Enum):
    zookeeper = "zookeeper"
    kraft = "kraft"


class Engine(str, Enum):
    jvm = "jvm"
    docker = "docker"


class Phase(str, Enum):
    migrate = "migrate"
    kraft = "kraft"
    zookeeper = "zookeeper"


class Security(str, Enum):
    none = "none"
    sasl_plaintext = "sasl_plaintext"
    sasl_ssl = "sasl_ssl"


WorkdirOpt = Annotated[
    str | None,
    typer.Option(
        "--workdir",
        envvar="KOPS_SANDBOX_DIR",
        help="Sandbox work dir: state file, configs, data, logs (default ~/.kops/sandbox; env KOPS_SANDBOX_DIR).",
    ),
]
BrokerOpt = Annotated[int | None, typer.Option("--broker", click_type=params.BROKER, help="One broker, by id.")]
RackOpt = Annotated[str | None, typer.Option("--rack", help="Every broker of this rack.")]
TimeoutSOpt = Annotated[
    float | None, typer.Option("--timeout", click_type=params.seconds(1.0),
                               help="Seconds to wait before failing (default 120 to start, 60 to stop). A start waits on "
                                    "past it while a node it waits for still logs its start-up (a loaded "
                                    "machine), up to 3 times as long.")
]


def _log(msg: str) -> None:
    from rich.markup import escape

    err_console().print(f"[dim]{escape(msg)}[/dim]", soft_wrap=True)


def _attach(workdir: str | None):
    from kops.sandbox.opening import attach

    return attach(workdir, log=_log)


def _status_rows(sb) -> list[dict[str, Any]]:
    return [s.to_dict() for s in sb.status()]


def _render_status(rows: list[dict[str, Any]], title: str | None = None) -> None:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col in ("process", "id", "rack", "port", "pid", "state"):
        t.add_column(col, justify="right" if col in ("id", "port", "pid") else "left")
    for r in rows:
        if r["alive"]:
            state = "[green]alive[/green]" + (" (controller)" if r.get("controller") else "")
        elif r["running"]:
            state = "[yellow]running, not registered[/yellow]"
        else:
            state = "[red]stopped[/red]"
        t.add_row(
            r["name"],
            "" if r["id"] is None else str(r["id"]),
            r["rack"] or "",
            str(r["port"]),
            "" if r["pid"] is None else str(r["pid"]),
            state,
        )
    out_console().print(t)


@app.command()
@handle_errors
@output_command
def up(
    c: Context,
    brokers: Annotated[int | None, typer.Option("--brokers", min=1, max=50, help="Number of brokers (default 6).")] = None,
    racks: Annotated[
        str | None,
        typer.Option(
            "--racks",
            help=(
                "Rack of each broker: one per broker in id order (a,a,b,b,c,c; multi-level "
                "/dc1/r1,/dc1/r1,/dc1/r2,...) or id:rack pairs (0:/dc1/r1,1:/dc1/r2,...). "
                "Default: brokers split over racks a, b, c."
            ),
        ),
    ] = None,
    zookeeper_port: Annotated[
        int | None, typer.Option("--zookeeper-port", min=1024, max=65535, help="ZooKeeper client port (default 2181).")
    ] = None,
    base_port: Annotated[
        int | None,
        typer.Option("--base-port", min=1024, max=65535, help="Port of the first broker; broker i gets base+i (default 9092)."),
    ] = None,
    workdir: WorkdirOpt = None,
    heap: Annotated[str | None, typer.Option("--heap", help="Broker JVM heap, -Xmx (default 384m).")] = None,
    mode: Annotated[
        Mode | None,
        typer.Option("--mode", help="zookeeper: Kafka + ZooKeeper (default; Kafka 2.8 - 3.9); kraft: KRaft "
                                    "controllers (Kafka 3.7 and later)."),
    ] = None,
    kafka_version: Annotated[
        str | None, typer.Option("--kafka-version", help=f"Kafka version from Maven Central, 2.8 or later (default "
                                 f"{dist.DEFAULT_VERSION}; kraft {dist.DEFAULT_KRAFT_VERSION}); every one runs on Java 17.")
    ] = None,
    controllers: Annotated[
        int | None, typer.Option("--controllers", help="KRaft controller quorum size: 1 (default) or 3.")
    ] = None,
    auto_leader_rebalance: Annotated[
        bool | None,
        typer.Option(
            "--auto-leader-rebalance/--no-auto-leader-rebalance",
            help="Kafka's own auto.leader.rebalance.enable (default off: kops restores leaders).",
        ),
    ] = None,
    controller_port: Annotated[
        int | None,
        typer.Option("--controller-port", min=1024, max=65535,
                     help="KRaft: port of the first controller; controller i gets port+i (default 9192)."),
    ] = None,
    state_change_log_level: Annotated[
        str | None,
        typer.Option("--state-change-log-level",
                     help="Level of state.change.logger (state-change.log): INFO as Kafka ships it, or TRACE."),
    ] = None,
    release_version: Annotated[
        str | None,
        typer.Option("--release-version", metavar="RELEASE",
                     help="KRaft: format the storage at this metadata.version (e.g. 3.9 or 3.9-IV0; Kafka's "
                          "`kafka-storage.sh format --release-version`) instead of the Kafka's latest, to "
                          "rehearse an upgrade's last step (`kops cluster features upgrade`, the upgrade "
                          "playbook)."),
    ] = None,
    security: Annotated[
        Security | None,
        typer.Option(
            "--security",
            help=(
                "none (default): PLAINTEXT. sasl_ssl / sasl_plaintext: SCRAM-SHA-512 users admin (super "
                "user) and kops-user (unprivileged), TLS with a throwaway CA (sasl_ssl), inter-broker "
                "traffic secured, AclAuthorizer, ZooKeeper requiring SASL (DIGEST-MD5) with "
                "zookeeper.set.acl=true. Writes client properties files (paths printed, secrets never). "
                "ZooKeeper mode; kept through a migration to KRaft (`kops sandbox migration`)."
            ),
        ),
    ] = None,
    engine: Annotated[
        Engine | None,
        typer.Option(
            "--engine",
            help=(
                "jvm (default): local JVM processes. docker: one container per node on a network the "
                "sandbox creates, ports published on 127.0.0.1; the image is built locally the first "
                "time (see `kops sandbox image build`); allows network faults (partition, slow, heal). "
                "Uses the engine at DOCKER_HOST, or starts a private dockerd (root) when none answers."
            ),
        ),
    ] = None,
    data_disk: Annotated[
        list[str] | None,
        typer.Option(
            "--data-disk",
            help=(
                "ID:SIZE, repeatable (--engine docker): broker ID gets a data disk of its own of SIZE "
                "(e.g. 5:256MB), a loop-mounted ext4 file system, so that it can really fill "
                "(`kops sandbox fill-disk`); with --log-dirs N each of its N log dirs is a disk of its own "
                "of SIZE, which `kops sandbox fail-log-dir` fails as a disk fails (EIO). Needs root."
            ),
        ),
    ] = None,
    log_dirs: Annotated[
        int | None,
        typer.Option(
            "--log-dirs", min=1, max=8,
            help=(
                "Log dirs per broker (JBOD; default 1): broker-<id>/data, data-1, ... in log.dirs. ZooKeeper "
                "mode, and KRaft mode from Kafka 3.7 (KIP-858). `kops sandbox fail-log-dir` fails one of them."
            ),
        ),
    ] = None,
    dynamic_quorum: Annotated[
        bool | None,
        typer.Option("--dynamic-quorum/--static-quorum",
                     help="KRaft, Kafka 3.9+: a dynamic quorum (KIP-853): the controllers formatted with "
                          "--initial-controllers (kraft.version 1) and found through "
                          "controller.quorum.bootstrap.servers, so that `kops sandbox controller add / remove` "
                          "and the replace-controller playbook can change it. Default static "
                          "(controller.quorum.voters)."),
    ] = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Start the sandbox (or check the running one) and wait until every broker is registered
    and a controller is elected; print the bootstrap servers and the ZooKeeper connect string.

    The first run fetches Kafka's jars with Maven (once). A sandbox already running in the work
    dir is reused (nothing is started twice); one with different settings is an error (exit 2).
    """
    from kops.sandbox.opening import open_sandbox

    overrides: dict[str, Any] = {
        "brokers": brokers,
        "racks": racks,
        "zookeeper_port": zookeeper_port,
        "base_port": base_port,
        "heap": heap,
        "mode": mode.value if mode else None,
        "kafka_version": kafka_version,
        "controllers": controllers,
        "auto_leader_rebalance": auto_leader_rebalance,
        "controller_base_port": controller_port,
        "state_change_log_level": state_change_log_level.upper() if state_change_log_level else None,
        "release_version": release_version,
        "security": security.value if security else None,
        "engine": engine.value if engine else None,
        "data_disk_mb": _data_disks(data_disk) if data_disk else None,
        "log_dirs": log_dirs,
        "dynamic_quorum": dynamic_quorum,
    }
    sb = open_sandbox(workdir, log=_log, **overrides)
    t0 = time.monotonic()
    sb.up(timeout_s=timeout)
    secs = round(time.monotonic() - t0, 1)
    already = not sb.started_now
    if c.json:
        emit_json({**sb.to_dict(), "already_running": already, "started": sb.started_now, "seconds": secs})
        return
    con = out_console()
    head = "already running" if already else f"started {len(sb.started_now)} processes in {secs}s"
    where = f", engine {sb.config.engine}" if sb.config.engine != "jvm" else ""
    con.print(f"sandbox up ({sb.mode} mode, Kafka {sb.kafka_version}{where}, {head}) in {sb.workdir}", soft_wrap=True)
    con.print(f"bootstrap servers:  {sb.bootstrap_servers}", soft_wrap=True)
    if sb.zookeeper_connect:
        con.print(f"zookeeper connect:  {sb.zookeeper_connect}", soft_wrap=True)
    if sb.cluster_id:
        con.print(f"cluster id:         {sb.cluster_id}", soft_wrap=True)
    con.print("brokers:            " + ", ".join(f"{b}@{sb.rack_of(b)}" for b in sb.broker_ids), soft_wrap=True)
    env = f"export KOPS_BOOTSTRAP_SERVER={sb.bootstrap_servers}"
    if sb.zookeeper_connect:
        env += f" KOPS_ZOOKEEPER={sb.zookeeper_connect}"
    con.print(env, soft_wrap=True)
    if sb.admin_config is not None:  # paths only: the files hold the passwords
        con.print(f"security:           {sb.security} (SCRAM-SHA-512; ZooKeeper SASL/DIGEST-MD5)", soft_wrap=True)
        con.print(f"admin (super user): --command-config {sb.admin_config}", soft_wrap=True)
        con.print(f"unprivileged user:  --command-config {sb.user_config}", soft_wrap=True)
        con.print(f"ZooKeeper auth:     --zookeeper-auth-file {sb.zookeeper_auth_file}", soft_wrap=True)
        con.print(
            f"export KOPS_COMMAND_CONFIG={sb.admin_config} KOPS_ZOOKEEPER_AUTH_FILE={sb.zookeeper_auth_file}",
            soft_wrap=True,
        )


@app.command()
@handle_errors
@output_command
def down(
    c: Context,
    purge: Annotated[bool, typer.Option("--purge", help="Also delete the sandbox's data, logs and state.")] = False,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Stop every process the sandbox started (graceful SIGTERM, SIGKILL after the timeout), and
    nothing else. Data and logs stay for the next `up` unless --purge."""
    from kops.sandbox.opening import exists

    if not exists(workdir):
        from kops.sandbox.config import default_workdir

        wd = workdir or str(default_workdir())
        if c.json:
            emit_json({"workdir": wd, "stopped": [], "purged": False, "note": "no sandbox"})
        else:
            err_console().print(f"no sandbox in {wd}: nothing to stop")
        return
    sb = _attach(workdir)
    stopped = sb.down(purge=purge, timeout_s=timeout)
    if c.json:
        emit_json({"workdir": str(sb.workdir), "stopped": stopped, "purged": purge})
        return
    msg = f"stopped {', '.join(stopped)}" if stopped else "nothing was running"
    out_console().print(f"sandbox down in {sb.workdir}: {msg}" + ("; files deleted" if purge else ""), soft_wrap=True)


@app.command()
@handle_errors
@output_command
def status(c: Context, workdir: WorkdirOpt = None) -> None:
    """Each process of the sandbox: ZooKeeper (or KRaft controllers) and every broker with its
    rack, port, pid and whether it is alive (running and registered). Exit 0 when everything is
    alive, 3 when some process is not, 1 when there is no sandbox."""
    sb = _attach(workdir)
    rows = _status_rows(sb)
    all_alive = all(r["alive"] for r in rows)
    if c.json:
        emit_json({**sb.to_dict(), "processes": rows, "all_alive": all_alive})
    else:
        _render_status(rows, title=f"sandbox {sb.workdir} ({sb.mode}, Kafka {sb.kafka_version})")
        out_console().print(f"bootstrap servers: {sb.bootstrap_servers}", soft_wrap=True)
        if sb.zookeeper_connect:
            out_console().print(f"zookeeper connect: {sb.zookeeper_connect}", soft_wrap=True)
    if not all_alive:
        raise typer.Exit(3)


def _size_bytes(value: str, what: str) -> int:
    from kops.inputs import values
    return values.check(what, values.size, value)


def _data_disks(specs: list[str]) -> dict[int, int]:
    from kops.errors import BadInput

    out: dict[int, int] = {}
    for spec in specs:
        bid, sep, size = spec.partition(":")
        if not sep or not bid.strip().isdigit():
            raise BadInput(f"--data-disk {spec!r}: expected BROKER_ID:SIZE, e.g. 5:256MB")
        out[int(bid)] = _size_bytes(size, f"--data-disk {spec!r}") // 2**20
    return out


def _one_target(broker: int | None, rack: str | None) -> None:
    from kops.errors import BadInput

    if (broker is None) == (rack is None):
        raise BadInput("name exactly one target: --broker ID or --rack R")


@app.command()
@handle_errors
@output_command
def stop(
    c: Context,
    broker: BrokerOpt = None,
    rack: RackOpt = None,
    kill: Annotated[
        bool, typer.Option("--kill", help="SIGKILL (a crash) instead of a graceful controlled shutdown.")
    ] = False,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Stop one broker (--broker) or a whole rack (--rack). Graceful by default: Kafka's controlled
    shutdown moves leadership away; returns once the brokers exited and left the cluster
    (ZooKeeper registration gone). --kill simulates a crash."""
    _one_target(broker, rack)
    sb = _attach(workdir)
    done = sb.stop(broker, rack=rack, kill=kill, timeout_s=timeout)
    _report("stop", sb, done, c.json, kill=kill)


@app.command()
@handle_errors
@output_command
def start(
    c: Context,
    broker: BrokerOpt = None,
    rack: RackOpt = None,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Start stopped brokers again (--broker or --rack) with their config and data; returns once
    they are registered. Brokers that already run are left alone."""
    _one_target(broker, rack)
    sb = _attach(workdir)
    done = sb.start(broker, rack=rack, timeout_s=timeout)
    _report("start", sb, done, c.json)


@app.command()
@handle_errors
@output_command
def restart(
    c: Context,
    broker: Annotated[int, typer.Option("--broker", click_type=params.BROKER, help="The broker to restart.")],
    phase: Annotated[
        Phase | None,
        typer.Option("--phase", help="ZooKeeper -> KRaft migration: bring the broker back as a ZooKeeper broker in "
                                     "migration mode (migrate) or as a KRaft broker (kraft, once the metadata is "
                                     "migrated); Kafka's revert: a KRaft broker back in migration mode (migrate), "
                                     "then, once the controllers are gone (`migration controllers-down`), a plain "
                                     "ZooKeeper broker (zookeeper); recorded in the sandbox's state. See `kops "
                                     "sandbox migration`."),
    ] = None,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Restart one broker (both engines): a graceful stop (controlled shutdown; returns once it
    left the cluster), then a start with its config and data (returns once it is registered
    again). This is the sandbox's restart hook for the rolling-restart playbook:

        kops playbook run rolling-restart --param restart_command='kops sandbox restart --broker {broker}'

    A broker that is not running is started; while a migration is reverted, a broker still in
    migration mode comes back as a plain ZooKeeper broker (as with --phase zookeeper). Exit 1
    when it does not stop or start in time; exit 2 for a --phase out of the migration's order
    (nothing changed)."""
    from kops.sandbox.migration import plain_restart_phase

    sb = _attach(workdir)
    to = phase.value if phase is not None else plain_restart_phase(sb.config, broker)
    if to is not None:
        was_running = sb.migration.restart(broker, to, timeout_s=timeout)
    else:
        was_running = bool(sb.stop(broker, timeout_s=timeout))
        sb.start(broker, timeout_s=timeout)
    _report("restart", sb, [broker], c.json, extra={"was_running": was_running,
                                                     "phase": sb.config.broker_phase(broker)})


@app.command()
@handle_errors
@output_command
def upgrade(
    c: Context,
    kafka_version: Annotated[
        str, typer.Option("--kafka-version", help="The Kafka version to run (from Maven Central; e.g. 4.4.0).")],
    broker: Annotated[
        int | None, typer.Option("--broker", click_type=params.BROKER, help="The broker to upgrade and restart.")
    ] = None,
    controllers: Annotated[
        bool, typer.Option("--controllers", help="The KRaft controllers instead, one at a time, each started and "
                                                 "caught up with the quorum before the next.")
    ] = False,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Upgrade one broker, or the KRaft controllers, to another Kafka version (local JVMs): the
    new version's jars are fetched first, then each node is stopped gracefully and started on
    them with its config and data; the sandbox records which node runs which Kafka. Only the
    binaries change: the metadata.version stays until the upgrade playbook (or `kops cluster
    features upgrade`) raises it, and until then the same verb takes a node back. These are the
    sandbox's hooks for the upgrade playbook:

    \b
        kops playbook run upgrade -p release_version=4.4
          -p controllers_command='kops sandbox upgrade --controllers --kafka-version 4.4.0'
          -p upgrade_command='kops sandbox upgrade --broker {broker} --kafka-version 4.4.0'

    Exit 2 (nothing changed) for a version that cannot run the sandbox's mode (ZooKeeper mode up
    to 3.9, KRaft from 3.7), the docker engine, or a ZooKeeper -> KRaft migration in progress;
    exit 1 when a node does not stop, start or catch up in time."""
    from kops.errors import BadInput

    if (broker is None) == (not controllers):
        raise BadInput("name one broker (--broker B) or the controllers (--controllers)")
    sb = _attach(workdir)
    if controllers:
        done = sb.upgrade.controllers(kafka_version, timeout_s=timeout)
        extra = {"controllers": done, "kafka_version": kafka_version}
        if c.json:
            emit_json({"action": "upgrade", **extra, "processes": _status_rows(sb)})
            return
        out_console().print(f"KRaft controllers {', '.join(map(str, done)) or '(none: all ran it already)'} "
                            f"restarted on Kafka {kafka_version}, each caught up with the quorum", soft_wrap=True)
        _render_status(_status_rows(sb))
        return
    was_running = sb.upgrade.broker(broker, kafka_version, timeout_s=timeout)  # type: ignore[arg-type]
    if c.json:
        emit_json({"action": "upgrade", "brokers": [broker], "kafka_version": kafka_version,
                   "was_running": was_running, "processes": _status_rows(sb)})
        return
    out_console().print(f"broker {broker} {'restarted' if was_running else 'started'} on Kafka {kafka_version}",
                        soft_wrap=True)
    _render_status(_status_rows(sb))


@app.command()
@handle_errors
@output_command
def add(
    c: Context,
    broker: Annotated[int, typer.Option("--broker", click_type=params.BROKER, help="Id of the new broker (not in use).")],
    rack: Annotated[str, typer.Option("--rack", help="Its rack: a new rack or one of the others' (same shape: "
                                                     "plain ids, or /dc/rack paths of the same depth).")],
    port: Annotated[
        int | None,
        typer.Option("--port", min=1024, max=65535,
                     help="Its port on 127.0.0.1 (default: the first free port above the sandbox's ports)."),
    ] = None,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Grow the running sandbox by a new broker id in a rack (both engines, ZooKeeper and KRaft
    mode): its config is written like the other brokers', it is started and the command returns
    once it is registered and in the cluster metadata, as `start` does. The broker is recorded in
    the work dir, so stop/start/status/down know it from then on. It starts empty: moving replicas
    onto it is kops' work (`kops playbook run add-brokers` or `replace-broker`). An id taken out
    earlier with `remove` (without --purge) comes back with its data.

    Exit 2 (nothing changed) for an id in use, a malformed rack or a --port that is taken; exit 1
    when the broker does not come up (it is stopped and forgotten again, its logs are kept)."""
    sb = _attach(workdir)
    got = sb.add(broker, rack, port=port, timeout_s=timeout)
    _report("add", sb, [broker], c.json, extra={"rack": sb.rack_of(broker), "port": got,
                                                 "bootstrap_servers": sb.bootstrap_servers})


@app.command()
@handle_errors
@output_command
def remove(
    c: Context,
    broker: Annotated[int, typer.Option("--broker", click_type=params.BROKER,
                                        help="The broker to take out of the sandbox for good.")],
    purge: Annotated[bool, typer.Option("--purge", help="Also delete its data, logs and config file.")] = False,
    kill: Annotated[bool, typer.Option("--kill", help="SIGKILL it if it runs, instead of a controlled shutdown.")] = False,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Take a broker out of the sandbox for good (a broker lost, or decommissioned): stop it if it
    runs (returns once it left the cluster) and forget it, so start/up/status no longer know it.
    Its data and logs stay in the work dir unless --purge. The cluster still assigns it its
    replicas until they are moved (`kops playbook run replace-broker` or `decommission-broker`).
    Exit 2 for an unknown broker or the sandbox's last one."""
    sb = _attach(workdir)
    was_running = sb.remove(broker, purge=purge, kill=kill, timeout_s=timeout)
    _report("remove", sb, [broker], c.json, extra={"was_running": was_running, "purged": purge,
                                                    "bootstrap_servers": sb.bootstrap_servers})


def _report(action: str, sb, done: list[int], as_json: bool, *, kill: bool = False,
            extra: dict[str, Any] | None = None) -> None:
    rows = _status_rows(sb)
    if as_json:
        doc: dict[str, Any] = {"action": action, "brokers": done, **(extra or {}), "processes": rows}
        if action == "stop":
            doc["kill"] = kill
        emit_json(doc)
        return
    if action == "add":
        out_console().print(f"added broker {done[0]} in rack {extra['rack']} on port {extra['port']}; "  # type: ignore[index]
                            f"bootstrap servers: {sb.bootstrap_servers}", soft_wrap=True)
        _render_status(rows)
        return
    if action == "remove":
        x = extra or {}
        out_console().print(f"removed broker {done[0]}" + (" (stopped it)" if x.get("was_running") else "")
                            + ("; its data and logs deleted" if x.get("purged") else "; its data and logs kept")
                            + f"; bootstrap servers: {sb.bootstrap_servers}", soft_wrap=True)
        _render_status(rows)
        return
    if action == "restart":
        was = (extra or {}).get("was_running")
        out_console().print(f"restarted broker {', '.join(map(str, done))}" if was else
                            f"broker {', '.join(map(str, done))} was not running: started it", soft_wrap=True)
        _render_status(rows)
        return
    verb = {"stop": "killed" if kill else "stopped", "start": "started"}[action]
    if done:
        out_console().print(f"{verb} brokers {', '.join(map(str, done))}", soft_wrap=True)
    else:
        out_console().print(f"nothing to do: the brokers were already {'stopped' if action == 'stop' else 'running'}", soft_wrap=True)
    _render_status(rows)


# -- faults on the containerised sandbox ------------------------------------------------------------
def _attach_docker(workdir: str | None):
    from kops.errors import BadInput

    sb = _attach(workdir)
    if sb.config.engine != "docker":
        raise BadInput(
            f"the sandbox in {sb.workdir} runs on local JVMs: network faults need containers "
            "(`kops sandbox down --purge`, then `kops sandbox up --engine docker`)"
        )
    return sb


def _faults_report(sb, as_json: bool, text: str) -> None:
    if as_json:
        emit_json({"faults": sb.to_dict()["faults"], "message": text})
    else:
        out_console().print(text, soft_wrap=True)


@app.command()
@handle_errors
@output_command
def partition(
    c: Context,
    broker: BrokerOpt = None,
    rack: RackOpt = None,
    from_host: Annotated[
        bool, typer.Option("--from-host", help="Also cut them off from this machine (clients here lose them too).")
    ] = False,
    workdir: WorkdirOpt = None,
) -> None:
    """Cut one broker (--broker) or a whole rack (--rack) off from every other node of the
    cluster (brokers, ZooKeeper or controllers), both ways, until `kops sandbox heal`. The
    brokers keep running: a network partition, not a crash. Needs --engine docker."""
    _one_target(broker, rack)
    sb = _attach_docker(workdir)
    ids = sb.faults.partition(broker, rack=rack, from_host=from_host)
    _faults_report(sb, c.json, f"partitioned brokers {', '.join(map(str, ids))} from the rest of the cluster"
                   + (" and from this host" if from_host else "") + "; `kops sandbox heal` ends it")


@app.command("cut-off-host")
@handle_errors
@output_command
def cut_off_host(c: Context, workdir: WorkdirOpt = None) -> None:
    """Cut this machine off from every node of the cluster (brokers, ZooKeeper or controllers),
    both ways, until `kops sandbox heal`. The nodes keep reaching each other: clients here (kops
    itself) lose a cluster that goes on, as when the host that runs kops loses its network.
    Needs --engine docker."""
    sb = _attach_docker(workdir)
    sb.faults.cut_host()
    _faults_report(sb, c.json, "this host is cut off from every node of the cluster; `kops sandbox heal` ends it")


@app.command()
@handle_errors
@output_command
def slow(
    c: Context,
    broker: BrokerOpt = None,
    rack: RackOpt = None,
    controller: Annotated[int | None, typer.Option(
        "--controller", metavar="ID", help="One KRaft controller, by node id (a KRaft sandbox's quorum).")] = None,
    delay: Annotated[str, typer.Option("--delay", help="Added delay of every packet they send: 300ms, 1s.")] = "0ms",
    loss: Annotated[str, typer.Option("--loss", help="Share of the packets they send that is dropped: 5%.")] = "0%",
    workdir: WorkdirOpt = None,
) -> None:
    """A slow, lossy link for one broker, a whole rack or one KRaft controller, until `kops
    sandbox heal`: every packet they send is delayed by --delay and --loss of them are dropped
    (netem inside the containers; where the kernel has no netem, iptables drops and an NFQUEUE
    delayer). Needs --engine docker."""
    from kops.errors import BadInput
    from kops.sandbox.containers import parse_duration_ms, parse_percent

    if controller is not None and (broker is not None or rack is not None):
        raise BadInput("name exactly one target: --broker ID, --rack R or --controller ID")
    if controller is None:
        _one_target(broker, rack)
    delay_ms, loss_pct = parse_duration_ms(delay), parse_percent(loss)
    sb = _attach_docker(workdir)
    if controller is not None:
        sb.faults.slow_node(controller, delay_ms=delay_ms, loss_pct=loss_pct)
        what = f"controller {controller}"
    else:
        what = "brokers " + ", ".join(map(str, sb.faults.slow(broker, rack=rack, delay_ms=delay_ms, loss_pct=loss_pct)))
    _faults_report(sb, c.json, f"{what}: +{delay_ms:.0f} ms, {loss_pct:g}% loss on what it sends; "
                   "`kops sandbox heal` ends it")


@app.command()
@handle_errors
@output_command
def heal(c: Context, workdir: WorkdirOpt = None) -> None:
    """End every network fault of the sandbox (partitions and slow links). Needs --engine docker."""
    sb = _attach_docker(workdir)
    n = sb.faults.heal()
    _faults_report(sb, c.json, f"healed: {n} fault(s) removed" if n else "no fault to heal")


@app.command("fill-disk")
@handle_errors
@output_command
def fill_disk(
    c: Context,
    broker: Annotated[int, typer.Option("--broker", click_type=params.BROKER, help="A broker started with --data-disk.")],
    leave: Annotated[
        str | None, typer.Option("--leave", help="Free space to leave on its disk, e.g. 20MB.")
    ] = None,
    release: Annotated[bool, typer.Option("--release", help="Give the space taken back.")] = False,
    workdir: WorkdirOpt = None,
) -> None:
    """Fill a broker's small data disk (given at `up --data-disk ID:SIZE`) until only --leave is
    free, as if other data had grown there, or --release the space again. The broker's own data
    stays; Kafka sees the disk filling (DescribeLogDirs usable bytes), and so do kops' checks.
    It first waits until the broker has removed the logs of deleted topics, whose space would
    otherwise come back after the fill. With --log-dirs N: the disk of its first log dir (data)."""
    from kops.errors import BadInput

    if (leave is None) == (not release):
        raise BadInput("give --leave SIZE (fill) or --release (give the space back)")
    sb = _attach_docker(workdir)
    if release:
        done = sb.faults.release_disk(broker)
        text = f"broker {broker}: data disk space given back" if done else f"broker {broker}: nothing to release"
    else:
        taken = sb.faults.fill_disk(broker, leave_bytes=_size_bytes(leave, "--leave"))
        text = f"broker {broker}: took {taken / 2**20:.1f} MiB, {leave} left free"
    total, free = sb.faults.disk_usage(broker)
    if c.json:
        emit_json({"broker": broker, "total_bytes": total, "free_bytes": free, "message": text})
    else:
        out_console().print(f"{text} (disk {total / 2**20:.0f} MiB, {free / 2**20:.1f} MiB free)", soft_wrap=True)


@app.command("fail-log-dir")
@handle_errors
@output_command
def fail_log_dir(
    c: Context,
    broker: Annotated[int, typer.Option("--broker", click_type=params.BROKER,
                                        help="A running broker of a sandbox started with --log-dirs 2 or more.")],
    dir_index: Annotated[
        int | None, typer.Option("--dir", min=0, metavar="INDEX",
                                 help="Which of its log dirs, by index in log.dirs (0: data, 1: data-1, ...); "
                                      "default the last.")
    ] = None,
    restore: Annotated[bool, typer.Option(
        "--restore", help="Undo: put the broker's failed log dirs back (a shut-down disk is mounted afresh) and "
                          "restart it (Kafka brings an offline dir back only at start-up); returns once it reports "
                          "every dir online.")] = False,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Make one log dir of a JBOD broker fail for real (both engines, ZooKeeper and KRaft mode): a
    dir that is a disk of its own (`up --engine docker --data-disk B:SIZE --log-dirs N`) is shut
    down (ext4 shutdown: every write to it fails with EIO, as on a failing disk); any other dir has
    its data moved aside (to <dir>.kops-failed) and a file takes its place. Kafka's next write
    there fails with an IOException and Kafka takes the dir offline: its replicas leave their
    ISR, leaders move, the broker stays up on its other dirs. Returns once the broker
    reports the dir offline (DescribeLogDirs: KAFKA_STORAGE_ERROR); exit 1 if it does not
    within --timeout (default 60 s). A broker restarted meanwhile keeps the dir offline.

    Undo with --restore. Exit 2 (nothing done) for a broker with one log dir, a KRaft broker's
    dir 0 (its metadata log: Kafka would stop the broker), its last online dir, or a broker
    that is not running."""
    from kops.errors import BadInput

    if restore and dir_index is not None:
        raise BadInput("--restore puts back every failed log dir of the broker: leave --dir out")
    sb = _attach(workdir)
    if restore:
        done = sb.faults.restore_log_dirs(broker, **({"timeout_s": timeout} if timeout else {}))
        text = (f"broker {broker}: restored {', '.join(map(str, done))}; every log dir online" if done
                else f"broker {broker}: no failed log dir to restore")
        dirs = [str(d) for d in done]
    else:
        target = sb.faults.fail_log_dir(broker, dir_index, **({"timeout_s": timeout} if timeout else {}))
        text = (f"broker {broker}: log dir {target} failed and reported offline by the broker; "
                f"`kops sandbox fail-log-dir --broker {broker} --restore` undoes it")
        dirs = [str(target)]
    offline = sb.faults.offline_log_dirs(broker)
    if c.json:
        emit_json({"broker": broker, "action": "restore" if restore else "fail", "log_dirs": dirs,
                   "offline_log_dirs": offline, "message": text})
    else:
        out_console().print(text, soft_wrap=True)


migration_app = typer.Typer(
    help=("A ZooKeeper -> KRaft migration (KIP-866) of a ZooKeeper-mode sandbox (Kafka 3.7 - 3.9), step by step: "
          "controllers-up, `kops sandbox restart --broker B --phase migrate` for each broker, wait --state "
          "MIGRATION, `restart --phase kraft` for each broker, finalize. Before finalize, Kafka's revert: "
          "`restart --phase migrate` for each KRaft broker, controllers-down, /controller and /migration "
          "deleted, `restart --phase zookeeper` for each broker -- or rollback, all of it at once from brokers "
          "in migration mode. A secured sandbox (--security) stays secured: the controllers' listener SASL "
          "(PLAIN as admin), StandardAuthorizer on the KRaft nodes."),
    no_args_is_help=True,
)
app.add_typer(migration_app, name="migration")


def _migration_report(sb, as_json: bool, text: str) -> None:
    st = sb.migration.status()
    if as_json:
        emit_json({"message": text, "migration": st.to_dict(), "mode": sb.mode,
                   "phases": {str(b): sb.config.broker_phase(b) for b in sb.broker_ids},
                   "processes": _status_rows(sb)})
        return
    out_console().print(f"{text}; migration state {st.state}", soft_wrap=True)
    _render_status(_status_rows(sb))


@migration_app.command("controllers-up")
@handle_errors
@output_command
def migration_controllers_up(
    c: Context,
    controllers: Annotated[int, typer.Option("--controllers", help="KRaft controller quorum size: 1 (default) or 3.")] = 1,
    controller_port: Annotated[
        int | None, typer.Option("--controller-port", min=1024, max=65535,
                                 help="Port of the first controller; controller i gets port+i (default: the first "
                                      "free ports above the sandbox's).")] = None,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Start KRaft controllers (ids from 1000) in migration mode next to the running ZooKeeper
    sandbox: storage formatted with the ZooKeeper cluster's id (/cluster/id),
    zookeeper.metadata.migration.enable=true, zookeeper.connect. Returns once they started and
    the active one registered the migration in ZooKeeper (/migration: PRE_MIGRATION). The
    cluster's controller moves to them once every broker runs with --phase migrate."""
    sb = _attach(workdir)
    ports = [controller_port + i for i in range(controllers)] if controller_port else None
    ids = sb.migration.start_controllers(controllers, ports=ports, timeout_s=timeout)
    _migration_report(sb, c.json, f"KRaft controllers {', '.join(map(str, ids))} run in migration mode "
                                  f"({sb.config.quorum_voters})")


@migration_app.command("status")
@handle_errors
@output_command
def migration_status(c: Context, workdir: WorkdirOpt = None) -> None:
    """Where the migration is, as Kafka names it (ZkMigrationState): NONE, PRE_MIGRATION (controllers
    waiting for the brokers), MIGRATION (metadata migrated, dual write to ZooKeeper), POST_MIGRATION
    (finalized: KRaft); read from ZooKeeper's /controller and /migration. Each broker's phase."""
    sb = _attach(workdir)
    _migration_report(sb, c.json, "brokers' phases: " + ", ".join(f"{b}={sb.config.broker_phase(b)}"
                                                                   for b in sb.broker_ids))


@migration_app.command("wait")
@handle_errors
@output_command
def migration_wait(
    c: Context,
    state: Annotated[str, typer.Option("--state", help="NONE, PRE_MIGRATION, MIGRATION or POST_MIGRATION.")],
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Wait until the migration is in --state (default timeout 120 s; exit 1 after it)."""
    sb = _attach(workdir)
    sb.migration.wait_state(state.upper(), timeout_s=timeout or 120.0)
    _migration_report(sb, c.json, f"migration state reached {state.upper()}")


@migration_app.command("finalize")
@handle_errors
@output_command
def migration_finalize(
    c: Context,
    keep_zookeeper: Annotated[bool, typer.Option("--keep-zookeeper", help="Leave ZooKeeper running.")] = False,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Finalize the migration once every broker runs as a KRaft broker: the controllers are
    restarted without zookeeper.metadata.migration.enable and zookeeper.connect (POST_MIGRATION);
    the sandbox is then in KRaft mode and ZooKeeper is stopped. No way back after this."""
    sb = _attach(workdir)
    sb.migration.finalize(stop_zookeeper=not keep_zookeeper, timeout_s=timeout)
    _migration_report(sb, c.json, f"migration finalized: the sandbox runs in {sb.mode} mode")


@migration_app.command("controllers-down")
@handle_errors
@output_command
def migration_controllers_down(c: Context, workdir: WorkdirOpt = None) -> None:
    """Deprovision the KRaft controllers of a migration that is not finalized (Kafka's revert):
    stopped, their data removed. Refused (exit 2) while a broker runs as a KRaft broker: restart
    it with --phase migrate first. Then raise /controller_epoch above the KRaft epoch and delete
    /controller and /migration (the zk-to-kraft-rollback playbook's `clear` step does) and restart
    each broker with --phase zookeeper."""
    sb = _attach(workdir)
    sb.migration.stop_controllers()
    _migration_report(sb, c.json, "KRaft controllers deprovisioned"
                      + (f"; brokers in migration mode: {sorted(sb.config.broker_phases)}" if sb.config.broker_phases
                         else "; no broker was in migration mode: the migration is over"))


@migration_app.command("rollback")
@handle_errors
@output_command
def migration_rollback(c: Context, workdir: WorkdirOpt = None, timeout: TimeoutSOpt = None) -> None:
    """Back to ZooKeeper mode while no broker runs as a KRaft broker (Kafka's revert procedure):
    the KRaft controllers are stopped, /controller_epoch raised above the KRaft epoch where it is
    not (KAFKA-20488), /controller and /migration deleted in ZooKeeper, and each broker in
    migration mode restarted without the migration settings."""
    sb = _attach(workdir)
    sb.migration.rollback(timeout_s=timeout)
    _migration_report(sb, c.json, "rolled back to ZooKeeper mode")


image_app = typer.Typer(help="The container image of `kops sandbox up --engine docker`, built locally.",
                        no_args_is_help=True)
app.add_typer(image_app, name="image")


@image_app.command("build")
@handle_errors
@output_command
def image_build(
    c: Context,
    kafka_version: Annotated[
        str | None, typer.Option("--kafka-version", help=f"Kafka version of the image (default {dist.DEFAULT_VERSION}).")
    ] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Build even when an image of the same inputs exists.")] = False,
) -> None:
    """Build the sandbox image (once; again only when an input changed): a minimal Debian from
    debootstrap (mirror taken from this machine's apt sources, or KOPS_DEBIAN_MIRROR), a Java 17
    runtime and network tools from Debian, and Kafka's jars from the Maven cache. Tags it
    kops/kafka:<version>-<digest> and kops/kafka:<version> (what docker/compose.yml runs)."""
    from kops.sandbox import dist, engine, image

    engine.configure_testcontainers()
    version = kafka_version or dist.DEFAULT_VERSION
    t0 = time.monotonic()
    tag = image.kafka_image(engine.client(), version, rebuild=rebuild, log=_log)
    if c.json:
        emit_json({"image": tag, "kafka_version": version, "seconds": round(time.monotonic() - t0, 1)})
    else:
        out_console().print(f"{tag} (also tagged {image.IMAGE_REPO}:{version})", soft_wrap=True)


controller_app = typer.Typer(
    help=("The controllers of a dynamic KRaft quorum (`kops sandbox up --mode kraft --dynamic-quorum`, Kafka 3.9+, "
          "KIP-853): add starts a new one as an observer, remove takes one away once it is no voter -- the "
          "replace-controller playbook's hooks."),
    no_args_is_help=True,
)
app.add_typer(controller_app, name="controller")


@controller_app.command("add")
@handle_errors
@output_command
def controller_add(
    c: Context,
    node_id: Annotated[int | None, typer.Option("--id", min=1000, max=2147483647,
                                                help="Its node id (default: the next id from 1000 never used).")] = None,
    port: Annotated[int | None, typer.Option("--port", min=1024, max=65535, help="Its port (default: a free one).")] = None,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Format a new controller with `kafka-storage.sh format --no-initial-controllers`, start it with
    the quorum's controller.quorum.bootstrap.servers, and return once the quorum's leader lists it as
    an observer; prints its id, endpoint and directory id (what AddRaftVoter needs). Run again for
    the same --id, it only waits. Exit 2 (nothing changed) on a static quorum or for an id or port in use."""
    sb = _attach(workdir)
    added = sb.quorum.add_controller(node_id, port=port, timeout_s=timeout)
    if c.json:
        emit_json({"action": "add-controller", **added, "processes": _status_rows(sb)})
        return
    out_console().print(f"KRaft controller {added['id']} started on {added['host']}:{added['port']} (directory "
                        f"{added['directory_id']}), an observer of the quorum", soft_wrap=True)


@controller_app.command("remove")
@handle_errors
@output_command
def controller_remove(
    c: Context,
    node_id: Annotated[int, typer.Option("--id", min=1000, max=2147483647, help="The controller to take away.")],
    force: Annotated[bool, typer.Option("--force", help="Even while it is a voter (a machine lost).")] = False,
    workdir: WorkdirOpt = None,
    timeout: TimeoutSOpt = None,
) -> None:
    """Stop a controller and take it out of the sandbox for good (its data and logs stay). Exit 2
    (nothing changed) while the quorum still counts it a voter (remove it from the voter set first:
    the replace-controller playbook), unless --force; and for the last controller."""
    sb = _attach(workdir)
    was_running = sb.quorum.remove_controller(node_id, force=force, timeout_s=timeout)
    if c.json:
        emit_json({"action": "remove-controller", "id": node_id, "was_running": was_running,
                   "processes": _status_rows(sb)})
        return
    out_console().print(f"KRaft controller {node_id} {'stopped and ' if was_running else ''}removed from the sandbox",
                        soft_wrap=True)
