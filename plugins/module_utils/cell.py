# Copyright: gpufleet contributors
# Apache License 2.0
"""The cell: every input of an upgrade, read from the inventory once, checked, and handed to the playbooks as data.

:func:`build` takes the inventory groups, the per-host variables, the cell-wide variables and the pool baselines
(already loaded, so this stays pure) and returns one typed :class:`Cell`: the target parsed once (the canonical
``vX.Y.Z`` that the ledger, the annotations, the run id and the records carry), the planner's node list (GPU type
and count from the pool baseline), the waves, the pool policies and caps, the observed versions an offline plan
gives, and which break-glass switches this run confirmed. Every inventory check lives here, so that the plan, the
preflight and the waves cannot disagree. Bad input raises :class:`InputError` naming the host or variable and the
fix, before anything on a cluster is touched.
"""
from __future__ import annotations

import os

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.upgrade.plugins.module_utils import (
    addons, apiserver_signals, canary, security, variables)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.variables import to_bool as _bool
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import DNS_LABEL
from ansible_collections.gpufleet.upgrade.plugins.module_utils.planner import (
    CONTROL_PLANE, WORKER, parse_caps, parse_nodes, plan_waves)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import (
    KubeVersion, parse_pool_policies, parse_release, parse_version)

GROUPS = ("kube_control_plane", "etcd", "gpu_nodes")
# The cell's name is an ASCII DNS label, as the fleet's cell names (fleet.py): it is in the run id, annotations, file
# names, AWX names and break-glass confirmations. fullmatch: ``$`` also matches before a trailing newline; and no
# \w, str.isalnum() or \d, which take full-width and other Unicode letters and digits.
CELL_NAME = DNS_LABEL
APISERVER_URL = apiserver_signals.APISERVER_URL
CONTROL_PLANE_POOL = "control-plane"
# Per-host variables the cell reads, and the ones it refuses because something else holds that fact now.
HOST_VARS = ("gpufleet_pool", "gpufleet_failure_domain", "gpufleet_ring", "gpufleet_dr_pair", "gpufleet_canary",
             "gpufleet_unschedulable_before", "gpufleet_observed_control_plane", "gpufleet_observed_kubelet",
             "gpufleet_apiserver_url",
             "gpufleet_gpus", "gpufleet_role")
MOVED_HOST_VARS = {
    "gpufleet_gpus": "the GPU count comes from the pool baseline (gpu.count); remove gpufleet_gpus",
    "gpufleet_role": "membership in kube_control_plane or gpu_nodes decides the role; remove gpufleet_role",
}
# Break glass: (cell variable, action words). Each needs the exact phrase "<action> on <cell> for <target>".
BREAK_GLASS = {
    "disable_eviction": ("gpufleet_break_glass_disable_eviction", "disable eviction",
                         "delete pods without the eviction API, bypassing PodDisruptionBudgets"),
    "force_drain": ("gpufleet_break_glass_force_drain", "force drain",
                    "also delete unmanaged pods and gang ranks one by one"),
    "skip_checkpoint": ("gpufleet_break_glass_skip_checkpoint", "skip checkpoint",
                        "stop training gangs without a confirmed checkpoint"),
    "skip_nccl": ("gpufleet_break_glass_skip_nccl", "skip nccl",
                  "return nodes to service without the NCCL bandwidth gate"),
    "map_kube_apis": ("gpufleet_break_glass_map_kube_apis", "map kube apis",
                      "rewrite the stored manifests of Helm releases that use APIs the target removes "
                      "(as helm-mapkubeapis does: a new release revision, the old one superseded)"),
}
# Role variables that used to switch these on; found in the inventory they are refused (they would sit there).
STALE_SWITCHES = {
    "drain_break_glass_disable_eviction": "disable_eviction",
    "drain_break_glass_force": "force_drain",
    "drain_break_glass_skip_checkpoint": "skip_checkpoint",
    "gpu_validate_nccl": "skip_nccl",
}


@dataclass
class Cell:
    name: str
    target: str
    target_minor: str
    run_id: str
    control_plane: List[str]
    etcd: List[str]
    gpu_nodes: List[str]
    first_control_plane: str
    nodes: List[Dict[str, Any]]
    pools: Dict[str, Dict[str, Any]]
    pool_policies: Dict[str, Dict[str, Any]]
    host_pool: Dict[str, str]
    caps: Dict[str, Any]
    waves: List[Dict[str, Any]]
    gpu_waves: List[Dict[str, Any]]
    canaries: List[str]
    keep_cordoned: List[str]
    summary: str
    allow_multi_hop: bool
    allow_unsupported_target: bool
    break_glass: Dict[str, bool]
    break_glass_used: List[Dict[str, str]] = field(default_factory=list)
    observed: Dict[str, Any] = field(default_factory=dict)
    out_dir: str = ""
    cluster_uid: str = ""
    settings: Dict[str, Any] = field(default_factory=dict)
    apiserver_urls: Dict[str, str] = field(default_factory=dict)
    addons: Dict[str, Any] = field(default_factory=dict)
    security: Dict[str, Any] = field(default_factory=dict)
    canary_workloads: Dict[str, Any] = field(default_factory=dict)
    # A skip-level cycle: the version it ends at (the target when the run is not part of one), and the skip-level
    # pools that stay behind in this run (their nodes are in no wave; they move in the run that reaches the end).
    cycle_target: str = ""
    holding_pools: List[str] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def forks_warning(gpu_waves: List[Mapping[str, Any]], forks: Any) -> Optional[str]:
    """The waves wider than ``forks`` (ansible_forks): each task of such a wave reaches its nodes ``forks`` at a
    time, so the wave takes several times as long as planned (it is not less safe: the wave's nodes are still all
    cordoned and drained before the next wave). None when every wave fits, or forks is unknown."""
    if isinstance(forks, bool) or not isinstance(forks, int) or forks <= 0:
        return None
    wide = [w for w in gpu_waves if len(w["nodes"]) > forks]
    if not wide:
        return None
    widest = max(len(w["nodes"]) for w in wide)
    return ("wave(s) %s have up to %d nodes but ansible_forks is %d: each of their tasks reaches the nodes %d at a "
            "time, so such a wave takes about %d times as long as planned; set forks to at least %d (ansible.cfg "
            "[defaults] forks, -f %d, or the AWX job template's forks)" % (
                ", ".join(str(w["index"]) for w in wide), widest, forks, forks, -(-widest // forks), widest, widest))


def out_dir(value: Any, env: Mapping[str, str], cwd: str) -> str:
    """Where a run writes its plan, reports and change records: ``gpufleet_out_dir``, else the environment's
    ``GPUFLEET_OUT_DIR``, else ``out`` in the directory ansible-playbook runs in - never inside the collection.
    The one home of that default (the change_record callback calls it too). A relative path is taken from ``cwd``."""
    where = "gpufleet_out_dir"
    if value in (None, ""):
        value, where = env.get("GPUFLEET_OUT_DIR") or "out", "GPUFLEET_OUT_DIR"
    if not isinstance(value, str) or "\0" in value:
        raise InputError("%s: expected a directory path, got %r" % (where, value))
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(value)))


def run_id(cell: str, target: str) -> str:
    """The run id: the cell and the canonical target, so every spelling of the target gives the same one."""
    return "gpufleet-%s-%s" % (cell, str(parse_release(target)))


def _str(value: Any, where: str, required: bool = True) -> str:
    if value is None or value == "":
        if required:
            raise InputError("%s: required" % where)
        return ""
    if not isinstance(value, str):
        raise InputError("%s: expected a string, got %s %r" % (where, type(value).__name__, value))
    return value


def _url(value: Any, where: str) -> str:
    """A control-plane host's own apiserver URL, or the default (variables.py)."""
    url = _str(value, where, required=False) or str(variables.BY_NAME["gpufleet_apiserver_url"].default)
    if not APISERVER_URL.fullmatch(url):
        raise InputError("%s: expected an https:// URL of the host's own kube-apiserver such as "
                         "https://127.0.0.1:6443, got %r" % (where, url))
    return url.rstrip("/")


def _groups(groups: Mapping[str, Sequence[str]]) -> Dict[str, List[str]]:
    missing = [g for g in GROUPS if not groups.get(g)]
    if missing:
        raise InputError("the inventory needs the groups kube_control_plane, etcd and gpu_nodes, each with a host "
                         "(missing or empty: %s; found: %s). See inventories/example/hosts.yml. Nothing was changed."
                         % (", ".join(missing), ", ".join(sorted(g for g in groups if g not in ("all", "ungrouped")))
                            or "none"))
    out = {g: list(groups[g]) for g in GROUPS}
    both = sorted(set(out["kube_control_plane"]) & set(out["gpu_nodes"]))
    if both:
        raise InputError("%s: in both kube_control_plane and gpu_nodes; a host is a control-plane host or a GPU node "
                         "(gpufleet upgrades them in different stages). Nothing was changed." % ", ".join(both))
    return out


def _break_glass(cell_vars: Mapping[str, Any], host_vars: Mapping[str, Mapping[str, Any]], name: str,
                 target: str) -> Dict[str, Any]:
    switches: Dict[str, bool] = {}
    used: List[Dict[str, str]] = []
    for host, hv in sorted(host_vars.items()):
        for var, key in STALE_SWITCHES.items():
            if var in hv and hv[var] is not None and not (var == "gpu_validate_nccl" and hv[var] is True):
                variable, words = BREAK_GLASS[key][:2]
                raise InputError("%s sets %s in the inventory: break glass is confirmed per run, naming the cell and "
                                 "the action - remove it and pass -e '%s=%s on %s for %s' for the one run that needs "
                                 "it. Nothing was changed." % (host, var, variable, words, name, target))
    for key, (variable, words, what) in BREAK_GLASS.items():
        given = cell_vars.get(variable)
        phrase = "%s on %s for %s" % (words, name, target)
        if given in (None, "", False):
            switches[key] = False
            continue
        if given != phrase:
            raise InputError("%s=%r: break glass (%s) needs the exact confirmation %r for this cell and target. "
                             "Nothing was changed." % (variable, given if isinstance(given, (str, bool, int)) else
                                                       type(given).__name__, what, phrase))
        switches[key] = True
        used.append({"action": key, "variable": variable, "confirmation": phrase, "effect": what})
    return {"switches": switches, "used": used}


def _observed(cell_vars: Mapping[str, Any], host_vars: Mapping[str, Mapping[str, Any]], cp: List[str],
              gpu: List[str]) -> Dict[str, Any]:
    """Observed versions written in the inventory (an offline plan); empty when the inventory gives none."""
    apiservers = {h: host_vars[h].get("gpufleet_observed_control_plane") for h in cp}
    kubelets = {h: host_vars[h].get("gpufleet_observed_kubelet") for h in cp + gpu}
    kubectl = cell_vars.get("gpufleet_observed_kubectl")
    given = [v for v in list(apiservers.values()) + list(kubelets.values()) + [kubectl] if v]
    if not given:
        return {}
    missing = sorted([h for h, v in apiservers.items() if not v]) + sorted([h for h, v in kubelets.items() if not v])
    if missing:
        raise InputError("observed versions are partial: %s lack gpufleet_observed_control_plane / "
                         "gpufleet_observed_kubelet. Give them for every host (an offline plan) or for none (the "
                         "preflight reads them from the cluster)." % ", ".join(missing))
    for where, value in list(apiservers.items()) + list(kubelets.items()):
        parse_version(value, "%s observed version" % where)
    out: Dict[str, Any] = {"apiservers": apiservers, "kubelets": kubelets}
    if kubectl:
        out["kubectl"] = str(parse_version(kubectl, "gpufleet_observed_kubectl"))
    return out


def components(cell: Mapping[str, Any], observed: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The version-skew components of the cell: each control-plane host's apiserver, controller manager and
    scheduler (the apiserver's version: kubeadm moves them together), every host's kubelet with its pool, and
    kubectl when known. ``observed``: ``{apiservers: {host: v}, kubelets: {node: v}, kubectl?: v}``."""
    apiservers, kubelets = observed.get("apiservers") or {}, observed.get("kubelets") or {}
    if not isinstance(apiservers, Mapping) or not isinstance(kubelets, Mapping):
        raise InputError("observed: expected {apiservers: {host: version}, kubelets: {node: version}}")
    missing = [h for h in cell["control_plane"] if not apiservers.get(h)]
    if missing:
        raise InputError("observed.apiservers: no version for %s; every control-plane host's apiserver must be read"
                         % ", ".join(missing))
    out: List[Dict[str, Any]] = []
    for host in cell["control_plane"]:
        for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            out.append({"component": component, "node": host, "version": str(apiservers[host])})
    for host in cell["control_plane"] + cell["gpu_nodes"]:
        if kubelets.get(host):
            out.append({"component": "kubelet", "node": host, "pool": cell["host_pool"][host],
                        "version": str(kubelets[host])})
    if observed.get("kubectl"):
        out.append({"component": "kubectl", "node": "", "version": str(observed["kubectl"])})
    return out


def build(groups: Mapping[str, Sequence[str]], host_vars: Mapping[str, Mapping[str, Any]],
          cell_vars: Mapping[str, Any], baselines: Mapping[str, Mapping[str, Any]],
          allow_limit: bool = False, output_dir: str = "") -> Cell:
    """Build and check the cell. ``host_vars``: per host, the variables of :data:`HOST_VARS` (and any stale switch)
    that are set; ``cell_vars``: the cell-wide variables; ``baselines``: validated baseline per pool (see
    :func:`pools_of` for the pools to load)."""
    limit = cell_vars.get("ansible_limit")
    if limit and not allow_limit:
        raise InputError("--limit %s: the upgrade plays plan whole failure domains and check every earlier wave "
                         "before the next starts, so they run on the whole cell. Run without --limit (finished "
                         "nodes are skipped); for one node use playbooks/maintenance.yml, to look without changing "
                         "anything use playbooks/plan.yml. Nothing was changed." % limit)
    grouped = _groups(groups)
    cp, gpu = grouped["kube_control_plane"], grouped["gpu_nodes"]
    name = _str(cell_vars.get("gpufleet_cluster_name"), "gpufleet_cluster_name (the cell's name, used in the run id, "
                                                        "the records and break-glass confirmations)")
    if not CELL_NAME.fullmatch(name):
        raise InputError("gpufleet_cluster_name=%r: not a DNS label - use lower-case ASCII letters, digits and '-' "
                         "(at most 63, starting and ending with a letter or digit), as the fleet's cell names. "
                         "Nothing was changed." % name)
    expected = cell_vars.get("gpufleet_expected_cell")
    if expected not in (None, "") and not isinstance(expected, str):
        raise InputError("gpufleet_expected_cell: expected the cell's name, a string (the AWX survey's answer), got "
                         "%s %r. Nothing was changed." % (type(expected).__name__, expected))
    if expected not in (None, "") and expected != name:
        raise InputError("gpufleet_expected_cell=%r: this run was launched for cell %r, but the inventory is cell %r "
                         "(gpufleet_cluster_name). Launch it with that cell's inventory. Nothing was changed."
                         % (expected, expected, name))
    etcd_target = cell_vars.get("gpufleet_etcd_target_version")
    if etcd_target not in (None, ""):
        raise InputError("gpufleet_etcd_target_version=%s: etcd moves in a window of its own "
                         "(playbooks/etcd_upgrade.yml), never in a run that moves Kubernetes; unset it for this run. "
                         "Nothing was changed." % (etcd_target,))
    raw_target = cell_vars.get("gpufleet_target_version")
    if raw_target in (None, ""):
        raise InputError("gpufleet_target_version: required, the release to reach such as v1.36.3 (-e "
                         "gpufleet_target_version=v1.36.3). Nothing was changed.")
    try:
        target = parse_release(raw_target, "gpufleet_target_version")
    except InputError as exc:
        raise InputError("%s. Nothing was changed." % exc.msg)
    canonical = str(target)
    cycle = _cycle_target(cell_vars.get("gpufleet_cycle_target_version"), target)
    for host in sorted(host_vars):
        for var, why in MOVED_HOST_VARS.items():
            if host_vars[host].get(var) is not None:
                raise InputError("%s: %s is not read: %s. Nothing was changed." % (host, var, why))
    host_pool: Dict[str, str] = {}
    raw_nodes: List[Dict[str, Any]] = []
    for host in cp:
        hv = host_vars.get(host) or {}
        pool = hv.get("gpufleet_pool") or CONTROL_PLANE_POOL
        if pool != CONTROL_PLANE_POOL:
            raise InputError("%s: a control-plane host is in the pool %r, not %r; remove its gpufleet_pool" % (
                host, pool, CONTROL_PLANE_POOL))
        host_pool[host] = CONTROL_PLANE_POOL
        raw_nodes.append({"name": host, "pool": CONTROL_PLANE_POOL, "role": CONTROL_PLANE, "gpus": 0,
                          "failure_domain": _str(hv.get("gpufleet_failure_domain"), "%s: gpufleet_failure_domain"
                                                 % host, required=False) or CONTROL_PLANE_POOL})
    for host in gpu:
        hv = host_vars.get(host) or {}
        pool = _str(hv.get("gpufleet_pool"), "%s: gpufleet_pool (the node pool, one baseline per pool) - set it in "
                    "the inventory. Nothing was changed" % host)
        domain = _str(hv.get("gpufleet_failure_domain"), "%s: gpufleet_failure_domain (rack set or rail group) - set "
                      "it in the inventory. Nothing was changed" % host)
        if pool == CONTROL_PLANE_POOL:
            raise InputError("%s: a GPU node cannot be in the pool %r" % (host, CONTROL_PLANE_POOL))
        baseline = baselines.get(pool)
        if baseline is None:
            raise InputError("%s: no baseline for its pool %r; create %s.yml in gpufleet_baseline_dir" % (
                host, pool, pool))
        if baseline["name"] != pool:
            raise InputError("the baseline of pool %r is named %r; a baseline file holds the pool of the same name" % (
                pool, baseline["name"]))
        host_pool[host] = pool
        raw_nodes.append({"name": host, "pool": pool, "role": WORKER, "failure_domain": domain,
                          "gpus": int(baseline["gpu"]["count"]), "gpu_type": baseline["gpu"]["product"],
                          "ring": 0 if hv.get("gpufleet_ring") is None else hv["gpufleet_ring"],
                          "dr_pair": _str(hv.get("gpufleet_dr_pair"), "%s: gpufleet_dr_pair" % host, required=False),
                          "canary": _bool(hv.get("gpufleet_canary"), "%s: gpufleet_canary" % host),
                          "unschedulable_before": _bool(hv.get("gpufleet_unschedulable_before"),
                                                        "%s: gpufleet_unschedulable_before" % host)})
    try:
        nodes = parse_nodes(raw_nodes)
        caps = parse_caps(cell_vars.get("gpufleet_wave_caps"), "gpufleet_wave_caps")
        policies = parse_pool_policies(cell_vars.get("gpufleet_pool_policies"), "gpufleet_pool_policies")
        # one home of the pool policy's default (skip_level true): the waves of this hop and the pools below
        skip_level = {pool: policies[pool].skip_level if pool in policies else True
                      for pool in set(host_pool.values()) - {CONTROL_PLANE_POOL}}
        holding = sorted(p for p, skip in skip_level.items() if skip) if cycle != target else []
        plan = plan_waves(nodes, caps, holding)
    except GpufleetError as exc:
        raise InputError("%s. Nothing was changed." % exc.msg, **exc.details)
    unknown = sorted(set(policies) - set(host_pool.values()))
    if unknown:
        raise InputError("gpufleet_pool_policies names pool(s) %s that no host is in (pools: %s)" % (
            ", ".join(unknown), ", ".join(sorted(set(host_pool.values())))))
    pools: Dict[str, Dict[str, Any]] = {}
    for pool in sorted(set(host_pool.values()) - {CONTROL_PLANE_POOL}):
        pools[pool] = {"baseline": dict(baselines[pool]),
                       "skip_level": skip_level[pool],
                       "nodes": [h for h in gpu if host_pool[h] == pool],
                       # the nvidia.com/gpu the pool should have allocatable: its nodes times what its baseline
                       # says a Node offers (node.allocatable_gpus: gpu.count, or more on a MIG pool)
                       "gpus": _allocatable(baselines[pool]) * sum(1 for h in gpu if host_pool[h] == pool)}
    gpu_waves: List[Dict[str, Any]] = []
    for wave in plan["waves"]:
        if wave["kind"] == "control-plane":
            continue
        index = len(gpu_waves) + 1
        # earlier: what must be finished before this wave starts - the control plane and every earlier wave
        earlier = list(cp) + [n for w in gpu_waves for n in w["nodes"]]
        gpu_waves.append(dict(wave, index=index, earlier=earlier, label="%d (%s: %s)" % (
            index, wave["kind"], ",".join(wave["failure_domains"]))))
    workloads = canary.parse_inputs(cell_vars.get(canary.VAR))
    gaps = canary.baseline_gaps(workloads, pools)
    if gaps:
        raise InputError("%s. Nothing was changed." % "; ".join(gaps))
    for wave in gpu_waves:  # what each canary wave runs on its nodes before the next wave (none elsewhere)
        wave["canary_runs"] = canary.canary_runs(workloads, wave["nodes"], host_pool, pools) \
            if wave["kind"] == "canary" else []
    glass = _break_glass(cell_vars, host_vars, name, canonical)
    addon_inputs = addons.parse_inputs(cell_vars.get("gpufleet_addon_support"),
                                       cell_vars.get("gpufleet_addon_versions"), cell_vars.get(addons.ADDONS_VAR))
    releases = addons.parse_releases(cell_vars.get(addons.RELEASES_VAR),
                                     known=addons.merged(addon_inputs["defined"]))
    return Cell(
        name=name, target=canonical, target_minor=target.minor_str, run_id=run_id(name, canonical),
        control_plane=cp, etcd=grouped["etcd"], gpu_nodes=gpu, first_control_plane=cp[0],
        nodes=[asdict(n) for n in nodes], pools=pools,
        pool_policies={p: {"skip_level": v.skip_level} for p, v in sorted(policies.items())},
        host_pool=host_pool, caps=asdict(caps), waves=plan["waves"], gpu_waves=gpu_waves,
        canaries=plan["canaries"], keep_cordoned=plan["keep_cordoned"],
        summary=plan["summary"] + ("; skip-level pool(s) %s stay at their kubelet until the cycle's last hop %s" % (
            ", ".join(holding), cycle) if holding else ""),
        cycle_target=str(cycle), holding_pools=holding,
        allow_multi_hop=_bool(cell_vars.get("gpufleet_allow_multi_hop"), "gpufleet_allow_multi_hop"),
        allow_unsupported_target=_bool(cell_vars.get("gpufleet_allow_unsupported_target"),
                                       "gpufleet_allow_unsupported_target"),
        break_glass=glass["switches"], break_glass_used=glass["used"],
        observed=_observed(cell_vars, host_vars, cp, gpu), out_dir=output_dir,
        cluster_uid=_str(cell_vars.get("gpufleet_cluster_uid"), "gpufleet_cluster_uid (the kube-system Namespace UID "
                         "of the cell's cluster)", required=False),
        settings=dict(variables.settings(cell_vars),
                      soak_signals=apiserver_signals.settings(cell_vars.get(apiserver_signals.VAR))),
        addons=dict(addon_inputs, releases=releases),
        # the addons stage's releases: the RBAC in their deployed revisions is expected (security_checks)
        security=dict(security.parse_inputs(cell_vars.get("gpufleet_security_admission_probes"),
                                            cell_vars.get("gpufleet_security_rbac_expected"),
                                            cell_vars.get("gpufleet_security_rbac_accepted")),
                      addon_releases=[{"release": "%s/%s" % (r["namespace"], r["release"]), "version": r["version"]}
                                      for r in releases]),
        canary_workloads=workloads,
        apiserver_urls={h: _url(host_vars[h].get("gpufleet_apiserver_url"), "%s: gpufleet_apiserver_url" % h)
                        for h in cp})


def _cycle_target(raw: Any, target: KubeVersion) -> KubeVersion:
    """``gpufleet_cycle_target_version``: where a skip-level cycle ends (the target when unset). This run's
    target is one hop of it, so the cycle ends at or above it, on the same major, within the kubelet's three
    minors of lag (a skip-level pool left at the cycle's first version must still be in policy at its end)."""
    if raw in (None, ""):
        return target
    try:
        cycle = parse_release(raw, "gpufleet_cycle_target_version")
    except InputError as exc:
        raise InputError("%s. Nothing was changed." % exc.msg)
    if cycle.major != target.major:
        raise InputError("gpufleet_cycle_target_version=%s changes the major version of this run's target %s; a "
                         "cycle stays on one major. Nothing was changed." % (cycle, target))
    if cycle < target:
        raise InputError("gpufleet_cycle_target_version=%s is below this run's target %s: the cycle ends at the "
                         "last hop, so give that version (or leave it unset for a run that is not part of a "
                         "skip-level cycle). Nothing was changed." % (cycle, target))
    if cycle.minor - target.minor > 2:
        raise InputError("gpufleet_cycle_target_version=%s is %d minors above this run's target %s: a kubelet left "
                         "at the control plane's current minor may lag at most 3 minors, so a cycle spans at most "
                         "three hops (this run's and two more). Nothing was changed." % (
                             cycle, cycle.minor - target.minor, target))
    return cycle


def same_everywhere(per_host: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> None:
    """Cell-wide variables must have one value on every host: the cell is read once (on the first host of the
    play), so a value set for some hosts only (a group's vars) would be silently ignored or not, by host order."""
    for name in names:
        values: Dict[str, List[str]] = {}
        for host, hv in sorted(per_host.items()):
            values.setdefault(repr(hv.get(name)), []).append(host)
        if len(values) > 1:
            shown = "; ".join("%s on %s" % (v, ", ".join(h[:3]) + (" ..." if len(h) > 3 else ""))
                              for v, h in sorted(values.items()))
            raise InputError("%s is cell-wide but differs between hosts (%s): set it once, in group_vars/all or "
                             "with -e. Nothing was changed." % (name, shown))


def _allocatable(baseline: Mapping[str, Any]) -> int:
    """nvidia.com/gpu one Node of the pool offers: node.allocatable_gpus (baseline.validate defaults it to
    gpu.count)."""
    return int((baseline.get("node") or {}).get("allocatable_gpus") or baseline["gpu"]["count"])


def pools_of(groups: Mapping[str, Sequence[str]], host_vars: Mapping[str, Mapping[str, Any]]) -> List[str]:
    """The pools whose baselines :func:`build` needs (GPU nodes' ``gpufleet_pool``), to load them first."""
    return sorted({str(host_vars.get(h, {}).get("gpufleet_pool")) for h in groups.get("gpu_nodes") or []
                   if isinstance(host_vars.get(h, {}).get("gpufleet_pool"), str)
                   and host_vars[h]["gpufleet_pool"]})
