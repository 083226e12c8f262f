#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_allreduce
short_description: Run or read nccl-tests C(all_reduce_perf) and judge bus bandwidth against a baseline
version_added: 0.1.0
description:
  - Parses C(all_reduce_perf) stdout (current layout with the root column, the pre-2022 layout, and the
    per-iteration layout) and its C(-J) JSON file.
  - Runs the test O(runs) times (or takes O(outputs)), and judges the median bus bandwidth at each size of the
    baseline against the baseline with a tolerance. Any wrong element, out-of-bounds value, or NCCL/CUDA error
    fails the gate.
  - Unmeasured fails - C(#wrong) of N/A (run with C(-c 0)), a run without the out-of-bounds count, a size with no
    finite bandwidth (C(inf), C(nan)), fewer runs than C(nccl.min_runs).
  - With the baseline's C(opt_out.nccl), nothing is run and the opt-out is returned with its reason.
options:
  runs:
    description: How many times to run the test when it is run here (default the baseline's C(nccl.min_runs)).
    type: int
  outputs:
    description: Captured outputs of several runs (stdout or -J JSON). Overrides running the tool.
    type: list
    elements: str
  node:
    description: Node (or node set) name for messages.
    type: str
    default: ""
  binary:
    description: all_reduce_perf binary.
    type: str
    default: all_reduce_perf
  gate:
    description:
      - Fail the task when a check fails (the node validation gate). V(false) returns the same checks and
        RV(median_busbw) with RV(passed) false instead, for a reading judged elsewhere (the fleet's NCCL halt
        reading, playbooks/fleet_readings.yml). A run that cannot be parsed still fails.
    type: bool
    default: true
extends_documentation_fragment:
  - gpufleet.upgrade.common.BASELINE
  - gpufleet.upgrade.common.TOOL
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Three single-node runs judged against the pool baseline
  gpufleet.upgrade.nccl_allreduce:
    baseline: "{{ gpufleet_cell.pools[gpufleet_pool].baseline }}"
    node: "{{ inventory_hostname }}"

- name: The same runs as a reading, judged later (the task does not fail on a slow fabric)
  gpufleet.upgrade.nccl_allreduce:
    baseline: "{{ gpufleet_cell.pools[gpufleet_pool].baseline }}"
    node: "{{ inventory_hostname }}"
    gate: false
  register: nccl_reading
"""

RETURN = r"""
passed:
  description: Whether every check passed (with O(gate), a task that returns always passed).
  returned: success
  type: bool
median_busbw:
  description: Median bus bandwidth (GB/s) per baseline size (bytes as string keys).
  returned: success
  type: dict
checks:
  description: Every check with subject, measured value and baseline.
  returned: always
  type: list
  elements: dict
runs:
  description: Parsed runs (format, rows, out_of_bounds, avg_busbw, errors).
  returned: success
  type: list
  elements: dict
opt_outs:
  description: The checks the baseline opts out of, with its reasons (also printed as warnings).
  returned: success
  type: list
  elements: str"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import validate
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import raise_if_failed
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import (
    check_mode_skip, run_module, run_tool)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.nccl import judge_runs, parse_output, with_exit_status


def main():
    module = AnsibleModule(
        argument_spec=dict(
            baseline=dict(type="dict", required=True),
            runs=dict(type="int"),
            outputs=dict(type="list", elements="str"),
            node=dict(type="str", default=""),
            binary=dict(type="str", default="all_reduce_perf"),
            gate=dict(type="bool", default=True),
            args=dict(type="list", elements="str"),
            output=dict(type="str"),
        ),
        mutually_exclusive=[("output", "outputs")],
        supports_check_mode=True,
    )

    def body():
        p = module.params
        baseline = validate(p["baseline"], "baseline")
        if baseline["opt_out"].get("nccl"):
            summary = judge_runs([], baseline, p["node"])
            module.warn("opt-out: " + summary["opt_outs"][0])
            return {"passed": True, "median_busbw": {}, "checks": summary["checks"], "opt_outs": summary["opt_outs"],
                    "runs": []}
        texts = p["outputs"] or ([p["output"]] if p["output"] is not None else [])
        if texts:
            runs = [parse_output(t) for t in texts]
        else:
            if module.check_mode:
                return check_mode_skip("all_reduce_perf")
            # all_reduce_perf exits non-zero on wrong elements but still prints its table; a non-zero exit its
            # output does not explain is an error of the run (with_exit_status).
            done = [run_tool(module, p["binary"], p["args"] or baseline["nccl"]["args"], allow_output_on_error=True)
                    for _run in range(max(p["runs"] or baseline["nccl"]["min_runs"], 1))]
            runs = [with_exit_status(parse_output(d["stdout"]), d["rc"]) for d in done]
        summary = judge_runs(runs, baseline, p["node"])
        if p["gate"]:
            raise_if_failed("nccl_allreduce", summary, median_busbw=summary["median_busbw"])
        return {"passed": summary["passed"], "median_busbw": summary["median_busbw"], "checks": summary["checks"],
                "opt_outs": summary["opt_outs"], "runs": runs}

    run_module(module, body)


if __name__ == "__main__":
    main()
