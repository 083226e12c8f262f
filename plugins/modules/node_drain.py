#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: node_drain
short_description: Evict the pods of cordoned nodes through the eviction API, retrying PDB refusals
version_added: 0.1.0
description:
  - Evicts every pod a drain moves from the given nodes through the eviction API, so PodDisruptionBudgets are
    honoured; a refusal (HTTP 429) is retried every O(retry_interval) seconds until O(timeout), as
    C(kubectl drain) does. When pods remain at the deadline the task fails and names each one, its owner, the
    apiserver's answer and the PodDisruptionBudgets that select it.
  - DaemonSet and mirror pods stay. Pods of a training gang (a JobSet) are refused - stop the gang as a unit with
    M(gpufleet.upgrade.gang) first. Pods without a controller are refused unless O(force).
  - Closes the gaps of M(kubernetes.core.k8s_drain) noted in docs/reference.md section 4 (429 not retried, an
    expired wait only warns, one node per call).
options:
  nodes:
    description: Node names (cordon them first, with M(gpufleet.upgrade.node_state)).
    type: list
    elements: str
    required: true
  timeout:
    description: Seconds to keep retrying before failing with the blockers.
    type: int
    default: 300
  retry_interval:
    description: Seconds between eviction attempts (pods already evicted and terminating are looked at every second).
    type: float
    default: 5
  grace_period:
    description: Termination grace period for the evicted pods (the pod's own when omitted).
    type: int
  disable_eviction:
    description:
      - Break glass. Delete pods directly, bypassing PodDisruptionBudgets. Every deletion is returned in
        C(break_glass) and recorded in the change record.
    type: bool
    default: false
  force:
    description: Break glass. Also delete pods without a controller, and gang ranks one by one.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.upgrade.common.KUBE
  - kubernetes.core.k8s_auth_options
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Drain the wave, waiting up to 10 minutes for PodDisruptionBudgets
  gpufleet.upgrade.node_drain:
    nodes: "{{ ansible_play_batch }}"
    timeout: 600
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
evicted:
  description: Pods evicted (namespace/name).
  returned: always
  type: list
  elements: str
deleted:
  description: Pods deleted without the eviction API (break glass).
  returned: always
  type: list
  elements: str
skipped:
  description: DaemonSet and mirror pods left on the nodes.
  returned: always
  type: list
  elements: str
blockers:
  description: On failure, every pod that stayed, with node, owner, reason, pdbs and a message.
  returned: failure
  type: list
  elements: dict
break_glass:
  description: What was done behind a break-glass option.
  returned: always
  type: list
  elements: str
would_evict:
  description: In check mode, the pods that would be evicted.
  returned: check mode
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.drain import drain
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="str", required=True),
            timeout=dict(type="int", default=300),
            retry_interval=dict(type="float", default=5),
            grace_period=dict(type="int"),
            disable_eviction=dict(type="bool", default=False),
            force=dict(type="bool", default=False),
            **kube.KUBE_ARGSPEC,
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        result = drain(kube.connect(module), p["nodes"], p["timeout"], p["retry_interval"], p["grace_period"],
                       p["disable_eviction"], p["force"], module.check_mode)
        for line in result["break_glass"]:
            module.warn("BREAK GLASS: " + line)
        return result

    run_module(module, body)


if __name__ == "__main__":
    main()
