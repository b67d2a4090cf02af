"""Option types: the input layer's value checks (:mod:`kops.inputs.values`) as Click types.

A bad value is a usage error, raised while the options are parsed, before the command runs:
exit 2, and with ``--output json`` one JSON error document (see :mod:`kops.cli.main`). The same
checks run for a value from an environment variable (``KOPS_REQUEST_TIMEOUT=nan``). The input
layer is imported when a value is converted, not before: ``kops --help`` does not load it.
"""

from __future__ import annotations

from typing import Any

from typer._click.types import ParamType


class Checked(ParamType):
    """A Click type that converts with :mod:`kops.inputs.values`' converter ``convert``."""

    def __init__(self, name: str, convert: str, **kwargs: Any):
        self.name = name
        self._convert = convert
        self._kwargs = kwargs

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from kops.inputs import values

        # a bound named by its constant ("INT64_MAX") is looked up now, with the layer
        kwargs = {k: getattr(values, v) if isinstance(v, str) and v.isupper() else v for k, v in self._kwargs.items()}
        try:
            return getattr(values, self._convert)(value, **kwargs)
        except values.Invalid as e:
            self.fail(str(e), param, ctx)


def count(lo: int | str = 0, hi: int | str | None = None) -> Checked:
    """An integer from ``lo`` to ``hi`` (default Kafka's int32); a bound may be the name of a
    constant of :mod:`kops.inputs.values` (``"INT32_MIN"``, ``"INT64_MAX"``)."""
    return Checked("INTEGER", "integer", lo=lo, **({"hi": hi} if hi is not None else {}))


def seconds(lo: float = 0.0, hi: float | None = None) -> Checked:
    """Seconds: a finite number (``nan`` and ``inf`` refused) from ``lo`` to ``hi`` (default 30 days)."""
    return Checked("SECONDS", "duration", lo=lo, **({"hi": hi} if hi is not None else {}))


def number(lo: float, hi: float) -> Checked:
    return Checked("NUMBER", "number", lo=lo, hi=hi)


def size(lo: int = 0) -> Checked:
    """Bytes (or bytes/s): ``52428800``, ``50M``, ``2GiB``; int64."""
    return Checked("BYTES", "size", lo=lo)


BOOTSTRAP = Checked("HOST:PORT", "host_ports")
ZOOKEEPER = Checked("HOST:PORT[/chroot]", "zookeeper_connect")
BROKER = Checked("BROKER", "broker_id")
TOPIC = Checked("TOPIC", "topic")
RACK = Checked("RACK", "rack")
EXECUTION_ID = Checked("ID", "ident", what="an execution id")
RUN_ID = Checked("RUN_ID", "ident", what="a run id")
