#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: canary_workload
short_description: Run work on the canary nodes and judge it against the pool baseline before later waves
version_added: 0.3.0
description:
  - Runs after the canary nodes of a pool pass their gates and before they go back to service; the nodes are still
    cordoned, so the workloads tolerate C(node.kubernetes.io/unschedulable) and are pinned to the canary nodes by
    name (one pod per node).
  - A training run starts a JobSet gang (C(jobset.x-k8s.io/v1alpha2)), one rank per canary node with all its
    GPUs, whose image runs the multi-node NCCL all-reduce across them. Rank 0 (job index 0) writes
    all_reduce_perf's output from its C(# Using devices) line on (or its C(-J) JSON) to its termination message.
    Judged - every rank on its own canary node and exited 0, the result showing nodes x GPUs ranks on as many hosts
    as nodes, no wrong elements, no NCCL error, and the bus bandwidth at each size of the baseline's
    C(canary.training_busbw_gbps) within C(canary.training_tolerance_pct) (default 10). The gang must be the size
    the figures were measured with (C(canary.training_nodes), default 2); it always spans every canary node of its
    run, even on a rerun where some of them are finished.
  - An inference run serves a Deployment (one replica per canary node, a readiness probe) and its Service, then
    runs a latency probe Job that sends requests through the Service and writes one JSON object with the keys
    C(requests), C(errors), C(p50_ms) and C(p99_ms) to its termination message. Judged - every replica ready on its
    own node, the probe exited 0 having sent at least the requests asked, p99 at most the baseline's
    C(canary.inference_p99_ms), error rate at most C(canary.inference_max_error_pct) (default 0).
  - Objects from an earlier try are deleted first; each run's objects are deleted when it ends, passed or not (the
    checks carry what was seen). A workload that does not finish within the timeout fails with what its pods were
    waiting for.
  - The namespace is created when missing, without a Pod Security label (the cluster default applies); create it
    beforehand with the labels the images need.
options:
  state:
    description:
      - C(present) runs the workloads and judges them. C(prepared) - run before the canaries are drained - deletes
        the objects they create (left by a try that was cut short) and waits until they and their pods are gone,
        so none of them is drained or comes back, then creates each as a server-side dry run (the JobSet API
        served, the objects valid, admission and RBAC allowing them), so a workload that cannot run is refused
        before anything on the canaries changes; it creates the namespace when missing.
    type: str
    choices: [present, prepared]
    default: present
  runs:
    description:
      - The workloads to run, each C(workload) (C(training) or C(inference)), C(pool) and C(nodes) (the canary
        nodes of that pool); run one after another. M(gpufleet.upgrade.cell) gives them per canary wave
        (C(gpu_waves[].canary_runs)).
    type: list
    elements: dict
    required: true
    suboptions:
      workload:
        description: Which workload.
        type: str
        choices: [training, inference]
        required: true
      pool:
        description: The pool of the nodes (names the objects; its baseline judges the result).
        type: str
        required: true
      nodes:
        description: The canary nodes of that pool (Node names).
        type: list
        elements: str
        required: true
  pending:
    description: Only these nodes (the wave's nodes still to do on a rerun); a run whose nodes are all outside
      them is left out. Omitted - every node of every run.
    type: list
    elements: str
  pools:
    description: Per pool, its C(baseline) (validated; the C(canary) section holds the figures, C(gpu.count) and
      C(nccl.args) are the training gang's defaults), as M(gpufleet.upgrade.cell) returns C(pools).
    type: dict
    required: true
  workloads:
    description: The cell's C(gpufleet_canary_workloads) (namespace, timeout, training, inference), as the cell
      module returns it.
    type: dict
    required: true
  run_id:
    description: The run's id (a label on every object).
    type: str
    default: ""
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
  - gpufleet.upgrade.common.KUBE
  - kubernetes.core.k8s_auth_options
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Training canary on the canary nodes of pool h100-train
  gpufleet.upgrade.canary_workload:
    runs:
      - {workload: training, pool: h100-train, nodes: [gpu-a1, gpu-b1]}
    pools: "{{ cell.pools }}"
    workloads:
      namespace: gpufleet-canary
      timeout: 900
      training:
        image: registry.example/nccl-tests:2.17
        command: [/opt/canary/run-allreduce.sh]
"""

RETURN = r"""
passed:
  description: Every check of severity fail passed.
  returned: success or gate failure
  type: bool
checks:
  description: Each check (name, subject, measured, expected, passed, severity, detail), as the gates return them.
  returned: success or gate failure
  type: list
  elements: dict
failures:
  description: One line per failed check.
  returned: success or gate failure
  type: list
  elements: str
notices:
  description: One line per check to look at by hand (severity warn), each also shown as a warning of the task.
  returned: success or gate failure
  type: list
  elements: str
canary:
  description:
    - One record per run - workload, pool, nodes, namespace, name, passed, seconds, busbw (size -> GB/s) or
      latency (requests, errors, p50_ms, p99_ms), note (why it did not finish).
  returned: state is present
  type: list
  elements: dict
removed:
  description: The objects deleted (kind namespace/name).
  returned: state is prepared
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import canary, kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "prepared"], default="present"),
            runs=dict(type="list", elements="dict", required=True, options=dict(
                workload=dict(type="str", choices=["training", "inference"], required=True),
                pool=dict(type="str", required=True),
                nodes=dict(type="list", elements="str", required=True))),
            pending=dict(type="list", elements="str"),
            pools=dict(type="dict", required=True),
            workloads=dict(type="dict", required=True),
            run_id=dict(type="str", default=""),
            **kube.KUBE_ARGSPEC,
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        prepared = p["state"] == "prepared"
        plan = canary.plan_runs(p["runs"], p["pools"], p["workloads"], None if prepared else p["pending"])
        if prepared:
            return canary.prepare(kube.connect(module), plan, p["run_id"], module.check_mode)
        if not plan["runs"]:
            return {"changed": False, "passed": True, "canary": [],
                    "msg": "no canary workload left to run: every node of these runs is finished"}
        result = canary.run_all(kube.connect(module), plan, p["run_id"], module.check_mode)
        if result["passed"] is False:
            raise GateFailed(result.pop("msg"), **result)
        return result

    run_module(module, body)


if __name__ == "__main__":
    main()
