"""The registry of step implementations: ``@step("name")`` registers a function taking the
step's resolved fields and a RunContext. :mod:`kops.playbook.steps` and the step families in
modules of their own (:mod:`kops.playbook.migration`) register here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kops.playbook.state import RunContext

StepFn = Callable[[dict[str, Any], RunContext], dict[str, Any]]
REGISTRY: dict[str, StepFn] = {}


def step(name: str) -> Callable[[StepFn], StepFn]:
    def deco(fn: StepFn) -> StepFn:
        REGISTRY[name] = fn
        return fn

    return deco
