#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: helm_mapkubeapis
short_description: Rewrite Helm releases whose stored manifest uses APIs the target removes
version_added: 0.3.0
description:
  - A Helm 3 release records the manifest it last deployed. Once the cluster no longer serves an API that manifest
    uses, C(helm upgrade) and C(helm rollback) of the release fail ("unable to build kubernetes objects from current
    release manifest"), whatever the new chart holds. This does what the helm-mapkubeapis plugin does, before the
    control plane moves - for each release whose revision Helm upgrades from (the latest C(deployed) one, else the
    latest) records an API removed at or before O(target_version), a new revision (the release's highest + 1,
    metadata only, same chart and values) is added with those objects' C(apiVersion) moved to the replacement the
    removal table names, and every C(deployed) revision before it is marked C(superseded). A rerun finds nothing
    left to map.
  - Only the C(apiVersion) line of each such object changes. An object whose API has no replacement, whose
    replacement the target removes too, that sits inside a list document, or whose apiVersion is not a plain
    top-level line, is refused naming it, and nothing is changed.
  - A failure part of the way names the releases already mapped (each one is whole - its new revision is added
    before the old ones are superseded).
  - Run it from C(playbooks/helm_mapkubeapis.yml), which needs a typed confirmation and records it. In check mode
    it reports what it would map. The releases' values and manifests never reach the result.
options:
  target_version:
    description: The release the cluster is going to, such as v1.36.3.
    type: str
    required: true
  releases:
    description: Only these releases, each C(namespace/name) (default every release).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - gpufleet.upgrade.common.KUBE
  - kubernetes.core.k8s_auth_options
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: What would be mapped for v1.36.3
  gpufleet.upgrade.helm_mapkubeapis:
    target_version: v1.36.3
  check_mode: true
  register: mapping

- name: Map them (after the typed confirmation)
  gpufleet.upgrade.helm_mapkubeapis:
    target_version: v1.36.3
    releases: [nvidia-device-plugin/nvidia-device-plugin]
"""

RETURN = r"""
releases:
  description: Each release mapped (or, in check mode, to be mapped) - namespace, release, the revision read, the
    new revision, and each object moved (object, from, to, removed_in).
  returned: always
  type: list
  elements: dict
  sample: [{namespace: monitoring, release: prometheus, revision: 4, new_revision: 5,
            mapped: [{object: PodDisruptionBudget prometheus, from: policy/v1beta1, to: policy/v1,
                      removed_in: "1.25"}]}]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module
from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import plan_mappings, target_version


def main():
    module = AnsibleModule(
        argument_spec=dict(
            target_version=dict(type="str", required=True),
            releases=dict(type="list", elements="str", default=[]),
            **kube.KUBE_ARGSPEC,
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        target = target_version(p["target_version"])
        bad = [r for r in p["releases"] if r.count("/") != 1]
        if bad:
            raise InputError("releases: %s; give each as namespace/name" % ", ".join(bad))
        api = kube.connect(module)
        plans = plan_mappings(api.helm_release_secrets(), target, kube.now_rfc3339(), p["releases"])
        out = [{"namespace": x["namespace"], "release": x["release"], "revision": x["revision"],
                "new_revision": x["new_revision"], "mapped": x["mapped"]} for x in plans]
        done = []
        if not module.check_mode:
            for plan, summary in zip(plans, out):
                try:  # the new revision first: a release is never left without a deployed one
                    api.create_secret(plan["secret"])
                    for old in plan["supersede"]:
                        api.patch_secret(plan["namespace"], old["name"], old["patch"])
                except GpufleetError as exc:
                    raise GpufleetError("%s/%s: %s. Mapped before it: %s" % (
                        plan["namespace"], plan["release"], exc.msg, ", ".join(
                            "%s/%s (revision %d)" % (d["namespace"], d["release"], d["new_revision"])
                            for d in done) or "none"), releases=done, changed=bool(done))
                done.append(summary)
        return {"changed": bool(out), "releases": out}

    run_module(module, body)


if __name__ == "__main__":
    main()
