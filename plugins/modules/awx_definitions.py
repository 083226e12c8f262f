#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: awx_definitions
short_description: Compute the AWX job templates, surveys, workflow and schedule of one cell
version_added: 0.3.0
description:
  - Returns, for one cell, every AWX object gpufleet needs - a job template per playbook (preflight, etcd_backup,
    control_plane, canary, node_pool, upgrade_wave, validate, maintenance) with its survey (target version; the
    break-glass confirmations, empty by default; node and action for maintenance), the custom credential type
    that injects the etcd snapshot key without logging it, the workflow (preflight, etcd backup, control plane,
    canary, approval, node waves) and the maintenance window's schedule (disabled until enabled in AWX).
  - Pure computation; playbooks/awx_configure.yml applies the result with the awx.awx modules.
options:
  config:
    description:
      - C(organization), C(project), C(inventory), C(execution_environment), C(cell), C(target) (vX.Y.Z),
        C(credentials) (C(machine) and C(kubernetes) credential names, and C(aws) with C(snapshot_copies.s3)),
        C(window.rrule) (the maintenance window, an iCal rule AWX accepts - see below), C(backup_dir) (an absolute
        directory in the job), C(snapshot_copies) (C(backup_host), C(backup_host_dir), C(s3) with C(bucket),
        C(prefix), C(endpoint_url), C(region); at least one copy), and optionally C(playbook_dir) (default
        C(playbooks)).
      - Refused, naming the field, before anything is computed - an unknown field, a value of the wrong type, a name
        that is not ASCII letters, digits, space, C(.), C(_), C(-) (a trailing newline or full-width letters
        included), a control character in any value, and Jinja (C({{), C({%), C({#)) anywhere in O(config) or
        O(fleet) - AWX templates the extra vars it gives a job, so such a value would run as Jinja there.
      - C(window.rrule) is checked as AWX checks a schedule's rule, and refused in AWX's words - one DTSTART, with
        C(;TZID=ZONE) (a zone the controller's time zone data knows, such as C(UTC), C(Etc/GMT+5) or
        C(America/New_York)) or in UTC with a trailing C(Z); at least one RRULE, each with FREQ and INTERVAL; no
        SECONDLY, EXDATE, RDATE, BYYEARDAY, BYWEEKNO, several BYMONTHDAYs or BYMONTHs, BYDAY with a number before the
        day (C(2MO); a signed one such as C(-1SU), the last Sunday, passes, as in AWX), COUNT with UNTIL, or COUNT
        over 999; then it must parse with python-dateutil, as AWX parses it (a naive UNTIL is read in DTSTART's
        zone). Beyond AWX's checks, the rule must be in upper case (AWX finds COUNT and UNTIL only so), no part may
        be given twice, and a rule with no occurrence after now is refused - the maintenance window would never
        open - as is one whose next occurrence cannot be found within 10 seconds. For example
        C(DTSTART;TZID=UTC:20261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA) (Saturdays at 02:00 UTC).
    type: dict
    required: true
  fleet:
    description:
      - A fleet (C(gpufleet_fleet), docs/fleet.md). Given, the module returns the fleet's objects instead of a
        cell's - the fleet run and fleet report job templates, and the rollout workflow (one run per ring, each
        holding after its ring, an approval before each later ring, then the report). O(config) then has
        C(organization), C(project), C(inventory) (a localhost one), C(execution_environment), C(credentials)
        (C(machine) only - each cell connects through its own inventory), C(out_dir) (durable storage mounted
        into the job - the fleet ledger lives there) and C(latest_patches) (for the report).
    type: dict
attributes:
  check_mode:
    support: full
    description: Computes only.
  diff_mode:
    support: none
    description: Returns no diff.
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Compute the AWX objects of cell1
  gpufleet.upgrade.awx_definitions:
    config: "{{ gpufleet_awx }}"
  register: __awx

- name: Compute the AWX objects of cell1, its maintenance window Saturdays at 02:00 UTC
  gpufleet.upgrade.awx_definitions:
    config:
      organization: Default
      project: gpufleet
      inventory: cell1
      execution_environment: gpufleet
      cell: cell1
      target: v1.36.3
      credentials: {machine: cell1 ssh, kubernetes: cell1 api}
      window:
        rrule: DTSTART;TZID=UTC:20261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA
      backup_dir: /runner/etcd-backups
      snapshot_copies: {backup_host: backup-1, backup_host_dir: /srv/etcd-backups}
  register: __awx

- name: Compute the AWX objects of a fleet (playbooks/awx_configure_fleet.yml)
  gpufleet.upgrade.awx_definitions:
    config: "{{ gpufleet_awx_fleet }}"
    fleet: "{{ gpufleet_fleet }}"
  register: __awx
"""

RETURN = r"""
credential_type:
  description: The snapshot-key credential type (awx.awx.credential_type arguments).
  returned: for a cell
  type: dict
snapshot_credential:
  description: The cell's snapshot-key credential, without its secret (awx.awx.credential arguments).
  returned: for a cell
  type: dict
job_templates:
  description: One awx.awx.job_template argument set per playbook.
  returned: success
  type: list
  elements: dict
workflow:
  description: The awx.awx.workflow_job_template arguments, with its nodes.
  returned: success
  type: dict
schedule:
  description: The awx.awx.schedule arguments of the maintenance window.
  returned: for a cell
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.awx import definitions, fleet_definitions
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(argument_spec=dict(config=dict(type="dict", required=True), fleet=dict(type="dict")),
                           supports_check_mode=True)

    def body():
        if module.params["fleet"] is None:
            return definitions(module.params["config"])
        fleet = module.params["fleet"]
        return fleet_definitions(module.params["config"], fleet, plan_fleet(fleet))

    run_module(module, body)


if __name__ == "__main__":
    main()
