#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_health
short_description: Judge GPU count, driver, ECC, row remaps, persistence and XIDs (nvidia-smi, kernel log)
version_added: 0.1.0
description:
  - Reads C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits), C(nvidia-smi --query-remapped-rows=...) and
    the kernel log (XID lines), running them unless captured output is given.
  - Fails when the GPU count differs from the baseline (a node Ready with 7 of 8 GPUs is worse than a failed node),
    the driver differs from the target, any uncorrectable ECC error, a pending or failed row remap, persistence mode
    off, or an XID from the fatal list in the kernel log.
options:
  policy:
    description: The C(gpu) section of the pool baseline.
    type: dict
    required: true
    suboptions:
      count:
        description: GPUs expected on the node.
        type: int
        required: true
      driver_version:
        description: Driver version every GPU must report.
        type: str
      persistence_mode:
        description: Require persistence mode Enabled.
        type: bool
        default: true
      fatal_xids:
        description: XIDs that fail the gate.
        type: list
        elements: int
        default: [48, 63, 64, 74, 79, 94, 95]
      product:
        description: Informational.
        type: str
      fabric_manager:
        description: Informational here (checked by the gpu_stack role).
        type: bool
  gpu_output:
    description: Captured C(--query-gpu) CSV output (fields as in O(gpu_fields)).
    type: str
  gpu_fields:
    description: Fields of the C(--query-gpu) query, in order.
    type: list
    elements: str
    default: [index, uuid, pci.bus_id, name, driver_version, persistence_mode, ecc.errors.uncorrected.volatile.total]
  remap_output:
    description: Captured C(--query-remapped-rows) CSV output.
    type: str
  kernel_log:
    description: Captured kernel log text (dmesg or C(journalctl -k)).
    type: str
  kernel_log_command:
    description: Command that prints the kernel log when O(kernel_log) is not given.
    type: list
    elements: str
    default: [journalctl, -k, -b, --no-pager, -o, short-precise]
  binary:
    description: nvidia-smi binary.
    type: str
    default: nvidia-smi
  node:
    description: Node name for messages.
    type: str
    default: ""
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers
"""

EXAMPLES = r"""
- name: GPU health after the driver upgrade
  gpufleet.upgrade.gpu_health:
    policy: "{{ gpufleet_baseline.gpu }}"
    node: "{{ inventory_hostname }}"
"""

RETURN = r"""
passed:
  description: Whether the gate passed.
  returned: success
  type: bool
gpu_count:
  description: GPUs nvidia-smi listed.
  returned: success
  type: int
gpus:
  description: Parsed C(--query-gpu) rows.
  returned: success
  type: list
  elements: dict
xids:
  description: Every XID event found in the kernel log.
  returned: success
  type: list
  elements: dict
checks:
  description: Every check with subject, measured value and baseline.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import raise_if_failed
from ansible_collections.gpufleet.upgrade.plugins.module_utils.gpu_health import (
    FATAL_XIDS, GPU_FIELDS, REMAP_FIELDS, judge_health, parse_query_gpu, parse_remapped_rows, scan_xids)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import (
    check_mode_skip, run_module, run_tool)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            policy=dict(type="dict", required=True, options=dict(
                count=dict(type="int", required=True), driver_version=dict(type="str"),
                persistence_mode=dict(type="bool", default=True),
                fatal_xids=dict(type="list", elements="int", default=list(FATAL_XIDS)),
                product=dict(type="str"), fabric_manager=dict(type="bool"))),
            gpu_output=dict(type="str"),
            gpu_fields=dict(type="list", elements="str", default=list(GPU_FIELDS)),
            remap_output=dict(type="str"),
            kernel_log=dict(type="str"),
            kernel_log_command=dict(type="list", elements="str",
                                    default=["journalctl", "-k", "-b", "--no-pager", "-o", "short-precise"]),
            binary=dict(type="str", default="nvidia-smi"),
            node=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        captured = [p["gpu_output"], p["remap_output"], p["kernel_log"]]
        if module.check_mode and any(c is None for c in captured):
            return check_mode_skip("nvidia-smi / kernel log")
        gpu_text = p["gpu_output"]
        if gpu_text is None:
            gpu_text = run_tool(module, p["binary"], ["--query-gpu=" + ",".join(p["gpu_fields"]),
                                                      "--format=csv,noheader,nounits"])["stdout"]
        remap_text = p["remap_output"]
        if remap_text is None:
            remap_text = run_tool(module, p["binary"], ["--query-remapped-rows=" + ",".join(REMAP_FIELDS),
                                                        "--format=csv,noheader,nounits"])["stdout"]
        log_text = p["kernel_log"]
        if log_text is None:
            cmd = p["kernel_log_command"]
            log_text = run_tool(module, cmd[0], cmd[1:])["stdout"]
        gpus = parse_query_gpu(gpu_text, p["gpu_fields"])
        summary = judge_health(gpus, parse_remapped_rows(remap_text), scan_xids(log_text), p["policy"], p["node"])
        raise_if_failed("gpu_health", summary, gpu_count=summary["gpu_count"], xids=summary["xids"])
        return {"passed": True, "gpu_count": summary["gpu_count"], "gpus": gpus, "xids": summary["xids"],
                "checks": summary["checks"]}

    run_module(module, body)


if __name__ == "__main__":
    main()
