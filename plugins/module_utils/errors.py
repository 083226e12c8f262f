# Copyright: gpufleet contributors
# Apache License 2.0
"""One family of typed exceptions for gpufleet.

Pure functions in module_utils raise these; a module converts them to ``fail_json`` in exactly one place
(:func:`module_support.run_module`). Each carries a message that says what failed, on which object, and what to
do, plus structured ``details`` (partial results) that the module returns alongside the failure.
"""
from __future__ import annotations

from typing import Any


class GpufleetError(Exception):
    """Base class: ``msg`` for humans, ``details`` for machines."""

    def __init__(self, msg: str, **details: Any) -> None:
        super().__init__(msg)
        self.msg = msg
        self.details = details


class InputError(GpufleetError):
    """A module argument or input document is malformed. Nothing was changed."""


class ParseError(GpufleetError):
    """Tool output could not be parsed (truncated, wrong tool, wrong format)."""


class PolicyError(GpufleetError):
    """The requested change breaks a rule (skew policy, downgrade, skipped minor)."""


class BaselineError(GpufleetError):
    """A baseline file is missing a field or has a field of the wrong type."""


class PlanError(GpufleetError):
    """The wave planner cannot satisfy its constraints with the given nodes and caps."""


class GateFailed(GpufleetError):
    """A gate was evaluated and failed. ``details['checks']`` holds every check, passed or not."""
