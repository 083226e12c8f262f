# Copyright: gpufleet contributors
# Apache License 2.0
"""The action of gpufleet.upgrade.cell (plugins/action/controller.py routes it here): runs on the controller, reads
the inventory (groups, host variables, cell variables) and the pool baselines, and returns the checked cell
(module_utils/cell.py does the work)."""
from __future__ import annotations

import os
import traceback
from typing import Any, Callable, Dict, Mapping

from ansible.errors import AnsibleError

from ansible_collections.gpufleet.upgrade.plugins.module_utils import cell as cell_utils
from ansible_collections.gpufleet.upgrade.plugins.module_utils import variables
from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import load_file
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError

CELL_VARS = ("gpufleet_cluster_name", "gpufleet_target_version", "gpufleet_cycle_target_version",
             "gpufleet_wave_caps", "gpufleet_pool_policies",
             "gpufleet_allow_multi_hop", "gpufleet_allow_unsupported_target", "gpufleet_observed_kubectl",
             "gpufleet_out_dir", "gpufleet_cluster_uid", "gpufleet_expected_cell", "gpufleet_addons",
             "gpufleet_addon_support", "gpufleet_addon_versions", "gpufleet_security_admission_probes",
             "gpufleet_security_rbac_expected", "gpufleet_security_rbac_accepted",
             "gpufleet_canary_workloads", "gpufleet_addon_releases", "gpufleet_soak_signals",
             "gpufleet_etcd_target_version",
             "ansible_limit")
CELL_VARS += variables.SETTINGS + tuple(v[0] for v in cell_utils.BREAK_GLASS.values())


def cell_of(task_vars: Mapping[str, Any], args: Mapping[str, Any], template: Callable[[Any], Any]) -> cell_utils.Cell:
    """The checked cell from what Ansible gives the action: the groups, every host's variables, the cell variables
    (each through ``template``) and the action's options. Bad input raises :class:`InputError` naming it."""
    def value(name: str) -> Any:
        return template(task_vars[name]) if name in task_vars else None

    allow_limit = variables.to_bool(args.get("allow_limit"), "allow_limit")
    groups = {g: list(task_vars.get("groups", {}).get(g) or []) for g in cell_utils.GROUPS}
    hostvars = task_vars.get("hostvars", {})
    wanted = cell_utils.HOST_VARS + tuple(cell_utils.STALE_SWITCHES)
    host_vars: Dict[str, Dict[str, Any]] = {}
    for host in sorted(set(groups["kube_control_plane"]) | set(groups["gpu_nodes"])):
        hv = hostvars[host]
        host_vars[host] = {k: hv[k] for k in wanted if k in hv}
    cell_vars = {k: value(k) for k in CELL_VARS}
    cell_utils.same_everywhere({h: {k: hostvars[h][k] for k in CELL_VARS if k in hostvars[h]} for h in host_vars},
                               [k for k in CELL_VARS if k != "ansible_limit"])
    baseline_dir = args.get("baseline_dir") or value("gpufleet_baseline_dir")
    pools = cell_utils.pools_of(groups, host_vars)
    if pools and not baseline_dir:
        raise InputError("gpufleet_baseline_dir: required, the directory with one <pool>.yml baseline per "
                         "GPU pool (%s). Nothing was changed." % ", ".join(pools))
    if baseline_dir and (not isinstance(baseline_dir, str) or "\0" in baseline_dir):
        raise InputError("gpufleet_baseline_dir: expected a directory path (one <pool>.yml baseline per GPU pool), "
                         "got %s %r. Nothing was changed." % (type(baseline_dir).__name__, baseline_dir))
    baselines = {p: load_file(os.path.join(str(baseline_dir), "%s.yml" % p)) for p in pools}
    return cell_utils.build(groups, host_vars, cell_vars, baselines, allow_limit=allow_limit,
                            output_dir=cell_utils.out_dir(cell_vars["gpufleet_out_dir"], os.environ, os.getcwd()))


VALID_ARGS = frozenset(("allow_limit", "baseline_dir", "warn_forks"))


def run(result: Dict[str, Any], args: Mapping[str, Any], task_vars: Mapping[str, Any],
        template: Callable[[Any], Any], display: Any) -> Dict[str, Any]:
    """The cell action's result: ``result`` (ActionBase.run's) with the checked cell, or failed naming the input."""
    try:
        warn_forks = variables.to_bool(args.get("warn_forks"), "warn_forks")
        cell = cell_of(task_vars, args, template)
    except GpufleetError as exc:
        result.update(failed=True, msg=exc.msg, error_type=type(exc).__name__)
        return result
    except AnsibleError as exc:  # a variable Ansible could not template: its own message says which
        result.update(failed=True, error_type=type(exc).__name__, exception=traceback.format_exc(),
                      msg="gpufleet.upgrade.cell: a variable of the inventory could not be read: %s. Nothing was "
                          "changed." % str(exc)[:1000])
        return result
    except Exception as exc:  # a bug, or input no check anticipated: a clear failure, as run_module does
        result.update(failed=True, error_type="UnexpectedError", exception=traceback.format_exc(),
                      msg="gpufleet.upgrade.cell failed on its input: %s: %s. Nothing was changed; run with -vvv "
                          "for the traceback and report it with the inventory." % (type(exc).__name__, str(exc)[:500]))
        return result
    result.update(changed=False, cell=cell.as_dict(), msg=cell.summary)
    if warn_forks:
        wide = cell_utils.forks_warning(cell.gpu_waves, task_vars.get("ansible_forks"))
        if wide:
            result.setdefault("warnings", []).append(wide)
    for used in cell.break_glass_used:
        display.warning("BREAK GLASS confirmed for %s: %s (%s)" % (cell.name, used["action"], used["effect"]))
    return result
