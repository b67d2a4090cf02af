"""Prometheus textfile metrics (node_exporter's textfile collector), on ``prometheus_client``.

A job describes its gauges as plain data -- :class:`GaugeSpec`: a name, a help text and its
samples, each a label set and a value -- and :func:`write_textfile` puts them into a fresh
``CollectorRegistry`` and writes it with ``prometheus_client.write_to_textfile`` (a temporary
file renamed over the target, so the collector never reads half a file). The text format,
label escaping included, is the library's. Nothing here knows which job is writing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kops.errors import ClusterError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

#: one sample: its labels and its value
Sample = tuple[Mapping[str, str], float]


@dataclass(frozen=True)
class GaugeSpec:
    """One gauge family: ``labels`` are its label names, in the order they are written, and
    every sample carries exactly these. A labelled family with no samples is written as its HELP
    and TYPE lines only; an unlabelled one has exactly one sample."""

    name: str
    help: str
    samples: Sequence[Sample] = ()
    labels: Sequence[str] = ()

    @classmethod
    def single(cls, name: str, help: str, value: float) -> GaugeSpec:
        """An unlabelled gauge: one value."""
        return cls(name, help, [({}, value)])


def registry(gauges: Iterable[GaugeSpec]) -> CollectorRegistry:
    """A new registry holding these gauges, in this order."""
    # imported here: 60 ms, and most kops commands never write metrics
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()
    for spec in gauges:
        gauge = Gauge(spec.name, spec.help, labelnames=tuple(spec.labels), registry=reg)
        if not spec.labels:
            if len(spec.samples) != 1:
                raise ValueError(f"{spec.name}: an unlabelled gauge has one sample, not {len(spec.samples)}")
            gauge.set(float(spec.samples[0][1]))
            continue
        for labels, value in spec.samples:
            if set(labels) != set(spec.labels):
                raise ValueError(f"{spec.name}: sample labels {sorted(labels)} are not {sorted(spec.labels)}")
            gauge.labels(**labels).set(float(value))
    return reg


def text(gauges: Iterable[GaugeSpec]) -> str:
    """The Prometheus text format of these gauges, as :func:`write_textfile` writes it."""
    from prometheus_client import generate_latest

    return generate_latest(registry(gauges)).decode("utf-8")


def write_textfile(path: str, gauges: Iterable[GaugeSpec], *, what: str = "--metrics-file") -> None:
    """Write the gauges to ``path`` atomically (its directory is created if missing)."""
    from prometheus_client import write_to_textfile

    reg = registry(gauges)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_to_textfile(path, reg)
    except OSError as e:
        raise ClusterError(f"{what} {path}: cannot write ({e.strerror or e})") from None
