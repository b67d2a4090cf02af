"""The Kafka versions the version matrix proves kops on (tests/compat/, scripts/compat.sh).

``MATRIX`` is every (mode, version) the matrix runs; ``CORNERS`` the oldest and newest of each
mode, which the default test run (``./scripts/test.sh``, CI) runs on every submission. Which of
them a run takes: ``KOPS_COMPAT`` = ``corners`` (default), ``all``, ``none``, or a list such as
``zookeeper:2.8.2,kraft:4.4.0``.
"""

from __future__ import annotations

import os

#: ZooKeeper mode: 2.8 (the oldest kops supports) to 3.9 (the last line with ZooKeeper)
ZOOKEEPER = ("2.8.2", "3.0.2", "3.3.2", "3.5.2", "3.6.2", "3.7.2", "3.8.1", "3.9.2")
#: KRaft mode: 3.7 (the oldest the sandbox runs) to the newest 4.x
KRAFT = ("3.7.2", "3.8.1", "3.9.2", "4.0.2", "4.1.2", "4.2.2", "4.3.1", "4.4.0")

MATRIX: tuple[tuple[str, str], ...] = tuple([("zookeeper", v) for v in ZOOKEEPER] + [("kraft", v) for v in KRAFT])
CORNERS: tuple[tuple[str, str], ...] = (("zookeeper", ZOOKEEPER[0]), ("zookeeper", ZOOKEEPER[-1]),
                                        ("kraft", KRAFT[0]), ("kraft", KRAFT[-1]))


def selected(spec: str | None = None) -> list[tuple[str, str]]:
    """The (mode, version) pairs a run takes, from ``spec`` (default ``$KOPS_COMPAT``)."""
    spec = (spec if spec is not None else os.environ.get("KOPS_COMPAT", "corners")).strip().lower()
    if spec in ("", "corners"):
        return list(CORNERS)
    if spec == "all":
        return list(MATRIX)
    if spec == "none":
        return []
    out = []
    for item in spec.split(","):
        mode, sep, version = item.strip().partition(":")
        if not sep or mode not in ("zookeeper", "kraft") or not version:
            raise ValueError(f"KOPS_COMPAT={spec!r}: expected corners, all, none or mode:version,... "
                             f"(e.g. zookeeper:2.8.2,kraft:4.4.0), not {item!r}")
        out.append((mode, version))
    return out


def label(mode: str, version: str) -> str:
    return f"{mode}-{version}"
