"""SIMULATION of the part of each GPU host's kubelet that gpufleet reads: its server's /configz, over HTTPS on the
host's Node address (network.py) and kubelet port, as the apiserver reaches it for `GET
/api/v1/nodes/HOST/proxy/configz`. The lab has no kubelet (no container runtime, no systemd), so:

- **What it serves is the kubelet's own.** When the kubelet (re)starts (the simulated systemctl asks the lab
  controller), the host's /var/lib/kubelet/config.yaml is read by the kubelet code of the installed kubelet's
  release - its loader, defaults, validation and configz conversion (lab/build/kubelet-configz/main.go) - and that
  answer is served until the next start, as a running kubelet keeps the config it started with. A file that kubelet
  refuses makes the start fail, with the kubelet's words.
- **Who may ask is decided as the kubelet decides it.** The client must present a certificate of the cluster CA
  (the apiserver's --kubelet-client-certificate); its user (CN) and groups (O) are authorized by a real
  SubjectAccessReview against the cell's apiservers for `get nodes/configz`, then `nodes/proxy` (the kubelet's
  webhook authorizer with fine-grained kubelet authorization). Other paths are not served (404).
- **A stopped kubelet does not answer:** while the host's kubelet unit is not active, connections are closed
  before TLS (the apiserver reports that it could not reach the node).
"""
from __future__ import annotations

import json
import pathlib
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

from kubernetes import client

from gpufleet_lab import kube, network, procs
from gpufleet_lab.config import LabConfig
from gpufleet_lab.procs import LabError

CONFIG_ON_HOST = "/var/lib/kubelet"  # the host's kubelet directory: run/hosts/HOST/kubelet, mounted there


def kubelet_dir(cfg: LabConfig, host: str) -> pathlib.Path:
    return cfg.run / "hosts" / host / "kubelet"


def configz_file(cfg: LabConfig, host: str) -> pathlib.Path:
    """What the host's running kubelet serves at /configz (written when it starts)."""
    return cfg.run / "hosts" / host / "configz.json"


def start(cfg: LabConfig, host: str, version: str) -> Dict[str, Any]:
    """A kubelet of ``version`` starts on ``host``: its config file read by that release's kubelet code; returns
    the configz answer it will serve. LabError with the kubelet's words when it would refuse the file."""
    path = kubelet_dir(cfg, host) / "config.yaml"
    if not path.exists():
        raise LabError("kubelet on %s: failed to load Kubelet config file %s/config.yaml, error open: no such file"
                       % (host, CONFIG_ON_HOST))
    tool = cfg.bin_dir("kubelet-configz", version) / "kubelet-configz"
    proc = subprocess.run([str(tool), str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LabError("kubelet %s on %s: %s" % (version, host, proc.stderr.strip().replace(
            str(path), CONFIG_ON_HOST + "/config.yaml")[-1500:]))
    answer = json.loads(proc.stdout)
    out = configz_file(cfg, host)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(proc.stdout)  # byte for byte what the kubelet's configz handler writes
    tmp.replace(out)
    return answer


def active(cfg: LabConfig, host: str) -> bool:
    """Whether the host's kubelet unit runs (the simulated systemctl's state)."""
    from gpufleet_lab import faults  # faults -> hosts -> kubelets: imported when used
    return (faults.host_state(cfg, host).get("services") or {}).get("kubelet") == "active"


def subject(cert: Dict[str, Any]) -> Tuple[str, List[str]]:
    """(user, groups) of a verified client certificate, as Kubernetes' x509 authenticator reads them: CN, O."""
    user, groups = "", []
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                user = value
            elif key == "organizationName":
                groups.append(value)
    return user, groups


# The kubelet's webhook authorizer caches answers (authorization.webhook: allowed 5 min, refused 30 s)
_DECISIONS: Dict[Tuple[str, str, Tuple[str, ...], str], Tuple[bool, float]] = {}
_TTL = {True: 300.0, False: 30.0}


def authorized(cfg: LabConfig, host: str, user: str, groups: List[str], verb: str) -> bool:
    """The kubelet's webhook authorization: `nodes/configz`, then `nodes/proxy` (KubeletFineGrainedAuthz), its
    answers cached as the kubelet caches them."""
    key = (host, user, tuple(sorted(groups)), verb)
    cached = _DECISIONS.get(key)
    if cached and time.time() < cached[1]:
        return cached[0]
    allowed = _review(cfg, host, user, groups, verb)
    _DECISIONS[key] = (allowed, time.time() + _TTL[allowed])
    return allowed


def _review(cfg: LabConfig, host: str, user: str, groups: List[str], verb: str) -> bool:
    api = client.AuthorizationV1Api(kube.api(cfg, "lab-controller"))
    for sub in ("configz", "proxy"):
        review = api.create_subject_access_review({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": {
                "verb": verb, "resource": "nodes", "subresource": sub, "name": host}}})
        if review.status.allowed:
            return True
    return False


class KubeletServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, cfg: LabConfig, host: str) -> None:
        self.cfg, self.host = cfg, host
        pki = cfg.pki
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(str(pki / ("kubelet-%s.crt" % host)), str(pki / ("kubelet-%s.key" % host)))
        self.tls.load_verify_locations(str(pki / "ca.crt"))  # the kubelet's authentication.x509.clientCAFile
        self.tls.verify_mode = ssl.CERT_OPTIONAL  # no certificate: anonymous, refused below (anonymous disabled)
        super().__init__((cfg.node_address(host), cfg.ports["kubelet"]), Handler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        return active(self.cfg, self.host)

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            tls = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()


class Handler(BaseHTTPRequestHandler):
    server: KubeletServer
    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle kept-alive connection is closed

    def log_message(self, format: str, *args: Any) -> None:
        return

    def reply(self, status: int, body: bytes, kind: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        cfg, host = self.server.cfg, self.server.host
        if not active(cfg, host):  # stopped while a connection was kept alive: no answer, the connection closes
            self.close_connection = True
            return
        cert: Optional[Dict[str, Any]] = self.connection.getpeercert()  # type: ignore[attr-defined]
        if not cert:
            self.reply(401, b"Unauthorized")
            return
        user, groups = subject(cert)
        path = self.path.split("?", 1)[0]
        if not authorized(cfg, host, user, groups, "get"):
            self.reply(403, ("Forbidden (user=%s, verb=get, resource=nodes, subresource(s)=[configz proxy])"
                             % user).encode())
            return
        if path != "/configz":
            self.reply(404, b"404 page not found\n")
            return
        try:
            body = configz_file(cfg, host).read_bytes()
        except OSError:
            self.reply(500, b"kubelet configz: not started\n")
            return
        self.reply(200, body, "application/json")


def serve(cfg: LabConfig) -> List[KubeletServer]:
    """Each GPU host's kubelet server, from daemon threads of the lab controller, listening in the host's network
    namespace (its socket is made there; what it serves with - the apiserver through the load balancer - is the lab
    machine's)."""
    servers = []
    for host in cfg.gpu_hosts:
        server = procs.in_netns(network.netns(cfg, host), KubeletServer, cfg, host)
        threading.Thread(target=server.serve_forever, name="kubelet-" + host, daemon=True).start()
        servers.append(server)
    return servers
