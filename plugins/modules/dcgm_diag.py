#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: dcgm_diag
short_description: Run or read C(dcgmi diag -j) and judge it against a pool baseline
version_added: 0.1.0
description:
  - Parses C(dcgmi diag -r N -j) of DCGM 4.x (C(DCGM Diagnostic), with C(metadata) and C(entity_groups) beside
    it at the top of the report) and 3.x (C(DCGM GPU Diagnostic), with C(version), C(Driver Version Detected) and
    C(GPU Device IDs) at the top), and the runtime-error form; a layout it does not know fails, naming the keys
    found. Reports per GPU and per test status.
  - DCGM reports a warning as C(Fail) in JSON; a result is a warning when every warning on it has an
    C(error_severity) at or below the baseline's C(dcgm.warning_max_severity), else a failure.
  - The gate fails on any failure, on a skipped test not in the baseline's C(dcgm.allowed_skip), on a missing
    required test (C(dcgm.required_tests)), on a runtime error, on warnings when C(dcgm.warnings_fail), on a report
    with no test results, when the report does not list and cover C(gpu.count) GPUs, when its driver is not the
    baseline's C(gpu.driver_version) or not named, and on a failing C(test_summary).
options:
  level:
    description: Diagnostic level for C(-r) (1 short, 2 medium, 3 long, 4 xlong) when the tool is run; by default
      the baseline's C(dcgm.level), or C(dcgm.canary_level) with O(canary).
    type: int
    choices: [1, 2, 3, 4]
  canary:
    description: This node is a canary - run the baseline's deeper C(dcgm.canary_level).
    type: bool
    default: false
  node:
    description: Node name for messages.
    type: str
    default: ""
  binary:
    description: dcgmi binary.
    type: str
    default: dcgmi
extends_documentation_fragment:
  - gpufleet.upgrade.common.BASELINE
  - gpufleet.upgrade.common.TOOL
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Level-1 diagnostics on a freshly upgraded GPU node
  gpufleet.upgrade.dcgm_diag:
    node: "{{ inventory_hostname }}"
    baseline: "{{ gpufleet_cell.pools[gpufleet_pool].baseline }}"
"""

RETURN = r"""
passed:
  description: Whether the gate passed.
  returned: success
  type: bool
checks:
  description: Every check with subject, measured value and baseline.
  returned: always
  type: list
  elements: dict
warnings_found:
  description: Warnings that did not fail the gate.
  returned: success
  type: list
  elements: str
diag:
  description: The parsed report (format, version, driver_version, runtime_error, gpus, results).
  returned: success
  type: dict
opt_outs:
  description: The checks the baseline opts out of, with its reasons (also printed as warnings).
  returned: success
  type: list
  elements: str"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import validate
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import raise_if_failed
from ansible_collections.gpufleet.upgrade.plugins.module_utils.dcgm import judge_diag, parse_diag
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import (
    check_mode_skip, run_module, tool_text)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            level=dict(type="int", choices=[1, 2, 3, 4]),
            canary=dict(type="bool", default=False),
            baseline=dict(type="dict", required=True),
            node=dict(type="str", default=""),
            binary=dict(type="str", default="dcgmi"),
            args=dict(type="list", elements="str"),
            output=dict(type="str"),
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        baseline = validate(p["baseline"], "baseline")
        dcgm = baseline["dcgm"]
        level = p["level"] or (dcgm["canary_level"] if p["canary"] else dcgm["level"])
        # dcgmi exits non-zero when a test fails but still prints the JSON report.
        text = tool_text(module, "dcgmi", ["diag", "-r", str(level), "-j"], allow_output_on_error=True)
        if text is None:
            return check_mode_skip("dcgmi diag")
        diag = parse_diag(text, dcgm["warning_max_severity"])
        summary = judge_diag(diag, baseline, p["node"])
        raise_if_failed("dcgm_diag", summary, diag=diag)
        return {"passed": True, "level": level, "checks": summary["checks"], "warnings_found": summary["warnings"],
                "opt_outs": summary["opt_outs"], "diag": diag}

    run_module(module, body)


if __name__ == "__main__":
    main()
