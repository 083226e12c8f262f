#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: dcgm_diag
short_description: Run or read C(dcgmi diag -j) and judge it against a pool baseline
version_added: 0.1.0
description:
  - Parses C(dcgmi diag -r N -j) of DCGM 4.x (C(DCGM Diagnostic)) and 3.x (C(DCGM GPU Diagnostic)), and the
    runtime-error form. Reports per GPU and per test status.
  - DCGM reports a warning as C(Fail) in JSON; a result is a warning when every warning on it has an
    C(error_severity) at or below O(policy.warning_max_severity), else a failure.
  - The gate fails on any failure, on a skipped test not in O(policy.allowed_skip), on a missing required test, on
    a runtime error, and on warnings when O(policy.warnings_fail).
options:
  level:
    description: Diagnostic level for C(-r) (1 short, 2 medium, 3 long, 4 xlong) when the tool is run.
    type: int
    default: 1
  policy:
    description: The C(dcgm) section of the pool baseline.
    type: dict
    default: {}
    suboptions:
      required_tests:
        description: Tests that must be present and pass.
        type: list
        elements: str
        default: []
      allowed_skip:
        description: Tests allowed to skip.
        type: list
        elements: str
        default: []
      warnings_fail:
        description: Treat warnings as failures.
        type: bool
        default: false
      warning_max_severity:
        description: Highest C(error_severity) still counted as a warning (1 is DCGM_ERROR_MONITOR).
        type: int
        default: 1
      expected_gpus:
        description: GPUs the report must cover.
        type: int
      level:
        description: Ignored here (the baseline's level; use O(level)).
        type: int
  node:
    description: Node name for messages.
    type: str
    default: ""
  binary:
    description: dcgmi binary.
    type: str
    default: dcgmi
extends_documentation_fragment:
  - gpufleet.upgrade.common.TOOL
author:
  - gpufleet maintainers
"""

EXAMPLES = r"""
- name: Level-1 diagnostics on a freshly upgraded GPU node
  gpufleet.upgrade.dcgm_diag:
    level: 1
    node: "{{ inventory_hostname }}"
    policy: "{{ gpufleet_baseline.dcgm | combine({'expected_gpus': gpufleet_baseline.gpu.count}) }}"
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
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import raise_if_failed
from ansible_collections.gpufleet.upgrade.plugins.module_utils.dcgm import judge_diag, parse_diag
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import (
    check_mode_skip, run_module, tool_text)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            level=dict(type="int", default=1, choices=[1, 2, 3, 4]),
            policy=dict(type="dict", default={}, options=dict(
                required_tests=dict(type="list", elements="str", default=[]),
                allowed_skip=dict(type="list", elements="str", default=[]),
                warnings_fail=dict(type="bool", default=False),
                warning_max_severity=dict(type="int", default=1),
                expected_gpus=dict(type="int"),
                level=dict(type="int"))),
            node=dict(type="str", default=""),
            binary=dict(type="str", default="dcgmi"),
            args=dict(type="list", elements="str"),
            output=dict(type="str"),
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        # dcgmi exits non-zero when a test fails but still prints the JSON report.
        text = tool_text(module, "dcgmi", ["diag", "-r", str(p["level"]), "-j"], allow_output_on_error=True)
        if text is None:
            return check_mode_skip("dcgmi diag")
        diag = parse_diag(text, p["policy"]["warning_max_severity"])
        summary = judge_diag(diag, p["policy"], p["node"])
        raise_if_failed("dcgm_diag", summary, diag=diag)
        return {"passed": True, "checks": summary["checks"], "warnings_found": summary["warnings"], "diag": diag}

    run_module(module, body)


if __name__ == "__main__":
    main()
