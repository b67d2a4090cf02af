"""Sandbox configuration: brokers, racks, ports, work directory, JVM flags, generated files.

Pure (no processes, no network): everything here is unit-tested without a cluster.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from kops.errors import BadInput
from kops.inputs.properties import value_text
from kops.sandbox import dist
from kops.sandbox.dist import DEFAULT_KRAFT_VERSION, DEFAULT_VERSION

MODES = ("zookeeper", "kraft")
ENGINES = ("jvm", "docker")
DEFAULT_BROKERS = 6
DEFAULT_ZK_PORT = 2181
DEFAULT_BASE_PORT = 9092
DEFAULT_CONTROLLER_BASE_PORT = 9192
DEFAULT_HEAP = "384m"
DEFAULT_ZK_HEAP = "128m"
#: ZooKeeper's tick (its session-expiry granularity) and the brokers' ZooKeeper session timeout:
#: Kafka's default (18 s). The sandbox had 6 s, to see a killed broker go sooner; on a loaded
#: 2-core host a broker JVM starved for 4-5 s then lost its session, and the controller failovers
#: that followed (up to 22 s) failed fault-lab scenarios that injected no such fault (CI, stops 68
#: and 69: "Expiring session ..., timeout of 6000ms exceeded")
ZK_TICK_MS = 2000
ZK_SESSION_TIMEOUT_MS = 18000
STATE_CHANGE_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR")
#: most log dirs per broker (``--log-dirs``): JBOD for tests, not for a real disk count
MAX_LOG_DIRS = 8
#: KRaft brokers with more than one log dir: Kafka 3.7 and later (KIP-858)
KRAFT_JBOD = (3, 7)
#: ZooKeeper -> KRaft migration of a sandbox (``SandboxConfig.migration``; kops.sandbox.migration)
MIGRATIONS = (None, "migrating", "reverting", "finalized")
#: a broker's phase in a migration: plain ZooKeeper broker, ZooKeeper broker in migration mode,
#: KRaft broker
BROKER_PHASES = ("zookeeper", "migrate", "kraft")

# Fast start on small machines: C1 only, serial GC, no JIT warm-up hunger.
FAST_JVM_FLAGS: tuple[str, ...] = (
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
)


def default_workdir() -> Path:
    """``$KOPS_SANDBOX_DIR`` or ``~/.kops/sandbox``."""
    env = os.environ.get("KOPS_SANDBOX_DIR")
    return Path(env).expanduser() if env else Path.home() / ".kops" / "sandbox"


def default_racks(broker_ids: Sequence[int]) -> dict[int, str]:
    """Brokers in id order, two per rack: a, a, b, b, c, c (a third of the brokers per rack
    rounded up, for any count: 6 -> a,a,b,b,c,c; 9 -> a,a,a,b,b,b,c,c,c; 3 -> a,b,c)."""
    ids = sorted(broker_ids)
    n = len(ids)
    if n == 0:
        return {}
    per = max(1, -(-n // 3))
    return {b: chr(ord("a") + min(i // per, 25)) for i, b in enumerate(ids)}


def parse_racks(spec: str | Sequence[str] | Mapping[int, str] | None, broker_ids: Sequence[int]) -> dict[int, str]:
    """Rack of every broker from a CLI-style spec.

    Accepted forms (``broker_ids`` in order):

    - ``None`` or ``""``: :func:`default_racks`;
    - positional ``"a,a,b,b,c,c"`` (one rack per broker, in broker-id order);
    - by id ``"0:/dc1/r1,1:/dc1/r1,2:/dc1/r2,..."`` (every broker named exactly once);
    - a list of rack ids or a ``{broker_id: rack}`` mapping.

    Raises :class:`BadInput` naming the problem (wrong count, unknown or duplicate broker,
    empty rack, malformed or mixed multi-level paths).
    """
    from kops.placement.racks import validate_racks

    ids = list(broker_ids)
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        return default_racks(ids)
    racks: dict[int, str] = {}
    if isinstance(spec, Mapping):
        for k, v in spec.items():
            try:
                racks[int(k)] = str(v)
            except (TypeError, ValueError):
                raise BadInput(f"rack map: broker id {k!r} is not an integer") from None
    else:
        items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s).strip() for s in spec]
        by_id = [i for i in items if ":" in i]
        if by_id and len(by_id) != len(items):
            raise BadInput(
                f"--racks {spec!r}: mix of 'id:rack' and plain entries; use either a,a,b,b,... "
                "(one rack per broker in id order) or 0:rackA,1:rackB,... for every broker"
            )
        if by_id:
            for item in items:
                bid, _, rack = item.partition(":")
                try:
                    b = int(bid.strip())
                except ValueError:
                    raise BadInput(f"--racks entry {item!r}: broker id {bid!r} is not an integer") from None
                if b in racks:
                    raise BadInput(f"--racks: broker {b} is given twice")
                racks[b] = rack.strip()
        else:
            if len(items) != len(ids):
                raise BadInput(
                    f"--racks {spec!r} names {len(items)} racks for {len(ids)} brokers {ids}; "
                    "give one rack per broker (e.g. a,a,b,b,c,c) or id:rack pairs"
                )
            racks = dict(zip(ids, items, strict=True))
    unknown = sorted(set(racks) - set(ids))
    missing = sorted(set(ids) - set(racks))
    if unknown:
        raise BadInput(f"--racks names unknown brokers {unknown}; the brokers are {ids}")
    if missing:
        raise BadInput(f"--racks gives no rack for brokers {missing}; every broker needs one")
    empty = sorted(b for b, r in racks.items() if not r)
    if empty:
        raise BadInput(f"--racks: brokers {empty} have an empty rack id")
    for b, r in racks.items():
        check_rack_id(r, f"--racks: broker {b}")
    validate_racks(racks, require_all=True)
    return {b: racks[b] for b in ids}


def check_rack_id(rack: str, where: str) -> None:
    """A rack id the sandbox can write into a properties file and a ``--racks`` spec: not empty,
    and (plain ids) no space or one of ``, : = \\ ' "``; multi-level paths are checked by
    :func:`kops.placement.racks.validate_racks`."""
    if not rack:
        raise BadInput(f"{where}: empty rack id")
    if any(c.isspace() or c in ",:=\\'\"" for c in rack) and not rack.startswith("/"):
        raise BadInput(f"{where} rack {rack!r} contains a space or one of , : = \\ ' \"")


def parse_heap(heap: str) -> str:
    """``384m``/``1g``/``512M`` -> the -Xmx value; BadInput otherwise."""
    h = str(heap).strip().lower()
    if h.endswith(("m", "g", "k")) and h[:-1].isdigit() and int(h[:-1]) > 0:
        mb = int(h[:-1]) * {"k": 1 / 1024, "m": 1, "g": 1024}[h[-1]]
        if mb < 64:
            raise BadInput(f"--heap {heap}: too small for a Kafka broker (at least 64m; 384m is a good default)")
        return h
    raise BadInput(f"--heap {heap!r}: expected a size like 384m or 1g")


def _check_port(name: str, port: int) -> None:
    if not isinstance(port, int) or not (1024 <= port <= 65535):
        raise BadInput(f"{name} {port!r} is not a port in 1024..65535")


@dataclass(frozen=True)
class SandboxConfig:
    """What a sandbox looks like. All fields have working defaults (6 brokers, racks a/b/c).

    ``racks`` maps broker id -> rack id (plain ``a`` or multi-level ``/dc1/r1``); ``None``
    means :func:`default_racks`. ``broker_ports`` overrides ``base_port + index`` per broker
    (used by the tests to run on free ports); the same for ``controller_ports`` in KRaft mode.

    The brokers are the *base* ids ``first_broker_id .. first_broker_id + brokers - 1`` (racks
    and ports by index) minus ``removed_brokers`` (taken out for good: ``kops sandbox remove``),
    plus ``extra_brokers`` (grown later: ``kops sandbox add``), a mapping ``id -> {"rack": R,
    "port": P}`` with each added broker's own rack and port. An id removed from the base may be
    added again (it then lives in both: removed from the base, back as an extra).
    """

    brokers: int = DEFAULT_BROKERS
    racks: Mapping[int, str] | str | Sequence[str] | None = None
    mode: str = "zookeeper"
    kafka_version: str | None = None
    host: str = "127.0.0.1"
    zookeeper_port: int = DEFAULT_ZK_PORT
    zk_chroot: str | None = None
    base_port: int = DEFAULT_BASE_PORT
    broker_ports: Sequence[int] | None = None
    first_broker_id: int = 0
    controllers: int = 1
    controller_base_port: int = DEFAULT_CONTROLLER_BASE_PORT
    controller_ports: Sequence[int] | None = None
    workdir: Path | None = None
    heap: str = DEFAULT_HEAP
    zk_heap: str = DEFAULT_ZK_HEAP
    jvm_flags: Sequence[str] = FAST_JVM_FLAGS
    extra_jvm_flags: Sequence[str] = ()
    auto_leader_rebalance: bool = False
    state_change_log_level: str = "INFO"
    #: KRaft: the metadata.version the storage is formatted at (``kafka-storage.sh format
    #: --release-version``, e.g. 3.9), so that an upgrade can be rehearsed; None: the Kafka's latest
    release_version: str | None = None
    extra_properties: Mapping[str, Any] = field(default_factory=dict)
    start_timeout_s: float = 120.0
    stop_timeout_s: float = 60.0
    security: str = "none"  # none | sasl_plaintext | sasl_ssl (kops.sandbox.security)
    engine: str = "jvm"  # jvm (local processes) | docker (containers: kops.sandbox.containers)
    #: broker -> MiB of each of its data disks (docker): every log dir of the broker is a disk of its own
    data_disk_mb: Mapping[int, int] = field(default_factory=dict)
    log_dirs: int = 1  # log dirs per broker (JBOD): data, data-1, ...
    extra_brokers: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)  # id -> {rack, port}
    removed_brokers: Sequence[int] = ()
    #: ZooKeeper -> KRaft migration (KIP-866, kops.sandbox.migration): None; "migrating" (mode
    #: zookeeper: KRaft controllers in migration mode run next to ZooKeeper); "reverting" (mode
    #: zookeeper: the controllers deprovisioned, brokers still in migration mode being rolled back
    #: to plain ZooKeeper brokers); "finalized" (mode kraft: the cluster was migrated from ZooKeeper)
    migration: str | None = None
    #: during a migration, broker id -> "migrate" (ZooKeeper broker in migration mode) or "kraft"
    #: (KRaft broker); while reverting, the brokers still in migration mode; a broker not named is
    #: a plain ZooKeeper broker
    broker_phases: Mapping[int, str] = field(default_factory=dict)
    #: node (broker or KRaft controller) -> the Kafka version it runs where it is not
    #: ``kafka_version``: a rolling upgrade of the binaries (``kops sandbox upgrade``), node by node
    node_versions: Mapping[int, str] = field(default_factory=dict)
    #: KRaft: a dynamic quorum (KIP-853, Kafka 3.9+): the controllers formatted with
    #: ``--initial-controllers`` (kraft.version 1), every node given
    #: ``controller.quorum.bootstrap.servers`` instead of ``controller.quorum.voters``
    dynamic_quorum: bool = False
    #: controllers started later on a dynamic quorum (``kops sandbox controller add``): id -> port;
    #: each formatted with ``--no-initial-controllers``, an observer until AddRaftVoter
    extra_controllers: Mapping[int, int] = field(default_factory=dict)
    #: controllers taken out for good (``kops sandbox controller remove``): base ids or added ones
    removed_controllers: Sequence[int] = ()

    # -- derived -----------------------------------------------------------------------------
    def __post_init__(self) -> None:
        object.__setattr__(self, "workdir", Path(self.workdir or default_workdir()).expanduser().absolute())
        if self.kafka_version is None:
            object.__setattr__(self, "kafka_version", DEFAULT_KRAFT_VERSION if self.mode == "kraft" else DEFAULT_VERSION)
        if isinstance(self.racks, (str, list, tuple)):  # CLI-style spec: "a,a,b,b" / "0:/dc1/r1,..."
            object.__setattr__(self, "racks", parse_racks(self.racks, self.base_broker_ids) if self.racks else None)
        if self.racks is not None:
            object.__setattr__(self, "racks", {int(k): str(v) for k, v in dict(self.racks).items()})
        if self.broker_ports is not None:
            object.__setattr__(self, "broker_ports", tuple(int(p) for p in self.broker_ports))
        if self.controller_ports is not None:
            object.__setattr__(self, "controller_ports", tuple(int(p) for p in self.controller_ports))
        object.__setattr__(self, "jvm_flags", tuple(self.jvm_flags))
        object.__setattr__(self, "extra_jvm_flags", tuple(self.extra_jvm_flags))
        object.__setattr__(self, "extra_properties", {str(k): v for k, v in dict(self.extra_properties).items()})
        object.__setattr__(self, "extra_brokers", _normalise_extra_brokers(self.extra_brokers))
        try:
            disks = {int(b): int(mb) for b, mb in dict(self.data_disk_mb or {}).items()}
        except (TypeError, ValueError):
            raise BadInput(f"data disks {self.data_disk_mb!r}: expected broker id -> MiB") from None
        object.__setattr__(self, "data_disk_mb", disks)
        try:
            removed = tuple(sorted({int(b) for b in self.removed_brokers}))
        except (TypeError, ValueError):
            raise BadInput(f"removed brokers {self.removed_brokers!r}: expected broker ids") from None
        object.__setattr__(self, "removed_brokers", removed)
        try:
            phases = {int(b): str(p) for b, p in dict(self.broker_phases or {}).items()}
        except (TypeError, ValueError):
            raise BadInput(f"broker phases {self.broker_phases!r}: expected broker id -> phase") from None
        object.__setattr__(self, "broker_phases", dict(sorted(phases.items())))
        try:
            versions = {int(n): str(v) for n, v in dict(self.node_versions or {}).items()}
        except (TypeError, ValueError):
            raise BadInput(f"node versions {self.node_versions!r}: expected node id -> Kafka version") from None
        object.__setattr__(self, "node_versions", dict(sorted(versions.items())))
        try:
            extra_ctrls = {int(c): int(p) for c, p in dict(self.extra_controllers or {}).items()}
            removed_ctrls = tuple(sorted({int(c) for c in self.removed_controllers}))
        except (TypeError, ValueError):
            raise BadInput(f"controllers {self.extra_controllers!r} / {self.removed_controllers!r}: expected node ids "
                           "(and ports)") from None
        object.__setattr__(self, "extra_controllers", dict(sorted(extra_ctrls.items())))
        object.__setattr__(self, "removed_controllers", removed_ctrls)

    def validate(self) -> SandboxConfig:
        """Raise :class:`BadInput` naming every problem; return self."""
        if self.mode not in MODES:
            raise BadInput(f"mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.engine not in ENGINES:
            raise BadInput(f"engine {self.engine!r}: expected one of {', '.join(ENGINES)}")
        if self.data_disk_mb:
            if self.engine != "docker":
                raise BadInput("--data-disk needs --engine docker (the containers see the small disk as their data dir)")
            unknown = sorted(set(self.data_disk_mb) - set(self.broker_ids))
            if unknown:
                raise BadInput(f"--data-disk names brokers {unknown} that the sandbox does not have ({self.broker_ids})")
            small = sorted(b for b, mb in self.data_disk_mb.items() if not 16 <= mb <= 1024 * 1024)
            if small:
                raise BadInput(f"--data-disk of brokers {small}: a size from 16 MiB to 1 TiB")
        from kops.sandbox.security import SECURITY_MODES

        if self.security not in SECURITY_MODES:
            raise BadInput(f"security {self.security!r}: expected one of {', '.join(SECURITY_MODES)}")
        if self.security != "none" and self.mode != "zookeeper" and self.migration != "finalized":
            # (a KRaft sandbox migrated from a secured ZooKeeper one keeps its security: its SCRAM
            # credentials and ACLs came over with the metadata)
            raise BadInput(
                f"--security {self.security} is available in ZooKeeper mode only; "
                "drop --mode kraft or --security"
            )
        if not isinstance(self.brokers, int) or not (1 <= self.brokers <= 50):
            raise BadInput(f"brokers {self.brokers!r}: expected 1..50")
        if self.first_broker_id < 0:
            raise BadInput(f"first broker id {self.first_broker_id} must be >= 0")
        self._validate_version()
        self._validate_log_dirs()
        if self.host not in ("127.0.0.1", "localhost", "::1"):
            raise BadInput(f"host {self.host!r}: the sandbox listens on the loopback interface only (127.0.0.1)")
        parse_heap(self.heap)
        parse_heap(self.zk_heap)
        if self.state_change_log_level.upper() not in STATE_CHANGE_LEVELS:
            raise BadInput(f"state-change log level {self.state_change_log_level!r}: one of {STATE_CHANGE_LEVELS}")
        if self.zk_chroot is not None and (not self.zk_chroot.startswith("/") or self.zk_chroot == "/"):
            raise BadInput(f"ZooKeeper chroot {self.zk_chroot!r} must start with '/' (e.g. /kafka)")
        if self.broker_ports is not None and len(self.broker_ports) != self.brokers:
            raise BadInput(f"{len(self.broker_ports)} broker ports for {self.brokers} brokers")
        if self.release_version is not None:
            from kops.cluster.features import metadata_level

            if self.mode != "kraft":
                raise BadInput("--release-version formats KRaft storage: it needs --mode kraft")
            if not 7 <= metadata_level(self.release_version) <= 1000:
                raise BadInput(f"--release-version {self.release_version}: KRaft starts at 3.3-IV3")
        if self.mode == "kraft":
            if self.controllers not in (1, 3, 5):
                raise BadInput(f"controllers {self.controllers}: use a quorum of 1, 3 or 5")
            if self.controller_ports is not None and len(self.controller_ports) != self.controllers:
                raise BadInput(f"{len(self.controller_ports)} controller ports for {self.controllers} controllers")
        self._validate_membership()
        self._validate_dynamic_quorum()
        self._validate_migration()
        self._validate_node_versions()
        self.rack_map  # validates racks
        ports = self.all_ports()
        for name, p in ports.items():
            _check_port(name, p)
        seen: dict[int, str] = {}
        for name, p in ports.items():
            if p in seen:
                raise BadInput(f"port {p} is used twice: {seen[p]} and {name}")
            seen[p] = name
        bad_keys = [k for k in self.extra_properties if not k or any(c.isspace() or c in "=:" for c in k)]
        if bad_keys:
            raise BadInput(f"bad broker property names {bad_keys}")
        return self

    def _validate_dynamic_quorum(self) -> None:
        """A dynamic quorum: KRaft mode on Kafka 3.9 or later, local JVMs; controllers added and
        removed only there, and at least one left."""
        if self.dynamic_quorum:
            if self.mode != "kraft" or self.migration:
                raise BadInput("--dynamic-quorum is a KRaft quorum's: it needs --mode kraft (and no migration)")
            if dist.release(self.kafka_version) < (3, 9):
                raise BadInput(f"--dynamic-quorum needs Kafka 3.9 or later (KIP-853, kraft.version 1); "
                               f"the sandbox runs {self.kafka_version}")
            if self.engine != "jvm":
                raise BadInput("--dynamic-quorum runs on the jvm engine only")
        elif self.extra_controllers or self.removed_controllers:
            raise BadInput("controllers are added and removed on a dynamic quorum only (`up --dynamic-quorum`)")
        clash = sorted((set(self.extra_controllers) & set(self.base_controller_ids))
                       | {c for c in self.extra_controllers if c < 1000})
        if clash:
            raise BadInput(f"controller ids {clash}: a new controller takes an id from 1000 that the sandbox "
                           f"has not used ({self.base_controller_ids})")
        if self.dynamic_quorum and not self.controller_ids:
            raise BadInput("a KRaft sandbox needs at least one controller; every controller would be removed")

    def _validate_version(self) -> None:
        """The Kafka version exists for the mode: 2.8 or later; ZooKeeper mode up to 3.9, KRaft
        mode from 3.7."""
        dist.check_version(self.kafka_version)
        rel = dist.release(self.kafka_version)
        if self.mode == "zookeeper" and rel > dist.LAST_ZOOKEEPER:
            raise BadInput(
                f"Kafka {self.kafka_version} has no ZooKeeper mode (removed in 4.0); use --mode kraft "
                f"or a version up to {dist.line(dist.LAST_ZOOKEEPER)}.x"
            )
        if self.mode == "kraft" and rel < dist.OLDEST_KRAFT:
            raise BadInput(
                f"--mode kraft needs Kafka {dist.line(dist.OLDEST_KRAFT)} or later (the oldest KRaft line kops "
                f"proves in its version matrix); Kafka {self.kafka_version} runs in ZooKeeper mode: leave "
                "--mode kraft out"
            )

    def _validate_node_versions(self) -> None:
        """Nodes upgraded to another Kafka (``kops sandbox upgrade``): brokers or KRaft controllers
        of this sandbox, local JVMs, not during a ZooKeeper -> KRaft migration, each version one
        that runs the sandbox's mode."""
        if not self.node_versions:
            return
        if self.engine != "jvm":
            raise BadInput("upgrading a node's Kafka runs local JVMs only (engine jvm): the containers' image "
                           "holds one Kafka")
        if self.in_migration:
            raise BadInput("a node's Kafka is upgraded before or after a ZooKeeper -> KRaft migration, not during it")
        unknown = sorted(set(self.node_versions) - set(self.broker_ids) - set(self.controller_ids))
        if unknown:
            raise BadInput(f"node versions name nodes {unknown} that the sandbox does not have (brokers "
                           f"{self.broker_ids}, controllers {self.controller_ids})")
        for node, version in self.node_versions.items():
            self.with_(kafka_version=version, node_versions={}, release_version=None)._validate_version()

    def version_of(self, node: str | int) -> str:
        """The Kafka version ``node`` runs: its own after an upgrade, else the sandbox's."""
        if isinstance(node, int):
            return self.node_versions.get(node, self.kafka_version)  # type: ignore[return-value]
        return self.kafka_version  # type: ignore[return-value]

    @property
    def versions(self) -> list[str]:
        """Every Kafka version the sandbox's nodes run (the sandbox's first)."""
        return list(dict.fromkeys([self.kafka_version, *self.node_versions.values()]))  # type: ignore[list-item]

    def _validate_log_dirs(self) -> None:
        """1 to :data:`MAX_LOG_DIRS` log dirs per broker; more than one in KRaft mode needs Kafka
        3.7 (KIP-858: JBOD in KRaft)."""
        n = self.log_dirs
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_LOG_DIRS:
            raise BadInput(f"--log-dirs {n!r}: expected 1..{MAX_LOG_DIRS} log dirs per broker")
        if n > 1 and self.mode == "kraft" and dist.release(self.kafka_version) < KRAFT_JBOD:
            raise BadInput(
                f"--log-dirs {n} in KRaft mode needs Kafka {dist.line(KRAFT_JBOD)} or later (KIP-858: JBOD in "
                f"KRaft); Kafka {self.kafka_version} has one log dir per KRaft broker: use --log-dirs 1, "
                "ZooKeeper mode or a newer --kafka-version"
            )

    def _validate_migration(self) -> None:
        """A ZooKeeper -> KRaft migration: ZooKeeper mode with KRaft controllers ("migrating") on
        a Kafka that has both (3.7 - 3.9), local JVMs (secured or not); brokers' phases known."""
        if self.migration not in MIGRATIONS:
            raise BadInput(f"migration {self.migration!r}: expected one of {', '.join(map(str, MIGRATIONS))}")
        if self.in_migration:
            if self.mode != "zookeeper":
                raise BadInput("a ZooKeeper -> KRaft migration starts from a ZooKeeper-mode sandbox")
            rel = dist.release(self.kafka_version)
            if rel < dist.OLDEST_KRAFT:
                raise BadInput(f"a ZooKeeper -> KRaft migration in the sandbox needs Kafka "
                               f"{dist.line(dist.OLDEST_KRAFT)} - {dist.line(dist.LAST_ZOOKEEPER)} (both modes); "
                               f"this sandbox runs Kafka {self.kafka_version}")
            if self.engine != "jvm":
                raise BadInput("the sandbox migrates local JVMs only (engine jvm)")
            if self.controllers not in (1, 3, 5):
                raise BadInput(f"controllers {self.controllers}: use a quorum of 1, 3 or 5")
            if self.controller_ports is not None and len(self.controller_ports) != self.controllers:
                raise BadInput(f"{len(self.controller_ports)} controller ports for {self.controllers} controllers")
        bad = {b: p for b, p in self.broker_phases.items() if p not in BROKER_PHASES[1:]}
        if bad:
            raise BadInput(f"broker phases {bad}: expected {' or '.join(BROKER_PHASES[1:])}")
        if self.broker_phases and not self.in_migration:
            raise BadInput("brokers have migration phases only while KRaft controllers migrate the cluster")
        if self.migration == "reverting" and "kraft" in self.broker_phases.values():
            raise BadInput("while a migration is reverted (the controllers gone) no broker runs as a KRaft broker")
        unknown = sorted(set(self.broker_phases) - set(self.broker_ids))
        if unknown:
            raise BadInput(f"broker phases name brokers {unknown} that the sandbox does not have ({self.broker_ids})")

    @property
    def in_migration(self) -> bool:
        """KRaft controllers migrate the cluster or a migration is being reverted: the brokers
        have migration phases (:meth:`broker_phase`)."""
        return self.migration in ("migrating", "reverting")

    def broker_phase(self, broker_id: int) -> str:
        """``zookeeper``, ``migrate`` (ZooKeeper broker in migration mode) or ``kraft`` (KRaft
        broker: mode kraft, or restarted as one during a migration)."""
        if self.mode == "kraft":
            return "kraft"
        return self.broker_phases.get(broker_id, "zookeeper")

    def with_broker_phase(self, broker_id: int, phase: str) -> SandboxConfig:
        """This config with ``broker_id`` in migration ``phase`` (``kops sandbox restart --phase``),
        in Kafka's order: ``zookeeper`` -> ``migrate`` (once the KRaft controllers run in
        migration mode) -> ``kraft``, and back before finalization (Kafka's revert): ``kraft`` ->
        ``migrate`` while the controllers run, ``migrate`` -> ``zookeeper`` once they are
        deprovisioned (``reverting``; the last broker back ends the migration). The same phase
        again is a plain restart. BadInput for any other step."""
        if broker_id not in self.broker_ids:
            raise BadInput(f"no broker {broker_id} in this sandbox (brokers {self.broker_ids})")
        if phase not in BROKER_PHASES:
            raise BadInput(f"--phase {phase!r}: expected one of {', '.join(BROKER_PHASES)}")
        now = self.broker_phase(broker_id)
        if phase == now:
            return self
        if self.migration == "reverting":
            if (now, phase) != ("migrate", "zookeeper"):
                raise BadInput(f"broker {broker_id} is in phase {now}: the migration is being reverted (the KRaft "
                               "controllers are gone), a broker in migration mode goes back with --phase zookeeper")
            phases = {b: p for b, p in self.broker_phases.items() if b != broker_id}
            return self.with_(broker_phases=phases, migration="reverting" if phases else None).validate()
        if self.migration != "migrating":
            raise BadInput(f"broker {broker_id} is a {now} broker and the sandbox is not migrating: start the KRaft "
                           "controllers first (`kops sandbox migration controllers-up`)")
        allowed = {("zookeeper", "migrate"), ("migrate", "kraft"), ("kraft", "migrate")}
        if (now, phase) not in allowed:
            hint = ("; back to ZooKeeper mode: stop the controllers first (`kops sandbox migration controllers-down`)"
                    if phase == "zookeeper" else "; restart it with --phase migrate first" if phase == "kraft" else "")
            raise BadInput(f"broker {broker_id} is in phase {now}: it cannot go to {phase}{hint}")
        phases = {**self.broker_phases, broker_id: phase}
        return self.with_(broker_phases=phases).validate()

    def _validate_membership(self) -> None:
        base = self.base_broker_ids
        stray = [b for b in self.removed_brokers if b not in base]
        if stray:
            raise BadInput(f"removed brokers {stray} are not among the first brokers {base}")
        kept = set(base) - set(self.removed_brokers)
        for b in self.extra_brokers:
            if b < 0:
                raise BadInput(f"broker id {b} must be >= 0")
            if b in kept:
                raise BadInput(f"broker {b} exists already (rack {self.base_rack_map[b]}, port {self.broker_port(b)})")
            if b in self.controller_ids:
                raise BadInput(f"id {b} is a KRaft controller's node id (controllers {self.controller_ids}); "
                               "pick another broker id")
        if not self.broker_ids:
            raise BadInput("a sandbox needs at least one broker; every broker would be removed")
        if len(self.broker_ids) > 100:
            raise BadInput(f"{len(self.broker_ids)} brokers: the sandbox runs at most 100")

    @property
    def base_broker_ids(self) -> list[int]:
        """The ids ``up`` was created with (``first_broker_id`` and ``brokers``), removed ones included."""
        return list(range(self.first_broker_id, self.first_broker_id + self.brokers))

    @property
    def broker_ids(self) -> list[int]:
        """Every broker of the sandbox, in id order: the base ids not removed, and the added ones."""
        gone = set(self.removed_brokers)
        return sorted({b for b in self.base_broker_ids if b not in gone} | set(self.extra_brokers))

    @property
    def base_controller_ids(self) -> list[int]:
        """The controller ids ``up`` was created with: from 1000 (no clash with brokers)."""
        kraft = self.mode == "kraft" or self.migration == "migrating"
        return [1000 + i for i in range(self.controllers)] if kraft else []

    @property
    def controller_ids(self) -> list[int]:
        """KRaft controller node ids: the base ones not removed, and those added (dynamic quorum)."""
        return sorted((set(self.base_controller_ids) | set(self.extra_controllers)) - set(self.removed_controllers))

    @property
    def initial_controller_ids(self) -> list[int]:
        """The controllers formatted as the dynamic quorum's first voters (``--initial-controllers``)."""
        return [c for c in self.base_controller_ids if c not in set(self.removed_controllers)]

    @property
    def base_rack_map(self) -> dict[int, str]:
        """Racks of the base ids (``racks`` as given to ``up``; what the state file keeps)."""
        return parse_racks(self.racks, self.base_broker_ids)

    @property
    def rack_map(self) -> dict[int, str]:
        """Broker id -> rack of every broker (base ids not removed, and the added ones)."""
        gone = set(self.removed_brokers)
        racks = {b: r for b, r in self.base_rack_map.items() if b not in gone}
        if not self.extra_brokers:
            return racks
        from kops.placement.racks import validate_racks

        for b, e in self.extra_brokers.items():
            check_rack_id(e["rack"], f"broker {b}")
            racks[b] = e["rack"]
        validate_racks(racks, require_all=True)
        return {b: racks[b] for b in sorted(racks)}

    def broker_port(self, broker_id: int) -> int:
        if broker_id in self.extra_brokers:
            return self.extra_brokers[broker_id]["port"]
        base = self.base_broker_ids
        if broker_id not in base or broker_id in self.removed_brokers:
            raise BadInput(f"no broker {broker_id} in this sandbox (brokers {self.broker_ids})")
        i = base.index(broker_id)
        return self.broker_ports[i] if self.broker_ports is not None else self.base_port + i

    # -- growing and shrinking (kops sandbox add / remove) -------------------------------------------
    def with_broker_added(self, broker_id: int, rack: str, port: int) -> SandboxConfig:
        """This config with one more broker (``kops sandbox add``); BadInput when the id is taken
        (a broker or a KRaft controller), the rack is malformed or of another shape than the
        others' (plain ids vs ``/dc/rack`` paths of the same depth), or the port is already the
        sandbox's (whether the port is free on this machine is the caller's check)."""
        if isinstance(broker_id, bool) or not isinstance(broker_id, int):
            raise BadInput(f"--broker {broker_id!r}: expected an integer broker id")
        if broker_id < 0:
            raise BadInput(f"--broker {broker_id}: a broker id is >= 0")
        if broker_id in self.broker_ids:
            raise BadInput(f"broker {broker_id} exists already (rack {self.rack_map[broker_id]}, "
                           f"port {self.broker_port(broker_id)}); brokers: {self.broker_ids}")
        rack = str(rack).strip()
        check_rack_id(rack, f"--rack for broker {broker_id}:")
        _check_port("--port", port)
        users = {p: name for name, p in self.all_ports().items()}
        if port in users:
            raise BadInput(f"--port {port} is the sandbox's {users[port]} already")
        extra = {**self.extra_brokers, broker_id: {"rack": rack, "port": port}}
        return self.with_(extra_brokers=extra).validate()

    def with_broker_removed(self, broker_id: int) -> SandboxConfig:
        """This config without ``broker_id`` (``kops sandbox remove``); BadInput for an unknown
        broker or the last one."""
        if broker_id not in self.broker_ids:
            raise BadInput(f"no broker {broker_id} in this sandbox (brokers {self.broker_ids})")
        if self.broker_ids == [broker_id]:
            raise BadInput(f"broker {broker_id} is the sandbox's last broker; `kops sandbox down` stops it all")
        if broker_id in self.data_disk_mb:
            raise BadInput(f"broker {broker_id} has a data disk of its own (--data-disk): it stays in the sandbox "
                           "until `kops sandbox down`, which unmounts the disk")
        extra = {b: e for b, e in self.extra_brokers.items() if b != broker_id}
        removed = tuple(self.removed_brokers)
        if broker_id in self.base_broker_ids and broker_id not in removed:
            removed = (*removed, broker_id)
        return self.with_(extra_brokers=extra, removed_brokers=removed).validate()

    def next_free_port(self, in_use: Callable[[int], bool] = lambda _p: False) -> int:
        """A port for a new broker: the first above every port of the sandbox that is not the
        sandbox's and for which ``in_use`` is false (the caller asks the machine)."""
        taken = set(self.all_ports().values())
        port = max(taken) + 1
        while port <= 65535:
            if port not in taken and not in_use(port):
                return port
            port += 1
        port = 1024
        while port < max(taken):
            if port not in taken and not in_use(port):
                return port
            port += 1
        raise BadInput("no free port left for a new broker; give one with --port")

    def controller_port(self, node_id: int) -> int:
        if node_id in self.extra_controllers:
            return self.extra_controllers[node_id]
        i = self.base_controller_ids.index(node_id)
        return self.controller_ports[i] if self.controller_ports is not None else self.controller_base_port + i

    def all_ports(self) -> dict[str, int]:
        ports: dict[str, int] = {}
        if self.mode == "zookeeper":
            ports["zookeeper port"] = self.zookeeper_port
        for c in self.controller_ids:
            ports[f"controller {c} port"] = self.controller_port(c)
        for b in self.broker_ids:
            ports[f"broker {b} port"] = self.broker_port(b)
        return ports

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{self.broker_port(b)}" for b in self.broker_ids)

    @property
    def listener_protocol(self) -> str:
        """Security protocol of the brokers' one listener: PLAINTEXT, SASL_PLAINTEXT or SASL_SSL."""
        from kops.sandbox.security import listener_protocol

        return listener_protocol(self.security)

    @property
    def zookeeper_connect(self) -> str | None:
        if self.mode != "zookeeper":
            return None
        return f"{self.host}:{self.zookeeper_port}{self.zk_chroot or ''}"

    @property
    def quorum_voters(self) -> str:
        return ",".join(f"{c}@{self.host}:{self.controller_port(c)}" for c in self.controller_ids)

    @property
    def quorum_bootstrap_servers(self) -> str:
        """``controller.quorum.bootstrap.servers`` of a dynamic quorum: every controller's endpoint."""
        return ",".join(f"{self.host}:{self.controller_port(c)}" for c in self.controller_ids)

    @property
    def quorum_properties(self) -> dict[str, str]:
        """How a KRaft node finds the quorum: ``controller.quorum.voters`` (static) or
        ``controller.quorum.bootstrap.servers`` (dynamic, KIP-853)."""
        if self.dynamic_quorum:
            return {"controller.quorum.bootstrap.servers": self.quorum_bootstrap_servers}
        return {"controller.quorum.voters": self.quorum_voters}

    # -- files -------------------------------------------------------------------------------
    @property
    def config_dir(self) -> Path:
        return self.workdir / "config"

    @property
    def secured(self) -> bool:
        return self.security != "none"

    @property
    def security_files(self):
        """:class:`kops.sandbox.security.SecurityFiles` of ``<workdir>/security``."""
        from kops.sandbox.security import SecurityFiles

        return SecurityFiles(self.workdir / "security")

    @property
    def state_file(self) -> Path:
        return self.workdir / "sandbox.json"

    def node_dir(self, node: str | int) -> Path:
        """``zookeeper``, ``broker-<id>`` or ``controller-<id>`` under the work dir."""
        if node == "zookeeper":
            return self.workdir / "zookeeper"
        if isinstance(node, int) and node in self.controller_ids:
            return self.workdir / f"controller-{node}"
        return self.workdir / f"broker-{int(node)}"

    def log_dir(self, node: str | int) -> Path:
        """Where the node's log4j files go (server.log, state-change.log, controller.log)."""
        return self.node_dir(node) / "logs"

    def data_dir(self, node: str | int) -> Path:
        """ZooKeeper's dataDir, or the broker's first (or only) log dir and the controller's ``log.dirs``."""
        return self.node_dir(node) / "data"

    def data_dirs(self, node: str | int) -> list[Path]:
        """Every log dir of a broker (its ``log.dirs``, in order): ``data``, then ``data-1``,
        ``data-2``, ... with ``log_dirs`` > 1 (JBOD). ZooKeeper and controllers: their one dir."""
        first = self.data_dir(node)
        if node == "zookeeper" or (isinstance(node, int) and node in self.controller_ids):
            return [first]
        return [first, *(self.node_dir(node) / f"data-{i}" for i in range(1, self.log_dirs))]

    def data_disks(self, broker_id: int) -> list[tuple[Path, Path]]:
        """``(image file, mount point)`` of each data disk of ``broker_id`` (``--data-disk``): one
        per log dir, ``disk.img`` on ``data``, ``disk-1.img`` on ``data-1``, ...; empty for a
        broker without data disks."""
        if broker_id not in self.data_disk_mb:
            return []
        node = self.node_dir(broker_id)
        return [(node / ("disk.img" if i == 0 else f"disk-{i}.img"), d)
                for i, d in enumerate(self.data_dirs(broker_id))]

    def stdout_file(self, node: str | int) -> Path:
        """stdout+stderr of the JVM (``kafkaServer.out`` in Kafka's scripts)."""
        return self.node_dir(node) / "console.out"

    def properties_file(self, node: str | int) -> Path:
        if node == "zookeeper":
            return self.config_dir / "zookeeper.properties"
        if isinstance(node, int) and node in self.controller_ids:
            return self.config_dir / f"controller-{node}.properties"
        return self.config_dir / f"broker-{int(node)}.properties"

    @property
    def log4j_file(self) -> Path:
        return self.log4j_file_of(self.kafka_version)

    def log4j_file_of(self, version: str) -> Path:
        """The logging configuration of a node running Kafka ``version`` (log4j 1 up to 3.x,
        log4j2 from 4.0: files of other names, so that both live in the config dir)."""
        return self.config_dir / dist.log4j_resource(version)

    # -- generated contents --------------------------------------------------------------------
    def zookeeper_properties(self) -> dict[str, str]:
        return {
            "dataDir": str(self.data_dir("zookeeper")),
            "clientPort": str(self.zookeeper_port),
            "clientPortAddress": self.host,
            "maxClientCnxns": "0",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat",
            "tickTime": str(ZK_TICK_MS),
            "initLimit": "10",
            "syncLimit": "5",
            # an empty-cluster sandbox: no snapshot throttling games
            "autopurge.snapRetainCount": "3",
            "autopurge.purgeInterval": "1",
        } | (self._zk_security() if self.secured else {})

    def _zk_security(self) -> dict[str, str]:
        from kops.sandbox.security import zookeeper_security_properties

        return zookeeper_security_properties()

    def _common_broker_properties(self) -> dict[str, str]:
        n = self.brokers
        rf = str(min(3, n))
        return {
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": str(min(2, n)),
            "group.initial.rebalance.delay.ms": "0",
            "auto.leader.rebalance.enable": "true" if self.auto_leader_rebalance else "false",
            "delete.topic.enable": "true",
            # topics are created on purpose: a client still writing to (or asking for) a topic
            # just deleted would recreate it, and a broker that was down during the deletion
            # keeps the old topic's log: the recreated partition then answers its followers
            # INCONSISTENT_TOPIC_ID for good (a reassignment of it never completes; seen in CI)
            "auto.create.topics.enable": "false",
            # a deleted or moved-away replica's files go a few seconds after, not a minute (Kafka's
            # default): a sandbox's disks show what its topics hold (the fault lab fills them)
            "log.segment.delete.delay.ms": "5000",
            # small footprint on a 2-core machine
            "num.network.threads": "2",
            "num.io.threads": "4",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "4",
            "log.cleaner.threads": "1",
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
            "socket.send.buffer.bytes": "102400",
            "socket.receive.buffer.bytes": "102400",
            "controlled.shutdown.enable": "true",
        }

    def broker_properties(self, broker_id: int, secrets: Any = None) -> dict[str, str]:
        """``server.properties`` of one broker (extra_properties last, so they win).

        Secured sandboxes (``security``): ``secrets`` (:class:`kops.sandbox.security.Secrets`)
        fills in the inter-broker SCRAM password (and, in a migration, the controller listener's
        PLAIN one); None writes a placeholder."""
        if broker_id not in self.broker_ids:
            raise BadInput(f"no broker {broker_id} in this sandbox (brokers {self.broker_ids})")
        port = self.broker_port(broker_id)
        proto = self.listener_protocol
        props: dict[str, str] = {}
        phase = self.broker_phase(broker_id)
        if phase != "kraft":
            props |= {
                "broker.id": str(broker_id),
                "zookeeper.connect": self.zookeeper_connect or "",
                "zookeeper.session.timeout.ms": str(ZK_SESSION_TIMEOUT_MS),
                "zookeeper.connection.timeout.ms": "10000",
                "listeners": f"{proto}://{self.host}:{port}",
                "advertised.listeners": f"{proto}://{self.host}:{port}",
            }
            # KIP-866: a ZooKeeper broker that also registers with the KRaft quorum (while reverting,
            # its next start is without: Kafka's revert removes the settings, then rolls it)
            if phase == "migrate" and self.migration == "migrating":
                props |= {
                    "zookeeper.metadata.migration.enable": "true",
                    "controller.quorum.voters": self.quorum_voters,
                    "controller.listener.names": "CONTROLLER",
                    "listener.security.protocol.map": self.protocol_map,
                    "inter.broker.protocol.version": dist.line(dist.release(self.kafka_version)),
                }
        else:
            props |= {
                "process.roles": "broker",
                "node.id": str(broker_id),
                **self.quorum_properties,
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": self.protocol_map,
                "inter.broker.listener.name": proto,
                "listeners": f"{proto}://{self.host}:{port}",
                "advertised.listeners": f"{proto}://{self.host}:{port}",
                "broker.session.timeout.ms": "6000",
                "broker.heartbeat.interval.ms": "1000",
            }
        props["broker.rack"] = self.rack_map[broker_id]
        props["log.dirs"] = ",".join(str(d) for d in self.data_dirs(broker_id))
        props |= self._common_broker_properties()
        if self.log_dirs > 1:
            # a failed log dir (`kops sandbox fail-log-dir`) is noticed at the next checkpoint
            # written into it: within 5 s, not Kafka's 60 s, also in a dir without replicas
            props["log.flush.offset.checkpoint.interval.ms"] = "5000"
        if self.secured:
            from kops.sandbox import security

            props |= security.broker_security_properties(self.security, self.security_files, secrets,
                                                         kraft=phase == "kraft")
            if phase == "kraft" or (phase == "migrate" and self.migration == "migrating"):
                props |= security.controller_client_properties(self.security, self.security_files, secrets)
        props |= {k: value_text(v) for k, v in self.extra_properties.items()}
        return props

    @property
    def protocol_map(self) -> str:
        """``listener.security.protocol.map`` of the KRaft nodes and the brokers in migration mode:
        the controllers' listener and the brokers' one, each secured as the sandbox is."""
        proto = self.listener_protocol
        return f"CONTROLLER:{proto},{proto}:{proto}"

    def controller_properties(self, node_id: int, secrets: Any = None) -> dict[str, str]:
        """KRaft controller-only node. Secured: ``secrets`` fills in the controller listener's
        PLAIN password and (in migration mode) the SCRAM one towards the ZooKeeper brokers."""
        if node_id not in self.controller_ids:
            raise BadInput(f"no controller {node_id} in this sandbox (controllers {self.controller_ids})")
        migrating = {  # KIP-866: the quorum takes the cluster's metadata over from ZooKeeper
            "zookeeper.metadata.migration.enable": "true",
            "zookeeper.connect": self.zookeeper_connect or "",
            "zookeeper.session.timeout.ms": str(ZK_SESSION_TIMEOUT_MS),
            # how the controllers reach the ZooKeeper brokers
            "inter.broker.listener.name": self.listener_protocol,
        } if self.migration == "migrating" else {}
        props = migrating | {
            "process.roles": "controller",
            "node.id": str(node_id),
            **self.quorum_properties,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": self.protocol_map,
            "listeners": f"CONTROLLER://{self.host}:{self.controller_port(node_id)}",
            "log.dirs": str(self.data_dir(node_id)),
            "auto.leader.rebalance.enable": "true" if self.auto_leader_rebalance else "false",
            "offsets.topic.replication.factor": str(min(3, self.brokers)),
            "transaction.state.log.replication.factor": str(min(3, self.brokers)),
            "transaction.state.log.min.isr": str(min(2, self.brokers)),
            "num.io.threads": "2",
            "num.network.threads": "2",
            "broker.session.timeout.ms": "6000",
            "broker.heartbeat.interval.ms": "1000",
        }
        if self.secured:
            from kops.sandbox.security import controller_security_properties

            props |= controller_security_properties(self.security, self.security_files, secrets,
                                                    migrating=self.migration == "migrating")
        return props

    def jvm_command(
        self, node: str | int, *, java: str, classpath: str, cds: Sequence[str] = ()
    ) -> list[str]:
        """The full ``java ...`` command line of a node (ZooKeeper, broker or controller)."""
        from kops.sandbox.dist import BROKER_MAIN, ZOOKEEPER_MAIN

        heap = parse_heap(self.zk_heap if node == "zookeeper" else self.heap)
        log_dir = self.log_dir(node)
        version = self.version_of(node)
        logging = [
            dist.log4j_flag(version, self.log4j_file_of(version)),
            f"-Dkops.state.change.level={self.state_change_log_level.upper()}",
        ]
        main = ZOOKEEPER_MAIN if node == "zookeeper" else BROKER_MAIN
        security: list[str] = []
        if self.secured:
            sf = self.security_files
            jaas = sf.zookeeper_jaas if node == "zookeeper" else sf.broker_jaas
            security = [f"-Djava.security.auth.login.config={jaas}"]  # a path: no secret on the command line
        return [
            java,
            f"-Xmx{heap}",
            f"-Xms{min(64, _heap_mb(heap))}m",
            *self.jvm_flags,
            *cds,
            *self.extra_jvm_flags,
            f"-Dkafka.logs.dir={log_dir}",
            *logging,
            *security,
            f"-Dkops.sandbox.node={node}",
            "-cp",
            classpath,
            main,
            str(self.properties_file(node)),
        ]

    # -- (de)serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["workdir"] = str(self.workdir)
        d["racks"] = {str(k): v for k, v in self.base_rack_map.items()}
        d["extra_brokers"] = {str(b): dict(e) for b, e in self.extra_brokers.items()}
        d["removed_brokers"] = list(self.removed_brokers)
        d["broker_phases"] = {str(b): p for b, p in self.broker_phases.items()}
        d["node_versions"] = {str(n): v for n, v in self.node_versions.items()}
        d["extra_controllers"] = {str(c): p for c, p in self.extra_controllers.items()}
        d["removed_controllers"] = list(self.removed_controllers)
        d["data_disk_mb"] = {str(b): mb for b, mb in self.data_disk_mb.items()}
        d["broker_ports"] = list(self.broker_ports) if self.broker_ports is not None else None
        d["controller_ports"] = list(self.controller_ports) if self.controller_ports is not None else None
        d["jvm_flags"] = list(self.jvm_flags)
        d["extra_jvm_flags"] = list(self.extra_jvm_flags)
        d["extra_properties"] = dict(self.extra_properties)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SandboxConfig:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if kw.get("racks") is not None:
            kw["racks"] = {int(k): v for k, v in kw["racks"].items()}
        return cls(**kw)

    def with_(self, **changes: Any) -> SandboxConfig:
        return replace(self, **changes)


def _normalise_extra_brokers(extra: Mapping[Any, Any] | None) -> dict[int, dict[str, Any]]:
    """``{id: {"rack": R, "port": P}}`` with int ids and ports, str racks, in id order."""
    out: dict[int, dict[str, Any]] = {}
    for k, v in dict(extra or {}).items():
        try:
            b = int(k)
        except (TypeError, ValueError):
            raise BadInput(f"added broker id {k!r} is not an integer") from None
        if not isinstance(v, Mapping) or "rack" not in v or "port" not in v:
            raise BadInput(f"added broker {b}: expected {{'rack': ..., 'port': ...}}, got {v!r}")
        try:
            port = int(v["port"])
        except (TypeError, ValueError):
            raise BadInput(f"added broker {b}: port {v['port']!r} is not a number") from None
        out[b] = {"rack": str(v["rack"]), "port": port}
    return dict(sorted(out.items()))


def _heap_mb(heap: str) -> int:
    h = heap.lower()
    return int(int(h[:-1]) * {"k": 1 / 1024, "m": 1, "g": 1024}[h[-1]])
