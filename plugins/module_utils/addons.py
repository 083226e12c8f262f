# Copyright: gpufleet contributors
# Apache License 2.0
"""Cluster addons: what runs (from workload images and Helm releases) and whether it supports the target
Kubernetes minor (the matrix in data_addons.py, docs/reference.md section 10).

Detection reads the objects, not the pods: a DaemonSet, Deployment or StatefulSet whose container image is an
addon's image (matched by repository suffix, so any registry or mirror that keeps the path counts) and the newest
deployed revision of each Helm release whose chart is an addon's chart (appVersion first: some charts, e.g.
Kyverno's, version the chart apart from the software). The releases come as metadata only (removed_apis decodes the
secrets and returns no values). The judgement fails closed: a version the matrix has no row for blocks (add the
row, with its source, through the operator's rows), an image pinned by digest alone blocks unless its version is
declared, a row without a documented upper bound is a warning, an addon whose project publishes only a relative
rule (Gatekeeper) is a warning citing it. kube-proxy and CoreDNS deployed by kubeadm are moved by
``kubeadm upgrade apply`` itself: found and reported, never a blocker.
"""
from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_addons import (
    ADDON_SPEC, ADDONS, MATRIX, ROW_SPEC, SHIPPED_ONLY, SOURCES, AddonSupport)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import DNS_LABEL, as_mapping
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import KubeVersion, parse_version

WORKLOAD_KINDS = ("DaemonSet", "Deployment", "StatefulSet")
# Whole values (fullmatch: ``$`` also matches before a trailing newline), ASCII digits (``\d`` takes Unicode ones).
_TAG_VERSION = re.compile(r"v?([0-9]{1,6})\.([0-9]{1,6})(?:\.[0-9]{1,9})?(?:[-+][0-9A-Za-z.+-]*)?")


def _line(version: str) -> Tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def split_image(image: str) -> Tuple[str, str, str]:
    """``registry/repo:tag@sha256:...`` -> (repository, tag, digest); tag or digest may be empty."""
    rest, digest = image.partition("@")[::2]
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon + 1:], digest
    return rest, "", digest


def version_line(text: Any) -> Optional[str]:
    """"v3.29.1", "25.3.0", "0.13", "v1.31.2-gke.1" -> "3.29", "25.3", "0.13", "1.31"; None when it is not one."""
    if not isinstance(text, str):
        return None
    match = _TAG_VERSION.fullmatch(text.strip())
    return "%d.%d" % (int(match.group(1)), int(match.group(2))) if match else None


Catalog = Mapping[str, Mapping[str, Any]]  # addon key -> its definition (ADDON_SPEC's fields)
SHIPPED: Catalog = MappingProxyType(ADDONS)  # read-only: the functions' default catalog
ADDONS_VAR = "gpufleet_addons"
_ADDON_KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")
_REPOSITORY = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)+")  # org/name, no tag
_CHART = re.compile(r"[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?")


def _validated(spec: Mapping[str, Any], value: Mapping[str, Any], where: str, what: str) -> Dict[str, Any]:
    """``value`` checked by ansible-core's argument-spec validator against ``spec`` (types, required fields,
    unknown fields), as a role's argument_specs are."""
    result = ArgumentSpecValidator(dict(spec)).validate(dict(value))
    if result.error_messages:
        raise InputError("%s: %s; give %s. Nothing was changed." % (where, "; ".join(result.error_messages), what))
    return dict(result.validated_parameters)


def check_definition(value: Any, where: str, known: Catalog) -> Dict[str, Any]:
    """One addon the operator defines (ADDON_SPEC), refused unless what identifies it in a cluster is its own: a
    key no other addon has, image repositories as ORG/NAME paths and chart names that no other addon claims, at
    least one of either, a stage after kubeadm's two."""
    what = "{addon, name, stage (3-8), images (ORG/NAME repositories), charts}"
    if not isinstance(value, Mapping):
        raise InputError("%s: expected a mapping %s. Nothing was changed." % (where, what))
    shipped = [k for k in SHIPPED_ONLY if k in value]
    if shipped:
        raise InputError("%s.%s: only the shipped addons (plugins/module_utils/data_addons.py) set it. Nothing was "
                         "changed." % (where, shipped[0]))
    addon = _validated(ADDON_SPEC, value, where, what)
    key = addon["addon"]
    if not _ADDON_KEY.fullmatch(key):
        raise InputError("%s.addon: %r; give a key of lower-case letters, digits and '_' (such as ceph_csi). Nothing "
                         "was changed." % (where, key))
    if key in known:
        raise InputError("%s.addon: %s is %s; rows for it go in gpufleet_addon_support, it needs no definition. "
                         "Nothing was changed." % (where, key, "a shipped addon (%s)" % known[key]["name"]
                                                   if key in ADDONS else "defined twice"))
    if not 3 <= addon["stage"] <= 8:
        raise InputError("%s.stage: %d; give 3 (CNI) to 8 (policy engines) - 1 and 2 are kubeadm's kube-proxy and "
                         "CoreDNS. Nothing was changed." % (where, addon["stage"]))
    if not addon["name"].strip():
        raise InputError("%s.name: empty; give the name messages show. Nothing was changed." % where)
    if not addon["images"] and not addon["charts"]:
        raise InputError("%s: neither images nor charts; give what identifies %s in a cluster. Nothing was "
                         "changed." % (where, key))
    for image in addon["images"]:
        if not _REPOSITORY.fullmatch(image):
            raise InputError("%s.images: %r; give an image repository as ORG/NAME without registry, tag or digest "
                             "(such as sig-storage/nfsplugin): a bare name would match any registry's image of that "
                             "name. Nothing was changed." % (where, image))
    for chart in addon["charts"]:
        if not _CHART.fullmatch(chart):
            raise InputError("%s.charts: %r is not a Helm chart name. Nothing was changed." % (where, chart))
    for other, spec in known.items():
        for field, mine in (("images", addon["images"]), ("charts", addon["charts"])):
            clash = sorted(set(mine) & set(spec[field]))
            if clash:
                raise InputError("%s.%s: %s already identifies %s (%s); each image and chart belongs to one addon. "
                                 "Nothing was changed." % (where, field, clash[0], other, spec["name"]))
    return addon


def define_addons(value: Any, name: str = ADDONS_VAR) -> List[Dict[str, Any]]:
    """The operator's addons (``gpufleet_addons``), each checked against the shipped ones and those before it."""
    if value in (None, "", []):
        return []
    if not isinstance(value, (list, tuple)):
        raise InputError("%s: expected a list of addons, each {addon, name, stage, images, charts}, got %s. Nothing "
                         "was changed." % (name, type(value).__name__))
    known: Dict[str, Mapping[str, Any]] = dict(ADDONS)
    out = []
    for index, item in enumerate(value):
        addon = check_definition(item, "%s[%d]" % (name, index), known)
        known[addon["addon"]] = addon
        out.append(addon)
    return out


def merged(defined: Iterable[Mapping[str, Any]]) -> Dict[str, Mapping[str, Any]]:
    """The shipped addons and the operator's, already checked (define_addons' result, the cell's addons.defined)."""
    known: Dict[str, Mapping[str, Any]] = dict(ADDONS)
    known.update((a["addon"], a) for a in defined)
    return known


def catalog(extra_addons: Any = None) -> Dict[str, Mapping[str, Any]]:
    """The shipped addons and the operator's (``gpufleet_addons``), checked."""
    return merged(define_addons(extra_addons))


def _addon_of_image(repository: str, known: Catalog) -> Optional[str]:
    for key, spec in known.items():
        for suffix in spec["images"]:
            if repository == suffix or repository.endswith("/" + suffix):
                return key
    return None


def _addon_of_chart(chart: str, known: Catalog) -> Optional[str]:
    for key, spec in known.items():
        if chart in spec["charts"]:
            return key
    return None


def _entry(addon: str, version: str, raw: str, where: str, via: str, known: Catalog) -> Dict[str, Any]:
    return {"addon": addon, "name": known[addon]["name"], "version": version, "raw_version": raw,
            "where": where, "via": via}


def installed_from_workloads(workloads: Iterable[Any], known: Catalog = SHIPPED) -> List[Dict[str, Any]]:
    """One entry per addon image and version in each DaemonSet, Deployment and StatefulSet (a DaemonSet whose init
    containers use its own image counts once)."""
    found: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    for item in workloads:
        obj = as_mapping(item)
        if obj.get("kind") not in WORKLOAD_KINDS:
            continue
        meta = as_mapping(obj.get("metadata"))
        pod = as_mapping(as_mapping(as_mapping(obj.get("spec")).get("template")).get("spec"))
        containers: List[Any] = []
        for key in ("initContainers", "containers"):
            listed = pod.get(key)
            containers += listed if isinstance(listed, list) else []
        workload = "%s %s/%s" % (obj["kind"], meta.get("namespace", ""), meta.get("name", "?"))
        for container in containers:
            image = as_mapping(container).get("image")
            if not isinstance(image, str):
                continue
            repository, tag, digest = split_image(image)
            addon = _addon_of_image(repository, known)
            if addon is None:
                continue
            version = version_line(tag) or ""
            found.setdefault((addon, version, workload), _entry(
                addon, version, tag or digest, "%s image %s" % (workload, image), "workload", known))
    return list(found.values())


def installed_from_helm(releases: Iterable[Any], known: Catalog = SHIPPED) -> List[Dict[str, Any]]:
    """One entry per Helm release of an addon chart: its newest deployed revision. ``releases`` are the metadata
    removed_apis returns (namespace, name, revision, status, chart, chart_version, app_version)."""
    newest: Dict[Tuple[str, str], Mapping[str, Any]] = {}
    for item in releases:
        release = as_mapping(item)
        if release.get("status") != "deployed":
            continue
        revision = release.get("revision")
        if not isinstance(revision, int) or isinstance(revision, bool):
            revision = 0
        key = (str(release.get("namespace", "")), str(release.get("name", "")))
        if key not in newest or revision > newest[key]["revision"]:
            newest[key] = dict(release, revision=revision)
    found = []
    for (namespace, name), release in sorted(newest.items()):
        addon = _addon_of_chart(str(release.get("chart", "")), known)
        if addon is None:
            continue
        app, chart = str(release.get("app_version") or ""), str(release.get("chart_version") or "")
        version = version_line(app) or ("" if app else version_line(chart) or "")
        found.append(_entry(addon, version, app or chart, "Helm release %s/%s (chart %s-%s, revision %s)" % (
            namespace, name, release.get("chart"), chart, release.get("revision")), "helm", known))
    return found


def _line_field(row: Mapping[str, Any], field: str, where: str, optional: bool = False) -> str:
    value = row.get(field)
    if optional and value in (None, ""):
        return ""
    if isinstance(value, float):
        raise InputError("%s.%s: quote it ('%s' - YAML read the unquoted %s as the number %r)" % (
            where, field, str(value) + ("0" if len(str(value).split(".")[1]) == 1 else ""), field, value))
    line = version_line(value) if isinstance(value, str) else None
    if not line:
        raise InputError("%s.%s: give a MAJOR.MINOR version as a string, such as '1.36'%s, got %r" % (
            where, field, " (or leave it empty: no documented upper bound)" if optional else "", value))
    return line


def check_row(row: Any, where: str, known: Catalog = SHIPPED, shipped: bool = False) -> AddonSupport:
    """One matrix row (ROW_SPEC), the shipped ones' and the operator's alike: an addon of ``known`` (for the
    operator's, one kubeadm does not move: the shipped CoreDNS rows record what each kubeadm installs), versions as
    MAJOR.MINOR strings, Kubernetes minors as 1.N with kube_min not above kube_max, a source."""
    if not isinstance(row, Mapping):
        raise InputError("%s: expected a mapping with addon, version, kube_min, kube_max, source" % where)
    judged = sorted(k for k, spec in known.items() if shipped or not spec.get("managed_by"))
    addon = row.get("addon")
    if not isinstance(addon, str) or addon not in judged:
        raise InputError("%s.addon: %r is not one of %s%s" % (
            where, addon, ", ".join(judged), " (kubeadm moves %s itself: it needs no row)" % addon
            if isinstance(addon, str) and addon in known else "; define an addon the code does not know in "
            "gpufleet_addons first"))
    version = _line_field(row, "version", where)
    kube_min = _line_field(row, "kube_min", where)
    kube_max = _line_field(row, "kube_max", where, optional=True)
    source = row.get("source")
    if not isinstance(source, str) or not source.strip():
        raise InputError("%s.source: required - where the support is documented (a URL)" % where)
    _validated(ROW_SPEC, row, where, "{addon, version, kube_min, kube_max, source}")  # no field besides these
    for field, value in (("kube_min", kube_min), ("kube_max", kube_max)):
        if value and _line(value)[0] != 1:
            raise InputError("%s.%s: %s is not a Kubernetes minor; give 1.N" % (where, field, value))
    if kube_max and _line(kube_max) < _line(kube_min):
        raise InputError("%s: kube_min %s is above kube_max %s, an empty range" % (where, kube_min, kube_max))
    return AddonSupport(addon, version, kube_min, kube_max, source.strip())


def operator_rows(extra: Any, name: str = "extra_support", known: Catalog = SHIPPED) -> List[AddonSupport]:
    """The operator's rows (``extra``, named ``name`` in messages), each checked by check_row, no release line
    twice."""
    if extra in (None, ""):
        return []
    if not isinstance(extra, (list, tuple)):
        raise InputError("%s: expected a list of rows (addon, version, kube_min, kube_max, source), got %s" % (
            name, type(extra).__name__))
    rows: List[AddonSupport] = []
    first: Dict[Tuple[str, str], int] = {}
    for index, item in enumerate(extra):
        where = "%s[%d]" % (name, index)
        row = check_row(item, where, known)
        if (row.addon, row.version) in first:
            raise InputError("%s: %s %s is already given by %s[%d]; keep one row per release line" % (
                where, row.addon, row.version, name, first[(row.addon, row.version)]))
        first[(row.addon, row.version)] = index
        rows.append(row)
    return rows


def support_rows(extra: Any = None, name: str = "extra_support", known: Catalog = SHIPPED) -> List[AddonSupport]:
    """The operator's rows, then the shipped rows of the release lines they do not replace."""
    mine = operator_rows(extra, name, known)
    replaced = {(r.addon, r.version) for r in mine}
    return mine + [r for r in MATRIX if (r.addon, r.version) not in replaced]


def _supports(row: AddonSupport, minor: Tuple[int, int]) -> Optional[bool]:
    """True/False when the row decides; None when ``minor`` is at or above kube_min and the row has no upper
    bound (unknown)."""
    if minor < _line(row.kube_min):
        return False
    if not row.kube_max:
        return None
    return minor <= _line(row.kube_max)


def first_supporting(addon: str, target: KubeVersion, current: Optional[KubeVersion],
                     rows: Iterable[AddonSupport], above: str = "") -> Tuple[Optional[str], bool]:
    """The lowest release line above ``above`` (the installed one: never advise a downgrade) documented to support
    the target and (when known) the control plane's current minor, so it can go in before the control plane moves.
    Returns (line, documented) - documented False when the best line found only has no upper bound."""
    wanted = (target.major, target.minor)
    now = (current.major, current.minor) if current is not None else None
    sure, open_ended = [], []
    for row in rows:
        if row.addon != addon or (now is not None and _supports(row, now) is False) or \
                (above and _line(row.version) <= _line(above)):
            continue
        verdict = _supports(row, wanted)
        if verdict:
            sure.append(row.version)
        elif verdict is None:
            open_ended.append(row.version)
    if sure:
        return min(sure, key=_line), True
    if open_ended:
        return min(open_ended, key=_line), False
    return None, False


def _source_text(row: AddonSupport) -> str:
    return SOURCES.get(row.source, row.source)


def judge(entry: Dict[str, Any], target: KubeVersion, current: Optional[KubeVersion],
          rows: List[AddonSupport], known: Catalog = SHIPPED) -> Dict[str, Any]:
    """The finding for one installed addon: severity ok, warn or block, with the message."""
    out = dict(entry, target=target.minor_str, first_supporting="", source="")
    spec = known[entry["addon"]]
    name, where, version = entry["name"], entry["where"], entry["version"]
    if spec.get("managed_by") == "kubeadm" and entry["via"] == "workload":
        wanted = (target.major, target.minor)
        installs = [r.version for r in rows if r.addon == entry["addon"] and _supports(r, wanted)]
        out.update(severity="ok", message="%s %s (%s): kubeadm upgrade apply moves it to the version it pins for %s%s"
                   % (name, version or entry["raw_version"], where, target.minor_str,
                      " (%s %s)" % (name, installs[0]) if installs else ""))
        return out
    if not version:
        out.update(severity="block", message=(
            "%s (%s): its version cannot be read from %r; tag the image or chart with its version, or declare it: "
            "gpufleet_addon_versions: {%s: 'X.Y.Z'}" % (name, where, entry["raw_version"], entry["addon"])))
        return out
    if spec.get("managed_by") == "kubeadm":  # the same software deployed another way (a Helm chart)
        out.update(severity="warn", message=(
            "%s %s (%s) is not kubeadm's to move: upgrade its chart in the addons stage and check it supports %s"
            % (name, version, where, target.minor_str)))
        return out
    own = [r for r in rows if r.addon == entry["addon"]]
    if not own and spec.get("rule"):
        out.update(severity="warn", source=SOURCES[spec["rule"]], message=(
            "%s %s (%s): the project publishes no fixed Kubernetes range, only a rule (%s); check %s %s against %s, "
            "or add a row for it in gpufleet_addon_support" % (
                name, version, where, SOURCES[spec["rule"]], name, version, target.minor_str)))
        return out
    row = next((r for r in own if r.version == version), None)
    first, documented = first_supporting(entry["addon"], target, current, own, above=version)
    out["first_supporting"] = first or ""
    hint = ""
    if first:
        hint = " (%s %s %s %s)" % (name, first, "supports" if documented else "has no upper bound from",
                                   target.minor_str)
    if row is None:
        out.update(severity="block", message=(
            "%s %s (%s) is not in the addon matrix, so its support for Kubernetes %s is unknown; add a row for it "
            "with its source: gpufleet_addon_support: [{addon: %s, version: '%s', kube_min: '1.N', kube_max: "
            "'1.M', source: URL}]%s" % (name, version, where, target.minor_str, entry["addon"], version, hint)))
        return out
    out["source"] = _source_text(row)
    verdict = _supports(row, (target.major, target.minor))
    if verdict:
        out.update(severity="ok", message="%s %s supports Kubernetes %s-%s (%s)" % (
            name, version, row.kube_min, row.kube_max, where))
    elif verdict is None:
        out.update(severity="warn", message=(
            "%s %s (%s) documents Kubernetes %s or later with no upper bound; check that it supports %s" % (
                name, version, where, row.kube_min, target.minor_str)))
    else:
        if first and documented:
            advice = "upgrade it to %s %s or later first" % (name, first)
        elif first:
            advice = "upgrade it first, e.g. to %s %s (documented from %s with no upper bound: check it)" % (
                name, first, next(r.kube_min for r in own if r.version == first))
        else:
            advice = "no newer release in the matrix supports both the current control plane and %s: add the row " \
                     "of one that does (gpufleet_addon_support) or go through an intermediate minor" % target.minor_str
        out.update(severity="block", message="%s %s (%s) supports Kubernetes %s-%s, not the target %s; %s" % (
            name, version, where, row.kube_min, row.kube_max, target.minor_str, advice))
    return out


def declared_lines(value: Any, name: str = "declared_versions", known: Catalog = SHIPPED) -> Dict[str, str]:
    """Versions the operator declares for addons whose image has no tag: addon -> release line."""
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise InputError("%s: expected a mapping of addon to version, such as {kueue: 'v0.13.1'}" % name)
    out = {}
    for key in value:
        if key not in known:
            raise InputError("%s: %r is not an addon (%s)" % (name, key, ", ".join(sorted(known))))
        out[str(key)] = _line_field(value, key, name)
    return out


def parse_inputs(support: Any, versions: Any, defined: Any = None) -> Dict[str, Any]:
    """The cell's addon inputs, checked before anything runs: gpufleet_addons (addons the code does not know),
    gpufleet_addon_support (rows added to the matrix, for shipped addons or those) and gpufleet_addon_versions
    (versions of untagged images). Returns plain data for the modules (``defined`` is their ``extra_addons``)."""
    mine = define_addons(defined)
    known = merged(mine)
    return {"defined": mine, "support": [r._asdict() for r in operator_rows(support, "gpufleet_addon_support", known)],
            "versions": declared_lines(versions, "gpufleet_addon_versions", known)}


RELEASES_VAR = "gpufleet_addon_releases"
RELEASE_SPEC: Dict[str, Any] = {
    "addon": {"type": "str", "required": True},
    "release": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "chart": {"type": "str", "required": True},
    "version": {"type": "str", "default": ""},
    "values": {"type": "dict", "default": {}},
    "timeout": {"type": "int", "default": 600},
    # CRD manifests (files on the controller) applied before the release: Helm installs a chart's crds/ only on
    # the first install and never upgrades them, so an operator's new CRDs must be in place before its chart moves
    "crds": {"type": "list", "elements": "str", "default": []},
}
_RELEASE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?")  # Helm: a DNS-1123 label of at most 53
_NAMESPACE = DNS_LABEL


def parse_releases(value: Any, name: str = RELEASES_VAR, known: Catalog = SHIPPED) -> List[Dict[str, Any]]:
    """The Helm releases the addons stage upgrades after the control plane, checked with the cell (before anything
    changes) and put in the seed's order: by the addon's stage (kube-proxy, CoreDNS, CNI, CSI, GPU operators and
    DRA drivers, Kueue and JobSet, operators, policy engines), then as listed. Each gets its ``stage``; its
    ``values`` (often credentials) are checked here but not returned: the cell's result reaches logs and job
    events, so the addons role reads them from the inventory itself, under no_log (``has_values`` says whether
    any were given)."""
    if value in (None, "", []):
        return []
    if not isinstance(value, list):
        raise InputError("%s: expected a list of releases, each {addon, release, namespace, chart, version, values, "
                         "timeout, crds}, got %s. Nothing was changed." % (name, type(value).__name__))
    out: List[Dict[str, Any]] = []
    seen = set()
    for i, item in enumerate(value):
        where = "%s[%d]" % (name, i)
        if not isinstance(item, Mapping):
            raise InputError("%s: expected a mapping {addon, release, namespace, chart, version}. Nothing was "
                             "changed." % where)
        result = ArgumentSpecValidator(RELEASE_SPEC).validate(dict(item))
        if result.error_messages:
            raise InputError("%s: %s. Nothing was changed." % (where, "; ".join(result.error_messages)))
        rel = dict(result.validated_parameters)
        if rel["addon"] not in known:
            raise InputError("%s.addon: %r is not an addon gpufleet knows (%s; define others in gpufleet_addons); it "
                             "decides the release's place in the order. Nothing was changed." % (
                                 where, rel["addon"], ", ".join(sorted(known))))
        if known[rel["addon"]].get("managed_by") == "kubeadm":
            raise InputError("%s.addon: %s is moved by kubeadm's own addon phase during the control plane's upgrade; "
                             "list only addons installed as Helm releases. Nothing was changed." % (
                                 where, rel["addon"]))
        if not _RELEASE_NAME.fullmatch(rel["release"]):
            raise InputError("%s.release: %r is not a valid Helm release name (lower-case letters, digits and '-', "
                             "at most 53). Nothing was changed." % (where, rel["release"]))
        if not _NAMESPACE.fullmatch(rel["namespace"]):
            raise InputError("%s.namespace: %r is not a valid namespace name (lower-case letters, digits and '-', at "
                             "most 63). Nothing was changed." % (where, rel["namespace"]))
        if (rel["namespace"], rel["release"]) in seen:
            raise InputError("%s: release %s/%s is listed twice. Nothing was changed." % (
                where, rel["namespace"], rel["release"]))
        seen.add((rel["namespace"], rel["release"]))
        bad = [c for c in rel["crds"] if not c.strip() or "://" in c]
        if bad:
            raise InputError("%s.crds: %r; give paths of CRD manifest files on the controller (fetch a chart's crds/ "
                             "with helm pull --untar). Nothing was changed." % (where, bad[0]))
        if not 30 <= rel["timeout"] <= 7200:
            raise InputError("%s.timeout: %d s; give 30 to 7200 (Helm waits that long for the release's "
                             "resources, then rolls it back)" % (where, rel["timeout"]))
        rel["stage"] = known[rel["addon"]]["stage"]
        rel["has_values"] = bool(rel.pop("values"))
        out.append(rel)
    return sorted(out, key=lambda r: r["stage"])  # stable: the list's order within a stage


def stage_problems(releases: Iterable[Mapping[str, Any]], helm_releases: Iterable[Any],
                   file_exists: Any) -> List[str]:
    """What would stop the addons stage after the control plane has moved, found before anything changes: a
    declared release Helm does not have, one that is not ``deployed`` (Helm builds the upgrade from it), a CRD
    file that is not there. ``helm_releases``: the releases' metadata (every revision, as the removed-API scan
    returns it); ``file_exists``: a callable (the controller's os.path.isfile)."""
    latest: Dict[Tuple[str, str], Tuple[int, str]] = {}
    for rel in helm_releases:
        if isinstance(rel, Mapping):
            key = (str(rel.get("namespace", "")), str(rel.get("name", "")))
            raw = rel.get("revision")
            revision: int = raw if isinstance(raw, int) else 0
            latest[key] = max(latest.get(key, (0, "")), (revision, str(rel.get("status", ""))))
    problems = []
    for rel in releases:
        key = (str(rel.get("namespace")), str(rel.get("release")))
        where = "%s: release %s/%s" % (RELEASES_VAR, key[0], key[1])
        if key not in latest:
            problems.append("%s is not a Helm release in the cluster (helm list -n %s); fix the name or install it "
                            "first - the addons stage upgrades releases, it does not install them" % (where, key[0]))
        elif latest[key][1] != "deployed":
            problems.append("%s: its latest revision %d is %s, not deployed; fix it with helm (history, rollback) "
                            "before the window" % (where, latest[key][0], latest[key][1]))
        for crd in rel.get("crds") or []:
            if not file_exists(crd):
                problems.append("%s: CRD file %s is not on the controller" % (where, crd))
    return problems


def check_addons(workloads: Iterable[Any], helm_releases: Iterable[Any], target: str,
                 apiserver: Optional[str] = None, extra_support: Any = None,
                 declared_versions: Any = None, extra_addons: Any = None) -> Dict[str, Any]:
    """Detect the addons (the shipped ones and the operator's ``extra_addons``) and judge each against
    ``target``. Returns {installed, findings, blocking, warnings, summary, passed, stages} - ``stages`` lists the
    installed addons in upgrade order (the addons stage follows it)."""
    wanted = parse_version(target, "target_version")
    current = parse_version(apiserver, "apiserver_version") if apiserver else None
    known = catalog(extra_addons)
    rows = support_rows(extra_support, known=known)
    declared = declared_lines(declared_versions, known=known)
    installed = installed_from_workloads(workloads, known) + installed_from_helm(helm_releases, known)
    for entry in installed:
        if not entry["version"] and entry["addon"] in declared:
            entry["version"] = declared[entry["addon"]]
            entry["where"] += " (version declared)"
    findings = [judge(e, wanted, current, rows, known) for e in installed]
    order = sorted({e["addon"] for e in installed}, key=lambda k: (known[k]["stage"], k))
    return {"installed": installed, "findings": findings,
            "blocking": [f["message"] for f in findings if f["severity"] == "block"],
            "warnings": [f["message"] for f in findings if f["severity"] == "warn"],
            "summary": ["%s %s %s" % (f["addon"], f["version"] or f["raw_version"] or "?", f["severity"])
                        for f in findings],
            "passed": not any(f["severity"] == "block" for f in findings),
            "stages": [{"addon": k, "name": known[k]["name"], "stage": known[k]["stage"]} for k in order]}
