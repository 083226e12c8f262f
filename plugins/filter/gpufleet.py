# Copyright: gpufleet contributors
# Apache License 2.0
"""Filters: version_inventory, preflight_markdown, failure_reason, snapshots_expired, kubeadm_upgrade_configuration."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import snapshots_expired
from ansible_collections.gpufleet.upgrade.plugins.module_utils.kubeadm_config import upgrade_configuration
from ansible_collections.gpufleet.upgrade.plugins.module_utils.nodes import failure_text
from ansible_collections.gpufleet.upgrade.plugins.module_utils.preflight_report import (
    render_markdown, version_inventory)


def version_inventory_filter(hosts, target, gpu_targets=None):
    """Rows of the preflight version inventory (see module_utils/preflight_report.py)."""
    try:
        return version_inventory(hosts, target, gpu_targets)
    except GpufleetError as exc:
        raise AnsibleFilterError("version_inventory: %s" % exc.msg)


def preflight_markdown(report):
    """The preflight report dict rendered as Markdown."""
    return render_markdown(report)


def failure_reason(result, task):
    """Why a task failed, for a Node annotation; censored when the task was no_log (see module_utils/nodes.py)."""
    return failure_text(task, dict(result) if hasattr(result, "items") else result)


def snapshots_expired_filter(names, keep_count, keep_days):
    """The etcd snapshots beyond retention (see module_utils/etcd.py)."""
    try:
        return snapshots_expired(names, keep_count, keep_days)
    except GpufleetError as exc:
        raise AnsibleFilterError("snapshots_expired: %s" % exc.msg)


def kubeadm_upgrade_configuration(configuration, extra_args=None):
    """kubeadm's UpgradeConfiguration with etcd kept out (see module_utils/kubeadm_config.py)."""
    try:
        return upgrade_configuration(configuration, list(extra_args or []))
    except GpufleetError as exc:
        raise AnsibleFilterError("kubeadm_upgrade_configuration: %s" % exc.msg)


class FilterModule:
    def filters(self):
        return {"version_inventory": version_inventory_filter, "preflight_markdown": preflight_markdown,
                "failure_reason": failure_reason, "snapshots_expired": snapshots_expired_filter,
                "kubeadm_upgrade_configuration": kubeadm_upgrade_configuration}
