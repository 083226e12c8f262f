# Copyright: gpufleet contributors
# Apache License 2.0
"""Cluster-level preflight findings from API objects (pure functions over the dicts kubernetes.core.k8s_info
returns): admission/conversion webhooks whose service has no ready endpoint, CRD versions still stored but no
longer served, PodDisruptionBudgets that allow no disruption. Each finding names the object and what to do.

Blocking by default: a webhook with failurePolicy Fail and no ready endpoint (every matching request fails, and
kubeadm's own upgrade writes go through admission), and a stored CRD version that is not served (objects stored in
it cannot be read). PDBs at zero are reported, not blocking: they may clear before their wave, and the drain
retries and names them if they do not.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

# Every field is type-checked where it is read: a value of the wrong type (hostile input, or an object written by an
# old or broken client) is a clear error naming the object and the field - never a traceback, never skipped as a
# pass.
FIX = "fix the object in the cluster (or the list given to cluster_checks)"


class _Obj:
    """One API object being judged: its label (``kind namespace/name``) for every error about one of its fields."""

    def __init__(self, raw: Any, kind: str, source: str, index: int, namespaced: bool) -> None:
        if not isinstance(raw, Mapping):
            raise InputError("%s[%d]: expected a mapping (a %s object), got %s; %s" % (
                source, index, kind, type(raw).__name__, FIX))
        self.raw = raw
        self.label = "%s[%d]" % (source, index)
        meta = self.mapping(raw, "metadata")
        name = self.text(meta, "metadata.name") or "?"
        kind = self.text(raw, "kind") or kind
        self.label = "%s %s" % (kind, ("%s/%s" % (self.text(meta, "metadata.namespace"), name)) if namespaced
                                else name)
        self.meta = meta

    def _fail(self, path: str, expected: str, value: Any) -> InputError:
        return InputError("%s: %s: expected %s, got %s %s; %s" % (
            self.label, path, expected, type(value).__name__, _short(value), FIX))

    @staticmethod
    def _get(parent: Mapping[str, Any], path: str) -> Any:
        """``path``'s field of ``parent``: its last part (``a.b.c``: c; ``a["x.y/z"]``: x.y/z)."""
        if path.endswith('"]'):
            return parent.get(path[path.rindex('["') + 2:-2])
        return parent.get(path.rsplit(".", 1)[-1])

    def mapping(self, parent: Mapping[str, Any], path: str) -> Mapping[str, Any]:
        value = self._get(parent, path)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self._fail(path, "a mapping", value)
        return value

    def items(self, parent: Mapping[str, Any], path: str) -> List[Any]:
        value = self._get(parent, path)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._fail(path, "a list", value)
        return value

    def mappings(self, parent: Mapping[str, Any], path: str) -> List[Tuple[str, Mapping[str, Any]]]:
        out = []
        for i, item in enumerate(self.items(parent, path)):
            where = "%s[%d]" % (path, i)
            if not isinstance(item, Mapping):
                raise self._fail(where, "a mapping", item)
            out.append((where, item))
        return out

    def text(self, parent: Mapping[str, Any], path: str) -> str:
        value = self._get(parent, path)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._fail(path, "a string", value)
        return value

    def texts(self, parent: Mapping[str, Any], path: str) -> List[str]:
        out = []
        for i, item in enumerate(self.items(parent, path)):
            if not isinstance(item, str):
                raise self._fail("%s[%d]" % (path, i), "a string", item)
            out.append(item)
        return out

    def flag(self, parent: Mapping[str, Any], path: str) -> Optional[bool]:
        value = self._get(parent, path)
        if value is not None and not isinstance(value, bool):
            raise self._fail(path, "true or false", value)
        return value

    def count(self, parent: Mapping[str, Any], path: str, default: int) -> int:
        value = self._get(parent, path)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(path, "an integer", value)
        return value

    def int_or_percent(self, parent: Mapping[str, Any], path: str) -> Any:
        value = self._get(parent, path)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, str))):
            raise self._fail(path, "a number or a percentage", value)
        return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _objects(raw: Any, kind: str, source: str, namespaced: bool) -> List[_Obj]:
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise InputError("%s: expected a list of %s objects, got %s" % (source, kind, type(raw).__name__))
    return [_Obj(item, kind, source, i, namespaced) for i, item in enumerate(raw)]


def ready_services(endpointslices: Iterable[Any]) -> Set[Tuple[str, str]]:
    """(namespace, service) pairs with at least one ready endpoint (an endpoint without ``conditions.ready`` is
    ready: the API's meaning of an unknown readiness)."""
    out = set()
    for es in _objects(endpointslices, "EndpointSlice", "endpointslices", True):
        labels = es.mapping(es.meta, "metadata.labels")
        svc = es.text(labels, 'metadata.labels["kubernetes.io/service-name"]')
        endpoints = es.mappings(es.raw, "endpoints")
        ready = [es.flag(es.mapping(ep, where + ".conditions"), where + ".conditions.ready") is not False
                 for where, ep in endpoints]
        if svc and any(ready):
            out.add((es.text(es.meta, "metadata.namespace"), svc))
    return out


def _service(obj: _Obj, client: Mapping[str, Any], path: str) -> Optional[Tuple[str, str]]:
    svc = obj.mapping(client, path + ".service")
    if not svc:
        return None  # a URL webhook: nothing in the cluster to check
    return obj.text(svc, path + ".service.namespace"), obj.text(svc, path + ".service.name")


def webhook_findings(configs: Iterable[Any], crds: Iterable[Any], endpointslices: Iterable[Any]) -> List[Check]:
    ready = ready_services(endpointslices)
    out: List[Check] = []
    for cfg in _objects(configs, "WebhookConfiguration", "webhook_configurations", False):
        for where, hook in cfg.mappings(cfg.raw, "webhooks"):
            svc = _service(cfg, cfg.mapping(hook, where + ".clientConfig"), where + ".clientConfig")
            policy = cfg.text(hook, where + ".failurePolicy") or "Fail"
            name = cfg.text(hook, where + ".name")
            if svc is None or svc in ready:
                continue
            out.append(Check(
                "webhook", "%s / %s" % (cfg.label, name), False,
                "service %s/%s has no ready endpoint" % svc, "a ready endpoint",
                "failurePolicy %s: %s" % (policy, "every request it matches is refused; restore the service or "
                                          "delete the webhook configuration before upgrading" if policy != "Ignore"
                                          else "requests pass unchecked meanwhile"),
                severity="warn" if policy == "Ignore" else "fail"))
    for crd in _objects(crds, "CustomResourceDefinition", "crds", False):
        conv = crd.mapping(crd.mapping(crd.raw, "spec"), "spec.conversion")
        webhook = crd.mapping(conv, "spec.conversion.webhook")
        svc = _service(crd, crd.mapping(webhook, "spec.conversion.webhook.clientConfig"),
                       "spec.conversion.webhook.clientConfig")
        if crd.text(conv, "spec.conversion.strategy") == "Webhook" and svc and svc not in ready:
            out.append(Check("conversion-webhook", crd.label, False,
                             "service %s/%s has no ready endpoint" % svc, "a ready endpoint",
                             "objects of non-storage versions cannot be read; restore the conversion service"))
    return out


def crd_findings(crds: Iterable[Any]) -> List[Check]:
    out: List[Check] = []
    for crd in _objects(crds, "CustomResourceDefinition", "crds", False):
        served = set()
        for where, version in crd.mappings(crd.mapping(crd.raw, "spec"), "spec.versions"):
            name = crd.text(version, where + ".name")
            if crd.flag(version, where + ".served"):
                served.add(name)
        stored = crd.texts(crd.mapping(crd.raw, "status"), "status.storedVersions")
        dropped = [v for v in stored if v not in served]
        if dropped:
            out.append(Check("crd-stored-versions", crd.label, False,
                             "stored %s, served %s" % (",".join(stored), ",".join(sorted(served))),
                             "every stored version served",
                             "rewrite the stored objects to a served version (storage version migration), then "
                             "remove %s from status.storedVersions" % ",".join(dropped)))
    return out


def pdb_findings(pdbs: Iterable[Any]) -> List[Check]:
    out: List[Check] = []
    for pdb in _objects(pdbs, "PodDisruptionBudget", "pdbs", True):
        status = pdb.mapping(pdb.raw, "status")
        spec = pdb.mapping(pdb.raw, "spec")
        allowed = pdb.count(status, "status.disruptionsAllowed", 1)
        expected = pdb.count(status, "status.expectedPods", 0)
        healthy = pdb.count(status, "status.currentHealthy", -1)
        rule = ("minAvailable %s" % pdb.int_or_percent(spec, "spec.minAvailable")) if "minAvailable" in spec else (
            "maxUnavailable %s" % pdb.int_or_percent(spec, "spec.maxUnavailable"))
        if allowed > 0 or expected == 0:
            continue
        out.append(Check("pdb", pdb.label, False, "disruptionsAllowed 0 (%s, %s healthy)" % (
            rule, healthy if healthy >= 0 else "?"), "at least 1", "drains of its pods' nodes will wait and then "
            "stop; scale it up or relax it before their wave", severity="warn"))
    return out


def summarize_findings(webhooks: List[Check], crds: List[Check], pdbs: List[Check],
                       blocking_kinds: Iterable[str]) -> Dict[str, Any]:
    kinds = set(blocking_kinds)
    findings = [dict(c.as_dict(), message=c.message()) for c in webhooks + crds + pdbs if not c.passed]
    blocking = [f for f in findings if f["name"] in kinds and f["severity"] == "fail"]
    return {"findings": findings, "blocking": blocking, "passed": not blocking}
