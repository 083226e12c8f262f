#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_checks
short_description: Preflight findings from API objects - dead webhooks, unserved stored CRD versions, PDBs at zero
version_added: 0.1.0
description:
  - Judges objects read with M(kubernetes.core.k8s_info). Admission webhooks (validating and mutating) and CRD
    conversion webhooks whose service has no ready endpoint; CRDs with a version in C(status.storedVersions) that
    is no longer served; PodDisruptionBudgets that allow no disruption.
  - Fails (before anything changes) when a finding of a kind in O(blocking) has severity C(fail) - a webhook with
    C(failurePolicy Ignore) and a PDB at zero are warnings.
  - Every field it reads is type-checked, in objects given as options and in objects read with O(read) alike; a
    field of the wrong type (a string where the API has a list, C(endpoints) holding C(null), a C(maxUnavailable)
    that is a mapping) fails the module naming the object (kind, namespace/name) and the field path - it is never
    skipped as a pass.
options:
  webhook_configurations:
    description: ValidatingWebhookConfiguration and MutatingWebhookConfiguration objects.
    type: list
    elements: dict
    default: []
  crds:
    description: CustomResourceDefinition objects.
    type: list
    elements: dict
    default: []
  endpointslices:
    description: EndpointSlice objects (discovery.k8s.io/v1) of the services the webhooks call.
    type: list
    elements: dict
    default: []
  pdbs:
    description: PodDisruptionBudget objects.
    type: list
    elements: dict
    default: []
  read:
    description:
      - Read the webhook configurations, CRDs, EndpointSlices and PodDisruptionBudgets from the cluster (the
        connection options below, as M(kubernetes.core.k8s_info) takes them) instead of taking them as options;
        give none of the four lists with it. One call in Ansible's worker, where five M(kubernetes.core.k8s_info)
        reads are five Python processes (docs/design/direct-execution.md).
    type: bool
    default: false
  blocking:
    description: Finding kinds that stop the run.
    type: list
    elements: str
    default: [webhook, conversion-webhook, crd-stored-versions]
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
  - gpufleet.upgrade.common.KUBE
  - kubernetes.core.k8s_auth_options
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Judge the cluster's webhooks, CRDs and PDBs
  gpufleet.upgrade.cluster_checks:
    webhook_configurations: "{{ validating.resources + mutating.resources }}"
    crds: "{{ crds.resources }}"
    endpointslices: "{{ slices.resources }}"
    pdbs: "{{ pdbs.resources }}"
"""

RETURN = r"""
passed:
  description: No blocking finding.
  returned: success
  type: bool
findings:
  description: Every finding (name, subject, measured, expected, detail, severity, message).
  returned: always
  type: list
  elements: dict
blocking:
  description: The findings that stop the run.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.cluster_checks import (
    crd_findings, pdb_findings, summarize_findings, webhook_findings)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed, GpufleetError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module

LISTS = ("webhook_configurations", "crds", "endpointslices", "pdbs")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            webhook_configurations=dict(type="list", elements="dict", default=[]),
            crds=dict(type="list", elements="dict", default=[]),
            endpointslices=dict(type="list", elements="dict", default=[]),
            pdbs=dict(type="list", elements="dict", default=[]),
            blocking=dict(type="list", elements="str",
                          default=["webhook", "conversion-webhook", "crd-stored-versions"]),
            read=dict(type="bool", default=False),
            **kube.KUBE_ARGSPEC,
        ),
        supports_check_mode=True,
    )

    def body():
        p = dict(module.params)
        if p["read"]:
            given = [k for k in LISTS if p[k]]
            if given:
                raise GpufleetError("cluster_checks: read=true reads %s from the cluster; give none of them as "
                                    "options (or drop read)" % ", ".join(given))
            p.update(kube.connect(module).upgrade_blocker_objects())
        summary = summarize_findings(webhook_findings(p["webhook_configurations"], p["crds"], p["endpointslices"]),
                                     crd_findings(p["crds"]), pdb_findings(p["pdbs"]), p["blocking"])
        if not summary["passed"]:
            raise GateFailed("preflight blocked: %s" % "; ".join(f["message"] for f in summary["blocking"]),
                             **summary)
        return summary

    run_module(module, body)


if __name__ == "__main__":
    main()
