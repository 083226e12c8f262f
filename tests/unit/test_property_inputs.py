"""Hostile values are refused, never crash (issue 33): property tests of the entry points that take structured input
(the harness: tests/unit/property.py).

- cluster_checks: a real-shaped webhook configuration, CRD, EndpointSlice or PDB with one subtree replaced by random
  JSON is judged or refused with a clear error - and an input that keeps the evidence of a failure (a Fail webhook
  whose service has no ready endpoint, a stored version no longer served, a PDB that allows no disruption) never
  passes;
- awx_definitions: a valid configuration with one field replaced by random JSON, or by a string holding Jinja, a
  trailing newline or full-width letters, is computed or refused - never accepted with Jinja or a newline in it;
- the cell: the action's own path (plugins/plugin_utils/cell_action.py cell_of) with one cell variable replaced by
  random JSON or such a string (tests/unit/test_fuzz_parsers.py's "cell inventory" does the per-host variables).
"""
from __future__ import annotations

import pathlib
import re
from typing import Any, List

import pytest
from hypothesis import strategies as st

from ansible_collections.gpufleet.upgrade.plugins.plugin_utils import cell_action
from ansible_collections.gpufleet.upgrade.plugins.module_utils import awx
from ansible_collections.gpufleet.upgrade.plugins.module_utils.cluster_checks import (
    crd_findings, pdb_findings, summarize_findings, webhook_findings)
from tests.unit.property import check_property, json_tree, replaced

BLOCKING = ["webhook", "conversion-webhook", "crd-stored-versions"]
JINJA = re.compile(r"\{[{%#]")


def hostile_strings():
    """Strings a hostile or careless input holds: Jinja AWX or Ansible would run, a trailing newline, full-width
    letters and digits, Arabic-Indic digits."""
    text = st.text(alphabet="abc019-_. /", max_size=12)
    return st.one_of(
        st.builds(lambda a, j, b: a + j + b, text, st.sampled_from(
            ["{{ lookup('pipe', 'id') }}", "{% raw %}", "{# x #}", "{{", "{%", "{#"]), text),
        st.builds(lambda a: a + "\n", st.sampled_from(["lab", "cell1", "Default", "v1.36.3", "/runner/etcd"]) | text),
        st.builds(lambda a: a.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)}), text),  # full-width
        st.builds(lambda a: a.replace("1", "\u0661"), st.sampled_from(["v1.36.1", "cell1", "1G"])))


def _holds(value: Any, test) -> bool:
    if isinstance(value, dict):
        return any(_holds(k, test) or _holds(v, test) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds(v, test) for v in value)
    return isinstance(value, str) and test(value)


# -- cluster_checks: webhook configurations, EndpointSlices, CRDs, PDBs -----------------------------------------
def _config(name: str, svc: str, policy: str = "Fail") -> dict:
    return {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": name, "uid": "u-" + name},
            "webhooks": [{"name": name + ".example.com", "failurePolicy": policy, "sideEffects": "None",
                          "admissionReviewVersions": ["v1"], "rules": [{"operations": ["CREATE"], "apiGroups": ["*"],
                                                                        "apiVersions": ["*"], "resources": ["pods"]}],
                          "clientConfig": {"service": {"namespace": "gatekeeper", "name": svc, "port": 443},
                                           "caBundle": "LS0t"}}]}


def _slice(svc: str, ready: bool) -> dict:
    return {"kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": svc + "-x1", "namespace": "gatekeeper",
                         "labels": {"kubernetes.io/service-name": svc}},
            "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["10.0.0.%d" % i], "conditions": {"ready": ready, "serving": ready},
                           "nodeName": "cp-1"} for i in (1, 2)]}


CONFIGS = [_config("gk", "gk-svc"), _config("soft", "soft-svc", "Ignore"), _config("alive", "alive-svc")]
SLICES = [_slice("gk-svc", False), _slice("alive-svc", True),
          {"metadata": {"name": "headless", "namespace": "gatekeeper"}, "endpoints": []}]
CRDS = [{"kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
         "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}, "scope": "Namespaced",
                  "versions": [{"name": "v1", "served": True, "storage": True},
                               {"name": "v1beta1", "served": False, "storage": False}],
                  "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                                                    "clientConfig": {"service": {
                                                                        "namespace": "widgets", "name": "conv"}}}}},
         "status": {"storedVersions": ["v1beta1", "v1"], "acceptedNames": {"kind": "Widget"}}}]
PDBS = [{"kind": "PodDisruptionBudget", "metadata": {"namespace": "web", "name": "strict"},
         "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
         "status": {"disruptionsAllowed": 0, "expectedPods": 3, "currentHealthy": 3, "desiredHealthy": 3}},
        {"kind": "PodDisruptionBudget", "metadata": {"namespace": "web", "name": "fine"},
         "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1, "expectedPods": 2}}]


def _get(node: Any, *keys: Any) -> Any:
    for key in keys:
        if isinstance(key, int):
            node = node[key] if isinstance(node, list) and len(node) > key else None
        else:
            node = node.get(key) if isinstance(node, dict) else None
    return node


def _dead_hook_kept(configs: Any) -> bool:
    """The gk webhook still calls gatekeeper/gk-svc and does not ignore failures."""
    hook = _get(configs, 0, "webhooks", 0)
    return (_get(hook, "clientConfig", "service", "namespace") == "gatekeeper"
            and _get(hook, "clientConfig", "service", "name") == "gk-svc"
            and isinstance(hook, dict) and hook.get("failurePolicy", "Fail") != "Ignore")


def _may_be_ready(es: Any) -> bool:
    """Whether a slice might give gatekeeper/gk-svc a ready endpoint (any doubt: yes)."""
    if _get(es, "metadata", "namespace") != "gatekeeper" or \
            _get(es, "metadata", "labels", "kubernetes.io/service-name") != "gk-svc":
        return False
    endpoints = _get(es, "endpoints")
    return isinstance(endpoints, list) and any(
        isinstance(ep, dict) and (ep.get("conditions") is None or (
            isinstance(ep["conditions"], dict) and ep["conditions"].get("ready") in (None, True)))
        for ep in endpoints)


def _no_ready_gk(slices: Any) -> bool:
    return not isinstance(slices, list) or not any(_may_be_ready(es) for es in slices)


def _unserved_or_dead_conversion(crds: Any) -> bool:
    crd = _get(crds, 0)
    stored = _get(crd, "status", "storedVersions")
    versions = _get(crd, "spec", "versions")
    unserved = isinstance(stored, list) and "v1beta1" in stored and not (isinstance(versions, list) and any(
        isinstance(v, dict) and v.get("name") == "v1beta1" and v.get("served") is True for v in versions))
    service = _get(crd, "spec", "conversion", "webhook", "clientConfig", "service")
    dead = _get(crd, "spec", "conversion", "strategy") == "Webhook" and isinstance(service, dict) and bool(service)
    return unserved or dead


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pdb_at_zero(pdbs: Any) -> bool:
    allowed, expected = _get(pdbs, 0, "status", "disruptionsAllowed"), _get(pdbs, 0, "status", "expectedPods")
    return _count(allowed) and allowed <= 0 and _count(expected) and expected != 0


def _judge_webhooks(configs):
    return summarize_findings(webhook_findings(configs, [], SLICES), [], [], BLOCKING)["passed"]


def _judge_slices(slices):
    return summarize_findings(webhook_findings(CONFIGS[:1], [], slices), [], [], BLOCKING)["passed"]


def _judge_crds(crds):
    return summarize_findings(webhook_findings([], crds, []), crd_findings(crds), [], BLOCKING)["passed"]


def _judge_pdbs(pdbs):
    return not pdb_findings(pdbs)


# -- awx_definitions ---------------------------------------------------------------------------------------------
AWX = {"organization": "Default", "project": "gpufleet", "inventory": "cell1", "execution_environment": "gpufleet",
       "cell": "cell1", "target": "1.36.3",
       "credentials": {"machine": "cell1 ssh", "kubernetes": "cell1 api", "aws": "backups s3"},
       "window": {"rrule": "DTSTART;TZID=UTC:20261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA"},
       "backup_dir": "/runner/etcd-backups", "playbook_dir": "playbooks",
       "snapshot_copies": {"backup_host": "backup-1", "backup_host_dir": "/srv/etcd",
                           "s3": {"bucket": "etcd-backups", "prefix": "cell1/", "endpoint_url": "https://s3.example.net",
                                  "region": "eu-west-1"}}}


def _judge_awx(config):
    out = awx.definitions(config)
    leaked: List[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(k)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and (JINJA.search(node) or "\n" in node) and node != "{{ key }}":
            leaked.append(node)
    walk(out)
    assert not leaked, "Jinja or a newline reached the AWX definitions: %r" % leaked[:3]
    return True


def _jinja_or_newline(config: Any) -> bool:
    return _holds(config, lambda s: bool(JINJA.search(s)) or "\n" in s)


# -- the cell ----------------------------------------------------------------------------------------------------
BASELINE_DIR = str(pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "baselines")
HOSTS = {"cp-1": {}, "gpu-a1": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-a"},
         "gpu-b1": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-b"}}
CELL = {"gpufleet_cluster_name": "lab", "gpufleet_target_version": "v1.36.3", "gpufleet_baseline_dir": BASELINE_DIR,
        "gpufleet_wave_caps": {"max_gpu_fraction": 0.5}}


def _cell_vars(var: str, value: Any) -> dict:
    return dict(CELL, **{var: value})


def _judge_cell(cell_vars):
    """cell_of, as the action calls it: the variables on every host (cell-wide), the template step a no-op."""
    task_vars = dict(cell_vars, groups={"kube_control_plane": ["cp-1"], "etcd": ["cp-1"],
                                        "gpu_nodes": ["gpu-a1", "gpu-b1"]},
                     hostvars={h: dict(cell_vars, **hv) for h, hv in HOSTS.items()})
    cell = cell_action.cell_of(task_vars, {}, lambda value: value)
    assert re.fullmatch(r"[a-z0-9-]{1,63}", cell.name), cell.name
    return True


def _bad_cell_name(cell_vars: Any) -> bool:
    name = cell_vars.get("gpufleet_cluster_name")
    return isinstance(name, str) and (not name.isascii() or "\n" in name)


CELL_VARIABLES = list(cell_action.CELL_VARS) + ["gpufleet_baseline_dir"]

TARGETS = {
    "cluster_checks webhook configurations": (replaced(CONFIGS, json_tree()), _judge_webhooks, _dead_hook_kept),
    "cluster_checks EndpointSlices": (replaced(SLICES, json_tree()), _judge_slices, _no_ready_gk),
    "cluster_checks CRDs": (replaced(CRDS, json_tree()), _judge_crds, _unserved_or_dead_conversion),
    "cluster_checks PDBs": (replaced(PDBS, json_tree()), _judge_pdbs, _pdb_at_zero),
    "awx_definitions (random JSON)": (replaced(AWX, json_tree()), _judge_awx, _jinja_or_newline),
    "awx_definitions (hostile strings)": (replaced(AWX, hostile_strings()), _judge_awx, _jinja_or_newline),
    "cell variables": (st.builds(_cell_vars, st.sampled_from(CELL_VARIABLES), st.one_of(json_tree(),
                                                                                         hostile_strings())),
                       _judge_cell, _bad_cell_name),
}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_hostile_values_are_refused_never_crash(name):
    strategy, judge, must_fail = TARGETS[name]
    check_property(name, strategy, judge, must_fail)
