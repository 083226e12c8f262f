# Copyright: gpufleet contributors
# Apache License 2.0
"""GPU health from ``nvidia-smi`` CSV queries and the kernel log, judged against the pool baseline.

``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``: one line per GPU, values separated by ", ",
``[N/A]`` / ``[Not Supported]`` where a value is not supported or not enabled, ``[Unknown Error]`` on failure.
``--query-remapped-rows=...``: one line per GPU. ``nvidia-smi -q`` (the indented ``Key : Value`` report) given in
their place is refused by name, with what its ``Remapped Rows`` blocks say.

Kernel log (``journalctl -k -o short-precise`` or ``dmesg``), the lines the NVIDIA driver prints (its printf
formats in open-gpu-kernel-modules: ``NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s``, with
`` GPU-I:%02u`` / `` GPU-CI:%02u`` inside the parentheses on MIG):
- ``NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.``
- Blackwell NVLink XIDs 144-150 print the decode's severity: ``NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT
  Fatal XC0 i0 Link 08 (0x...)``, ``... 145, RLW_REMAP Nonfatal XC0 i0 Link 02 (...)``.
- A GPU can be lost with no ``Xid`` line at all: ``NVRM: The NVIDIA GPU 0000:b3:00.0`` / ``NVRM: (PCI ID:
  10de:26b5) installed in this system has`` / ``NVRM: fallen off the bus and is not responding to commands.`` (one
  message over three lines; journalctl and dmesg indent the second and third), ``NVRM: GPU 0000:81:00.0:
  RmInitAdapter failed! (0x25:0x40:1470)``, ``NVRM: The NVIDIA probe routine failed for 1 device(s).``.

Fail closed: a value nvidia-smi does not give (``[N/A]``), a GPU without a remapped-rows line, or a kernel log that
says ``-- No entries --`` is unmeasured, and unmeasured fails, unless the baseline opts that check out by name
(``opt_out.ecc``, ``opt_out.remapped_rows``, ``opt_out.kernel_log``, ``opt_out.persistence_mode``) with a reason.
An XID fails when NVIDIA's catalogue (``data_xids``) asks for more than an application restart, when the driver
prints ``Fatal`` on it, when its line cannot be read, and when the catalogue does not know it (unless the baseline
names it in ``gpu.benign_xids`` with a reason).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils import data_xids
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, opted_out, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import bounded_text

GPU_FIELDS = ("index", "uuid", "pci.bus_id", "name", "driver_version", "persistence_mode",
              "ecc.errors.uncorrected.volatile.total")
REMAP_FIELDS = ("gpu_bus_id", "gpu_uuid", "remapped_rows.correctable", "remapped_rows.uncorrectable",
                "remapped_rows.pending", "remapped_rows.failure")
UNKNOWN = ("[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", "[Unknown]", "")
_XID = re.compile(r"\bXid \((?P<pci>[^)]{0,64})\): (?P<xid>\d{1,6})(?:, (?P<rest>.{0,500}))?")
_XID_MENTION = re.compile(r"NVRM: Xid|\bXid \(")
_SEVERITY = re.compile(r"\b(?P<sev>Fatal|Nonfatal) XC[0-9]{1,3} i[0-9]{1,3} Link -?[0-9]{1,4}\b")
_PID_NAME = re.compile(r"^pid=[^,]{0,40}, name=[^,]{0,80}, ")
_GPU_ADDRESS = re.compile(r"(?<![0-9A-Fa-f])(?P<gpu>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\b")
_THE_GPU = re.compile(r"NVRM: The NVIDIA GPU (?P<gpu>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})")
# Adapter failures the driver logs without an Xid line (printf formats of open-gpu-kernel-modules, osinit.c and
# nv.c, as captured in tests/fixtures/nvidia_smi/README.md): what the gate calls each, and the pattern.
_ADAPTER: Tuple[Tuple[str, re.Pattern[str]], ...] = (
    ("fell off the bus", re.compile(r"NVRM: .{0,200}fallen off the bus")),
    ("RmInitAdapter failed", re.compile(r"NVRM: .{0,120}\b(?:RmInitAdapter|rm_init_adapter) failed")),
    ("the NVIDIA probe routine failed", re.compile(r"NVRM: The NVIDIA probe routine failed")),
    ("no NVIDIA GPU was initialised",
     re.compile(r"NVRM: None of the NVIDIA (?:devices|graphics adapters) were initiali[sz]ed")),
)
_CAUSED_BY = re.compile(r"\bcaused by previous Xid (?P<xid>[0-9]{1,6})\b")
_NO_ENTRIES = "-- No entries --"
UNKNOWN_XID = -1  # an "NVRM: Xid" line the parser cannot read
XID_BASELINE = "no XID that needs more than an application restart in NVIDIA's catalogue, and none outside it"
# nvidia-smi -q: "==============NVSMI LOG==============" and indented "Key      : Value" lines.
_Q_BANNER = re.compile(r"^=+\s*NVSMI LOG\s*=+$")
_Q_PAIR = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][A-Za-z0-9 ./()-]{0,60}?)\s+: (?P<value>.*)$")
_Q_GPU = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


def _csv_line(line: str, fields: Sequence[str], what: str, lineno: int) -> Dict[str, Optional[str]]:
    values = [v.strip() for v in line.split(", ")]
    if len(values) != len(fields):
        raise ParseError("%s: line %d has %d values, expected %d (%s); was the query given the same fields?" % (
            what, lineno, len(values), len(fields), ",".join(fields)))
    return {f: (None if v in UNKNOWN else v) for f, v in zip(fields, values)}


def _query_report(lines: Sequence[str]) -> Optional[str]:
    """What an ``nvidia-smi -q`` report says about row remapping, or None when ``lines`` are not one: the report
    has the NVSMI LOG banner, a ``GPU 00000000:10:1C.0`` heading or a ``Remapped Rows`` block, and ``Key : Value``
    lines, none of which a CSV line has."""
    stripped = [ln.strip() for ln in lines]
    marked = any(_Q_BANNER.match(ln) or _Q_GPU.match(ln) or ln == "Remapped Rows" for ln in stripped)
    if not marked or sum(1 for ln in lines if _Q_PAIR.match(ln)) < 2:
        return None
    gpu, block_indent, said = "?", -1, []
    for line in lines:
        heading = _Q_GPU.match(line.strip())
        indent = len(line) - len(line.lstrip())
        if heading:
            gpu, block_indent = heading.group("bus"), -1
        elif line.strip() == "Remapped Rows":
            block_indent = indent
        elif block_indent >= 0 and indent <= block_indent:
            block_indent = -1
        elif block_indent >= 0:
            pair = _Q_PAIR.match(line)
            if pair and pair.group("key") in ("Pending", "Remapping Failure Occurred"):
                said.append("%s: %s for GPU %s" % (pair.group("key"), pair.group("value").strip(), gpu))
    return "; ".join(said) if said else "no Remapped Rows block"


def _lines(text: Any, fields: Sequence[str], what: str) -> List[str]:
    raw = bounded_text(text, what).splitlines()
    lines = [ln for ln in raw if ln.strip()]
    report = _query_report(lines)
    if report is not None:
        query = "--query-gpu" if "query-gpu" in what else "--query-remapped-rows"
        raise ParseError("%s: this is nvidia-smi -q output (the indented 'Key : Value' report; it says %s), not the "
                         "CSV this gate reads: give the output of nvidia-smi %s=%s --format=csv,noheader,nounits"
                         % (what, report, query, ",".join(fields)), layout="nvidia-smi -q", report=report)
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


def _gpu_key(text: str) -> str:
    """``0000:9a:00`` (domain:bus:device, lower case) from ``PCI:0000:9A:00``, ``0000:9a:00.0`` ...; "" if none."""
    found = _GPU_ADDRESS.search(text)
    return found.group("gpu").lower() if found else ""


def _xid_event(line: str, found: re.Match[str]) -> Dict[str, Any]:
    xid = int(found.group("xid"))
    rest = (found.group("rest") or "").strip()
    severity = _SEVERITY.search(rest)
    unit = _PID_NAME.sub("", rest[:severity.start()]).strip() if severity else ""
    return {"xid": xid, "pci": found.group("pci"), "gpu": _gpu_key(found.group("pci")), "detail": rest,
            "meaning": data_xids.meaning(xid), "action": data_xids.action(xid),
            "severity": severity.group("sev") if severity else "", "unit": unit, "line": line.strip()[:500]}


def _adapter_event(lines: Sequence[str], index: int) -> Optional[Dict[str, Any]]:
    """An adapter failure logged without an Xid line, or None. The multi-line "has fallen off the bus" message
    names the GPU two lines above the line that says so."""
    line = lines[index]
    for kind, pattern in _ADAPTER:
        if not pattern.search(line):
            continue
        gpu = _gpu_key(line[line.find("NVRM:"):])
        for earlier in reversed(lines[max(0, index - 3):index]) if not gpu and kind == "fell off the bus" else ():
            named = _THE_GPU.search(earlier)
            if named:
                gpu = named.group("gpu").lower()
                break
        return {"kind": kind, "gpu": gpu, "line": line.strip()[:500], "count": 1}
    return None


def scan_kernel_log(text: Any) -> Dict[str, Any]:
    """``{measured, why, events, adapter}``: every XID event in kernel log text (``journalctl -k`` / ``dmesg``), in
    order, and every adapter failure logged without an Xid line (one per GPU and kind, with a count). A log with no
    line at all, or journalctl's ``-- No entries --``, is not measured: a journal that does not keep the kernel's
    messages is not the same as a kernel that logged no XID."""
    text = bounded_text(text, "kernel log")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or all(ln.strip() == _NO_ENTRIES for ln in lines):
        why = "journalctl printed '-- No entries --'" if lines else "the kernel log is empty"
        return {"measured": False, "why": why, "events": [], "adapter": []}
    events: List[Dict[str, Any]] = []
    adapter: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for index, line in enumerate(lines):
        found = _XID.search(line)
        if found:
            events.append(_xid_event(line, found))
        elif _XID_MENTION.search(line):
            # An XID line whose number cannot be read is an XID of unknown kind: judged as fatal, never skipped.
            events.append({"xid": UNKNOWN_XID, "pci": "?", "gpu": "", "detail": line.strip()[:200],
                           "meaning": "an XID line that cannot be read", "action": "", "severity": "", "unit": "",
                           "line": line.strip()[:500]})
        else:
            lost = _adapter_event(lines, index)
            if lost:
                key = (lost["kind"], lost["gpu"])
                if key in adapter:
                    adapter[key]["count"] += 1
                else:
                    adapter[key] = lost
    return {"measured": True, "why": "", "events": events, "adapter": list(adapter.values())}


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
    ``gpu.driver_version`` always; persistence, ECC, row remaps and the kernel log unless opted out; each XID with
    :func:`xid_verdict`, and GPUs the driver lost without an Xid line."""
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
    if opt.get("kernel_log"):
        checks.append(opted_out("gpu_xid", subject, opt["kernel_log"]))
    elif not kernel_log["measured"]:
        checks.append(Check("gpu_xid", subject, False, "not measured (%s)" % kernel_log["why"], XID_BASELINE,
                            "the kernel log must be readable to rule XIDs out; keep kernel messages in the journal, "
                            "or set opt_out.kernel_log with the reason"))
    else:
        checks.extend(_kernel_checks(kernel_log, baseline, subject))
    for item in opt.get("xids") or {}:
        checks.append(opted_out("gpu_xid_%s" % item, subject, opt["xids"][item]))
    for item, reason in sorted((gpu_policy.get("benign_xids") or {}).items()):
        checks.append(opted_out("gpu_xid_%s" % item, subject,
                                "not in NVIDIA's catalogue; named benign in gpu.benign_xids: %s" % reason))
    summary = summarize(checks)
    summary["gpu_count"] = len(gpus)
    summary["xids"] = [dict(e, verdict=v, why=w) for e, (v, w) in zip(
        kernel_log["events"], (xid_verdict(e, baseline) for e in kernel_log["events"]))]
    return summary


def xid_verdict(event: Mapping[str, Any], baseline: Mapping[str, Any]) -> Tuple[str, str]:
    """``(verdict, why)`` of one XID event under a validated baseline; verdict is ``fail``, ``pass``, ``opted out``
    (``opt_out.xids``) or ``benign`` (``gpu.benign_xids``)."""
    xid = event["xid"]
    if xid == UNKNOWN_XID:
        return "fail", event["detail"][:120]
    opted = (baseline.get("opt_out") or {}).get("xids") or {}
    if str(xid) in opted:
        return "opted out", opted[str(xid)]
    gpu_policy = baseline["gpu"]
    said = "the driver prints '%s'" % " ".join(p for p in (event.get("unit"), event.get("severity")) if p)
    if xid in (gpu_policy.get("fatal_xids_extra") or []):
        return "fail", "%s; on this pool's gpu.fatal_xids_extra" % data_xids.meaning(xid)
    entry = data_xids.entry(xid)
    if entry is None:
        benign = gpu_policy.get("benign_xids") or {}
        if str(xid) in benign:
            return "benign", benign[str(xid)]
        return "fail", ("%s; an XID the catalogue does not know is not harmless until the pool says so: name it in "
                        "gpu.benign_xids with the reason" % data_xids.meaning(xid))
    action = "NVIDIA's action %s" % (entry.action or "not given (read as fatal)")
    if xid in data_xids.FOLLOWS and event.get("severity") != "Fatal":
        cause = _CAUSED_BY.search(event.get("detail") or "")
        if cause is None:
            return "pass", "%s; %s" % (data_xids.meaning(xid), data_xids.FOLLOWS[xid])
        verdict, why = xid_verdict(dict(event, xid=int(cause.group("xid")), severity=None, unit=None), baseline)
        return verdict, "%s, caused by XID %s: %s" % (data_xids.meaning(xid), cause.group("xid"), why)
    if event.get("severity") == "Fatal":
        return "fail", "%s; %s; %s" % (data_xids.meaning(xid), said, action)
    if xid in data_xids.SEVERITY_DECIDES:
        if event.get("severity") == "Nonfatal":
            return "pass", "%s; %s" % (data_xids.meaning(xid), said)
        return "fail", ("%s; the line has no 'UNIT Fatal|Nonfatal XC0 i0 Link N' part, read as Fatal; %s"
                        % (data_xids.meaning(xid), action))
    if xid in data_xids.FATAL_XIDS:
        stricter = data_xids.STRICTER.get(xid)
        return "fail", "%s; %s%s" % (data_xids.meaning(xid), action,
                                     ("; gpufleet fails it: " + stricter) if stricter else "")
    return "pass", "%s; %s%s" % (data_xids.meaning(xid), action,
                                 ("; " + data_xids.APPLICATION[xid]) if xid in data_xids.APPLICATION else "")


def _kernel_checks(kernel_log: Mapping[str, Any], baseline: Mapping[str, Any], subject: str) -> List[Check]:
    """The XID check and the lost-GPU check of a measured kernel log."""
    failed: Dict[Tuple[int, str], Dict[str, int]] = {}
    lost_with_xid = set()
    for event in kernel_log["events"]:
        verdict, why = xid_verdict(event, baseline)
        if verdict == "fail":
            where = failed.setdefault((event["xid"], why), {})
            where[event["pci"]] = where.get(event["pci"], 0) + 1
            if event["xid"] == 79 and event.get("gpu"):
                lost_with_xid.add(event["gpu"])
    measured = "; ".join(("unreadable XID line %r" % why) if xid == UNKNOWN_XID else "XID %d on %s (%s)" % (
        xid, ", ".join(pci + ((" x%d" % n) if n > 1 else "") for pci, n in where.items()), why)
        for (xid, why), where in failed.items())
    checks = [Check("gpu_xid", subject, not failed, measured or "none", XID_BASELINE)]
    lost = [a for a in kernel_log.get("adapter") or [] if not (a["gpu"] and a["gpu"] in lost_with_xid)]
    lost_text = "; ".join("%s%s%s (%r)" % (("GPU %s: " % a["gpu"]) if a["gpu"] else "", a["kind"],
                                           (" x%d" % a["count"]) if a["count"] > 1 else "", a["line"][:160])
                          for a in lost) or "none"
    why = ("the driver lost a GPU or could not initialise it, with no Xid line: reboot the node (NVIDIA's action for "
           "a GPU that fell off the bus: RESTART_BM), replace the GPU if it persists") if lost else ""
    checks.append(Check("gpu_lost", subject, not lost, lost_text, "no GPU lost or failing to initialise", why))
    return checks


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
