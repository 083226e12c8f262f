#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: kubeadm_plan
short_description: Run or read C(kubeadm upgrade plan) and check that it offers the target
version_added: 0.1.0
description:
  - Parses C(kubeadm upgrade plan) output in every layout kubeadm has printed - C(-o json|yaml)
    (C(output.kubeadm.k8s.io/v1alpha3) C(UpgradePlan), kubeadm 1.31+), the text layout with a NODE column, and the
    older text layout that groups kubelets as C(2 x v1.26.0).
  - Empty output means no upgrade is available; that is a result (RV(available) false), not an error.
  - Fails when O(target) is not offered, or when a component config needs a manual upgrade (unless
    O(allow_manual_config_upgrade)). Surfaces kubeadm's note that kubeadm itself must be updated first.
options:
  target:
    description: The version the upgrade must reach, such as v1.34.2. Without it the plan is only parsed.
    type: str
  allow_manual_config_upgrade:
    description: Pass even when a component config is flagged MANUAL UPGRADE REQUIRED (after migrating it).
    type: bool
    default: false
  node:
    description: Name of the node, for messages.
    type: str
    default: ""
  binary:
    description: kubeadm binary.
    type: str
    default: kubeadm
  args:
    description:
      - Arguments for kubeadm. Default C([upgrade, plan, TARGET, -o, json]) with O(target), so kubeadm plans for
        exactly the target and never looks up the latest release on the internet (an air-gapped cell otherwise
        waits on C(dl.k8s.io) and falls back to kubeadm's own version); C([upgrade, plan, -o, json]) without.
    type: list
    elements: str
  required:
    description:
      - Fail when the plan offers no upgrade to O(target) (the control plane must move in this step). Without it a
        plan that is already at O(target) passes.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.upgrade.common.TOOL
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Plan on the first control-plane node and require v1.34.2 to be offered
  gpufleet.upgrade.kubeadm_plan:
    target: v1.34.2
    node: "{{ inventory_hostname }}"
  register: kubeadm_plan

- name: Judge text output captured by an older kubeadm
  gpufleet.upgrade.kubeadm_plan:
    output: "{{ lookup('file', 'plan.txt') }}"
    target: v1.27.1
"""

RETURN = r"""
available:
  description: Whether kubeadm offers any upgrade.
  returned: success
  type: bool
plan:
  description: Parsed plan - format, upgrades (description, target_version, apply_command, kubeadm_required,
    components), config_versions, manual_config_upgrades, offered_versions.
  returned: success
  type: dict
upgrade:
  description: The upgrade that reaches O(target) (or the first one offered when no target is given).
  returned: success
  type: dict
needs_upgrade:
  description: False when kubeadm offers nothing.
  returned: success
  type: bool
kubeadm_required:
  description: The kubeadm version kubeadm says must be installed first, or null.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.kubeadm_plan import judge_plan, parse_plan
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import (
    check_mode_skip, run_module, tool_text)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            target=dict(type="str"),
            allow_manual_config_upgrade=dict(type="bool", default=False),
            required=dict(type="bool", default=False),
            node=dict(type="str", default=""),
            binary=dict(type="str", default="kubeadm"),
            args=dict(type="list", elements="str"),
            output=dict(type="str"),
        ),
        supports_check_mode=True,
    )

    def body():
        target = module.params["target"]
        text = tool_text(module, "kubeadm", ["upgrade", "plan"] + ([target] if target else []) + ["-o", "json"])
        if text is None:
            return check_mode_skip("kubeadm upgrade plan")
        plan = parse_plan(text)
        verdict = judge_plan(plan, module.params["target"], module.params["allow_manual_config_upgrade"],
                             module.params["node"], module.params["required"])
        upgrade = verdict["upgrade"]
        return {"available": plan["available"], "plan": plan, "upgrade": upgrade,
                "needs_upgrade": verdict["needs_upgrade"],
                "kubeadm_required": upgrade["kubeadm_required"] if upgrade else None}

    run_module(module, body)


if __name__ == "__main__":
    main()
