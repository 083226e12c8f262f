"""The two raw reads of module_utils/kube.py - a kubelet's /configz through the node proxy, an apiserver's /metrics -
against stand-ins for both shapes of the kubernetes client's ApiClient (36: call_api(resource_path, method, ...);
37: param_serialize, then call_api(method, url, ...)), and the error each failure becomes."""
from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube


class Response:
    """What both client shapes' REST layer returns (status, reason, headers, data)."""

    def __init__(self, body: bytes, status: int = 200) -> None:
        self.data, self.status, self.read_calls = body, status, 0
        self.reason, self.headers = ("OK" if status == 200 else "Forbidden"), {}

    def getheaders(self):
        return self.headers

    def read(self) -> bytes:
        self.read_calls += 1
        return self.data


class Configuration:
    host = "https://apiserver"


class Client36:
    configuration = Configuration()

    def __init__(self, body: bytes) -> None:
        self.body, self.calls = body, []

    def call_api(self, resource_path, method, **kwargs):
        self.calls.append((resource_path, method, kwargs))
        return Response(self.body)


class Client37:
    configuration = Configuration()

    def __init__(self, body: bytes, status: int = 200) -> None:
        self.body, self.status, self.calls = body, status, []

    def param_serialize(self, method, resource_path, auth_settings=None, **kwargs):
        return method, "https://apiserver" + resource_path, {"Authorization": "Bearer x"}, None, []

    def call_api(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None):
        self.calls.append((method, url, _request_timeout))
        return Response(self.body, self.status)


class Core:
    def __init__(self, result) -> None:
        self.result, self.calls = result, []

    def connect_get_node_proxy_with_path(self, name, path, **kwargs):
        self.calls.append((name, path, kwargs))
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def connection(client=None, core=None) -> kube.Kube:
    api = object.__new__(kube.Kube)  # the client is given here, not made from a kubeconfig
    api.client, api.core, api.ApiException = client, core, ApiException
    return api


@pytest.mark.parametrize("client", [Client36(b"apiserver_request_total 1\n"), Client37(b"apiserver_request_total 1\n")])
def test_metrics_through_either_client_shape(client):
    assert connection(client).metrics_text(5) == "apiserver_request_total 1\n"
    assert client.calls and "/metrics" in str(client.calls[0])


def test_metrics_an_error_status_from_the_37_shape_is_an_error():
    with pytest.raises(kube.KubeError, match="HTTP 403"):
        connection(Client37(b'{"message": "forbidden"}', status=403)).metrics_text(5)


def test_configz_through_the_node_proxy():
    core = Core(Response(b'{"kubeletconfig": {}}'))
    assert connection(core=core).node_configz("gpu-a1") == '{"kubeletconfig": {}}'
    assert core.calls == [("gpu-a1", "configz", {"_preload_content": False, "_request_timeout": 30})]


@pytest.mark.parametrize("error, words", [
    (ApiException(status=503, reason="Service Unavailable"), "could not reach the node's kubelet: is the kubelet "
                                                             "running"),
    (ApiException(status=403, reason="Forbidden"), "needs get on nodes/proxy"),
    (ApiException(status=404, reason="Not Found"), "no such Node, or the kubelet does not serve /configz"),
    (OSError("connection refused"), "the apiserver did not answer"),
])
def test_configz_failures_name_the_node_and_the_likely_cause(error, words):
    with pytest.raises(kube.KubeError) as caught:
        connection(core=Core(error)).node_configz("gpu-a1")
    assert str(caught.value).startswith("the kubelet of gpu-a1 did not answer /configz through the apiserver (")
    assert words in str(caught.value)
