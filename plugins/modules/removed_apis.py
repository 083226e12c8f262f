#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: removed_apis
short_description: Find callers of Kubernetes APIs that the target release removes
version_added: 0.1.0
description:
  - Checks four sources against the removal table (the official deprecation guide, see
    C(plugins/module_utils/data_removed_apis.py)) - apiserver C(/metrics) text
    (C(apiserver_requested_deprecated_apis); scrape every apiserver, it resets on restart), manifest files and
    directories (multi-document YAML or JSON, rendered charts), Helm v3 release secrets, and each control-plane
    host's audit log as M(gpufleet.upgrade.audit_callers) read it (who called - user or ServiceAccount, user agent).
  - Reports every finding with the object, the API, the releases that deprecated and removed it and the
    replacement. Findings removed at or before the target minor block the upgrade and fail the task (unless
    O(fail_on_blocking) is false); an API deprecated at the target but still served, or removed only later, is a
    notice. The items of any C(*List) document are scanned (a typed list's items take its apiVersion and kind).
  - A manifest file or Helm release that cannot be read or parsed is a blocking finding naming it, and the scan
    goes on with the rest (what it holds is unknown, so it cannot pass).
  - An apiserver's C(/metrics) text counts only when it proves to be that apiserver's - a C(kubernetes_build_info)
    series whose C(git_version) is the C(gitVersion) of the same server's C(/version), and its own
    C(apiserver_request_total) - so an empty body, a proxy's error page, JSON or another exporter's text (a 200
    from a wrong port) is a blocking finding naming the apiserver, never "no deprecated API in use".
options:
  target_version:
    description: The release to check against, such as v1.34.2.
    type: str
    required: true
  metrics:
    description: C(/metrics) text of each apiserver.
    type: list
    elements: dict
    default: []
    suboptions:
      apiserver:
        description: Name of the apiserver (node) the text came from.
        type: str
        required: true
      text:
        description: The metrics text.
        type: str
        required: true
      version:
        description: The same apiserver's C(/version) answer (JSON text), which the metrics must match.
        type: str
        required: true
  audit:
    description:
      - Each control-plane host's audit reading, as M(gpufleet.upgrade.audit_callers) returns it (with
        C(fail_on_error) false). Each call of a deprecated API with a removal release becomes a finding naming the
        user or ServiceAccount, user agent, namespace, verb, count and last time; a host of O(audit_hosts) with no
        reading, or one with an C(error), is a blocking finding naming it (its apiserver's callers are unknown).
    type: list
    elements: dict
    default: []
  audit_hosts:
    description: The hosts whose audit reading O(audit) must hold (every control-plane host).
    type: list
    elements: str
    default: []
  read_kubeadm_config:
    description:
      - With O(audit_hosts), read the C(kube-system/kubeadm-config) ConfigMap (the connection options below) and
        warn when its ClusterConfiguration has no C(audit-log-path) in C(apiServer.extraArgs) - the manifests
        C(kubeadm upgrade) writes would not audit.
    type: bool
    default: false
  manifest_paths:
    description: Files or directories of manifests on the host running the module.
    type: list
    elements: path
    default: []
  helm_secrets:
    description:
      - Secrets of type C(helm.sh/release.v1), as returned by M(kubernetes.core.k8s_info). Their values hold the
        releases' rendered manifests and values (which may carry credentials), so run both the task that reads
        them and this one with C(no_log) set, so they never reach the output or job events (the registered result
        keeps the findings). The option itself is not C(no_log), as Ansible would then mask every string in the
        secrets, C(v1) and C(default) included, all through the findings.
    type: list
    elements: dict
    default: []
  read_helm_secrets:
    description:
      - Read the Helm release Secrets from the cluster (the connection options below, as
        M(kubernetes.core.k8s_info) takes them) instead of taking them in O(helm_secrets), which must then be
        empty. Their data never passes through Ansible's variables, and the read runs in Ansible's worker, not as
        a process of its own (docs/design/direct-execution.md).
    type: bool
    default: false
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
- name: Scan the GitOps manifests and every Helm release before going to v1.34
  gpufleet.upgrade.removed_apis:
    target_version: v1.34.2
    manifest_paths: [/srv/gitops/rendered]
    helm_secrets: "{{ gpufleet_helm_secrets.resources }}"
  delegate_to: localhost

- name: The same, the Helm releases read by the module itself (their data never reaches Ansible's variables)
  gpufleet.upgrade.removed_apis:
    target_version: v1.34.2
    manifest_paths: [/srv/gitops/rendered]
    read_helm_secrets: true
  delegate_to: localhost
"""

RETURN = r"""
passed:
  description: No finding blocks the target.
  returned: success
  type: bool
findings:
  description:
    - Every finding (source, object, api_version, kind, deprecated_in, removed_in, replacement, blocks_target,
      severity C(block) or C(warn), message; C(unreadable) for a file or release that could not be scanned).
  returned: always
  type: list
  elements: dict
blocking:
  description: Findings that block the target.
  returned: always
  type: list
  elements: dict
notices:
  description: Messages of the findings that do not block the target (deprecated but served, removed later).
  returned: success
  type: list
  elements: str
helm_releases:
  description:
    - Metadata of every Helm release decoded (namespace, name, revision, status, chart, chart_version,
      app_version) - no values, no manifest - for M(gpufleet.upgrade.addon_support).
  returned: success
  type: list
  elements: dict
files_scanned:
  description: Manifest files read.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed, GpufleetError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module
from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import (
    scan_audit, scan_helm_secrets, scan_metrics, scan_paths, summarize_findings, target_version)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            target_version=dict(type="str", required=True),
            metrics=dict(type="list", elements="dict", default=[], options=dict(
                apiserver=dict(type="str", required=True), text=dict(type="str", required=True),
                version=dict(type="str", required=True))),
            audit=dict(type="list", elements="dict", default=[]),
            audit_hosts=dict(type="list", elements="str", default=[]),
            read_kubeadm_config=dict(type="bool", default=False),
            manifest_paths=dict(type="list", elements="path", default=[]),
            helm_secrets=dict(type="list", elements="dict", default=[], no_log=False),
            read_helm_secrets=dict(type="bool", default=False),
            fail_on_blocking=dict(type="bool", default=True),
            **kube.KUBE_ARGSPEC,
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        target = target_version(p["target_version"])
        connection = []  # made once, by the first read that needs the cluster

        def cluster():
            if not connection:
                connection.append(kube.connect(module))
            return connection[0]
        findings = []
        for item in p["metrics"]:
            findings.extend(scan_metrics(item["text"], item["version"], target, item["apiserver"]))
        if p["audit"] or p["audit_hosts"]:
            config = cluster().read_config_map("kube-system", "kubeadm-config") if (
                p["read_kubeadm_config"]) else None
            findings.extend(scan_audit(p["audit"], p["audit_hosts"], target, config))
        manifest_findings, scanned = scan_paths(p["manifest_paths"], target)
        findings.extend(manifest_findings)
        releases: list = []
        secrets = p["helm_secrets"]
        if p["read_helm_secrets"]:
            if secrets:
                raise GpufleetError("removed_apis: read_helm_secrets=true reads the Helm release Secrets from the "
                                    "cluster; leave helm_secrets empty (or drop read_helm_secrets)")
            secrets = cluster().helm_release_secrets()
        findings.extend(scan_helm_secrets(secrets, target, releases))
        summary = summarize_findings(findings, target)
        if not summary["passed"] and p["fail_on_blocking"]:
            raise GateFailed("removed_apis gate failed for %s: %s" % (target, "; ".join(summary["failures"])),
                             findings=findings, blocking=summary["blocking"], notices=summary["warnings"])
        return {"passed": summary["passed"], "findings": findings, "blocking": summary["blocking"],
                "notices": summary["warnings"], "files_scanned": scanned, "helm_releases": releases,
                "source": summary["source"]}

    run_module(module, body)


if __name__ == "__main__":
    main()
