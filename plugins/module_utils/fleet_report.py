# Copyright: gpufleet contributors
# Apache License 2.0
"""The fleet report: per cell its version and skew (control plane, kubelet spread per pool), days to end of life,
days behind its minor's latest patch, ring and state; the fleet's version spread and ring progress; and the patch
SLO alerts (a cell out of support, or more than ``patch_slo_days`` behind its latest patch). As data (JSON), and
rendered as Markdown and as a static HTML page with a chart (inline SVG, no script).

Fails closed: a cell with no reading, a minor missing from the release calendar or from ``latest_patches``, or a
version that does not parse is an alert, never a silent pass. The latest patch of each minor is an input: the
release calendar (data_releases.py) has no patch dates, and a stale "latest" would hide a cell that is behind.

Each halt the fleet's policy switches off is shown with its reason (``disabled_halts``; fleet.parse_halt_policy
refuses one without a reason): not an alert, since the policy says why, but never out of sight.
"""
from __future__ import annotations

import datetime
import html
import json
import os
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import disabled_halts, parse_fleet
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet_run import check_ledger
from ansible_collections.gpufleet.upgrade.plugins.module_utils.variables import DEFAULT_PATCH_SLO_DAYS
from ansible_collections.gpufleet.upgrade.plugins.module_utils.support_calendar import OUT_OF_SUPPORT, UNKNOWN, \
    parse_date, support_status
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import (
    APISERVER, KUBELET, Observed, parse_release, parse_version, skew_violations)

STATES = ("pending", "upgrading", "soaking", "done", "failed", "halted")


def parse_latest_patches(value: Any) -> Dict[str, Dict[str, Any]]:
    """``{"1.36": {"version": "v1.36.3", "released": "2026-07-22"}}``: each minor's latest patch and its date."""
    if not isinstance(value, Mapping) or not value:
        raise InputError("latest_patches: expected a mapping of minor to {version, released}, such as "
                         "{'1.36': {'version': 'v1.36.3', 'released': '2026-07-22'}}; the report needs each running "
                         "minor's latest patch")
    out = {}
    for minor, entry in value.items():
        where = "latest_patches[%s]" % minor
        if not isinstance(entry, Mapping) or set(entry) != {"version", "released"}:
            raise InputError("%s: expected {version, released}, got %r" % (where, entry))
        version = parse_release(entry["version"], where + ".version")
        if version.minor_str != str(minor).lstrip("v"):
            raise InputError("%s.version: %s is not a release of %s" % (where, version, minor))
        released = parse_date(entry["released"], where + ".released")
        out[version.minor_str] = {"version": str(version), "released": released}
    return out


def _cell_row(cell: Mapping[str, Any], reading: Optional[Mapping[str, Any]], today: datetime.date,
              patches: Mapping[str, Dict[str, Any]], slo: int) -> Dict[str, Any]:
    # what could not be read stays as it starts: unknown
    row: Dict[str, Any] = {"cell": cell["name"], "ring": cell["ring"], "kind": cell["kind"], "region": cell["region"],
                           "alerts": [], "state": "unknown", "control_plane": None, "pools": [], "days_to_eol": None,
                           "support": "unknown", "latest_patch": None, "days_behind_latest_patch": None,
                           "change_record": None}
    if reading is None:
        row["alerts"].append("%s: no reading of the cell; its versions and state are unknown" % cell["name"])
        return row
    state = str(reading.get("state") or "pending")
    if state not in STATES:
        row["alerts"].append("%s: state %r is not one of %s" % (cell["name"], state, ", ".join(STATES)))
    row["state"] = state
    row["reason"] = reading.get("reason") or ""
    row["change_record"] = reading.get("change_record") or None
    if state in ("failed", "halted"):  # a stopped fleet is news for the scheduled report too
        row["alerts"].append("%s: %s (%s)" % (cell["name"], state, row["reason"] or "no reason recorded"))
    if reading.get("unread"):
        row["alerts"].append("%s: its versions could not be read from its API (state %s)" % (cell["name"], state))
        return row
    try:
        cp = parse_version(reading.get("control_plane"), "%s.control_plane" % cell["name"])
    except GpufleetError as exc:
        row["alerts"].append(exc.msg)
        return row
    row["control_plane"] = str(cp)
    pools = []
    for name, kubelets in sorted((reading.get("kubelets") or {}).items()):
        try:
            versions = sorted((parse_version(v, "%s.kubelets.%s" % (cell["name"], name)) for v in kubelets or []),
                              key=lambda v: v.sort_key())
        except GpufleetError as exc:
            row["alerts"].append(exc.msg)
            continue
        if not versions:
            row["alerts"].append("%s: pool %s has no kubelet reading" % (cell["name"], name))
            continue
        lag = cp.minor - versions[0].minor
        pools.append({"pool": name, "oldest": str(versions[0]), "newest": str(versions[-1]), "nodes": len(versions),
                      "minors_behind": lag})
        pool_seen = [Observed(APISERVER, "control-plane", cp)] + [
            Observed(KUBELET, "pool " + name, v, name) for v in (versions[0], versions[-1])]
        try:
            broken = skew_violations(pool_seen)
        except GpufleetError as exc:  # e.g. kubelets of another major than the control plane
            row["alerts"].append("%s: pool %s: %s" % (cell["name"], name, exc.msg))
            continue
        if broken:
            row["alerts"].append("%s: pool %s kubelets %s..%s are out of the skew policy against the control plane "
                                 "%s" % (cell["name"], name, versions[0], versions[-1], cp))
    row["pools"] = pools
    unread = sorted({p["name"] for p in cell["pools"]} - {p["pool"] for p in pools})
    if unread:  # a pool the fleet declares that no Node of the cell is in
        row["alerts"].append("%s: pool(s) %s of the fleet have no kubelet read from the cell's Nodes" % (
            cell["name"], ", ".join(unread)))
    if reading.get("no_node"):
        row["alerts"].append("%s: inventory host(s) %s have no Node in the cell's API" % (
            cell["name"], ", ".join(sorted(reading["no_node"]))))
    support = support_status(str(cp), today)
    row["support"], row["days_to_eol"], row["eol"] = support["status"], support["days_to_eol"], support["eol"]
    if support["status"] in (OUT_OF_SUPPORT, UNKNOWN):
        row["alerts"].append("%s: %s" % (cell["name"], support["message"]))
    latest = patches.get(cp.minor_str)
    if latest is None:
        row["alerts"].append("%s: no latest patch known for v%s; add latest_patches['%s']" % (
            cell["name"], cp.minor_str, cp.minor_str))
        return row
    behind = parse_version(latest["version"]).sort_key() > cp.sort_key()
    days = max((today - latest["released"]).days, 0) if behind else 0
    row["latest_patch"], row["days_behind_latest_patch"] = latest["version"], days
    if days > slo:
        row["alerts"].append("%s: %s is %d days behind %s (released %s; the patch SLO is %d days)" % (
            cell["name"], cp, days, latest["version"], latest["released"], slo))
    return row


def readings_from_ledger(plan: Mapping[str, Any], ledger: Optional[Mapping[str, Any]],
                         versions: Mapping[str, Optional[Mapping[str, Any]]]) -> Dict[str, Dict[str, Any]]:
    """The report's per-cell readings from what the fleet run keeps: the fleet ledger, read back as the fleet run
    reads it (fleet_run.check_ledger: a ledger of another fleet or version is refused, a cell done on an older target
    is pending again, a ring with a cell still to move has no soak), for each cell's state, reason and last change
    record; and each cell's ``versions`` as read from its own API just now (module_utils/fleet_readings.py). A
    halted cell shows ``halted`` with its conditions; a done cell whose ring is still soaking shows ``soaking``. A
    cell whose versions could not be read keeps its state and gets no versions, so the report alerts on it.
    ``ledger`` None: the fleet never ran (cells at their target done, the others pending)."""
    checked = check_ledger(ledger, plan)
    halt = checked.get("halt") or {}
    out: Dict[str, Dict[str, Any]] = {}
    for name, entry in sorted(checked["cells"].items()):
        state, reason = str(entry.get("state") or "pending"), str(entry.get("reason") or "")
        if name in (halt.get("cells") or []):
            state = "halted"
            reason = "; ".join(c.get("message", "") for c in halt.get("conditions") or [] if c.get("cell") == name) \
                or str(halt.get("message") or "")
        elif state == "done":
            soak = checked["rings"].get(entry.get("ring")) or {}
            if soak.get("soak_started") and not soak.get("soak_done"):
                state = "soaking"
        reading: Dict[str, Any] = {"state": state, "reason": reason, "change_record": entry.get("change_record")}
        found = versions.get(name)
        if isinstance(found, Mapping):
            reading["control_plane"] = found.get("control_plane")
            reading["kubelets"] = dict(found.get("kubelets") or {})
            reading["no_node"] = list(found.get("no_node") or [])
        else:
            reading["unread"] = True
        out[name] = reading
    unknown = sorted(set(versions) - set(out))
    if unknown:
        raise InputError("versions: %s not a cell of the fleet %s" % (", ".join(unknown), plan["fleet"]))
    return out


def build_report(fleet: Any, readings: Optional[Mapping[str, Any]], latest_patches: Any, today: Any,
                 patch_slo_days: int = DEFAULT_PATCH_SLO_DAYS) -> Dict[str, Any]:
    """The report. ``readings``: per cell ``{control_plane, kubelets: {pool: [versions]}, state, reason,
    change_record}`` (from the fleet ledger and the cells); None reads the versions declared in the fleet."""
    parsed = parse_fleet(fleet)
    day = parse_date(today, "today")
    if not isinstance(patch_slo_days, int) or not 0 <= patch_slo_days <= 3650:
        raise InputError("patch_slo_days: %r; give whole days, 0 to 3650" % (patch_slo_days,))
    patches = parse_latest_patches(latest_patches)
    if readings is None:
        readings = {c["name"]: {"control_plane": c["control_plane"], "state": "pending",
                                "kubelets": {p["name"]: [p["kubelet"]] for p in c["pools"]}}
                    for c in parsed["cells"]}
    elif not isinstance(readings, Mapping):
        raise InputError("readings: expected a mapping of cell name to its reading, got %s" % type(readings).__name__)
    unknown = sorted(set(readings) - set(parsed["cells_by_name"]))
    if unknown:
        raise InputError("readings: %s not a cell of the fleet %s" % (", ".join(unknown), parsed["name"]))
    rows = [_cell_row(c, readings.get(c["name"]), day, patches, patch_slo_days) for c in parsed["cells"]]
    spread: Dict[str, int] = {}
    for row in rows:
        key = row["control_plane"] or "unknown"
        spread[key] = spread.get(key, 0) + 1
    rings = []
    for ring in parsed["policy"]["rings"]:
        members = [r for r in rows if r["ring"] == ring["name"]]
        counts = {s: sum(r["state"] == s for r in members) for s in STATES + ("unknown",)}
        rings.append({"ring": ring["name"], "target": ring["target"], "cells": len(members),
                      "states": {k: v for k, v in counts.items() if v}})
    alerts = [a for r in rows for a in r["alerts"]]
    return {"fleet": parsed["name"], "today": str(day), "patch_slo_days": patch_slo_days, "cells": rows,
            "disabled_halts": disabled_halts(parsed["policy"]["halt"]),
            "version_spread": dict(sorted(spread.items(), key=lambda kv: _spread_key(kv[0]))), "rings": rings,
            "alerts": alerts,
            "summary": "%d cells in %d rings, %d control-plane versions; %d alert(s)" % (
                len(rows), len(rings), len(spread), len(alerts))}


def _spread_key(version: str) -> Any:
    try:
        return (0,) + parse_version(version).sort_key()
    except GpufleetError:
        return (1,)


def _disabled(entry: Mapping[str, Any]) -> str:
    value = entry["value"]
    return "%s: %s (%s)" % (entry["threshold"], "%d" % value if float(value).is_integer() else value, entry["reason"])


def markdown(report: Mapping[str, Any]) -> str:
    lines = ["# Fleet %s on %s" % (report["fleet"], report["today"]), "", report["summary"], ""]
    if report["alerts"]:
        lines += ["## Alerts", ""] + ["- %s" % a for a in report["alerts"]] + [""]
    if report.get("disabled_halts"):
        lines += ["## Halts switched off", ""] + ["- %s" % _disabled(d) for d in report["disabled_halts"]] + [""]
    lines += ["## Rings", "", "| ring | target | cells | states |", "|---|---|---|---|"]
    for ring in report["rings"]:
        lines.append("| %s | %s | %d | %s |" % (ring["ring"], ring["target"], ring["cells"],
                                                ", ".join("%s %d" % kv for kv in ring["states"].items())))
    lines += ["", "## Cells", "",
              "| cell | ring | kind | state | control plane | kubelets per pool | days to EOL | latest patch | "
              "days behind |", "|---|---|---|---|---|---|---|---|---|"]
    for row in report["cells"]:
        pools = "; ".join("%s %s..%s (%d behind)" % (p["pool"], p["oldest"], p["newest"], p["minors_behind"])
                          for p in row["pools"]) or "-"
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["cell"], row["ring"], row["kind"], row["state"], row["control_plane"] or "?", pools,
            _dash(row["days_to_eol"]), row["latest_patch"] or "?", _dash(row["days_behind_latest_patch"])))
    return "\n".join(lines) + "\n"


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


_COLORS = {"done": "#2e7d32", "soaking": "#0277bd", "upgrading": "#f9a825", "pending": "#9e9e9e",
           "failed": "#c62828", "halted": "#6a1b9a", "unknown": "#424242"}


def _bars(items: List[Any], width: int = 640) -> str:
    """A horizontal bar chart: ``items`` of (label, [(value, colour, title)]), as inline SVG."""
    total = max((sum(part[0] for part in parts) for _label, parts in items), default=1) or 1
    height = 26 * len(items) + 10
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img">' % (width, height)]
    for i, (label, parts) in enumerate(items):
        y, x = 5 + 26 * i, 130.0
        out.append('<text x="0" y="%d" font-size="13">%s</text>' % (y + 15, html.escape(str(label))))
        for value, colour, title in parts:
            w = (width - 170) * value / total
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="20" fill="%s"><title>%s</title></rect>' % (
                x, y, w, colour, html.escape(title)))
            x += w
        out.append('<text x="%.1f" y="%d" font-size="13">%d</text>' % (x + 6, y + 15, sum(p[0] for p in parts)))
    out.append("</svg>")
    return "".join(out)


def html_page(report: Mapping[str, Any]) -> str:
    """A static page: alerts, the version spread and ring progress as charts, and the cell table."""
    esc = html.escape
    spread = _bars([(v, [(n, "#1565c0", "%s: %d cells" % (v, n))]) for v, n in report["version_spread"].items()])
    progress = _bars([(r["ring"], [(n, _COLORS.get(s, "#000"), "%s %s: %d" % (r["ring"], s, n))
                                   for s, n in r["states"].items()]) for r in report["rings"]])
    legend = " ".join('<span style="color:%s">&#9632; %s</span>' % (c, s) for s, c in _COLORS.items())
    alerts = "".join('<li class="alert">%s</li>' % esc(a) for a in report["alerts"]) or "<li>none</li>"
    disabled = "".join("<li>%s</li>" % esc(_disabled(d)) for d in report.get("disabled_halts") or []) or \
        "<li>none</li>"
    rows = []
    for row in report["cells"]:
        pools = "<br>".join(esc("%s %s..%s (%d behind)" % (p["pool"], p["oldest"], p["newest"], p["minors_behind"]))
                            for p in row["pools"]) or "-"
        rows.append("<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                    "<td>%s</td></tr>" % (
                        ' class="alerting"' if row["alerts"] else "", esc(row["cell"]), esc(row["ring"]),
                        esc(row["kind"]), esc(row["state"]), esc(row["control_plane"] or "?"), pools,
                        esc(_dash(row["days_to_eol"])), esc(row["latest_patch"] or "?"),
                        esc(_dash(row["days_behind_latest_patch"]))))
    return """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Fleet %(fleet)s on %(today)s</title>
<style>
body{font-family:sans-serif;margin:24px;color:#212121} table{border-collapse:collapse}
td,th{border:1px solid #bdbdbd;padding:4px 8px;font-size:13px;text-align:left} tr.alerting td{background:#ffebee}
li.alert{color:#c62828}
</style></head><body>
<h1>Fleet %(fleet)s on %(today)s</h1>
<p id="summary">%(summary)s</p>
<h2>Alerts</h2><ul id="alerts">%(alerts)s</ul>
<h2>Halts switched off</h2><ul id="disabled-halts">%(disabled)s</ul>
<h2>Control-plane versions</h2><div id="spread">%(spread)s</div>
<h2>Ring progress</h2><div id="progress">%(progress)s</div><p>%(legend)s</p>
<h2>Cells</h2>
<table id="cells"><tr><th>cell</th><th>ring</th><th>kind</th><th>state</th><th>control plane</th>
<th>kubelets per pool</th><th>days to EOL</th><th>latest patch</th><th>days behind</th></tr>
%(rows)s
</table></body></html>
""" % {"fleet": esc(report["fleet"]), "today": esc(report["today"]), "summary": esc(report["summary"]),
       "alerts": alerts, "disabled": disabled, "spread": spread, "progress": progress, "legend": legend,
       "rows": "\n".join(rows)}


def write_files(dest: str, report: Mapping[str, Any]) -> Dict[str, Any]:
    """Write fleet-report.json, .md and .html into ``dest``; ``{files, changed}`` (a file is rewritten only when
    its text changed)."""
    os.makedirs(dest, exist_ok=True)
    files, changed = [], False
    for name, text in (("fleet-report.json", json.dumps(report, indent=2, sort_keys=True) + "\n"),
                       ("fleet-report.md", markdown(report)), ("fleet-report.html", html_page(report))):
        path = os.path.join(dest, name)
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                old = handle.read()
        if old != text:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
            changed = True
        files.append(path)
    return {"files": files, "changed": changed}
