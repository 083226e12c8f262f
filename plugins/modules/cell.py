#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
# The work is done on the controller by the collection's action (plugins/action/controller.py, which meta/runtime.yml
# routes this module to; plugins/plugin_utils/cell_action.py); this file holds its documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: cell
short_description: Read and check the inventory of a GPU cell once, and return it as data for the playbooks
version_added: 0.2.0
description:
  - Runs on the controller. Reads the groups C(kube_control_plane), C(etcd) and C(gpu_nodes), each host's
    C(gpufleet_pool), C(gpufleet_failure_domain), C(gpufleet_ring), C(gpufleet_dr_pair), C(gpufleet_canary) and
    C(gpufleet_unschedulable_before), the cell's C(gpufleet_cluster_name), C(gpufleet_target_version),
    C(gpufleet_wave_caps), C(gpufleet_pool_policies) and the pool baselines in C(gpufleet_baseline_dir), checks them
    all, and returns one object - the target in its canonical form C(vX.Y.Z), the run id, the planner's nodes (GPU
    type and count from the pool baseline), the waves, the pools with their baselines, and the break-glass switches
    this run confirmed.
  - Refuses, naming the host or variable and the fix, before anything changes - missing groups, a GPU node without
    a pool or failure domain, a missing or invalid baseline, a target that is not a full release, bad caps, a
    C(--limit) (the wave plays run on the whole cell), a break-glass variable that does not repeat the exact
    confirmation C(<action> on <cell> for <target>), and stale break-glass role variables left in the inventory.
  - Every cell variable is type-checked where it is read and refused naming it - C(gpufleet_wave_caps) and
    C(gpufleet_pool_policies) must be mappings, C(gpufleet_cluster_name) an ASCII DNS label (lower-case letters,
    digits and C(-), at most 63, as the fleet's cell names; full-width letters and a trailing newline are refused),
    each host's C(gpufleet_apiserver_url) a whole C(https://) URL. Any other error comes back as a failed result
    naming the action and the exception (C(error_type=UnexpectedError)), its traceback only in C(exception) (-vvv).
  - Break glass, each confirmed per run - C(gpufleet_break_glass_disable_eviction) (C(disable eviction on CELL for
    TARGET)), C(gpufleet_break_glass_force_drain) (C(force drain on ...)), C(gpufleet_break_glass_skip_checkpoint)
    (C(skip checkpoint on ...)), C(gpufleet_break_glass_skip_nccl) (C(skip nccl on ...)).
  - Outputs go to C(out_dir) - C(gpufleet_out_dir), else C(GPUFLEET_OUT_DIR), else C(./out) of the working
    directory; a relative path is taken from the working directory.
options:
  allow_limit:
    description: Accept a C(--limit) run (playbooks that act on single nodes, such as maintenance and validate).
    type: bool
    default: false
  baseline_dir:
    description: Directory of the pool baselines (default C(gpufleet_baseline_dir)).
    type: path
  warn_forks:
    description:
      - Warn when a GPU wave has more nodes than C(ansible_forks) - each of its tasks would reach the nodes that
        many at a time, and the wave take several times as long as planned. The preflight and the plan ask for it.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
  action:
    support: full
    description: Runs on the controller as an action plugin.
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Read the cell once
  gpufleet.upgrade.cell:
  register: gpufleet_cell_result
  run_once: true
  delegate_to: localhost

- name: Upgrade the control plane to the cell's canonical target
  ansible.builtin.include_role:
    name: gpufleet.upgrade.kubeadm_upgrade
  vars:
    kubeadm_upgrade_target_version: "{{ gpufleet_cell_result.cell.target }}"
"""

RETURN = r"""
cell:
  description: The cell.
  returned: success
  type: dict
  contains:
    name:
      description: The cell's name (C(gpufleet_cluster_name)).
      type: str
    target:
      description: The target release in canonical form, e.g. C(v1.36.3).
      type: str
    run_id:
      description: C(gpufleet-<cell>-<target>); marks the training gangs a run stops.
      type: str
    control_plane:
      description: Control-plane hosts, in upgrade order.
      type: list
      elements: str
    gpu_nodes:
      description: GPU nodes.
      type: list
      elements: str
    nodes:
      description: The planner's nodes (name, pool, role, failure_domain, gpus, gpu_type, ring, dr_pair, canary,
        unschedulable_before).
      type: list
      elements: dict
    pools:
      description: Per pool, its validated baseline, skip_level, nodes and gpus (the GPUs it should have allocatable).
      type: dict
    host_pool:
      description: Each host's pool (C(control-plane) for control-plane hosts).
      type: dict
    waves:
      description: Every wave, control plane first.
      type: list
      elements: dict
    gpu_waves:
      description: The GPU node waves, numbered from 1, each with a C(label) and C(canary_runs) (the canary
        workloads a canary wave runs, each workload, pool and nodes; empty for other waves).
      type: list
      elements: dict
    break_glass:
      description: Break-glass switches (disable_eviction, force_drain, skip_checkpoint, skip_nccl), true only when
        confirmed for this run.
      type: dict
    break_glass_used:
      description: The confirmed switches with their confirmation text (recorded in the change record).
      type: list
      elements: dict
    observed:
      description: Versions written in the inventory for an offline plan (apiservers, kubelets, kubectl), or empty.
      type: dict
    settings:
      description: The cell-wide settings, checked and with their defaults - C(soak_seconds), C(reach_timeout),
        C(observe_seconds), C(only_canaries) (docs/variables.md).
      type: dict
    apiserver_urls:
      description: Per control-plane host, its own kube-apiserver URL (C(gpufleet_apiserver_url)).
      type: dict
    cluster_uid:
      description: The identity recorded for the cell's cluster (C(gpufleet_cluster_uid), the kube-system Namespace
        UID), or empty; M(gpufleet.upgrade.cluster_identity) refuses an API server that does not report it.
      type: str
    out_dir:
      description: Absolute directory for the plan, the preflight reports and (with the callback) the change
        records - C(gpufleet_out_dir), else the environment's C(GPUFLEET_OUT_DIR), else C(out) in the directory
        ansible-playbook runs in (never inside the installed collection).
      type: str
    canary_workloads:
      description: The checked C(gpufleet_canary_workloads) with defaults (namespace, timeout, training,
        inference), or empty when none is configured; every pool baseline holds the figures they are judged by.
      type: dict
"""
