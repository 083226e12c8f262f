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

# What makes a rule powerful, beyond the wildcards (every verb, every resource) - from the Kubernetes documentation's
# "Role Based Access Control Good Practices" (docs/reference.md section 11): (reason, API groups, resources - "*/sub"
# for a subresource of any resource -, verbs, cluster-scoped). A rule matching a verb of a row on one of its resources
# in one of its groups grants the reason; the reason names the rule's own verbs and resources, so a grant that grows
# (get -> list on secrets, impersonating service accounts -> users) is a new grant. A cluster-scoped row grants
# nothing through a RoleBinding.
POWERS: Tuple[Tuple[str, Tuple[str, ...], Tuple[str, ...], Tuple[str, ...], bool], ...] = (
    ("reads Secrets", ("",), ("secrets",), ("get", "list", "watch"), False),
    ("escalates or binds roles", (RBAC,), ("roles", "clusterroles"), ("escalate", "bind"), False),
    ("writes role bindings", (RBAC,), ("rolebindings", "clusterrolebindings"), ("create", "update", "patch"), False),
    ("impersonates", ("", "authentication.k8s.io"), ("users", "groups", "serviceaccounts", "uids", "userextras/*"),
     ("impersonate",), False),
    ("reaches kubelets through nodes/proxy", ("",), ("nodes/proxy",), ("get", "create", "update", "patch", "delete"),
     True),
    ("runs commands in containers", ("*",), ("*/exec",), ("create", "get"), False),
    ("attaches to containers", ("*",), ("*/attach",), ("create", "get"), False),
    ("port-forwards into pods", ("*",), ("*/portforward",), ("create", "get"), False),
    ("proxies to pods, services or nodes", ("*",), ("*/proxy",), ("get", "create", "update", "patch", "delete"),
     False),
    ("mints tokens", ("*",), ("*/token",), ("create",), False),
    ("adds ephemeral containers", ("",), ("pods/ephemeralcontainers",), ("update", "patch"), False),
    ("runs workloads as any service account of the namespace", ("", "apps", "batch"),
     ("pods", "deployments", "daemonsets", "statefulsets", "replicasets", "replicationcontrollers", "jobs",
      "cronjobs"), ("create", "update", "patch"), False),
    ("approves certificate requests", ("certificates.k8s.io",), ("certificatesigningrequests/approval",),
     ("update", "patch"), True),
    ("approves certificates for a signer", ("certificates.k8s.io",), ("signers",), ("approve",), True),
    ("can switch admission policy off", ("admissionregistration.k8s.io",),
     ("validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
      "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"),
     ("create", "update", "patch", "delete"), True),
    ("re-routes an API group", ("apiregistration.k8s.io",), ("apiservices",),
     ("create", "update", "patch", "delete"), True),
    ("writes PersistentVolumes, hostPath ones included", ("",), ("persistentvolumes",), ("create", "update", "patch"),
     True),
    ("relabels nodes or namespaces", ("",), ("nodes", "namespaces"), ("update", "patch"),
     True),
)
CLUSTER_SCOPED = frozenset(row[0] for row in POWERS if row[4]) | {"every non-resource URL"}


# -- rules --------------------------------------------------------------------------------------------------------
def _strings(value: Any, where: str) -> List[str]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        shown = value if len(repr(value)) < 80 else type(value).__name__
        raise InputError("%s: a list of strings, got %r" % (where, shown))
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
    resource, sub = wanted.partition("/")[::2]
    for have in rule["resources"]:
        if have in ("*", wanted):
            return True
        if sub and sub != "*" and have == "*/" + sub:
            return True
        if resource == "*" and sub and have.endswith("/" + sub) and len(have) > len(sub) + 1:
            return True  # "*/exec" wanted: pods/exec, deployments/exec ... each grant it
        if sub == "*" and (have.startswith(resource + "/") or have.startswith("*/")):
            return True  # "userextras/*" wanted: any userextras/<key>, and */<key> covers userextras/<key>
    return False


def _only(rule: Mapping[str, List[str]], before: str) -> str:
    """``before`` + "only NAMES" for a rule limited to resourceNames, "" otherwise."""
    return "%sonly %s" % (before, ", ".join(rule["resourceNames"])) if rule["resourceNames"] else ""


def _names(rule: Mapping[str, List[str]]) -> str:
    return "%s)" % _only(rule, " (") if rule["resourceNames"] else ""


def _reason(label: str, verbs: Sequence[str], resources: Sequence[str], rule: Mapping[str, List[str]]) -> str:
    return "%s (%s %s%s)" % (label, ", ".join(verbs), ", ".join(resources), _only(rule, ", "))


def power_reasons(rule: Mapping[str, List[str]]) -> List[str]:
    """Why a normalized rule is powerful (empty when it is not), each reason with the rule's own verbs and
    resources that grant it. A rule limited to ``resourceNames`` still grants its reason on those objects: the names
    are part of the reason."""
    why: List[str] = []
    if rule["nonResourceURLs"] and not rule["resources"]:
        if rule["verbs"] and any(u in ("*", "/*") for u in rule["nonResourceURLs"]):
            why.append("every non-resource URL (%s)" % ", ".join(rule["verbs"]))
        return why
    groups, resources, verbs = rule["apiGroups"], rule["resources"], rule["verbs"]
    if not (groups and resources and verbs):
        return why  # matches nothing
    if "*" in groups and "*" in resources and "*" in verbs:
        return ["every verb on every resource (cluster-admin)%s" % _names(rule)]  # every row below, and more
    if "*" in verbs:
        why.append("every verb on %s%s" % (", ".join("%s/%s" % (g or "core", r) for g in groups
                                                     for r in resources), _names(rule)))
    if "*" in resources:
        why.append("every resource of %s (%s)%s" % (", ".join(g or "core" for g in groups), ", ".join(verbs),
                                                    _names(rule)))
    for label, want_groups, want_resources, want_verbs, _scoped in POWERS:
        if not (_group_matches(rule, want_groups) and _verb_matches(rule, want_verbs)):
            continue
        hit = [r for r in resources if any(_resource_matches({"resources": [r]}, w) for w in want_resources)]
        if hit:
            why.append(_reason(label, [v for v in verbs if v == "*" or v in want_verbs], hit, rule))
    return sorted(set(why))


# -- aggregation --------------------------------------------------------------------------------------------------
def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str], where: str) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist) against ``labels``, as
    LabelSelectorAsSelector reads it: an empty selector matches every ClusterRole."""
    match = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []
    if not isinstance(match, Mapping) or not isinstance(exprs, list):
        raise InputError("%s: a label selector with matchLabels (a mapping) and matchExpressions (a list)" % where)
    if any(labels.get(k) != v for k, v in match.items()):
        return False
    for expr in exprs:
        if not isinstance(expr, Mapping):
            raise InputError("%s.matchExpressions: mappings {key, operator, values}" % where)
        key, op, values = str(expr.get("key")), expr.get("operator"), expr.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise InputError("%s.matchExpressions: values must be a list of strings, got %r" % (
                where, values if len(repr(values)) < 80 else type(values).__name__))
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
    for what, items in (("ClusterRoles", cluster_roles), ("Roles", roles)):
        if not isinstance(items, (list, tuple)):
            raise InputError("%s: a list of objects, got %s" % (what, type(items).__name__))
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
        known = [hit[0] for hit in got]
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
    return powers_of(effective_rules(cluster_roles, roles))


def powers_of(effective: Mapping[str, List[Tuple[Dict[str, List[str]], str]]]) -> Dict[str, Dict[str, List[str]]]:
    """role_powers() of rules already resolved (effective_rules)."""
    out: Dict[str, Dict[str, List[str]]] = {}
    for key, rules in effective.items():
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


Grant = Tuple[str, str, str, str, str]


def grants(snapshot: Mapping[str, Any]) -> Dict[Grant, List[str]]:
    """Every powerful grant of a snapshot (security.rbac_snapshot): (subject, scope, role, reason, source) -> the
    bindings that give it. ``scope`` is "cluster" or "namespace NS"; ``source`` the ClusterRole whose rule grants
    the reason (the role itself, or one aggregated into it). A cluster-scoped power grants nothing through a
    RoleBinding and is left out there."""
    roles = _map(snapshot.get("roles"), "the RBAC snapshot's roles")
    out: Dict[Grant, List[str]] = {}
    for key, found in sorted(_map(snapshot.get("bindings"), "the RBAC snapshot's bindings").items()):
        binding = _map(found, "binding %s" % key)
        role = _map(roles.get(str(binding.get("role"))), "role %s" % binding.get("role"))
        scope = "namespace %s" % binding["namespace"] if binding.get("namespace") else "cluster"
        for reason, sources in sorted(_map(role.get("power"), "role %s power" % binding.get("role")).items()):
            if scope != "cluster" and reason.split(" (", 1)[0] in CLUSTER_SCOPED:
                continue
            for source in sources if isinstance(sources, list) else [str(sources)]:
                for subject in binding.get("subjects") or []:
                    out.setdefault((str(subject), scope, str(binding.get("role")), str(reason), str(source)),
                                   []).append(key)
    return out


def _map(value: Any, what: str) -> Mapping[str, Any]:
    """A mapping, {} for None; anything else (a stored baseline of the wrong shape) is an InputError."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError("%s: a mapping, got %s (a stored baseline of another shape? delete it and take a new "
                         "one)" % (what, type(value).__name__))
    return value


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
    """The operator's accepted grants: each {binding, role, subject, reason} - the binding by its exact key (a
    ClusterRoleBinding's name, a RoleBinding's NAMESPACE/NAME), the role it binds as the check names it (a
    ClusterRole's name, a Role's NAMESPACE/NAME), the subject exactly as reported (``User alice``, ``Group g``,
    ``ServiceAccount ns/name``), and why (recorded with the run). No pattern is allowed; a binding made again to
    another role is not accepted."""
    if value in (None, ""):
        return []
    if not isinstance(value, (list, tuple)):
        raise InputError("%s: a list of {binding, role, subject, reason}, got %s" % (name, type(value).__name__))
    out = []
    fields = (("binding", "the binding's exact name, NAMESPACE/NAME for a RoleBinding"),
              ("role", "the role it binds, as the check names it: a ClusterRole's name, NAMESPACE/NAME for a Role"),
              ("subject", "exactly as the check reports it, e.g. 'User alice' or 'ServiceAccount ns/name'"),
              ("reason", "why this grant is accepted; it is recorded with the run"))
    for index, item in enumerate(value):
        where = "%s[%d]" % (name, index)
        if not isinstance(item, Mapping):
            raise InputError("%s: a mapping {binding, role, subject, reason}, got %s" % (where, type(item).__name__))
        unknown = sorted(str(k) for k in set(item) - {field[0] for field in fields})
        if unknown:
            raise InputError("%s: unknown field(s) %s; the fields are binding, role, subject and reason" % (
                where, ", ".join(unknown)))
        entry = {}
        for field, example in fields:
            text = item.get(field)
            if not isinstance(text, str) or not text.strip() or any(c in text for c in "\r\n"):
                raise InputError("%s.%s: required, one line of text (%s)" % (where, field, example))
            entry[field] = text.strip()
        if any(c in entry["binding"] + entry["role"] + entry["subject"] for c in "*?["):
            raise InputError("%s: binding, role and subject are exact names, not patterns (got %r, %r, %r)" % (
                where, entry["binding"], entry["role"], entry["subject"]))
        kind, subject = entry["subject"].partition(" ")[::2]
        if kind not in ("User", "Group", "ServiceAccount") or not subject or \
                (kind == "ServiceAccount" and subject.count("/") != 1):
            raise InputError("%s.subject: %r must read KIND NAME (User NAME, Group NAME or ServiceAccount "
                             "NAMESPACE/NAME)" % (where, entry["subject"]))
        out.append(entry)
    return out


def judge_new_grants(before: Mapping[str, Any], after: Mapping[str, Any],
                     tables: Sequence[Tuple[str, Mapping[str, Any]]],
                     accepted: Sequence[Mapping[str, str]] = ()) -> Dict[str, List[str]]:
    """Each grant in ``after`` that ``before`` did not have, sorted into ``new`` (fails the check), ``expected``
    and ``accepted`` (by the operator, with the reason). A grant is expected when one of ``tables`` - (source,
    expected_snapshot) - has its exact binding, role reference and subject and the role's reason from the same
    ClusterRole (the role from any table: a chart may bind a built-in role), or when the ClusterRole that brings
    the reason by aggregation is a table's own with that reason (a new aggregate-to-admin role of the minor or of
    an applied chart). Each line names the subject, the power, the role (and the ClusterRole that brought it, when
    another) and the binding."""
    old = set(grants(before))
    out: Dict[str, List[str]] = {"new": [], "expected": [], "accepted": []}
    for grant, bindings in sorted(grants(after).items()):
        if grant in old:
            continue
        subject, scope, role, reason, source = grant
        text = "%s: %s, through %s %s%s (%s)" % (
            subject, reason, "ClusterRole" if "/" not in role else "Role", role,
            ", the rule coming from ClusterRole %s" % source if source != role else "", scope)
        by = [hit for hit in (_in_table(b, grant, after, tables) for b in bindings) if hit]
        if source != role:
            by += [(b, src) for b in bindings for src, table in tables
                   if source in (_role_power(table, source).get(reason) or [])]
        if by:
            out["expected"].append("%s, by %s (%s)" % (text, ", ".join(sorted({hit[0] for hit in by})),
                                                       ", ".join(sorted({hit[1] for hit in by}))))
            continue
        ok = [a for a in accepted if a["binding"] in bindings and a["subject"] == subject and a["role"] == role]
        if ok:
            out["accepted"].append("%s, by %s: accepted by the operator: %s" % (
                text, ok[0]["binding"], ok[0]["reason"]))
            continue
        out["new"].append("%s, by binding %s" % (text, ", ".join(bindings)))
    return out


def _role_power(table: Mapping[str, Any], role: str) -> Mapping[str, Any]:
    return ((table.get("roles") or {}).get(role) or {}).get("power") or {}


def _in_table(binding: str, grant: Grant, after: Mapping[str, Any],
              tables: Sequence[Tuple[str, Mapping[str, Any]]]) -> Optional[Tuple[str, str]]:
    subject, role, reason, source = grant[0], grant[2], grant[3], grant[4]
    live = (after.get("bindings") or {}).get(binding) or {}
    for name, table in tables:
        want = (table.get("bindings") or {}).get(binding)
        if not want or want.get("role") != role or want.get("role_kind") != live.get("role_kind") or \
                want.get("namespace", "") != live.get("namespace", "") or subject not in (want.get("subjects") or []):
            continue
        for defining in [table] + [t[1] for t in tables if t[1] is not table]:
            if source in (_role_power(defining, role).get(reason) or []):
                return binding, name
    return None
