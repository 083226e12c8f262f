# Copyright: gpufleet contributors
# Apache License 2.0
"""RBAC judged by identity (docs/reference.md section 11): who can do what powerful thing, and whether an upgrade
was expected to grant it.

- **Rules are matched as Kubernetes RBAC matches them** (k8s.io/kubernetes pkg/apis/rbac/v1 evaluation helpers):
  a verb, API group or resource ``*`` matches everything; ``*/exec`` matches the ``exec`` subresource of every
  resource; a non-resource URL ``/x/*`` matches by prefix. A ClusterRole with an ``aggregationRule`` holds the
  rules of every ClusterRole its selectors match, whatever its own ``rules`` say, so aggregation is resolved here
  (a role that grows because someone labelled a new ClusterRole ``aggregate-to-admin`` is seen growing).
- **A grant is (subject, scope, role, power reason).** ``POWERS`` lists what makes a rule powerful: as strong as
  cluster-admin or a step from it. A new reason on an existing binding is a new grant, and the ClusterRole that
  brought it is named.
- **Expected is an identity, never a name pattern.** A new grant is expected only when the exact binding (name,
  namespace, role reference) and subject are in the table of what the target minor's apiserver reconciles and
  kubeadm creates (``data_rbac.py``, generated from their sources) and the table's own role has the reason; or
  when it is in the manifest of a Helm release revision the addons stage applied; or when the operator accepted
  that binding and subject by exact name, with a reason (recorded). Anything else fails the check.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
RULE_KEYS = ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs")
RBAC = "rbac.authorization.k8s.io"

# What makes a rule powerful, beyond the wildcards (every verb, every resource): (reason, API groups, resources -
# "*/sub" for a subresource of any resource -, verbs). A rule matching any verb of a row on any of its resources
# in any of its groups grants the reason.
POWERS: Tuple[Tuple[str, Tuple[str, ...], Tuple[str, ...], Tuple[str, ...]], ...] = (
    ("reads Secrets", ("",), ("secrets",), ("get", "list", "watch")),
    ("grants itself more (escalate/bind roles)", (RBAC,), ("roles", "clusterroles"), ("escalate", "bind")),
    ("writes role bindings", (RBAC,), ("rolebindings", "clusterrolebindings"), ("create", "update", "patch")),
    ("impersonates users, groups or service accounts", ("", "authentication.k8s.io"),
     ("users", "groups", "serviceaccounts", "uids", "userextras/*"), ("impersonate",)),
    ("reaches kubelets (nodes/proxy)", ("",), ("nodes/proxy",), ("get", "create", "update", "patch", "delete")),
    ("runs commands in containers (*/exec)", ("*",), ("*/exec",), ("create", "get")),
    ("attaches to containers (*/attach)", ("*",), ("*/attach",), ("create", "get")),
    ("proxies to pods, services or nodes (*/proxy)", ("*",), ("*/proxy",),
     ("get", "create", "update", "patch", "delete")),
    ("mints tokens (*/token)", ("*",), ("*/token",), ("create",)),
    ("adds ephemeral containers (pods/ephemeralcontainers)", ("",), ("pods/ephemeralcontainers",),
     ("update", "patch")),
    ("approves certificate requests", ("certificates.k8s.io",), ("certificatesigningrequests/approval",),
     ("update", "patch")),
    ("approves certificates for a signer", ("certificates.k8s.io",), ("signers",), ("approve",)),
    ("can switch admission policy off (webhook and policy configuration)", ("admissionregistration.k8s.io",),
     ("validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
      "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"),
     ("create", "update", "patch", "delete")),
)


# -- rules --------------------------------------------------------------------------------------------------------
def _strings(value: Any, where: str) -> List[str]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InputError("%s: a list of strings, got %r" % (where, value if len(repr(value)) < 80 else
                                                           type(value).__name__))
    return sorted(set(value))


def normalize_rules(rules: Any, where: str) -> List[Dict[str, List[str]]]:
    """A role's ``rules`` as sorted lists of strings per field (none missing); anything else is an InputError."""
    if rules is None:
        return []
    if not isinstance(rules, (list, tuple)):
        raise InputError("%s.rules: a list, got %s" % (where, type(rules).__name__))
    out = []
    for index, rule in enumerate(rules):
        if not isinstance(rule, Mapping):
            raise InputError("%s.rules[%d]: a mapping, got %s" % (where, index, type(rule).__name__))
        out.append({k: _strings(rule.get(k), "%s.rules[%d].%s" % (where, index, k)) for k in RULE_KEYS})
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True))


def _group_matches(rule: Mapping[str, List[str]], groups: Sequence[str]) -> bool:
    if groups == ("*",):
        return bool(rule["apiGroups"])
    return "*" in rule["apiGroups"] or any(g in rule["apiGroups"] for g in groups)


def _verb_matches(rule: Mapping[str, List[str]], verbs: Sequence[str]) -> bool:
    return "*" in rule["verbs"] or any(v in rule["verbs"] for v in verbs)


def _resource_matches(rule: Mapping[str, List[str]], wanted: str) -> bool:
    """RBAC's ResourceMatches for ``wanted`` ("res", "res/sub", or "*/sub": the subresource of any resource)."""
    resource, _, sub = wanted.partition("/")
    for have in rule["resources"]:
        if have in ("*", wanted):
            return True
        if sub and sub != "*" and have == "*/" + sub:
            return True
        if resource == "*" and sub and have.endswith("/" + sub) and len(have) > len(sub) + 1:
            return True  # "*/exec" wanted: pods/exec, deployments/exec ... each grant it
        if sub == "*" and have.startswith(resource + "/"):
            return True  # "userextras/*" wanted: any userextras/<key>
    return False


def _names(rule: Mapping[str, List[str]]) -> str:
    return " (only %s)" % ", ".join(rule["resourceNames"]) if rule["resourceNames"] else ""


def power_reasons(rule: Mapping[str, List[str]]) -> List[str]:
    """Why a normalized rule is powerful (empty when it is not). A rule limited to ``resourceNames`` still grants
    its reason on those objects: the names are part of the reason."""
    why: List[str] = []
    if rule["nonResourceURLs"] and not rule["resources"]:
        if "*" in rule["nonResourceURLs"] and rule["verbs"]:
            why.append("every non-resource URL (%s)" % ", ".join(rule["verbs"]))
        return why
    groups, resources, verbs = rule["apiGroups"], rule["resources"], rule["verbs"]
    if not (groups and resources and verbs):
        return why  # matches nothing
    if "*" in groups and "*" in resources and "*" in verbs:
        return ["every verb on every resource (cluster-admin)%s" % _names(rule)]  # every row below, and more
    else:
        if "*" in verbs:
            why.append("every verb on %s%s" % (", ".join("%s/%s" % (g or "core", r) for g in groups
                                                         for r in resources), _names(rule)))
        if "*" in resources:
            why.append("every resource of %s (%s)%s" % (", ".join(g or "core" for g in groups), ", ".join(verbs),
                                                        _names(rule)))
    for reason, want_groups, want_resources, want_verbs in POWERS:
        if _group_matches(rule, want_groups) and _verb_matches(rule, want_verbs) and \
                any(_resource_matches(rule, r) for r in want_resources):
            why.append(reason + _names(rule))
    return sorted(set(why))


# -- aggregation --------------------------------------------------------------------------------------------------
def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str], where: str) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist) against ``labels``. An
    empty selector matches nothing in an aggregationRule (the controller skips it)."""
    match = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []
    if not isinstance(match, Mapping) or not isinstance(exprs, list):
        raise InputError("%s: a label selector with matchLabels (a mapping) and matchExpressions (a list)" % where)
    if not match and not exprs:
        return False
    if any(labels.get(k) != v for k, v in match.items()):
        return False
    for expr in exprs:
        if not isinstance(expr, Mapping):
            raise InputError("%s.matchExpressions: mappings {key, operator, values}" % where)
        key, op, values = str(expr.get("key")), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise InputError("%s.matchExpressions: operator %r is not In, NotIn, Exists or DoesNotExist" % (
                where, op))
    return True


def _meta(obj: Any, kind: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise InputError("a %s that is not an object (%s)" % (kind, type(obj).__name__))
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise InputError("a %s without metadata.name" % kind)
    if kind in ("Role", "RoleBinding") and (not isinstance(meta.get("namespace"), str) or not meta["namespace"]):
        raise InputError("%s %s without metadata.namespace" % (kind, meta["name"]))
    return meta


def role_key(kind: str, name: str, namespace: str = "") -> str:
    """How a role is named in a snapshot: a ClusterRole by its name, a Role as NAMESPACE/NAME."""
    return name if kind == "ClusterRole" else "%s/%s" % (namespace, name)


def effective_rules(cluster_roles: Iterable[Mapping[str, Any]], roles: Iterable[Mapping[str, Any]] = ()
                    ) -> Dict[str, List[Tuple[Dict[str, List[str]], str]]]:
    """Per role key, its rules with where each came from: an aggregated ClusterRole gets the rules of every
    ClusterRole its selectors match (named as the source), plus any of its own rules no source explains (the
    aggregation controller would overwrite those; until it does they grant)."""
    plain: Dict[str, List[Dict[str, List[str]]]] = {}
    labels: Dict[str, Mapping[str, str]] = {}
    selectors: Dict[str, List[Mapping[str, Any]]] = {}
    for role in cluster_roles:
        meta = _meta(role, "ClusterRole")
        name = meta["name"]
        plain[name] = normalize_rules(role.get("rules"), "ClusterRole %s" % name)
        found = meta.get("labels") or {}
        labels[name] = {str(k): str(v) for k, v in found.items()} if isinstance(found, Mapping) else {}
        agg = role.get("aggregationRule")
        if agg is not None:
            picks = agg.get("clusterRoleSelectors") if isinstance(agg, Mapping) else None
            if not isinstance(picks, list) or not all(isinstance(s, Mapping) for s in picks):
                raise InputError("ClusterRole %s: aggregationRule.clusterRoleSelectors must be a list of label "
                                 "selectors" % name)
            selectors[name] = picks
    out: Dict[str, List[Tuple[Dict[str, List[str]], str]]] = {}

    def resolve(name: str, seen: Tuple[str, ...]) -> List[Tuple[Dict[str, List[str]], str]]:
        """A role's rules, an aggregated one's from what it aggregates - itself aggregated or not (``edit``
        aggregates into ``admin``): each rule named after the ClusterRole that holds it, not a copy of it."""
        if name not in selectors:
            return [(r, name) for r in plain[name]]
        got: List[Tuple[Dict[str, List[str]], str]] = []
        for other in sorted(plain):
            if other != name and other not in seen and any(
                    _selector_matches(s, labels[other], "ClusterRole %s aggregationRule" % name)
                    for s in selectors[name]):
                got += [hit for hit in resolve(other, seen + (name,)) if hit not in got]
        known = [r for r, _ in got]
        return got + [(r, name) for r in plain[name] if r not in known]

    for name in plain:
        out[name] = resolve(name, ())
    for role in roles:
        meta = _meta(role, "Role")
        key = role_key("Role", meta["name"], meta["namespace"])
        out[key] = [(r, key) for r in normalize_rules(role.get("rules"), "Role %s" % key)]
    return out


def role_powers(cluster_roles: Iterable[Mapping[str, Any]], roles: Iterable[Mapping[str, Any]] = ()
                ) -> Dict[str, Dict[str, List[str]]]:
    """Per role key: {reason: [the roles whose rules grant it]} (the role itself, or the ClusterRoles aggregated
    into it)."""
    out: Dict[str, Dict[str, List[str]]] = {}
    for key, rules in effective_rules(cluster_roles, roles).items():
        reasons: Dict[str, Set[str]] = {}
        for rule, via in rules:
            for reason in power_reasons(rule):
                reasons.setdefault(reason, set()).add(via)
        out[key] = {r: sorted(v) for r, v in sorted(reasons.items())}
    return out


def rules_digest(rules: List[Tuple[Dict[str, List[str]], str]]) -> str:
    text = json.dumps(sorted(json.dumps([r, via], sort_keys=True) for r, via in rules))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- subjects and bindings ----------------------------------------------------------------------------------------
def subject_text(subject: Any, binding_ns: str, where: str) -> str:
    """``User NAME``, ``Group NAME`` or ``ServiceAccount NAMESPACE/NAME`` (a RoleBinding's own namespace when the
    subject names none)."""
    if not isinstance(subject, Mapping) or not isinstance(subject.get("name"), str) or \
            subject.get("kind") not in ("User", "Group", "ServiceAccount"):
        raise InputError("%s: a subject needs kind User, Group or ServiceAccount and a name, got %r" % (
            where, subject if len(repr(subject)) < 120 else type(subject).__name__))
    if subject["kind"] == "ServiceAccount":
        namespace = subject.get("namespace") or binding_ns
        if not isinstance(namespace, str) or not namespace:
            raise InputError("%s: ServiceAccount %s without a namespace" % (where, subject["name"]))
        return "ServiceAccount %s/%s" % (namespace, subject["name"])
    return "%s %s" % (subject["kind"], subject["name"])


def binding_snapshot(bindings: Iterable[Mapping[str, Any]], role_bindings: Iterable[Mapping[str, Any]] = ()
                     ) -> Dict[str, Dict[str, Any]]:
    """Per binding key (a ClusterRoleBinding's name, a RoleBinding's NAMESPACE/NAME): its role key, role kind,
    namespace and subjects."""
    out: Dict[str, Dict[str, Any]] = {}
    for kind, items in (("ClusterRoleBinding", bindings), ("RoleBinding", role_bindings)):
        for binding in items:
            meta = _meta(binding, kind)
            namespace = str(meta.get("namespace") or "") if kind == "RoleBinding" else ""
            key = "%s/%s" % (namespace, meta["name"]) if namespace else meta["name"]
            ref = binding.get("roleRef")
            if not isinstance(ref, Mapping) or ref.get("kind") not in ("ClusterRole", "Role") or \
                    not isinstance(ref.get("name"), str) or (kind == "ClusterRoleBinding" and ref["kind"] == "Role"):
                raise InputError("%s %s: roleRef must name a ClusterRole%s" % (
                    kind, key, " or a Role" if kind == "RoleBinding" else ""))
            subjects = binding.get("subjects") or []
            if not isinstance(subjects, list):
                raise InputError("%s %s: subjects must be a list" % (kind, key))
            out[key] = {"kind": kind, "namespace": namespace, "role_kind": ref["kind"],
                        "role": role_key(ref["kind"], ref["name"], namespace),
                        "subjects": sorted({subject_text(s, namespace, "%s %s" % (kind, key)) for s in subjects}),
                        "autoupdate": _autoupdate(meta)}
    return out


def _autoupdate(meta: Mapping[str, Any]) -> bool:
    notes = meta.get("annotations")
    return isinstance(notes, Mapping) and notes.get(AUTOUPDATE) == "true"


def grants(snapshot: Mapping[str, Any]) -> Dict[Tuple[str, str, str, str], List[str]]:
    """Every powerful grant of a snapshot (security.rbac_snapshot): (subject, scope, role, reason) -> the bindings
    that give it. ``scope`` is "cluster" or "namespace NS"."""
    roles = snapshot.get("roles") or {}
    out: Dict[Tuple[str, str, str, str], List[str]] = {}
    for key, binding in sorted((snapshot.get("bindings") or {}).items()):
        role = roles.get(binding.get("role")) or {}
        scope = "namespace %s" % binding["namespace"] if binding.get("namespace") else "cluster"
        for reason in role.get("power") or {}:
            for subject in binding.get("subjects") or []:
                out.setdefault((subject, scope, binding["role"], reason), []).append(key)
    return out


# -- what is expected ---------------------------------------------------------------------------------------------
def expected_snapshot(objects: Mapping[str, Iterable[Mapping[str, Any]]]) -> Dict[str, Any]:
    """The snapshot shape (roles with their powers, bindings) of a set of expected objects: a table minor's, or a
    Helm release manifest's RBAC. ``objects``: {ClusterRole: [...], Role: [...], ClusterRoleBinding: [...],
    RoleBinding: [...]}."""
    powers = role_powers(objects.get("ClusterRole") or [], objects.get("Role") or [])
    return {"roles": {k: {"power": v} for k, v in powers.items()},
            "bindings": binding_snapshot(objects.get("ClusterRoleBinding") or [], objects.get("RoleBinding") or [])}


def manifest_rbac(docs: Iterable[Any]) -> Dict[str, List[Mapping[str, Any]]]:
    """The RBAC objects of parsed manifest documents (``items`` of a List expanded), by kind."""
    out: Dict[str, List[Mapping[str, Any]]] = {k: [] for k in ("ClusterRole", "Role", "ClusterRoleBinding",
                                                               "RoleBinding")}
    stack = list(docs)
    while stack:
        doc = stack.pop(0)
        if not isinstance(doc, Mapping):
            continue
        if isinstance(doc.get("items"), list) and str(doc.get("kind", "")).endswith("List"):
            stack.extend(doc["items"])
            continue
        api = str(doc.get("apiVersion", ""))
        if doc.get("kind") in out and api.startswith(RBAC + "/"):
            out[str(doc["kind"])].append(doc)
    return out


def parse_accepted(value: Any, name: str = "gpufleet_security_rbac_accepted") -> List[Dict[str, str]]:
    """The operator's accepted bindings: each {binding, subject, reason} - the binding by its exact key (a
    ClusterRoleBinding's name, a RoleBinding's NAMESPACE/NAME), the subject exactly as reported (``User alice``,
    ``Group g``, ``ServiceAccount ns/name``), and why (recorded with the run). No pattern is allowed."""
    if value in (None, ""):
        return []
    if not isinstance(value, (list, tuple)):
        raise InputError("%s: a list of {binding, subject, reason}, got %s" % (name, type(value).__name__))
    out = []
    for index, item in enumerate(value):
        where = "%s[%d]" % (name, index)
        if not isinstance(item, Mapping):
            raise InputError("%s: a mapping {binding, subject, reason}, got %s" % (where, type(item).__name__))
        unknown = sorted(str(k) for k in set(item) - {"binding", "subject", "reason"})
        if unknown:
            raise InputError("%s: unknown field(s) %s; the fields are binding, subject and reason" % (
                where, ", ".join(unknown)))
        entry = {}
        for field, example in (("binding", "the binding's exact name, NAMESPACE/NAME for a RoleBinding"),
                               ("subject", "exactly as the check reports it, e.g. 'User alice' or "
                                           "'ServiceAccount ns/name'"),
                               ("reason", "why this grant is accepted; it is recorded with the run")):
            text = item.get(field)
            if not isinstance(text, str) or not text.strip() or any(c in text for c in "\r\n"):
                raise InputError("%s.%s: required, one line of text (%s)" % (where, field, example))
            entry[field] = text.strip()
        if any(c in entry["binding"] + entry["subject"] for c in "*?["):
            raise InputError("%s: binding and subject are exact names, not patterns (got %r, %r)" % (
                where, entry["binding"], entry["subject"]))
        if entry["subject"].split(" ", 1)[0] not in ("User", "Group", "ServiceAccount") or " " not in \
                entry["subject"]:
            raise InputError("%s.subject: %r must read KIND NAME, KIND one of User, Group, ServiceAccount" % (
                where, entry["subject"]))
        out.append(entry)
    return out


def judge_new_grants(before: Mapping[str, Any], after: Mapping[str, Any],
                     tables: Sequence[Tuple[str, Mapping[str, Any]]],
                     accepted: Sequence[Mapping[str, str]] = ()) -> Dict[str, List[str]]:
    """Each grant in ``after`` that ``before`` did not have, sorted into ``new`` (fails the check), ``expected``
    (the binding, its role reference and the subject are in one of ``tables`` - (source, expected_snapshot) - and
    the table's role has the reason) and ``accepted`` (by the operator, with the reason). Each line names the
    subject, the reason, the role (and the ClusterRole that brought the reason, when it is another) and the
    binding."""
    old = set(grants(before))
    new_roles = after.get("roles") or {}
    out: Dict[str, List[str]] = {"new": [], "expected": [], "accepted": []}
    for grant, bindings in sorted(grants(after).items()):
        if grant in old:
            continue
        subject, scope, role, reason = grant
        via = [v for v in ((new_roles.get(role) or {}).get("power") or {}).get(reason, []) if v != role]
        text = "%s: %s, through %s %s%s (%s)" % (
            subject, reason, "ClusterRole" if "/" not in role else "Role", role,
            ", the rule coming from ClusterRole %s" % ", ".join(via) if via else "", scope)
        by = [hit for hit in (_in_table(b, subject, role, reason, after, tables) for b in bindings) if hit]
        if by:
            out["expected"].append("%s, by %s (%s)" % (text, ", ".join(b for b, _ in by),
                                                       ", ".join(sorted({s for _, s in by}))))
            continue
        ok = [a for a in accepted if a["binding"] in bindings and a["subject"] == subject]
        if ok:
            out["accepted"].append("%s, by %s: accepted by the operator: %s" % (
                text, ok[0]["binding"], ok[0]["reason"]))
            continue
        out["new"].append("%s, by binding %s" % (text, ", ".join(bindings)))
    return out


def _in_table(binding: str, subject: str, role: str, reason: str, after: Mapping[str, Any],
              tables: Sequence[Tuple[str, Mapping[str, Any]]]) -> Optional[Tuple[str, str]]:
    live = (after.get("bindings") or {}).get(binding) or {}
    for source, table in tables:
        want = (table.get("bindings") or {}).get(binding)
        if not want or want.get("role") != role or want.get("role_kind") != live.get("role_kind") or \
                subject not in (want.get("subjects") or []):
            continue
        if reason in (((table.get("roles") or {}).get(role) or {}).get("power") or {}):
            return binding, source
    return None
