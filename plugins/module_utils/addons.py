# Copyright: gpufleet contributors
# Apache License 2.0
"""Cluster addons: what runs (from workload images and Helm releases) and whether it supports the target
Kubernetes minor (the matrix in data_addons.py, docs/reference.md section 10).

Detection reads the objects, not the pods: a DaemonSet, Deployment or StatefulSet whose container image is an
addon's image (matched by repository suffix, so any registry or mirror counts) and the newest deployed revision of
each Helm release whose chart is an addon's chart (appVersion first: some charts, e.g. Kyverno's, version the chart
apart from the software). An image pinned by digest only carries no version: that is a blocking finding unless the
operator declares the version. The judgement fails closed: a version the matrix has no row for blocks (add the row,
with its source, through ``extra_support``), a row without a documented upper bound is a warning.
kube-proxy is judged by the version-skew policy instead: not newer than the apiserver, at most three minors older.
CoreDNS, like kube-proxy, is moved by ``kubeadm upgrade apply`` itself: found, reported, never a blocker.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_addons import (
    ADDONS, MATRIX, SOURCES, AddonSupport)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import KubeVersion, parse_version

WORKLOAD_KINDS = ("DaemonSet", "Deployment", "StatefulSet")
KUBE_PROXY = "kube_proxy"
KUBE_PROXY_MAX_LAG = 3  # minors, the skew policy (docs/reference.md section 1)
_TAG_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$")


def _line(version: str) -> Tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def split_image(image: str) -> Tuple[str, str, str]:
    """``registry/repo:tag@sha256:...`` -> (repository, tag, digest); tag or digest may be empty."""
    rest, _, digest = image.partition("@")
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon + 1:], digest
    return rest, "", digest


def version_line(text: str) -> Optional[str]:
    """"v3.29.1", "25.3.0", "0.13" -> "3.29", "25.3", "0.13"; None when the text is not a version."""
    match = _TAG_VERSION.match(text.strip()) if isinstance(text, str) else None
    return "%s.%s" % (match.group(1), match.group(2)) if match else None


def _addon_of_image(repository: str) -> Optional[str]:
    for key, spec in ADDONS.items():
        for suffix in spec["images"]:
            if repository == suffix or repository.endswith("/" + suffix):
                return key
    return None


def _addon_of_chart(chart: str) -> Optional[str]:
    for key, spec in ADDONS.items():
        if chart in spec["charts"]:
            return key
    return None


def installed_from_workloads(workloads: Iterable[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """One entry per addon container image found in DaemonSets, Deployments and StatefulSets."""
    found = []
    for obj in workloads:
        if not isinstance(obj, Mapping) or obj.get("kind") not in WORKLOAD_KINDS:
            continue
        meta = obj.get("metadata") or {}
        pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        containers = list(pod.get("initContainers") or []) + list(pod.get("containers") or [])
        for container in containers:
            image = container.get("image") if isinstance(container, Mapping) else None
            if not isinstance(image, str):
                continue
            repository, tag, digest = split_image(image)
            addon = _addon_of_image(repository)
            if addon is None:
                continue
            found.append({"addon": addon, "name": ADDONS[addon]["name"], "version": version_line(tag) or "",
                          "raw_version": tag or digest,
                          "where": "%s %s/%s image %s" % (obj["kind"], meta.get("namespace", ""),
                                                          meta.get("name", "?"), image)})
    return found


def installed_from_helm(releases: Iterable[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """One entry per Helm release of an addon chart: its newest deployed revision (decoded releases, as
    removed_apis.decode_helm_release returns them)."""
    newest: Dict[Tuple[str, str], Mapping[str, Any]] = {}
    for release in releases:
        if not isinstance(release, Mapping) or (release.get("info") or {}).get("status") != "deployed":
            continue
        key = (str(release.get("namespace", "")), str(release.get("name", "")))
        if key not in newest or int(release.get("version") or 0) > int(newest[key].get("version") or 0):
            newest[key] = release
    found = []
    for (namespace, name), release in sorted(newest.items()):
        meta = ((release.get("chart") or {}).get("metadata") or {})
        addon = _addon_of_chart(str(meta.get("name", "")))
        if addon is None:
            continue
        app, chart = str(meta.get("appVersion") or ""), str(meta.get("version") or "")
        version = version_line(app) or version_line(chart) or ""
        found.append({"addon": addon, "name": ADDONS[addon]["name"], "version": version,
                      "raw_version": app or chart,
                      "where": "Helm release %s/%s (chart %s-%s, revision %s)" % (
                          namespace, name, meta.get("name"), chart, release.get("version"))})
    return found


def support_rows(extra: Any, name: str = "extra_support") -> List[AddonSupport]:
    """The operator's rows (``extra``, named ``name`` in messages), each checked - a known addon, versions in
    MAJOR.MINOR form, a source - ahead of the shipped matrix (the first row for an addon line wins)."""
    rows = list(MATRIX)
    if extra is None:
        extra = []
    if not isinstance(extra, (list, tuple)):
        raise InputError("%s: expected a list of rows (addon, version, kube_min, kube_max, source), got %s" % (
            name, type(extra).__name__))
    for index, row in enumerate(reversed(list(extra))):
        where = "%s[%d]" % (name, len(extra) - 1 - index)
        if not isinstance(row, Mapping):
            raise InputError("%s: expected a mapping with addon, version, kube_min, kube_max, source" % where)
        addon = row.get("addon")
        if addon not in ADDONS or addon == KUBE_PROXY:
            raise InputError("%s.addon: %r is not one of %s" % (
                where, addon, ", ".join(sorted(k for k in ADDONS if k != KUBE_PROXY))))
        for field in ("version", "kube_min"):
            if not version_line(str(row.get(field, ""))):
                raise InputError("%s.%s: give a MAJOR.MINOR version such as 1.36, got %r" % (
                    where, field, row.get(field)))
        kube_max = str(row.get("kube_max") or "")
        if kube_max and not version_line(kube_max):
            raise InputError("%s.kube_max: give a MAJOR.MINOR version such as 1.36, or leave it empty (no documented "
                             "upper bound), got %r" % (where, kube_max))
        if not str(row.get("source") or "").strip():
            raise InputError("%s.source: required - where the support is documented (a URL)" % where)
        rows.insert(0, AddonSupport(addon, version_line(str(row["version"])) or "",
                                    version_line(str(row["kube_min"])) or "", version_line(kube_max) or "",
                                    str(row["source"]).strip()))
    seen = set()
    unique = []
    for row in rows:  # an operator's row replaces the shipped row of the same release line
        if (row.addon, row.version) not in seen:
            seen.add((row.addon, row.version))
            unique.append(row)
    return unique


def _supports(row: AddonSupport, target: KubeVersion) -> Optional[bool]:
    """True/False when the row decides; None when the target is above kube_min and the row has no upper bound."""
    wanted = (target.major, target.minor)
    if wanted < _line(row.kube_min):
        return False
    if not row.kube_max:
        return None
    return wanted <= _line(row.kube_max)


def first_supporting(addon: str, target: KubeVersion, rows: Sequence[AddonSupport]) -> Optional[str]:
    lines = sorted({r.version for r in rows if r.addon == addon and _supports(r, target)}, key=_line)
    return lines[0] if lines else None


def _source_text(row: AddonSupport) -> str:
    return SOURCES.get(row.source, row.source)


def judge(entry: Dict[str, Any], target: KubeVersion, apiserver: Optional[KubeVersion],
          rows: Sequence[AddonSupport]) -> Dict[str, Any]:
    """The finding for one installed addon: severity ok, warn or block, with the message."""
    out = dict(entry, target=target.minor_str, first_supporting="", source="")
    name, where, version = entry["name"], entry["where"], entry["version"]
    if not version:
        out.update(severity="block", message=(
            "%s (%s): its version cannot be read from %r; tag the image or the chart with its version, or declare "
            "it in declared_versions (gpufleet_addon_versions)" % (name, where, entry["raw_version"])))
        return out
    if entry["addon"] == KUBE_PROXY:
        return _judge_kube_proxy(out, target, apiserver)
    if ADDONS[entry["addon"]].get("managed_by") == "kubeadm":
        installs = [r.version for r in rows if r.addon == entry["addon"] and _supports(r, target)]
        out.update(severity="ok", message="%s %s (%s): kubeadm upgrade apply moves it to the version it pins for %s%s"
                   % (name, version, where, target.minor_str,
                      " (%s %s)" % (name, installs[0]) if installs else ""))
        return out
    row = next((r for r in rows if r.addon == entry["addon"] and r.version == version), None)
    first = first_supporting(entry["addon"], target, rows)
    out["first_supporting"] = first or ""
    if row is None:
        out.update(severity="block", message=(
            "%s %s (%s) is not in the addon matrix, so its support for Kubernetes %s is unknown; add a row for it "
            "with its source in gpufleet_addon_support%s" % (
                name, version, where, target.minor_str,
                "" if not first else " (the matrix knows %s %s supports %s)" % (name, first, target.minor_str))))
        return out
    out["source"] = _source_text(row)
    verdict = _supports(row, target)
    if verdict:
        out.update(severity="ok", message="%s %s supports Kubernetes %s-%s (%s)" % (
            name, version, row.kube_min, row.kube_max, where))
    elif verdict is None:
        out.update(severity="warn", message=(
            "%s %s (%s) documents Kubernetes %s or later with no upper bound; check that it supports %s" % (
                name, version, where, row.kube_min, target.minor_str)))
    else:
        out.update(severity="block", message=(
            "%s %s (%s) supports Kubernetes %s-%s, not the target %s; upgrade it to %s first" % (
                name, version, where, row.kube_min, row.kube_max or "?", target.minor_str,
                "%s %s or later" % (name, first) if first else "a release that supports %s (none in the matrix)"
                % target.minor_str)))
    return out


def _judge_kube_proxy(out: Dict[str, Any], target: KubeVersion, apiserver: Optional[KubeVersion]) -> Dict[str, Any]:
    proxy = parse_version(out["version"])
    lag = target.minors_above(proxy)
    if lag > KUBE_PROXY_MAX_LAG:
        out.update(severity="block", message=(
            "kube-proxy %s (%s) would be %d minors behind the target %s (at most %d): upgrade it with the control "
            "plane's earlier hops first" % (out["version"], out["where"], lag, target.minor_str, KUBE_PROXY_MAX_LAG)))
    elif apiserver is not None and proxy.minors_above(apiserver) > 0:
        out.update(severity="block", message="kube-proxy %s (%s) is newer than the apiserver %s" % (
            out["version"], out["where"], apiserver.minor_str))
    else:
        out.update(severity="ok", message="kube-proxy %s is within %d minors of %s (%s)" % (
            out["version"], KUBE_PROXY_MAX_LAG, target.minor_str, out["where"]))
    return out


def declared_lines(value: Any, name: str = "declared_versions") -> Dict[str, str]:
    """Versions the operator declares for addons whose image has no tag: addon -> release line."""
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise InputError("%s: expected a mapping of addon to version, such as {kueue: v0.13.1}" % name)
    out = {}
    for key, version in value.items():
        if key not in ADDONS:
            raise InputError("%s: %r is not an addon (%s)" % (name, key, ", ".join(sorted(ADDONS))))
        line = version_line(str(version))
        if not line:
            raise InputError("%s.%s: give a version such as 0.13 or v0.13.1, got %r" % (name, key, version))
        out[str(key)] = line
    return out


def parse_inputs(support: Any, versions: Any) -> Dict[str, Any]:
    """The cell's addon inputs, checked before anything runs: gpufleet_addon_support (rows added to the matrix)
    and gpufleet_addon_versions (versions of untagged images). Returns plain data for the preflight role."""
    rows = support_rows(support, "gpufleet_addon_support")[:len(support or [])]
    return {"support": [r._asdict() for r in rows],
            "versions": declared_lines(versions, "gpufleet_addon_versions")}


def check_addons(workloads: Iterable[Mapping[str, Any]], helm_secrets: Iterable[Mapping[str, Any]],
                 target: str, apiserver: Optional[str] = None, extra_support: Sequence[Mapping[str, Any]] = (),
                 declared_versions: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Detect the addons and judge each against ``target``. Returns {installed, findings, blocking, warnings,
    passed, stages} - ``stages`` lists the installed addons in upgrade order (the addons stage follows it)."""
    wanted = parse_version(target, "target_version")
    api = parse_version(apiserver, "apiserver_version") if apiserver else None
    rows = support_rows(extra_support)
    declared = declared_lines(declared_versions)
    releases, unreadable = decode_releases(helm_secrets)
    installed = installed_from_workloads(workloads) + installed_from_helm(releases)
    for entry in installed:
        if not entry["version"] and entry["addon"] in declared:
            entry["version"] = declared[entry["addon"]]
            entry["where"] += " (version declared)"
    findings = [judge(e, wanted, api, rows) for e in installed] + unreadable
    order = sorted({e["addon"] for e in installed}, key=lambda k: (ADDONS[k]["stage"], k))
    return {"installed": installed, "findings": findings,
            "blocking": [f["message"] for f in findings if f["severity"] == "block"],
            "warnings": [f["message"] for f in findings if f["severity"] == "warn"],
            "passed": not any(f["severity"] == "block" for f in findings),
            "stages": [{"addon": k, "name": ADDONS[k]["name"], "stage": ADDONS[k]["stage"]} for k in order]}


def decode_releases(secrets: Iterable[Mapping[str, Any]]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Helm v3 release secrets -> (decoded releases, blocking findings for those that cannot be decoded: an addon
    hidden in one could not be judged)."""
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import decode_helm_release
    releases, unreadable = [], []
    for secret in secrets:
        if not isinstance(secret, Mapping) or secret.get("type") != "helm.sh/release.v1":
            continue
        meta = secret.get("metadata") or {}
        where = "helm release secret %s/%s" % (meta.get("namespace", ""), meta.get("name", ""))
        data = (secret.get("data") or {}).get("release")
        try:
            if not isinstance(data, str) or not data:
                raise ParseError("no data.release")
            releases.append(decode_helm_release(data))
        except ParseError as exc:
            unreadable.append({"addon": "", "name": "Helm release", "version": "", "raw_version": "",
                               "where": where, "target": "", "first_supporting": "", "source": "",
                               "severity": "block",
                               "message": "%s could not be read to detect addons: %s" % (where, exc.msg)})
    return releases, unreadable
