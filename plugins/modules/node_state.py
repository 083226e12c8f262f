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
  - Cordoning a node again after C(validated) records C(upgraded) - a validation does not outlive a new cordon.
  - C(held) ends a failed wave - each node in O(failures) is recorded C(failed) with its reason, each node in
    O(in_rescue) without one C(held) with the wave-mate's failure, and each other node (Ansible dropped it as
    unreachable) C(failed) with the stage it was in. The result's C(message) says it all.
  - C(finished) guards a wave boundary - every node must be C(done) for the target; a node still in a working
    phase was lost by the run and is recorded C(failed) (unreachable during its stage); then the task fails naming
    every unfinished node, so no later wave or control-plane host starts.
options:
  nodes:
    description: Node names.
    type: list
    elements: str
    required: true
  state:
    description: What to do.
    type: str
    choices: [cordoned, uncordoned, marked, read, held, finished]
    default: read
  target:
    description: The version the nodes are being taken to (the ledger is per target).
    type: str
    required: true
  cycle:
    description:
      - The version the upgrade cycle ends at (a skip-level cycle's last hop; default the target). Each cordon
        records its target among the node's drains of this cycle (C(gpufleet.io/upgrade-cycle),
        C(gpufleet.io/cycle-drains)), once per target.
      - With O(state=read) the result's C(disruptions) gives every node's drains of this cycle.
    type: str
  phase:
    description: Phase to record (cordoned, drained, upgraded, validated, done, failed). Defaults to C(cordoned)
      for O(state=cordoned) and C(done) for O(state=uncordoned).
    type: str
  reason:
    description: Why (required for phases C(failed) and C(held)); an empty string clears it.
    type: str
  failures:
    description: For O(state=held) - each node's own failure (see the C(failure_reason) filter); empty or missing
      for a node that did not fail itself.
    type: dict
    default: {}
  in_rescue:
    description: For O(state=held) - the nodes of the wave that reached the rescue (the others were lost).
    type: list
    elements: str
    default: []
  objects:
    description:
      - Also return the Node objects as the API gives them after the call (C(resources), in the shape
        M(kubernetes.core.k8s_info) returns), e.g. to read the kubelet version a node reports.
      - The roles read a node this way rather than with M(kubernetes.core.k8s_info) because a gpufleet module
        delegated to the controller runs in Ansible's worker, where M(kubernetes.core.k8s_info) starts a Python
        process of its own (about 0.5 CPU-s each, four reads a node a wave; docs/design/direct-execution.md).
    type: bool
    default: false
  configz:
    description:
      - Also return each node's running kubelet configuration (C(configz), by node name), read from the kubelet's
        C(/configz) through the API server (C(/api/v1/nodes/NAME/proxy/configz)). The identity needs C(get) on
        C(nodes/proxy), which gpufleet's own security check counts as a powerful grant (docs/stages.md).
      - A kubelet that does not answer, an answer that is not the kubelet's configz (an HTML page from a proxy, an
        empty object) fails the task, naming the node.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.upgrade.common.KUBE
  - kubernetes.core.k8s_auth_options
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Cordon the wave and remember what each node was before
  gpufleet.upgrade.node_state:
    nodes: "{{ ansible_play_batch }}"
    state: cordoned
    target: v1.36.3
  delegate_to: localhost
  run_once: true

- name: How often each node was taken out of service on the way to v1.37.2 (a skip-level cycle)
  gpufleet.upgrade.node_state:
    nodes: [gpu-a1, gpu-b1]
    target: v1.37.2
    cycle: v1.37.2
  delegate_to: localhost

- name: Read the kubelet version the Node reports (the Node object as the API gives it)
  gpufleet.upgrade.node_state:
    nodes: [gpu-a1]
    target: v1.36.3
    objects: true
  delegate_to: localhost
  register: node
  # node.resources[0].status.nodeInfo.kubeletVersion

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
    held_by_gpufleet, unschedulable_before, finished, cycle, cycle_drains).
  returned: always
  type: list
  elements: dict
changed_nodes:
  description: Nodes that were patched (or would be, in check mode).
  returned: always
  type: list
  elements: str
disruptions:
  description: For O(state=read) with O(cycle), per node the targets it was drained for in that cycle (one
    entry per disruption; empty when it was not drained in it).
  returned: when state is read and cycle is given
  type: dict
  sample: {gpu-a1: [v1.37.2], gpu-b1: [v1.36.3, v1.37.2]}
cycle:
  description: The cycle O(cycle) the disruptions are counted in.
  returned: when state is read and cycle is given
  type: str
configz:
  description: With O(configz), each node's kubelet C(/configz) answer - an object with the key C(kubeletconfig) -
    by node name.
  returned: when configz is true
  type: dict
resources:
  description: With O(objects), the Node objects after the call, in the order of O(nodes).
  returned: when objects is true
  type: list
  elements: dict
message:
  description: For O(state=held) and O(state=finished), each unfinished node with its phase and reason.
  returned: when state is held or finished
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube, node_gate, nodes
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="str", required=True),
            state=dict(type="str", choices=["cordoned", "uncordoned", "marked", "read", "held", "finished"],
                       default="read"),
            target=dict(type="str", required=True),
            cycle=dict(type="str"),
            phase=dict(type="str"),
            reason=dict(type="str"),
            failures=dict(type="dict", default={}),
            in_rescue=dict(type="list", elements="str", default=[]),
            objects=dict(type="bool", default=False),
            configz=dict(type="bool", default=False),
            **kube.KUBE_ARGSPEC,
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        api = kube.connect(module)
        current = {name: api.get_node(name) for name in p["nodes"]}
        wanted = {}
        extra = {}
        if p["state"] in ("cordoned", "uncordoned", "marked"):
            wanted = {name: (p["state"], p["phase"], p["reason"]) for name in p["nodes"]}
        elif p["state"] == "held":
            phases = {n: nodes.progress(node, p["target"])["phase"] for n, node in current.items()}
            outcome = nodes.wave_outcome(p["nodes"], {k: str(v or "") for k, v in p["failures"].items()},
                                         p["in_rescue"], phases)
            wanted = {n: ("marked", phase, reason) for n, (phase, reason) in outcome["marks"].items()}
            extra = {"message": outcome["message"], "failed_nodes": outcome["failed"], "held": outcome["held"]}
        elif p["state"] == "finished":
            verdict = nodes.boundary([nodes.progress(node, p["target"]) for node in current.values()])
            wanted = {n: ("marked", "failed", reason) for n, reason in verdict["lost"].items()}
            extra = {"message": verdict["message"], "passed": verdict["ok"]}
        changed = []
        for name, (state, phase, reason) in wanted.items():
            patch = nodes.plan_patch(current[name], state, p["target"], phase, reason, kube.now_rfc3339(),
                                     cycle=p["cycle"] or "")
            if patch is not None:
                changed.append(name)
                if not module.check_mode:
                    current[name] = api.patch_node(name, patch)
        out = [nodes.progress(current[name], p["target"]) for name in p["nodes"]]
        if p["state"] == "read" and p["cycle"]:
            extra = {"cycle": p["cycle"],
                     "disruptions": {name: nodes.cycle_drains(current[name], p["cycle"]) for name in p["nodes"]}}
        if p["state"] == "finished" and not extra["passed"]:
            raise GpufleetError("earlier nodes are not finished for %s: %s. Later waves (and control-plane hosts) "
                                "were not started. Fix the nodes and rerun: finished nodes are skipped." % (
                                    p["target"], extra["message"]), nodes=out, changed_nodes=changed,
                                changed=bool(changed))
        if p["objects"]:
            extra["resources"] = [current[name] for name in p["nodes"]]
        if p["configz"]:  # parsed here, so an answer that is not the kubelet's fails naming the node
            extra["configz"] = {name: {"kubeletconfig": node_gate.kubelet_config(api.node_configz(name), name)}
                                for name in p["nodes"]}
        return dict(extra, changed=bool(changed), changed_nodes=changed, nodes=out)

    run_module(module, body)


if __name__ == "__main__":
    main()
