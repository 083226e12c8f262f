#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_identity
short_description: Refuse to act on an API server that is not the inventory's cell
version_added: 0.3.0
description:
  - Reads the UID of the C(kube-system) Namespace of the API server this run's connection reaches (the
    C(kubeconfig)/C(context) options or the C(K8S_AUTH_*) variables, as M(kubernetes.core.k8s) reads them) and
    compares it with the identity recorded for the cell in the inventory (C(gpufleet_cluster_uid)). The UID is set
    when the cluster is created and never reused, so a kubeconfig, context or AWX credential that points at another
    cluster is refused before anything changes.
  - A cell without a recorded identity is refused too; the message gives the UID the API server reported, to record
    after checking that it is the cell's cluster.
options:
  cell:
    description: The cell's name (M(gpufleet.upgrade.cell)'s C(name)), for messages.
    type: str
    required: true
  expected:
    description: The recorded kube-system Namespace UID (C(gpufleet_cluster_uid)); empty or missing is a refusal.
    type: str
extends_documentation_fragment:
  - gpufleet.upgrade.common.KUBE
  - kubernetes.core.k8s_auth_options
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: The API server must be the cell's
  gpufleet.upgrade.cluster_identity:
    cell: "{{ __gpufleet_cell.cell.name }}"
    expected: "{{ __gpufleet_cell.cell.cluster_uid }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
uid:
  description: The kube-system Namespace UID the API server reported.
  returned: success or a refusal
  type: str
server:
  description: The API server's URL.
  returned: success or a refusal
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(cell=dict(type="str", required=True), expected=dict(type="str"), **kube.KUBE_ARGSPEC),
        supports_check_mode=True,
    )

    def body():
        api = kube.connect(module)
        uid = api.namespace_uid("kube-system")
        kube.judge_identity(module.params["cell"], module.params["expected"], uid, api.server)
        return {"uid": uid, "server": api.server, "msg": "%s is cell %s (kube-system UID %s)" % (
            api.server, module.params["cell"], uid)}

    run_module(module, body)


if __name__ == "__main__":
    main()
