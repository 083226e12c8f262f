#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: security_checks
short_description: Check that the cell's security controls survive the upgrade, against a baseline taken before it
version_added: 0.3.0
description:
  - O(state=baseline) records the cell's security state once per target, before the control plane moves, in the
    ConfigMap C(kube-system/gpufleet-security-baseline) - each namespace's Pod Security enforce level and version,
    a digest of every Role's and ClusterRole's rules (aggregated ones included) and every binding's role and
    subjects, the names of legacy service-account token Secrets and a digest of every NetworkPolicy. A baseline for
    the same target is kept (a rerun never moves it); one for another target is replaced.
  - O(state=checked) judges the cluster now. Without a baseline - every namespace with a Pod Security C(enforce)
    level must pin C(enforce-version) to a minor no newer than the target (missing, C(latest) or newer follows the
    control plane and changes what the namespace admits); each admission probe - a pod with an image the policy
    must refuse, created as a server-side dry run - must be refused with the expected text (a webhook that refuses
    dry runs, or no RBAC to create the pod, is a failure); the CNI that enforces NetworkPolicies must support the
    control plane's minor (the addon matrix; open-ended support is a warning); legacy token Secrets are a warning.
    Against the baseline - enforce labels unchanged; no subject newly bound to a powerful role (every verb on every
    resource, escalate or bind, writing bindings, impersonation, reading Secrets, pods/exec, nodes/proxy, minting
    tokens, switching admission off) other than through a binding the apiserver reconciles (autoupdate, a name
    matching O(rbac_expected)) or kubeadm's, never to everybody; no new legacy token Secret; every NetworkPolicy
    present and unchanged. No Namespace or ClusterRole read is a failure. The RBAC diff is returned for the change
    record.
  - O(state=psa_pinned) pins the enforce labels that are not pinned (with O(psa_bump), also pinned ones) to
    O(psa_version), and updates a stored baseline of this target to match - the deliberate, recorded step.
  - Secrets are read as name, uid, labels and the service-account annotation only; their data never reaches a
    result.
options:
  state:
    description: What to do.
    type: str
    choices: [baseline, checked, psa_pinned]
    default: checked
  target_version:
    description: The release the cell is going to (the baseline is kept per target).
    type: str
    required: true
  run_id:
    description: The run's id, recorded with a new baseline.
    type: str
    default: ""
  admission_probes:
    description:
      - Each C(namespace), C(image) (one the namespace's image policy must refuse, such as an undigested image) and
        C(expect) (text the refusal must contain, such as the policy's name).
    type: list
    elements: dict
    default: []
  rbac_expected:
    description:
      - Binding-name patterns whose new powerful grants an upgrade is expected to make (the apiserver reconciles
        its C(system:) bootstrap policy, kubeadm its C(kubeadm:) bindings); such a grant is recorded, not failed,
        only when the binding also carries the apiserver's autoupdate annotation (or is kubeadm's) and its subject
        is not everybody. Each pattern starts with at least three literal characters.
    type: list
    elements: str
    default: ["system:*", "kubeadm:*"]
  require_baseline:
    description: With O(state=checked), fail when no baseline of this target is stored.
    type: bool
    default: true
  extra_support:
    description: Rows added to the addon matrix (as M(gpufleet.upgrade.addon_support) takes them), for the CNI.
    type: list
    elements: dict
    default: []
  declared_versions:
    description: Versions of addons whose image carries no tag, keyed by addon.
    type: dict
    default: {}
  psa_version:
    description: With O(state=psa_pinned), the minor to pin to, such as v1.35.
    type: str
  psa_namespaces:
    description: With O(state=psa_pinned), only these namespaces (default every namespace with an enforce label).
    type: list
    elements: str
    default: []
  psa_bump:
    description: With O(state=psa_pinned), move namespaces already pinned to another version as well.
    type: bool
    default: false
  fail_on_failure:
    description: Fail when a check of severity fail does not pass.
    type: bool
    default: true
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
  - gpufleet.upgrade.common.KUBE
  - kubernetes.core.k8s_auth_options
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Record the security baseline before the control plane moves (once per target)
  gpufleet.upgrade.security_checks:
    state: baseline
    target_version: v1.36.3

- name: Check after a wave
  gpufleet.upgrade.security_checks:
    target_version: v1.36.3
    admission_probes:
      - {namespace: inference, image: "registry.example/unsigned:latest", expect: require-signed-images}

- name: Pin every unpinned Pod Security enforce label to the control plane's minor
  gpufleet.upgrade.security_checks:
    state: psa_pinned
    target_version: v1.36.3
    psa_version: v1.35
"""

RETURN = r"""
passed:
  description: Every check of severity fail passed.
  returned: state is checked
  type: bool
checks:
  description: Each check (name, subject, measured, expected, passed, severity, detail), as the gates return them.
  returned: state is checked
  type: list
  elements: dict
failures:
  description: One line per failed check.
  returned: state is checked
  type: list
  elements: str
warnings:
  description: One line per check to look at by hand (legacy tokens, NetworkPolicies with no known CNI).
  returned: state is checked
  type: list
  elements: str
security:
  description:
    - The report for the change record - psa (unpinned, pinned, unlabelled, changed), admission (each probe),
      legacy_tokens, network_policies (count, cni, missing, changed, added), rbac (cluster_roles and
      cluster_role_bindings added/removed/changed, new_powerful_grants, expected_powerful_grants), baseline.
  returned: state is checked
  type: dict
baseline:
  description: The stored baseline's target, taken time and run id.
  returned: state is baseline
  type: dict
psa_changes:
  description: Namespace -> the enforce-version it was pinned to.
  returned: state is psa_pinned
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube, security
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["baseline", "checked", "psa_pinned"], default="checked"),
            target_version=dict(type="str", required=True),
            run_id=dict(type="str", default=""),
            admission_probes=dict(type="list", elements="dict", default=[]),
            rbac_expected=dict(type="list", elements="str", default=list(security.DEFAULT_RBAC_EXPECTED)),
            require_baseline=dict(type="bool", default=True),
            extra_support=dict(type="list", elements="dict", default=[]),
            declared_versions=dict(type="dict", default={}),
            psa_version=dict(type="str"),
            psa_namespaces=dict(type="list", elements="str", default=[]),
            psa_bump=dict(type="bool", default=False),
            fail_on_failure=dict(type="bool", default=True),
            **kube.KUBE_ARGSPEC,
        ),
        required_if=[("state", "psa_pinned", ["psa_version"])],
        supports_check_mode=True,
    )

    def body():
        p = module.params
        target = str(parse_version(p["target_version"], "target_version"))
        probes = security.parse_probes(p["admission_probes"], "admission_probes")
        expected = security.parse_patterns(p["rbac_expected"], "rbac_expected")
        k = kube.connect(module)
        if p["state"] == "baseline":
            return security.take_baseline(k, target, p["run_id"], module.check_mode)
        if p["state"] == "psa_pinned":
            return security.pin(k, target, p["psa_version"], p["psa_namespaces"], p["psa_bump"], module.check_mode)
        result = security.check(k, target, probes, expected, p["require_baseline"], p["extra_support"],
                                p["declared_versions"])
        if not result["passed"] and p["fail_on_failure"]:
            raise GateFailed("security checks: %s" % "; ".join(result["failures"]), **result)
        return result

    run_module(module, body)


if __name__ == "__main__":
    main()
