#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: node_state
short_description: Cordon, uncordon and record each node's upgrade phase on the Node object
version_added: 0.1.0
description:
  - Keeps the per-node ledger a rerun resumes from, as annotations on the Node (C(gpufleet.io/upgrade-target),
    C(gpufleet.io/upgrade-phase), C(gpufleet.io/upgrade-reason), C(gpufleet.io/unschedulable-before),
    C(gpufleet.io/upgrade-updated)).
  - C(cordoned) records whether the node was unschedulable before (the first time only) and cordons it;
    C(uncordoned) returns it to that state, so a node an operator had cordoned stays cordoned; C(marked) sets the
    phase and reason only (a failed node stays cordoned with the gate that failed it); C(read) changes nothing
    and returns every node's progress.
options:
  nodes:
    description: Node names.
    type: list
    elements: str
    required: true
  state:
    description: What to do.
    type: str
    choices: [cordoned, uncordoned, marked, read]
    default: read
  target:
    description: The version the nodes are being taken to (the ledger is per target).
    type: str
    required: true
  phase:
    description: Phase to record (cordoned, drained, upgraded, validated, done, failed). Defaults to C(cordoned)
      for O(state=cordoned) and C(done) for O(state=uncordoned).
    type: str
  reason:
    description: Why (required for phase C(failed)); an empty string clears it.
    type: str
extends_documentation_fragment:
  - gpufleet.upgrade.common.KUBE
author:
  - gpufleet maintainers
"""

EXAMPLES = r"""
- name: Cordon the wave and remember what each node was before
  gpufleet.upgrade.node_state:
    nodes: "{{ ansible_play_batch }}"
    state: cordoned
    target: v1.36.3
  delegate_to: localhost
  run_once: true

- name: A failed gate keeps the node cordoned with the reason
  gpufleet.upgrade.node_state:
    nodes: [gpu-a1]
    state: marked
    phase: failed
    reason: "dcgm_diag: memory on GPU 5 failed"
    target: v1.36.3
  delegate_to: localhost
"""

RETURN = r"""
nodes:
  description: Per node, its progress after the call (name, target, phase, reason, unschedulable,
    held_by_gpufleet, unschedulable_before, finished).
  returned: always
  type: list
  elements: dict
changed_nodes:
  description: Nodes that were patched (or would be, in check mode).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube, nodes
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="str", required=True),
            state=dict(type="str", choices=["cordoned", "uncordoned", "marked", "read"], default="read"),
            target=dict(type="str", required=True),
            phase=dict(type="str"),
            reason=dict(type="str"),
            **kube.KUBE_ARGSPEC,
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        api = kube.connect(module)
        out, changed = [], []
        for name in p["nodes"]:
            node = api.get_node(name)
            if p["state"] != "read":
                patch = nodes.plan_patch(node, p["state"], p["target"], p["phase"], p["reason"], kube.now_rfc3339())
                if patch is not None:
                    changed.append(name)
                    if not module.check_mode:
                        node = api.patch_node(name, patch)
            out.append(nodes.progress(node, p["target"]))
        return {"changed": bool(changed), "changed_nodes": changed, "nodes": out}

    run_module(module, body)


if __name__ == "__main__":
    main()
