# Copyright: gpufleet contributors
# Apache License 2.0
"""Parse ``kubeadm upgrade plan`` output (docs/reference.md section 2) and judge it against a target.

Formats: ``-o json|yaml`` (``output.kubeadm.k8s.io/v1alpha3`` kind ``UpgradePlan``, kubeadm 1.31+), the current
text layout (one kubelet row per node, a NODE column), and the older text layout (no NODE column, kubelets grouped
as ``2 x v1.26.0``). Empty output means "no upgrade available" and is a result, not an error.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import (
    column_starts, load_document, slice_row)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version

API_VERSION = "output.kubeadm.k8s.io/v1alpha3"
_MANUAL_HEADING = "Components that must be upgraded manually after you have upgraded the control plane"
_UPGRADE_HEADING = re.compile(r"^Upgrade to the latest (?P<description>.+):\s*$")
_APPLY = re.compile(r"^\s*(?P<cmd>kubeadm upgrade apply (?P<version>v?\d+\.\d+\.\d+\S*))\s*$")
_NOTE = re.compile(r"Note: Before you can perform this upgrade, you have to update kubeadm to "
                   r"(?P<v>v?\d+\.\d+\.\d+\S*)\.")
_GROUPED = re.compile(r"^(?P<count>\d+) x (?P<version>\S+)$")
_RULE = re.compile(r"^_{10,}\s*$")
_VERSION = r"v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?"
# kubeadm prints an empty CURRENT for an addon the cluster does not run yet; a control-plane row never has one.
_MAY_BE_ABSENT = ("CoreDNS", "kube-proxy", "etcd")
_VERSION_CELL = re.compile(r"^(?:\d+ x )?%s$" % _VERSION)
_ROW_WORDS = re.compile(r"^(?P<name>\S+)?\s+(?:(?P<node>(?!(?:\d+ x )?%s\s)\S+)\s+)?"
                        r"(?:(?P<current>(?:\d+ x )?%s)\s+)?(?P<target>%s)\s*$" % (_VERSION, _VERSION, _VERSION))


# kubeadm 1.35+ prints its progress to stdout in the text layout ("[upgrade/versions] Target version: v1.35.4");
# with no upgrade available that is all it prints (-o json|yaml print nothing).
_PROGRESS = re.compile(r"^\[[a-z][a-z/-]*\] \S")


def _only_progress(lines: List[str]) -> bool:
    """Whether the output is kubeadm's progress alone, up to its version comparison: no upgrade available. Any
    other line (a table cut short, an error) is not that, and stays a parse error."""
    words = [line for line in lines if line.strip()]
    return bool(words) and all(_PROGRESS.match(line) for line in words) and any(
        line.startswith("[upgrade/versions] Target version:") for line in words)


def _empty_result(fmt: str) -> Dict[str, Any]:
    return {"format": fmt, "available": False, "upgrades": [], "config_versions": [],
            "manual_config_upgrades": [], "offered_versions": []}


def parse_plan(text: str) -> Dict[str, Any]:
    """Parse any supported layout into ``{format, available, upgrades[], config_versions[],
    manual_config_upgrades[]}``. Each upgrade: ``{description, target_version, apply_command, kubeadm_required,
    components[{name, node, current, target, count}]}``."""
    if text is None or not text.strip():
        return _empty_result("empty")
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("apiVersion:") or stripped.startswith("kind:"):
        return _parse_structured(load_document(text, "kubeadm upgrade plan", allow_yaml=True))
    return _parse_text(text)


# -- structured ------------------------------------------------------------------------------------------------
def _parse_structured(doc: Any) -> Dict[str, Any]:
    if not isinstance(doc, dict):
        raise ParseError("kubeadm upgrade plan: expected an UpgradePlan object, got %s" % type(doc).__name__)
    if doc.get("kind") != "UpgradePlan":
        raise ParseError("kubeadm upgrade plan: kind is %r, expected UpgradePlan (%s)" % (
            doc.get("kind"), API_VERSION))
    result = _empty_result("json")
    result["api_version"] = doc.get("apiVersion")
    for index, upgrade in enumerate(doc.get("availableUpgrades") or []):
        if not isinstance(upgrade, dict):
            raise ParseError("kubeadm upgrade plan: availableUpgrades[%d] is not an object" % index)
        components = []
        for comp in upgrade.get("components") or []:
            if not isinstance(comp, dict) or "name" not in comp:
                raise ParseError("kubeadm upgrade plan: availableUpgrades[%d].components has an entry without "
                                 "a name" % index)
            components.append({"name": comp["name"], "node": comp.get("nodeName") or "",
                               "current": comp.get("currentVersion", ""), "target": comp.get("newVersion", ""),
                               "count": 1})
        target = _component_target(components, "kube-apiserver")
        kubeadm = [c for c in components if c["name"] == "kubeadm"]
        kubeadm_required = None
        if kubeadm and kubeadm[0]["current"] and kubeadm[0]["target"] and \
                parse_version(kubeadm[0]["current"]) < parse_version(kubeadm[0]["target"]):
            kubeadm_required = kubeadm[0]["target"]
        result["upgrades"].append({
            "description": upgrade.get("description", ""), "target_version": target,
            "apply_command": "kubeadm upgrade apply %s" % target if target else None,
            "kubeadm_required": kubeadm_required, "components": components})
    result["config_versions"] = [
        {"group": c.get("group", ""), "current": c.get("currentVersion") or "",
         "preferred": c.get("preferredVersion") or "", "manual_upgrade_required": bool(c.get("manualUpgradeRequired"))}
        for c in doc.get("configVersions") or [] if isinstance(c, dict)]
    return _finish(result)


def _component_target(components: List[Dict[str, Any]], name: str) -> Optional[str]:
    for comp in components:
        if comp["name"] == name and comp["target"]:
            return str(comp["target"])
    return None


# -- text ------------------------------------------------------------------------------------------------------
def _parse_text(text: str) -> Dict[str, Any]:
    lines = text.splitlines()
    result = _empty_result("text")
    pending_kubelets: List[Dict[str, Any]] = []
    current: Optional[Dict[str, Any]] = None
    saw_known = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(_MANUAL_HEADING):
            saw_known = True
            i, rows, legacy = _read_table(lines, i + 1, "manual-components")
            if legacy:
                result["format"] = "legacy-text"
            pending_kubelets = rows
            continue
        match = _UPGRADE_HEADING.match(line)
        if match:
            saw_known = True
            current = {"description": match.group("description"), "target_version": None, "apply_command": None,
                       "kubeadm_required": None, "components": list(pending_kubelets)}
            pending_kubelets = []
            result["upgrades"].append(current)
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            i, rows, legacy = _read_table(lines, j, "upgrade")
            if legacy:
                result["format"] = "legacy-text"
            current["components"].extend(rows)
            continue
        match = _APPLY.match(line)
        if match and current is not None:
            current["apply_command"] = match.group("cmd")
            current["target_version"] = match.group("version")
        match = _NOTE.search(line)
        if match and current is not None:
            current["kubeadm_required"] = match.group("v")
        if line.startswith("API GROUP"):
            saw_known = True
            i, rows = _read_config_table(lines, i)
            result["config_versions"] = rows
            continue
        i += 1
    if not saw_known:
        if _only_progress(lines):
            return _empty_result("text")
        raise ParseError("kubeadm upgrade plan: output has none of the expected sections (a components table, "
                         "'Upgrade to the latest ...', or the API GROUP table); first line: %r" % lines[0][:120])
    for upgrade in result["upgrades"]:
        if not upgrade["components"]:
            raise ParseError("kubeadm upgrade plan: the table for %r is empty or truncated" % upgrade["description"])
        if upgrade["target_version"] is None:
            upgrade["target_version"] = _component_target(upgrade["components"], "kube-apiserver")
            if upgrade["target_version"] is None:
                raise ParseError("kubeadm upgrade plan: no target version for %r (output truncated before the "
                                 "apply command?)" % upgrade["description"])
    return _finish(result)


def _read_table(lines: List[str], start: int, what: str) -> Tuple[int, List[Dict[str, Any]], bool]:
    """Read a COMPONENT table from ``lines[start]`` (its header). Returns (next index, rows, legacy?)."""
    if start >= len(lines) or not lines[start].startswith("COMPONENT"):
        raise ParseError("kubeadm upgrade plan: expected a COMPONENT header for the %s table at line %d, got %r" % (
            what, start + 1, lines[start] if start < len(lines) else "<end of output>"))
    header = lines[start]
    legacy = "NODE" not in header.split()
    names = ["COMPONENT", "CURRENT", "TARGET"] if legacy else ["COMPONENT", "NODE", "CURRENT", "TARGET"]
    columns = column_starts(header, names)
    rows: List[Dict[str, Any]] = []
    i = start + 1
    while i < len(lines) and lines[i].strip():
        cells = slice_row(lines[i], columns)
        if not _VERSION_CELL.match(cells["TARGET"]):
            cells = _row_by_words(lines[i], legacy) or cells
        name = cells["COMPONENT"] or (rows[-1]["name"] if rows else "")
        # An empty CURRENT is a component the cluster does not run yet (no CoreDNS or kube-proxy installed):
        # kubeadm still offers its target.
        if not name or not _VERSION_CELL.match(cells["TARGET"]) or \
                (cells["CURRENT"] and not _VERSION_CELL.match(cells["CURRENT"])) or \
                (not cells["CURRENT"] and name not in _MAY_BE_ABSENT):
            raise ParseError("kubeadm upgrade plan: malformed %s row at line %d: %r" % (what, i + 1, lines[i]))
        current, count = cells["CURRENT"], 1
        grouped = _GROUPED.match(current)
        if grouped:
            current, count = grouped.group("version"), int(grouped.group("count"))
        rows.append({"name": name, "node": cells.get("NODE", ""), "current": current, "target": cells["TARGET"],
                     "count": count})
        i += 1
    return i, rows, legacy


def _row_by_words(line: str, legacy: bool) -> Optional[Dict[str, str]]:
    """A row whose cells do not sit under the header's columns (an empty cell written without its padding): read
    it by words - the component (unless the line starts blank: the row above's), an optional node (not a version),
    an optional current version, the target."""
    match = _ROW_WORDS.match(line)
    if not match or (legacy and match.group("node")):
        return None
    return {"COMPONENT": match.group("name") or "", "NODE": match.group("node") or "",
            "CURRENT": match.group("current") or "", "TARGET": match.group("target")}


def _read_config_table(lines: List[str], start: int) -> Tuple[int, List[Dict[str, Any]]]:
    columns = column_starts(lines[start], ["API GROUP", "CURRENT VERSION", "PREFERRED VERSION",
                                           "MANUAL UPGRADE REQUIRED"])
    rows = []
    i = start + 1
    while i < len(lines) and lines[i].strip() and not _RULE.match(lines[i]):
        cells = slice_row(lines[i], columns)
        manual = cells["MANUAL UPGRADE REQUIRED"].lower()
        if manual not in ("yes", "no", "-"):
            raise ParseError("kubeadm upgrade plan: MANUAL UPGRADE REQUIRED must be yes, no or -, got %r at line %d"
                             % (manual, i + 1))
        rows.append({"group": cells["API GROUP"],
                     "current": "" if cells["CURRENT VERSION"] == "-" else cells["CURRENT VERSION"],
                     "preferred": "" if cells["PREFERRED VERSION"] == "-" else cells["PREFERRED VERSION"],
                     "manual_upgrade_required": manual == "yes"})
        i += 1
    return i, rows


def _finish(result: Dict[str, Any]) -> Dict[str, Any]:
    result["available"] = bool(result["upgrades"])
    result["manual_config_upgrades"] = [c["group"] for c in result["config_versions"] if c["manual_upgrade_required"]]
    result["offered_versions"] = [u["target_version"] for u in result["upgrades"]]
    return result


# -- judgement -------------------------------------------------------------------------------------------------
def judge_plan(plan: Dict[str, Any], target: Optional[str], allow_manual_config_upgrade: bool = False,
               node: str = "", required: bool = False) -> Dict[str, Any]:
    """Pick the upgrade that reaches ``target``. Fails when the target is not offered or a component config needs
    a manual upgrade. Returns ``{upgrade, needs_upgrade}``; ``needs_upgrade`` is False when kubeadm offers nothing
    and the control plane already runs ``target`` (the caller decides that from versions) - unless ``required``
    (the caller knows the control plane is not at the target), when an empty plan fails too."""
    where = " on %s" % node if node else ""
    if plan["manual_config_upgrades"] and not allow_manual_config_upgrade:
        raise GateFailed(
            "kubeadm upgrade plan%s: component config(s) %s need a manual upgrade before kubeadm can upgrade; "
            "migrate them (see the PREFERRED VERSION column) or set allow_manual_config_upgrade=true after doing so"
            % (where, ", ".join(plan["manual_config_upgrades"])), plan=plan)
    if target is None:
        return {"upgrade": plan["upgrades"][0] if plan["upgrades"] else None, "needs_upgrade": plan["available"]}
    wanted = parse_version(target, "target")
    for upgrade in plan["upgrades"]:
        if parse_version(upgrade["target_version"]) == wanted:
            return {"upgrade": upgrade, "needs_upgrade": True}
    if not plan["available"] and not required:
        return {"upgrade": None, "needs_upgrade": False}
    raise GateFailed(
        "kubeadm upgrade plan%s does not offer %s; it offers %s. Install kubeadm %s first (the plan offers at most "
        "kubeadm's own version and one minor above the cluster)" % (
            where, target, ", ".join(plan.get("offered_versions") or []) or "nothing", target), plan=plan)
