# Copyright: gpufleet contributors
# Apache License 2.0
"""Parse ``kubeadm upgrade plan`` output (docs/reference.md section 2) and judge it against a target.

Formats: ``-o json|yaml`` (``output.kubeadm.k8s.io/v1alpha3`` kind ``UpgradePlan``, kubeadm 1.31+), the current
text layout (one kubelet row per node, a NODE column), and the older text layout (no NODE column, kubelets grouped
as ``2 x v1.26.0``). Empty output means "no upgrade available" and is a result, not an error. Text is read line by
line against what kubeadm's printer writes: a heading, table, command or flag it does not know is a ParseError
naming the line, never skipped (a skipped table would drop its kubelet rows).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import (
    column_starts, load_document, slice_row)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version

API_VERSION = "output.kubeadm.k8s.io/v1alpha3"
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
    if doc.get("apiVersion") != API_VERSION:
        # v1alpha2 (kubeadm before 1.31) lists "components" at the top, without availableUpgrades: read as
        # v1alpha3 it would say "no upgrade available".
        raise ParseError("kubeadm upgrade plan: apiVersion is %r; only %s (kubeadm 1.31+) is understood - give "
                         "the text output of an older kubeadm" % (doc.get("apiVersion"), API_VERSION))
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
        if target is None or not re.match("^%s$" % _VERSION, target):
            raise ParseError("kubeadm upgrade plan: availableUpgrades[%d] has no kube-apiserver component with a "
                             "version as its newVersion (found %r)" % (index, target))
        kubeadm = [c for c in components if c["name"] == "kubeadm"]
        kubeadm_required = None
        if kubeadm and kubeadm[0]["current"] and kubeadm[0]["target"] and \
                parse_version(kubeadm[0]["current"]) < parse_version(kubeadm[0]["target"]):
            kubeadm_required = kubeadm[0]["target"]
        result["upgrades"].append({
            "description": upgrade.get("description", ""), "target_version": target,
            # as kubeadm's text printer words it, with the flag a pre-release target needs
            "apply_command": "kubeadm upgrade apply %s%s" % (target, unstable_flag(target)),
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
# What kubeadm's text printer writes (cmd/kubeadm/app/cmd/upgrade/plan.go, printAvailableUpgrade and
# printComponentConfigVersionStates), per upgrade offered: the kubelet table under _MANUAL_HEADING, the control-plane
# table under "Upgrade to the latest <description>:", _APPLY_INTRO, the apply command (tab-indented), optionally
# the Note, a rule of underscores; then once the component config prose and table (or _NO_CONFIGS) and a rule. Any
# other line is not a layout this parser knows, and is an error - never skipped.
LAYOUTS = ("text with a NODE column (kubeadm 1.31+), text with kubelets grouped as 'N x vX' and no NODE column "
           "(kubeadm before 1.31), -o json|yaml %s UpgradePlan" % API_VERSION)
_MANUAL_HEADING = re.compile(r"^Components that must be upgraded manually after you(?: have|'ve) upgraded the control "
                             r"plane with 'kubeadm upgrade apply':$")
_UPGRADE_HEADING = re.compile(r"^Upgrade to the latest (?P<description>\S.*):$")
_APPLY_INTRO = "You can now apply the upgrade by executing the following command:"
_APPLY = re.compile(r"^\s*(?P<cmd>kubeadm upgrade apply (?P<version>%s)(?P<flags>(?: +\S+)*))$" % _VERSION)
_NOTE = re.compile(r"^Note: Before you can perform this upgrade, you have to update kubeadm to (?P<v>%s)\.$" % _VERSION)
_CONFIG_PROSE = (
    "The table below shows the current state of component configs as understood by this version of kubeadm.",
    'Configs that have a "yes" mark in the "MANUAL UPGRADE REQUIRED" column require manual config upgrade or',
    "resetting to kubeadm defaults before a successful upgrade can be performed. The version to manually",
    'upgrade to is denoted in the "PREFERRED VERSION" column.')
_NO_CONFIGS = "No information available on component configs."
_HEADERS = {("COMPONENT", "NODE", "CURRENT", "TARGET"): False, ("COMPONENT", "CURRENT", "TARGET"): True}
_CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "CoreDNS", "etcd")
# `kubeadm upgrade apply` flags (k8s.io/kubernetes cmd/kubeadm/app/cmd/upgrade/{apply,upgrade}.go and kubeadm's
# global ones); kubeadm's plan prints the two --allow-* ones after a pre-release target.
APPLY_FLAGS = ("allow-experimental-upgrades", "allow-release-candidate-upgrades", "certificate-renewal", "config",
               "dry-run", "etcd-upgrade", "force", "ignore-preflight-errors", "kubeconfig", "patches", "print-config",
               "rootfs", "skip-phases", "v", "yes")
_FLAG = re.compile(r"^(?:--(?P<name>[a-z][a-z-]*)(?:=\S+)?|-[yf])$")


def unstable_flag(version: str) -> str:
    """The flag kubeadm's plan appends to the apply command for a pre-release target: an rc needs
    --allow-release-candidate-upgrades, any other pre-release (alpha, beta) --allow-experimental-upgrades."""
    pre = re.match(r"^v?\d+\.\d+\.\d+-(?P<pre>[0-9A-Za-z.-]+)", version)
    if not pre:
        return ""
    return " --allow-release-candidate-upgrades" if pre.group("pre").startswith("rc") else \
        " --allow-experimental-upgrades"


def _unknown(lines: List[str], i: int, expected: str) -> ParseError:
    found = repr(lines[i][:160]) if i < len(lines) else "the end of the output"
    return ParseError("kubeadm upgrade plan: expected %s at line %d, found %s; the layouts understood are %s" % (
        expected, i + 1, found, LAYOUTS))


def _skip_blank(lines: List[str], i: int) -> int:
    while i < len(lines) and not lines[i].strip():
        i += 1
    return i


def _parse_text(text: str) -> Dict[str, Any]:
    lines = [line.rstrip() for line in text.splitlines()]
    result = _empty_result("text")
    i = 0
    while i < len(lines) and (not lines[i].strip() or _PROGRESS.match(lines[i])):
        i += 1  # kubeadm's progress before the plan ("[upgrade/versions] Target version: v1.36.3")
    if i == len(lines):
        if _only_progress(lines):
            return result
        raise ParseError("kubeadm upgrade plan: output has none of the expected sections (a components table, "
                         "'Upgrade to the latest ...', or the API GROUP table) and stops before kubeadm's "
                         "'[upgrade/versions] Target version:' line; the layouts understood are %s" % LAYOUTS)
    configs = False
    while True:
        i = _skip_blank(lines, i)
        if i == len(lines):
            break
        line = lines[i]
        if not configs and (_MANUAL_HEADING.match(line) or _UPGRADE_HEADING.match(line)):
            i = _read_upgrade(lines, i, result)
        elif not configs and line == _CONFIG_PROSE[0]:
            i, result["config_versions"] = _read_configs(lines, i)
            configs = True
        elif not configs and line == _NO_CONFIGS:
            i, configs = i + 1, True
        else:
            raise _unknown(lines, i, "the end of the output" if configs else
                           "a kubeadm upgrade plan section ('Components that must be upgraded manually ...', "
                           "'Upgrade to the latest ...:' or the component config table)")
    return _finish(result)


def _read_upgrade(lines: List[str], i: int, result: Dict[str, Any]) -> int:
    """One offered upgrade, from its kubelet table (or its 'Upgrade to the latest' heading) to its closing rule."""
    kubelets: List[Dict[str, Any]] = []
    if _MANUAL_HEADING.match(lines[i]):
        i, kubelets = _read_table(lines, i + 1, "kubelet", result)
        bad = [row for row in kubelets if row["name"] != "kubelet"]
        if bad:
            raise ParseError("kubeadm upgrade plan: the kubelet table lists %r, not a kubelet" % bad[0]["name"])
        i = _skip_blank(lines, i)
    heading = _UPGRADE_HEADING.match(lines[i]) if i < len(lines) else None
    if not heading:
        raise _unknown(lines, i, "'Upgrade to the latest <description>:' after the kubelet table")
    i, rows = _read_table(lines, _skip_blank(lines, i + 1), "upgrade", result)
    if not rows:
        raise ParseError("kubeadm upgrade plan: the table for %r is empty" % heading.group("description"))
    bad = [row for row in rows if row["name"] not in _CONTROL_PLANE]
    if bad:
        raise ParseError("kubeadm upgrade plan: the table for %r lists %r, which is none of %s" % (
            heading.group("description"), bad[0]["name"], ", ".join(_CONTROL_PLANE)))
    i = _skip_blank(lines, i)
    if i >= len(lines) or lines[i] != _APPLY_INTRO:
        raise _unknown(lines, i, repr(_APPLY_INTRO))
    i = _skip_blank(lines, i + 1)
    apply = _APPLY.match(lines[i]) if i < len(lines) else None
    if not apply:
        raise _unknown(lines, i, "the command 'kubeadm upgrade apply vX.Y.Z [flags]'")
    for word in apply.group("flags").split():
        flag = _FLAG.match(word)
        if not flag or (flag.group("name") and flag.group("name") not in APPLY_FLAGS):
            raise ParseError("kubeadm upgrade plan: the apply command at line %d carries %r, which is not a "
                             "kubeadm upgrade apply flag (%s)" % (
                                 i + 1, word, ", ".join("--" + name for name in APPLY_FLAGS)))
    upgrade = {"description": heading.group("description"), "target_version": apply.group("version"),
               "apply_command": apply.group("cmd"), "kubeadm_required": None, "components": kubelets + rows}
    apiserver = _component_target(rows, "kube-apiserver")
    if apiserver is not None and apiserver != upgrade["target_version"]:
        raise ParseError("kubeadm upgrade plan: %r applies %s but its kube-apiserver row targets %s" % (
            upgrade["description"], upgrade["target_version"], apiserver))
    i = _skip_blank(lines, i + 1)
    note = _NOTE.match(lines[i]) if i < len(lines) else None
    if note:
        upgrade["kubeadm_required"] = note.group("v")
        i = _skip_blank(lines, i + 1)
    if i >= len(lines) or not _RULE.match(lines[i]):
        raise _unknown(lines, i, "kubeadm's note that kubeadm must be updated, or the rule of underscores that "
                                 "closes the upgrade %r" % upgrade["description"])
    result["upgrades"].append(upgrade)
    return i + 1


def _read_table(lines: List[str], start: int, what: str, result: Dict[str, Any]
                ) -> Tuple[int, List[Dict[str, Any]]]:
    """Read a COMPONENT table from ``lines[start]`` (its header). Returns (next index, rows); a table without a
    NODE column marks the plan ``legacy-text``."""
    header = tuple(lines[start].split()) if start < len(lines) else ()
    if header not in _HEADERS:
        raise _unknown(lines, start, "the %s table's header COMPONENT [NODE] CURRENT TARGET" % what)
    legacy = _HEADERS[header]
    if legacy:
        result["format"] = "legacy-text"
    columns = column_starts(lines[start], list(header))
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
    return i, rows


def _row_by_words(line: str, legacy: bool) -> Optional[Dict[str, str]]:
    """A row whose cells do not sit under the header's columns (an empty cell written without its padding): read
    it by words - the component (unless the line starts blank: the row above's), an optional node (not a version),
    an optional current version, the target."""
    match = _ROW_WORDS.match(line)
    if not match or (legacy and match.group("node")):
        return None
    return {"COMPONENT": match.group("name") or "", "NODE": match.group("node") or "",
            "CURRENT": match.group("current") or "", "TARGET": match.group("target")}


def _read_configs(lines: List[str], start: int) -> Tuple[int, List[Dict[str, Any]]]:
    """kubeadm's component config prose, the API GROUP table and its closing rule."""
    for offset, prose in enumerate(_CONFIG_PROSE):
        if start + offset >= len(lines) or lines[start + offset] != prose:
            raise _unknown(lines, start + offset, repr(prose))
    i = _skip_blank(lines, start + len(_CONFIG_PROSE))
    if i >= len(lines) or lines[i].split() != "API GROUP CURRENT VERSION PREFERRED VERSION MANUAL UPGRADE " \
            "REQUIRED".split():
        raise _unknown(lines, i, "the component config table's header API GROUP, CURRENT VERSION, PREFERRED "
                                 "VERSION, MANUAL UPGRADE REQUIRED")
    columns = column_starts(lines[i], ["API GROUP", "CURRENT VERSION", "PREFERRED VERSION",
                                       "MANUAL UPGRADE REQUIRED"])
    rows = []
    i += 1
    while i < len(lines) and lines[i].strip() and not _RULE.match(lines[i]):
        cells = slice_row(lines[i], columns)
        manual = cells["MANUAL UPGRADE REQUIRED"].lower()
        if manual not in ("yes", "no") or not cells["API GROUP"]:
            raise ParseError("kubeadm upgrade plan: malformed component config row at line %d: %r (MANUAL UPGRADE "
                             "REQUIRED must be yes or no)" % (i + 1, lines[i]))
        rows.append({"group": cells["API GROUP"],
                     "current": "" if cells["CURRENT VERSION"] == "-" else cells["CURRENT VERSION"],
                     "preferred": "" if cells["PREFERRED VERSION"] == "-" else cells["PREFERRED VERSION"],
                     "manual_upgrade_required": manual == "yes"})
        i += 1
    if i >= len(lines) or not _RULE.match(lines[i]):
        raise _unknown(lines, i, "the rule of underscores that closes the component config table (a table cut "
                                 "short may hide a config that needs a manual upgrade)")
    return i + 1, rows


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
