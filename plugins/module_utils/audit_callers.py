# Copyright: gpufleet contributors
# Apache License 2.0
"""Who calls a deprecated API: one control-plane host's audit log (docs/stages.md, "Who calls a removed API").

With auditing on, an apiserver annotates every request to a deprecated API version with ``k8s.io/deprecated:
"true"`` and, where the version has a removal release, ``k8s.io/removed-release: "1.N"`` (``audit.k8s.io/v1``
Event; a Metadata-level policy is enough). The deprecated-API metric says what was called; the audit log says who:
the user or ServiceAccount, its user agent, the namespace and the verb.

:func:`read_host` reads the log the host's kube-apiserver manifest names (``--audit-log-path``) and the backups the
apiserver rotated beside it (lumberjack's ``NAME-<UTC time>.EXT``, ``.gz`` when compressed), counts each request
once (its ``auditID``) within the lookback, and returns one row per API, caller, namespace and verb. It fails
closed: auditing off, a log that is missing, not JSON lines of ``audit.k8s.io/v1`` Events, or rotated past the
lookback (the oldest event kept is younger than the lookback and the apiserver may have deleted older ones) is an
``error`` naming the host and the fix, never "no callers".
:func:`findings` judges every host's rows against the target (removed_apis' rules: removed at or before the target
blocks; a later removal is a warning).
"""
from __future__ import annotations

import datetime
import gzip
import json
import os
import re
from typing import Any, Callable, Dict, IO, Iterable, Iterator, List, Mapping, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_yaml

MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"
DEPRECATED = "k8s.io/deprecated"
REMOVED = "k8s.io/removed-release"
_NEEDLE = DEPRECATED.encode()
MAX_LOOKBACK_HOURS = 2160  # 90 days
MAX_CALLERS = 500  # rows a host returns; more are counted as truncated (the report stays readable)
_BACKUP = re.compile(r"^(?P<prefix>.+)-(?P<time>\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3})(?P<ext>.*?)(?P<gz>\.gz)?$")
_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$")
HOW = ("turn auditing on through the ClusterConfiguration (apiServer.extraArgs audit-policy-file and audit-log-path, "
       "extraVolumes for both; docs/stages.md), or set gpufleet_audit_callers: false to go without (recorded)")


def utcnow() -> datetime.datetime:
    """Now in UTC, naive (as parse_time returns times)."""
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def audit_flags(manifest_text: str, where: str) -> Dict[str, Any]:
    """The audit log settings of a kube-apiserver static pod manifest (kubeadm writes ``--flag=value``): ``path``,
    ``max_backup`` and ``max_age_days`` (0: none removed), ``compress``. Auditing off, a log to stdout or a format
    other than JSON is refused (InputError) with the fix."""
    docs = load_yaml(manifest_text, where)
    try:
        command = list(docs["spec"]["containers"][0].get("command") or []) + list(
            docs["spec"]["containers"][0].get("args") or [])
    except (KeyError, IndexError, TypeError):
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
    if flags.get("audit-log-format", "json") != "json":
        raise InputError("%s writes its audit log as %r; gpufleet reads the json format (the default): set "
                         "audit-log-format json" % (where, flags["audit-log-format"]))
    out: Dict[str, Any] = {"path": path, "compress": flags.get("audit-log-compress", "false") == "true"}
    for key, flag in (("max_backup", "audit-log-maxbackup"), ("max_age_days", "audit-log-maxage")):
        raw = flags.get(flag, "0")
        if not raw.isdigit():
            raise InputError("%s: --%s=%r is not a whole number" % (where, flag, raw))
        out[key] = int(raw)
    return out


def log_files(path: str, names: Iterable[str]) -> Tuple[List[str], List[str]]:
    """(backups oldest first, [the current log] or []) among ``names`` of the log's directory: lumberjack names a
    backup PREFIX-YYYY-MM-DDTHH-MM-SS.mmm.EXT (UTC), .gz when compressed."""
    base = os.path.basename(path)
    prefix, ext = os.path.splitext(base)
    backups = []
    for name in names:
        match = _BACKUP.match(name)
        if match and match.group("prefix") == prefix and match.group("ext") == ext:
            backups.append((match.group("time"), name))
    return [n for _t, n in sorted(backups)], [base] if base in names else []


def parse_time(text: Any) -> datetime.datetime:
    """An audit timestamp (metav1.MicroTime: RFC 3339 in UTC, ``Z``), as a naive UTC datetime."""
    match = _TIME.match(text) if isinstance(text, str) else None
    if not match:
        raise ValueError("timestamp %r is not RFC 3339 UTC" % (text,))
    return datetime.datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S")


def _event(line: bytes, where: str) -> Dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError as exc:
        raise InputError("%s is not an audit event (JSON): %s" % (where, exc))
    if not isinstance(event, dict) or event.get("apiVersion") != "audit.k8s.io/v1" or event.get("kind") != "Event":
        raise InputError("%s is not an audit.k8s.io/v1 Event" % where)
    try:
        event["_time"] = parse_time(event.get("requestReceivedTimestamp"))
    except ValueError as exc:
        raise InputError("%s: requestReceivedTimestamp: %s" % (where, exc))
    return event


def _lines(handle: IO[bytes], where: str, last: bool) -> Iterator[Tuple[int, bytes]]:
    """The file's complete lines; only the current log's last line may be cut off (the apiserver is writing it)."""
    number = 0
    for number, line in enumerate(handle, 1):
        if not line.endswith(b"\n"):
            if last:
                return
            raise InputError("%s line %d is cut off (no end of line): the file is truncated" % (where, number))
        yield number, line


def read_host(host: str, flags: Mapping[str, Any], lookback_hours: int, now: datetime.datetime,
              listdir: Callable[[str], List[str]] = os.listdir,
              opener: Callable[[str], IO[bytes]] = lambda p: open(p, "rb")) -> Dict[str, Any]:
    """Who called a deprecated API on ``host`` within ``lookback_hours`` of ``now`` (naive UTC): {host, log, files,
    events_from (the oldest event kept), since, callers: [{api_version, resource, subresource, removed_release,
    user, user_agent, namespace, verb, count, last}], truncated}. Raises InputError naming the host when the log
    cannot answer (missing, unreadable, not audit events, rotated past the lookback)."""
    path = str(flags["path"])
    since = now - datetime.timedelta(hours=lookback_hours)
    folder = os.path.dirname(path) or "."
    try:
        names = listdir(folder)
    except OSError as exc:
        raise InputError("%s: the audit log's directory %s cannot be read: %s" % (host, folder, exc))
    backups, current = log_files(path, names)
    files = backups + current
    if not current:
        raise InputError("%s: no audit log at %s (its apiserver writes none: is the policy's level None for "
                         "everything, or the directory not the one mounted?)" % (host, path))
    oldest: Optional[datetime.datetime] = None
    counts: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    seen_ids: set = set()
    for index, name in enumerate(files):
        full = os.path.join(folder, name)
        try:
            raw = opener(full)
            handle: IO[bytes] = gzip.GzipFile(fileobj=raw) if name.endswith(".gz") else raw  # type: ignore[assignment]
            with handle:
                for number, line in _lines(handle, "%s: %s" % (host, full), last=index == len(files) - 1):
                    where = "%s: %s line %d" % (host, full, number)
                    if oldest is None:
                        oldest = _event(line, where)["_time"]
                    if _NEEDLE not in line:
                        continue
                    event = _event(line, where)
                    if event["_time"] < since or event.get("stage") == "RequestReceived":
                        continue
                    _count(counts, seen_ids, event)
        except (OSError, EOFError) as exc:
            raise InputError("%s: the audit log %s cannot be read: %s" % (host, full, exc))
    if oldest is None:
        raise InputError("%s: the audit log %s holds no event: its policy records nothing, so who calls a "
                         "deprecated API cannot be read; log every request at Metadata (docs/stages.md)" % (host, path))
    rotated_away = (bool(flags.get("max_backup")) and len(backups) >= int(flags["max_backup"])) or (
        bool(flags.get("max_age_days")) and oldest < now - datetime.timedelta(days=int(flags["max_age_days"])))
    if oldest > since and rotated_away:
        raise InputError(
            "%s: the audit log reaches back only to %sZ, and its apiserver has rotated older events away (%d "
            "backups kept, --audit-log-maxbackup %s, --audit-log-maxage %s); the check needs the last %d hours: keep "
            "more (a larger --audit-log-maxsize or -maxbackup) or lower gpufleet_audit_lookback_hours" % (
                host, oldest.isoformat(), len(backups), flags.get("max_backup"), flags.get("max_age_days"),
                lookback_hours))
    rows = sorted(counts.values(), key=lambda r: (-r["count"], r["api_version"], r["resource"], r["user"]))
    for row in rows:
        row["last"] = row["last"].isoformat() + "Z"
    return {"host": host, "log": path, "files": files, "events_from": oldest.isoformat() + "Z",
            "since": since.isoformat() + "Z", "callers": rows[:MAX_CALLERS],
            "truncated": max(0, len(rows) - MAX_CALLERS)}


def _count(counts: Dict[Tuple[str, ...], Dict[str, Any]], seen_ids: set, event: Mapping[str, Any]) -> None:
    """One request (its auditID: a watch has a ResponseStarted and a ResponseComplete event) to its row."""
    audit_id = event.get("auditID")
    if audit_id in seen_ids:
        return
    seen_ids.add(audit_id)
    ref, annotations, user = (_mapping(event.get(k)) for k in ("objectRef", "annotations", "user"))
    group, version = str(ref.get("apiGroup") or ""), str(ref.get("apiVersion") or "")
    row = {"api_version": "%s/%s" % (group, version) if group else version,
           "resource": str(ref.get("resource") or ""), "subresource": str(ref.get("subresource") or ""),
           "removed_release": str(annotations.get(REMOVED) or ""), "user": str(user.get("username") or ""),
           "user_agent": str(event.get("userAgent") or ""), "namespace": str(ref.get("namespace") or ""),
           "verb": str(event.get("verb") or "")}
    key = tuple(row.values())
    entry = counts.setdefault(key, dict(row, count=0, last=event["_time"]))
    entry["count"] += 1
    entry["last"] = max(entry["last"], event["_time"])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def service_account(user: str) -> str:
    """NAMESPACE/NAME of a ServiceAccount's user name (system:serviceaccount:NAMESPACE:NAME), else ""."""
    parts = user.split(":")
    return "%s/%s" % (parts[2], parts[3]) if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] else ""


KEY = ("api_version", "resource", "subresource", "removed_release", "user", "user_agent", "namespace", "verb")


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
