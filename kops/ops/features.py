"""Raising the cluster's feature levels (``kops cluster features upgrade``, the ``upgrade``
playbook's ``upgrade_features`` step): the last, irreversible step of a KRaft upgrade.

One path for both: read the features, plan the raises (refusing a lower level, an unknown
feature, a level the brokers do not support, ``metadata.version`` on ZooKeeper), have the active
controller validate them (UpdateFeatures ``validate_only``: it checks every registered broker and
controller), and -- unless a dry run -- apply them and wait until the cluster answers with the
new levels.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kops.cluster.features import (
    UPDATE_FEATURES,
    Features,
    Raise,
    apply_raises,
    plan_raises,
    read_features,
)
from kops.errors import ClusterError


@dataclass
class FeaturesResult:
    before: Features
    raises: list[Raise]
    dry_run: bool
    after: Features | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.raises) and not self.dry_run

    def summary(self) -> str:
        if not self.raises:
            return "nothing to raise: " + "; ".join(self.notes or ["every feature asked for is at that level"])
        what = ", ".join(r.describe() for r in self.raises)
        if self.dry_run:
            return f"would raise {what} (validated by the active controller; nothing changed)"
        return f"raised {what} in {self.seconds:.1f} s"

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "changed": self.changed, "raises": [r.to_dict() for r in self.raises],
                "summary": self.summary(), "before": self.before.to_dict(),
                "after": self.after.to_dict() if self.after is not None else None, "seconds": round(self.seconds, 1)}


def raise_features(conn, wanted: Mapping[str, int], *, dry_run: bool, wait_s: float = 60.0) -> FeaturesResult:
    """Raise the features in ``wanted`` (name -> level) -- see the module's docstring. Raises
    BadInput (exit 2, nothing changed) for what cannot be asked, ClusterError when the controller
    refuses or the new levels do not show within ``wait_s``."""
    from kops.cluster import versions

    mode = conn.cluster_mode()
    before = read_features(conn)
    raises = plan_raises(before, wanted, mode=mode)
    res = FeaturesResult(before, raises, dry_run)
    if not raises:
        res.notes.append(", ".join(f"{n} is at {before.get(n).describe_level(lvl)}"  # type: ignore[union-attr]
                                   for n, lvl in sorted(wanted.items())))
        return res
    ids = [b.id for b in conn.describe_cluster().nodes]
    versions.read(conn, ids).require(UPDATE_FEATURES, "raising " + ", ".join(r.describe() for r in raises))
    apply_raises(conn, raises, validate_only=True)
    if dry_run:
        return res
    t0 = time.monotonic()
    apply_raises(conn, raises, validate_only=False)
    res.after = _wait_for_levels(conn, raises, wait_s)
    res.seconds = time.monotonic() - t0
    return res


def _wait_for_levels(conn, raises: list[Raise], wait_s: float) -> Features:
    """Read the features until every raised one answers with its new level (a broker applies
    the controller's record a moment later)."""
    from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

    def late(now: Features) -> list[Raise]:
        return [r for r in raises if now.get(r.name) is None or now.get(r.name).finalized != r.to]  # type: ignore[union-attr]

    try:
        return Retrying(stop=stop_after_delay(wait_s), wait=wait_fixed(0.5),
                        retry=retry_if_result(lambda now: bool(late(now))))(read_features, conn)
    except RetryError as e:
        now = e.last_attempt.result()
        raise ClusterError("the controller accepted " + ", ".join(r.describe() for r in raises) + " but after "
                           f"{wait_s:.0f} s the cluster still answers "
                           + ", ".join(f"{r.name} at {now.get(r.name).finalized if now.get(r.name) else '-'}"
                                       for r in late(now))) from None


__all__ = ["FeaturesResult", "raise_features"]
