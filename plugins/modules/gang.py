#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: gang
short_description: Checkpoint, stop as a unit, and resume the training gangs on a set of nodes
version_added: 0.1.0
description:
  - Finds the gangs (JobSets, and the Kueue Workloads that admit them) with a pod on O(nodes).
  - C(checkpointed) asks each for a checkpoint-and-yield (annotation C(gpufleet.io/checkpoint-requested)) and
    waits for the job's confirmation (C(gpufleet.io/checkpoint-completed) with the same token); a gang that does
    not confirm in O(checkpoint_timeout) fails the task and is left running.
  - C(stopped) checkpoints first (unless O(skip_checkpoint)), then stops every gang as a unit - Workload
    C(spec.active=false), or C(spec.suspend=true) on a JobSet without a Workload - marks it
    C(gpufleet.io/stopped-by=RUN_ID) and C(gpufleet.io/stopped-nodes=NODES) and waits until none of its pods is
    left on the nodes. No rank dies alone.
  - C(resumed) reactivates every gang a gpufleet run stopped (whatever its run id) whose nodes are back in
    service - Ready and no longer held cordoned by gpufleet; a gang whose nodes are not stays stopped and is
    returned in C(held) with why.
  - C(present) only reports the gangs on the nodes.
options:
  nodes:
    description: Node names (not needed for O(state=resumed)).
    type: list
    elements: str
    default: []
  state:
    description: What to do.
    type: str
    choices: [present, checkpointed, stopped, resumed]
    default: present
  run_id:
    description: Identifies this upgrade run; O(state=stopped) marks the gangs it stops with it (the record of who
      stopped them).
    type: str
  checkpoint_timeout:
    description: Seconds to wait for every gang to confirm its checkpoint.
    type: int
    default: 600
  stop_timeout:
    description: Seconds to wait for a stopped gang's pods to leave the nodes.
    type: int
    default: 300
  poll_interval:
    description: Seconds between reads while waiting.
    type: float
    default: 2
  skip_checkpoint:
    description: Break glass. Stop without a confirmed checkpoint (loses the work since the last one).
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.upgrade.common.KUBE
  - kubernetes.core.k8s_auth_options
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Checkpoint and stop the gangs on this wave
  gpufleet.upgrade.gang:
    nodes: "{{ ansible_play_batch }}"
    state: stopped
    run_id: upgrade-v1.36.3
    checkpoint_timeout: 900
  delegate_to: localhost
  run_once: true

- name: Give the gangs back to Kueue once their nodes are back in service
  gpufleet.upgrade.gang:
    state: resumed
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
gangs:
  description: Gangs found on the nodes (namespace, jobset, nodes, workload, last_checkpoint).
  returned: always
  type: list
  elements: dict
checkpointed:
  description: Gangs that confirmed a checkpoint, with the checkpoint time they reported.
  returned: when state is checkpointed or stopped
  type: list
  elements: dict
stopped:
  description: Gangs this call stopped.
  returned: when state is stopped
  type: list
  elements: str
resumed:
  description: Workloads and JobSets reactivated.
  returned: when state is resumed
  type: list
  elements: str
held:
  description: Stopped gangs left stopped because their nodes are not back in service (gang, stopped_by, nodes
    with why, message).
  returned: when state is resumed
  type: list
  elements: dict
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.gangs import Gangs
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="str", default=[]),
            state=dict(type="str", choices=["present", "checkpointed", "stopped", "resumed"], default="present"),
            run_id=dict(type="str"),
            checkpoint_timeout=dict(type="int", default=600),
            stop_timeout=dict(type="int", default=300),
            poll_interval=dict(type="float", default=2),
            skip_checkpoint=dict(type="bool", default=False),
            **kube.KUBE_ARGSPEC,
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        if p["state"] == "stopped" and not p["run_id"]:
            raise InputError("run_id is required for state=stopped: it records which run stopped the gangs")
        ops = Gangs(kube.connect(module))
        if p["state"] == "resumed":
            result = ops.resume(module.check_mode)
            for gang in result["held"]:
                module.warn(gang["message"])
            return result
        gangs = ops.discover(p["nodes"])
        result = {"gangs": gangs, "changed": False}
        if p["state"] == "present" or not gangs:
            return result
        if not (p["state"] == "stopped" and p["skip_checkpoint"]):
            token = "%s-%d" % (p["run_id"] or "gpufleet", int(time.time()))
            result.update(ops.checkpoint(gangs, token, p["checkpoint_timeout"], p["poll_interval"],
                                         module.check_mode))
        elif p["skip_checkpoint"]:
            module.warn("BREAK GLASS: stopping %d gang(s) without a confirmed checkpoint" % len(gangs))
        if p["state"] == "stopped":
            stop = ops.stop(gangs, p["run_id"], p["stop_timeout"], p["poll_interval"], module.check_mode)
            result["stopped"] = stop["stopped"]
            result["changed"] = result["changed"] or stop["changed"]
        return result

    run_module(module, body)


if __name__ == "__main__":
    main()
