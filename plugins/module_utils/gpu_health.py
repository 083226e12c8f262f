# Copyright: gpufleet contributors
# Apache License 2.0
"""GPU health from ``nvidia-smi`` CSV queries and kernel-log XIDs (REFERENCE.md section 5).

``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``: one line per GPU, values separated by ", ",
``[N/A]`` / ``[Not Supported]`` where unknown. ``--query-remapped-rows=...``: one line per GPU. Kernel log lines:
``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.``
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError

GPU_FIELDS = ("index", "uuid", "pci.bus_id", "name", "driver_version", "persistence_mode",
              "ecc.errors.uncorrected.volatile.total")
REMAP_FIELDS = ("gpu_bus_id", "gpu_uuid", "remapped_rows.correctable", "remapped_rows.uncorrectable",
                "remapped_rows.pending", "remapped_rows.failure")
UNKNOWN = ("[N/A]", "[Not Supported]", "N/A", "[Unknown Error]")
# XIDs worth a gate (REFERENCE.md): 48 DBE, 63/64 retirement/remap, 74 NVLink, 79 off the bus, 94/95 ECC.
FATAL_XIDS = (48, 63, 64, 74, 79, 94, 95)
XID_MEANING = {13: "graphics engine exception (usually the application)", 31: "GPU memory page fault (usually "
               "the application)", 43: "GPU stopped processing (usually the application)", 48: "double-bit ECC "
               "error", 63: "ECC page retirement or row remap recorded", 64: "ECC page retirement or row remap "
               "failure", 74: "NVLink error", 79: "GPU has fallen off the bus", 94: "contained ECC error",
               95: "uncontained ECC error"}
_XID = re.compile(r"NVRM: Xid \((?P<pci>[^)]*)\): (?P<xid>\d+)(?:, (?P<rest>.*))?")


def _csv_line(line: str, fields: Sequence[str], what: str, lineno: int) -> Dict[str, Optional[str]]:
    values = [v.strip() for v in line.split(", ")]
    if len(values) != len(fields):
        raise ParseError("%s: line %d has %d values, expected %d (%s); was the query given the same fields?" % (
            what, lineno, len(values), len(fields), ",".join(fields)))
    return {f: (None if v in UNKNOWN else v) for f, v in zip(fields, values)}


def parse_query_gpu(text: str, fields: Sequence[str] = GPU_FIELDS) -> List[Dict[str, Optional[str]]]:
    if text is None:
        raise ParseError("nvidia-smi --query-gpu: no output")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].lower().startswith(fields[0].lower() + ","):
        lines = lines[1:]  # a header line (csv without noheader)
    if lines and ("NVIDIA-SMI has failed" in lines[0] or "No devices were found" in lines[0]):
        raise ParseError("nvidia-smi: %s" % lines[0].strip(), nvidia_smi_error=lines[0].strip())
    return [_csv_line(ln, fields, "nvidia-smi --query-gpu", i) for i, ln in enumerate(lines, 1)]


def parse_remapped_rows(text: str, fields: Sequence[str] = REMAP_FIELDS) -> List[Dict[str, Optional[str]]]:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if lines and lines[0].lower().startswith(fields[0].lower() + ","):
        lines = lines[1:]
    return [_csv_line(ln, fields, "nvidia-smi --query-remapped-rows", i) for i, ln in enumerate(lines, 1)]


def scan_xids(text: str) -> List[Dict[str, Any]]:
    """Every XID event in kernel log text (dmesg / journalctl -k), in order."""
    events = []
    for line in (text or "").splitlines():
        m = _XID.search(line)
        if m:
            xid = int(m.group("xid"))
            events.append({"xid": xid, "pci": m.group("pci"), "detail": (m.group("rest") or "").strip(),
                           "meaning": XID_MEANING.get(xid, "see NVIDIA XID catalog"), "line": line.strip()})
    return events


def _int(value: Optional[str], what: str) -> Optional[int]:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ParseError("%s: %r is not a number" % (what, value))


def judge_health(gpus: List[Dict[str, Optional[str]]], remaps: List[Dict[str, Optional[str]]],
                 xids: List[Dict[str, Any]], policy: Mapping[str, Any], node: str = "") -> Dict[str, Any]:
    """``policy``: ``count`` (int), ``driver_version`` (str), ``persistence_mode`` (bool, default true),
    ``fatal_xids`` (list of int, default REFERENCE.md's list)."""
    subject = node or "node"
    if "count" not in policy:
        raise InputError("gpu policy: 'count' (GPUs expected on the node) is required")
    checks = [Check("gpu_count", subject, len(gpus) == int(policy["count"]), len(gpus), int(policy["count"]),
                    "a node with fewer GPUs than expected after a driver change or XID is worse than a failed node")]
    driver = policy.get("driver_version")
    for gpu in gpus:
        label = "%s gpu %s" % (subject, gpu.get("index") if gpu.get("index") is not None else gpu.get("uuid"))
        if driver and "driver_version" in gpu:
            checks.append(Check("gpu_driver_version", label, gpu["driver_version"] == str(driver),
                                gpu["driver_version"], str(driver)))
        if policy.get("persistence_mode", True) and "persistence_mode" in gpu:
            checks.append(Check("gpu_persistence_mode", label, gpu["persistence_mode"] == "Enabled",
                                gpu["persistence_mode"], "Enabled", "reset after reboot? enable nvidia-persistenced"))
        ecc_key = "ecc.errors.uncorrected.volatile.total"
        if ecc_key in gpu:
            ecc = _int(gpu[ecc_key], ecc_key)
            checks.append(Check("gpu_uncorrectable_ecc", label, not ecc, 0 if ecc is None else ecc, 0,
                                "" if ecc is not None else "ECC not reported"))
    for remap in remaps:
        label = "%s gpu %s" % (subject, remap.get("gpu_bus_id") or remap.get("gpu_uuid"))
        pending = (remap.get("remapped_rows.pending") or "").lower()
        failure = (remap.get("remapped_rows.failure") or "").lower()
        checks.append(Check("gpu_remap_pending", label, pending in ("", "no", "0"), pending or "n/a", "No",
                            "reset the GPU to apply pending row remaps"))
        checks.append(Check("gpu_remap_failure", label, failure in ("", "no", "0"), failure or "n/a", "No",
                            "row remap failed: the GPU needs replacement (RMA)"))
    fatal = {int(x) for x in policy.get("fatal_xids", FATAL_XIDS)}
    bad = [e for e in xids if e["xid"] in fatal]
    checks.append(Check("gpu_xid", subject, not bad, ", ".join("XID %d on %s (%s)" % (e["xid"], e["pci"], e["meaning"])
                                                                 for e in bad) or "none",
                        "no XID in %s" % sorted(fatal)))
    summary = summarize(checks)
    summary["gpu_count"] = len(gpus)
    summary["xids"] = xids
    return summary
