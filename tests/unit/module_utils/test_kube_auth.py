"""The collection's modules connect exactly as kubernetes.core's do (same options, same K8S_AUTH_* variables, same
precedence), never fall back to the in-cluster service account, and refuse an API server that is not the cell's."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as k8s_client

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: cell
  cluster: {server: "https://cell.example:6443", insecure-skip-tls-verify: true}
- name: other
  cluster: {server: "https://other.example:6443", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: not-a-real-token}
contexts:
- name: cell
  context: {cluster: cell, user: admin}
- name: other
  context: {cluster: other, user: admin}
current-context: cell
"""


class Module:
    def __init__(self, **params):
        self.params = {name: None for name in kube.KUBE_ARGSPEC}
        self.params.update(params)


def both(module):
    """(gpufleet's configuration, kubernetes.core's) for the same module options and environment."""
    ours = kube.connect(module).client.configuration
    theirs = k8s_client._create_configuration(k8s_client._create_auth_spec(module))
    return ours, theirs


def test_argspec_is_kubernetes_cores():
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
    assert kube.KUBE_ARGSPEC == AUTH_ARG_SPEC


@pytest.mark.parametrize("env, expected_host", [
    ({"K8S_AUTH_HOST": "https://awx-credential.example:6443", "K8S_AUTH_API_KEY": "t0ken",
      "K8S_AUTH_VERIFY_SSL": "no"}, "https://awx-credential.example:6443"),
    ({"K8S_AUTH_KUBECONFIG": "{kubeconfig}"}, "https://cell.example:6443"),
    ({"K8S_AUTH_KUBECONFIG": "{kubeconfig}", "K8S_AUTH_CONTEXT": "other"}, "https://other.example:6443"),
])
def test_k8s_auth_variables_reach_the_same_cluster_as_kubernetes_core(tmp_path, monkeypatch, env, expected_host):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(kubeconfig=path))
    ours, theirs = both(Module())
    assert ours.host == theirs.host == expected_host
    assert ours.verify_ssl == theirs.verify_ssl
    if "K8S_AUTH_API_KEY" in env:
        assert ours.api_key == theirs.api_key == {"authorization": "Bearer t0ken"}


def test_module_option_beats_the_variable_as_in_kubernetes_core(tmp_path, monkeypatch):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    monkeypatch.setenv("K8S_AUTH_CONTEXT", "other")
    ours, theirs = both(Module(kubeconfig=str(path), context="cell"))
    assert ours.host == theirs.host == "https://cell.example:6443"


def test_nothing_given_never_means_the_in_cluster_service_account(tmp_path, monkeypatch):
    for name in list(__import__("os").environ):
        if name.startswith("K8S_AUTH_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")  # as inside an AWX job pod
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(kube.KubeError, match="never falls back to the in-cluster service account"):
        kube.connect(Module())
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(KUBECONFIG)
    assert kube.connect(Module()).server == "https://cell.example:6443"  # ~/.kube/config, as kubectl


def test_kubeconfig_variable_is_the_default_for_both(tmp_path, monkeypatch):
    """$KUBECONFIG (as the kubernetes client and kubectl read it) beats ~/.kube/config for both libraries."""
    for name in list(__import__("os").environ):
        if name.startswith("K8S_AUTH_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(KUBECONFIG)
    other = tmp_path / "other.conf"
    other.write_text(KUBECONFIG.replace("current-context: cell", "current-context: other"))
    monkeypatch.setenv("KUBECONFIG", "%s:%s" % (tmp_path / "missing.conf", other))
    import kubernetes.config.kube_config as kc
    monkeypatch.setattr(kc, "KUBE_CONFIG_DEFAULT_LOCATION", str(other) + ":" + str(tmp_path / "missing.conf"))
    ours, theirs = both(Module())
    assert ours.host == theirs.host == "https://other.example:6443"


def test_identity_must_be_recorded_and_match():
    uid = "6c0f5d0e-1f3a-4c57-9a53-6f6d2e3b9a10"
    assert kube.judge_identity("lab", uid, uid, "https://x:6443") == uid
    with pytest.raises(kube.KubeError, match="not recorded for cell lab.*record it.*gpufleet_cluster_uid: %s" % uid):
        kube.judge_identity("lab", "", uid, "https://x:6443")
    with pytest.raises(kube.KubeError, match="is not cell lab's: its kube-system UID is %s" % uid):
        kube.judge_identity("lab", "0000", uid, "https://x:6443")


def test_a_custom_api_that_is_not_served_reads_as_none_apart_from_no_objects():
    """A 404 on a custom resource list is "not served" (its CRD is gone): list_custom_served says None, so the
    fleet's JobSet reading can halt on an API that vanished; list_custom (gangs to stop) reads it as no objects."""
    from kubernetes.client.rest import ApiException

    class Custom:
        def __init__(self, status):
            self.status = status

        def list_cluster_custom_object(self, *args, **kwargs):
            if self.status == 200:
                return {"items": [{"metadata": {"name": "js"}}]}
            raise ApiException(status=self.status, reason="x")

    api = kube.Kube.__new__(kube.Kube)
    api.ApiException = ApiException
    api.custom = Custom(404)
    assert api.list_custom_served(kube.JOBSET) is None and api.list_custom(kube.JOBSET) == []
    api.custom = Custom(200)
    assert api.list_custom_served(kube.JOBSET) == [{"metadata": {"name": "js"}}]
    api.custom = Custom(403)
    with pytest.raises(kube.KubeError, match="list jobsets.jobset.x-k8s.io: HTTP 403"):
        api.list_custom_served(kube.JOBSET)
