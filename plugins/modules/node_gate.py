#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: node_gate
short_description: Judge a Kubernetes Node and its kubelet config against the pool baseline
version_added: 0.1.0
description:
  - Takes a Node object (as returned by M(kubernetes.core.k8s_info)) and the kubelet's C(/configz) answer, and
    checks Ready, the kubelet version against the target, allocatable C(nvidia.com/gpu) against the baseline (its
    C(node.allocatable_gpus), which defaults to C(gpu.count) - always checked), and the baseline's
    C(node.kubelet_config) keys (topologyManagerPolicy, cpuManagerPolicy, memoryManagerPolicy, ...).
  - A missing Node, a Ready condition that is not there, or an allocatable count that is not reported fails.
  - The baseline's kubelet keys are judged against what the kubelet runs - its C(/configz) as
    M(gpufleet.upgrade.node_state) reads it through the API server (O(configz)). A key the baseline names that the
    answer lacks fails the gate; baseline keys with no O(configz) given, or an answer that is not the kubelet's
    configz (an HTML error page, another component's), fail the task, naming the node.
  - With O(configz_before) as well (the same read before the upgrade), the result's C(kubelet_config_changes)
    gives every kubelet setting the upgrade changed on the node; the change record lists them per pool.
options:
  node:
    description: The Node object.
    type: dict
    required: true
  configz:
    description: The kubelet C(/configz) answer (an object with a C(kubeletconfig) key), as a dict or JSON text.
    type: raw
  configz_before:
    description: The same node's C(/configz) answer from before its upgrade, to report what changed.
    type: raw
  target_version:
    description: The kubelet version the node must report.
    type: str
  require_schedulable:
    description: Also require the node to be schedulable (after uncordon).
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.upgrade.common.BASELINE
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Read the Node and its kubelet's running config (/configz through the API server)
  gpufleet.upgrade.node_state:
    nodes: ["{{ inventory_hostname }}"]
    target: v1.36.3
    objects: true
    configz: true
  register: gpufleet_node
  delegate_to: localhost

- name: Gate the node
  gpufleet.upgrade.node_gate:
    node: "{{ gpufleet_node.resources[0] }}"
    target_version: v1.36.3
    baseline: "{{ gpufleet_cell.pools[gpufleet_pool].baseline }}"
    configz: "{{ gpufleet_node.configz[inventory_hostname] }}"
  delegate_to: localhost
"""

RETURN = r"""
passed:
  description: Whether the gate passed.
  returned: success
  type: bool
node_facts:
  description: name, ready, kubelet_version, unschedulable, allocatable_gpus, labels.
  returned: success
  type: dict
checks:
  description: Every check with subject, measured value and baseline.
  returned: always
  type: list
  elements: dict
kubelet_config_changes:
  description: With O(configz_before) and O(configz) - the pool (the baseline's name), the node, and each kubelet
    setting that differs between the two answers (C(changes), by key, each with C(before) and C(after)).
  returned: when configz_before and configz are given
  type: dict
  sample:
    pool: h100-train
    node: gpu-a1
    changes:
      containerRuntimeEndpoint: {before: "unix:///run/containerd/containerd.sock",
                                 after: "unix:///var/run/containerd/containerd.sock"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import validate
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import raise_if_failed
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module
from ansible_collections.gpufleet.upgrade.plugins.module_utils.node_gate import config_changes, judge_node


def main():
    module = AnsibleModule(
        argument_spec=dict(
            node=dict(type="dict", required=True),
            configz=dict(type="raw"),
            configz_before=dict(type="raw"),
            target_version=dict(type="str"),
            baseline=dict(type="dict", required=True),
            require_schedulable=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        baseline = validate(p["baseline"], "baseline")
        summary = judge_node(p["node"], p["configz"], p["target_version"], baseline, p["require_schedulable"])
        extra = {}
        if p["configz_before"] is not None and p["configz"] is not None:
            extra["kubelet_config_changes"] = {
                "pool": baseline["name"], "node": summary["node"]["name"],
                "changes": config_changes(p["configz_before"], p["configz"], summary["node"]["name"])}
        raise_if_failed("node_gate", summary, node_facts=summary["node"], **extra)
        return dict(extra, passed=True, node_facts=summary["node"], checks=summary["checks"])

    run_module(module, body)


if __name__ == "__main__":
    main()
