"""kubeadm's UpgradeConfiguration as the kubeadm_upgrade role writes it: etcd always kept out, the operator's fields
kept, and every input kubeadm would refuse beside --config refused first, naming the field to set."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.kubeadm_config import upgrade_configuration


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


@pytest.mark.parametrize("configuration, args, words", [
    ({"apply": {"etcdUpgrade": True}}, [], "apply.etcdUpgrade is set; remove it"),
    ({"node": {"etcdUpgrade": False}}, [], "node.etcdUpgrade is set; remove it"),
    ({}, ["--etcd-upgrade=false"], "extra kubeadm argument --etcd-upgrade=false"),
    ({}, ["--certificate-renewal=false"], "set apply.certificateRenewal / node.certificateRenewal"),
    ({}, ["-f"], "apply.forceUpgrade"),
    ({}, ["--config=/tmp/x.yaml"], "kubeadm_upgrade_config_path"),
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


def test_own_api_version_and_kind_accepted():
    doc = upgrade_configuration({"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "UpgradeConfiguration"}, [])
    assert list(doc) == ["apiVersion", "kind", "apply", "node"]
