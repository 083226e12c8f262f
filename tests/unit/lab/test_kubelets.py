"""The lab's simulated kubelets without a running lab: the addresses on the lab's bridge, the kubelets'
certificates, what a kubelet start makes of the config file, and the kubelet server's answers - a client without a
certificate, one the authorizer refuses, a path it does not serve, a stopped kubelet - over real TLS on loopback."""
from __future__ import annotations

import dataclasses
import json
import pathlib
import socket
import ssl
import sys
import threading

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "lab"))

from gpufleet_lab import config, kubelets, pki
from gpufleet_lab.procs import LabError

REAL_NAME = "kubelet-code-1.36.3-configz-h100-train.json"
REAL = (ROOT / "tests" / "fixtures" / "k8s" / REAL_NAME).read_text()


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUFLEET_LAB_CELL", raising=False)
    base = config.load()
    return dataclasses.replace(base, cache=tmp_path / "cache", run=tmp_path / "run", inventory=tmp_path / "inv")


def test_each_host_of_each_cell_has_its_own_address(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUFLEET_LAB_CACHE", str(tmp_path))
    cells = [config.load(cell=name) for name in config.cells()]
    addresses = [c.node_address(h) for c in cells for h in c.hosts]
    assert len(set(addresses)) == len(addresses)
    assert cells[0].node_address("cp-1") == "10.217.0.10" and cells[1].node_address("gpu-a1") == "10.217.1.13"


@pytest.mark.parametrize("network, words", [
    ({"bridge": "gpufleet-lab0", "prefix": "8.8"}, "network.prefix: '8.8'; give the first two octets of a private"),
    ({"bridge": "gpufleet-lab0", "prefix": "10.217.0"}, "network.prefix"),
    ({"bridge": "a-bridge-name-too-long", "prefix": "10.217"}, "network.bridge: give an interface name of at most"),
    (None, "network.bridge"),
])
def test_a_network_the_lab_cannot_make_is_refused_by_name(tmp_path, network, words):
    doc = yaml.safe_load((ROOT / "lab" / "lab.yml").read_text())
    doc["network"] = network
    path = tmp_path / "lab.yml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(config.ConfigError, match=words):
        config.load(path)


def names(cert: x509.Certificate):
    subject = cert.subject
    return (subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value,
            [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)])


def test_the_kubelets_certificates_are_kubeadm_s(cfg):
    pki.ensure(cfg.pki)
    pki.ensure_kubelets(cfg.pki, {"gpu-a1": "10.217.0.13"})
    load = lambda name: x509.load_pem_x509_certificate((cfg.pki / (name + ".crt")).read_bytes())  # noqa: E731
    assert names(load("apiserver-kubelet-client")) == ("kube-apiserver-kubelet-client", ["kubeadm:cluster-admins"])
    assert names(load("node-gpu-a1")) == ("system:node:gpu-a1", ["system:nodes"])
    serving = load("kubelet-gpu-a1")
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["10.217.0.13"]
    before = (cfg.pki / "node-gpu-a1.crt").read_bytes()
    pki.ensure_kubelets(cfg.pki, {"gpu-a1": "10.217.0.13"})  # made once
    assert (cfg.pki / "node-gpu-a1.crt").read_bytes() == before


def fake_tool(cfg, version: str, script: str) -> None:
    tool = cfg.bin_dir("kubelet-configz", version) / "kubelet-configz"
    tool.parent.mkdir(parents=True, exist_ok=True)
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)


def test_a_kubelet_start_serves_what_its_release_reads_or_refuses_with_its_words(cfg):
    host = "gpu-a1"
    (kubelets.kubelet_dir(cfg, host)).mkdir(parents=True)
    with pytest.raises(LabError, match="no such file"):
        kubelets.start(cfg, host, "v1.36.3")
    (kubelets.kubelet_dir(cfg, host) / "config.yaml").write_text("kind: KubeletConfiguration\n")
    fake_tool(cfg, "v1.36.3", "cat '%s'\n" % (ROOT / "tests" / "fixtures" / "k8s" / REAL_NAME))
    assert kubelets.start(cfg, host, "v1.36.3") == json.loads(REAL)
    assert kubelets.configz_file(cfg, host).read_text() == REAL  # byte for byte
    fake_tool(cfg, "v1.36.3", 'echo "failed to load Kubelet config file $1, error failed to decode" >&2; exit 1\n')
    with pytest.raises(LabError, match="kubelet v1.36.3 on gpu-a1: failed to load Kubelet config file "
                                       "/var/lib/kubelet/config.yaml, error failed to decode"):
        kubelets.start(cfg, host, "v1.36.3")
    assert kubelets.configz_file(cfg, host).read_text() == REAL  # the running kubelet's answer is kept


@pytest.fixture
def server(cfg, monkeypatch):
    """A kubelet server of gpu-a1 on loopback (the lab puts it on the host's bridge address)."""
    pki.ensure(cfg.pki)
    pki.ensure_kubelets(cfg.pki, {"gpu-a1": "127.0.0.1"})
    hostdir = cfg.run / "hosts" / "gpu-a1"
    hostdir.mkdir(parents=True)
    (hostdir / "state.json").write_text(json.dumps({"services": {"kubelet": "active"}}))
    kubelets.configz_file(cfg, "gpu-a1").write_text(REAL)
    cfg = dataclasses.replace(cfg, ports=dict(cfg.ports, kubelet=0))
    monkeypatch.setattr(config.LabConfig, "node_address", lambda self, host: "127.0.0.1")
    allowed = {"kube-apiserver-kubelet-client"}
    monkeypatch.setattr(kubelets, "authorized", lambda cfg, host, user, groups, verb: user in allowed)
    srv = kubelets.KubeletServer(cfg, "gpu-a1")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv, hostdir
    srv.shutdown()
    srv.server_close()


def get(srv, path: str, cert: str = "") -> str:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE  # as the apiserver without a kubelet CA
    pkidir = srv.cfg.pki
    if cert:
        tls.load_cert_chain(str(pkidir / (cert + ".crt")), str(pkidir / (cert + ".key")))
    with socket.create_connection(srv.server_address[:2], timeout=5) as raw, tls.wrap_socket(raw) as sock:
        sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                return b"".join(chunks).decode()
            chunks.append(data)


def test_the_kubelet_server_answers_as_the_kubelet_does(server):
    srv, hostdir = server
    ok = get(srv, "/configz", "apiserver-kubelet-client")
    assert ok.startswith("HTTP/1.1 200") and "Content-Type: application/json" in ok and ok.endswith(REAL)
    assert get(srv, "/configz").startswith("HTTP/1.1 401")  # no client certificate: anonymous is off
    refused = get(srv, "/configz", "node-gpu-a1")
    assert refused.startswith("HTTP/1.1 403") and refused.endswith(
        "Forbidden (user=system:node:gpu-a1, verb=get, resource=nodes, subresource(s)=[configz proxy])")
    assert get(srv, "/pods", "apiserver-kubelet-client").startswith("HTTP/1.1 404")
    (hostdir / "state.json").write_text(json.dumps({"services": {"kubelet": "inactive"}}))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):  # a stopped kubelet does not answer
        get(srv, "/configz", "apiserver-kubelet-client")


def test_a_kubelet_stopped_while_a_connection_is_kept_alive_answers_no_more(server):
    srv, hostdir = server
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
    pkidir = srv.cfg.pki
    tls.load_cert_chain(str(pkidir / "apiserver-kubelet-client.crt"), str(pkidir / "apiserver-kubelet-client.key"))
    request = b"GET /configz HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(srv.server_address[:2], timeout=5) as raw, tls.wrap_socket(raw) as sock:
        sock.sendall(request)
        first = b""
        while not first.endswith(REAL.encode()):
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        (hostdir / "state.json").write_text(json.dumps({"services": {"kubelet": "failed"}}))
        sock.sendall(request)  # the same connection, the kubelet now stopped
        assert sock.recv(65536) == b""
