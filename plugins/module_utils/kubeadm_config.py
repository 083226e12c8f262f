# Copyright: gpufleet contributors
# Apache License 2.0
"""kubeadm's UpgradeConfiguration (kubeadm.k8s.io/v1beta4, kubeadm 1.31 and later) as the kubeadm_upgrade role hands
it to ``kubeadm upgrade apply --config`` and ``kubeadm upgrade node --config``.

The operator's fields are kept; the role's own are set on top: ``apply.etcdUpgrade`` and ``node.etcdUpgrade`` are
false, since etcd is upgraded in its own window, never with Kubernetes (a stacked member would otherwise move with
its control-plane host). With ``--config`` kubeadm refuses most flags (its ValidateMixedArguments allows only a few,
``--ignore-preflight-errors``, ``--v`` and ``--dry-run`` among them), so an extra argument whose setting has a
field here is refused before anything changes, naming the field to set instead."""
from __future__ import annotations

import copy
from typing import Any, Dict, List

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

API_VERSION = "kubeadm.k8s.io/v1beta4"
KIND = "UpgradeConfiguration"
# The sections of a v1beta4 UpgradeConfiguration (kubeadm's cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go).
SECTIONS = ("apply", "node", "plan", "diff", "timeouts")
# The flags of kubeadm upgrade apply/node (1.36's --help) that kubeadm refuses beside --config, each with the
# configuration field that says the same.
FLAG_FIELDS = {
    "--etcd-upgrade": "nothing (the role always sets apply.etcdUpgrade and node.etcdUpgrade false)",
    "--certificate-renewal": "apply.certificateRenewal / node.certificateRenewal",
    "--force": "apply.forceUpgrade",
    "-f": "apply.forceUpgrade",
    "--allow-experimental-upgrades": "apply.allowExperimentalUpgrades",
    "--allow-release-candidate-upgrades": "apply.allowRCUpgrades",
    "--patches": "apply.patches.directory / node.patches.directory",
    "--print-config": "apply.printConfig",
    "--config": "kubeadm_upgrade_config_path (the role passes --config itself)",
    "--vmodule": "nothing (use --v)",
}


def upgrade_configuration(configuration: Any, extra_args: List[str]) -> Dict[str, Any]:
    """The UpgradeConfiguration document for ``configuration`` (the operator's fields, a dict, may be empty) with
    etcd kept out; ``extra_args`` are the apply and node extra arguments, checked against it. InputError names the
    field and the fix."""
    if configuration is None:
        configuration = {}
    if not isinstance(configuration, dict):
        raise InputError("kubeadm_upgrade_configuration must be a mapping of UpgradeConfiguration fields (got %s)"
                         % type(configuration).__name__)
    doc = copy.deepcopy(configuration)
    for key in ("apiVersion", "kind"):
        given = doc.pop(key, None)
        if given not in (None, {"apiVersion": API_VERSION, "kind": KIND}[key]):
            raise InputError("kubeadm_upgrade_configuration.%s is %r; the role writes %s %s (leave it out)" % (
                key, given, API_VERSION, KIND))
    unknown = sorted(set(doc) - set(SECTIONS))
    if unknown:
        raise InputError("kubeadm_upgrade_configuration has unknown field(s) %s; an UpgradeConfiguration (%s) has "
                         "%s" % (", ".join(unknown), API_VERSION, ", ".join(SECTIONS)))
    for section in SECTIONS:
        if not isinstance(doc.get(section, {}), dict):
            raise InputError("kubeadm_upgrade_configuration.%s must be a mapping (got %s)" % (
                section, type(doc[section]).__name__))
    for section in ("apply", "node"):
        if "etcdUpgrade" in doc.get(section, {}):
            raise InputError("kubeadm_upgrade_configuration.%s.etcdUpgrade is set; remove it: the role always "
                             "sets it false, since etcd is upgraded in its own window "
                             "never with Kubernetes" % section)
    for arg in extra_args or []:
        flag = str(arg).split("=", 1)[0]
        if flag in FLAG_FIELDS:
            raise InputError("extra kubeadm argument %s: kubeadm takes no such flag beside --config; set %s in "
                             "kubeadm_upgrade_configuration instead" % (arg, FLAG_FIELDS[flag]))
    for section in ("apply", "node"):
        doc.setdefault(section, {})["etcdUpgrade"] = False
    return {"apiVersion": API_VERSION, "kind": KIND, **{k: doc[k] for k in SECTIONS if k in doc}}
