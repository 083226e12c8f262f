# Copyright: gpufleet contributors
# Apache License 2.0
"""Every ``gpufleet_*`` variable: what it is, its type and default, where it is set and which playbooks read it.

The one home of the cell-wide settings' defaults and bounds (:func:`settings`, used by cell.py), and the source of
docs/variables.md (:func:`markdown`; tests/unit/module_utils/test_variables.py checks the file is current and
that every gpufleet_* name the playbooks and roles use is listed here).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

DEFAULT_PATCH_SLO_DAYS = 30  # days a cell may stay behind its minor's latest patch (the fleet report)

CELL_PLAYBOOKS = ("plan", "preflight", "upgrade_wave", "control_plane", "addons", "node_pool", "canary",
                  "maintenance", "validate", "psa_pin", "helm_mapkubeapis")
CLUSTER_PLAYBOOKS = ("preflight", "upgrade_wave", "control_plane", "addons", "node_pool", "canary", "maintenance",
                     "validate", "psa_pin", "helm_mapkubeapis")
WAVE_PLAYBOOKS = ("upgrade_wave", "node_pool", "canary", "maintenance")


@dataclass(frozen=True)
class Var:
    name: str
    type: str
    default: Any
    where: str          # cell (group_vars/all or -e), host (host or group vars), run (-e for one run), play, internal
    playbooks: Tuple[str, ...]
    description: str
    bounds: Optional[Tuple[int, int]] = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


REQUIRED = object()
NONE = None

VARIABLES: Tuple[Var, ...] = (
    # -- the cell ------------------------------------------------------------------------------------------------
    Var("gpufleet_cluster_name", "str", REQUIRED, "cell", CELL_PLAYBOOKS,
        "The cell's name: in the run id, the change records and every break-glass confirmation."),
    Var("gpufleet_target_version", "str", REQUIRED, "cell", CELL_PLAYBOOKS + ("etcd_backup",),
        "The release to reach, vX.Y.Z (any spelling of it gives the same run id)."),
    Var("gpufleet_baseline_dir", "path", NONE, "cell", CELL_PLAYBOOKS,
        "Directory with one <pool>.yml baseline per GPU pool; required when the cell has GPU pools."),
    Var("gpufleet_cluster_uid", "str", NONE, "cell", CLUSTER_PLAYBOOKS,
        "The cell's identity: its kube-system Namespace UID. Playbooks that talk to the API server refuse one that "
        "reports another UID, and refuse when this is not recorded (the message gives the UID to record)."),
    Var("gpufleet_kubeconfig", "path", NONE, "cell", CLUSTER_PLAYBOOKS,
        "Kubeconfig for every Kubernetes call. Unset: the K8S_AUTH_* variables as kubernetes.core reads them "
        "(K8S_AUTH_KUBECONFIG, K8S_AUTH_HOST + K8S_AUTH_API_KEY, ...), else ~/.kube/config; never the in-cluster "
        "service account."),
    Var("gpufleet_out_dir", "path", NONE, "cell", CELL_PLAYBOOKS,
        "Where the plan, preflight reports and change records go. Unset: GPUFLEET_OUT_DIR, else ./out of the "
        "working directory (never inside the collection)."),
    Var("gpufleet_wave_caps", "dict", NONE, "cell", CELL_PLAYBOOKS,
        "Wave caps: max_gpu_fraction (of a pool's GPUs in one wave) and friends; unset: the planner's defaults."),
    Var("gpufleet_pool_policies", "dict", NONE, "cell", CELL_PLAYBOOKS,
        "Per pool: {skip_level: bool} - whether the pool's kubelets may skip minors (up to the skew limit)."),
    Var("gpufleet_cycle_target_version", "str", NONE, "cell", CELL_PLAYBOOKS,
        "A skip-level cycle's last version, vX.Y.Z, up to two minors above gpufleet_target_version (each run is one "
        "control-plane hop of it). Pools with skip_level true stay at their kubelet until the run whose target is "
        "this version, then jump in one drain; pools with skip_level false move at every hop. Unset: the target."),
    Var("gpufleet_allow_multi_hop", "bool", False, "cell", CELL_PLAYBOOKS,
        "Plan a control-plane path of more than one minor (it is still applied one minor at a time)."),
    Var("gpufleet_allow_unsupported_target", "bool", False, "cell", CELL_PLAYBOOKS,
        "Accept a target that is out of upstream support (to hop through it)."),
    Var("gpufleet_soak_seconds", "int", 30, "cell", ("upgrade_wave", "control_plane"),
        "The soak of each control-plane host after it moves, after its new apiserver's warm-up (its signals read "
        "every gpufleet_soak_signals.interval_seconds).", (1, 3600)),
    Var("gpufleet_soak_signals", "dict", NONE, "cell", ("upgrade_wave", "control_plane"),
        "The control-plane soak's settings and thresholds (plugins/module_utils/apiserver_signals.py SPEC, each "
        "default with its source; docs/stages.md): interval_seconds, warmup_seconds, before_seconds, min_requests "
        "(a verb class with fewer has no p99: unmeasured, a failure), and per signal a ratio and slack over the "
        "reading before and the peers' median (429s, p99 latency by verb class, LIST rate, memory)."),
    Var("gpufleet_audit_callers", "bool", True, "cell", ("preflight", "upgrade_wave"),
        "Preflight reads every control-plane host's audit log for who called a deprecated API (docs/stages.md, "
        "\"Who calls a removed API\"); a host whose log cannot answer blocks. false: go without (the report says "
        "so)."),
    Var("gpufleet_audit_lookback_minutes", "int", 10080, "cell", ("preflight", "upgrade_wave"),
        "How far back preflight counts calls in the audit logs (a week: weekly jobs); a log that does not reach back "
        "that far (rotated, or auditing turned on since) blocks. 0: the whole log, whatever it covers (the report "
        "says from when).", (0, 129600)),
    Var("gpufleet_reach_timeout", "int", 60, "cell", CLUSTER_PLAYBOOKS,
        "Seconds to wait for a host before it counts as unreachable (a blocker).", (1, 3600)),
    Var("gpufleet_observe_seconds", "int", 60, "cell", ("maintenance",),
        "Seconds to watch a node after its uncordon before the maintenance counts as done.", (0, 3600)),
    Var("gpufleet_only_canaries", "bool", False, "cell", ("node_pool", "canary"),
        "Run only the canary waves (canary.yml sets it)."),
    Var("gpufleet_addons", "list", NONE, "cell", CELL_PLAYBOOKS,
        "Addons the shipped matrix does not know, each {addon (a key), name, stage (3-8: its place in the addons "
        "stage; 7), images (repositories as ORG/NAME, matched in any registry), charts (Helm chart names)}; each "
        "image and chart identifies one addon. gpufleet_addon_support gives their rows."),
    Var("gpufleet_addon_support", "list", NONE, "cell", CELL_PLAYBOOKS,
        "Rows added to the addon matrix, each {addon (shipped or from gpufleet_addons), version (MAJOR.MINOR), "
        "kube_min and kube_max (1.N; kube_max '' when no upper bound is documented), source (where the support is "
        "documented)}; they win over the shipped rows."),
    Var("gpufleet_addon_versions", "dict", NONE, "cell", CELL_PLAYBOOKS,
        "Versions of addons whose image is pinned by digest only (no tag), keyed by addon: {kueue: v0.13.1}."),
    Var("gpufleet_security_admission_probes", "list", NONE, "cell", CELL_PLAYBOOKS,
        "Admission probes, each {namespace, image (one the namespace's image policy must refuse), expect (text the "
        "refusal must contain: the policy's name)}; each is a server-side dry run after every wave."),
    Var("gpufleet_security_rbac_accepted", "list", NONE, "cell", CELL_PLAYBOOKS,
        "New powerful RBAC grants the operator accepts, each {binding (a ClusterRoleBinding's exact name, a "
        "RoleBinding's NAMESPACE/NAME), role (the role it binds, NAMESPACE/NAME for a Role), subject (as the check "
        "reports it: 'User alice', 'ServiceAccount ns/name'), reason (recorded with the run)}; no pattern. What the "
        "apiserver and kubeadm create is known by identity (plugins/module_utils/data_rbac.py)."),
    Var("gpufleet_security_rbac_expected", "list", NONE, "cell", CELL_PLAYBOOKS,
        "REFUSED when set (gpufleet 0.2's binding-name patterns such as system:*: a name lets anyone hide a "
        "binding). Remove it; accept a specific binding with gpufleet_security_rbac_accepted."),
    Var("gpufleet_canary_workloads", "dict", NONE, "cell", CELL_PLAYBOOKS,
        "Work run on the canary nodes before later waves: {namespace (gpufleet-canary), timeout (900 s), training: "
        "{image, command, args, env, gpus_per_node, pod_annotations, tolerations}, inference: {image, port, "
        "readiness_path, path, requests, gpus_per_replica, probe: {image, command, ...}}}; judged by each pool "
        "baseline's canary section. Unset: the canary waves run no workload."),
    Var("gpufleet_addon_releases", "list", NONE, "cell", CELL_PLAYBOOKS,
        "The Helm releases the addons stage upgrades after the control plane, each {addon (a key of the addon "
        "matrix: its stage orders the releases), release, namespace, chart (a path, URL or repo/chart), version "
        "(the chart version; '' for a packaged chart's own), values, timeout (600 s: Helm waits, then rolls back), "
        "crds (CRD manifest files applied server-side before the release: Helm never upgrades a chart's crds/)}. "
        "Unset: the stage upgrades nothing."),
    Var("gpufleet_helm_binary", "path", NONE, "cell", ("upgrade_wave", "addons", "helm_mapkubeapis"),
        "The Helm 3 CLI the addons stage runs. Unset: helm on the controller's PATH."),
    Var("gpufleet_observed_kubectl", "str", NONE, "cell", ("plan",),
        "Offline plan only: the kubectl version in use."),
    # -- break glass ---------------------------------------------------------------------------------------------
    Var("gpufleet_break_glass_disable_eviction", "str", NONE, "run", WAVE_PLAYBOOKS,
        "Break glass, exactly 'disable eviction on <cell> for <target>': delete pods without the eviction API."),
    Var("gpufleet_break_glass_force_drain", "str", NONE, "run", WAVE_PLAYBOOKS,
        "Break glass, exactly 'force drain on <cell> for <target>': drain pods without a controller."),
    Var("gpufleet_break_glass_skip_checkpoint", "str", NONE, "run", WAVE_PLAYBOOKS,
        "Break glass, exactly 'skip checkpoint on <cell> for <target>': stop gangs without a checkpoint."),
    Var("gpufleet_break_glass_skip_nccl", "str", NONE, "run", WAVE_PLAYBOOKS + ("validate",),
        "Break glass, exactly 'skip nccl on <cell> for <target>': leave out the NCCL gate."),
    Var("gpufleet_break_glass_map_kube_apis", "str", NONE, "run", ("helm_mapkubeapis",),
        "Break glass, exactly 'map kube apis on <cell> for <target>': rewrite Helm release manifests that use APIs "
        "the target removes."),
    Var("gpufleet_break_glass_etcd_restore", "str", NONE, "run", ("etcd_restore",),
        "Break glass, exactly 'restore <cell> from <snapshot file>': restore etcd from that snapshot."),
    Var("gpufleet_etcd_target_version", "str", NONE, "run", ("etcd_upgrade",) + CELL_PLAYBOOKS,
        "The etcd release etcd_upgrade.yml moves every member to (X.Y.Z, one minor at a time). etcd moves in a "
        "window of its own: a playbook that moves Kubernetes refuses to run with it set."),
    Var("gpufleet_expected_cell", "str", NONE, "run", CELL_PLAYBOOKS,
        "The cell this run was launched for (the AWX survey asks it); a run whose inventory is another cell's is "
        "refused."),
    # -- Pod Security pinning -----------------------------------------------------------------------------------------
    Var("gpufleet_psa_version", "str", NONE, "run", ("psa_pin",),
        "The minor to pin Pod Security enforce labels to, such as v1.35."),
    Var("gpufleet_psa_namespaces", "list", NONE, "run", ("psa_pin",),
        "Only these namespaces (unset: every namespace with an enforce label)."),
    Var("gpufleet_psa_bump", "bool", False, "run", ("psa_pin",),
        "Also move namespaces already pinned to another minor (the deliberate, recorded bump)."),
    # -- one maintenance -----------------------------------------------------------------------------------------
    Var("gpufleet_node", "str", NONE, "run", ("maintenance",), "The GPU node to maintain."),
    Var("gpufleet_maintenance_action", "str", NONE, "run", ("maintenance",), "upgrade, gpu_stack or repair."),
    Var("gpufleet_repaired", "bool", False, "run", ("maintenance",),
        "After a manual repair: resume the maintenance past the drain."),
    # -- per host ------------------------------------------------------------------------------------------------
    Var("gpufleet_pool", "str", NONE, "host", CELL_PLAYBOOKS,
        "A GPU node's pool (the name of its baseline file); required on every GPU node."),
    Var("gpufleet_failure_domain", "str", NONE, "host", CELL_PLAYBOOKS,
        "A GPU node's failure domain (rack set); waves take whole domains. Required on every GPU node."),
    Var("gpufleet_ring", "int", 0, "host", CELL_PLAYBOOKS, "Order of the node's domain among the waves."),
    Var("gpufleet_dr_pair", "str", NONE, "host", CELL_PLAYBOOKS,
        "A failure domain that must never be in the same wave as this node's."),
    Var("gpufleet_canary", "bool", False, "host", CELL_PLAYBOOKS,
        "Make the node a canary (else one node per GPU type is chosen)."),
    Var("gpufleet_unschedulable_before", "bool", False, "host", CELL_PLAYBOOKS,
        "The node was cordoned before the run: it stays cordoned after its upgrade."),
    Var("gpufleet_apiserver_url", "str", "https://127.0.0.1:6443", "host", ("preflight", "upgrade_wave",
                                                                            "control_plane"),
        "A control-plane host's own kube-apiserver URL, as the controller reaches it (its /version, /readyz and "
        "/metrics are read there). Each host needs its own: the control-plane soak and the fleet compare them, and "
        "refuse one URL for two hosts; the default suits a single control-plane host."),
    Var("gpufleet_observed_control_plane", "str", NONE, "host", ("plan",),
        "Offline plan only: a control-plane host's apiserver version."),
    Var("gpufleet_observed_kubelet", "str", NONE, "host", ("plan",), "Offline plan only: a host's kubelet version."),
    # -- refused (moved elsewhere) -------------------------------------------------------------------------------
    Var("gpufleet_gpus", "refused", NONE, "host", CELL_PLAYBOOKS,
        "Refused: the GPU count comes from the pool baseline (gpu.count)."),
    Var("gpufleet_role", "refused", NONE, "host", CELL_PLAYBOOKS,
        "Refused: membership in kube_control_plane or gpu_nodes decides the role."),
    # -- the change record (plays describe themselves) -----------------------------------------------------------
    Var("gpufleet_objective", "str", NONE, "play", ("all",),
        "A play's objective, for the change record (the run's, unless gpufleet_run_objective is set)."),
    Var("gpufleet_run_objective", "str", NONE, "play", ("upgrade_wave", "canary"),
        "The whole run's objective, for the change record: a playbook of stages sets it on its first import."),
    Var("gpufleet_rollback_triggers", "list", NONE, "play", ("all",),
        "Conditions that trigger a rollback, for the change record (defaults listed by the callback)."),
    Var("gpufleet_wave", "str", NONE, "internal", ("node_pool",), "Set per host: the label of its wave."),
    # -- set by the playbooks, not inputs --------------------------------------------------------------------------
    Var("gpufleet_waves", "list", NONE, "internal", ("node_pool",), "The waves of this run (from the cell)."),
    Var("gpufleet_wave_order", "group", NONE, "internal", ("node_pool",), "The in-memory group of wave hosts."),
    Var("gpufleet_wave_nodes", "list", NONE, "internal", ("node_pool",), "Set per host: the nodes of its wave."),
    Var("gpufleet_wave_canary_runs", "list", NONE, "internal", ("node_pool",),
        "Set per host: the canary workloads its wave runs (the cell's gpu_waves[].canary_runs)."),
    Var("gpufleet_wave_earlier", "list", NONE, "internal", ("node_pool",),
        "Set per host: the nodes that must be finished before its wave."),
    Var("gpufleet_pending", "list", NONE, "internal", ("node_pool",), "Nodes not finished when the run started."),
    Var("gpufleet_cell", "dict", NONE, "internal", ("control_plane", "maintenance"),
        "The checked cell (gpufleet.upgrade.cell's result), as a fact."),
    Var("gpufleet_break_glass_record", "dict", NONE, "internal", ("etcd_restore",),
        "A break-glass use, for the change record."),
    Var("gpufleet_lab", "bool", False, "internal", (), "Set by the lab's inventory; never read by the collection."),
    Var("gpufleet_lab_charts", "path", NONE, "internal", (),
        "Set by the lab's inventory: where `lab up` packaged the lab's charts (its gpufleet_addon_releases name "
        "them); never read by the collection."),
    # -- AWX -------------------------------------------------------------------------------------------------------
    Var("gpufleet_awx", "dict", NONE, "run", ("awx_configure",),
        "The cell's AWX objects: organization, project, inventory, execution_environment, cell, target, "
        "credentials {machine, kubernetes}, window {rrule}, backup_dir (see gpufleet.upgrade.awx_definitions)."),
    Var("gpufleet_awx_fleet", "dict", REQUIRED, "run", ("awx_configure_fleet",),
        "The fleet's AWX objects: organization, project, inventory (a localhost one), execution_environment, "
        "credentials {machine}, out_dir (durable storage: the fleet ledger), latest_patches (for the report), "
        "instance_groups (optional)."),
    Var("gpufleet_awx_snapshot_key", "str (secret)", NONE, "run", ("awx_configure",),
        "The cell's etcd snapshot key (16 characters or more, from a vault), given to the AWX credential under "
        "no_log."),
    # -- the fleet (docs/fleet.md) ----------------------------------------------------------------------------------
    Var("gpufleet_fleet", "dict", REQUIRED, "run", ("fleet", "fleet_report", "awx_configure_fleet"),
        "The fleet: name, policy (target, rings, caps, halt thresholds, run settings), cells (ring, kind, region, "
        "GPUs, inventory, versions, pools); checked by gpufleet.upgrade.fleet_plan, described in docs/fleet.md."),
    Var("gpufleet_fleet_retry", "str", NONE, "run", ("fleet",),
        "Puts a failed cell back to pending: exactly 'retry CELL in fleet FLEET'."),
    Var("gpufleet_fleet_break_lock", "str", NONE, "run", ("fleet",),
        "Breaks the ledger's lock left by a fleet run that is gone (killed, its machine lost): exactly 'break lock "
        "ID of fleet FLEET', with the ID the refusal named; the break is kept in the ledger's lock_breaks."),
    Var("gpufleet_fleet_until_ring", "str", NONE, "run", ("fleet",),
        "Stop the run once every ring up to this one is done and soaked (next step 'held'); unset: every ring."),
    Var("gpufleet_fleet_cell", "str", REQUIRED, "run", ("fleet_readings",),
        "The fleet's name for the cell whose readings are taken; its inventory's gpufleet_cluster_name must match."),
    Var("gpufleet_fleet_expected_gpus", "int", REQUIRED, "run", ("fleet_readings",),
        "The GPUs the cell should have allocatable (the fleet's cells[].gpus)."),
    Var("gpufleet_fleet_window_seconds", "int", REQUIRED, "run", ("fleet_readings",),
        "Seconds between the two scrapes of each apiserver (the fleet's policy.metrics_window_seconds)."),
    Var("gpufleet_fleet_readings_dest", "path", REQUIRED, "run", ("fleet_readings",),
        "The JSON file the readings are written to."),
    Var("gpufleet_fleet_nccl_hosts", "list", [], "run", ("fleet_readings",),
        "The cell's NCCL probe hosts (the fleet's cells[].nccl_hosts): all_reduce_perf runs on each for "
        "nccl_busbw_gbps; empty: no NCCL reading."),
    Var("gpufleet_fleet_inference", "dict", {}, "run", ("fleet_readings",),
        "The cell's inference service {metrics_url, histogram} (the fleet's cells[].inference), scraped for "
        "inference_p99_ms; empty: no inference reading."),
    Var("gpufleet_fleet_never_ran", "bool", False, "run", ("fleet_report",),
        "Report a fleet that has no ledger yet (cells at their target done, the others pending); else refused."),
    Var("gpufleet_fleet_versions_only", "bool", False, "run", ("fleet_readings",),
        "Read only the versions (apiservers, kubelets per pool), for the fleet report; no metrics window."),
    Var("gpufleet_fleet_latest_patches", "dict", REQUIRED, "run", ("fleet_report",),
        "Each running minor's latest patch and its date, e.g. {'1.36': {version: v1.36.3, released: 2026-07-22}}; "
        "a running minor missing here is an alert."),
    Var("gpufleet_fleet_patch_slo_days", "int", DEFAULT_PATCH_SLO_DAYS, "run", ("fleet_report",),
        "Days a cell may stay behind its minor's latest patch before the report alerts."),
    # -- job artifacts (set_stats) -----------------------------------------------------------------------------------
    Var("gpufleet_plan", "dict", NONE, "artifact", ("plan",),
        "The plan's summary: cell, target, run id, control-plane path, violations, waves, the plan file."),
    Var("gpufleet_preflight", "dict", NONE, "artifact", ("preflight", "upgrade_wave"),
        "The preflight verdict: cell, target, blockers, warnings, the report file."),
    Var("gpufleet_etcd_upgrade", "dict", NONE, "artifact", ("etcd_upgrade",),
        "The etcd window's result: target, the hosts moved in order, each member's release before, the endpoints "
        "after."),
)

BY_NAME: Dict[str, Var] = {v.name: v for v in VARIABLES}
SETTINGS = ("gpufleet_soak_seconds", "gpufleet_reach_timeout", "gpufleet_observe_seconds", "gpufleet_only_canaries",
            "gpufleet_audit_callers", "gpufleet_audit_lookback_minutes")


def to_bool(value: Any, where: str) -> bool:
    """A boolean; strings from ``-e name=true`` count as Ansible reads them (true/false, yes/no, 1/0). The one
    reader of boolean inputs, for the settings here and the cell's other switches (cell.py)."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(value, str) and value.lower() in ("false", "no", "off", "0"):
        return False
    raise InputError("%s: expected true or false, got %r" % (where, value))


def settings(cell_vars: Mapping[str, Any]) -> Dict[str, Any]:
    """The cell-wide settings with their defaults, each checked (type and bounds), keyed without the prefix."""
    out: Dict[str, Any] = {}
    for name in SETTINGS:
        var = BY_NAME[name]
        value = cell_vars.get(name)
        key = name[len("gpufleet_"):]
        if value is None or value == "":
            out[key] = var.default
        elif var.type == "bool":
            out[key] = to_bool(value, name)
        else:
            whole = isinstance(value, int) and not isinstance(value, bool)
            number = int(value) if whole or (isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value)) else None
            low, high = var.bounds or (0, 2 ** 31)
            if number is None or not low <= number <= high:
                raise InputError("%s: expected whole %s from %d to %d, got %r" % (
                    name, "minutes" if name.endswith("_minutes") else "seconds", low, high, value))
            out[key] = number
    return out


def markdown() -> str:
    """docs/variables.md."""
    lines = ["# gpufleet variables", "",
             "Generated from `plugins/module_utils/variables.py` (`make docs-gen`); do not edit. Role variables are",
             "documented in each role's `meta/argument_specs.yml` (`ansible-doc -t role gpufleet.upgrade.ROLE`).", ""]
    titles = {"cell": "Cell (group_vars/all of the cell's inventory, or -e)", "run": "One run (-e)",
              "host": "Per host (host or group vars)", "play": "Set by plays, for the change record",
              "internal": "Set by the playbooks (not inputs)",
              "artifact": "Handed to the job's artifacts (set_stats; AWX keeps them with the job)"}
    for where, title in titles.items():
        lines += ["## " + title, "", "| Variable | Type | Default | Playbooks | Meaning |", "|---|---|---|---|---|"]
        for v in VARIABLES:
            if v.where != where:
                continue
            default = "required" if v.required else ("-" if v.default is None else "`%s`" % str(v.default).lower()
                                                     if isinstance(v.default, bool) else "`%s`" % v.default)
            if v.bounds:
                default += " (%d-%d)" % v.bounds
            lines.append("| `%s` | %s | %s | %s | %s |" % (v.name, v.type, default, ", ".join(v.playbooks) or "-",
                                                           v.description.replace("|", "\\|")))
        lines.append("")
    return "\n".join(lines)
