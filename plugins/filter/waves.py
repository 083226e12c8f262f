# Copyright: gpufleet contributors
# Apache License 2.0
"""Filters: plan_waves, kube_minor, version_inventory, preflight_markdown."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.planner import parse_caps, parse_nodes, plan_waves
from ansible_collections.gpufleet.upgrade.plugins.module_utils.preflight_report import (
    render_markdown, version_inventory)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version


def plan_waves_filter(nodes, caps=None):
    try:
        return plan_waves(parse_nodes(nodes), parse_caps(caps))
    except GpufleetError as exc:
        raise AnsibleFilterError("plan_waves: %s" % exc.msg)


def kube_minor(version):
    """``v1.34.2`` -> ``1.34``."""
    try:
        return parse_version(version).minor_str
    except GpufleetError as exc:
        raise AnsibleFilterError("kube_minor: %s" % exc.msg)


def version_inventory_filter(hosts, target, gpu_targets=None):
    """Rows of the preflight version inventory (see module_utils/preflight_report.py)."""
    try:
        return version_inventory(hosts, target, gpu_targets)
    except GpufleetError as exc:
        raise AnsibleFilterError("version_inventory: %s" % exc.msg)


def preflight_markdown(report):
    """The preflight report dict rendered as Markdown."""
    return render_markdown(report)


class FilterModule:
    def filters(self):
        return {"plan_waves": plan_waves_filter, "kube_minor": kube_minor,
                "version_inventory": version_inventory_filter, "preflight_markdown": preflight_markdown}
