#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: wave_plan
short_description: Plan upgrade waves - control plane, canaries, then whole failure domains under a GPU cap
version_added: 0.1.0
description:
  - Orders nodes into waves. Control-plane nodes first, one per wave. Then canaries (per GPU type, or the nodes
    marked C(canary)). Then whole failure domains (rack set, rail group), ring by ring, packed so that no wave holds
    more than O(caps.max_gpu_fraction) of the worker GPUs or O(caps.max_nodes_per_wave) nodes, and never both halves
    of a DR pair.
  - Deterministic for the same input. The same planner is available as the filter C(gpufleet.upgrade.plan_waves).
options:
  nodes:
    description:
      - Nodes with C(name), C(pool), C(failure_domain), C(gpus), and optionally C(role) (C(control-plane) or
        C(worker)), C(ring), C(dr_pair), C(unschedulable_before), C(gpu_type), C(canary).
    type: list
    elements: dict
    required: true
  caps:
    description: Wave caps.
    type: dict
    default: {}
    suboptions:
      max_gpu_fraction:
        description: Largest share of all worker GPUs in flight in one wave.
        type: float
        default: 0.25
      max_nodes_per_wave:
        description: Largest number of nodes in one wave (0 for no cap).
        type: int
        default: 0
      canaries_per_gpu_type:
        description: Canary nodes picked per GPU type when no node is marked C(canary).
        type: int
        default: 1
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Plan the waves of the cell from inventory facts
  gpufleet.upgrade.wave_plan:
    nodes: "{{ gpufleet_nodes }}"
    caps:
      max_gpu_fraction: 0.25
      max_nodes_per_wave: 16
  delegate_to: localhost
  run_once: true
  register: gpufleet_waves
"""

RETURN = r"""
waves:
  description: Ordered waves (index, kind control-plane|canary|domain, ring, nodes, gpus, failure_domains, pools).
  returned: success
  type: list
  elements: dict
cap_gpus:
  description: GPUs allowed in flight per wave.
  returned: success
  type: int
canaries:
  description: Canary node names.
  returned: success
  type: list
  elements: str
keep_cordoned:
  description: Nodes that were unschedulable before the upgrade and stay cordoned afterwards.
  returned: success
  type: list
  elements: str
summary:
  description: One line describing the plan.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module
from ansible_collections.gpufleet.upgrade.plugins.module_utils.planner import parse_caps, parse_nodes, plan_waves


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="dict", required=True),
            caps=dict(type="dict", default={}, options=dict(
                max_gpu_fraction=dict(type="float", default=0.25),
                max_nodes_per_wave=dict(type="int", default=0),
                canaries_per_gpu_type=dict(type="int", default=1))),
        ),
        supports_check_mode=True,
    )
    run_module(module, lambda: plan_waves(parse_nodes(module.params["nodes"]), parse_caps(module.params["caps"])))


if __name__ == "__main__":
    main()
