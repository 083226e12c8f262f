"""Faults that make the control-plane soak's signals real on one control-plane host: its own kube-apiserver
answers slowly, or answers 429, to a load client that talks to that apiserver alone (its address in the host's
network namespace), while its peers see none of it.

- ``soak-latency``: a ValidatingWebhookConfiguration (failurePolicy Ignore, timeout 10 s) sends every ConfigMap
  write in namespace ``gpufleet-lab-soak`` to a webhook this controller serves on the lab machine's bridge address,
  which allows each after ``SLOW_SECONDS``; the load client's threads each write a ConfigMap of their own there,
  started apart, so a slow write ends every few seconds. The host's write latency p99 is then about
  ``SLOW_SECONDS`` (the histogram's bucket above it).
- ``soak-429``: a PriorityLevelConfiguration with no seats (``nominalConcurrencyShares: 0``, nothing to borrow,
  ``Reject``: API Priority and Fairness answers 429 at once) and a FlowSchema that sends the load client's
  ServiceAccount to it; the load client reads a ConfigMap from several threads without a pause. A level with no
  seats still runs one request while none of its own runs (the queue set's rule), so the others are rejected:
  hundreds a second.

- ``legacy-client``: not a soak fault, played the same way - a client of the host's own apiserver, with a
  ServiceAccount of its own (``LEGACY``) and an old CSI sidecar's user agent (``LEGACY_AGENT``), LISTs
  VolumeAttributesClasses through the deprecated ``storage.k8s.io/v1beta1`` (removed in 1.37) every
  ``LEGACY_SECONDS``: what preflight's audit reading must name (docs/stages.md, "Who calls a removed API").

Each soak fault arms once the host's apiserver answers another version than when the fault was set (kubeadm moved
it: the reading before stays clean); the ``-now`` kinds and ``legacy-client`` arm at once. The objects are made
when the fault is set and removed by ``lab clear HOST``; the load runs while the fault is set and armed.
"""
from __future__ import annotations

import base64
import datetime
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Optional, Tuple

from kubernetes import client

from gpufleet_lab import kube, network
from gpufleet_lab.config import LabConfig

NS = "gpufleet-lab-soak"
LOADER = "gpufleet-lab-load"  # the load client's ServiceAccount (and its Role, FlowSchema)
WEBHOOK = "gpufleet-lab-slow"
LEVEL = "gpufleet-lab-no-seats"
SLOW_SECONDS = 8.0
# The soak-latency load's writers, each patching a ConfigMap of its own (writers of one object collide: the apiserver
# runs admission again for the loser, and the slow writes bunched up, ending together once in ~SLOW_SECONDS - longer
# than the lab soak's reading window), started SLOW_SECONDS / LATENCY_THREADS apart
LATENCY_THREADS = 3
KINDS = {
    "soak-latency": "the host's apiserver writes ConfigMaps of a load client through a webhook that answers after "
                    "%.0f s (write p99 about %.0f s), once kubeadm moved it" % (SLOW_SECONDS, SLOW_SECONDS),
    "soak-429": "API Priority and Fairness answers a load client 429 on the host's apiserver (a priority level with "
                "no seats, several threads: all but the one running are rejected), once kubeadm moved it",
}
KINDS.update({k + "-now": v.replace("once kubeadm moved it", "from now") for k, v in list(KINDS.items())})
LEGACY = "legacy-resizer"  # the legacy client's ServiceAccount (and ClusterRole)
LEGACY_AGENT = "csi-resizer/v1.11.2 (linux/amd64) kubernetes/0ad7fb3"
LEGACY_PATH = "/apis/storage.k8s.io/v1beta1/volumeattributesclasses"
LEGACY_SECONDS = 5.0
KINDS["legacy-client"] = ("a client with an old CSI sidecar's user agent (ServiceAccount %s/%s) lists "
                          "storage.k8s.io/v1beta1 VolumeAttributesClasses (removed in 1.37) through the host's "
                          "apiserver every %.0f s" % (NS, LEGACY, LEGACY_SECONDS))


def base(kind: str) -> str:
    return kind[:-len("-now")] if kind.endswith("-now") else kind


def webhook_port(cfg: LabConfig) -> int:
    return int(cfg.ports["soak_webhook"])


def _host_api(cfg: LabConfig, host: str, token: Optional[str] = None) -> client.ApiClient:
    """A client of the host's own apiserver (its address, not the load balancer): the admin's, or the load
    client's ServiceAccount token."""
    admin = kube.api(cfg)
    conf = client.Configuration()
    conf.host = cfg.apiserver_url(host)
    conf.ssl_ca_cert = str(cfg.pki / "ca.crt")
    if token:
        conf.api_key, conf.api_key_prefix = {"BearerToken": token}, {"BearerToken": "Bearer"}
    else:
        conf.cert_file, conf.key_file = admin.configuration.cert_file, admin.configuration.key_file
    conf.retries = False
    return client.ApiClient(conf)


_VERSION_CLIENTS: Dict[str, client.ApiClient] = {}


def version_of(cfg: LabConfig, host: str) -> str:
    """The version the host's own apiserver answers; "" while it does not answer (kubeadm is moving it)."""
    key = "%s/%s" % (cfg.cell, host)
    if key not in _VERSION_CLIENTS:
        _VERSION_CLIENTS[key] = _host_api(cfg, host)
    try:
        return str(client.VersionApi(_VERSION_CLIENTS[key]).get_code(_request_timeout=5).git_version)
    except Exception:
        return ""


def _ca_bundle(cfg: LabConfig) -> str:
    return base64.b64encode((cfg.pki / "ca.crt").read_bytes()).decode()


def make_objects(cfg: LabConfig, kind: str) -> None:
    """The fault's objects, made once (409 tolerated): the namespace, the load client's ServiceAccount and Role,
    then the webhook or the priority level and flow schema."""
    api = kube.api(cfg)
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    kube.tolerate(409, core.create_namespace, {"metadata": {"name": NS, "labels": {"gpufleet-lab/soak": "true"}}})
    kube.tolerate(409, core.create_namespaced_service_account, NS, {"metadata": {"name": LOADER}})
    kube.tolerate(409, rbac.create_namespaced_role, NS, {
        "metadata": {"name": LOADER},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "update", "patch"]}]})
    kube.tolerate(409, rbac.create_namespaced_role_binding, NS, {
        "metadata": {"name": LOADER}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                  "name": LOADER},
        "subjects": [{"kind": "ServiceAccount", "name": LOADER, "namespace": NS}]})
    for name in ["load"] + [_load_map(i) for i in range(LATENCY_THREADS)]:
        kube.tolerate(409, core.create_namespaced_config_map, NS, {"metadata": {"name": name}, "data": {"n": "0"}})
    if kind == "legacy-client":
        kube.tolerate(409, core.create_namespaced_service_account, NS, {"metadata": {"name": LEGACY}})
        kube.tolerate(409, rbac.create_cluster_role, {
            "metadata": {"name": LEGACY}, "rules": [{"apiGroups": ["storage.k8s.io"],
                                                     "resources": ["volumeattributesclasses"],
                                                     "verbs": ["get", "list", "watch"]}]})
        kube.tolerate(409, rbac.create_cluster_role_binding, {
            "metadata": {"name": LEGACY}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                      "name": LEGACY},
            "subjects": [{"kind": "ServiceAccount", "name": LEGACY, "namespace": NS}]})
    elif base(kind) == "soak-latency":
        url = "https://%s:%d/validate" % (network.lab_address(cfg), webhook_port(cfg))
        kube.tolerate(409, client.AdmissionregistrationV1Api(api).create_validating_webhook_configuration, {
            "metadata": {"name": WEBHOOK},
            "webhooks": [{"name": "slow.gpufleet-lab.invalid", "admissionReviewVersions": ["v1"],
                          "sideEffects": "None", "failurePolicy": "Ignore", "timeoutSeconds": 10,
                          "clientConfig": {"url": url, "caBundle": _ca_bundle(cfg)},
                          "namespaceSelector": {"matchLabels": {"gpufleet-lab/soak": "true"}},
                          "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                     "resources": ["configmaps"]}]}]})
    else:
        flow = client.FlowcontrolApiserverV1Api(api)
        kube.tolerate(409, flow.create_priority_level_configuration, {
            "metadata": {"name": LEVEL},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 0, "lendablePercent": 0,
                                                    "borrowingLimitPercent": 0,
                                                    "limitResponse": {"type": "Reject"}}}})
        kube.tolerate(409, flow.create_flow_schema, {
            "metadata": {"name": LOADER},
            "spec": {"matchingPrecedence": 500, "priorityLevelConfiguration": {"name": LEVEL},
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "ServiceAccount",
                                              "serviceAccount": {"name": LOADER, "namespace": NS}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                   "namespaces": ["*"]}]}]}})


def remove_objects(cfg: LabConfig) -> None:
    api = kube.api(cfg)
    kube.tolerate(404, client.AdmissionregistrationV1Api(api).delete_validating_webhook_configuration, WEBHOOK)
    flow = client.FlowcontrolApiserverV1Api(api)
    kube.tolerate(404, flow.delete_flow_schema, LOADER)
    kube.tolerate(404, flow.delete_priority_level_configuration, LEVEL)
    rbac = client.RbacAuthorizationV1Api(api)
    kube.tolerate(404, rbac.delete_cluster_role_binding, LEGACY)
    kube.tolerate(404, rbac.delete_cluster_role, LEGACY)


def _token(cfg: LabConfig, account: str = LOADER) -> str:
    core = client.CoreV1Api(kube.api(cfg))
    answer = core.create_namespaced_service_account_token(account, NS, {"spec": {"expirationSeconds": 3600}})
    return str(answer.status.token)


def _load_map(index: int) -> str:
    return "load-%d" % index


class Load:
    """The load client of one host's fault: threads that write (latency) or read (429) through the host's own
    apiserver until ``stop`` is set."""

    def __init__(self, cfg: LabConfig, host: str, kind: str) -> None:
        self.cfg, self.host, self.kind = cfg, host, base(kind)
        self.stop = threading.Event()
        if self.kind == "legacy-client":
            api = _host_api(cfg, host, _token(cfg, LEGACY))
            api.user_agent = LEGACY_AGENT
            self.threads = [threading.Thread(target=self._legacy, args=(api,), daemon=True)]
        else:
            core = client.CoreV1Api(_host_api(cfg, host, _token(cfg)))
            threads = LATENCY_THREADS if self.kind == "soak-latency" else 2
            self.threads = [threading.Thread(target=self._loop, args=(core, i), daemon=True) for i in range(threads)]
        for thread in self.threads:
            thread.start()

    def _legacy(self, api: client.ApiClient) -> None:
        while not self.stop.is_set():
            try:
                api.call_api(LEGACY_PATH, "GET", auth_settings=["BearerToken"], _preload_content=False,
                             _request_timeout=10)
            except Exception:  # the apiserver restarting, or not serving the API (after the upgrade that removes it)
                pass
            self.stop.wait(LEGACY_SECONDS)

    def _loop(self, core: client.CoreV1Api, index: int) -> None:
        n = 0
        if self.kind == "soak-latency":  # staggered: a slow write ends every SLOW_SECONDS / LATENCY_THREADS
            self.stop.wait(index * SLOW_SECONDS / LATENCY_THREADS)
        while not self.stop.is_set():
            n += 1
            try:
                if self.kind == "soak-latency":
                    core.patch_namespaced_config_map(_load_map(index), NS, {"data": {"n": str(n)}},
                                                     _request_timeout=30)
                else:
                    core.read_namespaced_config_map("load", NS, _request_timeout=10)
                continue
            except client.ApiException as exc:
                if exc.status == 429:
                    continue  # what the fault is for: ask again at once
            except Exception:  # the apiserver restarting
                pass
            self.stop.wait(0.5)  # anything else (a restart, an expired token): no hot loop


class Webhook(BaseHTTPRequestHandler):
    """The slow admission webhook: allows every review after SLOW_SECONDS."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        time.sleep(SLOW_SECONDS)
        uid = ((body.get("request") or {}).get("uid")) or ""
        answer = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                             "response": {"uid": uid, "allowed": True}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


def serve_webhook(cfg: LabConfig) -> ThreadingHTTPServer:
    """The webhook's HTTPS server on the lab machine's bridge address, with a certificate of the cell's CA."""
    from gpufleet_lab import pki
    address = network.lab_address(cfg)
    pki.ensure_server(cfg.pki, "soak-webhook", address)
    server = ThreadingHTTPServer((address, webhook_port(cfg)), Webhook)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cfg.pki / "soak-webhook.crt"), str(cfg.pki / "soak-webhook.key"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class SoakFaults:
    """The controller's side: for each control-plane host and soak fault set on it, its load runs once armed."""

    def __init__(self, cfg: LabConfig) -> None:
        self.cfg = cfg
        self.loads: Dict[Tuple[str, str], Load] = {}

    def reconcile(self) -> None:
        from gpufleet_lab import faults
        wanted: Dict[Tuple[str, str], Any] = {}
        for host in self.cfg.control_plane:
            for kind, armed_from in (faults.host_state(self.cfg, host).get("faults") or {}).items():
                if kind in KINDS:
                    wanted[(host, base(kind))] = armed_from
        for key in [k for k in self.loads if k not in wanted]:
            self.loads.pop(key).stop.set()
        for (host, kind), armed_from in sorted(wanted.items()):
            if (host, kind) in self.loads:
                continue
            if isinstance(armed_from, dict) and version_of(self.cfg, host) in ("", armed_from.get("version")):
                continue  # kubeadm has not moved it yet
            self.loads[(host, kind)] = Load(self.cfg, host, kind)
            print("lab controller: %s load on %s from %s" % (kind, host, datetime.datetime.now().isoformat()),
                  flush=True)


def arm_state(cfg: LabConfig, host: str, kind: str) -> Any:
    """What the host's state keeps for the fault: the version to move away from, or True (armed at once). A host
    whose apiserver does not answer now is refused: the fault would arm at its first answer, on the old version."""
    if kind.endswith("-now") or kind == "legacy-client":
        return True
    version = version_of(cfg, host)
    if not version:
        from gpufleet_lab.procs import LabError
        raise LabError("fault %s on %s: its apiserver (%s) does not answer now; set the fault once it does" % (
            kind, host, cfg.apiserver_url(host)))
    return {"version": version}

