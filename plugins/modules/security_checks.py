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
    Against the baseline - enforce labels unchanged; no new powerful grant, a grant being (subject, scope, role,
    reason) - every verb or every resource, cluster-admin, reading Secrets, escalate or bind, writing bindings,
    impersonation, nodes/proxy, C(*/exec), C(*/attach), C(*/proxy), C(*/token), ephemeral containers, approving
    certificates, webhook and admission-policy configuration - rules matched as Kubernetes RBAC matches them and
    aggregated ClusterRoles resolved, so a role that grows through a new aggregated ClusterRole is a new grant
    naming that ClusterRole. A new grant passes only when its exact binding, role and subject are in what the
    target minor's apiserver and kubeadm create (C(plugins/module_utils/data_rbac.py), generated from their
    sources by C(bin/rbac-table)) with the reason in that role, or in the deployed revision of one of
    O(addon_releases), or accepted by the operator in O(rbac_accepted); never by a name pattern. No new legacy
    token Secret; every NetworkPolicy present and unchanged. No Namespace or ClusterRole read is a failure. The
    RBAC diff (expected and accepted grants included) is returned for the change record.
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
  rbac_accepted:
    description:
      - Grants the operator accepts, each C(binding) (a ClusterRoleBinding's exact name, a RoleBinding's
        C(NAMESPACE/NAME)), C(role) (the role it binds, C(NAMESPACE/NAME) for a Role; the binding made again to
        another role is not accepted), C(subject) (exactly as the check reports it, C(User alice), C(Group g),
        C(ServiceAccount ns/name)) and C(reason) (recorded with the run). No pattern is accepted.
    type: list
    elements: dict
    default: []
  addon_releases:
    description:
      - The Helm releases the addons stage manages, each C(release) (C(NAMESPACE/NAME)) and C(version) (the chart
        version the stage applies); once a release's deployed revision is that version, the RBAC in its manifest is
        expected. A release with no single deployed revision fails the check.
    type: list
    elements: dict
    default: []
    suboptions:
      release:
        description: The release, C(NAMESPACE/NAME).
        type: str
        required: true
      version:
        description: The chart version the addons stage applies.
        type: str
        required: true
  require_baseline:
    description: With O(state=checked), fail when no baseline of this target is stored.
    type: bool
    default: true
  extra_support:
    description: Rows added to the addon matrix (as M(gpufleet.upgrade.addon_support) takes them), for the CNI.
    type: list
    elements: dict
    default: []
  extra_addons:
    description: Addons the code does not know (the cell's C(addons.defined), from C(gpufleet_addons)), as
      M(gpufleet.upgrade.addon_support) takes them; one with C(network_policy) is judged as the CNI is.
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
notices:
  description: One line per check to look at by hand (legacy tokens, NetworkPolicies with no known CNI), each also
    shown as a warning of the task.
  returned: state is checked
  type: list
  elements: str
security:
  description:
    - The report for the change record - psa (unpinned, pinned, unlabelled, changed), admission (each probe),
      legacy_tokens, network_policies (count, cni, missing, changed, added), rbac (cluster_roles and
      cluster_role_bindings added/removed/changed, new_powerful_grants, expected_powerful_grants,
      accepted_powerful_grants, expected_from), baseline.
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
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube, rbac, security
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
            rbac_accepted=dict(type="list", elements="dict", default=[]),
            addon_releases=dict(type="list", elements="dict", default=[], options=dict(
                release=dict(type="str", required=True), version=dict(type="str", required=True))),
            require_baseline=dict(type="bool", default=True),
            extra_support=dict(type="list", elements="dict", default=[]),
            declared_versions=dict(type="dict", default={}),
            extra_addons=dict(type="list", elements="dict", default=[]),
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
        accepted = rbac.parse_accepted(p["rbac_accepted"], "rbac_accepted")
        k = kube.connect(module)
        if p["state"] == "baseline":
            return security.take_baseline(k, target, p["run_id"], module.check_mode)
        if p["state"] == "psa_pinned":
            return security.pin(k, target, p["psa_version"], p["psa_namespaces"], p["psa_bump"], module.check_mode)
        result = security.check(k, target, probes, accepted, p["require_baseline"], p["extra_support"],
                                p["declared_versions"], p["addon_releases"], p["extra_addons"])
        if not result["passed"] and p["fail_on_failure"]:
            raise GateFailed("security checks: %s" % "; ".join(result["failures"]), **result)
        return result

    run_module(module, body)


if __name__ == "__main__":
    main()
