# Copyright: gpufleet contributors
# Apache License 2.0
"""etcd: ``etcdctl|etcdutl snapshot status -w json``, ``etcdctl endpoint status -w json`` and ``etcdctl endpoint
health -w json``.

snapshot status: ``{"hash": N, "revision": N, "totalKey": N, "totalSize": N}`` (etcdutl 3.6 adds ``version``).
endpoint status: ``[{"Endpoint": URL, "Status": {"header": {...}, "version", "dbSize", "dbSizeInUse", "leader",
"raftIndex", "raftTerm", "raftAppliedIndex", "errors"?, "isLearner"?, "dbSizeQuota"? (3.6)}}]``.
endpoint health (etcdctl 3.4-3.6, ``epHealth`` in etcdctl/ctlv3/command/ep_command.go): ``[{"endpoint": URL,
"health": bool, "took": "1.9ms", "error"?: "context deadline exceeded"}]``; etcdctl exits 1 when any endpoint is
unhealthy and still prints the list.

Snapshot retention: the etcd_snapshot role names its files ``etcd-CLUSTER-YYYYmmddTHHMMSSZ-rREVISION.db.vault``
(UTC); ``snapshots_expired`` picks the ones beyond the count or the age from those names alone, so the backup
directory, a backup host and an S3 bucket (whose listing has no usable modification time) keep the same set.
"""
from __future__ import annotations

import calendar
import re
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_document, mapping

# The one home of the etcd thresholds (the etcd_status module takes these when not given).
DEFAULT_QUOTA = 2 * 1024 ** 3  # etcd's default --quota-backend-bytes
DEFAULT_MAX_QUOTA_RATIO = 0.6  # a database over 60% of its quota is compacted/defragmented before an upgrade


def _int_field(doc: Mapping[str, Any], key: str, what: str) -> int:
    if key not in doc:
        raise ParseError("%s: field %r missing (truncated output?)" % (what, key))
    return _int(doc[key], key, what)


def _int(value: Any, key: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ParseError("%s: field %r is %s, not an integer" % (what, key, type(value).__name__))
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise ParseError("%s: field %r is %r, not an integer" % (what, key, str(value)[:40]))


def parse_snapshot_status(text: str) -> Dict[str, Any]:
    if isinstance(text, str) and text.lstrip().startswith("NAME:\n  snapshot - "):
        # etcdctl 3.6 dropped `snapshot status`: it prints the snapshot command's help and exits 0
        raise ParseError("etcd snapshot status: the output is etcdctl's help for 'snapshot', not a status - "
                         "etcdctl 3.6 has no 'snapshot status'; use etcdutl snapshot status -w json")
    doc = load_document(text, "etcd snapshot status")
    if not isinstance(doc, dict):
        raise ParseError("etcd snapshot status: expected a JSON object (use -w json)")
    what = "etcd snapshot status"
    return {"hash": _int_field(doc, "hash", what), "revision": _int_field(doc, "revision", what),
            "total_keys": _int_field(doc, "totalKey", what), "total_size": _int_field(doc, "totalSize", what),
            "version": doc.get("version", "")}


def parse_endpoint_status(text: str) -> List[Dict[str, Any]]:
    doc = load_document(text, "etcdctl endpoint status")
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list) or not doc:
        raise ParseError("etcdctl endpoint status: expected a JSON list of endpoints (use -w json)")
    out = []
    for i, item in enumerate(doc):
        what = "etcdctl endpoint status[%d]" % i
        if not isinstance(item, dict) or not isinstance(item.get("Status"), dict):
            raise ParseError("%s: no Status object" % what)
        status = item["Status"]
        header = mapping(status.get("header"), "%s: field 'header'" % what)
        errors = status.get("errors") or []
        out.append({"endpoint": str(item.get("Endpoint", ""))[:300], "version": str(status.get("version", ""))[:40],
                    "storage_version": str(status.get("storageVersion", ""))[:40],
                    "db_size": _int_field(status, "dbSize", what),
                    "db_size_in_use": _int(status.get("dbSizeInUse", 0), "dbSizeInUse", what),
                    "db_size_quota": _int(status["dbSizeQuota"], "dbSizeQuota", what) if status.get("dbSizeQuota")
                    else None,
                    "member_id": _id(header.get("member_id")), "leader": _id(status.get("leader")),
                    "cluster_id": _id(header.get("cluster_id")),
                    "is_leader": _id(status.get("leader")) is not None
                    and _id(status.get("leader")) == _id(header.get("member_id")),
                    "is_learner": bool(status.get("isLearner")), "revision": header.get("revision"),
                    "downgrade_enabled": bool((status.get("downgradeInfo") or {}).get("enabled"))
                    if isinstance(status.get("downgradeInfo"), dict) else False,
                    "raft_index": status.get("raftIndex"),
                    "errors": [str(e)[:500] for e in (errors if isinstance(errors, list) else [errors])]})
    return out


HEALTH_FIELDS = ("endpoint", "health", "took", "error")


def parse_endpoint_health(text: str) -> List[Dict[str, Any]]:
    """``etcdctl endpoint health -w json`` into ``[{endpoint, health, took, error}]``. Fails closed: anything but
    a non-empty list of objects with a text ``endpoint`` and a boolean ``health`` is a ParseError naming etcdctl,
    the layout understood and what was found; so is an endpoint that says healthy while carrying an error."""
    what = "etcdctl endpoint health"
    doc = load_document(text, what)
    if not isinstance(doc, list) or not doc:
        raise ParseError("%s: expected a JSON list of endpoints (etcdctl 3.4-3.6 with -w json), got %s" % (
            what, "an empty list" if doc == [] else type(doc).__name__))
    out = []
    for i, item in enumerate(doc):
        where = "%s[%d]" % (what, i)
        if not isinstance(item, dict):
            raise ParseError("%s: expected an object, got %s" % (where, type(item).__name__))
        endpoint, health, error = item.get("endpoint"), item.get("health"), item.get("error", "")
        if not isinstance(endpoint, str) or not endpoint or not isinstance(health, bool) or \
                not isinstance(error, str) or not isinstance(item.get("took", ""), str):
            raise ParseError("%s: expected the fields %s of etcdctl 3.4-3.6 (endpoint text, health true or false, "
                             "took and error text), found %s" % (
                                 where, ", ".join(HEALTH_FIELDS),
                                 ", ".join("%s=%r" % (k, item[k]) for k in sorted(item)[:8]) or "none"))
        if health and error:
            raise ParseError("%s: %s says healthy but carries the error %r" % (where, endpoint[:300], error[:300]))
        out.append({"endpoint": endpoint[:300], "health": health, "took": str(item.get("took", ""))[:40],
                    "error": error[:500]})
    return out


def judge_endpoint_health(health: List[Dict[str, Any]], members: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    return summarize(health_checks(health, members))


def health_checks(health: List[Dict[str, Any]], members: Optional[Sequence[str]] = None) -> List[Check]:
    """Every endpoint healthy (etcdctl read a key through consensus and found no alarm), its error named when not;
    with ``members`` (the inventory's etcd client URLs) the endpoints checked are exactly those members."""
    checks = []
    for ep in health:
        error = ep["error"] or "etcdctl gave no error text"
        checks.append(Check("etcd_health", ep["endpoint"], ep["health"],
                            "healthy (took %s)" % ep["took"] if ep["health"] else "unhealthy", "healthy",
                            "" if ep["health"] else error))
    if not checks:
        checks.append(Check("etcd_health", "etcd cluster", False, "no endpoint", "every member healthy",
                            "etcdctl reported no endpoint"))
    if members is not None:
        checks.append(_members_check([ep["endpoint"] for ep in health], members, "health report"))
    return checks


def _id(value: Any) -> Optional[str]:
    """A member id as text (etcdctl prints numbers; anything else is kept as text, never trusted as a number). 0 is
    no id: etcd reports ``leader: 0`` while the member knows no leader."""
    text = None if value is None or isinstance(value, bool) else str(value).strip()[:40]
    return None if not text or text == "0" else text


def _url(value: str) -> str:
    """An endpoint URL as compared with the inventory's: scheme and host lower-cased, no trailing slash."""
    text = value.strip().rstrip("/")
    scheme, sep, rest = text.partition("://")
    return "%s%s%s" % (scheme.lower(), sep, rest.lower()) if sep else text.lower()


def judge_endpoints(endpoints: List[Dict[str, Any]], quota_bytes: Optional[int] = None,
                    max_quota_ratio: float = DEFAULT_MAX_QUOTA_RATIO,
                    members: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    return summarize(endpoint_checks(endpoints, quota_bytes, max_quota_ratio, members))


def endpoint_checks(endpoints: List[Dict[str, Any]], quota_bytes: Optional[int] = None,
                    max_quota_ratio: float = DEFAULT_MAX_QUOTA_RATIO,
                    members: Optional[Sequence[str]] = None) -> List[Check]:
    """Each endpoint: no alarms/errors, DB size under ``max_quota_ratio`` of the quota. The cluster: one leader
    that every endpoint agrees on and that is a member id the status reports (``leader: 0`` is no leader; a
    leader no endpoint answers for is unproved), one cluster id, a member id for each; and with ``members`` (the
    inventory's etcd client URLs) the endpoints that answered are exactly those members."""
    if not 0 < max_quota_ratio <= 0.95:
        raise InputError("max_quota_ratio: expected a fraction in (0, 0.95], got %r (at 1.0 a full database, "
                         "which etcd refuses writes to, would pass)" % max_quota_ratio)
    checks = []
    for ep in endpoints:
        quota = ep["db_size_quota"] or quota_bytes or DEFAULT_QUOTA
        if quota <= 0 or ep["db_size"] < 0:
            checks.append(Check("etcd_db_size", ep["endpoint"], False, "%d bytes of quota %d" % (ep["db_size"], quota),
                                "< %.0f%% of quota" % (max_quota_ratio * 100), "etcd reported impossible sizes"))
            continue
        ratio = ep["db_size"] / float(quota)
        checks.append(Check("etcd_db_size", ep["endpoint"], ratio < max_quota_ratio,
                            "%d bytes (%.1f%% of quota %d)" % (ep["db_size"], ratio * 100, quota),
                            "< %.0f%% of quota" % (max_quota_ratio * 100),
                            "defragment or compact before upgrading" if ratio >= max_quota_ratio else ""))
        checks.append(Check("etcd_errors", ep["endpoint"], not ep["errors"], "; ".join(ep["errors"]) or "none",
                            "none"))
    ids = [str(ep["member_id"]) if ep["member_id"] else None for ep in endpoints]
    leaders = sorted({str(ep["leader"]) if ep["leader"] else "none" for ep in endpoints})
    leader = leaders[0] if len(leaders) == 1 and leaders[0] != "none" else None
    if leader is None:
        why = "endpoints disagree on the leader (%s)" % ", ".join(leaders) if len(leaders) > 1 else \
            "no endpoint knows a leader (leader 0): etcd has lost quorum or is electing"
    else:
        why = "" if leader in ids else "leader %s is not a member that answered (members %s): its status is " \
            "unproved; give every member's endpoint" % (leader, ", ".join(str(i) for i in ids))
    checks.append(Check("etcd_leader", "etcd cluster", not why, ", ".join(leaders), "one leader, a member that "
                        "answered", why))
    clusters = sorted({str(ep.get("cluster_id") or "none") for ep in endpoints})
    nameless = None in ids  # a member advertising two client URLs answers twice under one id: that is fine
    checks.append(Check("etcd_cluster", "etcd cluster", len(clusters) == 1 and "none" not in clusters and not nameless,
                        "cluster id(s) %s; member ids %s" % (", ".join(clusters), ", ".join(str(i) for i in ids)),
                        "one cluster id, a member id for each endpoint",
                        "an endpoint without a member id" if nameless else
                        ("" if len(clusters) == 1 and "none" not in clusters else
                         "the endpoints are not one etcd cluster")))
    if members is not None:
        checks.append(_members_check([ep["endpoint"] for ep in endpoints], members, "status"))
    return checks


def _members_check(answered: Sequence[str], members: Sequence[str], what: str) -> Check:
    """The endpoints that answered must be exactly the inventory's members (URLs compared by :func:`_url`)."""
    if not isinstance(members, (list, tuple)) or not all(isinstance(m, str) for m in members):
        raise InputError("members: a list of etcd client URLs, got %r" % (members,))
    want = {_url(m) for m in members}
    got = {_url(ep) for ep in answered}
    missing, extra = sorted(want - got), sorted(got - want)
    if not want:
        why = "members is empty: give every etcd member's client URL (the preflight's preflight_etcd_members)"
    else:
        why = "; ".join(x for x in ("no %s from %s" % (what, ", ".join(missing)) if missing else "",
                                    "%s answered but %s not an inventory member" % (
                                        ", ".join(extra), "is" if len(extra) == 1 else "are") if extra else "") if x)
    return Check("etcd_members", "etcd cluster", bool(want) and not missing and not extra,
                 ", ".join(sorted(got)) or "none", ", ".join(sorted(want)) or "the inventory's members", why)


def judge_snapshot(snapshot: Dict[str, Any], expect: Mapping[str, Any], path: str = "snapshot") -> Dict[str, Any]:
    return summarize(snapshot_checks(snapshot, expect, path))


def snapshot_checks(snapshot: Dict[str, Any], expect: Mapping[str, Any], path: str = "snapshot") -> List[Check]:
    """A snapshot verifies when its hash is non-zero (or equals ``expect['hash']``), its revision is at least
    ``expect['min_revision']``, it has at least ``expect['min_keys']`` keys (default 1) and a size above zero (or
    at least ``expect['min_size']``)."""
    checks = []
    if expect.get("hash") is not None:
        checks.append(Check("snapshot_hash", path, snapshot["hash"] == int(expect["hash"]), snapshot["hash"],
                            int(expect["hash"])))
    else:
        checks.append(Check("snapshot_hash", path, snapshot["hash"] != 0, snapshot["hash"], "non-zero"))
    min_rev = int(expect.get("min_revision") or 1)
    checks.append(Check("snapshot_revision", path, snapshot["revision"] >= min_rev, snapshot["revision"],
                        ">= %d" % min_rev, "the revision etcd had when the snapshot started"))
    min_keys = int(expect.get("min_keys") or 1)
    checks.append(Check("snapshot_keys", path, snapshot["total_keys"] >= min_keys, snapshot["total_keys"],
                        ">= %d" % min_keys))
    min_size = int(expect.get("min_size") or 1)
    checks.append(Check("snapshot_size", path, snapshot["total_size"] >= min_size, snapshot["total_size"],
                        ">= %d" % min_size))
    return checks


SNAPSHOT_FILE = re.compile(r"^etcd-(?P<cluster>.+)-(?P<taken>\d{8}T\d{6}Z)-r(?P<revision>\d+)\.db\.vault$")


def snapshots_expired(names: Iterable[str], keep_count: Any, keep_days: Any, now: Optional[float] = None
                      ) -> List[str]:
    """Of the snapshot files ``names`` (base names ending .db.vault), the ones to remove: beyond the newest
    ``keep_count`` or taken more than ``keep_days`` days before ``now`` (seconds since the epoch; default: now).
    Returned without the .db.vault suffix (the caller removes the file and its .json record), oldest first. Names
    that are not gpufleet snapshot files are never returned."""
    try:
        count, days = int(keep_count), int(keep_days)
    except (TypeError, ValueError):
        raise InputError("snapshot retention: etcd_snapshot_keep_count and etcd_snapshot_keep_days must be whole "
                         "numbers, got %r and %r" % (keep_count, keep_days))
    if count < 1 or days < 1:
        raise InputError("snapshot retention: etcd_snapshot_keep_count and etcd_snapshot_keep_days must be 1 or "
                         "more (the newest snapshot is always kept), got %d and %d" % (count, days))
    now = time.time() if now is None else float(now)
    taken = []
    for name in set(names):
        match = SNAPSHOT_FILE.match(str(name))
        if match:
            taken.append((calendar.timegm(time.strptime(match.group("taken"), "%Y%m%dT%H%M%SZ")),
                          int(match.group("revision")), str(name)[:-len(".db.vault")]))
    taken.sort(reverse=True)  # newest first
    expired = [entry for index, entry in enumerate(taken) if index >= count or entry[0] < now - days * 86400]
    return [entry[2] for entry in reversed(expired)]
