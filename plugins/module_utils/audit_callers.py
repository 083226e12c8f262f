# Copyright: gpufleet contributors
# Apache License 2.0
"""Who calls a deprecated API: one control-plane host's audit log (docs/stages.md, "Who calls a removed API").

With auditing on, an apiserver annotates every request to a deprecated API version with ``k8s.io/deprecated:
"true"`` and, where the version has a removal release, ``k8s.io/removed-release: "1.N"`` (``audit.k8s.io/v1``
Event; a Metadata-level policy is enough). The deprecated-API metric says what was called; the audit log says who:
the user or ServiceAccount, its user agent, the namespace and the verb.

:func:`audit_settings` reads the host's kube-apiserver manifest: the log and policy files (``--audit-log-path``,
``--audit-policy-file``) mapped through the pod's hostPath volumes to where they are on the host, and the rotation
flags. :func:`check_policy` refuses a policy that can hide a deprecated call. :func:`read_host` reads the log and
the backups the apiserver rotated beside it (lumberjack's ``NAME-<UTC time>.EXT``, ``.gz`` when compressed) and
returns one row per API, caller, namespace and verb of the calls to an API with a removal release within the
lookback: each request once, the count and the last time. It fails closed (InputError naming the host and the fix),
never "no callers": auditing off or inside the container, no log, no event, a line that is not an
``audit.k8s.io/v1`` Event, a log whose newest event is stale (the apiserver writes elsewhere), a log that does not
reach back over the lookback, a rotation that keeps racing the read.
"""
from __future__ import annotations

import datetime
import gzip
import json
import os
import posixpath
import re
import zlib
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_removed_apis import BY_RESOURCE
from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_removed_apis import REMOVED as TABLE
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import as_mapping, load_yaml

MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"
DEPRECATED = "k8s.io/deprecated"
REMOVED = "k8s.io/removed-release"
_NEEDLE = DEPRECATED.encode()  # Go's encoder writes "/" as is: every deprecated call's line holds these bytes
_EVENT = b'{"kind":"Event","apiVersion":"audit.k8s.io/v1",'  # how the apiserver starts each line (TypeMeta first)
DEFAULT_LOOKBACK_MINUTES = 7 * 24 * 60  # a week: weekly jobs
MAX_LOOKBACK_MINUTES = 90 * 24 * 60
STALE_MINUTES = 15  # a live apiserver's log has events newer than this (its own controllers' requests)
MAX_CALLERS = 500  # rows a host returns; more are counted as truncated (the report stays readable)
_BACKUP = re.compile(r"^(?P<prefix>.+)-(?P<time>\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3})(?P<ext>.*?)(?P<gz>\.gz)?$")
_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$")
HOW = ("turn auditing on through the ClusterConfiguration (apiServer.extraArgs audit-policy-file and audit-log-path, "
       "extraVolumes for both; docs/stages.md), or set gpufleet_audit_callers: false to go without (recorded)")


def utcnow() -> datetime.datetime:
    """Now in UTC, naive (as parse_time returns times)."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)  # noqa: UP017 - the hosts run Python < 3.11 too


def kubeadm_keeps_auditing(config_map: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Why the manifests ``kubeadm upgrade`` writes would not audit, or None: the kubeadm-config ConfigMap's
    ClusterConfiguration must carry ``audit-log-path`` in ``apiServer.extraArgs`` (a list of {name, value} in
    v1beta4, a mapping in v1beta3); a flag set by hand in the manifest is lost at the upgrade. None too when the
    cell has no kubeadm-config (not made by kubeadm: nothing rewrites its manifests)."""
    if config_map is None:
        return None
    where = "kube-system/kubeadm-config ClusterConfiguration"
    text = as_mapping(config_map.get("data")).get("ClusterConfiguration")
    if not isinstance(text, str):
        return "%s is missing, so kubeadm upgrade's manifests cannot be told to audit" % where
    try:
        doc = as_mapping(load_yaml(text, where))
    except GpufleetError as exc:
        return exc.msg
    args = as_mapping(doc.get("apiServer")).get("extraArgs")
    names = {str(a.get("name")): a.get("value") for a in args if isinstance(a, Mapping)} if isinstance(
        args, list) else dict(as_mapping(args))
    if names.get("audit-log-path") in (None, "", "-"):
        return ("%s has no apiServer.extraArgs audit-log-path: the manifests kubeadm upgrade writes will not audit, "
                "so who calls a removed API cannot be read at the next upgrade; set it there (docs/stages.md)" % where)
    return None


def _on_host(pod: Mapping[str, Any], path: str, what: str, where: str) -> str:
    """Where ``path`` (as the container sees it) is on the host: through the volume mounted at the longest mountPath
    that holds it, which must be a hostPath (its subPath joined). A path on no volume, or on another kind (an
    emptyDir), is inside the pod, where no host reads it."""
    spec = as_mapping(pod.get("spec"))
    volumes = {str(as_mapping(v).get("name")): as_mapping(v) for v in spec.get("volumes") or []}
    container = as_mapping((spec.get("containers") or [{}])[0])
    path = posixpath.normpath(path)
    best: Optional[Tuple[str, Mapping[str, Any]]] = None
    for raw in container.get("volumeMounts") or []:
        mount = as_mapping(raw)
        mount_path = posixpath.normpath(str(mount.get("mountPath") or "/"))
        inside = path == mount_path or path.startswith(mount_path.rstrip("/") + "/")
        if inside and (best is None or len(mount_path) > len(best[0])):
            best = (mount_path, mount)
    host = as_mapping(volumes.get(str(best[1].get("name"))) if best else None).get("hostPath")
    if best is None or not isinstance(as_mapping(host).get("path"), str):
        raise InputError("%s: the %s %s is on no hostPath volume of the pod: it is inside the apiserver's pod, lost "
                         "with it and read by no one; mount its directory from the host (ClusterConfiguration "
                         "apiServer.extraVolumes, docs/stages.md)" % (where, what, path))
    base = posixpath.join(str(as_mapping(host)["path"]), str(best[1].get("subPath") or ""))
    rest = path[len(best[0]):].lstrip("/")
    return posixpath.normpath(posixpath.join(base, rest)) if rest else posixpath.normpath(base)


def audit_settings(manifest_text: str, where: str) -> Dict[str, Any]:
    """The audit settings of a kube-apiserver static pod manifest (kubeadm writes ``--flag=value``): ``path`` and
    ``policy`` on the host (through the pod's hostPath volumes), ``max_backup`` and ``max_age_days`` (0: none
    removed), ``compress``. Auditing off, a log to stdout or inside the container, or a format other than JSON is
    refused (InputError) with the fix."""
    pod = load_yaml(manifest_text, where)
    try:
        container = pod["spec"]["containers"][0]
        command = list(container.get("command") or []) + list(container.get("args") or [])
    except (KeyError, IndexError, TypeError, AttributeError):
        raise InputError("%s is not a static pod manifest (no spec.containers[0])" % where)
    flags: Dict[str, str] = {}
    for item in command:
        if isinstance(item, str) and item.startswith("--audit-") and "=" in item:
            name, value = item[2:].split("=", 1)
            flags[name] = value
    path = flags.get("audit-log-path", "")
    if not path or path == "-":
        raise InputError("%s has no --audit-log-path%s: auditing to a file is off, so who calls a deprecated API "
                         "cannot be read; %s" % (where, " (it logs to stdout)" if path == "-" else "", HOW))
    if not flags.get("audit-policy-file"):
        raise InputError("%s has no --audit-policy-file: the apiserver audits nothing without a policy; %s" % (
            where, HOW))
    if flags.get("audit-log-format", "json") != "json":
        raise InputError("%s writes its audit log as %r; gpufleet reads the json format (the default): set "
                         "audit-log-format json" % (where, flags["audit-log-format"]))
    image = str(container.get("image") or "") if isinstance(container, Mapping) else ""
    version = re.search(r":v(\d+)\.(\d+)\.\d+", image)
    out: Dict[str, Any] = {"path": _on_host(pod, path, "audit log", where), "container_path": path,
                           "minor": [int(version.group(1)), int(version.group(2))] if version else None,
                           "policy": _on_host(pod, flags["audit-policy-file"], "audit policy", where),
                           "compress": flags.get("audit-log-compress", "false") == "true"}
    for key, flag in (("max_backup", "audit-log-maxbackup"), ("max_age_days", "audit-log-maxage")):
        raw = flags.get(flag, "0")
        if not raw.isdigit():
            raise InputError("%s: --%s=%r is not a whole number" % (where, flag, raw))
        out[key] = int(raw)
    return out


def removal_groups(running_minor: Optional[Sequence[int]] = None) -> Set[str]:
    """The API groups with a version the table removes after ``running_minor`` (the apiserver's: still served, so
    still called; every group when None): a policy rule at level None for one of them can hide a call that an
    upgrade, to the next minor or several hops on, must know about."""
    groups = set()
    for row in TABLE:
        removed = tuple(int(p) for p in row.removed_in.split("."))
        if running_minor is None or removed > tuple(running_minor):
            groups.add(row.api_version.rsplit("/", 1)[0] if "/" in row.api_version else "")
    return groups


def check_policy(text: str, where: str, groups: Set[str]) -> None:
    """Refuse (InputError) an audit policy that can hide a call to a deprecated API: ResponseComplete omitted
    (every short request is logged at that stage only), a rule at level None for every resource or for ``groups``
    (or ``*``), or no rule that logs every resource request at Metadata or above (a request no rule matches is not
    logged). Policy rules match groups and resources, never versions."""
    policy = as_mapping(load_yaml(text, where))
    if policy.get("apiVersion") != "audit.k8s.io/v1" or policy.get("kind") != "Policy":
        raise InputError("%s is not an audit.k8s.io/v1 Policy" % where)
    if "ResponseComplete" in (policy.get("omitStages") or []):
        raise InputError("%s omits the ResponseComplete stage: most requests are logged at that stage only" % where)
    rules = policy.get("rules")
    if not isinstance(rules, list) or not rules:
        raise InputError("%s has no rules: it logs nothing" % where)
    for number, raw in enumerate(rules, 1):
        rule = as_mapping(raw)
        level = rule.get("level")
        if level != "None":
            if "ResponseComplete" in (rule.get("omitStages") or []):
                raise InputError("%s rule %d omits the ResponseComplete stage: the requests it matches are not "
                                 "logged when they end" % (where, number))
            if not any(rule.get(k) for k in ("users", "userGroups", "verbs", "resources", "namespaces",
                                             "nonResourceURLs")):
                return  # logs every request the rules before it left alone
            continue
        if rule.get("nonResourceURLs"):
            continue
        resources = rule.get("resources")
        if not resources:
            raise InputError("%s rule %d (level None) matches every resource request%s: it hides who calls a "
                             "deprecated API; name the groups and resources it is for" % (
                                 where, number, " of the users, groups or verbs it names" if any(
                                     rule.get(k) for k in ("users", "userGroups", "verbs", "namespaces")) else ""))
        for item in resources:
            group = str(as_mapping(item).get("group", ""))
            if group == "*" or group in groups - {""}:
                raise InputError("%s rule %d (level None) covers API group %r, which has a deprecated version the "
                                 "upgrade must know the callers of (rules match groups, not versions): log it at "
                                 "Metadata" % (where, number, group))
    raise InputError("%s has no rule that logs every resource request at Metadata or above (end it with `- level: "
                     "Metadata`): a request no rule matches is not logged" % where)


def log_files(path: str, names: Iterable[str]) -> Tuple[List[str], List[str]]:
    """(backups oldest first, [the current log] or []) among ``names`` of the log's directory: lumberjack names a
    backup PREFIX-YYYY-MM-DDTHH-MM-SS.mmm.EXT (UTC), .gz when compressed."""
    names = list(names)
    base = os.path.basename(path)
    prefix, ext = os.path.splitext(base)
    backups = []
    for name in names:
        match = _BACKUP.match(name)
        if match and match.group("prefix") == prefix and match.group("ext") == ext:
            backups.append((match.group("time"), name))
    present = set(names)
    # lumberjack compresses a backup by writing NAME.gz beside NAME, then removing NAME: while both are there, the
    # uncompressed one is whole and the other may not be
    backups = [(t, n) for t, n in backups if not (n.endswith(".gz") and n[:-3] in present)]
    return [n for _t, n in sorted(backups)], [base] if base in names else []


def parse_time(text: Any) -> datetime.datetime:
    """An audit timestamp (metav1.MicroTime: RFC 3339 in UTC, ``Z``), as a naive UTC datetime."""
    match = _TIME.match(text) if isinstance(text, str) else None
    if not match:
        raise ValueError("timestamp %.40r is not RFC 3339 UTC" % (text,))
    return datetime.datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S")


def _event(line: bytes, where: str) -> Dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError as exc:
        raise InputError("%s is not an audit event (JSON): %s" % (where, exc))
    if not isinstance(event, dict) or event.get("apiVersion") != "audit.k8s.io/v1" or event.get("kind") != "Event":
        raise InputError("%s is not an audit.k8s.io/v1 Event" % where)
    try:
        event["_received"] = parse_time(event.get("requestReceivedTimestamp"))
        event["_time"] = parse_time(event.get("stageTimestamp"))
    except ValueError as exc:
        raise InputError("%s: %s" % (where, exc))
    if not isinstance(event.get("auditID"), str) or not event["auditID"]:
        raise InputError("%s has no auditID" % where)
    return event


def _lines(handle: IO[bytes], where: str, last: bool) -> Iterator[Tuple[int, bytes]]:
    """The file's complete lines, each an audit event by its first bytes; only the current log's last line may be
    cut off (the apiserver is writing it)."""
    number = 0
    for number, line in enumerate(handle, 1):
        if not line.endswith(b"\n"):
            if last:
                return
            raise InputError("%s line %d is cut off (no end of line): the file is truncated" % (where, number))
        if not line.startswith(_EVENT):
            raise InputError("%s line %d is not an audit.k8s.io/v1 Event (the apiserver's JSON lines start %s)" % (
                where, number, _EVENT.decode()))
        yield number, line


def _open_all(host: str, folder: str, path: str, listdir: Callable[[str], List[str]],
              opener: Callable[[str], IO[bytes]]) -> List[Tuple[str, IO[bytes]]]:
    """The log's files open, oldest first: the current one opened before the backups, and the backups listed again
    after, so a rotation between listing and opening (the current file renamed to a backup that was not listed)
    is seen and the listing taken again; an open file is read whole even if renamed meanwhile."""
    for _attempt in range(3):
        try:
            names = listdir(folder)
        except OSError as exc:
            raise InputError("%s: the audit log's directory %s cannot be read: %s" % (host, folder, exc))
        backups, current = log_files(path, names)
        if not current:
            raise InputError("%s: no audit log at %s (moved aside by a logrotate? the apiserver writes on into a "
                             "moved file and makes no new one until it rotates)" % (host, path))
        opened: List[Tuple[str, IO[bytes]]] = []
        try:
            for name in current + backups:
                opened.append((name, opener(os.path.join(folder, name))))
            again = log_files(path, listdir(folder))[0]
        except FileNotFoundError:  # removed (compressed, past maxbackup) since the listing: a rotation
            again = None
        except OSError as exc:
            for _name, handle in opened:
                handle.close()
            raise InputError("%s: the audit log %s cannot be read: %s" % (host, path, exc))
        if again == backups:
            return opened[1:] + opened[:1]
        for _name, handle in opened:
            handle.close()
    raise InputError("%s: the audit log %s rotated during each of 3 reads; read it again" % (host, path))


def read_host(host: str, settings: Mapping[str, Any], lookback_minutes: int, now: datetime.datetime,
              listdir: Callable[[str], List[str]] = os.listdir,
              opener: Callable[[str], IO[bytes]] = lambda p: open(p, "rb")) -> Dict[str, Any]:
    """Who called an API with a removal release on ``host`` within ``lookback_minutes`` of ``now`` (naive UTC; 0:
    the whole log): {host, log, files, events_from, events_to, since, lookback_minutes, callers: [{api_version,
    resource, subresource, removed_release, user, user_agent, namespace, verb, count, last}], truncated}. Raises
    InputError naming the host when the log cannot answer."""
    path = str(settings["path"])
    folder = os.path.dirname(path) or "."
    since = now - datetime.timedelta(minutes=lookback_minutes) if lookback_minutes else None
    opened = _open_all(host, folder, path, listdir, opener)
    oldest: Optional[datetime.datetime] = None
    newest = b""
    counts: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    started: Set[str] = set()
    try:
        for index, (name, raw) in enumerate(opened):
            full = os.path.join(folder, name)
            handle: IO[bytes] = gzip.GzipFile(fileobj=raw) if name.endswith(".gz") else raw  # type: ignore
            for number, line in _lines(handle, "%s: %s" % (host, full), last=index == len(opened) - 1):
                where = "%s: %s line %d" % (host, full, number)
                if oldest is None:
                    oldest = _event(line, where)["_time"]
                newest = line
                if _NEEDLE not in line:
                    continue
                event = _event(line, where)
                if as_mapping(event.get("annotations")).get(DEPRECATED) != "true" or (
                        since is not None and event["_time"] < since) or event.get("stage") == "RequestReceived":
                    continue
                _count(counts, started, event)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError("%s: the audit log %s cannot be read: %s" % (host, path, exc))
    finally:
        for _name, raw in opened:
            raw.close()
    if oldest is None:
        raise InputError("%s: the audit log %s holds no event: its policy records nothing, so who calls a "
                         "deprecated API cannot be read; log every request at Metadata (docs/stages.md)" % (host, path))
    latest = _event(newest, "%s: %s's last event" % (host, path))["_time"]
    if now - latest > datetime.timedelta(minutes=STALE_MINUTES):
        raise InputError("%s: the audit log %s's newest event is from %sZ, over %d minutes ago: the apiserver writes "
                         "its log elsewhere (a moved hostPath, a logrotate that moved the file), so what it holds is "
                         "not today's" % (host, path, latest.isoformat(), STALE_MINUTES))
    if since is not None and oldest > since:
        raise InputError(
            "%s: the audit log reaches back only to %sZ, and the check needs the last %d minutes (from %sZ; "
            "gpufleet_audit_lookback_minutes): wait until it covers them, keep more if rotation removed them (%d "
            "backups kept; --audit-log-maxbackup %s, --audit-log-maxage %s, --audit-log-maxsize), or set a shorter "
            "lookback knowingly (0: the whole log, whatever it covers)" % (
                host, oldest.isoformat(), lookback_minutes, since.isoformat(), len(opened) - 1,
                settings.get("max_backup"), settings.get("max_age_days")))

    # the earliest removals first (the likeliest to block an upgrade), then the busiest callers
    def order(row: Mapping[str, Any]) -> Tuple[Any, ...]:
        removal = tuple(int(p) for p in row["removed_release"].split(".") if p.isdigit())
        return (removal, -row["count"], row["api_version"], row["resource"], row["user"])
    rows = sorted(counts.values(), key=order)
    for row in rows:
        row["last"] = row["last"].isoformat() + "Z"
    return {"host": host, "log": path, "files": [name for name, _raw in opened],
            "events_from": oldest.isoformat() + "Z", "events_to": latest.isoformat() + "Z",
            "since": since.isoformat() + "Z" if since else "", "lookback_minutes": lookback_minutes,
            "callers": rows[:MAX_CALLERS], "truncated": max(0, len(rows) - MAX_CALLERS),
            "truncated_removals": sorted({r["removed_release"] for r in rows[MAX_CALLERS:]})}


def _count(counts: Dict[Tuple[str, ...], Dict[str, Any]], started: Set[str], event: Mapping[str, Any]) -> None:
    """One request to its row, once: a request ends with one ResponseComplete (or Panic) event, and a long-running
    one (a watch) has a ResponseStarted before it - counted there, its end then skipped. Only the auditIDs of
    requests started and not yet ended are kept, so memory follows the open watches, not the log. A call to an API
    with no removal release (none annotated, none in the table: core/v1 Endpoints) makes no row."""
    ref, annotations, user = (as_mapping(event.get(k)) for k in ("objectRef", "annotations", "user"))
    group, version = str(ref.get("apiGroup") or ""), str(ref.get("apiVersion") or "")
    api_version = "%s/%s" % (group, version) if group else version
    resource = str(ref.get("resource") or "")
    known = BY_RESOURCE.get((api_version, resource))
    removed = str(annotations.get(REMOVED) or "") or (known.removed_in if known else "")
    if not removed:
        return
    audit_id = event["auditID"]
    if event.get("stage") == "ResponseStarted":
        started.add(audit_id)
    elif audit_id in started:
        started.discard(audit_id)
        return
    row = {"api_version": api_version, "resource": resource, "subresource": str(ref.get("subresource") or ""),
           "removed_release": removed, "user": str(user.get("username") or ""),
           "user_agent": str(event.get("userAgent") or ""), "namespace": str(ref.get("namespace") or ""),
           "verb": str(event.get("verb") or "")}
    key = tuple(row.values())
    entry = counts.setdefault(key, dict(row, count=0, last=event["_received"]))
    entry["count"] += 1
    entry["last"] = max(entry["last"], event["_received"])


def service_account(user: str) -> str:
    """NAMESPACE/NAME of a ServiceAccount's user name (system:serviceaccount:NAMESPACE:NAME), else ""."""
    parts = user.split(":")
    return "%s/%s" % (parts[2], parts[3]) if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] else ""


KEY = ("api_version", "resource", "subresource", "removed_release", "user", "user_agent", "namespace", "verb")


def check_reading(reading: Mapping[str, Any]) -> Optional[str]:
    """Why ``reading`` is not a whole audit_callers reading (a failed task's result, something else), or None."""
    if reading.get("error"):
        return str(reading["error"])
    if reading.get("failed") or not isinstance(reading.get("callers"), list) or not isinstance(
            reading.get("events_from"), str) or not all(isinstance(r, Mapping) for r in reading["callers"]):
        return "what came back is not an audit_callers reading (%s)" % (
            str(reading.get("msg") or "no callers list")[:300])
    return None


def merge(readings: Iterable[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """Every host's rows as one: counts added, the last time the latest, the hosts listed."""
    merged: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    for reading in readings:
        for row in reading.get("callers") or []:
            key = tuple(str(row.get(k, "")) for k in KEY)
            entry = merged.setdefault(key, dict(row, count=0, last="", hosts=[]))
            entry["count"] += int(row.get("count") or 0)
            entry["last"] = max(entry["last"], str(row.get("last") or ""))
            entry["hosts"] = sorted(set(entry["hosts"]) | {str(reading.get("host"))})
    return sorted(merged.values(), key=lambda r: (r["api_version"], r["resource"], r["user"], r["verb"]))
