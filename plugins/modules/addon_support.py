#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: addon_support
short_description: Find the cluster's addons and check that each supports the target Kubernetes minor
version_added: 0.3.0
description:
  - Detects addons (kube-proxy, CoreDNS, Calico, Cilium, the NVIDIA GPU Operator, device plugin and DRA driver,
    Kueue, JobSet, Kyverno, Gatekeeper) from the container images of DaemonSets, Deployments and StatefulSets
    (matched by repository path, any registry) and from the charts of Helm v3 releases (the newest deployed
    revision; the chart's appVersion first).
  - Judges each against the addon matrix shipped in C(plugins/module_utils/data_addons.py) (every row with its
    source) plus O(extra_support). An addon release that does not support the target blocks, naming the addon, its
    version, where it runs and the first release that supports the target. A release the matrix does not know
    blocks too (its support is unknown), as does an image pinned by digest alone unless O(declared_versions) gives
    its version; a row with no documented upper bound is a warning, and so is an addon whose project publishes
    only a relative rule (Gatekeeper). kube-proxy and CoreDNS deployed by kubeadm are moved by
    C(kubeadm upgrade apply) itself, so they are reported and never block.
  - Returns the installed addons in the order the addons stage upgrades them.
options:
  target_version:
    description: The Kubernetes release the control plane is going to, such as v1.36.3.
    type: str
    required: true
  apiserver_version:
    description: The version the apiservers run now (kube-proxy must not be newer).
    type: str
  workloads:
    description:
      - DaemonSet, Deployment and StatefulSet objects, as returned by M(kubernetes.core.k8s_info); only kind,
        metadata (namespace, name) and the pod template's container images are read.
      - Unset, the module lists them itself from the cluster (the connection options below), keeping only those
        fields - the pod templates' environment, which may hold secrets, never reaches a task result or the log.
    type: list
    elements: dict
  helm_releases:
    description:
      - Helm release metadata (namespace, name, revision, status, chart, chart_version, app_version), as
        M(gpufleet.upgrade.removed_apis) returns it in C(helm_releases) after decoding the release secrets - no
        values, so this task needs no C(no_log).
    type: list
    elements: dict
    default: []
  extra_support:
    description:
      - Rows to add to the matrix, each C(addon), C(version) (the release line, MAJOR.MINOR), C(kube_min),
        C(kube_max) (empty when no upper bound is documented) and C(source) (where the support is documented).
        They take precedence over the shipped rows.
    type: list
    elements: dict
    default: []
  extra_addons:
    description:
      - Addons the code does not know (the cell's C(addons.defined), from C(gpufleet_addons)), each C(addon) (its
        key), C(name), C(stage) (3-8, its place in the addons stage's order; default 7), C(images) (image
        repositories as ORG/NAME, matched by path suffix in any registry) and C(charts) (Helm chart names). Each
        image and chart may identify one addon only, and a key may not be a shipped addon's. Rows in
        O(extra_support) may then name them.
    type: list
    elements: dict
    default: []
  declared_versions:
    description: Versions of addons whose image carries no tag (pinned by digest only), keyed by addon.
    type: dict
    default: {}
  stage_releases:
    description:
      - The Helm releases the addons stage will upgrade (the cell's C(addons.releases)). Each must be a release in
        O(helm_releases) whose latest revision is C(deployed), and each of its C(crds) files must be on the
        controller; otherwise it blocks now, before the control plane moves, instead of stopping the stage after.
    type: list
    elements: dict
    default: []
  fail_on_blocking:
    description: Fail when a finding blocks the target.
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
- name: Check the addons before the control plane goes to v1.36 (the workloads read from the cluster)
  gpufleet.upgrade.addon_support:
    target_version: v1.36.3
    apiserver_version: v1.35.4
    helm_releases: "{{ removed.helm_releases }}"
    kubeconfig: /etc/gpufleet/cell1.kubeconfig
    extra_support:
      - {addon: calico, version: "3.31", kube_min: "1.32", kube_max: "1.35", source: "https://docs.tigera.io/..."}
"""

RETURN = r"""
passed:
  description: No addon blocks the target.
  returned: success
  type: bool
installed:
  description: Every addon found (addon, name, version, raw_version, where).
  returned: always
  type: list
  elements: dict
findings:
  description: The judgement of each (severity C(ok), C(warn) or C(block), message, first_supporting, source).
  returned: always
  type: list
  elements: dict
blocking:
  description: Messages of the findings that block the target.
  returned: always
  type: list
  elements: str
notices:
  description: Messages of the findings to check by hand (each also shown as a warning of the task).
  returned: always
  type: list
  elements: str
summary:
  description: One line per finding, C(addon version severity).
  returned: success
  type: list
  elements: str
stages:
  description: The installed addons in upgrade order (addon, name, stage).
  returned: success
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.addons import (
    catalog, check_addons, declared_lines, stage_problems, support_rows)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(
            target_version=dict(type="str", required=True),
            apiserver_version=dict(type="str"),
            workloads=dict(type="list", elements="dict"),
            helm_releases=dict(type="list", elements="dict", default=[]),
            extra_support=dict(type="list", elements="dict", default=[]),
            declared_versions=dict(type="dict", default={}),
            extra_addons=dict(type="list", elements="dict", default=[]),
            stage_releases=dict(type="list", elements="dict", default=[]),
            fail_on_blocking=dict(type="bool", default=True),
            **kube.KUBE_ARGSPEC,
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        known = catalog(p["extra_addons"])  # bad input is refused before the cluster is read
        support_rows(p["extra_support"], known=known)
        declared_lines(p["declared_versions"], known=known)
        workloads = p["workloads"] if p["workloads"] is not None else kube.connect(module).workload_images()
        result = check_addons(workloads, p["helm_releases"], p["target_version"], p["apiserver_version"],
                              p["extra_support"], p["declared_versions"], p["extra_addons"])
        problems = stage_problems(p["stage_releases"], p["helm_releases"], os.path.isfile)
        if problems:
            result["blocking"] += problems
            result["passed"] = False
        if not result["passed"] and p["fail_on_blocking"]:
            raise GateFailed("addon_support: %s" % "; ".join(result["blocking"]), **result)
        return result

    run_module(module, body)


if __name__ == "__main__":
    main()
