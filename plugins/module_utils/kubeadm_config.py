# Copyright: gpufleet contributors
# Apache License 2.0
"""kubeadm's UpgradeConfiguration (kubeadm.k8s.io/v1beta4, kubeadm 1.31 and later) as the kubeadm_upgrade role hands
it to ``kubeadm upgrade apply --config`` and ``kubeadm upgrade node --config``.

The operator's fields are kept; the role's own are set on top: ``apply.etcdUpgrade`` and ``node.etcdUpgrade`` are
false, since etcd is upgraded in its own window, never with Kubernetes (a stacked member would otherwise move with
its control-plane host). Every field is checked against v1beta4's (kubeadm only warns about a field it does not
know, so a misspelt ``certificateRenewal`` would be silently ignored). With ``--config`` kubeadm refuses every flag
but a few (its ValidateMixedArguments), so an extra argument is accepted only when kubeadm takes it beside
``--config``; one whose setting is a configuration field is refused naming that field. Written by hand: no library
validates kubeadm's configuration, and the role must refuse before the first host changes."""
from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

API_VERSION = "kubeadm.k8s.io/v1beta4"
KIND = "UpgradeConfiguration"
# The fields of a v1beta4 UpgradeConfiguration and their kinds (kubeadm's cmd/kubeadm/app/apis/kubeadm/v1beta4/
# types.go at v1.35.4: UpgradeApplyConfiguration, UpgradeNodeConfiguration, UpgradePlanConfiguration,
# UpgradeDiffConfiguration, Timeouts). Left out: the role owns the version (the cell's target) and whether the run
# is a dry run, and etcdUpgrade (always false).
_FLAG, _LIST, _TEXT, _NUMBER, _PATCHES, _DURATION = "true or false", "a list of strings", "a string", "a number", \
    "a mapping with directory", "a duration such as 5m0s"
FIELDS: Dict[str, Dict[str, str]] = {
    "apply": {"allowExperimentalUpgrades": _FLAG, "allowRCUpgrades": _FLAG, "certificateRenewal": _FLAG,
              "forceUpgrade": _FLAG, "ignorePreflightErrors": _LIST, "patches": _PATCHES, "printConfig": _FLAG,
              "skipPhases": _LIST, "imagePullPolicy": _TEXT, "imagePullSerial": _FLAG},
    "node": {"certificateRenewal": _FLAG, "ignorePreflightErrors": _LIST, "skipPhases": _LIST, "patches": _PATCHES,
             "imagePullPolicy": _TEXT, "imagePullSerial": _FLAG},
    "plan": {"allowExperimentalUpgrades": _FLAG, "allowRCUpgrades": _FLAG, "ignorePreflightErrors": _LIST,
             "printConfig": _FLAG},
    "diff": {"contextLines": _NUMBER},
    "timeouts": {k: _DURATION for k in ("controlPlaneComponentHealthCheck", "kubeletHealthCheck",
                                        "kubernetesAPICall", "etcdAPICall", "tlsBootstrap", "discovery",
                                        "upgradeManifests")},
}
SECTIONS = tuple(FIELDS)
_OWNED = {"kubernetesVersion": "the role upgrades to the cell's target", "dryRun": "the role runs for real",
          "etcdUpgrade": "the role always sets it false, since etcd is upgraded in its own window, never with "
                         "Kubernetes"}
# The flags kubeadm takes beside --config (cmd/kubeadm/app/apis/kubeadm/validation: isAllowedFlag, and every flag
# named skip-*), less --config itself and --dry-run (the role's own), by their long names.
MIXABLE = ("ignore-preflight-errors", "kubeconfig", "node-name", "kubeconfig-dir", "upload-certs", "print-manifest",
           "allow-missing-template-keys", "output", "show-managed-fields", "print-join-command", "rootfs", "v",
           "log-file", "yes")
_SHORT = {"v": "v", "y": "yes", "f": "force", "h": "help"}
# Flags of kubeadm upgrade apply/node (1.36's --help) that kubeadm refuses beside --config, with the configuration
# field that says the same.
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
    "--dry-run": "nothing (the role runs for real; run kubeadm yourself for a dry run)",
    "--vmodule": "nothing (use --v)",
}


def _kind_ok(kind: str, value: Any) -> bool:
    if kind == _FLAG:
        return isinstance(value, bool)
    if kind == _LIST:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == _NUMBER:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _PATCHES:
        return isinstance(value, dict) and set(value) == {"directory"} and isinstance(value["directory"], str)
    return isinstance(value, str) and value != ""  # a string, a duration


def _check_section(section: str, fields: Any) -> None:
    where = "kubeadm_upgrade_configuration.%s" % section
    if not isinstance(fields, dict):
        raise InputError("%s must be a mapping (got %s)" % (where, type(fields).__name__))
    for key, value in fields.items():
        if key in _OWNED and section != "diff":
            raise InputError("%s.%s is set; remove it: %s" % (where, key, _OWNED[key]))
        if key not in FIELDS[section]:
            raise InputError("%s.%s is not a field of %s's %s (it has %s); kubeadm would ignore it" % (
                where, key, API_VERSION, section, ", ".join(sorted(FIELDS[section]))))
        if not _kind_ok(FIELDS[section][key], value):
            raise InputError("%s.%s must be %s (got %r)" % (where, key, FIELDS[section][key], value))


def check_extra_args(extra_args: List[str]) -> None:
    """Each flag among the extra arguments must be one kubeadm takes beside --config; a value after a flag
    (``-v 5``) is not a flag."""
    for arg in extra_args or []:
        text = str(arg)
        if not text.startswith("-"):
            continue
        flag = text.split("=", 1)[0]
        name = flag[2:] if flag.startswith("--") else _SHORT.get(flag[1:], flag[1:])
        if name in MIXABLE or name.startswith("skip-"):
            continue
        instead = FLAG_FIELDS.get(flag) or FLAG_FIELDS.get("--" + name)
        raise InputError("extra kubeadm argument %s: kubeadm takes no such flag beside --config (it takes %s and "
                         "--skip-*); %s" % (text, ", ".join("--" + f for f in MIXABLE),
                                            "set %s in kubeadm_upgrade_configuration instead" % instead
                                            if instead else "remove it"))


def _plain(value: Any) -> Any:
    """A copy of ``value`` as plain dicts and lists (a tuple becomes a list, as YAML has them). Not copy.deepcopy:
    ansible-core 2.19 hands a filter lazy containers whose deep copy also copies their templating context (about
    2 CPU-s per control-plane run)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def upgrade_configuration(configuration: Any, extra_args: List[str]) -> Dict[str, Any]:
    """The UpgradeConfiguration document for ``configuration`` (the operator's fields, a dict, may be empty) with
    etcd kept out; ``extra_args`` are the apply and node extra arguments, checked against it. InputError names the
    field and the fix."""
    if configuration is None:
        configuration = {}
    if not isinstance(configuration, dict):
        raise InputError("kubeadm_upgrade_configuration must be a mapping of UpgradeConfiguration fields (got %s)"
                         % type(configuration).__name__)
    doc = _plain(configuration)
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
        if section in doc:
            _check_section(section, doc[section])
    check_extra_args(extra_args)
    for section in ("apply", "node"):
        doc.setdefault(section, {})["etcdUpgrade"] = False
    return {"apiVersion": API_VERSION, "kind": KIND, **{k: doc[k] for k in SECTIONS if k in doc}}
