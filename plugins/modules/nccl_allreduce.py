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
options:
  baseline:
    description: The C(nccl) section of the pool baseline.
    type: dict
    required: true
    suboptions:
      busbw_gbps:
        description: Expected bus bandwidth in GB/s keyed by message size (bytes, or with K/M/G).
        type: dict
        required: true
      tolerance_pct:
        description: Allowed shortfall below the baseline, in percent.
        type: float
        default: 10.0
      min_runs:
        description: Runs needed for a median.
        type: int
        default: 3
      args:
        description: Arguments for all_reduce_perf (used when O(args) is not given).
        type: list
        elements: str
  runs:
    description: How many times to run the test when it is run here.
    type: int
    default: 3
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
extends_documentation_fragment:
  - gpufleet.upgrade.common.TOOL
author:
  - gpufleet maintainers
"""

EXAMPLES = r"""
- name: Three single-node runs judged against the pool baseline
  gpufleet.upgrade.nccl_allreduce:
    baseline: "{{ gpufleet_baseline.nccl }}"
    runs: 3
    node: "{{ inventory_hostname }}"
"""

RETURN = r"""
passed:
  description: Whether the gate passed.
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
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import raise_if_failed
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import (
    check_mode_skip, run_module, run_tool)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.nccl import judge_runs, parse_output

DEFAULT_ARGS = ["-b", "8", "-e", "8G", "-f", "2", "-g", "8"]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            baseline=dict(type="dict", required=True, options=dict(
                busbw_gbps=dict(type="dict", required=True),
                tolerance_pct=dict(type="float", default=10.0),
                min_runs=dict(type="int", default=3),
                args=dict(type="list", elements="str"))),
            runs=dict(type="int", default=3),
            outputs=dict(type="list", elements="str"),
            node=dict(type="str", default=""),
            binary=dict(type="str", default="all_reduce_perf"),
            args=dict(type="list", elements="str"),
            output=dict(type="str"),
        ),
        mutually_exclusive=[("output", "outputs")],
        supports_check_mode=True,
    )

    def body():
        p = module.params
        texts = p["outputs"] or ([p["output"]] if p["output"] is not None else [])
        if not texts:
            if module.check_mode:
                return check_mode_skip("all_reduce_perf")
            args = p["args"] or p["baseline"].get("args") or DEFAULT_ARGS
            # all_reduce_perf exits non-zero on wrong elements but still prints its table.
            texts = [run_tool(module, p["binary"], args, allow_output_on_error=True)["stdout"]
                     for _ in range(max(p["runs"], 1))]
        runs = [parse_output(t) for t in texts]
        summary = judge_runs(runs, p["baseline"], p["node"])
        raise_if_failed("nccl_allreduce", summary, median_busbw=summary["median_busbw"])
        return {"passed": True, "median_busbw": summary["median_busbw"], "checks": summary["checks"], "runs": runs}

    run_module(module, body)


if __name__ == "__main__":
    main()
