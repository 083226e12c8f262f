# Copyright: gpufleet contributors
# Apache License 2.0
"""Find callers of APIs that a target Kubernetes release removes or deprecates (docs/reference.md section 3).

Four sources: an apiserver's ``/metrics`` text (``apiserver_requested_deprecated_apis``; it resets when the
apiserver restarts, so scrape every apiserver), each control-plane host's audit log (who called: audit_callers.py),
manifest files (multi-document YAML or JSON, rendered charts, the
items of any ``*List``), and Helm v3 release secrets (``data.release``: base64 of base64 of gzip of JSON;
``manifest`` holds the YAML). A use of an API removed at or before the target blocks it; one deprecated at the
target but still served, or removed only later, is a warning. A file or release that cannot be read is a blocking
finding naming it (what it holds is unknown), and the scan goes on.
"""
from __future__ import annotations

import base64
import binascii
import gzip
import io
import os
import zlib
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils import audit_callers, promtext
from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_removed_apis import (
    BY_RESOURCE as _BY_RESOURCE, REMOVED, SOURCE, RemovedApi)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import (
    MAX_TEXT_BYTES, as_mapping, load_json, load_yaml, read_file)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import KubeVersion, parse_version

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

_BY_KIND: Dict[Tuple[str, str], RemovedApi] = {(r.api_version, r.kind): r for r in REMOVED}


def removed_by(removed_in: str, target: KubeVersion) -> bool:
    """Whether a removal release (``1.N``) is at or before the target's minor: the upgrade to it blocks."""
    return parse_version(removed_in) <= KubeVersion(target.major, target.minor)


def _finding(source: str, obj: str, api_version: str, kind: str, removed_in: str, replacement: str,
             target: KubeVersion, deprecated_in: str = "", **extra: Any) -> Dict[str, Any]:
    minor = KubeVersion(target.major, target.minor)
    blocks = removed_by(removed_in, target)
    if blocks:
        why = "removed in v%s (blocks the upgrade to %s)" % (removed_in, target.minor_str)
    elif deprecated_in and parse_version(deprecated_in) <= minor:
        why = "deprecated since v%s, still served by %s, removed in v%s" % (
            deprecated_in, target.minor_str, removed_in)
    else:
        why = "removed in v%s" % removed_in
    replacement_text = replacement if replacement.startswith(("none", "see ")) else "migrate to %s" % replacement
    item = {"source": source, "object": obj, "api_version": api_version, "kind": kind,
            "deprecated_in": deprecated_in, "removed_in": removed_in, "replacement": replacement,
            "blocks_target": blocks, "severity": "block" if blocks else "warn",
            "message": "%s uses %s %s, %s; %s" % (obj, api_version, kind, why, replacement_text)}
    item.update(extra)
    return item


def _unreadable(source: str, what: str, why: str) -> Dict[str, Any]:
    """A file or release that could not be scanned: blocking, since what it holds is unknown."""
    return {"source": source, "object": source, "api_version": "", "kind": "", "deprecated_in": "",
            "removed_in": "", "replacement": "", "blocks_target": True, "severity": "block", "unreadable": True,
            "message": "%s could not be scanned for removed APIs: %s" % (what, why)}


# -- apiserver metrics -----------------------------------------------------------------------------------------
DEPRECATED = "apiserver_requested_deprecated_apis"


def scan_metrics(text: str, version_text: str, target: KubeVersion,
                 apiserver: str = "apiserver") -> List[Dict[str, Any]]:
    """Findings from the ``apiserver_requested_deprecated_apis`` series with value 1 of one apiserver's ``/metrics``,
    once the text proves to be that apiserver's (promtext.apiserver_samples: its ``kubernetes_build_info`` is the
    server's ``/version``, ``version_text``, and it has the apiserver's own request counter). Text that does not
    prove it - an empty body, an HTML error page, JSON, another exporter's text - is one blocking finding naming
    the apiserver, never "none in use". Series for APIs not in the table are still reported, with the apiserver's
    own ``removed_release`` label."""
    try:
        found = promtext.apiserver_samples(text, version_text, apiserver)
    except ParseError as exc:
        return [_unreadable("metrics:%s" % apiserver, "apiserver %s's /metrics" % apiserver, exc.msg)]
    findings = []
    for name, labels, value in found:
        if name != DEPRECATED or value < 1:  # NaN < 1 is False: a NaN gauge is reported, not dropped
            continue
        group, version, resource = labels.get("group", ""), labels.get("version", ""), labels.get("resource", "")
        api_version = "%s/%s" % (group, version) if group else version
        entry = _BY_RESOURCE.get((api_version, resource))
        removed = labels.get("removed_release") or (entry.removed_in if entry else "")
        if not removed:
            continue  # deprecated with no removal planned
        kind = entry.kind if entry else resource
        replacement = entry.replacement if entry else "see the deprecation guide"
        sub = labels.get("subresource")
        try:
            findings.append(_finding("metrics:%s" % apiserver, "requests to %s%s" % (
                resource, "/" + sub if sub else ""), api_version, kind, removed, replacement, target,
                deprecated_in=entry.deprecated_in if entry else ""))
        except GpufleetError as exc:  # a removed_release label that is not a minor: what it says is unknown
            findings.append(_unreadable("metrics:%s" % apiserver, "apiserver %s's /metrics" % apiserver,
                                        "%s{%s} removed_release=%r: %s" % (DEPRECATED, resource, removed, exc.msg)))
    return findings


# -- audit logs: who calls -------------------------------------------------------------------------------------
def scan_audit(readings: Iterable[Mapping[str, Any]], hosts: Iterable[str], target: KubeVersion,
               kubeadm_config: Optional[Mapping[str, Any]] = None) -> List[Dict[str, Any]]:
    """Findings naming who called a deprecated API, from each control-plane host's audit reading
    (audit_callers.read_host: {host, callers} or {host, error}). Every host in ``hosts`` must have a reading
    without an error, else a blocking finding names it (its apiserver's callers are unknown). A call is judged as
    the metric's series: its ``k8s.io/removed-release`` (or the table's removal) against the target; a deprecated
    API with no removal planned is left out. ``kubeadm_config``: the kube-system/kubeadm-config ConfigMap, when
    read; one whose ClusterConfiguration does not audit is a warning (the upgrade would turn auditing off)."""
    by_host = {str(r.get("host")): r for r in readings if isinstance(r, Mapping)}
    findings: List[Dict[str, Any]] = []
    lost = audit_callers.kubeadm_keeps_auditing(kubeadm_config)
    if lost:
        findings.append(dict(_unreadable("kubeadm-config", "kubeadm-config", ""), blocks_target=False,
                             severity="warn", unreadable=False, message=lost))
    good = []
    for host in hosts:
        reading = by_host.get(host)
        source = "audit:%s" % host
        if reading is None:
            findings.append(_unreadable(source, "%s's audit log" % host, "no reading of it came back"))
            continue
        why = audit_callers.check_reading(reading)
        if why:
            findings.append(_unreadable(source, "%s's audit log" % host, why))
        else:
            good.append(reading)
            if reading.get("truncated"):
                # the rows kept are the earliest removals: a cut row blocks only if its removal does
                cut = [str(r) for r in reading.get("truncated_removals") or ["?"]]
                blocks = any(not re.fullmatch(r"\d+\.\d+", r) or removed_by(r, target) for r in cut)
                findings.append(dict(_unreadable(source, "%s's audit log" % host, ""), blocks_target=blocks,
                                     severity="block" if blocks else "warn", unreadable=blocks, message=(
                    "%s's audit log names %d more callers of deprecated APIs than the report keeps (%d), of APIs "
                    "removed in %s: who they are is unknown" % (host, reading["truncated"], audit_callers.MAX_CALLERS,
                                                                ", ".join("v" + r for r in cut)))))
    for row in audit_callers.merge(good):
        entry = _BY_RESOURCE.get((row["api_version"], row["resource"]))
        removed = row["removed_release"] or (entry.removed_in if entry else "")
        if not removed:
            continue  # deprecated with no removal planned (core/v1 Endpoints)
        account = audit_callers.service_account(row["user"])
        who = "ServiceAccount %s" % account if account else "user %s" % (row["user"] or "<none>")
        obj = "%s (user agent %r) calling %s %s%s%s %d times, last %s, on %s" % (
            who, row["user_agent"], row["verb"], row["resource"], "/" + row["subresource"] if row["subresource"]
            else "", " in namespace %s" % row["namespace"] if row["namespace"] else "", row["count"], row["last"],
            ", ".join(row["hosts"]))
        try:
            findings.append(_finding("audit", obj, row["api_version"], entry.kind if entry else row["resource"],
                                     removed, entry.replacement if entry else "see the deprecation guide", target,
                                     deprecated_in=entry.deprecated_in if entry else "", user=row["user"],
                                     service_account=account, user_agent=row["user_agent"],
                                     namespace=row["namespace"], verb=row["verb"], count=row["count"],
                                     last=row["last"], hosts=row["hosts"]))
        except GpufleetError as exc:  # a removed-release annotation that is not a minor
            findings.append(_unreadable("audit", "the audit events of %s" % obj,
                                        "%s %r: %s" % (audit_callers.REMOVED, removed, exc.msg)))
    return findings


# -- manifests -------------------------------------------------------------------------------------------------
def _docs(text: str, where: str) -> Iterable[Any]:
    try:
        return [d for d in load_yaml(text, where, multi=True) if d is not None]
    except ParseError as exc:
        raise ParseError("%s; render templates first (helm template)" % exc.msg)


def _objects(doc: Any) -> Iterable[Mapping[str, Any]]:
    """The objects of a document: the document itself, or the items of a list - ``kind: List``, a typed list such
    as ``PodDisruptionBudgetList`` (whose items, as the API returns them, carry no apiVersion and kind of their own:
    they take the list's), or a bare YAML sequence."""
    if isinstance(doc, Mapping):
        raw_kind = doc.get("kind")
        kind: str = raw_kind if isinstance(raw_kind, str) else ""
        items = doc.get("items")
        if isinstance(items, list) and (kind == "List" or "apiVersion" not in doc or kind.endswith("List")):
            typed = kind.endswith("List") and kind != "List" and "apiVersion" in doc
            item_kind = kind[:-4]  # an empty list applies nothing: no finding
            for item in items:
                if typed and isinstance(item, Mapping) and ("apiVersion" not in item or "kind" not in item):
                    yield from _objects(dict(item, apiVersion=item.get("apiVersion", doc["apiVersion"]),
                                             kind=item.get("kind", item_kind)))
                else:
                    yield from _objects(item)
        elif "apiVersion" in doc and "kind" in doc:
            yield doc
    elif isinstance(doc, list):
        for item in doc:
            yield from _objects(item)


def scan_manifest_text(text: str, target: KubeVersion, source: str) -> List[Dict[str, Any]]:
    findings = []
    for doc in _docs(text, source):
        for obj in _objects(doc):
            entry = _BY_KIND.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
            if entry is None:
                continue
            meta = as_mapping(obj.get("metadata"))
            namespace = "%s/" % meta["namespace"] if meta.get("namespace") else ""
            name = "%s %s%s" % (obj["kind"], namespace, meta.get("name", "<unnamed>"))
            findings.append(_finding(source, name, entry.api_version, entry.kind, entry.removed_in, entry.replacement,
                                     target, deprecated_in=entry.deprecated_in))
    return findings


def manifest_files(paths: Iterable[str]) -> List[str]:
    """The files to scan: each file given, and every ``*.yaml|*.yml|*.json`` (any case) under each directory given
    (symlinked directories are not followed)."""
    files: List[str] = []
    for path in paths:
        if not os.path.lexists(path):
            raise InputError("manifest path %s does not exist" % path)
        if os.path.isdir(path) and not os.path.islink(path):
            files.extend(sorted(os.path.join(root, f) for root, _dirs, names in os.walk(path) for f in names
                                if f.lower().endswith(MANIFEST_SUFFIXES)))
        else:
            files.append(path)
    return files


def scan_paths(paths: Iterable[str], target: KubeVersion) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Scan files and directories. Returns (findings, files scanned). A file that cannot be read or parsed (not a
    regular file, too large, not YAML) does not stop the scan: it becomes a blocking finding naming the file, since
    what it holds is unknown."""
    findings: List[Dict[str, Any]] = []
    scanned: List[str] = []
    for name in manifest_files(paths):
        try:
            findings.extend(scan_manifest_text(read_file(name, "manifest"), target, name))
        except (InputError, ParseError) as exc:
            findings.append(_unreadable(name, name, exc.msg))
        scanned.append(name)
    return findings, scanned


# -- Helm release secrets --------------------------------------------------------------------------------------
def decode_helm_release(data_release: str) -> Dict[str, Any]:
    """Decode a Helm v3 release from a Secret's ``data.release`` (as returned by the API: base64 of Helm's base64
    of gzip of JSON). Also accepts Helm's own base64 (one layer) or raw gzip bytes."""
    raw: Any = data_release
    for _attempt in range(3):
        if isinstance(raw, bytes) and raw[:2] == b"\x1f\x8b":
            raw = _gunzip(raw)
            break
        try:
            # Go's decoder skips newlines; Python's with validate=True does not: strip first.
            raw = base64.b64decode(re.sub(r"\s+", "", raw) if isinstance(raw, str) else re.sub(rb"\s+", b"", raw),
                                   validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ParseError("helm release: data.release is not base64: %s" % exc)
    try:
        release = load_json(raw.decode("utf-8") if isinstance(raw, bytes) else raw, "helm release")
    except UnicodeDecodeError as exc:
        raise ParseError("helm release: decoded payload is not JSON: %s" % exc)
    if not isinstance(release, dict) or "manifest" not in release:
        raise ParseError("helm release: JSON has no 'manifest' (not a Helm v3 release?)")
    return release


def _gunzip(raw: bytes) -> bytes:
    """Decompress, refusing a payload that expands past MAX_TEXT_BYTES (a gzip bomb)."""
    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as handle:
            while True:
                chunk = handle.read(1 << 20)
                if not chunk:
                    break
                out.extend(chunk)
                if len(out) > MAX_TEXT_BYTES:
                    raise ParseError("helm release: the gzip payload expands past %d bytes; refusing it" %
                                     MAX_TEXT_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise ParseError("helm release: gzip payload is corrupt or truncated: %s" % exc)
    return bytes(out)


def decisive(revisions: Iterable[Tuple[int, str]]) -> int:
    """The revision Helm builds its next upgrade (and rollback, uninstall) from: the latest ``deployed`` one, or the
    latest of any status when none is deployed. ``revisions``: (revision, status) pairs of one release."""
    known = list(revisions)
    deployed = [r for r, status in known if status == "deployed"]
    return max(deployed) if deployed else max(r for r, _status in known)


BUSY = ("pending-install", "pending-upgrade", "pending-rollback", "uninstalling")


def scan_helm_secrets(secrets: Iterable[Mapping[str, Any]], target: KubeVersion,
                      releases: Optional[List[Dict[str, Any]]] = None) -> List[Dict[str, Any]]:
    """Findings in every Helm v3 release secret; one that cannot be decoded is a blocking finding naming it, and
    the scan goes on with the others. Only the revision Helm builds its next upgrade from blocks (:func:`decisive`);
    another revision's finding is a warning that a rollback to it would fail. A release whose latest revision is
    mid-operation (pending, uninstalling) blocks: Helm refuses to upgrade it. ``releases``, when given, receives
    each decoded release's metadata (no values, no manifest) for the addon check."""
    findings: List[Dict[str, Any]] = []
    scanned: List[Tuple[Dict[str, Any], List[Dict[str, Any]]]] = []
    for secret in secrets:
        if not isinstance(secret, Mapping) or secret.get("type") != "helm.sh/release.v1":
            continue
        meta = as_mapping(secret.get("metadata"))
        where = "helm release secret %s/%s" % (str(meta.get("namespace", ""))[:253], str(meta.get("name", ""))[:253])
        seen: List[Dict[str, Any]] = []
        try:
            found = _scan_helm_secret(secret, meta, where, target, seen)
        except ParseError as exc:
            findings.append(_unreadable(where, where, exc.msg))
            continue
        if releases is not None:
            releases.extend(seen)
        scanned.append((seen[0], found))
    by_release: Dict[Tuple[str, str], List[Tuple[int, str]]] = {}
    for rel, _found in scanned:
        by_release.setdefault((rel["namespace"], rel["name"]), []).append((rel["revision"], rel["status"]))
    for (namespace, name), revisions in sorted(by_release.items()):
        latest, status = max(revisions)
        if status in BUSY:
            where = "helm:%s/%s" % (namespace, name)
            findings.append(dict(_unreadable(where, where, ""), unreadable=False, message=(
                "%s: its latest revision %d is %s; Helm refuses to upgrade a release in the middle of an operation, "
                "so finish it or roll it back (helm history, helm rollback) first" % (where, latest, status))))
    for rel, found in scanned:
        chosen = decisive(by_release[(rel["namespace"], rel["name"])])
        for item in found:
            if rel["revision"] != chosen and item["blocks_target"]:
                item.update(blocks_target=False, severity="warn", message=item["message"] + (
                    "; revision %d is not the one Helm upgrades from (%d): only a rollback to it would fail" % (
                        rel["revision"], chosen)))
            findings.append(item)
    return findings


# -- mapping a release's stored APIs (as helm-mapkubeapis does) -----------------------------------------------------
# By hand: helm-mapkubeapis is a Helm plugin binary, not a library, and it maps against the cluster it runs on, not
# the target; this maps with the same rows the scan judges by, in check mode, under a recorded confirmation.
MAPPED_DESCRIPTION = "Kubernetes deprecated API upgrade - DO NOT rollback from this version"
_DOC_SPLIT = re.compile(r"(?m)^---[ \t]*$")


def encode_helm_release(release: Mapping[str, Any]) -> str:
    """A release as a Secret's ``data.release`` holds it through the API: base64 of Helm's base64 of gzip of JSON."""
    import json
    packed = gzip.compress(json.dumps(release, separators=(",", ":")).encode("utf-8"), mtime=0)
    return base64.b64encode(base64.b64encode(packed)).decode("ascii")


def map_manifest(manifest: str, target: KubeVersion, where: str) -> Tuple[str, List[Dict[str, str]]]:
    """The manifest with every object whose API the target removes (at or before it) moved to its replacement: the
    ``apiVersion:`` line of that document is rewritten, nothing else. Refuses (:class:`InputError`) what it cannot
    map as the scan judges it: an API with no replacement, a replacement the target removes too, an object inside a
    ``*List`` document or whose apiVersion is not a plain top-level line (what to write is then a decision)."""
    minor = KubeVersion(target.major, target.minor)
    parts = _DOC_SPLIT.split(manifest)
    mapped: List[Dict[str, str]] = []

    def removed(api_version: Any, kind: Any) -> Optional[RemovedApi]:
        entry = _BY_KIND.get((str(api_version), str(kind)))
        return entry if entry is not None and parse_version(entry.removed_in) <= minor else None

    for index, part in enumerate(parts):
        docs = [d for d in load_yaml(part, where, multi=True) if d is not None] if part.strip() else []
        for doc in docs:
            top = doc if isinstance(doc, Mapping) and "apiVersion" in doc and "kind" in doc and not (
                isinstance(doc.get("items"), list)) else None
            for obj in _objects(doc):
                entry = removed(obj.get("apiVersion"), obj.get("kind"))
                if entry is None:
                    continue
                name = "%s %s" % (entry.kind, as_mapping(obj.get("metadata")).get("name", "<unnamed>"))
                if obj is not top:
                    raise InputError("%s: %s uses %s inside a list document; rewrite the release by hand (or "
                                     "uninstall and reinstall it). Nothing was changed." % (
                                         where, name, entry.api_version))
                if not re.match(r"^[a-z0-9.-]*/?v\w+$", entry.replacement):
                    raise InputError("%s: %s uses %s, removed in v%s, with no API to map it to (%s); remove it from "
                                     "the chart and the release by hand. Nothing was changed." % (
                                         where, name, entry.api_version, entry.removed_in, entry.replacement))
                again = removed(entry.replacement, entry.kind)
                if again is not None:
                    raise InputError("%s: %s uses %s, whose replacement %s is removed by %s too (in v%s); move it to "
                                     "%s by hand. Nothing was changed." % (
                                         where, name, entry.api_version, entry.replacement, target.minor_str,
                                         again.removed_in, again.replacement))
                line = re.compile(r"(?m)^apiVersion:[ \t]*[\"']?%s[\"']?[ \t]*$" % re.escape(entry.api_version))
                if not line.search(parts[index]):
                    raise InputError("%s: %s: its apiVersion line is not a plain top-level 'apiVersion: %s' (a flow "
                                     "mapping or JSON); rewrite it by hand. Nothing was changed." % (
                                         where, name, entry.api_version))
                parts[index] = line.sub("apiVersion: %s" % entry.replacement, parts[index], count=1)
                mapped.append({"object": name, "from": entry.api_version, "to": entry.replacement,
                               "removed_in": entry.removed_in})
    return "---".join(parts), mapped


def _revision_label(secret: Mapping[str, Any], where: str) -> Tuple[str, str, int, str]:
    meta = as_mapping(secret.get("metadata"))
    labels = as_mapping(meta.get("labels"))
    raw = str(labels.get("version", ""))
    if not raw.isdigit() or not labels.get("name") or not labels.get("status"):
        raise ParseError("%s: not labelled as Helm labels its release Secrets (name, status, version)" % where)
    return str(meta.get("namespace", "")), str(labels["name"]), int(raw), str(labels["status"])


def plan_mappings(secrets: Iterable[Mapping[str, Any]], target: KubeVersion, now: str,
                  only: Optional[Iterable[str]] = None) -> List[Dict[str, Any]]:
    """What mapping each release does, as helm-mapkubeapis: the revision Helm upgrades from (:func:`decisive`) is
    read; when its manifest uses an API the target removes, a new revision (the release's highest + 1, metadata
    only: same chart and values, the objects' apiVersion moved) is to be added and every ``deployed`` revision
    superseded. ``secrets``: every Helm release Secret (any status); ``only``: ``namespace/name`` to limit to.
    Returns ``[{release, namespace, revision, new_revision, mapped, secret (the new Secret), supersede: [{name,
    patch}]}]``; a release with nothing to map is left out (a rerun after a mapping finds nothing)."""
    wanted = set(only or [])
    revisions: Dict[Tuple[str, str], Dict[int, Tuple[str, Mapping[str, Any]]]] = {}
    for secret in secrets:
        if not isinstance(secret, Mapping) or secret.get("type") != "helm.sh/release.v1":
            continue
        meta = as_mapping(secret.get("metadata"))
        namespace, name, revision, status = _revision_label(secret, "helm release secret %s/%s" % (
            meta.get("namespace", ""), meta.get("name", "")))
        if wanted and "%s/%s" % (namespace, name) not in wanted:
            continue
        revisions.setdefault((namespace, name), {})[revision] = (status, secret)
    plans = []
    for (namespace, name), known in sorted(revisions.items()):
        chosen = decisive((r, entry[0]) for r, entry in known.items())
        secret = known[chosen][1]
        where = "helm release %s/%s revision %d" % (namespace, name, chosen)
        data = as_mapping(secret.get("data")).get("release")
        if not isinstance(data, str) or not data:
            raise ParseError("%s: no data.release" % where)
        release = decode_helm_release(data)
        manifest = release.get("manifest")
        if not isinstance(manifest, str):
            raise ParseError("%s: the release's manifest is not text" % where)
        new_manifest, mapped = map_manifest(manifest, target, where)
        if not mapped:
            continue
        new_revision = max(known) + 1
        new_release = dict(release, manifest=new_manifest, version=new_revision,
                           info=dict(as_mapping(release.get("info")), status="deployed", last_deployed=now,
                                     description=MAPPED_DESCRIPTION))
        labels = {k: v for k, v in as_mapping(as_mapping(secret.get("metadata")).get("labels")).items()
                  if k != "modifiedAt"}
        labels.update(name=name, owner="helm", status="deployed", version=str(new_revision))
        supersede = []
        for _revision, (status, old) in sorted(known.items()):
            if status != "deployed":
                continue
            old_release = decode_helm_release(str(as_mapping(old.get("data")).get("release")))
            old_release["info"] = dict(as_mapping(old_release.get("info")), status="superseded")
            supersede.append({"name": str(as_mapping(old.get("metadata")).get("name")),
                              "patch": {"metadata": {"labels": {"status": "superseded"}},
                                        "data": {"release": encode_helm_release(old_release)}}})
        plans.append({
            "release": name, "namespace": namespace, "revision": chosen, "new_revision": new_revision,
            "mapped": mapped, "supersede": supersede,
            "secret": {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                       "metadata": {"name": "sh.helm.release.v1.%s.v%d" % (name, new_revision),
                                    "namespace": namespace, "labels": labels},
                       "data": {"release": encode_helm_release(new_release)}}})
    return plans


def release_metadata(release: Mapping[str, Any], meta: Mapping[str, Any]) -> Dict[str, Any]:
    """What an addon check needs of a Helm release - never its values or manifest."""
    chart = as_mapping(as_mapping(release.get("chart")).get("metadata"))
    revision = release.get("version")
    return {"namespace": str(release.get("namespace", meta.get("namespace", "")))[:253],
            "name": str(release.get("name", ""))[:253],
            "revision": revision if isinstance(revision, int) and not isinstance(revision, bool) else 0,
            "status": str(as_mapping(release.get("info")).get("status", ""))[:64],
            "chart": str(chart.get("name", ""))[:253], "chart_version": str(chart.get("version", ""))[:128],
            "app_version": str(chart.get("appVersion", "") or "")[:128]}


def _scan_helm_secret(secret: Mapping[str, Any], meta: Mapping[str, Any], where: str, target: KubeVersion,
                      releases: Optional[List[Dict[str, Any]]] = None) -> List[Dict[str, Any]]:
    data = as_mapping(secret.get("data")).get("release")
    if not data or not isinstance(data, str):
        raise ParseError("no data.release")
    release = decode_helm_release(data)
    if releases is not None:
        releases.append(release_metadata(release, meta))
    label = "helm:%s/%s (revision %s)" % (release.get("namespace", meta.get("namespace", "")),
                                          release.get("name", "?"), release.get("version", "?"))
    manifest = release.get("manifest") or ""
    if not isinstance(manifest, str):
        raise ParseError("the release's manifest is not text")
    findings = []
    for item in scan_manifest_text(manifest, target, label):
        item["message"] += "; the Helm release records the old apiVersion, so upgrades and rollbacks of it " \
                           "fail until the release is rewritten (playbooks/helm_mapkubeapis.yml, as helm " \
                           "mapkubeapis does)"
        findings.append(item)
    return findings


def summarize_findings(findings: List[Dict[str, Any]], target: KubeVersion) -> Dict[str, Any]:
    blocking = [f for f in findings if f["blocks_target"]]
    return {"target": str(target), "findings": findings, "blocking": blocking,
            "warnings": [f["message"] for f in findings if not f["blocks_target"]],
            "passed": not blocking, "source": SOURCE,
            "failures": [f["message"] for f in blocking]}


def target_version(value: Optional[str]) -> KubeVersion:
    if not value:
        raise InputError("target_version: required (the release to check against, e.g. v1.34.2)")
    return parse_version(value, "target_version")
