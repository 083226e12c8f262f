#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_upgrade_plan
short_description: Plan a rolling etcd upgrade - which members move to a release, in what order - or refuse it
version_added: 0.2.0
description:
  - Takes every member's manifest as M(gpufleet.upgrade.etcd_member) read it and what etcd runs as
    M(gpufleet.upgrade.etcd_status) read it (C(etcdctl endpoint status --cluster)), and returns the members to move
    to O(target), followers first and the leader last; members that already run the target from a manifest that
    names it are left out, so a rerun goes on where a failed run stopped.
  - Refuses, naming the host and the fix, before anything changes - a member that did not answer or that the
    inventory does not list, a learner, a member newer than the target (a rolling restart does not downgrade etcd;
    the way back is the snapshot taken first), a step of more than one minor (etcd moves 3.5 -> 3.6 -> 3.7), and a
    control plane whose apiservers run different releases (a Kubernetes upgrade in flight - etcd moves in a window
    of its own).
  - Pure - reads nothing itself; check mode returns the same plan.
options:
  target:
    description: The etcd release to move to (X.Y.Z or vX.Y.Z).
    type: str
    required: true
  members:
    description: What M(gpufleet.upgrade.etcd_member) returned for each host of the etcd group (its C(host) and
      C(member)), as a loop registers them.
    type: list
    elements: dict
    required: true
  endpoints:
    description: The C(endpoints) M(gpufleet.upgrade.etcd_status) returned (with C(cluster), every member).
    type: list
    elements: dict
    required: true
  apiserver_pods:
    description: The control plane's kube-apiserver mirror pods (kube-system, label C(component=kube-apiserver)).
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Plan the members' order
  gpufleet.upgrade.etcd_upgrade_plan:
    target: 3.7.3
    members: "{{ members.results }}"  # gpufleet.upgrade.etcd_member in a loop over groups['etcd']
    endpoints: "{{ status.endpoints }}"
  register: plan
"""

RETURN = r"""
target:
  description: The release, X.Y.Z.
  returned: always
  type: str
order:
  description: The hosts whose member moves, in order (followers first, the leader last).
  returned: always
  type: list
  elements: str
leader:
  description: The host whose member leads now.
  returned: always
  type: str
done:
  description: The hosts whose member already runs the target.
  returned: always
  type: list
  elements: str
running:
  description: Host -> the release its member runs now.
  returned: always
  type: dict
members:
  description: Host -> its member's name.
  returned: always
  type: dict
endpoints:
  description: Host -> the client URL its member answered at.
  returned: always
  type: dict
stacked:
  description: The hosts whose member is kubeadm's own local etcd (its manifest carries kubeadm's annotation).
  returned: always
  type: list
  elements: str
minor_step:
  description: Whether the cluster moves to a new minor (its version follows once every member runs it).
  returned: always
  type: bool
wait_for:
  description: Host -> {its member's client URL - the target}, what
    O(gpufleet.upgrade.etcd_status#module:versions) waits for after that member moved.
  returned: always
  type: dict
all_at_target:
  description: Every member's client URL -> the target, the check after the last member.
  returned: always
  type: dict
storage_version:
  description: The storage version every member reports once the cluster moved (X.Y.0; empty before etcd 3.6).
  returned: always
  type: str
revision:
  description: The highest revision a member reported before the upgrade (each check after a member wants at
    least this).
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import etcd_upgrade
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(
            target=dict(type="str", required=True),
            members=dict(type="list", elements="dict", required=True),
            endpoints=dict(type="list", elements="dict", required=True),
            apiserver_pods=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        return etcd_upgrade.plan(p["target"], etcd_upgrade.members_of(p["members"]), p["endpoints"],
                                 p["apiserver_pods"])

    run_module(module, body)


if __name__ == "__main__":
    main()
