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
- RBAC: Roles and ClusterRoles (their rules, aggregated ones included) and their bindings are compared with the
  baseline; the diff goes to the change record. A subject newly bound to a powerful role (POWER_TABLE: every verb on
  every resource, escalate/bind, writing bindings, impersonation, reading Secrets, pods/exec, nodes/proxy, minting
  tokens, switching admission off) fails, unless the apiserver reconciles the binding (autoupdate, a name matching
  an expected pattern such as ``system:*``) or kubeadm named it (``kubeadm:``), its subject is not everybody, and
  its role did not just become powerful outside the reconciled ones.
- Legacy service-account token Secrets are flagged; one created since the baseline fails.
- NetworkPolicies must be intact (none missing or changed since the baseline), and when there are any, the CNI
  that enforces them must support the control plane's minor (the addon matrix).
Everything fails closed: an object that cannot be read is a failed check naming it, never a pass.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils import addons
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.kube import now_rfc3339

PSA = "pod-security.kubernetes.io/"
PSA_LEVELS = ("privileged", "baseline", "restricted")
_PSA_VERSION = re.compile(r"^v1\.\d{1,3}$")
LEGACY_TOKEN_TYPE = "kubernetes.io/service-account-token"
BASELINE_FORMAT = 1
DEFAULT_RBAC_EXPECTED = ("system:*", "kubeadm:*")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


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
        if not _NAME.match(probe["namespace"]):
            raise InputError("%s.namespace: %r is not a namespace name" % (where, probe["namespace"]))
        echoed = [probe["namespace"], probe["image"], PROBE_NAME, "forbidden", "denied", "admission webhook"]
        if any(probe["expect"] in text or text in probe["expect"] for text in echoed):
            raise InputError("%s.expect: %r is echoed in any refusal (the namespace, the image, the probe's name or "
                             "the apiserver's own words); give text only the policy's refusal holds, such as its "
                             "name" % (where, probe["expect"]))
        out.append(probe)
    return out


def parse_patterns(value: Any, name: str = "gpufleet_security_rbac_expected") -> List[str]:
    """Binding-name patterns (fnmatch) whose changes an upgrade is expected to make; unset: the defaults."""
    if value in (None, ""):
        return list(DEFAULT_RBAC_EXPECTED)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError("%s: a list of binding-name patterns such as 'system:*' (got %r)" % (name, value))
    for pattern in value:
        if len(re.split(r"[*?\[]", pattern.strip(), maxsplit=1)[0]) < 3:
            raise InputError("%s: %r would exempt almost every binding; start each pattern with at least three "
                             "literal characters, such as 'system:*'" % (name, pattern))
    return [v.strip() for v in value]


def parse_inputs(probes: Any, rbac_expected: Any) -> Dict[str, Any]:
    """The cell's security inputs, checked before anything runs."""
    return {"admission_probes": parse_probes(probes), "rbac_expected": parse_patterns(rbac_expected)}


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
        return "enforce-version %r is not a Kubernetes minor such as v1.35" % version
    if newest and _minor_of(version) > _minor_of(newest):
        return "enforce-version %s is newer than %s: evaluated as latest, it follows the control plane" % (
            version, newest)
    return ""


def _minor_of(version: str) -> Tuple[int, int]:
    major, minor = version.lstrip("v").split(".")[:2]
    return int(major), int(minor)


# -- RBAC -----------------------------------------------------------------------------------------------------------
def _rules(role: Mapping[str, Any]) -> List[Dict[str, List[str]]]:
    rules = role.get("rules") or []
    out = []
    for rule in rules if isinstance(rules, list) else []:
        if isinstance(rule, Mapping):
            out.append({k: sorted(str(x) for x in (rule.get(k) or [])) for k in (
                "apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs")})
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True))


# (API groups, resources, verbs, why): a rule matching any row makes its role powerful - as strong as
# cluster-admin or a step from it (docs/reference.md section 11). "*" in a rule matches every group/resource/verb.
POWER_TABLE: Tuple[Tuple[Tuple[str, ...], Tuple[str, ...], Tuple[str, ...], str], ...] = (
    (("*",), ("*",), ("*",), "every verb on every resource of every API group"),
    (("rbac.authorization.k8s.io",), ("roles", "clusterroles"), ("escalate", "bind"), "can grant itself more"),
    (("rbac.authorization.k8s.io",), ("rolebindings", "clusterrolebindings"), ("create", "update", "patch"),
     "can write role bindings"),
    (("", "authentication.k8s.io"), ("users", "groups", "serviceaccounts", "uids", "userextras"), ("impersonate",),
     "can impersonate"),
    (("",), ("secrets",), ("get", "list", "watch"), "reads Secrets"),
    (("",), ("pods/exec", "pods/attach", "nodes/proxy", "serviceaccounts/token"), ("create", "get"),
     "runs code in pods or mints tokens"),
    (("admissionregistration.k8s.io",), ("validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                                         "validatingadmissionpolicies", "validatingadmissionpolicybindings"),
     ("create", "update", "patch", "delete"), "can switch admission policy off"),
)
# Subjects never exempt from the RBAC check, whatever their binding is called.
BROAD_SUBJECTS = ("Group system:authenticated", "Group system:unauthenticated", "User system:anonymous",
                  "Group system:serviceaccounts")


def _matches(granted: Sequence[str], wanted: Sequence[str]) -> bool:
    return "*" in granted or any(w in granted for w in wanted)


def power(rules: Sequence[Mapping[str, List[str]]]) -> List[str]:
    """Why a role is powerful (rows of POWER_TABLE its rules match), empty when it is not."""
    why: List[str] = []
    for rule in rules:
        if rule.get("nonResourceURLs") and not rule.get("resources"):
            continue
        groups, resources, verbs = (rule.get(k) or [] for k in ("apiGroups", "resources", "verbs"))
        for want_groups, want_resources, want_verbs, reason in POWER_TABLE:
            if want_groups == ("*",):
                if "*" in groups and "*" in resources and "*" in verbs:
                    why.append(reason)
            elif _matches(groups, want_groups) and _matches(resources, want_resources) and \
                    _matches(verbs, want_verbs):
                why.append(reason)
    return sorted(set(why))


def _subject(subject: Mapping[str, Any], binding_ns: str = "") -> str:
    kind = str(subject.get("kind", "?"))
    name = str(subject.get("name", "?"))
    if kind == "ServiceAccount":
        return "ServiceAccount %s/%s" % (subject.get("namespace") or binding_ns or "?", name)
    return "%s %s" % (kind, name)


AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"


def rbac_snapshot(cluster_roles: Iterable[Mapping[str, Any]], bindings: Iterable[Mapping[str, Any]],
                  roles: Iterable[Mapping[str, Any]] = (),
                  role_bindings: Iterable[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    """A compact, comparable form: per ClusterRole (by name) and Role (``NAMESPACE/NAME``) its rules' digest,
    whether it is aggregated and why it is powerful; per ClusterRoleBinding (by name) and RoleBinding
    (``NAMESPACE/NAME``) its role, its subjects and whether the apiserver reconciles it (autoupdate)."""
    out_roles: Dict[str, Any] = {}
    for kind, items in (("ClusterRole", cluster_roles), ("Role", roles)):
        for role in items:
            meta = _meta(role)
            if not isinstance(meta.get("name"), str):
                raise InputError("a %s without metadata.name" % kind)
            key = meta["name"] if kind == "ClusterRole" else "%s/%s" % (meta.get("namespace", ""), meta["name"])
            rules = _rules(role)
            out_roles[key] = {"digest": _digest([rules, role.get("aggregationRule")]),
                              "aggregated": bool(role.get("aggregationRule")), "power": power(rules),
                              "rules": len(rules),
                              "autoupdate": _map(meta.get("annotations")).get(AUTOUPDATE) == "true"}
    out_bindings: Dict[str, Any] = {}
    for kind, items in (("ClusterRoleBinding", bindings), ("RoleBinding", role_bindings)):
        for binding in items:
            meta = _meta(binding)
            ref = _map(binding.get("roleRef"))
            if not isinstance(meta.get("name"), str):
                raise InputError("a %s without metadata.name" % kind)
            namespace = str(meta.get("namespace") or "") if kind == "RoleBinding" else ""
            key = "%s/%s" % (namespace, meta["name"]) if namespace else meta["name"]
            role_name = str(ref.get("name", ""))
            if ref.get("kind") == "Role":
                role_name = "%s/%s" % (namespace, role_name)
            subjects = binding.get("subjects") or []
            out_bindings[key] = {
                "role": role_name, "autoupdate": _map(meta.get("annotations")).get(AUTOUPDATE) == "true",
                "subjects": sorted(_subject(s, namespace) for s in subjects if isinstance(s, Mapping))}
    return {"roles": out_roles, "bindings": out_bindings}


def powerful_grants(snapshot: Mapping[str, Any]) -> Set[Tuple[str, str, str]]:
    """(subject, role, binding) for every subject bound to a powerful role."""
    roles = snapshot.get("roles") or {}
    out = set()
    for name, binding in (snapshot.get("bindings") or {}).items():
        role = roles.get(binding.get("role"))
        if role and role.get("power"):
            out |= {(s, binding["role"], name) for s in binding.get("subjects") or []}
    return out


def _expected(grant: Tuple[str, str, str], before: Mapping[str, Any], after: Mapping[str, Any],
              expected: Sequence[str]) -> bool:
    """A new grant an upgrade is expected to make: its binding's name matches a pattern and the apiserver
    reconciles it (autoupdate) or kubeadm named it (``kubeadm:``); its subject is not everybody; and its role is
    new, was powerful already, or is one the apiserver reconciles (autoupdate, a matching name) - a powerful rule
    added to any other role is never expected."""
    subject, role, binding = grant
    name = binding.rsplit("/", 1)[-1]
    if not any(fnmatch.fnmatchcase(name, p) for p in expected) or subject.startswith(BROAD_SUBJECTS):
        return False
    spec = (after.get("bindings") or {}).get(binding) or {}
    if not (spec.get("autoupdate") or name.startswith("kubeadm:")):
        return False
    old_role = (before.get("roles") or {}).get(role)
    if old_role is None or old_role.get("power"):
        return True
    new_role = (after.get("roles") or {}).get(role) or {}
    return bool(new_role.get("autoupdate")) and any(fnmatch.fnmatchcase(role.rsplit("/", 1)[-1], p) for p in expected)


def rbac_diff(before: Mapping[str, Any], after: Mapping[str, Any],
              expected: Sequence[str] = DEFAULT_RBAC_EXPECTED) -> Dict[str, Any]:
    """What changed, for the record, and the new powerful grants the upgrade is not expected to make."""
    def changed(kind: str) -> Dict[str, List[str]]:
        old, new = before.get(kind) or {}, after.get(kind) or {}
        return {"added": sorted(set(new) - set(old)), "removed": sorted(set(old) - set(new)),
                "changed": sorted(n for n in set(old) & set(new) if old[n] != new[n])}
    grants_before = {grant[:2] for grant in powerful_grants(before)}
    fresh = [g for g in powerful_grants(after) if g[:2] not in grants_before]
    text = "%s bound to %s by %s"
    return {"roles": changed("roles"), "bindings": changed("bindings"),
            "new_powerful_grants": sorted({text % g for g in fresh if not _expected(g, before, after, expected)}),
            "expected_powerful_grants": sorted({text % g for g in fresh if _expected(g, before, after, expected)})}


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
          cni: Sequence[Mapping[str, Any]], expected_rbac: Sequence[str] = DEFAULT_RBAC_EXPECTED,
          require_baseline: bool = False, subject: str = "cluster", target: str = "") -> Dict[str, Any]:
    """The security checks (gate shape) and the report for the record.

    ``cni``: the CNI addons found, each an addon finding (addon, version, severity, message) judged against the
    control plane's minor now. ``target`` (vX.Y.Z): a Pod Security pin above its minor follows the control plane."""
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

    diff = rbac_diff(before.get("rbac") or {}, now.get("rbac") or {}, expected_rbac)
    report["rbac"] = diff
    checks.append(Check("rbac_no_new_powerful_grant", subject, not diff["new_powerful_grants"],
                        "; ".join(diff["new_powerful_grants"]) or "none",
                        "no subject newly bound to a powerful role (other than by the apiserver's reconciled "
                        "bindings matching %s, or kubeadm's)" % ", ".join(expected_rbac)))

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
                 declared_versions: Any = None) -> List[Dict[str, Any]]:
    """The NetworkPolicy-enforcing addons found (Calico, Cilium), judged against the control plane's minor now."""
    result = addons.check_addons(workloads, [], apiserver, None, extra_support, declared_versions)
    return [f for f in result["findings"] if addons.ADDONS[f["addon"]].get("network_policy")]


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


def check(kube: Any, target: str, probes: Sequence[Mapping[str, str]], expected: Sequence[str],
          require_baseline: bool, extra_support: Any = None, declared_versions: Any = None) -> Dict[str, Any]:
    """Every check against the cluster now and the stored baseline of ``target``."""
    before = stored_baseline(kube, target)
    now = read_state(kube)
    cni = cni_findings(kube.workload_images(), kube.server_version(), extra_support, declared_versions)
    return judge(now, before, run_probes(kube, probes), cni, expected, require_baseline, target=target)


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
    rbac = _map(report.get("rbac"))
    for kind in ("roles", "bindings"):
        for change, names in sorted(_map(rbac.get(kind)).items()):
            if names:
                lines.append("- RBAC %s %s: %s" % (kind, change, ", ".join(names)))
    for key, words in (("new_powerful_grants", "NEW powerful grant"), ("expected_powerful_grants",
                                                                       "expected powerful grant")):
        lines += ["- %s: %s" % (words, g) for g in rbac.get(key) or []]
    base = report.get("baseline")
    lines.append("- baseline: %s" % (base if isinstance(base, str) else "%s taken %s" % (
        _map(base).get("target"), _map(base).get("taken"))))
    return lines
