# Copyright: gpufleet contributors
# Apache License 2.0
"""Security that must survive an upgrade (docs/reference.md section 11): pure functions over the objects the
security_checks module reads.

- Pod Security Admission: a namespace whose ``enforce`` level is not pinned to a version (the
  ``enforce-version`` label missing or ``latest``) changes what it admits when the control plane moves. Such a
  namespace blocks; a pinned level or version that changed since the baseline fails (a deliberate bump is
  playbooks/psa_pin.yml, recorded).
- Signed-image admission: a probe pod with an undigested image, created as a server-side dry run in each probed
  namespace, must still be refused by admission, with a message naming the policy.
- RBAC (rbac.py): Roles and ClusterRoles (their effective rules, aggregation resolved) and their bindings are
  compared with the baseline; the diff goes to the change record. A new powerful grant - (subject, scope, role,
  reason), a reason from rbac.POWERS or a wildcard - fails, unless the exact binding, role and subject are in what
  the target minor's apiserver and kubeadm create (data_rbac.py), or in the deployed revision of a Helm release the
  addons stage manages, with the reason in the table's own role; or the operator accepted that binding and subject
  by exact name, with a reason that is recorded.
- Legacy service-account token Secrets are flagged; one created since the baseline fails.
- NetworkPolicies must be intact (none missing or changed since the baseline), and when there are any, the CNI
  that enforces them must support the control plane's minor (the addon matrix).
Everything fails closed: an object that cannot be read is a failed check naming it, never a pass.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils import addons, data_rbac, rbac, removed_apis
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.kube import now_rfc3339
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import DNS_LABEL, load_yaml

PSA = "pod-security.kubernetes.io/"
PSA_LEVELS = ("privileged", "baseline", "restricted")
# Pod Security's own rule (pod-security-admission api.ParseVersion: "latest" or ^v1\.(0|[1-9][0-9]*)$, Go's $ being
# the end of the text): anything else - v1.035, a trailing newline, other digits - is invalid, and PSA then
# evaluates the namespace at latest (fail closed), so it is not pinned.
_PSA_VERSION = re.compile(r"v1\.(?:0|[1-9][0-9]{0,3})\Z")
LEGACY_TOKEN_TYPE = "kubernetes.io/service-account-token"
BASELINE_FORMAT = 2  # 2: RBAC powers per reason, aggregation resolved (rbac.py); a format-1 baseline is refused


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(obj.get("metadata")) if isinstance(obj, Mapping) else {}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


# -- inputs ---------------------------------------------------------------------------------------------------------
def parse_probes(value: Any, name: str = "gpufleet_security_admission_probes") -> List[Dict[str, str]]:
    """Admission probes, each {namespace, image, expect}: ``image`` an image the policy must refuse (undigested or
    from a registry it does not allow), ``expect`` a text the refusal must contain (the policy's name)."""
    if value in (None, ""):
        return []
    if not isinstance(value, (list, tuple)):
        raise InputError("%s: a list of {namespace, image, expect}, got %s" % (name, type(value).__name__))
    out: List[Dict[str, str]] = []
    for index, item in enumerate(value):
        where = "%s[%d]" % (name, index)
        if not isinstance(item, Mapping):
            raise InputError("%s: a mapping {namespace, image, expect}, got %s" % (where, type(item).__name__))
        unknown = sorted(set(item) - {"namespace", "image", "expect"})
        if unknown:
            raise InputError("%s: unknown field(s) %s; the fields are namespace, image and expect" % (
                where, ", ".join(map(str, unknown))))
        probe = {}
        for field in ("namespace", "image", "expect"):
            text = item.get(field)
            if not isinstance(text, str) or not text.strip():
                raise InputError("%s.%s: required, a non-empty string (%s)" % (where, field, {
                    "namespace": "the namespace whose admission policy is probed",
                    "image": "an image the policy must refuse, e.g. registry.example/app:latest (no digest)",
                    "expect": "text the refusal must contain, e.g. the policy's name"}[field]))
            probe[field] = text.strip()
        if not DNS_LABEL.fullmatch(probe["namespace"]):
            raise InputError("%s.namespace: %r is not a namespace name" % (where, probe["namespace"]))
        echoed = [probe["namespace"], probe["image"], PROBE_NAME, "forbidden", "denied", "admission webhook"]
        if any(probe["expect"] in text or text in probe["expect"] for text in echoed):
            raise InputError("%s.expect: %r is echoed in any refusal (the namespace, the image, the probe's name or "
                             "the apiserver's own words); give text only the policy's refusal holds, such as its "
                             "name" % (where, probe["expect"]))
        out.append(probe)
    return out


def parse_inputs(probes: Any, rbac_expected: Any = None, rbac_accepted: Any = None) -> Dict[str, Any]:
    """The cell's security inputs, checked before anything runs. ``rbac_expected`` (the binding-name patterns of
    gpufleet 0.2) is refused: a name pattern lets anyone who can create a binding hide it under such a name."""
    if rbac_expected not in (None, "", []):
        raise InputError("gpufleet_security_rbac_expected: binding-name patterns are no longer accepted - a binding "
                         "named like 'kubeadm:anything' would hide a grant of cluster-admin. What the apiserver and "
                         "kubeadm create is known by identity now (plugins/module_utils/data_rbac.py); remove the "
                         "variable, and accept a specific binding, if you must, with gpufleet_security_rbac_accepted: "
                         "[{binding: NAME, subject: 'User NAME', reason: WHY}]")
    return {"admission_probes": parse_probes(probes), "rbac_accepted": rbac.parse_accepted(rbac_accepted)}


# -- Pod Security Admission -----------------------------------------------------------------------------------------
def psa_state(namespaces: Iterable[Mapping[str, Any]]) -> Dict[str, Dict[str, str]]:
    """Per namespace, its pod-security labels (enforce, enforce-version, audit, warn ...) without the prefix."""
    out: Dict[str, Dict[str, str]] = {}
    for ns in namespaces:
        meta = _meta(ns)
        name = meta.get("name")
        if not isinstance(name, str):
            raise InputError("a Namespace without metadata.name: cannot judge its Pod Security labels")
        labels = _map(meta.get("labels"))
        out[name] = {k[len(PSA):]: str(v) for k, v in sorted(labels.items()) if str(k).startswith(PSA)}
    return out


def psa_problem(labels: Mapping[str, str], newest: str = "") -> str:
    """Why a namespace's enforce label is not pinned ('' when it is pinned or has no enforce label). ``newest``
    (vX.Y): the newest minor the cell runs or is going to; a pin above it is evaluated as latest."""
    level = labels.get("enforce")
    if level is None:
        return ""
    if level not in PSA_LEVELS:
        return "enforce level %r is not one of %s" % (level, ", ".join(PSA_LEVELS))
    version = labels.get("enforce-version")
    if level == "privileged":
        return ""  # privileged allows everything at every version
    if version is None:
        return "enforce=%s without enforce-version (it follows the control plane: latest)" % level
    if version == "latest":
        return "enforce=%s at enforce-version=latest (it follows the control plane)" % level
    if not _PSA_VERSION.match(version):
        return "enforce-version %r is not a minor Pod Security accepts (v1.N, no leading zero): it evaluates it as " \
            "latest, which follows the control plane" % version
    if newest and _minor_of(version) > _minor_of(newest):
        return "enforce-version %s is newer than %s: evaluated as latest, it follows the control plane" % (
            version, newest)
    return ""


def _minor_of(version: str) -> Tuple[int, int]:
    major, minor = version.lstrip("v").split(".")[:2]
    return int(major), int(minor)


# -- RBAC (judged in rbac.py: rules matched as Kubernetes RBAC does, aggregation resolved, expected by identity) ---
def rbac_snapshot(cluster_roles: Iterable[Mapping[str, Any]], bindings: Iterable[Mapping[str, Any]],
                  roles: Iterable[Mapping[str, Any]] = (),
                  role_bindings: Iterable[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    """A compact, comparable form: per ClusterRole (by name) and Role (``NAMESPACE/NAME``) the digest of its
    effective rules (an aggregated ClusterRole's resolved), and each power reason with the roles that bring it;
    per ClusterRoleBinding (by name) and RoleBinding (``NAMESPACE/NAME``) its role and subjects."""
    cluster_roles, roles = list(cluster_roles), list(roles)
    effective = rbac.effective_rules(cluster_roles, roles)
    powers = rbac.powers_of(effective)
    aggregated = {str(_meta(r).get("name")) for r in cluster_roles if isinstance(r, Mapping) and
                  r.get("aggregationRule") is not None}
    out_roles = {key: {"digest": rbac.rules_digest(rules), "aggregated": key in aggregated,
                       "power": powers[key], "rules": len(rules)} for key, rules in effective.items()}
    return {"roles": out_roles, "bindings": rbac.binding_snapshot(bindings, role_bindings)}


def rbac_diff(before: Mapping[str, Any], after: Mapping[str, Any],
              tables: Sequence[Tuple[str, Mapping[str, Any]]] = (),
              accepted: Sequence[Mapping[str, str]] = ()) -> Dict[str, Any]:
    """What changed, for the record, and each new powerful grant: expected (in ``tables``), accepted by the
    operator, or new (fails the check)."""
    def changed(kind: str) -> Dict[str, List[str]]:
        old, new = before.get(kind) or {}, after.get(kind) or {}
        return {"added": sorted(set(new) - set(old)), "removed": sorted(set(old) - set(new)),
                "changed": sorted(n for n in set(old) & set(new) if old[n] != new[n])}
    judged = rbac.judge_new_grants(before, after, tables, accepted)
    return {"roles": changed("roles"), "bindings": changed("bindings"),
            "new_powerful_grants": judged["new"], "expected_powerful_grants": judged["expected"],
            "accepted_powerful_grants": judged["accepted"]}


# -- legacy tokens, NetworkPolicies ---------------------------------------------------------------------------------
def legacy_tokens(secrets: Iterable[Mapping[str, Any]]) -> List[Dict[str, str]]:
    """Secrets of type kubernetes.io/service-account-token: namespace, name, service account, last used and
    invalid-since (the labels the apiserver's legacy-token tracking sets). Only metadata is read."""
    out = []
    for secret in secrets:
        if secret.get("type") != LEGACY_TOKEN_TYPE:
            continue
        meta = _meta(secret)
        labels = _map(meta.get("labels"))
        notes = _map(meta.get("annotations"))
        out.append({"namespace": str(meta.get("namespace", "")), "name": str(meta.get("name", "")),
                    "service_account": str(notes.get("kubernetes.io/service-account.name", "")),
                    "last_used": str(labels.get("kubernetes.io/legacy-token-last-used", "")),
                    "invalid_since": str(labels.get("kubernetes.io/legacy-token-invalid-since", ""))})
    return sorted(out, key=lambda t: (t["namespace"], t["name"]))


def netpol_snapshot(policies: Iterable[Mapping[str, Any]]) -> Dict[str, str]:
    """NAMESPACE/NAME -> digest of the policy's spec."""
    out = {}
    for policy in policies:
        meta = _meta(policy)
        if not isinstance(meta.get("name"), str):
            raise InputError("a NetworkPolicy without metadata.name")
        out["%s/%s" % (meta.get("namespace", ""), meta["name"])] = _digest(policy.get("spec"))
    return out


# -- admission probes -----------------------------------------------------------------------------------------------
PROBE_NAME = "gpufleet-admission-probe"


def probe_pod(probe: Mapping[str, str]) -> Dict[str, Any]:
    """The probe pod, created only as a server-side dry run: it satisfies the restricted Pod Security level, so
    only the image policy has a reason to refuse it."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": PROBE_NAME, "namespace": probe["namespace"],
                         "labels": {"app.kubernetes.io/name": PROBE_NAME, "app.kubernetes.io/part-of": "gpufleet"}},
            "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "probe", "image": probe["image"],
                                     "securityContext": {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]}}}]}}


def judge_probe(probe: Mapping[str, str], status: int, message: str) -> Dict[str, Any]:
    """Refused with the expected text: passed. Admitted, or refused for another reason (namespace missing, the
    apiserver unreachable, a policy not named): failed, saying which."""
    text = message or ""
    unprobed = "does not support dry run" in text or "cannot create resource" in text
    refused = status in (400, 403, 422) and not unprobed
    named = probe["expect"] in text and "denied" in text  # "denied request" (a policy), "denied the request" (webhook)
    if refused and named:
        why = "refused: %s" % message
    elif unprobed:
        why = "could not probe: %s (a webhook that refuses dry runs, or no RBAC to create pods there)" % message
    elif status in (200, 201):
        why = "ADMITTED (dry run): the image policy no longer refuses %s" % probe["image"]
    elif refused:
        why = "refused, but not by the expected policy (no %r in: %s)" % (probe["expect"], message)
    else:
        why = "could not probe: HTTP %d %s" % (status, message)
    return {"namespace": probe["namespace"], "image": probe["image"], "expect": probe["expect"],
            "status": status, "passed": refused and named, "detail": why[:500]}


# -- baseline and judgement -----------------------------------------------------------------------------------------
def snapshot(namespaces: Sequence[Mapping[str, Any]], cluster_roles: Sequence[Mapping[str, Any]],
             bindings: Sequence[Mapping[str, Any]], secrets: Sequence[Mapping[str, Any]],
             policies: Sequence[Mapping[str, Any]], roles: Sequence[Mapping[str, Any]] = (),
             role_bindings: Sequence[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    """Today's state in the baseline's shape."""
    return {"format": BASELINE_FORMAT,
            "psa": {n: {k: v for k, v in labels.items() if k in ("enforce", "enforce-version")}
                    for n, labels in psa_state(namespaces).items()},
            "rbac": rbac_snapshot(cluster_roles, bindings, roles, role_bindings),
            "legacy_tokens": ["%s/%s" % (t["namespace"], t["name"]) for t in legacy_tokens(secrets)],
            "network_policies": netpol_snapshot(policies)}


def check_baseline(doc: Any, target: str) -> Optional[Dict[str, Any]]:
    """A stored baseline, if it is for ``target`` and readable; None when it is for another target. Unreadable is
    an error (fail closed: the comparison cannot be made)."""
    if not isinstance(doc, Mapping) or doc.get("format") != BASELINE_FORMAT:
        raise InputError("the stored security baseline is unreadable or of another format (%r); delete the "
                         "ConfigMap and take a new one before the control plane moves" % (
                             doc.get("format") if isinstance(doc, Mapping) else type(doc).__name__))
    if doc.get("target") != target:
        return None
    for key in ("psa", "rbac", "legacy_tokens", "network_policies"):
        if key not in doc:
            raise InputError("the stored security baseline lacks %r; delete it and take a new one" % key)
    return dict(doc)


def judge(now: Mapping[str, Any], before: Optional[Mapping[str, Any]], probes: Sequence[Mapping[str, Any]],
          cni: Sequence[Mapping[str, Any]], tables: Sequence[Tuple[str, Mapping[str, Any]]] = (),
          accepted: Sequence[Mapping[str, str]] = (), require_baseline: bool = False, subject: str = "cluster",
          target: str = "", table_gaps: Sequence[str] = ()) -> Dict[str, Any]:
    """The security checks (gate shape) and the report for the record.

    ``cni``: the CNI addons found, each an addon finding (addon, version, severity, message) judged against the
    control plane's minor now. ``target`` (vX.Y.Z): a Pod Security pin above its minor follows the control plane.
    ``tables``: (source, rbac.expected_snapshot) of what the upgrade is expected to create - the target minor's
    apiserver and kubeadm, the Helm releases the addons stage applied; ``table_gaps``: why an expected table could
    not be had (a failed check: without it every new grant would be judged against nothing); ``accepted``: the
    operator's accepted bindings (rbac.parse_accepted)."""
    checks: List[Check] = []
    report: Dict[str, Any] = {}
    psa = now.get("psa") or {}
    newest = "v%d.%d" % _minor_of(target) if target else ""
    problems = {n: psa_problem(labels, newest) for n, labels in sorted(psa.items())}
    unpinned = {n: p for n, p in problems.items() if p}
    for what, found in (("Namespace", psa), ("ClusterRole", _map(now.get("rbac")).get("roles"))):
        if not found:  # every cluster has some: none read is a failed read, never "nothing to judge"
            checks.append(Check("security_read", subject, False, "no %s could be read" % what,
                                "the cluster's %ss" % what, "check the credentials' list rights"))
    report["psa"] = {"unpinned": [{"namespace": n, "problem": p} for n, p in unpinned.items()],
                     "pinned": sorted(n for n, lab in psa.items() if "enforce" in lab and n not in unpinned),
                     "unlabelled": sorted(n for n, lab in psa.items() if "enforce" not in lab)}
    checks.append(Check("psa_pinned", subject, not unpinned,
                        "; ".join("%s: %s" % kv for kv in unpinned.items()) or "every enforce label pinned",
                        "enforce-version pinned to vX.Y where enforce is set",
                        "pin them (playbooks/psa_pin.yml) before the control plane moves" if unpinned else ""))

    for probe in probes:
        checks.append(Check("admission_refuses", "%s/%s" % (subject, probe["namespace"]), bool(probe["passed"]),
                            probe["detail"], "%s refused (%s)" % (probe["image"], probe["expect"])))
    report["admission"] = list(probes)
    if not probes:
        checks.append(Check("admission_probes", subject, False, "none configured",
                            "at least one probe of the cell's image policy",
                            "set gpufleet_security_admission_probes: without one nothing shows that admission still "
                            "refuses what it must after the upgrade", severity="warn"))

    tokens = now.get("legacy_tokens") or []
    report["legacy_tokens"] = list(tokens)
    checks.append(Check("legacy_tokens", subject, not tokens, ", ".join(tokens) or "none",
                        "no Secret of type kubernetes.io/service-account-token",
                        "move their users to TokenRequest tokens" if tokens else "", severity="warn"))

    policies = now.get("network_policies") or {}
    if policies:
        # only a documented "supports" passes; an open-ended or rule-only row is a warning, a block fails
        bad = [c for c in cni if c.get("severity") == "block"]
        unsure = [c for c in cni if c.get("severity") not in ("ok", "block")]
        detail = "; ".join(str(c.get("message")) for c in bad + unsure) or (
            "" if cni else "%d NetworkPolicies with nothing known to enforce them" % len(policies))
        checks.append(Check("network_policy_cni", subject, bool(cni) and not bad and not unsure,
                            "; ".join("%s %s" % (c.get("addon"), c.get("version") or "?") for c in cni) or
                            "no CNI gpufleet knows to enforce NetworkPolicy (Calico, Cilium)",
                            "a CNI that enforces NetworkPolicy, supported at this control-plane minor", detail,
                            severity="fail" if bad else ("warn" if unsure or not cni else "fail")))
    report["network_policies"] = {"count": len(policies), "cni": [
        {k: c.get(k) for k in ("addon", "version", "severity", "where")} for c in cni]}

    if before is None:
        report["baseline"] = "none"
        if require_baseline:
            checks.append(Check("security_baseline", subject, False,
                                "no baseline of %s stored" % (target or "the target"),
                                "a baseline taken before the control plane moved",
                                "control_plane.yml records it before its first host; it was never taken or it was "
                                "removed. Rerun control_plane.yml (on a finished control plane it changes nothing "
                                "else and records the cell as it is now: check the RBAC and policies first)"))
        return _out(checks, report)

    report["baseline"] = {k: before.get(k) for k in ("target", "taken", "run_id")}
    old_psa = before.get("psa") or {}
    drift = sorted("%s: %s -> %s" % (n, _psa_text(old_psa.get(n)), _psa_text(psa.get(n)))
                   for n in sorted(set(old_psa) | set(psa))
                   if n in old_psa and _psa_text(old_psa.get(n)) != _psa_text(psa.get(n)))
    report["psa"]["changed"] = drift
    checks.append(Check("psa_unchanged", subject, not drift, "; ".join(drift) or "as in the baseline",
                        "every namespace's enforce level and version as in the baseline",
                        "a bump is a separate, recorded step (playbooks/psa_pin.yml)" if drift else ""))

    diff = rbac_diff(before.get("rbac") or {}, now.get("rbac") or {}, tables, accepted)
    diff["expected_from"] = [table[0] for table in tables]
    report["rbac"] = diff
    for gap in table_gaps:
        checks.append(Check("rbac_expected_table", subject, False, gap, "what the upgrade is expected to create",
                            "new grants cannot be told from expected ones without it"))
    checks.append(Check("rbac_no_new_powerful_grant", subject, not diff["new_powerful_grants"],
                        "; ".join(diff["new_powerful_grants"]) or "none",
                        "no new powerful grant but those %s creates (by exact binding, role and subject) and "
                        "those the operator accepted" % (" and ".join(table[0] for table in tables) or
                                                         "nothing known")))

    new_tokens = sorted(set(tokens) - set(before.get("legacy_tokens") or []))
    report["legacy_tokens_new"] = new_tokens
    checks.append(Check("legacy_tokens_not_added", subject, not new_tokens, ", ".join(new_tokens) or "none",
                        "no legacy token Secret created since the baseline"))

    old_np = before.get("network_policies") or {}
    missing = sorted(set(old_np) - set(policies))
    changed = sorted(k for k in set(old_np) & set(policies) if old_np[k] != policies[k])
    report["network_policies"].update(missing=missing, changed=changed,
                                      added=sorted(set(policies) - set(old_np)))
    lost = ["%s missing" % k for k in missing] + ["%s changed" % k for k in changed]
    checks.append(Check("network_policies_intact", subject, not lost, "; ".join(lost) or
                        "%d as in the baseline" % len(old_np), "every NetworkPolicy of the baseline, unchanged"))
    return _out(checks, report)


def _psa_text(labels: Optional[Mapping[str, str]]) -> str:
    if not labels or "enforce" not in labels:
        return "no enforce label"
    return "%s@%s" % (labels["enforce"], labels.get("enforce-version", "latest"))


def _out(checks: List[Check], report: Dict[str, Any]) -> Dict[str, Any]:
    out = summarize(checks)
    out["security"] = report
    return out


# -- against a cluster (the module's body; every judgement above is pure) -------------------------------------------
BASELINE_NAMESPACE = "kube-system"
BASELINE_NAME = "gpufleet-security-baseline"
BASELINE_KEY = "baseline.json"


def read_state(kube: Any) -> Dict[str, Any]:
    """Today's state, read from the cluster (Secrets as metadata only)."""
    cluster_roles, bindings, roles, role_bindings = kube.rbac()
    return snapshot(kube.namespaces(), cluster_roles, bindings, kube.secrets_of_type(LEGACY_TOKEN_TYPE),
                    kube.network_policies(), roles, role_bindings)


def cni_findings(workloads: Iterable[Any], apiserver: str, extra_support: Any = None,
                 declared_versions: Any = None, extra_addons: Any = None) -> List[Dict[str, Any]]:
    """The NetworkPolicy-enforcing addons found (Calico, Cilium, an operator's addon that says it enforces them),
    judged against the control plane's minor now."""
    result = addons.check_addons(workloads, [], apiserver, None, extra_support, declared_versions, extra_addons)
    known = addons.catalog(extra_addons)
    return [f for f in result["findings"] if known[f["addon"]].get("network_policy")]


def stored_baseline(kube: Any, target: str) -> Optional[Dict[str, Any]]:
    """The baseline stored for ``target``; None when there is none, or one for another target."""
    cm = kube.read_config_map(BASELINE_NAMESPACE, BASELINE_NAME)
    if cm is None:
        return None
    text = (cm.get("data") or {}).get(BASELINE_KEY)
    try:
        doc = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        doc = None
    return check_baseline(doc, target)


BASELINE_MAX_BYTES = 900 * 1024  # a ConfigMap holds at most 1 MiB, metadata included


def store_baseline(kube: Any, doc: Mapping[str, Any]) -> None:
    text = json.dumps(doc, sort_keys=True)
    if len(text) > BASELINE_MAX_BYTES:
        raise InputError("the security baseline of %s is %d bytes, more than one ConfigMap holds (%d): the cell has "
                         "%d namespaces, %d ClusterRoles, %d ClusterRoleBindings and %d NetworkPolicies. Nothing was "
                         "stored; the checks cannot compare against a baseline in this cell (report it: the baseline "
                         "needs to be split or compressed)" % (
                             doc.get("target"), len(text), BASELINE_MAX_BYTES, len(doc.get("psa") or {}),
                             len(_map(doc.get("rbac")).get("roles") or {}),
                             len(_map(doc.get("rbac")).get("bindings") or {}), len(doc.get("network_policies") or {})))
    kube.put_config_map(BASELINE_NAMESPACE, BASELINE_NAME, {BASELINE_KEY: text},
                        {"app.kubernetes.io/managed-by": "gpufleet", "gpufleet.io/target": str(doc["target"])})


def run_probes(kube: Any, probes: Sequence[Mapping[str, str]]) -> List[Dict[str, Any]]:
    """Each admission probe as a server-side dry run (nothing is created)."""
    out = []
    for probe in probes:
        status, message = kube.dry_run_pod(probe["namespace"], probe_pod(probe))
        out.append(judge_probe(probe, status, message))
    return out


def take_baseline(kube: Any, target: str, run_id: str, check_mode: bool) -> Dict[str, Any]:
    """Store today's state as the baseline of ``target`` unless one is stored for it (a rerun keeps the first)."""
    kept = stored_baseline(kube, target)
    if kept is not None:
        return {"changed": False, "baseline": {k: kept.get(k) for k in ("target", "taken", "run_id")},
                "msg": "the security baseline of %s taken %s is kept" % (target, kept.get("taken"))}
    doc = dict(read_state(kube), target=target, run_id=run_id, taken=now_rfc3339())
    if not check_mode:
        store_baseline(kube, doc)
    return {"changed": True, "baseline": {k: doc[k] for k in ("target", "taken", "run_id")},
            "msg": "security baseline of %s recorded (%d namespaces, %d ClusterRoles, %d NetworkPolicies)" % (
                target, len(doc["psa"]), len(doc["rbac"]["roles"]), len(doc["network_policies"]))}


def expected_tables(kube: Any, target: str, releases: Sequence[Mapping[str, str]]
                    ) -> Tuple[List[Tuple[str, Dict[str, Any]]], List[str]]:
    """What the upgrade to ``target`` is expected to create: the target minor's apiserver and kubeadm objects
    (data_rbac.py) and the RBAC of each Helm release the addons stage manages (``releases``: {release:
    NAMESPACE/NAME, version: the chart version it applies}) once its deployed revision is that version. Returns
    (tables, gaps): a gap names a table that could not be had."""
    tables: List[Tuple[str, Dict[str, Any]]] = []
    gaps: List[str] = []
    try:
        tables.append(data_rbac.expected(target))
    except InputError as exc:
        gaps.append(exc.msg)
    if releases:
        secrets = kube.helm_release_secrets()
        for release in releases:
            try:
                found = helm_rbac(secrets, release["release"], release["version"])
            except GpufleetError as exc:
                gaps.append(exc.msg)
                continue
            if found is not None:
                tables.append(found)
    return tables, gaps


def helm_rbac(secrets: Sequence[Mapping[str, Any]], release: str,
              version: str) -> Optional[Tuple[str, Dict[str, Any]]]:
    """The RBAC in the manifest of ``release``'s (NAMESPACE/NAME) deployed revision, from its Helm Secrets, when
    that revision is chart ``version`` - the one the addons stage applies; None when it is another (the addons
    stage has not moved it yet: its RBAC is the baseline's). Namespaced objects without a namespace are the
    release's, as Helm installs them."""
    namespace, name = release.partition("/")[::2]
    deployed = []
    for secret in secrets:
        meta = _meta(secret)
        labels = _map(meta.get("labels"))
        if meta.get("namespace") == namespace and labels.get("name") == name and labels.get("status") == "deployed":
            deployed.append(secret)
    if len(deployed) != 1:
        raise InputError("Helm release %s: %s deployed revision(s) found, so the RBAC it is expected to create is "
                         "unknown (the addons stage leaves exactly one)" % (release, len(deployed)))
    doc = removed_apis.decode_helm_release(str(_map(deployed[0].get("data")).get("release", "")))
    if not isinstance(doc, Mapping) or removed_apis.release_metadata(doc, {})["chart_version"] != str(version):
        return None
    text = doc.get("manifest")
    if not isinstance(text, str):
        raise InputError("Helm release %s: its deployed revision has no manifest" % release)
    objects = rbac.manifest_rbac(load_yaml(text, "Helm release %s manifest" % release, multi=True))
    for kind in ("Role", "RoleBinding"):
        objects[kind] = [dict(obj, metadata=dict(_meta(obj), namespace=_meta(obj).get("namespace") or namespace))
                         for obj in objects[kind]]
    revision = _map(_meta(deployed[0]).get("labels")).get("version", "?")
    return ("Helm release %s revision %s (chart %s)" % (release, revision, version), rbac.expected_snapshot(objects))


def check(kube: Any, target: str, probes: Sequence[Mapping[str, str]], accepted: Sequence[Mapping[str, str]],
          require_baseline: bool, extra_support: Any = None, declared_versions: Any = None,
          releases: Sequence[Mapping[str, str]] = (), extra_addons: Any = None) -> Dict[str, Any]:
    """Every check against the cluster now and the stored baseline of ``target``."""
    before = stored_baseline(kube, target)
    now = read_state(kube)
    cni = cni_findings(kube.workload_images(), kube.server_version(), extra_support, declared_versions, extra_addons)
    tables, gaps = expected_tables(kube, target, releases)
    return judge(now, before, run_probes(kube, probes), cni, tables, accepted, require_baseline, target=target,
                 table_gaps=gaps)


def pin(kube: Any, target: str, version: str, namespaces: Sequence[str], bump: bool,
        check_mode: bool) -> Dict[str, Any]:
    """Pin enforce labels (playbooks/psa_pin.yml), and carry the change into a stored baseline of ``target``."""
    psa = psa_state(kube.namespaces())
    if _PSA_VERSION.match(version or "") and _minor_of(version) > _minor_of(target):
        raise InputError("psa_version: %s is newer than the target %s; a pin above the control plane is evaluated "
                         "as latest and follows it. Pin to v%d.%d or older" % ((version, target) + _minor_of(target)))
    patches = pin_patches(psa, version, namespaces, bump)
    if patches and not check_mode:
        # the baseline first: a pin that cannot be recorded changes no namespace
        kept = stored_baseline(kube, target)
        if kept is not None:
            for name in patches:
                kept["psa"].setdefault(name, {})["enforce-version"] = version
            store_baseline(kube, kept)
        for name, labels in patches.items():
            kube.patch_namespace(name, {"metadata": {"labels": labels}})
    return {"changed": bool(patches), "psa_changes": {n: version for n in patches},
            "msg": "pinned %s to %s" % (", ".join(patches), version) if patches else
            "every enforce label already pinned (psa_bump moves pinned ones)"}


# -- PSA pinning (a deliberate, recorded step) ----------------------------------------------------------------------
def pin_patches(psa: Mapping[str, Mapping[str, str]], version: str, namespaces: Optional[Sequence[str]] = None,
                bump: bool = False) -> Dict[str, Dict[str, str]]:
    """Label patches that pin every enforce label (or those of ``namespaces``) to ``version``: unpinned ones
    always; pinned ones only with ``bump``. Namespaces without an enforce label are left alone."""
    if not _PSA_VERSION.match(version or ""):
        raise InputError("version: %r is not a Kubernetes minor such as v1.35" % version)
    unknown = sorted(set(namespaces or []) - set(psa))
    if unknown:
        raise InputError("namespaces: no such namespace(s): %s" % ", ".join(unknown))
    out = {}
    for name, labels in sorted(psa.items()):
        if namespaces and name not in namespaces:
            continue
        if "enforce" not in labels or labels["enforce"] == "privileged":
            continue
        if labels.get("enforce-version") == version:
            continue
        if bump or psa_problem(labels):
            out[name] = {PSA + "enforce-version": version}
    return out


def markdown_lines(report: Mapping[str, Any]) -> List[str]:
    """The security report as Markdown lines (the preflight report and the change record)."""
    if not report:
        return []
    psa = _map(report.get("psa"))
    lines = ["- Pod Security: %d pinned, %d unpinned%s, %d without an enforce label" % (
        len(psa.get("pinned") or []), len(psa.get("unpinned") or []),
        " (%s)" % "; ".join("%s: %s" % (u.get("namespace"), u.get("problem")) for u in psa.get("unpinned") or [])
        if psa.get("unpinned") else "", len(psa.get("unlabelled") or []))]
    if psa.get("changed"):
        lines.append("- Pod Security changed since the baseline: %s" % "; ".join(psa["changed"]))
    for probe in report.get("admission") or []:
        lines.append("- admission probe %s (%s): %s" % (probe.get("namespace"), probe.get("image"),
                                                        probe.get("detail")))
    nets = _map(report.get("network_policies"))
    lines.append("- NetworkPolicies: %s; CNI: %s" % (nets.get("count", 0), ", ".join(
        "%s %s (%s)" % (c.get("addon"), c.get("version"), c.get("severity")) for c in nets.get("cni") or [])
        or "none found"))
    for key in ("missing", "changed", "added"):
        if nets.get(key):
            lines.append("- NetworkPolicies %s since the baseline: %s" % (key, ", ".join(nets[key])))
    tokens = report.get("legacy_tokens") or []
    lines.append("- legacy service-account token Secrets: %s" % (", ".join(tokens) or "none"))
    diff = _map(report.get("rbac"))
    for kind in ("roles", "bindings"):
        for change, names in sorted(_map(diff.get(kind)).items()):
            if names:
                lines.append("- RBAC %s %s: %s" % (kind, change, ", ".join(names)))
    for key, words in (("new_powerful_grants", "NEW powerful grant"),
                       ("accepted_powerful_grants", "powerful grant ACCEPTED by the operator"),
                       ("expected_powerful_grants", "expected powerful grant")):
        lines += ["- %s: %s" % (words, g) for g in diff.get(key) or []]
    if diff.get("expected_from"):
        lines.append("- expected RBAC known from: %s" % "; ".join(diff["expected_from"]))
    base = report.get("baseline")
    lines.append("- baseline: %s" % (base if isinstance(base, str) else "%s taken %s" % (
        _map(base).get("target"), _map(base).get("taken"))))
    return lines
