#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: audit_callers
short_description: Read who called a deprecated Kubernetes API from a control-plane host's audit log
version_added: 0.2.0
description:
  - Runs on a control-plane host. Reads the audit settings of its kube-apiserver static pod manifest (as kubeadm
    writes them from the ClusterConfiguration's C(apiServer.extraArgs) and C(extraVolumes)) - the log and policy
    files, found on the host through the pod's hostPath volumes - then the log and the backups the apiserver
    rotated beside it (C(.gz) when compressed), and returns one row per API, user, user agent, namespace and verb
    of every call within O(lookback_minutes) to an API version with a removal release (the
    C(k8s.io/removed-release) annotation, or the removal table), with the count (each request once) and the last
    time.
  - Fails closed, naming the host and the fix - auditing off, to stdout or inside the pod; a policy that can hide
    a deprecated call (the ResponseComplete stage omitted, a rule at level None for every resource or for a group
    with a version removed after the apiserver's own release, no rule that logs every resource request); no log
    file, no event, a line that is not an C(audit.k8s.io/v1) Event; a newest event older than 15 minutes (the
    apiserver writes elsewhere); a log that does not reach back over the lookback - as a failure, or with
    O(fail_on_error) false as an C(error) for M(gpufleet.upgrade.removed_apis) to report as a blocker.
  - M(gpufleet.upgrade.removed_apis) judges the rows against the target
    (O(gpufleet.upgrade.removed_apis#module:audit)).
options:
  host:
    description: The host's name in the report (its inventory name).
    type: str
    required: true
  manifest:
    description: The host's kube-apiserver static pod manifest, where the audit settings are read.
    type: path
    default: /etc/kubernetes/manifests/kube-apiserver.yaml
  lookback_minutes:
    description:
      - How far back calls count (the cell's C(gpufleet_audit_lookback_minutes)); the log must reach back that far.
        0 reads the whole log, whatever it covers (the result says from when).
    type: int
    default: 10080
  fail_on_error:
    description: Fail when the log cannot answer; false returns the reason in C(error) instead.
    type: bool
    default: true
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Read who called a deprecated API in the last week on each control-plane host
  gpufleet.upgrade.audit_callers:
    host: "{{ inventory_hostname }}"
    lookback_minutes: 10080
  become: true
  register: audit
"""

RETURN = r"""
host:
  description: The host read (its inventory name).
  returned: always
  type: str
log:
  description: The audit log's path (from the manifest).
  returned: success
  type: str
files:
  description: The files read, oldest first (the backups, then the current log).
  returned: success
  type: list
  elements: str
events_from:
  description: The time of the oldest event kept (its stageTimestamp, RFC 3339, UTC).
  returned: success
  type: str
events_to:
  description: The time of the newest event (RFC 3339, UTC).
  returned: success
  type: str
lookback_minutes:
  description: The lookback the reading was taken with (0 - the whole log).
  returned: success
  type: int
since:
  description: The start of the lookback (RFC 3339, UTC; empty with a lookback of 0).
  returned: success
  type: str
callers:
  description:
    - One row per API, caller, namespace and verb - api_version, resource, subresource, removed_release, user,
      user_agent, namespace, verb, count, last (RFC 3339, UTC).
  returned: success
  type: list
  elements: dict
truncated:
  description: Rows left out past the 500 kept (the rows kept are those of the earliest removals).
  returned: success
  type: int
truncated_removals:
  description: The removal releases of the rows left out.
  returned: success
  type: list
  elements: str
error:
  description: Why the log could not answer (with O(fail_on_error) false).
  returned: when the log could not answer
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import audit_callers
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import read_file


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            manifest=dict(type="path", default=audit_callers.MANIFEST),
            lookback_minutes=dict(type="int", default=audit_callers.DEFAULT_LOOKBACK_MINUTES),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        try:
            if not 0 <= p["lookback_minutes"] <= audit_callers.MAX_LOOKBACK_MINUTES:
                raise InputError("lookback_minutes: expected 0 to %d, got %d" % (
                    audit_callers.MAX_LOOKBACK_MINUTES, p["lookback_minutes"]))
            where = "%s: %s" % (p["host"], p["manifest"])
            settings = audit_callers.audit_settings(read_file(p["manifest"], where), where)
            audit_callers.check_policy(read_file(settings["policy"], "%s: audit policy" % p["host"]),
                                       "%s: %s" % (p["host"], settings["policy"]),
                                       audit_callers.removal_groups(settings["minor"]))
            return audit_callers.read_host(p["host"], settings, p["lookback_minutes"], audit_callers.utcnow())
        except GpufleetError as exc:  # a file that cannot be read or parsed: the reason, for the report
            if p["fail_on_error"]:
                raise
            return {"host": p["host"], "error": exc.msg, "callers": []}

    run_module(module, body)


if __name__ == "__main__":
    main()
