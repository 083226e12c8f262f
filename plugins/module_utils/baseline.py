# Copyright: gpufleet contributors
# Apache License 2.0
"""Pool baselines: one YAML document per node pool / GPU type, holding every gate threshold.

This schema is the one home of every gate default: modules take a validated baseline and add none of their own.
Loading validates the whole document against :data:`SCHEMA` and reports the first problem as
``FILE: field a.b.c: ...`` with the fix. Unknown fields are errors (a typo in a threshold name must not silently
disable a gate), every number is bounded (a value that would switch a gate off is refused with the reason), and a
gate can be switched off only through a named entry of ``opt_out`` with a reason, which the gates print and the
change record keeps.

Written by hand rather than with ansible-core's argument-spec validator: that validator converts "8" to 8 and
"yes" to true, and its messages do not name the file or the fix; a baseline must be exact.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpufleet.upgrade.plugins.module_utils import data_xids
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import BaselineError, InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_yaml, read_file

MAX_BASELINE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Field:
    """One baseline field. ``kind``: str, int, float, bool, list[str], list[int], map[str] (any values),
    map[float] (key -> positive number), map[reason] (key -> reason text), section (``fields``).
    ``low``/``high`` bound numbers (and list lengths with ``min_items``); ``why`` is said when a bound is broken."""

    kind: str
    required: bool = False
    default: Any = None
    low: Optional[float] = None
    high: Optional[float] = None
    why: str = ""
    pattern: str = ""
    min_items: int = 0
    fields: Optional[Dict[str, Field]] = None


REASON = Field("str", low=10, why="say why the check does not apply to this pool, in a sentence")
DEFAULT_NCCL_ARGS = ["-b", "8", "-e", "8G", "-f", "2", "-g", "8"]

SCHEMA: Dict[str, Field] = {
    "name": Field("str", required=True, pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$",
                  why="the pool name: lower case letters, digits, '.', '_' and '-'"),
    "description": Field("str", default=""),
    "gpu": Field("section", required=True, fields={
        "product": Field("str", required=True, low=1, why="the GPU type (the device plugin's product label); "
                         "canaries are picked per GPU type"),
        "count": Field("int", required=True, low=1, high=64,
                       why="GPUs per node: 0 would switch every GPU gate off, and no system has more than 64"),
        "driver_version": Field("str", required=True, pattern=r"^[0-9]{3}\.[0-9]{1,3}(\.[0-9]{1,3})?$",
                                why="a driver release such as 570.172.08"),
        "fabric_manager": Field("bool", default=False),
        "fatal_xids_extra": Field("list[int]", default=[], low=1, high=999,
                                  why="XIDs are numbers from 1 to 999; the default list is the NVIDIA catalogue's"),
        # XIDs NVIDIA's catalogue does not have (they fail as unknown) that this pool knows to be harmless
        "benign_xids": Field("map[reason]", default={}),
    }),
    "dcgm": Field("section", required=True, fields={
        "level": Field("int", default=1, low=1, high=4, why="dcgmi diag levels are 1 to 4"),
        "canary_level": Field("int", default=3, low=1, high=4, why="dcgmi diag levels are 1 to 4"),
        "required_tests": Field("list[str]", required=True, min_items=1,
                                why="a report is judged on the tests it must contain; an empty list judges nothing"),
        "allowed_skip": Field("list[str]", default=[]),
        "warnings_fail": Field("bool", default=False),
        "warning_max_severity": Field("int", default=1, low=0, high=1,
                                      why="severity 2 and above (isolate, triage, config, reset) is never a warning"),
    }),
    "nccl": Field("section", required=True, fields={
        "busbw_gbps": Field("map[float]", required=True, low=0.001, high=100000,
                            why="bus bandwidth in GB/s per message size, above 0"),
        "tolerance_pct": Field("float", default=10.0, low=0, high=50,
                               why="above 50% a halved bus bandwidth would pass"),
        "min_runs": Field("int", default=3, low=1, high=20, why="0 runs would judge nothing; bandwidth varies, so "
                          "a median of several runs is judged"),
        "args": Field("list[str]", default=DEFAULT_NCCL_ARGS),
    }),
    "node": Field("section", default={}, fields={
        "allocatable_gpus": Field("int", low=1, high=512,
                                  why="nvidia.com/gpu the Node must offer (defaults to gpu.count; MIG pools offer "
                                      "more)"),
        "kubelet_config": Field("map[str]", default={}),
    }),
    # what the canary workloads (gpufleet_canary_workloads) are judged by; required only for a configured workload
    "canary": Field("section", default={}, fields={
        "training_busbw_gbps": Field("map[float]", low=0.001, high=100000,
                                     why="the canary gang's all-reduce bus bandwidth in GB/s per message size, "
                                         "above 0"),
        "training_nodes": Field("int", default=2, low=1, high=1024,
                                why="the canary nodes the gang's figures were measured across (1: a single-node "
                                    "gang, which measures NVLink and not the network between nodes)"),
        "training_tolerance_pct": Field("float", default=10.0, low=0, high=50,
                                        why="above 50% a halved bus bandwidth would pass"),
        "inference_p99_ms": Field("float", low=0.001, high=600000,
                                  why="the p99 latency ceiling in milliseconds, above 0"),
        "inference_max_error_pct": Field("float", default=0.0, low=0, high=100,
                                         why="a percentage of the probe's requests"),
    }),
    "opt_out": Field("section", default={}, fields={
        "nccl": REASON,
        "ecc": REASON,
        "remapped_rows": REASON,
        "kernel_log": REASON,
        "persistence_mode": REASON,
        "xids": Field("map[reason]", default={}),
    }),
}

# Fields that moved, with what to write instead.
MOVED = {
    "gpu.fatal_xids": "the fatal XID list is NVIDIA's catalogue (data_xids.py); add XIDs with gpu.fatal_xids_extra, "
                      "or take one out with opt_out.xids: {XID: reason}",
    "gpu.persistence_mode": "persistence mode is always required; to skip the check set opt_out.persistence_mode "
                            "to the reason",
    "etcd": "etcd thresholds are per cell, not per pool: set them on the etcd_status module (or "
            "preflight/etcd_snapshot variables)",
}

_TYPE_NAMES = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean (true/false)",
               "list[str]": "a list of strings", "list[int]": "a list of integers",
               "map[str]": "a mapping of key: value", "map[float]": "a mapping of size: GB/s",
               "map[reason]": "a mapping of key: reason", "section": "a section (a mapping)"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _type_ok(kind: str, value: Any) -> bool:
    checks = {
        "str": lambda v: isinstance(v, str),
        "int": _is_int,
        "float": _is_number,
        "bool": lambda v: isinstance(v, bool),
        "list[str]": lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v),
        "list[int]": lambda v: isinstance(v, list) and all(_is_int(i) for i in v),
        "map[str]": lambda v: isinstance(v, dict),
        "map[float]": lambda v: isinstance(v, dict) and bool(v) and all(_is_number(i) for i in v.values()),
        "map[reason]": lambda v: isinstance(v, dict) and all(isinstance(i, str) for i in v.values()),
        "section": lambda v: isinstance(v, Mapping),
    }
    return bool(checks[kind](value))


def _describe(value: Any) -> str:
    return "%s (%r)" % (type(value).__name__, value) if not isinstance(value, (dict, list)) else type(value).__name__


def _fail(source: str, path: str, text: str, **extra: Any) -> BaselineError:
    return BaselineError("%s: field %s%s" % (source, path, text), file=source, field=path, **extra)


def _bounded(source: str, path: str, spec: Field, value: Any) -> None:
    """Bounds of one value: numbers by low/high, strings by length (low) and pattern, lists by length and items."""
    def out_of_bounds(number: float) -> bool:
        return (spec.low is not None and number < spec.low) or (spec.high is not None and number > spec.high)

    def limits() -> str:
        if spec.high is None:
            return "at least %g" % (spec.low or 0)
        return "from %g to %g" % (spec.low, spec.high) if spec.low is not None else "at most %g" % spec.high

    if spec.kind in ("int", "float") and out_of_bounds(value):
        raise _fail(source, path, ": %r is out of bounds, expected %s: %s" % (value, limits(), spec.why))
    if spec.kind == "str":
        if spec.low is not None and len(value.strip()) < spec.low:
            raise _fail(source, path, ": %r is too short (at least %d characters): %s" % (value, spec.low, spec.why))
        if spec.pattern and not re.fullmatch(spec.pattern, value):  # whole: `$` matches before a newline
            raise _fail(source, path, ": %r is not valid: %s" % (value, spec.why))
    if spec.kind.startswith("list"):
        if len(value) < spec.min_items:
            raise _fail(source, path, ": needs at least %d item(s): %s" % (spec.min_items, spec.why))
        for item in value:
            if spec.kind == "list[int]" and out_of_bounds(item):
                raise _fail(source, path, ": item %r is out of bounds, expected %s: %s" % (item, limits(), spec.why))
    if spec.kind == "map[float]":
        for key, item in value.items():
            if out_of_bounds(item):
                raise _fail(source, "%s.%s" % (path, key), ": %r is out of bounds, expected %s: %s" % (
                    item, limits(), spec.why))
    if spec.kind == "map[reason]":
        for key, item in value.items():
            if len(item.strip()) < (REASON.low or 0):
                raise _fail(source, "%s.%s" % (path, key), ": the reason %r is too short: %s" % (item, REASON.why))


def _section(doc: Any, source: str, fields: Dict[str, Field], prefix: str) -> Dict[str, Any]:
    if not isinstance(doc, Mapping):
        raise BaselineError("%s: %s must be a mapping, got %s" % (source, prefix.rstrip(".") or "the document",
                                                                  _describe(doc)), file=source)
    unknown = sorted((str(k) for k in doc if k not in fields), key=str)
    if unknown:
        path = prefix + unknown[0]
        hint = MOVED.get(path)
        raise _fail(source, path, " is not a baseline field; %s" % (
            hint or "allowed here: %s" % ", ".join(sorted(fields))))
    out: Dict[str, Any] = {}
    for key, spec in fields.items():
        path = prefix + key
        value = doc.get(key)
        if value is None:
            if spec.required:
                raise _fail(source, path, " is missing: expected %s%s" % (
                    _TYPE_NAMES[spec.kind], (" (%s)" % spec.why) if spec.why else ""))
            if spec.kind == "section":
                out[key] = _section({}, source, spec.fields or {}, path + ".")
            elif spec.default is not None:
                out[key] = _copy(spec.default)
            continue
        if not _type_ok(spec.kind, value):
            raise _fail(source, path, ": expected %s, got %s" % (_TYPE_NAMES[spec.kind], _describe(value)),
                        expected=spec.kind)
        if spec.kind == "section":
            out[key] = _section(value, source, spec.fields or {}, path + ".")
            continue
        _bounded(source, path, spec, value)
        out[key] = float(value) if spec.kind == "float" else _copy(value)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def validate(doc: Any, source: str = "baseline") -> Dict[str, Any]:
    """Validate a whole baseline and fill defaults. Raises :class:`BaselineError` naming the file, the field, the
    problem and the fix. Validating a validated baseline returns it unchanged."""
    schema = SCHEMA
    if isinstance(doc, Mapping) and isinstance(doc.get("opt_out"), Mapping) and doc["opt_out"].get("nccl"):
        # NCCL is not judged (opt_out.nccl says why): its section may be left out.
        nccl_fields = dict(SCHEMA["nccl"].fields or {}, busbw_gbps=Field("map[float]", default={}, low=0.001))
        schema = dict(SCHEMA, nccl=Field("section", default={}, fields=nccl_fields))
    out = _section(doc, source, schema, "")
    gpu, dcgm, nccl, opt = out["gpu"], out["dcgm"], out["nccl"], out["opt_out"]
    if out["node"].get("allocatable_gpus") is None:
        out["node"]["allocatable_gpus"] = gpu["count"]
    if dcgm["canary_level"] < dcgm["level"]:
        raise _fail(source, "dcgm.canary_level", ": %d is below dcgm.level %d; canaries get the deeper diagnostic"
                    % (dcgm["canary_level"], dcgm["level"]))
    both = sorted(set(t.lower() for t in dcgm["required_tests"]) & set(t.lower() for t in dcgm["allowed_skip"]))
    if both:
        raise _fail(source, "dcgm.allowed_skip", ": %s is also a required test; a required test may not skip"
                    % both[0])
    if not opt.get("nccl"):
        for key in nccl["busbw_gbps"]:
            _size(key, source, "nccl.busbw_gbps.%s" % key)
        if _data_check_off(nccl["args"]):
            raise _fail(source, "nccl.args", ": %s turns data checking off (-c 0): #wrong would read N/A and "
                        "wrong results would pass; drop it" % " ".join(nccl["args"]))
    for key in out["canary"].get("training_busbw_gbps") or {}:
        _size(key, source, "canary.training_busbw_gbps.%s" % key)
    for key in opt["xids"]:
        xid = _xid_key(key, source, "opt_out.xids")
        if xid not in data_xids.FATAL_XIDS:
            raise _fail(source, "opt_out.xids.%s" % key, " is not on the default fatal list: %s" % (
                "NVIDIA's catalogue gives XID %d the action %s, so it does not fail the gate (nothing to opt out of)"
                % (xid, data_xids.action(xid)) if data_xids.entry(xid) else
                "XID %d is not in NVIDIA's catalogue; an XID the pool knows to be harmless goes in gpu.benign_xids "
                "with the reason" % xid))
    out["opt_out"]["xids"] = {str(k): v for k, v in opt["xids"].items()}
    for key in gpu["benign_xids"]:
        xid = _xid_key(key, source, "gpu.benign_xids")
        known = data_xids.entry(xid)
        if known:
            raise _fail(source, "gpu.benign_xids.%s" % key, ": XID %d is in NVIDIA's catalogue (%s, action %s); "
                        "gpu.benign_xids is for XIDs the catalogue does not know; %s" % (
                            xid, known.meaning, known.action or "not given",
                            "take a fatal one out with opt_out.xids: {XID: reason}" if xid in data_xids.FATAL_XIDS
                            else "this one does not fail the gate"))
        if xid in gpu["fatal_xids_extra"]:
            raise _fail(source, "gpu.benign_xids.%s" % key, ": XID %d is also in gpu.fatal_xids_extra" % xid)
    gpu["benign_xids"] = {str(k): v for k, v in gpu["benign_xids"].items()}
    return out


def _size(key: Any, source: str, path: str) -> int:
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.nccl import parse_size
    try:
        return parse_size(key, path)
    except InputError as exc:
        raise _fail(source, path, ": %s" % exc.msg.split(": ", 1)[-1])


def _data_check_off(args: List[str]) -> bool:
    for i, arg in enumerate(args):
        if arg in ("-c", "--check") and i + 1 < len(args) and args[i + 1].strip() == "0":
            return True
        if re.match(r"^(-c|--check=)\s*0$", arg):
            return True
    return False


def _xid_key(key: Any, source: str, path: str) -> int:
    """An XID given as a mapping key (an int, or a string of ASCII digits: isdigit() takes Unicode digits)."""
    if not re.fullmatch(r"[0-9]{1,4}", str(key)):
        raise _fail(source, "%s.%s" % (path, key), " is not an XID: XIDs are numbers from 1 to 9999")
    return int(str(key))


def fatal_xids(baseline: Mapping[str, Any]) -> Dict[int, str]:
    """The catalogue XIDs this pool's gate fails on whatever the line says: the catalogue's fatal set
    (:data:`data_xids.FATAL_XIDS`), plus the pool's extras, less its opt-outs. An NVLink XID (144-150) that the
    driver marks Nonfatal passes, and an XID the catalogue does not know fails unless ``gpu.benign_xids`` names it
    (``gpu_health.xid_verdict``)."""
    out = {x: data_xids.meaning(x) for x in data_xids.FATAL_XIDS}
    out.update({x: data_xids.meaning(x) for x in baseline["gpu"].get("fatal_xids_extra") or []})
    for key in (baseline.get("opt_out") or {}).get("xids") or {}:
        out.pop(int(key), None)
    return out


def opt_outs(baseline: Mapping[str, Any]) -> List[Dict[str, str]]:
    """Every opt-out of the baseline as ``{check, reason}`` (printed by the gates, kept in the change record)."""
    opt = baseline.get("opt_out") or {}
    out = [{"check": key, "reason": opt[key]} for key in sorted(opt) if key != "xids" and opt[key]]
    out += [{"check": "xid %s" % key, "reason": reason} for key, reason in sorted((opt.get("xids") or {}).items())]
    benign = (baseline.get("gpu") or {}).get("benign_xids") or {}
    out += [{"check": "xid %s (benign, not in NVIDIA's catalogue)" % key, "reason": reason}
            for key, reason in sorted(benign.items())]
    return out


def load_text(text: str, source: str) -> Dict[str, Any]:
    """Validate a baseline given as YAML text (bounded: size, depth, alias expansion)."""
    try:
        doc = load_yaml(text, source)
    except ParseError as exc:
        raise BaselineError(exc.msg, file=source)
    return validate(doc, source)


def load_file(path: str) -> Dict[str, Any]:
    """Read and validate a YAML baseline file (a regular file; see textparse.read_file)."""
    try:
        text = read_file(path, "baseline", MAX_BASELINE_BYTES)
    except InputError as exc:
        if "does not exist" in exc.msg:
            raise BaselineError("%s: baseline file not found; create it from inventories/example/baselines/" % path,
                                file=path)
        raise BaselineError(exc.msg, file=path)
    return load_text(text, path)
