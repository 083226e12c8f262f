#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_plan
short_description: Plan a fleet's upgrade - rings in order, cells in batches under the caps, each cell's path
version_added: 0.3.0
description:
  - Validates the fleet (every cell with its ring, kind, region, DR partner, GPUs, inventory and running versions;
    the fleet policy) and refuses bad input naming the cell and the field, before anything runs - a cell in no
    ring, both halves of a DR pair in one ring, a cell bigger than the GPU cap, a cell already out of the skew
    policy, a ring target below a cell's control plane.
  - Plans rings in order. In each ring its cells (canary, dev, staging, inference, then training; by name within a
    kind) go in batches that upgrade at once - at most C(policy.max_cells_in_flight) cells
    (C(policy.patch_max_cells_in_flight) when every cell of the batch takes a patch release only), at most
    C(policy.max_gpu_fraction_in_flight) of the fleet's GPUs, and one training cell at a time.
  - Per cell its control-plane path (one minor at a time), each pool's drains under the skew policy (skip-level
    pools jump up to three minors in one drain) and the pools that must move before its next control-plane hop.
  - Deterministic for the same input; changes nothing.
options:
  fleet:
    description:
      - The fleet, as C(gpufleet_fleet) in the fleet inventory - C(name), C(policy) (C(target), C(rings) with
        C(name), C(soak_seconds), C(target); C(max_cells_in_flight), C(patch_max_cells_in_flight),
        C(max_gpu_fraction_in_flight), C(training_one_at_a_time), C(hop_versions), C(halt) thresholds) and
        C(cells) (C(name), C(ring), C(kind),
        C(region), C(dr_partner), C(gpus), C(inventory), C(control_plane), C(pools) with C(name), C(kubelet),
        C(nodes), C(skip_level)). docs/fleet.md describes every field.
    type: dict
    required: true
  out_dir:
    description:
      - Where the fleet run keeps its ledger, readings and the cells' run logs (C(FLEET) below it) -
        C(gpufleet_out_dir), else the environment's C(GPUFLEET_OUT_DIR), else C(out) of the working directory, as
        for one cell. Returned as C(paths).
    type: str
  until_ring:
    description:
      - The ring this run stops after (C(gpufleet_fleet_until_ring)) - once every ring up to it is done and soaked,
        the ledger's next step is C(held) and the run ends without error; a later run without it (or with a later
        ring) goes on. An AWX workflow puts its approvals there. A ring the fleet does not have is refused.
      - Returned as C(run.until_ring) (null - every ring).
    type: str
  working_dir:
    description:
      - The directory a relative O(out_dir), a relative C(cells[].inventory) and the default C(out) are taken from,
        and where the cells' own runs start. Set by the module's action plugin to the controller's working
        directory (the module itself runs in the playbook's directory); default the module's own.
    type: path
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Plan the fleet
  gpufleet.upgrade.fleet_plan:
    fleet: "{{ gpufleet_fleet }}"
  delegate_to: localhost
  run_once: true
  register: gpufleet_fleet_plan
"""

RETURN = r"""
rings:
  description: The rings in order - ring, target, soak_seconds, cells, at_target (cells with nothing to do),
    batches (lists of cell names that upgrade at once, in order), gpus.
  returned: success
  type: list
  elements: dict
cells:
  description: Per cell - ring, kind, region, inventory (absolute), readings (the fleet run's files of its halt
    readings, before and after, and the versions the fleet report read), gpus, current, target, at_target, patch_only,
    control_plane_path, pools (pool, current, skip_level, nodes, steps, must_upgrade_before_hop),
    node_upgrade_before_next_hop (pools), node_drains.
  returned: success
  type: dict
caps:
  description: The caps as applied - max_cells_in_flight, patch_max_cells_in_flight, max_gpus_in_flight,
    training_one_at_a_time.
  returned: success
  type: dict
node_upgrade_before_next_hop:
  description: Cells with a pool that must move before the cell's next control-plane hop.
  returned: success
  type: list
  elements: str
summary:
  description: One line describing the plan.
  returned: success
  type: str
paths:
  description: The fleet run's files - C(dir), C(ledger), C(readings) (a directory), C(logs) (a directory), C(report)
    (the fleet report's directory).
  returned: success
  type: dict
halt_policy:
  description: The halt conditions' thresholds as applied, with C(disabled) (threshold to the reason it is switched
    off).
  returned: success
  type: dict
disabled_halts:
  description: Each halt the policy switches off (C(threshold), C(value), C(reason)); a threshold that switches its
    halt off without a reason in C(policy.halt.disabled) is refused.
  returned: success
  type: list
  elements: dict
run:
  description: The fleet run's settings - C(halt_check_seconds), C(metrics_window_seconds), C(cell_timeout_seconds),
    C(max_steps) (the playbook's bound on its steps), C(working_dir) (where the cells' runs start),
    C(until_ring).
  returned: success
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_run
from ansible_collections.gpufleet.upgrade.plugins.module_utils.cell import out_dir
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(argument_spec=dict(fleet=dict(type="dict", required=True), out_dir=dict(type="str"),
                                              until_ring=dict(type="str"), working_dir=dict(type="path")),
                           supports_check_mode=True)

    def body():
        plan = plan_fleet(module.params["fleet"])
        cwd = module.params["working_dir"] or os.getcwd()
        base = out_dir(module.params["out_dir"], dict(os.environ), cwd)
        plan["paths"] = fleet_run.paths(base, plan["fleet"])
        plan["run"]["max_steps"] = fleet_run.max_steps(plan)
        plan["run"]["working_dir"] = cwd  # the cells' runs start here, as this run did
        plan["run"]["until_ring"] = fleet_run.until_ring(plan, module.params["until_ring"])
        for name, cell in plan["cells"].items():  # a relative inventory is the working directory's, as for -i
            cell["inventory"] = os.path.normpath(os.path.join(cwd, cell["inventory"]))
            cell["readings"] = {which: fleet_run.readings_file(plan["paths"]["readings"], name, cell["target"], which)
                                for which in ("before", "after")}
            cell["readings"]["versions"] = fleet_run.versions_file(plan["paths"]["report"], name)
        return plan

    run_module(module, body)


if __name__ == "__main__":
    main()
