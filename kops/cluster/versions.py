"""Which Kafka a cluster runs and what it can do, from the brokers' own ApiVersions answers.

kops supports every Kafka from 2.8 (the first with DescribeCluster, KIP-700) to 4.x, ZooKeeper
mode up to 3.9 and KRaft mode. The clients negotiate each request's version with each broker
(librdkafka and kafka-python both ask ApiVersions first); what a Kafka line lacks altogether is
a :class:`Feature` here, with the release and KIP that brought it, so that every message about it
says the same thing: the feature is refused with :class:`Unsupported` (exit 2, nothing changed)
or, where kops can go on without it, skipped with a warning naming the version it needs.

:func:`read` asks each live broker (kafka-python keeps one ApiVersions answer per connection) and
infers its release with kafka-python's table (``infer_broker_version_from_api_versions``): the
newest release whose APIs the broker answers; a broker newer than kafka-python's table shows as
"<newest it knows> or later".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kops.errors import BadInput


def line(release: tuple[int, int]) -> str:
    """``(3, 7)`` -> ``"3.7"``."""
    return f"{release[0]}.{release[1]}"


@dataclass(frozen=True)
class Feature:
    """Something kops uses that not every supported Kafka has: the API (and its lowest version)
    that carries it, the Kafka release that brought it and the KIP."""

    what: str
    api: str
    min_version: int
    since: tuple[int, int]
    kip: str

    def needs(self) -> str:
        """``Kafka 3.3 or later (KIP-827: DescribeLogDirs v4)``."""
        return f"Kafka {line(self.since)} or later ({self.kip}: {self.api} v{self.min_version})"


DESCRIBE_CLUSTER = Feature("the cluster's brokers, racks and controller", "DescribeCluster", 0, (2, 8), "KIP-700")
REASSIGNMENTS = Feature("partition reassignments through the Admin API", "AlterPartitionReassignments", 0, (2, 4),
                        "KIP-455")
ELECTIONS = Feature("leader elections through the Admin API", "ElectLeaders", 0, (2, 4), "KIP-460")
DISK_CAPACITY = Feature("the log dirs' total and usable bytes", "DescribeLogDirs", 4, (3, 3), "KIP-827")
METADATA_QUORUM = Feature("the KRaft metadata quorum", "DescribeQuorum", 0, (3, 3), "KIP-836")
FENCED_BROKERS = Feature("fenced KRaft brokers", "DescribeCluster", 2, (4, 0), "KIP-1073")
DYNAMIC_QUORUM = Feature("adding and removing KRaft controllers", "AddRaftVoter", 0, (3, 9), "KIP-853")
UPDATE_FEATURES = Feature("raising metadata.version and other feature levels", "UpdateFeatures", 1, (3, 3),
                          "KIP-778")

#: every feature kops gates, in release order (docs/compatibility.md lists them)
FEATURES: tuple[Feature, ...] = (REASSIGNMENTS, ELECTIONS, DESCRIBE_CLUSTER, DISK_CAPACITY, METADATA_QUORUM,
                                 UPDATE_FEATURES, DYNAMIC_QUORUM, FENCED_BROKERS)

OLDEST = DESCRIBE_CLUSTER.since
"""The oldest Kafka kops supports."""


class Unsupported(BadInput):
    """The cluster's Kafka lacks what was asked for (exit 2: nothing was changed)."""


def _api_key(name: str) -> int:
    from kafka.protocol.api_key import ApiKey

    return int(ApiKey[name])


@dataclass(frozen=True)
class BrokerApis:
    """One broker's ApiVersions answer: API key -> (lowest, highest) version, and the Kafka
    release that answer fits (kafka-python's inference; None when nothing fits)."""

    broker: int
    apis: Mapping[int, tuple[int, int]]
    release: tuple[int, int] | None
    #: the release is the newest kafka-python knows: the broker may be newer
    or_later: bool = False

    def supports(self, feature: Feature) -> bool:
        span = self.apis.get(_api_key(feature.api))
        return span is not None and span[0] <= feature.min_version <= span[1]

    def kafka(self) -> str:
        if self.release is None:
            return "?"
        return line(self.release) + ("+" if self.or_later else "")


@dataclass(frozen=True)
class ClusterApis:
    """The ApiVersions of the live brokers (a cluster mid-upgrade has several releases)."""

    brokers: tuple[BrokerApis, ...] = field(default_factory=tuple)

    def lacking(self, feature: Feature) -> list[int]:
        """The brokers that cannot serve ``feature``."""
        return [b.broker for b in self.brokers if not b.supports(feature)]

    def supports(self, feature: Feature) -> bool:
        return bool(self.brokers) and not self.lacking(feature)

    def kafka(self) -> str:
        """``3.6``, ``3.5 - 3.6`` (brokers on different releases) or ``?``."""
        known = sorted({(b.release, b.or_later) for b in self.brokers if b.release is not None})
        if not known:
            return "?"
        lo, hi = known[0], known[-1]
        text = line(lo[0]) + ("+" if lo[1] else "")
        return text if lo == hi else f"{text} - {line(hi[0])}{'+' if hi[1] else ''}"

    def release(self) -> tuple[int, int] | None:
        """The oldest release among the brokers (what every broker has), None if unknown."""
        known = [b.release for b in self.brokers if b.release is not None]
        return min(known) if known else None

    def explain(self, feature: Feature) -> str:
        """Why ``feature`` is missing: ``... needs Kafka 3.3 or later (KIP-827: DescribeLogDirs
        v4); brokers 0, 1 run Kafka 3.2``."""
        lacking = self.lacking(feature)
        by = {b.broker: b for b in self.brokers}
        runs = sorted({by[b].kafka() for b in lacking})
        who = f"broker{'s' if len(lacking) > 1 else ''} {', '.join(map(str, lacking))}"
        return f"{feature.what} needs {feature.needs()}; {who} run{'' if len(lacking) > 1 else 's'} Kafka {', '.join(runs)}"

    def require(self, feature: Feature, what: str) -> None:
        """Refuse ``what`` (:class:`Unsupported`, exit 2) unless every live broker has ``feature``."""
        if self.brokers and self.lacking(feature):
            raise Unsupported(f"{what}: {self.explain(feature)}. Nothing was changed.")

    def to_dict(self) -> dict[str, Any]:
        return {"kafka": self.kafka(),
                "brokers": {str(b.broker): b.kafka() for b in self.brokers},
                "features": {f.kip: {"what": f.what, "needs": f.needs(), "supported": self.supports(f),
                                     "lacking": self.lacking(f)} for f in FEATURES}}


def broker_apis(broker: int, api_versions: Mapping[int, tuple[int, int]]) -> BrokerApis:
    """A broker's :class:`BrokerApis` from its ApiVersions answer (API key -> (min, max))."""
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS, infer_broker_version_from_api_versions

    apis = {int(k): (int(v[0]), int(v[1])) for k, v in api_versions.items()}
    try:
        inferred = infer_broker_version_from_api_versions(apis) if apis else None
    except Exception:  # noqa: BLE001 - an answer kafka-python's table does not fit: release unknown
        inferred = None
    release = tuple(inferred[:2]) if inferred else None
    newest = max(BROKER_API_VERSIONS)[:2]
    return BrokerApis(broker, apis, release, or_later=release is not None and release >= newest)  # type: ignore[arg-type]


def read(conn, broker_ids: Iterable[int]) -> ClusterApis:
    """Each broker's ApiVersions, through kafka-python's connection to it (one question per
    broker; a broker that does not answer is left out)."""
    admin = conn.kp_admin()
    out = []
    for b in sorted(broker_ids):
        try:
            data = admin.get_broker_version_data(b)
        except Exception:  # noqa: BLE001 - not answering now: its features are not known
            continue
        if data is not None and data.api_versions:
            out.append(broker_apis(b, data.api_versions))
    return ClusterApis(tuple(out))


__all__ = [
    "DESCRIBE_CLUSTER", "DISK_CAPACITY", "DYNAMIC_QUORUM", "ELECTIONS", "FEATURES", "FENCED_BROKERS",
    "METADATA_QUORUM", "OLDEST", "REASSIGNMENTS", "UPDATE_FEATURES", "BrokerApis", "ClusterApis", "Feature",
    "Unsupported",
    "broker_apis", "line", "read",
]
