# Copyright: gpufleet contributors
# Apache License 2.0
"""The fleet's halt readings of one cell, from the cell's own API: pure functions over what the
``fleet_readings`` module fetched (each apiserver's /metrics text, twice, a window apart; the Node and JobSet
objects). fleet_run.halts judges them against the readings taken before the cell's upgrade.

- ``apiserver_429_per_minute``: requests the apiservers refused for want of capacity (their filters ended them
  429: API Priority and Fairness or max-in-flight), per minute over the window, summed over every apiserver: the
  soak's ``throttled`` reduction (apiserver_signals.reduce, ``apiserver_request_terminations_total{code="429"}``,
  or APF's own ``apiserver_flowcontrol_rejected_requests_total`` where higher).
  A watch cache answering 429 while it (re)initialises, or the eviction API's 429, is not throttling.
- ``apiserver_p99_seconds``: the 99th percentile of request latency over the window, all apiservers' histograms
  merged (``apiserver_request_duration_seconds``), long-running verbs (WATCH, CONNECT) left out as the apiserver's
  own SLO metrics do; the quantile is interpolated within its bucket the way Prometheus' histogram_quantile does.
- ``not_ready_nodes``: Nodes whose Ready condition is not True (Unknown and missing count).
- ``gpu_allocatable_fraction``: allocatable ``nvidia.com/gpu`` on Ready nodes, judged node by node against the GPUs
  per node of the node's pool (``pool_expectations``: its baseline's ``node.allocatable_gpus``), over the GPUs the
  fleet expects of the cell (its ``gpus``), or over what a pool should have (its nodes times its GPUs per node) when
  a pool's is lower: the lowest fraction, each pool's in ``gpu_allocatable_by_pool``. Each node counts at most its
  pool's GPUs per node, so one node reporting 56 (a MIG layout change) cannot hide three reporting 0 in a sum; every
  pool node that does not count exactly that - above it, below it, NotReady, or with no Node - is named in
  ``gpu_allocatable_off_baseline`` (``{node: {pool, allocatable, expected, counted, state}}``, state ``above``,
  ``below``, ``not ready`` or ``no node``). A node above its baseline leaves the fraction whole and is no less wrong
  than one below: fleet_run.halts halts on any node ``above``, whatever the floor (unless the GPU halt is switched
  off with a reason). Nodes outside every pool count nothing (``gpu_nodes_outside_pools`` lists those with GPUs).
- ``jobset_restarts``: the sum of every JobSet's ``status.restarts`` (the JobSet controller counts each restart of
  a gang under its failure policy); each JobSet's count by uid is kept too (``jobset_restart_counts``), and
  fleet_run.halts judges the rise JobSet by JobSet (one deleted, or made again under its name, hides nothing). A
  count that is not a whole number 0 or more (a string, NaN, an infinity, a list) is an InputError naming the
  JobSet.

Two more, for a cell that names their source (the fleet's ``cells[].nccl_hosts`` and ``cells[].inference``):

- ``nccl_busbw_gbps``: the slowest probe host's median bus bandwidth (GB/s) at the largest message size of its
  pool baseline, from ``all_reduce_perf`` run on each of the cell's NCCL probe hosts (the ``nccl_allreduce``
  module, without its gate). A probe with a wrong element, an out-of-bounds value, an NCCL error or no figure at
  that size gives no reading: not measured.
- ``inference_p99_ms``: the 99th percentile over the window of the inference service's request latency histogram
  (Prometheus text from its metrics endpoint; each series of the named histogram differenced on its own - one that
  restarted counts from zero - then merged), in milliseconds.

A reading that could not be taken is None, and ``unmeasured`` says why (fleet_run.halts puts that in its message).

Counters are per apiserver process: one that restarted inside the window (its counter went down) counts from zero,
as Prometheus' rate() does. A window in which an apiserver served no request has no latency: not measured.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils import apiserver_signals, promtext
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version

REQUESTS = "apiserver_request_total"
DURATION = "apiserver_request_duration_seconds_bucket"
GPU = "nvidia.com/gpu"
API_READINGS = ("apiserver_429_per_minute", "apiserver_p99_seconds", "not_ready_nodes", "gpu_allocatable_fraction",
                "jobset_restarts")
# the readings that need a source the cell names: reading -> the fleet cell's field that gives it
SOURCED_READINGS = {"nccl_busbw_gbps": "nccl_hosts", "inference_p99_ms": "inference"}
APISERVER_URL = apiserver_signals.APISERVER_URL
# where a pool node stands against its pool's GPUs per node (gpu_allocatable_off_baseline)
NODE_STATES = ("above", "below", "not ready", "no node")


def whole(value: Any) -> bool:
    """A whole number 0 or more, as JSON gives one (a boolean is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_inputs(cell: str, urls: Sequence[str], expected_gpus: int, window: float, timeout: float) -> None:
    """The readings' inputs, refused before any request: every apiserver once (behind one load-balanced address
    two scrapes may reach two apiservers, and their difference means nothing), a window and timeout above 0, the
    expected GPUs 0 or more."""
    if not urls:
        raise InputError("apiserver_urls: empty; give every apiserver of cell %s, each its own URL" % cell)
    for url in urls:  # fullmatch: "$" lets a trailing newline through; [0-9] and the letters are ASCII only
        if not isinstance(url, str) or not APISERVER_URL.fullmatch(url):
            raise InputError("apiserver_urls: %r is not an apiserver URL; give each apiserver of cell %s as "
                             "https://HOST[:PORT] (gpufleet_apiserver_url)" % (url, cell))
    twice = sorted({u for u in urls if list(urls).count(u) > 1})
    if twice:
        raise InputError("apiserver_urls: %s listed more than once; give each apiserver of cell %s its own URL "
                         "(gpufleet_apiserver_url per control-plane host), not a shared load-balanced one" % (
                             ", ".join(twice), cell))
    for name, value in (("window_seconds", window), ("request_timeout", timeout)):
        if not value > 0 or not math.isfinite(value):
            raise InputError("%s: %s; give seconds above 0" % (name, value))
    if not whole(expected_gpus):
        raise InputError("expected_gpus: %r; give the GPUs cell %s should have (0 or more)" % (expected_gpus, cell))


def scrape(text: str, where: str) -> Dict[str, Any]:
    """One apiserver's /metrics text reduced to what the readings need: ``{"throttled": count of requests refused 429,
    "buckets": {le: cumulative count}}`` - the reduction the control-plane soak uses (apiserver_signals.reduce,
    prometheus_client's parser), every verb class's latency merged, long-running requests left out. A text without
    the two metrics is refused."""
    reduced = apiserver_signals.reduce(text, where)
    return {"throttled": reduced["throttled"], "buckets": apiserver_signals.merged_buckets(reduced)}


def _series(labels: Mapping[str, str]) -> str:
    """A histogram series' name: its labels other than ``le``, sorted (one per process, pod or route)."""
    return ",".join("%s=%s" % (k, labels[k]) for k in sorted(labels) if k != "le")


def scrape_histogram(text: str, where: str, name: str) -> Dict[str, Dict[float, float]]:
    """Each series' cumulative buckets ``{series: {le: count}}`` of histogram ``name`` (its ``NAME_bucket``
    samples) in a /metrics text. A text without them, or a series without its +Inf bucket, is refused."""
    series: Dict[str, Dict[float, float]] = {}
    try:
        for sample, labels, value in promtext.samples(text, where):
            if sample == name + "_bucket":
                buckets = series.setdefault(_series(labels), {})
                bound = float(labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + value
    except ParseError as exc:
        raise InputError(exc.msg) from None
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise InputError("%s: the metrics are not Prometheus text (%s)" % (where, exc)) from None
    if not series:
        raise InputError("%s: the metrics have no histogram %s (no %s_bucket samples); give the inference service's "
                         "request latency histogram as cells[].inference.histogram" % (where, name, name))
    for key, buckets in sorted(series.items()):
        if math.inf not in buckets:
            raise InputError("%s: histogram %s{%s} has no le=\"+Inf\" bucket (every observation's count); the "
                             "endpoint does not serve a whole Prometheus histogram" % (where, name, key))
    return series


_went_down = apiserver_signals.went_down
histogram_quantile = apiserver_signals.histogram_quantile


def inference_reading(first: Mapping[str, Mapping[float, float]], second: Mapping[str, Mapping[float, float]],
                      where: str) -> Dict[str, Any]:
    """``inference_p99_ms`` over the window between two scrapes of the service's histogram (``scrape_histogram``),
    every series merged; None (with why) when the service answered no request in the window. Each series restarts
    on its own (a replica that restarted counts from zero; one that is new counts whole; one that went away served
    nothing in the window)."""
    merged: Dict[float, float] = {}
    restarted = []
    for key, after in second.items():
        before = first.get(key, {})
        if _went_down(before, after):
            restarted.append(key)
            before = {}
        for bound in set(before) | set(after):
            merged[bound] = merged.get(bound, 0.0) + after.get(bound, 0.0) - before.get(bound, 0.0)
    p99 = histogram_quantile(0.99, merged)
    out: Dict[str, Any] = {"inference_p99_ms": None if p99 is None else round(p99 * 1000.0, 2),
                           "inference_requests": round(merged.get(math.inf, 0.0), 3),
                           "inference_restarted": sorted(restarted), "unmeasured": {}}
    if p99 is None:
        out["unmeasured"]["inference_p99_ms"] = "%s served no request in the window" % where
    return out


def nccl_reading(hosts: Sequence[str], results: Mapping[str, Any]) -> Dict[str, Any]:
    """``nccl_busbw_gbps``: the slowest probe host's median bus bandwidth at the largest size its baseline names,
    from each host's ``nccl_allreduce`` result (``{passed, checks, median_busbw}``, run without the gate). Every
    probe host must have a clean result: a host with no result, a run with an error, a wrong element or an
    out-of-bounds value, or no figure at that size makes the reading None, with why."""
    if not hosts:
        raise InputError("nccl_hosts: empty; name the cell's NCCL probe hosts or leave the NCCL reading out")
    per: Dict[str, Optional[float]] = {}
    why: List[str] = []
    for host in hosts:
        result = results.get(host)
        if isinstance(result, Mapping) and result.get("unreachable"):
            why.append("%s: unreachable: %s" % (host, str(result.get("msg") or "no message")[:300]))
            per[host] = None
            continue
        if isinstance(result, Mapping) and result.get("failed"):
            why.append("%s: its all_reduce_perf run failed: %s" % (host, str(result.get("msg") or "no message")[:300]))
            per[host] = None
            continue
        if not isinstance(result, Mapping) or not isinstance(result.get("median_busbw"), Mapping):
            why.append("%s: no all_reduce_perf result (not a host of the cell's inventory - a group's name is none "
                       "-, unreachable, or its run failed: see the reading's log)" % host)
            per[host] = None
            continue
        bad = [c for c in result.get("checks") or [] if not c.get("passed") and c.get("name") != "nccl_busbw"]
        if bad:
            why.append("%s: %s" % (host, "; ".join("%s %s" % (c.get("name"), c.get("measured")) for c in bad)))
        sizes = {}
        for size, value in result["median_busbw"].items():
            try:
                sizes[int(size)] = value
            except (TypeError, ValueError):
                raise InputError("%s: NCCL result size %r is not a byte count" % (host, size)) from None
        value = sizes[max(sizes)] if sizes else None
        if value is None:
            why.append("%s: no bus bandwidth at the baseline's largest size (or the baseline opts out of NCCL: then "
                       "leave nccl_hosts out for this cell)" % host)
        per[host] = None if value is None else float(value)
    measured = [v for v in per.values() if v is not None]
    value = round(min(measured), 2) if measured and not why else None
    out: Dict[str, Any] = {"nccl_busbw_gbps": value, "nccl_busbw_by_host": per, "unmeasured": {}}
    if why:
        out["unmeasured"]["nccl_busbw_gbps"] = "; ".join(why)
    return out


def apiserver_readings(first: Mapping[str, Mapping[str, Any]], second: Mapping[str, Mapping[str, Any]],
                       seconds: float) -> Dict[str, Any]:
    """429s per minute and the p99 latency over the window between two scrapes of each apiserver
    (``{apiserver: scrape()}``). Every apiserver must be in both scrapes."""
    if seconds <= 0:
        raise InputError("the metrics window must be above 0 seconds, got %s" % seconds)
    if set(first) != set(second) or not first:
        raise InputError("apiserver metrics: scraped %s first and %s second; every apiserver must answer both" % (
            ", ".join(sorted(first)) or "none", ", ".join(sorted(second)) or "none"))
    throttled = 0.0
    merged: Dict[float, float] = {}
    per: Dict[str, Any] = {}
    for name in sorted(first):
        a, b = first[name], second[name]
        # one decision per apiserver: it restarted in the window when any of its counters went down; then every
        # counter of the second scrape counts from zero (a restart with more 429s since is not undercounted)
        restarted = b["throttled"] < a["throttled"] or _went_down(a["buckets"], b["buckets"])
        base: Mapping[str, Any] = {"throttled": 0.0, "buckets": {}} if restarted else a
        t = b["throttled"] - base["throttled"]
        throttled += t
        for bound in set(a["buckets"]) | set(b["buckets"]):
            merged[bound] = merged.get(bound, 0.0) + b["buckets"].get(bound, 0.0) - base["buckets"].get(bound, 0.0)
        per[name] = {"throttled": t, "requests": b["buckets"].get(math.inf, 0.0) - base["buckets"].get(math.inf, 0.0),
                     "restarted": restarted}
    p99 = histogram_quantile(0.99, merged) if merged else None
    return {"apiserver_429_per_minute": round(throttled * 60.0 / seconds, 3),
            "apiserver_p99_seconds": None if p99 is None else round(p99, 4), "apiservers": per}


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError("%s is not an object (%s); the API's answer is not a Node list" % (
            where, type(value).__name__))
    return value


def _ready(conditions: Any, where: str) -> bool:
    if conditions is None:
        return False
    if not isinstance(conditions, list) or not all(isinstance(c, Mapping) for c in conditions):
        raise InputError("%s: status.conditions is %r, not a list of conditions; the API's answer is not a Node list"
                         % (where, conditions))
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _quantity(value: Any, where: str) -> int:
    """An extended resource's quantity: a whole number, as the API gives it (a string of ASCII digits; int() would
    also take full-width digits, a sign, spaces and underscores)."""
    if whole(value):
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value):
        return int(value)
    raise InputError("%s: allocatable %s is %r, not a whole number of GPUs" % (where, GPU, value))


def pool_expectations(pools: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """``{pool: {"nodes": [...], "gpus": expected, "per_node": GPUs per node}}`` from the cell's pools (the ``cell``
    module's ``pools``: each with its ``nodes``, its ``gpus`` - its nodes times its baseline's GPUs per node - and its
    ``baseline``). The GPUs per node are the pool's ``gpus_per_node`` when given, else its baseline's
    ``node.allocatable_gpus`` (what one Node offers: ``gpu.count``, or more on a MIG pool), else ``gpu.count``:
    carried, not divided out of ``gpus``, and ``gpus`` must be the nodes times it. Refused when any is missing or
    they disagree, when a node is listed twice or in two pools: a pool whose expectation is unknown cannot be
    judged."""
    out: Dict[str, Dict[str, Any]] = {}
    owner: Dict[str, str] = {}
    if not isinstance(pools, Mapping):
        raise InputError("pools: expected the cell module's pools (a mapping of pool to its nodes, gpus and baseline)")
    for pool, value in sorted(pools.items()):
        nodes = value.get("nodes") if isinstance(value, Mapping) else None
        gpus = value.get("gpus") if isinstance(value, Mapping) else None
        if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes) or not whole(gpus):
            raise InputError("pools.%s: needs its nodes (a list of names) and gpus (the GPUs it should have, 0 or "
                             "more); give the cell module's pools" % pool)
        per_node = _per_node(value)
        if per_node is None:
            raise InputError("pools.%s: no GPUs per node (gpus_per_node, or its baseline's node.allocatable_gpus or "
                             "gpu.count); give the cell module's pools, each with its baseline" % pool)
        if not whole(per_node):
            raise InputError("pools.%s: gpus_per_node %r is not a whole number 0 or more" % (pool, per_node))
        each = int(per_node)
        if gpus != each * len(nodes):
            raise InputError("pools.%s: gpus %s is not its %d nodes times %d GPUs per node (%d); give the cell "
                             "module's pools as it made them" % (pool, gpus, len(nodes), each, each * len(nodes)))
        for node in nodes:
            if node in owner:
                raise InputError("pools.%s: node %s %s" % (pool, node, "listed twice" if owner[node] == pool else
                                                           "is in pool %s too" % owner[node]))
            owner[node] = pool
        out[pool] = {"nodes": list(nodes), "gpus": gpus, "per_node": each}
    return out


def _per_node(pool: Mapping[str, Any]) -> Any:
    """A pool's GPUs per node: its own ``gpus_per_node``, else its baseline's (cell.py's rule); None: not given."""
    if "gpus_per_node" in pool:
        return pool["gpus_per_node"]
    baseline = pool.get("baseline")
    if not isinstance(baseline, Mapping):
        return None
    node = baseline.get("node")
    if isinstance(node, Mapping) and node.get("allocatable_gpus") is not None:
        return node["allocatable_gpus"]
    gpu = baseline.get("gpu")
    return gpu.get("count") if isinstance(gpu, Mapping) else None


def _nodes(nodes: Sequence[Any]) -> Dict[str, Tuple[bool, Optional[int]]]:
    """Each Node by name: (Ready, its allocatable GPUs or None without the resource). A list that is not the API's
    Node list - an entry that is not an object, without a name, a name twice, a status of the wrong shape - is
    refused."""
    if not isinstance(nodes, (list, tuple)):
        raise InputError("the cell's Node list is %s, not a list" % type(nodes).__name__)
    out: Dict[str, Tuple[bool, Optional[int]]] = {}
    for i, node in enumerate(nodes):
        if not isinstance(node, Mapping):
            raise InputError("Node #%d: not an object (%r); the API's answer is not a Node list" % (i, node))
        name = _mapping(node.get("metadata"), "Node #%d: metadata" % i).get("name")
        if not isinstance(name, str) or not name:
            raise InputError("Node #%d: no metadata.name; the API's answer is not a Node list" % i)
        if name in out:
            raise InputError("node %s is listed twice; the API's answer is not a Node list" % name)
        where = "node %s" % name
        status = _mapping(node.get("status"), where + ": status")
        alloc = _mapping(status.get("allocatable"), where + ": status.allocatable").get(GPU)
        out[name] = (_ready(status.get("conditions"), where), None if alloc is None else _quantity(alloc, where))
    return out


def node_readings(nodes: Sequence[Mapping[str, Any]], expected_gpus: int,
                  pools: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Dict[str, Any]:
    """NotReady nodes and the fraction of the expected GPUs allocatable on Ready nodes, each node judged against its
    pool's GPUs per node (``pool_expectations``) and counting at most that: the lowest of the cell's fraction (over
    the fleet's ``gpus`` for it) and each pool's, so neither a pool that lost its GPUs nor a node that lost them
    hides behind another's spare ones. Every pool node off its expected count is named
    (``gpu_allocatable_off_baseline``). A cell that should have GPUs needs its pools."""
    if not whole(expected_gpus):
        raise InputError("expected_gpus: %r; give the GPUs the cell should have (0 or more)" % (expected_gpus,))
    if expected_gpus and not pools:
        raise InputError("pools: none given for a cell that should have %d GPUs; each node is judged against its "
                         "pool's GPUs per node: give the cell module's pools" % expected_gpus)
    found = _nodes(nodes)
    if not found:
        raise InputError("the cell's API lists no Node: nothing to read (wrong cluster?)")
    not_ready = sorted(n for n, (ready, _gpus) in found.items() if not ready)
    by_pool: Dict[str, Dict[str, Any]] = {}
    off: Dict[str, Dict[str, Any]] = {}
    absent: List[str] = []
    counted_all = 0
    for pool, want in sorted((pools or {}).items()):
        per, have = want["per_node"], 0
        for name in want["nodes"]:
            ready, gpus = found.get(name, (False, None))
            counted = min(gpus or 0, per) if ready else 0
            have += counted
            state = ("no node" if name not in found else "not ready" if not ready else
                     "above" if (gpus or 0) > per else "below" if (gpus or 0) < per else None)
            if state:
                off[name] = {"pool": pool, "allocatable": gpus, "expected": per, "counted": counted, "state": state}
        counted_all += have
        share = 1.0 if want["gpus"] == 0 else have / float(want["gpus"])
        by_pool[pool] = {"allocatable": have, "expected": want["gpus"], "fraction": round(share, 4),
                         "per_node": per, "nodes": len(want["nodes"])}
        gone = [n for n in want["nodes"] if n not in found]
        if gone:
            absent.append("pool %s: %s" % (pool, ", ".join(gone)))
    fraction = 1.0 if expected_gpus == 0 else min(1.0, counted_all / float(expected_gpus))
    fraction = min([fraction] + [p["allocatable"] / float(p["expected"]) for p in by_pool.values() if p["expected"]])
    pooled = {n for want in (pools or {}).values() for n in want["nodes"]}
    outside = {n: gpus for n, (ready, gpus) in sorted(found.items()) if n not in pooled and gpus}
    unmeasured: Dict[str, str] = {}
    out: Dict[str, Any] = {"not_ready_nodes": len(not_ready), "not_ready": not_ready, "gpus_allocatable": counted_all,
                           "gpus_expected": expected_gpus, "gpu_allocatable_fraction": round(fraction, 4),
                           "gpu_allocatable_by_pool": by_pool, "gpu_allocatable_off_baseline": off,
                           "gpu_nodes_outside_pools": outside, "unmeasured": unmeasured}
    if absent:  # a Node the API does not list: deleted, never registered, or named otherwise than its inventory host
        out["gpu_allocatable_fraction"] = None
        unmeasured["gpu_allocatable_fraction"] = (
            "the API lists no Node for %s (each inventory host must be its Node's name; a Node that is gone has "
            "lost its GPUs)" % "; ".join(absent))
    return out


def _restarts(value: Any, name: str) -> int:
    """A JobSet's ``status.restarts``: a whole number 0 or more (none yet: 0). The JobSet controller writes an
    integer; a string, NaN, an infinity (1e400 in JSON), a list or a boolean is refused naming the JobSet."""
    if value is None:
        return 0
    if whole(value):
        return int(value)
    raise InputError("JobSet %s: status.restarts is %r, not a whole number 0 or more (the JobSet controller counts "
                     "restarts as an integer); is this a JobSet of the jobset.x-k8s.io API?" % (name, value))


def jobset_restarts(jobsets: Sequence[Mapping[str, Any]]) -> Tuple[int, Dict[str, int], Dict[str, Dict[str, Any]]]:
    """The sum of the JobSets' ``status.restarts``, the non-zero ones by namespace/name, and every JobSet's count
    by its uid (``{uid: {"name", "restarts"}}``): a JobSet deleted and made again under the same name is another
    JobSet, and fleet_run.halts counts each one's rise on its own."""
    per: Dict[str, int] = {}
    by_uid: Dict[str, Dict[str, Any]] = {}
    for i, js in enumerate(jobsets):
        if not isinstance(js, Mapping):
            raise InputError("JobSet #%d: not an object (%r); the API's answer is not a JobSet list" % (i, js))
        meta = _mapping(js.get("metadata"), "JobSet #%d: metadata" % i)
        name = "%s/%s" % (meta.get("namespace"), meta.get("name"))
        count = _restarts(_mapping(js.get("status"), "JobSet %s: status" % name).get("restarts"), name)
        if count:
            per[name] = per.get(name, 0) + count
        uid = str(meta.get("uid") or name)
        if uid in by_uid:
            raise InputError("JobSet %s: uid %s is listed twice; the API's answer is not a JobSet list" % (name, uid))
        by_uid[uid] = {"name": name, "restarts": count}
    return sum(per.values()), per, by_uid


def readings(first: Mapping[str, Mapping[str, Any]], second: Mapping[str, Mapping[str, Any]], seconds: float,
             nodes: Sequence[Mapping[str, Any]], expected_gpus: int,
             jobsets: Optional[Sequence[Mapping[str, Any]]],
             pools: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Dict[str, Any]:
    """Every API reading of a cell, with the details behind them. ``jobsets`` None: the JobSet API is not
    served (no JobSet can have restarted: 0). ``pools``: pool_expectations(), for the per-pool GPU fraction."""
    out = apiserver_readings(first, second, seconds)
    out.update(node_readings(nodes, expected_gpus, pools))
    total, per, by_uid = jobset_restarts(jobsets or [])
    out["jobset_restarts"] = total
    out["jobsets_restarted"] = per
    out["jobset_restart_counts"] = by_uid
    out["jobset_api"] = jobsets is not None
    return out


def add_sourced(out: Dict[str, Any], *parts: Mapping[str, Any]) -> Dict[str, Any]:
    """``out`` (readings()) with the sourced readings' parts (nccl_reading, inference_reading) merged in, their
    ``unmeasured`` reasons gathered in one mapping."""
    for part in parts:
        unmeasured = dict(part.get("unmeasured") or {})
        out.update((k, v) for k, v in part.items() if k != "unmeasured")
        out.setdefault("unmeasured", {}).update(unmeasured)
    return out


NOT_IN_INVENTORY = "not-in-inventory"


def versions(apiservers: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]],
             node_pools: Mapping[str, str]) -> Dict[str, Any]:
    """What the fleet report shows of a cell (module_utils/fleet_report.py): each apiserver's version, the control
    plane's - the oldest of them, since a cell mid-rollout is only as new as its oldest apiserver - and per pool its
    kubelets' versions. ``node_pools``: the inventory's pool of each node (the cell's ``host_pool``); a Node the
    inventory does not list is shown under ``not-in-inventory`` rather than left out, an inventory host with no
    Node is listed in ``no_node``, and a kubelet version that is missing stays empty: the report alerts on each."""
    if not apiservers:
        raise InputError("no apiserver was read: give every apiserver of the cell")
    parsed = []
    for url, version in sorted(apiservers.items()):
        try:
            parsed.append((parse_version(version, "apiserver %s" % url).sort_key(), str(version)))
        except GpufleetError as exc:
            raise InputError("the apiserver %s answered version %r, which does not parse: %s" % (
                url, version, exc.msg)) from None
    kubelets: Dict[str, List[str]] = {}
    seen = set()
    for node in nodes:
        name = (node.get("metadata") or {}).get("name", "?")
        seen.add(name)
        info = (node.get("status") or {}).get("nodeInfo") or {}
        kubelets.setdefault(node_pools.get(name, NOT_IN_INVENTORY), []).append(str(info.get("kubeletVersion") or ""))
    return {"control_plane": min(parsed)[1], "apiservers": dict(sorted(apiservers.items())),
            "kubelets": {pool: sorted(found) for pool, found in sorted(kubelets.items())},
            "no_node": sorted(h for h in node_pools if h not in seen)}
