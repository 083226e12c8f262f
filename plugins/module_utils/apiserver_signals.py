# Copyright: gpufleet contributors
# Apache License 2.0
"""The apiserver signals a control-plane soak watches, from the apiserver's own ``/metrics``: one reduction of the
Prometheus text (parsed by prometheus_client in promtext.py), shared with the fleet's halt readings
(fleet_readings.scrape), and the soak's judgement of one control-plane host against the reading taken before it
moved and against its peer apiservers.

Signals (docs/stages.md, "The control-plane soak"):

- ``throttled_per_minute``: requests the apiserver refused for want of capacity, per minute: the requests its
  filters ended with 429 (``apiserver_request_terminations_total{code="429"}``: API Priority and Fairness and the
  max-in-flight filter both count each refusal there), or API Priority and Fairness's own count
  (``apiserver_flowcontrol_rejected_requests_total``) where that is higher. Both are absent until their first
  refusal, so a text without them reads none (a proxy or ``--disabled-metrics`` that drops them cannot be told
  from a quiet apiserver). Not every 429 in ``apiserver_request_total`` is throttling: a watch cache that is
  (re)initialising - for each CRD, in the minutes after an apiserver starts - answers WATCH and LIST 429 "storage
  is (re)initializing", which clients retry (a real capture: tests/fixtures/metrics/real-1.36.3-fresh-start.prom.gz,
  twelve such 429s and no refusal), and the eviction API answers 429 when a PodDisruptionBudget refuses (the
  cell's policy, not the apiserver's health). Neither is counted by the filters.
- ``p99_seconds.read|list|write``: the 99th percentile of ``apiserver_request_duration_seconds`` by verb class -
  GET; LIST; POST, PUT, PATCH, DELETE, DELETECOLLECTION, APPLY - long-running requests (WATCH, WATCHLIST, CONNECT)
  left out, as the apiserver's own SLO metrics do, and so are non-resource paths (``/readyz``, discovery: no
  ``resource``). A class that served fewer than ``min_requests`` requests in the window has no p99: "unmeasured",
  never a pass. The soak sends a few probe requests of each class to every apiserver at each reading (a GET, a LIST
  with ``limit=1``, a server-side dry-run create) so that a quiet cell is measured too.
- ``relists_per_minute``: LIST requests per minute (clients that lost their watch list everything again; a WATCH is
  counted only when it ends, minutes later, so it is left out).
- ``rss_bytes``: ``process_resident_memory_bytes`` (the highest seen in the window).

Rates are taken within one apiserver process: two scrapes whose ``process_start_time_seconds`` differ, or whose
counters went down, belong to two processes, and a soak whose host's apiserver restarted fails naming it. A text
that is not this apiserver's (another exporter, a proxy's page, no ``kubernetes_build_info`` equal to the server's
``/version``) or that lacks the series the signals need is refused, naming the host.

The judgement: a signal regresses when its value after the move is above ``ratio x reference + slack`` for the
reading before (the same host's old apiserver) AND for the median of the peer apiservers that still run another
release, over the same window - a cell-wide rise (load, etcd) shows on those peers too and is not this host's; a
regression of the new release shows against both (a peer already at the target would carry it too, so it is no
reference). A reference that could not be measured does not excuse: the ones that were are used, a latency with
neither is held to the Kubernetes API call latency SLO's ceiling (1 s for single-object calls, 30 s for LIST), and
refusals with neither to none (a healthy apiserver refuses none). A rate's slack is at least one minute's worth of
events, so one 429 in a 5-second window is not a regression. Each reading judges the soak's whole window and its
last interval: a regression late in a long soak is not diluted by the quiet minutes before it.
"""
from __future__ import annotations

import math
import re
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.upgrade.plugins.module_utils import promtext
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed, InputError, ParseError

REQUESTS = "apiserver_request_total"
DURATION = "apiserver_request_duration_seconds_bucket"
RSS = "process_resident_memory_bytes"
STARTED = "process_start_time_seconds"
VERB_CLASS = {"GET": "read", "LIST": "list", "POST": "write", "PUT": "write", "PATCH": "write", "DELETE": "write",
              "DELETECOLLECTION": "write", "APPLY": "write"}
CLASSES = ("read", "list", "write")
RELIST_VERBS = ("LIST",)
BUILD_INFO = "kubernetes_build_info"
TERMINATIONS = "apiserver_request_terminations_total"  # requests a filter ended, by code: 429 is a refusal
APF_REJECTED = "apiserver_flowcontrol_rejected_requests_total"
# the samples read as counts, sizes and times: NaN, an infinity or a negative one is no reading (NaN would pass every
# comparison with a limit, and a NaN start time would make every two scrapes two processes)
COUNTS = frozenset((REQUESTS, DURATION, TERMINATIONS, APF_REJECTED, RSS, STARTED))
# an apiserver's own URL (cell.py's gpufleet_apiserver_url), whole and ASCII; the fleet's readings and the cell use it
APISERVER_URL = re.compile(r"https://[A-Za-z0-9.\[\]:_-]+(:[0-9]{1,5})?/?")
LOOPBACK = re.compile(r"https://(127\.[0-9.]+|localhost|\[::1\])(:|/|$)")
LATENCIES = tuple("p99_seconds.%s" % c for c in CLASSES)
SIGNALS = ("throttled_per_minute",) + LATENCIES + ("relists_per_minute", "rss_bytes")

# The soak's settings and thresholds (the cell's gpufleet_soak_signals; this is their one home). Sources: the
# latency ceilings are the Kubernetes API call latency SLO (sig-scalability, "API call latency": p99 <= 1 s for
# mutating and single-object read calls, <= 30 s for cluster-scope LIST); the ratios and slacks are gpufleet's:
# twice the reference is a regression a human would page on, and the slack keeps a quiet reference (0 throttled
# answers, a 5 ms p99) from making noise a failure. Refusals (APF or max-in-flight) mean the apiserver had no seat
# for a request, so a steady 5 a minute more than before and than the peers is a real shortage.
SPEC: Dict[str, Dict[str, Any]] = {
    "interval_seconds": {"type": "int", "default": 10},  # between two readings during the soak
    "warmup_seconds": {"type": "int", "default": 60},  # after the new process starts, before its window opens
    "before_seconds": {"type": "int", "default": 30},  # the window of the reading before the host moves
    "min_requests": {"type": "int", "default": 50},  # a verb class with fewer requests in a window has no p99
    # the soak's own requests per class, apiserver and reading: the default soak (30 s, a reading every 10 s) then
    # measures min_requests of each class from its probes alone on a quiet cell
    "probe_requests": {"type": "int", "default": 20},
    "throttled_ratio": {"type": "float", "default": 2.0},
    "throttled_slack_per_minute": {"type": "float", "default": 5.0},
    "latency_ratio": {"type": "float", "default": 2.0},
    "latency_slack_seconds": {"type": "float", "default": 0.1},
    "latency_ceiling_seconds": {"type": "float", "default": 1.0},  # read and write, when no reference was measured
    "list_ceiling_seconds": {"type": "float", "default": 30.0},
    "relists_ratio": {"type": "float", "default": 3.0},
    "relists_slack_per_minute": {"type": "float", "default": 60.0},
    "rss_ratio": {"type": "float", "default": 2.0},
    "rss_slack_bytes": {"type": "int", "default": 512 * 1024 * 1024},
}
VAR = "gpufleet_soak_signals"


def settings(value: Any, name: str = VAR) -> Dict[str, Any]:
    """The soak's settings with their defaults, checked (types by ansible-core's validator, then bounds)."""
    if value in (None, ""):
        value = {}
    if not isinstance(value, Mapping):
        raise InputError("%s: expected a mapping of %s, got %s. Nothing was changed." % (
            name, ", ".join(SPEC), type(value).__name__))
    result = ArgumentSpecValidator(SPEC).validate(dict(value))
    if result.error_messages:
        raise InputError("%s: %s. Nothing was changed." % (name, "; ".join(result.error_messages)))
    out = dict(result.validated_parameters)
    for key, low, high in (("interval_seconds", 1, 600), ("warmup_seconds", 0, 3600), ("before_seconds", 1, 600),
                           ("min_requests", 1, 10 ** 6), ("probe_requests", 0, 100)):
        if not low <= out[key] <= high:
            raise InputError("%s.%s: %s; give %d to %d. Nothing was changed." % (name, key, out[key], low, high))
    for key in SPEC:
        if key.endswith("_ratio") and not (math.isfinite(out[key]) and out[key] >= 1.0):
            raise InputError("%s.%s: %s; give a ratio of 1 or more (1.5: half again the reference). Nothing was "
                             "changed." % (name, key, out[key]))
        if ("_slack" in key or "_ceiling" in key) and not (math.isfinite(out[key]) and out[key] >= 0):
            raise InputError("%s.%s: %s; give 0 or more. Nothing was changed." % (name, key, out[key]))
    return out


def reduce(text: Any, where: str, version_text: Any = None) -> Dict[str, Any]:
    """One apiserver's ``/metrics`` reduced to the counters the signals need: ``{"throttled", "requests": {verb:
    count}, "buckets": {class: {le: cumulative count}}, "rss_bytes", "started"}`` (the last two None when the text
    has no process metrics). With ``version_text`` (the same server's ``/version``) the text must prove to be that
    apiserver's (promtext.apiserver_samples). A text without the request counter or the latency histogram is
    refused."""
    try:
        found = promtext.apiserver_samples(text, version_text, where) if version_text is not None else \
            promtext.samples(text, where)
    except ParseError as exc:
        raise InputError(exc.msg) from None
    terminated, rejected, requests = 0.0, 0.0, {}  # type: float, float, Dict[str, float]
    buckets: Dict[str, Dict[float, float]] = {c: {} for c in CLASSES}
    seen, rss, started, version = set(), None, None, ""  # type: set, Optional[float], Optional[float], str
    try:
        for name, labels, value in found:
            if name in COUNTS and not (math.isfinite(value) and value >= 0):
                raise InputError("%s: /metrics gives %s{%s} the value %s, not a finite number of 0 or more"
                                 % (where, name, ",".join("%s=%r" % kv for kv in sorted(labels.items())), value))
            if name == REQUESTS:
                seen.add(name)
                verb = labels.get("verb", "").upper()
                if labels.get("resource"):  # a resource request (not /readyz, /metrics or discovery)
                    requests[verb] = requests.get(verb, 0.0) + value
            elif name == TERMINATIONS:
                if labels.get("code") == "429":
                    terminated += value
            elif name == APF_REJECTED:
                rejected += value
            elif name == DURATION:
                seen.add(name)
                bound = float(labels["le"])  # every bucket's bound is read: a malformed one refuses the text
                if math.isnan(bound) or bound == -math.inf:
                    raise ValueError("a bucket bound le=%r" % labels["le"])
                kind = VERB_CLASS.get(labels.get("verb", "").upper())
                if kind is None or not labels.get("resource"):
                    continue  # long-running (WATCH, CONNECT), a verb no class holds, or a non-resource path
                buckets[kind][bound] = buckets[kind].get(bound, 0.0) + value
            elif name == RSS:
                rss = value
            elif name == STARTED:
                started = value
            elif name == BUILD_INFO:
                version = labels.get("git_version", "")
    except (ValueError, KeyError) as exc:
        raise InputError("%s: /metrics is not Prometheus text (%s)" % (where, exc)) from None
    missing = sorted({REQUESTS, DURATION} - seen)
    if missing:
        raise InputError("%s: /metrics has no %s; is this a kube-apiserver (and may these credentials get /metrics)?"
                         % (where, " or ".join(missing)))
    return {"throttled": max(terminated, rejected), "requests": requests, "buckets": buckets, "rss_bytes": rss,
            "started": started, "version": version}


def merged_buckets(scrape: Mapping[str, Any]) -> Dict[float, float]:
    """Every class's buckets added up: the latency of every request that is not long-running (the fleet's p99)."""
    out: Dict[float, float] = {}
    for kind in CLASSES:
        for bound, count in scrape["buckets"][kind].items():
            out[bound] = out.get(bound, 0.0) + count
    return out


def went_down(first: Mapping[float, float], second: Mapping[float, float]) -> bool:
    """A counter that went down between two scrapes: the process restarted, and the second counts from zero."""
    return any(second.get(bound, 0.0) < count for bound, count in first.items())


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> Optional[float]:
    """The ``q`` quantile of a cumulative histogram ``{upper bound: count}`` (``+Inf`` included), by linear
    interpolation within the bucket it falls in, as Prometheus computes it; None with no observations. Falling in
    the +Inf bucket gives the largest finite bound."""
    bounds = sorted(buckets)
    if not bounds or not math.isinf(bounds[-1]):
        raise InputError("a latency histogram without its +Inf bucket")
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower  # pragma: no cover - the +Inf bucket holds every observation


def same_process(first: Mapping[str, Any], second: Mapping[str, Any]) -> bool:
    """Two scrapes of one apiserver process: the same start time and no counter that went down."""
    if first.get("started") != second.get("started"):
        return False
    if second["throttled"] < first["throttled"]:
        return False
    if any(second["requests"].get(v, 0.0) < n for v, n in first["requests"].items()):
        return False
    return not any(went_down(first["buckets"][c], second["buckets"][c]) for c in CLASSES)


def window(first: Mapping[str, Any], second: Mapping[str, Any], seconds: float, min_requests: int,
           where: str) -> Dict[str, Any]:
    """The signals over the window between two scrapes of one process (reduce()); refused when they are two
    processes' (the apiserver restarted in the window) or the window is not above 0 seconds."""
    if not seconds > 0:
        raise InputError("%s: a window of %s seconds" % (where, seconds))
    if not same_process(first, second):
        raise GateFailed("%s: the apiserver restarted within the window (process_start_time_seconds %s, then %s, "
                         "or a counter went down)" % (where, first.get("started"), second.get("started")),
                         restarted=True)
    out: Dict[str, Any] = {"seconds": round(seconds, 3), "unmeasured": {}}
    out["throttled_per_minute"] = round((second["throttled"] - first["throttled"]) * 60.0 / seconds, 3)
    relists = sum(second["requests"].get(v, 0.0) - first["requests"].get(v, 0.0) for v in RELIST_VERBS)
    out["relists_per_minute"] = round(relists * 60.0 / seconds, 3)
    out["requests"] = {}
    for kind in CLASSES:
        a, b = first["buckets"][kind], second["buckets"][kind]
        diff = {bound: b.get(bound, 0.0) - a.get(bound, 0.0) for bound in set(a) | set(b)}
        count = diff.get(math.inf, 0.0)
        out["requests"][kind] = round(count, 3)
        key = "p99_seconds.%s" % kind
        if count < min_requests:
            out[key] = None
            out["unmeasured"][key] = "%d %s requests in %.0f s, fewer than min_requests %d" % (
                count, kind, seconds, min_requests)
        else:
            p99 = histogram_quantile(0.99, diff)
            out[key] = None if p99 is None else round(p99, 4)
    rss = [s["rss_bytes"] for s in (first, second) if s.get("rss_bytes") is not None]
    out["rss_bytes"] = max(rss) if rss else None
    if not rss:
        out["unmeasured"]["rss_bytes"] = "%s: /metrics has no %s" % (where, RSS)
    return out


def _limit(signal: str, reference: float, cfg: Mapping[str, Any], seconds: float = 60.0) -> float:
    """``ratio x reference + slack``; a rate's slack is at least one minute's worth of events over the window."""
    per_minute = max(1.0, 60.0 / seconds) if seconds > 0 else 1.0
    if signal == "throttled_per_minute":
        return reference * cfg["throttled_ratio"] + cfg["throttled_slack_per_minute"] * per_minute
    if signal == "relists_per_minute":
        return reference * cfg["relists_ratio"] + cfg["relists_slack_per_minute"] * per_minute
    if signal == "rss_bytes":
        return reference * cfg["rss_ratio"] + cfg["rss_slack_bytes"]
    return reference * cfg["latency_ratio"] + cfg["latency_slack_seconds"]


def _ceiling(signal: str, cfg: Mapping[str, Any], seconds: float = 60.0) -> Optional[float]:
    """The limit of a signal with no reference measured: the latency SLO, or no 429 beyond the slack."""
    if signal == "p99_seconds.list":
        return float(cfg["list_ceiling_seconds"])
    if signal in LATENCIES:
        return float(cfg["latency_ceiling_seconds"])
    if signal == "throttled_per_minute":
        return _limit(signal, 0.0, cfg, seconds)
    return None


def judge(host: str, before: Optional[Mapping[str, Any]], after: Mapping[str, Any],
          peers: Mapping[str, Mapping[str, Any]], cfg: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """One check per signal of the host's window ``after`` against ``before`` (its old apiserver's window) and the
    median of ``peers`` (each peer's window over the same time): ``{name, subject, measured, expected, passed,
    before, peers, limit, detail}``. A value after the move that is unmeasured fails; one above every measured
    reference's limit fails."""
    checks = []
    seconds = float(after.get("seconds") or 60.0)
    for signal in SIGNALS:
        value = after.get(signal)
        ref_before = before.get(signal) if before is not None else None
        peer_values: List[float] = [float(p[signal]) for p in peers.values() if p.get(signal) is not None]
        ref_peers = statistics.median(peer_values) if peer_values else None
        limits: List[Tuple[str, float]] = []
        if ref_before is not None:
            limits.append(("before %s" % _show(signal, ref_before), _limit(signal, ref_before, cfg, seconds)))
        if ref_peers is not None:
            limits.append(("peers %s" % _show(signal, ref_peers), _limit(signal, ref_peers, cfg, seconds)))
        ceiling = _ceiling(signal, cfg, seconds)
        if not limits and ceiling is not None:
            limits.append(("no reference measured: the ceiling", ceiling))
        check: Dict[str, Any] = {"name": "apiserver_%s" % signal.replace(".", "_"), "signal": signal, "subject": host,
                                 "measured": value, "before": ref_before, "peers": ref_peers,
                                 "limit": round(max(pair[1] for pair in limits), 4) if limits else None,
                                 "severity": 3}
        if value is None:
            why = (after.get("unmeasured") or {}).get(signal, "not measured")
            check.update(passed=False, expected="a measurement", detail="%s unmeasured: %s" % (signal, why))
        elif not limits:
            check.update(passed=False, expected="a reference", detail="no reference: neither the reading before "
                         "nor any peer measured %s" % signal)
        else:
            worse = all(value > pair[1] for pair in limits)
            check.update(passed=not worse, expected="at most %s" % " or ".join(
                "%s (%s)" % (_show(signal, limit), why) for why, limit in limits),
                detail="%s %s, before %s, peers %s" % (signal, _show(signal, value), _show(signal, ref_before),
                                                       _show(signal, ref_peers)))
        checks.append(check)
    return checks


def _show(signal: str, value: Optional[float]) -> str:
    if value is None:
        return "unmeasured"
    if signal == "rss_bytes":
        return "%.0f MiB" % (value / 1048576.0)
    if signal in LATENCIES:
        return "%.3f s" % value
    return "%.1f/min" % value


def failure(host: str, checks: Sequence[Mapping[str, Any]]) -> str:
    """The soak's failure message: each failed signal with its value after, before and on the peers."""
    return "%s: the control-plane soak failed: %s" % (host, "; ".join(
        c["detail"] + ("" if c["measured"] is None or c["limit"] is None else
                       " (limit %s)" % _show(c["signal"], c["limit"]))
        for c in checks if not c["passed"]))


def _reading(value: Any, where: str) -> Dict[str, Any]:
    """A reading this module returned (window()), handed back by the playbook: every signal a number or None."""
    if not isinstance(value, Mapping):
        raise InputError("%s: expected the reading of apiserver_soak state=before (a mapping), got %s" % (
            where, type(value).__name__))
    for signal in SIGNALS:
        if signal not in value:
            raise InputError("%s: no %s; give the reading of apiserver_soak state=before as it returned it" % (
                where, signal))
        number = value[signal]
        if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float))
                                   or not math.isfinite(number) or number < 0):
            raise InputError("%s.%s: %r is not a measurement (a number 0 or more, or null when unmeasured)" % (
                where, signal, number))
    return dict(value)


def soak_inputs(host: Any, url: Any, apiservers: Any, before: Any, soak_seconds: Any, state: str) -> Dict[str, Any]:
    """The soak's inputs, refused before any request: the host's own URL and every control-plane host's
    (``apiservers``, the cell's apiserver_urls: the others are its peers), each once - a shared load-balanced
    address would compare an apiserver with itself, or with another one -, the reading before (for a soak; None
    when the host already ran the target when the run reached it: then the peers alone are the reference), a soak
    of at least one second."""
    if not isinstance(host, str) or not host.strip():
        raise InputError("host: give the control-plane host being soaked")
    if not isinstance(apiservers, Mapping):
        raise InputError("apiservers: expected a mapping of control-plane host to its apiserver URL")
    urls = dict(apiservers)
    if urls.get(host, url) != url:
        raise InputError("apiservers.%s is %r but apiserver_url is %r; give the host's own apiserver once" % (
            host, urls[host], url))
    urls[host] = url
    for name, value in sorted(urls.items()):
        field = "apiserver_url" if name == host else "apiservers.%s" % name
        if not isinstance(value, str) or not APISERVER_URL.fullmatch(value):
            raise InputError("%s: %r is not an apiserver URL; give each host's own as https://HOST[:PORT] "
                             "(gpufleet_apiserver_url)" % (field, value))
        if LOOPBACK.match(value):
            raise InputError("%s: %s is a loopback address, which from the controller is the controller itself; give "
                             "the address the controller reaches %s's apiserver at (gpufleet_apiserver_url)" % (
                                 field, value, name))
    twice = sorted({u for u in urls.values() if list(urls.values()).count(u) > 1})
    if twice:
        raise InputError("apiservers: %s given for more than one host; give each control-plane host's own "
                         "apiserver (gpufleet_apiserver_url), not a load-balanced address" % ", ".join(twice))
    out: Dict[str, Any] = {"apiservers": urls, "state": state, "soak_seconds": 0}
    if state == "soak":
        out["before"] = None if before is None else _reading(before, "before")
        if isinstance(soak_seconds, bool) or not isinstance(soak_seconds, int) or not 1 <= soak_seconds <= 86400:
            raise InputError("soak_seconds: %r; give 1 to 86400 seconds (gpufleet_soak_seconds)" % (soak_seconds,))
        out["soak_seconds"] = soak_seconds
    return out


def _windows(start: Mapping[str, Any], now: Mapping[str, Any], names: Sequence[str], host: str, elapsed: float,
             cfg: Mapping[str, Any], what: str) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]]]:
    """The host's window (a restart of its apiserver fails the soak) and each peer's (a peer that restarted is no
    reference, and not this host's doing)."""
    try:
        after = window(start[host], now[host], elapsed, cfg["min_requests"], host)
    except GateFailed as exc:
        raise GateFailed("%s: its new apiserver restarted during the soak (%s): %s" % (host, what, exc.msg),
                         passed=False) from None
    peers: Dict[str, Dict[str, Any]] = {}
    for name in names:
        if name != host:
            try:
                peers[name] = window(start[name], now[name], elapsed, cfg["min_requests"], name)
            except GateFailed:
                continue
    return after, peers


def _references(peers: Mapping[str, Dict[str, Any]], moved: Sequence[str],
                before: Optional[Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """The peers that are a reference: those on another release; when none is and there is no reading before
    either (a rerun that found the host already moved, its peers too), the peers at the target - the release was
    judged on the hosts soaked before them."""
    others = {n: w for n, w in peers.items() if n not in moved}
    return others if others or before is not None else dict(peers)


def run(host: str, plan: Mapping[str, Any], cfg: Mapping[str, Any], scrape: Any, readyz: Any, monotonic: Any,
        wallclock: Any, sleep: Any, probe: Any = None) -> Dict[str, Any]:
    """The before reading or the soak of ``host`` (the module's body, with its I/O handed in: ``scrape(name)`` ->
    reduce() of that apiserver, ``readyz()`` raising on anything but ok, ``probe(name)`` sending the probe requests
    to that apiserver, and the clocks and sleep)."""
    probe = probe or (lambda name: None)

    def tick(until: float) -> None:
        sleep(max(0.0, min(until, monotonic() + cfg["interval_seconds"]) - monotonic()))

    if plan["state"] == "before":
        for attempt in (1, 2):  # the old apiserver restarting within the window: read it once more
            first, began = scrape(host), monotonic()
            end = began + cfg["before_seconds"]
            while monotonic() < end:
                probe(host)
                tick(end)
            second = scrape(host)
            try:
                reading = window(first, second, monotonic() - began, cfg["min_requests"], host)
                break
            except GateFailed:
                if attempt == 2:
                    raise
        return {"node": host, "reading": reading, "msg": "%s before it moves: %s" % (host, summary(reading))}
    first = scrape(host)
    if first.get("started") is None:
        raise InputError("%s: /metrics has no %s, so the new process's warm-up cannot be told; is this a "
                         "kube-apiserver?" % (host, STARTED))
    age = wallclock() - first["started"]  # the host's clock against the controller's: bounded by the warm-up
    sleep(min(cfg["warmup_seconds"], max(0.0, cfg["warmup_seconds"] - age)))
    readyz()
    names = sorted(plan["apiservers"])
    start = {name: scrape(name) for name in names}
    if start[host].get("started") != first["started"]:
        raise GateFailed("%s: its new apiserver restarted during its warm-up (process_start_time_seconds %s, then "
                         "%s)" % (host, first["started"], start[host].get("started")), passed=False)
    # a peer already at the host's release would carry the same regression: no reference, only reported
    moved = sorted(n for n in names if n != host and start[n].get("version") == start[host].get("version"))
    began = monotonic()
    end = began + plan["soak_seconds"]
    previous, previous_at = start, began
    while True:
        for name in names:
            probe(name)
        tick(end)
        readyz()
        now = {name: scrape(name) for name in names}
        at = monotonic()
        after, peers = _windows(start, now, names, host, at - began, cfg, "since the soak began")
        references = _references(peers, moved, plan["before"])
        checks = judge(host, plan["before"], after, references, cfg)
        breached = [c for c in checks if c["measured"] is not None and not c["passed"]]
        if previous is not start:  # the last interval alone: a late regression is not diluted
            last, last_peers = _windows(previous, now, names, host, at - previous_at, cfg, "in its last interval")
            lately = judge(host, plan["before"], last, _references(last_peers, moved, plan["before"]), cfg)
            late = [dict(c, detail=c["detail"].replace(", before", " (the last %.0f s), before" % last["seconds"], 1))
                    for c in lately if c["measured"] is not None and not c["passed"]]
            if late and not breached:
                late_by = {c["signal"]: c for c in late}
                breached, checks = late, [late_by.get(c["signal"], c) for c in checks]
        if breached or at >= end:
            break
        previous, previous_at = now, at
    failed = [c for c in checks if not c["passed"]]
    result = {"node": host, "passed": not failed, "checks": checks, "reading": after, "peers": peers,
              "before": plan["before"], "peers_at_target": moved}
    if failed:
        raise GateFailed(failure(host, failed), **result)
    result["msg"] = "%s soaked %.0f s: %s" % (host, after["seconds"], summary(after))
    return result


def summary(reading: Mapping[str, Any]) -> str:
    return ", ".join("%s %s" % (s, _show(s, reading.get(s))) for s in SIGNALS)
