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

from typing import Any, Dict, Iterable, List, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check


def _meta(obj: Dict[str, Any]) -> Dict[str, Any]:
    return obj.get("metadata") or {}


def ready_services(endpointslices: Iterable[Dict[str, Any]]) -> set:
    """(namespace, service) pairs with at least one ready endpoint."""
    out = set()
    for es in endpointslices:
        meta = _meta(es)
        svc = (meta.get("labels") or {}).get("kubernetes.io/service-name")
        if not svc:
            continue
        for ep in es.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready", True) is not False:
                out.add((meta.get("namespace", ""), svc))
                break
    return out


def _service(ref: Optional[Dict[str, Any]]) -> Optional[Tuple[str, str]]:
    svc = (ref or {}).get("service")
    return (svc.get("namespace", ""), svc.get("name", "")) if svc else None


def webhook_findings(configs: Iterable[Dict[str, Any]], crds: Iterable[Dict[str, Any]],
                     endpointslices: Iterable[Dict[str, Any]]) -> List[Check]:
    ready = ready_services(endpointslices)
    out: List[Check] = []
    for cfg in configs:
        kind = cfg.get("kind", "WebhookConfiguration")
        for hook in cfg.get("webhooks") or []:
            svc = _service(hook.get("clientConfig"))
            if svc is None or svc in ready:
                continue
            policy = hook.get("failurePolicy", "Fail")
            out.append(Check(
                "webhook", "%s %s / %s" % (kind, _meta(cfg).get("name"), hook.get("name")), False,
                "service %s/%s has no ready endpoint" % svc, "a ready endpoint",
                "failurePolicy %s: %s" % (policy, "every request it matches is refused; restore the service or "
                                          "delete the webhook configuration before upgrading" if policy != "Ignore"
                                          else "requests pass unchecked meanwhile"),
                severity="warn" if policy == "Ignore" else "fail"))
    for crd in crds:
        conv = ((crd.get("spec") or {}).get("conversion") or {})
        if conv.get("strategy") != "Webhook":
            continue
        svc = _service((conv.get("webhook") or {}).get("clientConfig"))
        if svc and svc not in ready:
            out.append(Check("conversion-webhook", "CustomResourceDefinition %s" % _meta(crd).get("name"), False,
                             "service %s/%s has no ready endpoint" % svc, "a ready endpoint",
                             "objects of non-storage versions cannot be read; restore the conversion service"))
    return out


def crd_findings(crds: Iterable[Dict[str, Any]]) -> List[Check]:
    out: List[Check] = []
    for crd in crds:
        served = {v.get("name") for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")}
        stored = list((crd.get("status") or {}).get("storedVersions") or [])
        dropped = [v for v in stored if v not in served]
        if dropped:
            out.append(Check("crd-stored-versions", "CustomResourceDefinition %s" % _meta(crd).get("name"), False,
                             "stored %s, served %s" % (",".join(stored), ",".join(sorted(served))),
                             "every stored version served",
                             "rewrite the stored objects to a served version (storage version migration), then "
                             "remove %s from status.storedVersions" % ",".join(dropped)))
    return out


def pdb_findings(pdbs: Iterable[Dict[str, Any]]) -> List[Check]:
    out: List[Check] = []
    for pdb in pdbs:
        status = pdb.get("status") or {}
        if int(status.get("disruptionsAllowed", 1)) > 0 or int(status.get("expectedPods", 0)) == 0:
            continue
        spec = pdb.get("spec") or {}
        rule = ("minAvailable %s" % spec["minAvailable"]) if "minAvailable" in spec else (
            "maxUnavailable %s" % spec.get("maxUnavailable"))
        out.append(Check("pdb", "PodDisruptionBudget %s/%s" % (_meta(pdb).get("namespace"), _meta(pdb).get("name")),
                         False, "disruptionsAllowed 0 (%s, %s healthy)" % (rule, status.get("currentHealthy", "?")),
                         "at least 1", "drains of its pods' nodes will wait and then stop; scale it up or relax "
                         "it before their wave", severity="warn"))
    return out


def summarize_findings(webhooks: List[Check], crds: List[Check], pdbs: List[Check],
                       blocking_kinds: Iterable[str]) -> Dict[str, Any]:
    kinds = set(blocking_kinds)
    findings = [dict(c.as_dict(), message=c.message()) for c in webhooks + crds + pdbs if not c.passed]
    blocking = [f for f in findings if f["name"] in kinds and f["severity"] == "fail"]
    return {"findings": findings, "blocking": blocking, "passed": not blocking}
