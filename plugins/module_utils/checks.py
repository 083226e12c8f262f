# Copyright: gpufleet contributors
# Apache License 2.0
"""The shape every gate returns: a list of checks, each with the measured value and the baseline."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed


@dataclass
class Check:
    """One judged fact. ``subject`` is the node (and GPU, test, size...) it is about."""

    name: str
    subject: str
    passed: bool
    measured: Any
    expected: Any
    detail: str = ""
    severity: str = field(default="fail")  # fail | warn | opt-out (not judged: the baseline opts out, with why)

    def as_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "passed": self.passed, "measured": self.measured,
                "expected": self.expected, "detail": self.detail, "severity": self.severity}

    def message(self) -> str:
        text = "%s: check %s: measured %s, baseline %s" % (self.subject, self.name, _fmt(self.measured),
                                                           _fmt(self.expected))
        return text + (" (%s)" % self.detail if self.detail else "")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "%.2f" % value
    return str(value)


def opted_out(name: str, subject: str, reason: str) -> Check:
    """A check the pool baseline opts out of: not judged, recorded with the baseline's reason."""
    return Check(name, subject, True, "not judged", "opted out in the baseline", reason, severity="opt-out")


def summarize(checks: Sequence[Check]) -> Dict[str, Any]:
    """``{passed, checks, failures, warnings, opt_outs}``; failures are failed checks of severity fail. No check at
    all is not a pass: a gate that judged nothing fails."""
    if not checks:
        checks = [Check("measured", "gate", False, "no check was made", "at least one check",
                        "the gate had nothing to judge")]
    failures = [c for c in checks if not c.passed and c.severity == "fail"]
    warnings = [c for c in checks if not c.passed and c.severity == "warn"]
    opt = [c for c in checks if c.severity == "opt-out"]
    return {"passed": not failures, "checks": [c.as_dict() for c in checks],
            "failures": [c.message() for c in failures], "warnings": [c.message() for c in warnings],
            "opt_outs": ["%s: %s opted out: %s" % (c.subject, c.name, c.detail) for c in opt]}


def raise_if_failed(gate: str, summary: Dict[str, Any], **details: Any) -> None:
    """Raise :class:`GateFailed` naming every failed check (node, check, measured, baseline)."""
    if summary["passed"]:
        return
    failures: List[str] = summary["failures"]
    payload = dict(summary, gate=gate)
    payload.update(details)
    raise GateFailed("%s gate failed: %s" % (gate, "; ".join(failures)), **payload)
