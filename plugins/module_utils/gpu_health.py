# Copyright: gpufleet contributors
# Apache License 2.0
"""GPU health from ``nvidia-smi`` CSV queries and kernel-log XIDs, judged against the pool baseline.

``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``: one line per GPU, values separated by ", ",
``[N/A]`` / ``[Not Supported]`` where a value is not supported or not enabled, ``[Unknown Error]`` on failure.
``--query-remapped-rows=...``: one line per GPU. Kernel log lines (``journalctl -k``):
``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.``

Fail closed: a value nvidia-smi does not give (``[N/A]``), a GPU without a remapped-rows line, or a kernel log that
says ``-- No entries --`` is unmeasured, and unmeasured fails, unless the baseline opts that check out by name
(``opt_out.ecc``, ``opt_out.remapped_rows``, ``opt_out.kernel_log``, ``opt_out.persistence_mode``) with a reason.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import fatal_xids
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, opted_out, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_xids import meaning
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import bounded_text

GPU_FIELDS = ("index", "uuid", "pci.bus_id", "name", "driver_version", "persistence_mode",
              "ecc.errors.uncorrected.volatile.total")
REMAP_FIELDS = ("gpu_bus_id", "gpu_uuid", "remapped_rows.correctable", "remapped_rows.uncorrectable",
                "remapped_rows.pending", "remapped_rows.failure")
UNKNOWN = ("[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", "[Unknown]", "")
_XID = re.compile(r"NVRM: Xid \((?P<pci>[^)]{0,64})\): (?P<xid>\d{1,6})(?:, (?P<rest>.{0,500}))?")
_NO_ENTRIES = "-- No entries --"
UNKNOWN_XID = -1  # an "NVRM: Xid" line the parser cannot read


def _csv_line(line: str, fields: Sequence[str], what: str, lineno: int) -> Dict[str, Optional[str]]:
    values = [v.strip() for v in line.split(", ")]
    if len(values) != len(fields):
        raise ParseError("%s: line %d has %d values, expected %d (%s); was the query given the same fields?" % (
            what, lineno, len(values), len(fields), ",".join(fields)))
    return {f: (None if v in UNKNOWN else v) for f, v in zip(fields, values)}


def _lines(text: Any, fields: Sequence[str], what: str) -> List[str]:
    lines = [ln for ln in bounded_text(text, what).splitlines() if ln.strip()]
    if lines and lines[0].lower().startswith(fields[0].lower() + ","):
        lines = lines[1:]  # a header line (csv without noheader)
    if lines and ("NVIDIA-SMI has failed" in lines[0] or "No devices were found" in lines[0]):
        raise ParseError("nvidia-smi: %s" % lines[0].strip()[:300], nvidia_smi_error=lines[0].strip()[:300])
    return lines


def parse_query_gpu(text: Any, fields: Sequence[str] = GPU_FIELDS) -> List[Dict[str, Optional[str]]]:
    what = "nvidia-smi --query-gpu"
    return [_csv_line(ln, fields, what, i) for i, ln in enumerate(_lines(text, fields, what), 1)]


def parse_remapped_rows(text: Any, fields: Sequence[str] = REMAP_FIELDS) -> List[Dict[str, Optional[str]]]:
    what = "nvidia-smi --query-remapped-rows"
    return [_csv_line(ln, fields, what, i) for i, ln in enumerate(_lines(text, fields, what), 1)]


def scan_kernel_log(text: Any) -> Dict[str, Any]:
    """``{measured, why, events}``: every XID event in kernel log text (``journalctl -k`` / ``dmesg``), in order.
    A log with no line at all, or journalctl's ``-- No entries --``, is not measured: a journal that does not keep
    the kernel's messages is not the same as a kernel that logged no XID."""
    text = bounded_text(text, "kernel log")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or all(ln.strip() == _NO_ENTRIES for ln in lines):
        why = "journalctl printed '-- No entries --'" if lines else "the kernel log is empty"
        return {"measured": False, "why": why, "events": []}
    events = []
    for line in lines:
        m = _XID.search(line)
        if m:
            xid = int(m.group("xid"))
            events.append({"xid": xid, "pci": m.group("pci"), "detail": (m.group("rest") or "").strip(),
                           "meaning": meaning(xid), "line": line.strip()[:500]})
        elif "NVRM: Xid" in line:
            # An XID line whose number cannot be read is an XID of unknown kind: judged as fatal, never skipped.
            events.append({"xid": UNKNOWN_XID, "pci": "?", "detail": line.strip()[:200],
                           "meaning": "an XID line that cannot be read", "line": line.strip()[:500]})
    return {"measured": True, "why": "", "events": events}


def _int(value: Optional[str], what: str) -> Optional[int]:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ParseError("%s: %r is not a number" % (what, value[:80]))


def _flag(value: Optional[str]) -> Optional[bool]:
    """nvidia-smi's Yes/No (or 1/0); None when not reported."""
    text = (value or "").strip().lower()
    if text in ("no", "0"):
        return False
    if text in ("yes", "1"):
        return True
    return None


def judge_health(gpus: List[Dict[str, Optional[str]]], remaps: List[Dict[str, Optional[str]]],
                 kernel_log: Mapping[str, Any], baseline: Mapping[str, Any], node: str = "") -> Dict[str, Any]:
    """Judge GPUs against a validated pool baseline (``baseline.validate``): ``gpu.count`` and
    ``gpu.driver_version`` always; persistence, ECC, row remaps and the kernel log unless opted out; XIDs against
    :func:`baseline.fatal_xids`."""
    subject = node or "node"
    gpu_policy, opt = baseline["gpu"], baseline["opt_out"]
    count, driver = int(gpu_policy["count"]), str(gpu_policy["driver_version"])
    checks = [Check("gpu_count", subject, len(gpus) == count, len(gpus), count,
                    "a node with fewer GPUs than expected after a driver change or XID is worse than a failed node")]
    ids = [(g.get("index"), g.get("uuid"), (g.get("pci.bus_id") or "").lower()) for g in gpus]
    for position, field in enumerate(("index", "uuid", "pci.bus_id")):
        values = [i[position] for i in ids]
        repeated = sorted({str(v) for v in values if v is None or values.count(v) > 1})
        if repeated:
            checks.append(Check("gpu_identity", subject, False, "%s not unique or not reported: %s" % (
                field, ", ".join(repeated[:8])), "one %s per GPU" % field,
                "nvidia-smi listed a GPU twice or without its %s: the count cannot be trusted" % field))
    for position, gpu in enumerate(gpus):
        label = "%s gpu %s" % (subject, gpu.get("index") or gpu.get("uuid") or position)
        checks.append(Check("gpu_driver_version", label, gpu.get("driver_version") == driver,
                            gpu.get("driver_version") or "not reported", driver))
        if opt.get("persistence_mode"):
            checks.append(opted_out("gpu_persistence_mode", label, opt["persistence_mode"]))
        else:
            checks.append(Check("gpu_persistence_mode", label, gpu.get("persistence_mode") == "Enabled",
                                gpu.get("persistence_mode") or "not reported", "Enabled",
                                "reset after reboot? enable nvidia-persistenced"))
        ecc_key = "ecc.errors.uncorrected.volatile.total"
        if opt.get("ecc"):
            checks.append(opted_out("gpu_uncorrectable_ecc", label, opt["ecc"]))
        else:
            ecc = _int(gpu.get(ecc_key), ecc_key)
            checks.append(Check("gpu_uncorrectable_ecc", label, ecc == 0, "not reported ([N/A])" if ecc is None
                                else ecc, 0, "" if ecc is not None else "ECC is off or unsupported: enable it, or "
                                "set opt_out.ecc in the baseline with the reason"))
    if opt.get("remapped_rows"):
        checks.append(opted_out("gpu_remapped_rows", subject, opt["remapped_rows"]))
    else:
        checks.extend(_remap_checks(gpus, remaps, subject))
    fatal = fatal_xids(baseline)
    if opt.get("kernel_log"):
        checks.append(opted_out("gpu_xid", subject, opt["kernel_log"]))
    elif not kernel_log["measured"]:
        checks.append(Check("gpu_xid", subject, False, "not measured (%s)" % kernel_log["why"],
                            "no XID in %s" % sorted(fatal), "the kernel log must be readable to rule XIDs out; "
                            "keep kernel messages in the journal, or set opt_out.kernel_log with the reason"))
    else:
        bad = [e for e in kernel_log["events"] if e["xid"] in fatal or e["xid"] == UNKNOWN_XID]
        checks.append(Check("gpu_xid", subject, not bad, ", ".join(
            ("XID %d on %s (%s)" % (e["xid"], e["pci"], e["meaning"])) if e["xid"] != UNKNOWN_XID else
            "unreadable XID line %r" % e["detail"][:120] for e in bad) or "none", "no XID in %s" % sorted(fatal)))
    for item in opt.get("xids") or {}:
        checks.append(opted_out("gpu_xid_%s" % item, subject, opt["xids"][item]))
    summary = summarize(checks)
    summary["gpu_count"] = len(gpus)
    summary["xids"] = kernel_log["events"]
    return summary


def _remap_checks(gpus: List[Dict[str, Optional[str]]], remaps: List[Dict[str, Optional[str]]],
                  subject: str) -> List[Check]:
    """Every GPU needs a remapped-rows line that says No pending remap and No remap failure."""
    checks = []
    by_bus = {(r.get("gpu_bus_id") or "").lower(): r for r in remaps}
    by_uuid = {(r.get("gpu_uuid") or "").lower(): r for r in remaps}
    for position, gpu in enumerate(gpus):
        label = "%s gpu %s" % (subject, gpu.get("index") or gpu.get("uuid") or position)
        row = by_bus.get((gpu.get("pci.bus_id") or "").lower()) or by_uuid.get((gpu.get("uuid") or "").lower())
        if row is None:
            checks.append(Check("gpu_remapped_rows", label, False, "no remapped-rows line", "a line per GPU",
                                "nvidia-smi --query-remapped-rows did not report this GPU; set opt_out.remapped_rows "
                                "for GPUs without row remapping"))
            continue
        pending, failure = _flag(row.get("remapped_rows.pending")), _flag(row.get("remapped_rows.failure"))
        checks.append(Check("gpu_remap_pending", label, pending is False,
                            "not reported" if pending is None else ("yes" if pending else "no"), "No",
                            "reset the GPU to apply pending row remaps" if pending else
                            "" if pending is False else "row remapping not reported: set opt_out.remapped_rows "
                            "for GPUs without it"))
        checks.append(Check("gpu_remap_failure", label, failure is False,
                            "not reported" if failure is None else ("yes" if failure else "no"), "No",
                            "row remap failed: the GPU needs replacement (RMA)" if failure else ""))
    if not gpus and not remaps:
        checks.append(Check("gpu_remapped_rows", subject, False, "no GPU reported", "a line per GPU"))
    return checks
