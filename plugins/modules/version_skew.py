#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: version_skew
short_description: Check Kubernetes version skew and plan the upgrade path
version_added: 0.1.0
description:
  - Given the observed version of every component on every node and a target version, reports every breach of
    the Kubernetes version-skew policy (1.28 and later), plans the control-plane path one minor at a time, and
    plans every node pool's kubelet upgrades, including skip-level upgrades of up to three minors in one drain.
  - Refuses downgrades, targets that skip a control-plane minor (unless O(allow_multi_hop)), kubelets newer
    than the apiserver, and a next control-plane hop that would leave a kubelet more than three minors behind (two
    below 1.25) until its node moves, with a message that says what to do instead.
  - In a skip-level cycle (the cell's C(cycle_target) above its target), plans the whole cycle and checks that this
    run is its next control-plane hop and that every pool staying behind (C(holding_pools)) may wait for the last
    hop; the plan then says which pools move in this run.
  - Also reports days to end of life of the current and target minors.
options:
  cell:
    description:
      - The cell (M(gpufleet.upgrade.cell)); with O(observed) it gives the components, and the target, pool policies
        and C(allow_multi_hop) when those options are not set.
    type: dict
  observed:
    description:
      - With O(cell), the versions read - C(apiservers) (host to version), C(kubelets) (node to version) and
        optionally C(kubectl). Every control-plane host's apiserver must be there.
    type: dict
  components:
    description:
      - Observed versions, one item per component and node (instead of O(cell) and O(observed)).
    type: list
    elements: dict
    suboptions:
      component:
        description: One of kube-apiserver, kube-controller-manager, kube-scheduler, cloud-controller-manager,
          kubelet, kube-proxy, kubectl.
        type: str
        required: true
      node:
        description: The node the component runs on (not needed for kubectl).
        type: str
      version:
        description: The version, such as v1.33.5.
        type: str
        required: true
      pool:
        description: The node pool of a kubelet, for the per-pool plan.
        type: str
  target:
    description: The version to upgrade to, such as v1.34.2 (default the cell's target).
    type: str
  allow_multi_hop:
    description: Plan a path over several control-plane minors instead of refusing a target more than one minor up
      (default the cell's C(allow_multi_hop), else false).
    type: bool
  hop_versions:
    description: Exact versions for intermediate hops, keyed by minor, for example C(1.34) to C(v1.34.3).
    type: dict
    default: {}
  pools:
    description:
      - Per-pool policy keyed by pool name (default the cell's C(pool_policies)). C(skip_level) (default true) lets a
        pool stay behind and jump up to three minors in one drain; false makes it follow the control plane one minor
        at a time.
    type: dict
  fail_on_violation:
    description: Fail when the cluster is already out of the skew policy.
    type: bool
    default: true
  today:
    description: Date (YYYY-MM-DD) for the support calendar; defaults to today.
    type: str
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Plan v1.33 -> v1.34 and check today's skew
  gpufleet.upgrade.version_skew:
    components:
      - {component: kube-apiserver, node: cp-1, version: v1.33.5}
      - {component: kubelet, node: gpu-a1, version: v1.33.5, pool: h100-train}
    target: v1.34.2
  register: skew

- name: Plan a three-minor path; the training pool upgrades once, at the end
  gpufleet.upgrade.version_skew:
    components: "{{ gpufleet_observed_components }}"
    target: v1.36.1
    allow_multi_hop: true
    pools:
      inference: {skip_level: false}
"""

RETURN = r"""
violations:
  description: Current breaches of the skew policy.
  returned: always
  type: list
  elements: dict
  sample: [{component: kubelet, node: gpu-a1, version: v1.35.0, rule: kubelet must never be newer than the apiserver,
            reference: oldest apiserver v1.34.2 on cp-1, fix: upgrade the control plane to v1.35 first}]
plan:
  description: The upgrade plan.
  returned: success
  type: dict
  contains:
    control_plane_path:
      description: Versions the control plane passes through, one minor per hop.
      type: list
      elements: str
    pools:
      description: Per pool, the kubelet upgrade steps and the hop before which the pool must be upgraded.
      type: list
      elements: dict
    node_drains:
      description: Total pool upgrade steps (each is one drain of the pool's nodes).
      type: int
    hop:
      description: In a skip-level cycle, the hop this run makes (1) of C(hops); absent otherwise.
      type: int
    moving:
      description: In a skip-level cycle, the pools this run upgrades to the target.
      type: list
      elements: str
    holding:
      description: In a skip-level cycle, the pools that stay at their kubelet until the cycle's last hop.
      type: list
      elements: str
support:
  description: End-of-life status of the current and target minors.
  returned: success
  type: dict
"""

import datetime

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.cell import components
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, PolicyError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module
from ansible_collections.gpufleet.upgrade.plugins.module_utils.support_calendar import parse_date, support_status
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import (
    next_hop_breaches, parse_observed, parse_pool_policies, parse_version, plan_cycle_hop, plan_upgrade,
    skew_violations)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cell=dict(type="dict"),
            observed=dict(type="dict"),
            components=dict(type="list", elements="dict", options=dict(
                component=dict(type="str", required=True), node=dict(type="str"),
                version=dict(type="str", required=True), pool=dict(type="str"))),
            target=dict(type="str"),
            allow_multi_hop=dict(type="bool"),
            hop_versions=dict(type="dict", default={}),
            pools=dict(type="dict"),
            fail_on_violation=dict(type="bool", default=True),
            today=dict(type="str"),
        ),
        required_one_of=[("components", "cell")],
        mutually_exclusive=[("components", "cell")],
        required_together=[("cell", "observed")],
        supports_check_mode=True,
    )

    def body():
        p = module.params
        cell = p["cell"] or {}
        items = p["components"] if p["components"] is not None else components(cell, p["observed"])
        observed = parse_observed(items)
        if not (p["target"] or cell.get("target")):
            raise InputError("target: required (or give the cell)")
        target = parse_version(p["target"] or cell["target"], "target")
        allow_multi_hop = p["allow_multi_hop"] if p["allow_multi_hop"] is not None else bool(
            cell.get("allow_multi_hop"))
        pools = p["pools"] if p["pools"] is not None else cell.get("pool_policies") or {}
        violations = [v.as_dict() for v in skew_violations(observed)]
        if violations and p["fail_on_violation"]:
            raise PolicyError("the cluster is already out of the version-skew policy: " + "; ".join(
                "%s on %s is %s: %s. %s" % (v["component"], v["node"] or "client", v["version"], v["rule"], v["fix"])
                for v in violations), violations=violations)
        cycle = target if p["target"] else parse_version(cell.get("cycle_target") or str(target), "cell.cycle_target")
        if cycle != target:
            plan = plan_cycle_hop(observed, target, cycle, cell.get("holding_pools") or [],
                                  pools=parse_pool_policies(pools))
            if not plan["resumed"]:  # this run's control-plane hop is its target; none when it is there already
                next_hop_breaches(observed, plan, target)
        else:
            plan = plan_upgrade(observed, target, allow_multi_hop=allow_multi_hop, hop_versions=p["hop_versions"],
                                pools=parse_pool_policies(pools))
            next_hop_breaches(observed, plan)
        today = parse_date(p["today"]) if p["today"] else datetime.date.today()
        support = {"current": support_status(plan["current"], today), "target": support_status(target, today)}
        return {"violations": violations, "plan": plan, "support": support}

    run_module(module, body)


if __name__ == "__main__":
    main()
