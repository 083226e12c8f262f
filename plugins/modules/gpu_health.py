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
  - Fails when the GPU count differs from the baseline's C(gpu.count) (a node Ready with 7 of 8 GPUs is worse than
    a failed node), when a GPU reports another driver than C(gpu.driver_version), on any uncorrectable ECC error, a
    pending or failed row remap, persistence mode off, or a fatal XID in the kernel log. An XID is fatal when
    NVIDIA's catalogue (R570/R580, every XID with its documented action) asks for more than restarting the
    application, plus 63 and 94 (a row remap waits for a GPU reset) and C(gpu.fatal_xids_extra), less
    C(opt_out.xids); the NVLink XIDs 144-150 are judged by the severity word the driver prints (C(Fatal) fails,
    C(Nonfatal) does not); an XID the catalogue does not know fails unless C(gpu.benign_xids) names it with a
    reason.
  - A GPU the driver lost without an XID line (C(GPU has fallen off the bus), C(RmInitAdapter failed), a failed
    probe) fails too (check C(gpu_lost)).
  - Captured C(nvidia-smi -q) text given where the CSV is expected is refused by name, with the command to run.
  - Fails closed - a value nvidia-smi does not give (C([N/A])), a GPU without a remapped-rows line, or a kernel log
    that is empty or says C(-- No entries --) is unmeasured, and fails unless the baseline opts that check out
    (C(opt_out.ecc), C(opt_out.remapped_rows), C(opt_out.kernel_log), C(opt_out.persistence_mode)).
options:
  gpu_output:
    description: Captured C(--query-gpu) CSV output of the fields index, uuid, pci.bus_id, name, driver_version,
      persistence_mode, ecc.errors.uncorrected.volatile.total, in that order.
    type: str
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
  - gpufleet.upgrade.common.BASELINE
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: GPU health after the driver upgrade
  gpufleet.upgrade.gpu_health:
    baseline: "{{ gpufleet_cell.pools[gpufleet_pool].baseline }}"
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
  description: Every XID event found in the kernel log, each with its C(verdict) and C(why) (the catalogue's
    action, the driver's severity word, or the baseline's reason).
  returned: success
  type: list
  elements: dict
checks:
  description: Every check with subject, measured value and baseline.
  returned: always
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
from ansible_collections.gpufleet.upgrade.plugins.module_utils.gpu_health import (
    GPU_FIELDS, REMAP_FIELDS, judge_health, parse_query_gpu, parse_remapped_rows, scan_kernel_log)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import (
    check_mode_skip, run_module, run_tool)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            baseline=dict(type="dict", required=True),
            gpu_output=dict(type="str"),
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
        baseline = validate(p["baseline"], "baseline")
        captured = [p["gpu_output"], p["remap_output"], p["kernel_log"]]
        if module.check_mode and any(c is None for c in captured):
            return check_mode_skip("nvidia-smi / kernel log")
        gpu_text = p["gpu_output"]
        if gpu_text is None:
            gpu_text = run_tool(module, p["binary"], ["--query-gpu=" + ",".join(GPU_FIELDS),
                                                      "--format=csv,noheader,nounits"])["stdout"]
        remap_text = p["remap_output"]
        if remap_text is None:
            remap_text = run_tool(module, p["binary"], ["--query-remapped-rows=" + ",".join(REMAP_FIELDS),
                                                        "--format=csv,noheader,nounits"])["stdout"]
        log_text = p["kernel_log"]
        if log_text is None:
            cmd = p["kernel_log_command"]
            log_text = run_tool(module, cmd[0], cmd[1:])["stdout"]
        gpus = parse_query_gpu(gpu_text)
        summary = judge_health(gpus, parse_remapped_rows(remap_text), scan_kernel_log(log_text), baseline,
                               p["node"])
        for line in summary["opt_outs"]:
            module.warn("opt-out: " + line)
        raise_if_failed("gpu_health", summary, gpu_count=summary["gpu_count"], xids=summary["xids"])
        return {"passed": True, "gpu_count": summary["gpu_count"], "gpus": gpus, "xids": summary["xids"],
                "checks": summary["checks"], "opt_outs": summary["opt_outs"]}

    run_module(module, body)


if __name__ == "__main__":
    main()
