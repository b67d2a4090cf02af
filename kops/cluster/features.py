"""Kafka's feature flags (KIP-584) and ``metadata.version`` (KIP-778): what the cluster has
finalized, what its brokers support, and raising a level -- the last, irreversible step of a
KRaft upgrade (``kafka-features.sh upgrade --release-version``).

The levels of ``metadata.version`` are Kafka's ``MetadataVersion`` enum: a release such as
``3.9`` names its newest level (``3.9-IV0``, 21); ``4.4-IV2`` names one exactly. A level newer
than this table shows as ``level N``. Raising is through UpdateFeatures (kafka-python:
confluent-kafka has no call for it), validated by the active controller first, which refuses a
level that a registered broker or controller does not support. Lowering ``metadata.version`` is
refused: Kafka cannot take most levels back (KIP-778), and the metadata written since may not
read on the older level.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kops.cluster import versions
from kops.errors import BadInput, ClusterError

METADATA_VERSION = "metadata.version"
UPDATE_FEATURES = versions.UPDATE_FEATURES

#: Kafka's MetadataVersion levels (server-common ``MetadataVersion``, 3.0-IV1 .. 4.4-IV2): the
#: KRaft minimum is 3.3-IV3; 4.5-IV0 (34) is not a production level in Kafka 4.4
METADATA_LEVELS: dict[str, int] = {
    "3.0-IV1": 1, "3.1-IV0": 2, "3.2-IV0": 3, "3.3-IV0": 4, "3.3-IV1": 5, "3.3-IV2": 6, "3.3-IV3": 7,
    "3.4-IV0": 8, "3.5-IV0": 9, "3.5-IV1": 10, "3.5-IV2": 11, "3.6-IV0": 12, "3.6-IV1": 13, "3.6-IV2": 14,
    "3.7-IV0": 15, "3.7-IV1": 16, "3.7-IV2": 17, "3.7-IV3": 18, "3.7-IV4": 19, "3.8-IV0": 20, "3.9-IV0": 21,
    "4.0-IV0": 22, "4.0-IV1": 23, "4.0-IV2": 24, "4.0-IV3": 25, "4.1-IV0": 26, "4.1-IV1": 27, "4.2-IV0": 28,
    "4.2-IV1": 29, "4.3-IV0": 30, "4.4-IV0": 31, "4.4-IV1": 32, "4.4-IV2": 33,
}
_BY_LEVEL = {v: k for k, v in METADATA_LEVELS.items()}


def metadata_name(level: int | None) -> str:
    """``21`` -> ``3.9-IV0``; a level newer than the table -> ``level 40``."""
    if level is None:
        return "-"
    return _BY_LEVEL.get(level, f"level {level}")


def metadata_level(release: str) -> int:
    """``3.9`` -> 21 (its newest level), ``3.9-IV0`` -> 21, ``21`` -> 21; BadInput otherwise."""
    text = release.strip()
    if text.isdigit():
        return int(text)
    if text in METADATA_LEVELS:
        return METADATA_LEVELS[text]
    same = [lvl for name, lvl in METADATA_LEVELS.items() if name.split("-")[0] == text]
    if same:
        return max(same)
    raise BadInput(f"release version {release!r}: not a Kafka release kops knows (3.3 - 4.4, e.g. 3.9 or 3.9-IV0, "
                   "or a metadata.version level number)")


def wanted_levels(release_version: str | None, features: list[str]) -> dict[str, int]:
    """What an upgrade asks for: ``metadata.version`` from a release (``--release-version``) and
    ``NAME=LEVEL`` specs (``--feature``); BadInput naming a bad spec or an empty request."""
    out: dict[str, int] = {}
    if release_version:
        out[METADATA_VERSION] = metadata_level(release_version)
    for spec in features:
        name, sep, level = (x.strip() for x in str(spec).partition("="))
        if not sep or not name or not level:
            raise BadInput(f"feature {spec!r}: expected NAME=LEVEL, e.g. group.version=1")
        if name in out:
            raise BadInput(f"feature {spec!r}: {name} is asked for twice")
        if name == METADATA_VERSION:
            out[name] = metadata_level(level)
        elif level.isdigit():
            out[name] = int(level)
        else:
            raise BadInput(f"feature {spec!r}: the level must be a number")
    if not out:
        raise BadInput("nothing to upgrade: name a release version (metadata.version) or a feature NAME=LEVEL")
    return out


@dataclass(frozen=True)
class FeatureState:
    """One feature: the range the answering broker supports and the level the cluster has
    finalized (None: not finalized, i.e. level 0)."""

    name: str
    supported_min: int | None
    supported_max: int | None
    finalized: int | None

    def describe_level(self, level: int | None) -> str:
        if level is None:
            return "-"
        if self.name == METADATA_VERSION and level in _BY_LEVEL:
            return f"{_BY_LEVEL[level]} ({level})"
        return f"level {level}" if self.name == METADATA_VERSION else str(level)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "supported_min": self.supported_min,
                             "supported_max": self.supported_max, "finalized": self.finalized}
        if self.name == METADATA_VERSION:
            d["finalized_release"] = metadata_name(self.finalized) if self.finalized else None
            d["supported_max_release"] = metadata_name(self.supported_max) if self.supported_max else None
        return d


@dataclass(frozen=True)
class Features:
    features: tuple[FeatureState, ...]
    epoch: int | None = None

    def get(self, name: str) -> FeatureState | None:
        return next((f for f in self.features if f.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "features": [f.to_dict() for f in self.features]}


def read_features(conn) -> Features:
    """DescribeFeatures (ApiVersions v3+) of the cluster, as a broker answers it: the features it
    supports and those the cluster finalized (KRaft: ``metadata.version`` always)."""
    try:
        raw = conn.kp_admin().describe_features()
    except Exception as e:  # noqa: BLE001 - mapped to a kops error naming the request
        raise conn.map_error(e, "describe the cluster's features") from None
    # kafka-python 3.0.12 answers {name: {"supported": (min, max), "finalized": (min, max),
    # "finalized_epoch": e}}, not the {"supported_features": ...} its docstring describes
    out, epoch = [], None
    for name in sorted(raw or {}):
        entry = raw[name] if isinstance(raw[name], Mapping) else {}
        s, f = entry.get("supported"), entry.get("finalized")
        epoch = entry.get("finalized_epoch", epoch)
        out.append(FeatureState(name, s[0] if s else None, s[1] if s else None, f[1] if f else None))
    return Features(tuple(out), epoch)


@dataclass(frozen=True)
class Raise:
    """One feature to raise: from its finalized level to ``to``."""

    name: str
    before: int | None
    to: int

    def describe(self) -> str:
        f = FeatureState(self.name, None, None, None)
        return f"{self.name} {f.describe_level(self.before) if self.before else 'unset'} -> {f.describe_level(self.to)}"

    def to_dict(self) -> dict[str, Any]:
        return {"feature": self.name, "from": self.before, "to": self.to,
                **({"from_release": metadata_name(self.before) if self.before else None,
                    "to_release": metadata_name(self.to)} if self.name == METADATA_VERSION else {})}


def refuse_on_zookeeper(wanted: Mapping[str, int], mode: str | None) -> None:
    """BadInput when ``wanted`` raises metadata.version on a ZooKeeper-mode cluster."""
    if mode == "zookeeper" and METADATA_VERSION in wanted:
        raise BadInput("metadata.version is a KRaft feature: a ZooKeeper-mode cluster takes its version from each "
                       "broker's inter.broker.protocol.version; set it in the brokers' configs and roll them (the "
                       "rolling-restart playbook). Nothing was changed.")


def plan_raises(current: Features, wanted: Mapping[str, int], *, mode: str | None) -> list[Raise]:
    """The features to raise to reach ``wanted`` (pure): a feature already there is left out;
    a lower level, a level the brokers do not support or a feature they do not know is refused
    (BadInput naming it), and so is metadata.version on a ZooKeeper cluster."""
    refuse_on_zookeeper(wanted, mode)
    out: list[Raise] = []
    for name, level in sorted(wanted.items()):
        f = current.get(name)
        if f is None or f.supported_max is None:
            known = ", ".join(x.name for x in current.features if x.supported_max is not None) or "none"
            raise BadInput(f"feature {name!r}: the brokers do not support it (they support: {known}). "
                           "Nothing was changed.")
        if level > f.supported_max:
            raise BadInput(f"{name} {f.describe_level(level)}: the brokers support up to {f.describe_level(f.supported_max)}"
                           " -- upgrade every broker and controller first. Nothing was changed.")
        if f.supported_min is not None and level < f.supported_min:
            raise BadInput(f"{name} {f.describe_level(level)}: below the lowest level the brokers support "
                           f"({f.describe_level(f.supported_min)}). Nothing was changed.")
        if f.finalized is not None and level < f.finalized:
            raise BadInput(f"{name} {f.describe_level(level)} is lower than the finalized "
                           f"{f.describe_level(f.finalized)}: kops only raises feature levels (Kafka cannot take "
                           "most metadata.version levels back). Nothing was changed.")
        if f.finalized == level:
            continue
        out.append(Raise(name, f.finalized, level))
    return out


def apply_raises(conn, raises: list[Raise], *, validate_only: bool) -> None:
    """UpdateFeatures with ``raises`` (validate_only: the controller checks them, nothing is
    changed). Raises ClusterError naming each feature the controller refused, and why."""
    if not raises:
        return
    from kafka.admin import UpdateFeatureType

    try:
        answer = conn.kp_admin().update_features({r.name: (UpdateFeatureType.UPGRADE, r.to) for r in raises},
                                                 validate_only=validate_only,
                                                 timeout_ms=int(conn.timeout_s * 1000))
    except Exception as e:  # noqa: BLE001 - mapped to a kops error naming the request
        raise conn.map_error(e, "update features " + ", ".join(r.describe() for r in raises)) from None
    refused = {k: v for k, v in (answer or {}).items() if v != "OK"}
    if refused:
        raise ClusterError("the controller refused: " + "; ".join(f"{k}: {v}" for k, v in sorted(refused.items())))


__all__ = ["METADATA_LEVELS", "METADATA_VERSION", "UPDATE_FEATURES", "FeatureState", "Features", "Raise",
           "apply_raises", "metadata_level", "metadata_name", "plan_raises", "read_features", "refuse_on_zookeeper",
           "wanted_levels"]
