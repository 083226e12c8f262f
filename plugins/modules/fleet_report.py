#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_report
short_description: Report a fleet's versions, skew, support and patch SLOs - JSON, Markdown and an HTML page
version_added: 0.3.0
description:
  - Per cell its control-plane version, the kubelet spread of each pool, days to end of life, days behind its
    minor's latest patch, ring and state; for the fleet the version spread and each ring's progress.
  - Alerts, from the patch SLOs - a cell out of support, or more than O(patch_slo_days) days behind its latest
    patch - and for anything it could not read (a cell with no reading, a minor missing from the release calendar
    or from O(latest_patches), a version that does not parse). The module fails when there is an alert, so a
    scheduled job (an AWX schedule of a check-mode run) exits non-zero.
  - Writes C(fleet-report.json), C(fleet-report.md) and C(fleet-report.html) into O(dest); in check mode writes
    nothing and still fails on an alert.
options:
  fleet:
    description: The fleet, as C(gpufleet_fleet) (see the M(gpufleet.upgrade.fleet_plan) module and docs/fleet.md).
    type: dict
    required: true
  readings:
    description:
      - Per cell name its reading - C(control_plane), C(kubelets) (pool to the list of its kubelets' versions),
        C(state) (pending, upgrading, soaking, done, failed, halted), C(reason), C(change_record).
      - Unset (and no O(versions)), the versions declared in the fleet are reported, every cell C(pending).
    type: dict
  ledger:
    description:
      - The fleet ledger (C(out/fleet/FLEET/ledger.json) of M(gpufleet.upgrade.fleet_ledger)), for each cell's state,
        reason and last change record; a halted cell is reported C(halted), a done cell whose ring soaks C(soaking).
      - Read back as the fleet run reads it - a ledger of another fleet or version is refused, a cell done on an
        older target is C(pending) again. A C(failed) or C(halted) cell is an alert, so a scheduled report fails
        while the fleet is stopped.
      - Only with O(versions); unset with O(versions), the fleet never ran - cells already at their target are
        C(done), the others C(pending).
    type: dict
  versions:
    description:
      - Per cell name the versions read from its own API (C(readings.versions) of M(gpufleet.upgrade.fleet_readings)
        - C(control_plane), C(kubelets), C(no_node)); a cell missing here, or null, is an alert (its versions could
        not be read), as is an inventory host in C(no_node) or a pool of the fleet with no kubelet read.
      - Mutually exclusive with O(readings).
    type: dict
  latest_patches:
    description:
      - "Each running minor's latest patch release and its date, such as
        C({'1.36': {'version': 'v1.36.3', 'released': '2026-07-22'}}). A running minor missing here is an alert."
    type: dict
    required: true
  today:
    description: The day to report for (YYYY-MM-DD). Default today on the controller.
    type: str
  patch_slo_days:
    description: Days a cell may stay behind its minor's latest patch.
    type: int
    default: 30
  dest:
    description: Absolute path of the directory the three files go to (created when missing).
    type: path
    required: true
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Report the fleet (a scheduled AWX job runs it in check mode and fails on an alert)
  gpufleet.upgrade.fleet_report:
    fleet: "{{ gpufleet_fleet }}"
    latest_patches:
      "1.35": {version: v1.35.9, released: "2026-11-10"}
      "1.36": {version: v1.36.5, released: "2026-11-12"}
    dest: /var/lib/gpufleet/reports
  delegate_to: localhost
  run_once: true

- name: Report the fleet from its ledger and the versions read from each cell (playbooks/fleet_report.yml)
  gpufleet.upgrade.fleet_report:
    fleet: "{{ gpufleet_fleet }}"
    ledger: "{{ lookup('ansible.builtin.file', '/srv/gpufleet/out/fleet/prod/ledger.json') | from_json }}"
    versions:
      gpu-east-1: {control_plane: v1.36.3, kubelets: {h100-train: [v1.36.3, v1.36.3]}}
    latest_patches:
      "1.36": {version: v1.36.5, released: "2026-11-12"}
    dest: /var/lib/gpufleet/reports
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
report:
  description: The report - fleet, today, patch_slo_days, cells (cell, ring, kind, region, state, control_plane,
    pools with pool/oldest/newest/nodes/minors_behind, support, days_to_eol, eol, latest_patch,
    days_behind_latest_patch, change_record, alerts), version_spread, rings (ring, target, cells, states), alerts,
    disabled_halts (each halt the fleet's policy switches off, with its threshold, value and reason).
  returned: always
  type: dict
files:
  description: The files written (none in check mode).
  returned: always
  type: list
  elements: str
"""

import datetime
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet_report import DEFAULT_PATCH_SLO_DAYS, \
    build_report, readings_from_ledger, write_files
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet


def main():
    module = AnsibleModule(
        argument_spec=dict(
            fleet=dict(type="dict", required=True),
            readings=dict(type="dict"),
            ledger=dict(type="dict"),
            versions=dict(type="dict"),
            latest_patches=dict(type="dict", required=True),
            today=dict(type="str"),
            patch_slo_days=dict(type="int", default=DEFAULT_PATCH_SLO_DAYS),
            dest=dict(type="path", required=True),
        ),
        mutually_exclusive=[("readings", "versions"), ("readings", "ledger")],
        required_by={"ledger": "versions"},
        supports_check_mode=True,
    )
    p = module.params
    if not os.path.isabs(p["dest"]):
        module.fail_json(msg="dest: %s is not an absolute path; give the report directory's full path" % p["dest"])
    try:
        readings = p["readings"]
        if p["versions"] is not None:  # the fleet is checked (plan_fleet) before its ledger is read against it
            readings = readings_from_ledger(plan_fleet(p["fleet"]), p["ledger"], p["versions"])
        report = build_report(p["fleet"], readings, p["latest_patches"],
                              p["today"] or datetime.date.today().isoformat(), p["patch_slo_days"])
    except GpufleetError as exc:
        module.fail_json(msg=exc.msg, error_type=type(exc).__name__)
        return
    written = {"files": [], "changed": False} if module.check_mode else write_files(p["dest"], report)
    files, changed = written["files"], written["changed"]
    if report["alerts"]:
        message = "fleet %s: %d alert(s): %s" % (report["fleet"], len(report["alerts"]), "; ".join(report["alerts"]))
        module.fail_json(msg=message, report=report, files=files, changed=changed)
    module.exit_json(changed=changed, report=report, files=files)


if __name__ == "__main__":
    main()
