# Copyright: gpufleet contributors
# Apache License 2.0
"""The preflight report: one row per node and component with the current version, the target, the support
source, how the upgrade is validated and how it is rolled back (pure functions; the preflight role gathers the
facts and writes the JSON and Markdown this module builds).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpufleet.upgrade.plugins.module_utils import security
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

SUPPORT_K8S = "Kubernetes release calendar (module_utils/data_releases.py)"
SUPPORT_VENDOR = "vendor support matrix (baseline of the pool)"
SUPPORT_OS = "OS vendor"

# component -> (package names to look for, validation, rollback)
PACKAGES: Dict[str, Any] = {
    "kubeadm": (["kubeadm"], "kubeadm upgrade plan judged (kubeadm_plan)",
                "install the previous kubeadm package (held)"),
    "kubelet": (["kubelet"], "Node reports the version; node_gate",
                "install the previous kubelet package (held), restart the kubelet (within skew)"),
    "kubectl": (["kubectl"], "kubectl version", "install the previous kubectl package"),
    "cri-tools": (["cri-tools"], "crictl version", "install the previous cri-tools package"),
    "nvidia-driver": (["nvidia-driver-", "-server"], "gpu_health (driver on every GPU), dcgm_diag, nccl_allreduce",
                      "install the previous branch's driver and fabric manager together, reboot"),
    "nvidia-fabricmanager": (["nvidia-fabricmanager-"], "systemctl is-active nvidia-fabricmanager; equals driver",
                             "with the driver (versions must match)"),
    "nvidia-container-toolkit": (["nvidia-container-toolkit"], "nvidia-ctk --version; a GPU pod starts",
                                 "install the previous toolkit package"),
    "dcgm": (["datacenter-gpu-manager-4-core", "datacenter-gpu-manager"], "dcgmi diag runs",
             "install the previous DCGM package"),
}


def _package_version(packages: Dict[str, Any], component: str) -> Optional[str]:
    """Version of the installed package for a component (ansible package_facts layout: name -> [{version}])."""
    names = PACKAGES[component][0]
    for name, entries in sorted(packages.items()):
        if component == "nvidia-driver":
            match = name.startswith(names[0]) and name.endswith(names[1])
        elif component == "nvidia-fabricmanager":
            match = name.startswith(names[0])
        else:
            match = name in names
        if match and entries:
            return str(entries[0].get("version"))
    return None


def version_inventory(hosts: Dict[str, Dict[str, Any]], target: str,
                      gpu_targets: Optional[Dict[str, str]] = None) -> List[Dict[str, Any]]:
    """Rows for every host. ``hosts``: name -> {role: control-plane|gpu, packages (package_facts), kernel, os,
    node (the Node's status.nodeInfo), apiserver (its /version gitVersion, control plane only)}.
    ``gpu_targets``: component -> version this run installs (empty: the GPU stack is not changed)."""
    if not isinstance(hosts, dict):
        raise InputError("version_inventory: expected a mapping of host -> facts, got %s" % type(hosts).__name__)
    gpu_targets = gpu_targets or {}
    rows: List[Dict[str, Any]] = []

    def row(host: str, component: str, current: Any, tgt: Any, support: str, validation: str, rollback: str) -> None:
        rows.append({"node": host, "component": component, "current": current or "absent",
                     "target": tgt if tgt else "unchanged", "support": support, "validation": validation,
                     "rollback": rollback, "changes": bool(tgt) and tgt != current})

    for host in sorted(hosts):
        facts = hosts[host] or {}
        info = facts.get("node") or {}
        pkgs = facts.get("packages") or {}
        row(host, "os", info.get("osImage") or facts.get("os"), None, SUPPORT_OS, "-", "-")
        row(host, "kernel", facts.get("kernel") or info.get("kernelVersion"), None, SUPPORT_OS, "-", "-")
        row(host, "container-runtime", info.get("containerRuntimeVersion"), None, SUPPORT_VENDOR,
            "Node Ready after the kubelet restart", "-")
        if facts.get("role") == "control-plane":
            row(host, "kube-apiserver", facts.get("apiserver"), target, SUPPORT_K8S,
                "/readyz soak and /version on this host's apiserver",
                "restore the etcd snapshot taken before the run (playbooks/etcd_restore.yml, break-glass)")
        k8s_pkg = {c: _package_version(pkgs, c) for c in ("kubeadm", "kubelet", "kubectl", "cri-tools")}
        for comp in ("kubeadm", "kubectl", "cri-tools"):
            if k8s_pkg[comp]:
                row(host, comp, k8s_pkg[comp], target if comp != "cri-tools" else None,
                    SUPPORT_K8S, PACKAGES[comp][1], PACKAGES[comp][2])
        row(host, "kubelet", info.get("kubeletVersion") or k8s_pkg["kubelet"], target, SUPPORT_K8S,
            PACKAGES["kubelet"][1], PACKAGES["kubelet"][2])
        if facts.get("role") == "gpu":
            for comp in ("nvidia-driver", "nvidia-fabricmanager", "nvidia-container-toolkit", "dcgm"):
                version = _package_version(pkgs, comp)
                if version or comp == "nvidia-driver":
                    row(host, comp, version, gpu_targets.get(comp), SUPPORT_VENDOR, PACKAGES[comp][1],
                        PACKAGES[comp][2])
    return rows


def _cell(value: Any) -> str:
    """Text for a Markdown table cell: a caller's user agent is whatever the client sent."""
    return str(value if value is not None else "").replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Dict[str, Any]) -> str:
    """The report as Markdown: verdict, blockers, warnings, upgrade path, support, version table."""
    lines = ["# gpufleet preflight: %s -> %s" % (report.get("cluster", "cluster"), report.get("target", "")), ""]
    blockers = report.get("blockers") or []
    lines.append("**Verdict: %s**" % ("BLOCKED - nothing was changed" if blockers else "ready"))
    lines.append("")
    if blockers:
        lines += ["## Blockers", ""] + ["- %s" % b for b in blockers] + [""]
    warnings = report.get("warnings") or []
    if warnings:
        lines += ["## Warnings", ""] + ["- %s" % w for w in warnings] + [""]
    plan = report.get("plan") or {}
    if plan:
        lines += ["## Path", "", "- control plane: %s -> %s" % (plan.get("current", "?"), " -> ".join(
            plan.get("control_plane_path") or [])), ""]
    support = report.get("support") or {}
    if support:
        lines += ["## Support", ""] + ["- %s: %s" % (k, (v or {}).get("message", "")) for k, v in
                                       sorted(support.items())] + [""]
    release = report.get("etcd_release") or {}
    if release:
        lines += ["## etcd", "", "- %s (%s)" % (release.get("message", "?"), release.get("status", "?")), ""]
    addons = report.get("addons") or {}
    if addons.get("findings"):
        order = ", ".join(a.get("name", "?") for a in addons.get("upgrade_order") or [])
        lines += ["## Addons (in upgrade order: %s)" % order, "", "| addon | version | where | verdict |",
                  "|---|---|---|---|"]
        for f in addons["findings"]:
            lines.append("| %s | %s | %s | %s |" % (f.get("name", "?"), f.get("version") or f.get("raw_version") or "?",
                                                    f.get("where", ""), f.get("severity", "?")))
        lines.append("")
    callers = [f for f in report.get("removed_apis") or [] if f.get("source") == "audit" and f.get("verb")]
    if callers:
        lines += ["## Who calls a deprecated API (the control-plane hosts' audit logs)", "",
                  "| API | user or ServiceAccount | user agent | namespace | verb | calls | last | hosts | verdict |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for f in callers:
            cells = [_cell(v) for v in (f.get("api_version"), f.get("kind"), f.get("removed_in"),
                                        f.get("service_account") or f.get("user"), f.get("user_agent"),
                                        f.get("namespace") or "-", f.get("verb"), f.get("count"), f.get("last"),
                                        ", ".join(f.get("hosts") or []), f.get("severity", "?"))]
            lines.append("| %s %s (removed in %s) | %s | %s | %s | %s | %s | %s | %s | %s |" % tuple(cells))
        lines.append("")
    if report.get("security"):
        lines += ["## Security", ""] + security.markdown_lines(report["security"]) + [""]
    lines += ["## Versions", "", "| node | component | current | target | support | validation | rollback |",
              "|---|---|---|---|---|---|---|"]
    for r in report.get("inventory") or []:
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            r["node"], r["component"], r["current"], r["target"], r["support"], r["validation"], r["rollback"]))
    return "\n".join(lines) + "\n"
