#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: baseline_info
short_description: Load and validate a gpufleet pool baseline
version_added: 0.1.0
description:
  - Reads a baseline YAML file (one per node pool or GPU type) holding every gate threshold - GPU count, driver,
    DCGM policy, NCCL bus bandwidth, node allocatable and kubelet config, etcd quota ratio - validates every field
    and fills defaults.
  - A missing or mistyped field, or an unknown field (a typo must not disable a gate), fails with the file, the field
    and the expected type, before anything on a cluster is changed.
options:
  path:
    description: Baseline file on the host running the module (usually the controller, with C(delegate_to) localhost).
    type: path
  baseline:
    description: The baseline as data instead of a file.
    type: dict
  name:
    description: Label for O(baseline) in messages.
    type: str
    default: baseline
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Load the H100 training pool baseline
  gpufleet.upgrade.baseline_info:
    path: "{{ inventory_dir }}/baselines/h100-train.yml"
  delegate_to: localhost
  run_once: true
  register: gpufleet_baseline_result
"""

RETURN = r"""
baseline:
  description: The validated baseline with defaults filled in.
  returned: success
  type: dict
opt_outs:
  description: The checks the baseline opts out of, each with its reason (C(check), C(reason)).
  returned: success
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import load_file, opt_outs, validate
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type="path"), baseline=dict(type="dict"),
                           name=dict(type="str", default="baseline")),
        required_one_of=[("path", "baseline")],
        mutually_exclusive=[("path", "baseline")],
        supports_check_mode=True,
    )

    def body():
        p = module.params
        doc = load_file(p["path"]) if p["path"] else validate(p["baseline"], p["name"])
        return {"baseline": doc, "opt_outs": opt_outs(doc)}

    run_module(module, body)


if __name__ == "__main__":
    main()
