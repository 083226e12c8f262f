"""kubeadm's UpgradeConfiguration as the kubeadm_upgrade role writes it: etcd always kept out, the operator's fields
kept, and every input kubeadm would refuse beside --config refused first, naming the field to set."""
from __future__ import annotations

import re

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.kubeadm_config import (
    FIELDS, FLAG_FIELDS, MIXABLE, upgrade_configuration)
from tests.conftest import FIXTURES



def test_etcd_kept_out_and_fields_kept():
    doc = upgrade_configuration({"apply": {"certificateRenewal": False}, "timeouts": {"upgradeManifests": "45s"}},
                                ["--ignore-preflight-errors=ImagePull", "--v=5"])
    assert doc == {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "UpgradeConfiguration",
                   "apply": {"certificateRenewal": False, "etcdUpgrade": False}, "node": {"etcdUpgrade": False},
                   "timeouts": {"upgradeManifests": "45s"}}
    assert upgrade_configuration({}, [])["node"] == {"etcdUpgrade": False}
    assert upgrade_configuration(None, [])["apply"] == {"etcdUpgrade": False}


def test_input_not_changed():
    given = {"node": {"ignorePreflightErrors": ["ImagePull"]}}
    upgrade_configuration(given, [])
    assert given == {"node": {"ignorePreflightErrors": ["ImagePull"]}}


class LazyMapping(dict):
    """As ansible-core 2.19 hands a filter a mapping: a deep copy of it also copies its templating context."""

    def __deepcopy__(self, memo):
        raise AssertionError("deep-copied: ansible-core copies a lazy mapping's whole templating context")


def test_a_lazy_mapping_is_copied_item_by_item_not_deep_copied():
    given = LazyMapping(apply=LazyMapping(certificateRenewal=False), node={"ignorePreflightErrors": ("ImagePull",)})
    doc = upgrade_configuration(given, [])
    assert doc["apply"] == {"certificateRenewal": False, "etcdUpgrade": False}
    assert doc["node"] == {"ignorePreflightErrors": ["ImagePull"], "etcdUpgrade": False}
    assert given == {"apply": {"certificateRenewal": False}, "node": {"ignorePreflightErrors": ("ImagePull",)}}
    assert type(doc["apply"]) is dict  # pylint: disable=unidiomatic-typecheck


@pytest.mark.parametrize("configuration, args, words", [
    ({"apply": {"etcdUpgrade": True}}, [], "apply.etcdUpgrade is set; remove it"),
    ({"node": {"etcdUpgrade": False}}, [], "node.etcdUpgrade is set; remove it"),
    ({"plan": {"etcdUpgrade": False}}, [], "plan.etcdUpgrade is set; remove it"),
    ({"apply": {"kubernetesVersion": "v1.36.3"}}, [], "the role upgrades to the cell's target"),
    ({"node": {"dryRun": True}}, [], "node.dryRun is set; remove it: the role runs for real"),
    ({"apply": {"certificateRenwal": False}}, [], "apply.certificateRenwal is not a field of"),
    ({"timeouts": {"upgradeManifest": "60s"}}, [], "timeouts.upgradeManifest is not a field"),
    ({"node": {"forceUpgrade": True}}, [], "node.forceUpgrade is not a field"),
    ({"apply": {"certificateRenewal": "no"}}, [], "apply.certificateRenewal must be true or false"),
    ({"apply": {"ignorePreflightErrors": "ImagePull"}}, [], "must be a list of strings"),
    ({"timeouts": {"upgradeManifests": 60}}, [], "must be a duration such as 5m0s"),
    ({"node": {"patches": {"dir": "/p"}}}, [], "node.patches must be a mapping with directory"),
    ({}, ["--etcd-upgrade=false"], "extra kubeadm argument --etcd-upgrade=false"),
    ({}, ["--certificate-renewal=false"], "set apply.certificateRenewal / node.certificateRenewal"),
    ({}, ["-f"], "apply.forceUpgrade"),
    ({}, ["--config=/tmp/x.yaml"], "kubeadm_upgrade_config_path"),
    ({}, ["--dry-run"], "the role runs for real"),
    ({}, ["--ignore-prefligth-errors=all"], "kubeadm takes no such flag beside --config"),
    ({}, ["--some-flag-of-a-later-kubeadm"], "remove it"),
    ({"apiVersion": "kubeadm.k8s.io/v1beta3"}, [], "configuration.apiVersion is 'kubeadm.k8s.io/v1beta3'"),
    ({"kind": "InitConfiguration"}, [], "kubeadm_upgrade_configuration.kind"),
    ({"apply": {}, "etcd": {}}, [], "unknown field(s) etcd"),
    ({"timeouts": "30s"}, [], "kubeadm_upgrade_configuration.timeouts must be a mapping"),
    (["apply"], [], "must be a mapping of UpgradeConfiguration fields (got list)"),
])
def test_refused_naming_the_field(configuration, args, words):
    with pytest.raises(InputError) as err:
        upgrade_configuration(configuration, args)
    assert words in err.value.msg


def test_flags_kubeadm_takes_beside_config_pass():
    for args in (["--ignore-preflight-errors=ImagePull"], ["-v", "5"], ["--v=5"], ["--skip-phases=addon"], ["-y"],
                 ["--kubeconfig", "/etc/kubernetes/admin.conf"], ["--rootfs=/host"]):
        assert upgrade_configuration({}, args)["kind"] == "UpgradeConfiguration", args


def test_own_api_version_and_kind_accepted():
    doc = upgrade_configuration({"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "UpgradeConfiguration"}, [])
    assert list(doc) == ["apiVersion", "kind", "apply", "node"]


def help_flags(subcommand):
    """The long flags of ``kubeadm upgrade SUBCOMMAND --help`` (the real v1.36.3's, tests/fixtures/kubeadm)."""
    text = (FIXTURES / "kubeadm" / ("real-1.36.3-upgrade-%s-help.txt" % subcommand)).read_text()
    return set(re.findall(r"^\s+(?:-\w, )?--([a-z][a-z-]*)", text, re.M))


def test_every_flag_kubeadm_refuses_beside_config_is_refused_first():
    """Checked against the real kubeadm's own --help: each flag of apply or node that kubeadm would refuse beside
    --config is in the role's table (so the role refuses it before anything changes, naming the field), and the
    table names no flag kubeadm lacks."""
    flags = help_flags("apply") | help_flags("node")
    assert {"etcd-upgrade", "certificate-renewal", "ignore-preflight-errors"} <= flags  # the fixtures are read
    refused = {f for f in flags if f not in MIXABLE + ("help",) and not f.startswith("skip-")}
    assert {"--" + f for f in refused} <= set(FLAG_FIELDS), refused
    assert {f[2:] for f in FLAG_FIELDS if f.startswith("--")} <= flags


def test_every_field_accepted_with_its_kind():
    """Every v1beta4 field the role lets through, with a value of its kind, goes into the document unchanged."""
    samples = {"true or false": False, "a list of strings": ["ImagePull"], "a string": "IfNotPresent",
               "a number": 3, "a mapping with directory": {"directory": "/etc/kubeadm/patches"},
               "a duration such as 5m0s": "90s"}
    given = {section: {key: samples[kind] for key, kind in fields.items()} for section, fields in FIELDS.items()}
    doc = upgrade_configuration(given, [])
    for section, fields in given.items():
        for key, value in fields.items():
            assert doc[section][key] == value, (section, key)
