"""Certificates for the lab: one CA, etcd server/client, apiserver serving, admin (system:masters), SA keys, the
front proxy's CA and client (ensure_front_proxy); and the kubelets' (ensure_kubelets): the apiserver's kubelet
client, each host's kubelet serving certificate and its node credentials - in kubeadm's names, since the apiservers
run from kubeadm's own manifests (kubeadm.py), which name these files."""
from __future__ import annotations

import datetime
import ipaddress
import os
import pathlib
from typing import Dict, List, Optional, Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAYS = 365


def _write_key(path: pathlib.Path, key) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _name(cn: str, org: Optional[str] = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _ca(pki: pathlib.Path, name: str, cn: str, now: datetime.datetime) -> tuple:
    """A self-signed CA written as NAME.crt and NAME.key; returns (certificate, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
          .public_key(key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=DAYS * 5))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
          .sign(key, hashes.SHA256()))
    (pki / (name + ".crt")).write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write_key(pki / (name + ".key"), key)
    return ca, key


def ensure(pki: pathlib.Path, server_ips: Sequence[str] = ()) -> None:
    """Create every certificate once; later calls reuse them. ``server_ips``: the addresses the apiservers and
    etcd serve on besides loopback (the control-plane hosts' and the lab machine's on the lab's bridge)."""
    pki.mkdir(parents=True, exist_ok=True)
    if (pki / "admin.crt").exists():
        return
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca, ca_key = _ca(pki, "ca", "gpufleet-lab-ca", now)

    def issue(name: str, cn: str, org: Optional[str], server: bool, client: bool, dns: List[str]) -> None:
        _issue(pki, ca, ca_key, now, name, cn, org, server, client, dns,
               ips=("127.0.0.1", "10.96.0.1") + tuple(server_ips))

    issue("etcd-server", "etcd", None, True, True, ["localhost"])
    issue("etcd-client", "kube-apiserver-etcd-client", None, False, True, [])
    issue("apiserver", "kube-apiserver", None, True, False,
          ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
           "kubernetes.default.svc.cluster.local"])
    issue("kwok", "kwok-controller", "system:masters", False, True, [])
    issue("lab-controller", "gpufleet-lab-controller", "system:masters", False, True, [])
    issue("admin", "kubernetes-admin", "system:masters", False, True, [])
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki / "sa.key", sa)
    (pki / "sa.pub").write_bytes(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo))


def _issue(pki: pathlib.Path, ca, ca_key, now, name: str, cn: str, org: Optional[str], server: bool, client: bool,
           dns: List[str], ips: tuple = ("127.0.0.1", "10.96.0.1")) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    builder = (x509.CertificateBuilder().subject_name(_name(cn, org)).issuer_name(ca.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=DAYS))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]),
            critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    (pki / (name + ".crt")).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki / (name + ".key"), key)


def ensure_server(pki: pathlib.Path, name: str, address: str) -> None:
    """A serving certificate of the cell's CA for a lab server at ``address`` (the soak faults' webhook), made
    once."""
    if (pki / (name + ".crt")).exists():
        return
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = load_pem_private_key((pki / "ca.key").read_bytes(), None)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    _issue(pki, ca, ca_key, now, name, name, None, True, False, [], ips=(address,))


def ensure_front_proxy(pki: pathlib.Path) -> None:
    """kubeadm's front proxy (aggregation layer) pair, each made once: its own CA (front-proxy-ca) and the client
    certificate the apiserver presents to aggregated apiservers (front-proxy-client; kubeadm's manifest passes both,
    and `--requestheader-allowed-names=front-proxy-client`)."""
    if (pki / "front-proxy-client.crt").exists():
        return
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca, key = _ca(pki, "front-proxy-ca", "front-proxy-ca", now)
    _issue(pki, ca, key, now, "front-proxy-client", "front-proxy-client", None, False, True, [])


# kubeadm's name for the apiserver's client certificate to kubelets (1.29+: group kubeadm:cluster-admins, which
# kubeadm binds to cluster-admin; kube.ensure_kubeadm_rbac makes that binding in the lab)
KUBELET_CLIENT = ("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "kubeadm:cluster-admins")


def ensure_kubelets(pki: pathlib.Path, addresses: Dict[str, str]) -> None:
    """The certificates of the cell's kubelets, each made once: the apiserver's kubelet client; for each host
    (``addresses``: host -> its Node address) its kubelet's serving certificate (kubelet-HOST, for that address)
    and its node credentials (node-HOST: system:node:HOST in system:nodes, its kubelet.conf)."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = load_pem_private_key((pki / "ca.key").read_bytes(), None)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    name, cn, org = KUBELET_CLIENT
    if not (pki / (name + ".crt")).exists():
        _issue(pki, ca, ca_key, now, name, cn, org, False, True, [])
    for host, address in addresses.items():
        if not (pki / ("kubelet-%s.crt" % host)).exists():
            _issue(pki, ca, ca_key, now, "kubelet-" + host, host, None, True, False, [host], ips=(address,))
        if not (pki / ("node-%s.crt" % host)).exists():
            _issue(pki, ca, ca_key, now, "node-" + host, "system:node:" + host, "system:nodes", False, True, [])


def kubeconfig(pki: pathlib.Path, server: str, user: str, path: pathlib.Path, embed: bool = True) -> None:
    """Write a kubeconfig for ``user`` (a cert/key pair in ``pki``). Embedded data, so it can be copied anywhere."""
    import base64

    import yaml

    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "gpufleet-lab",
           "clusters": [{"name": "gpufleet-lab", "cluster": {"server": server,
                                                              "certificate-authority-data": data("ca.crt")}}],
           "users": [{"name": user, "user": {"client-certificate-data": data(user + ".crt"),
                                             "client-key-data": data(user + ".key")}}],
           "contexts": [{"name": "gpufleet-lab", "context": {"cluster": "gpufleet-lab", "user": user}}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # never readable by others, even for a moment
    with os.fdopen(fd, "w") as out:
        out.write(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
