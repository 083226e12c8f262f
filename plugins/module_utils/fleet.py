# Copyright: gpufleet contributors
# Apache License 2.0
"""The fleet: every cell with its ring, kind, region, DR partner and GPU capacity, and the fleet policy (target per
ring or fleet-wide, soak per ring, caps on cells and GPUs in flight, training cells one at a time, patch releases
faster than minors). Validated once here - bad input is refused naming the cell and the field, before anything
runs - and planned deterministically: rings in order, each ring's cells in batches under the caps, and per cell its
control-plane path (one minor at a time) and the pools that need a node upgrade before a control-plane hop, from
the same skew rules and pool planner as one cell's plan (versions.py).

Names are whole ASCII DNS labels (``re.fullmatch`` with ASCII classes: ``$`` would let a trailing newline through,
and ``\\d``, ``str.isdigit()`` and ``int()`` take other scripts' digits), numbers given as strings ASCII digits, and
versions ASCII.

A halt threshold that switches its halt off (``OFF_AT``: a floor at or under 0, a drop of 100 % or more, a p99 floor
at the apiserver histogram's last bucket, a rise past any real one, ``max_not_ready_nodes`` at least a cell's nodes)
is refused unless ``policy.halt.disabled`` gives the reason for it; a reason for a halt that is on is refused too.
The plan lists each switched-off halt with its reason (``disabled_halts``), for the run's output and the report.

Pure functions, no I/O: the ``fleet_plan`` module hands the fleet in.
"""
from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any, Dict, List, Mapping, Optional, Sequence
from urllib.parse import urlsplit

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, PolicyError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet_readings import API_READINGS, SOURCED_READINGS
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import DNS_LABEL
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import (
    APISERVER, KUBELET, KubeVersion, Observed, PoolPolicy, parse_release, parse_version, plan_upgrade,
    skew_violations)

VAR = "gpufleet_fleet"
# The order cells move in within a ring: the least valuable first, training cells (multi-week runs) last.
KINDS = ("canary", "dev", "staging", "inference", "training")
# a DNS label, whole (fullmatch) and ASCII ([a-z0-9] without IGNORECASE): cells and rings become AWX names, paths
NAME = DNS_LABEL
NUMBER = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?")  # a number as a string: ASCII, no "_"

_POOL = {
    "name": {"type": "str", "required": True},
    "kubelet": {"type": "str", "required": True},
    "nodes": {"type": "int", "default": 0},
    "skip_level": {"type": "bool", "default": True},
}
_CELL = {
    "name": {"type": "str", "required": True},
    "ring": {"type": "str", "required": True},
    "kind": {"type": "str", "required": True, "choices": list(KINDS)},
    "region": {"type": "str", "required": True},
    "dr_partner": {"type": "str"},
    "gpus": {"type": "int", "required": True},
    "inventory": {"type": "str", "required": True},
    "control_plane": {"type": "str", "required": True},
    "pools": {"type": "list", "elements": "dict", "default": []},
    # the halt readings judged for this cell (fleet_readings.API_READINGS and those whose source the cell names;
    # default all of them)
    "halt_readings": {"type": "list", "elements": "str"},
    # the sources of two more readings: hosts of the cell's inventory that all_reduce_perf runs on for
    # nccl_busbw_gbps, and the inference service's metrics endpoint and latency histogram for inference_p99_ms
    "nccl_hosts": {"type": "list", "elements": "str"},
    "inference": {"type": "dict"},
}
_INFERENCE = {
    "metrics_url": {"type": "str", "required": True},
    "histogram": {"type": "str", "required": True},
}
_RING = {
    "name": {"type": "str", "required": True},
    "soak_seconds": {"type": "int", "default": 3600},
    "target": {"type": "str"},
}
_POLICY = {
    "target": {"type": "str"},
    "rings": {"type": "list", "elements": "dict", "required": True},
    "max_cells_in_flight": {"type": "int", "default": 2},
    "patch_max_cells_in_flight": {"type": "int"},
    "max_gpu_fraction_in_flight": {"type": "float", "default": 0.25},
    "training_one_at_a_time": {"type": "bool", "default": True},
    "hop_versions": {"type": "dict", "default": {}},  # intermediate hops' releases, e.g. {"1.36": "v1.36.3"}
    "halt": {"type": "dict", "default": {}},  # the halt conditions' thresholds (HALT_SPEC)
    # the fleet run (playbooks/fleet.yml): how often a soak reads the halt conditions, the window of each reading's
    # apiserver rates, and how long one cell's upgrade may take before it counts as failed
    "halt_check_seconds": {"type": "int", "default": 300},
    "metrics_window_seconds": {"type": "int", "default": 30},
    "cell_timeout_seconds": {"type": "int", "default": 21600},
}
SPEC: Dict[str, Any] = {
    "name": {"type": "str", "required": True},
    "policy": {"type": "dict", "required": True},
    "cells": {"type": "list", "elements": "dict", "required": True},
}
MAX_NUMBER = 10 ** 9  # more GPUs, nodes or seconds than any fleet has: a typo


# The halt conditions' thresholds (policy.halt; fleet_run.py judges them); each default lives here.
HALT_SPEC: Dict[str, Any] = {
    "max_429_per_minute_increase": {"type": "float", "default": 5.0},      # apiserver 429s, per minute, over before
    "max_latency_regression": {"type": "float", "default": 0.5},          # p99 request latency, fraction over before
    "apiserver_p99_floor_seconds": {"type": "float", "default": 0.25},    # a p99 at or under this never halts
    "max_not_ready_nodes": {"type": "int", "default": 0},
    "min_gpu_allocatable_fraction": {"type": "float", "default": 1.0},    # of the GPUs expected on each pool
    "max_nccl_regression": {"type": "float", "default": 0.1},             # bus bandwidth, fraction under before
    "max_jobset_restarts_increase": {"type": "int", "default": 0},
    "max_inference_p99_regression": {"type": "float", "default": 0.2},    # fraction over before
    # threshold -> why it is switched off: the reason each threshold that switches its halt off (OFF_AT) needs
    "disabled": {"type": "dict", "default": {}},
}
THRESHOLDS = tuple(k for k in HALT_SPEC if k != "disabled")
# Where a threshold switches its halt off: (at or under / at or over, the value, why). A floor, a drop and the p99
# floor can never trigger past theirs; a rise past the ones here is past any real one (101 times a p99, 100,000 more
# 429s a minute, 1,000 more restarts in a soak). max_not_ready_nodes is judged against each cell's nodes.
OFF_AT: Dict[str, Any] = {
    "min_gpu_allocatable_fraction": ("<=", 0, "a fraction is never below 0"),
    "max_nccl_regression": (">=", 1, "a bandwidth never falls by 100 % or more"),
    "apiserver_p99_floor_seconds": (">=", 60, "the apiserver's latency histogram ends at 60 s: no p99 is read above "
                                              "it"),
    "max_latency_regression": (">=", 100, "a p99 100 times its reading before is past any real regression"),
    "max_inference_p99_regression": (">=", 100, "a p99 100 times its reading before is past any real regression"),
    "max_429_per_minute_increase": (">=", 100000, "100000 more 429s a minute is past any real rise"),
    "max_jobset_restarts_increase": (">=", 1000, "1000 more restarts is past any real rise"),
}


def _shown(value: Any) -> str:
    return "%d" % value if float(value).is_integer() else "%s" % value


def parse_halt_policy(value: Any, cell_nodes: Optional[Mapping[str, int]] = None) -> Dict[str, Any]:
    """policy.halt with every default filled in; a negative threshold, a GPU floor above 1, and a threshold that
    switches its halt off (OFF_AT; ``max_not_ready_nodes`` at least the nodes of a cell in ``cell_nodes``, the
    cells that read it with their declared pool nodes) without its reason in ``disabled`` are refused, as is a
    reason for a halt that is on."""
    where = VAR + ".policy.halt"
    if isinstance(value, Mapping) and value.get("disabled") is not None and not isinstance(value["disabled"], Mapping):
        raise InputError("%s.disabled: expected a mapping of threshold to reason, such as {min_gpu_allocatable_"
                         "fraction: \"CHG-1234: pool h100 is being repartitioned\"}" % where)
    out = _validate(HALT_SPEC, value or {}, where)
    for key in THRESHOLDS:
        if out[key] < 0:
            raise InputError("%s.%s: %s; give 0 or more" % (where, key, out[key]))
    if out["min_gpu_allocatable_fraction"] > 1:
        raise InputError("%s.min_gpu_allocatable_fraction: %s is above 1: every reading would halt (a fraction is "
                         "at most 1); give a fraction from 0 to 1" % (where, out["min_gpu_allocatable_fraction"]))
    reasons = out["disabled"]
    for key, reason in reasons.items():
        if key not in THRESHOLDS:
            raise InputError("%s.disabled: %s is not a threshold; give one of %s" % (where, key, ", ".join(THRESHOLDS)))
        if not isinstance(reason, str) or not reason.strip() or len(reason) > 300 or \
                any(ord(c) < 32 or ord(c) == 127 for c in reason):
            raise InputError("%s.disabled.%s: give the reason as a line of text (up to 300 characters), such as "
                             "the change record that switches the halt off" % (where, key))
    for key in THRESHOLDS:
        why = _switches_off(key, out[key], cell_nodes)
        if why and key not in reasons:
            raise InputError("%s.%s: %s switches its halt off (%s); give a threshold that can halt, or say why in "
                             "policy.halt.disabled.%s: \"REASON\"" % (where, key, _shown(out[key]), why, key))
        if not why and key in reasons and (key != "max_not_ready_nodes" or cell_nodes is not None):
            raise InputError("%s.disabled.%s: its threshold %s does not switch the halt off; remove the entry (a "
                             "reason for a halt that is on would mislead the report)" % (
                                 where, key, _shown(out[key])))
    out["disabled"] = {k: reasons[k].strip() for k in THRESHOLDS if k in reasons}
    return out


def _switches_off(key: str, value: float, cell_nodes: Optional[Mapping[str, int]]) -> Optional[str]:
    """Why ``value`` switches the halt of threshold ``key`` off; None when it can still halt."""
    if key == "max_not_ready_nodes":
        full = sorted((n, c) for c, n in (cell_nodes or {}).items() if n and value >= n)
        return "at least cell %s's %d nodes: all of them could be NotReady" % (full[0][1], full[0][0]) if full else None
    if key not in OFF_AT:
        return None
    how, at, why = OFF_AT[key]
    return why if (value <= at if how == "<=" else value >= at) else None


def disabled_halts(halt: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Each switched-off halt of a parsed policy.halt: ``[{threshold, value, reason}]``, for the run's output and the
    report."""
    return [{"threshold": k, "value": halt[k], "reason": r} for k, r in (halt.get("disabled") or {}).items()]


def _validate(spec: Mapping[str, Any], value: Any, where: str) -> Dict[str, Any]:
    """One mapping checked against ``spec`` by ansible-core's validator, every error prefixed with ``where``
    (the cell or ring by index and name). Before it: what the validator would take but should not - booleans as
    numbers, numbers that are not finite or absurdly large, empty required strings, keys that are not strings."""
    if not isinstance(value, Mapping):
        raise InputError("%s: expected a mapping, got %s" % (where, type(value).__name__))
    bad_keys = [k for k in value if not isinstance(k, str)]
    if bad_keys:
        raise InputError("%s: key %r is not a name; give field names as strings" % (where, bad_keys[0]))
    for key, rule in spec.items():
        item = value.get(key)
        if rule["type"] in ("int", "float") and item is not None:
            if isinstance(item, bool) or not isinstance(item, (int, float, str)):
                raise InputError("%s.%s: expected a number, got %r" % (where, key, item))
            if isinstance(item, str) and not NUMBER.fullmatch(item):  # float() takes "1_6", " 16\n", full-width
                raise InputError("%s.%s: %r is not a number (ASCII digits)" % (where, key, item))
            try:
                number = float(item)
            except (ValueError, OverflowError):  # an int too large for a float (10**400) overflows
                raise InputError("%s.%s: %s is not a number in range" % (where, key, str(item)[:40])) from None
            if not math.isfinite(number) or abs(number) > MAX_NUMBER:
                raise InputError("%s.%s: %r is out of range" % (where, key, item))
        if rule["type"] == "str" and rule.get("required") and (item is None or not str(item).strip()):
            raise InputError("%s.%s: required, and empty here" % (where, key))
    result = ArgumentSpecValidator(dict(spec)).validate(dict(value))
    if result.error_messages:
        messages = [m.rstrip(". ") for m in result.error_messages]
        raise InputError("%s: %s. Nothing was planned." % (where, "; ".join(messages)))
    return dict(result.validated_parameters)


def parse_fleet(value: Any, name: str = VAR) -> Dict[str, Any]:
    """The checked fleet, every default filled in; :class:`InputError` naming the cell (or ring) and the field."""
    fleet = _validate(SPEC, value, name)
    policy = fleet["policy"] = _validate(_POLICY, fleet["policy"], name + ".policy")
    _label(fleet["name"], "%s.name" % name)
    if policy["max_cells_in_flight"] < 1:
        raise InputError("%s.policy.max_cells_in_flight: %d; give 1 or more" % (name, policy["max_cells_in_flight"]))
    if policy["patch_max_cells_in_flight"] is None:
        policy["patch_max_cells_in_flight"] = 2 * policy["max_cells_in_flight"]
    elif policy["patch_max_cells_in_flight"] < policy["max_cells_in_flight"]:
        raise InputError("%s.policy.patch_max_cells_in_flight: %d is below max_cells_in_flight (%d); patch releases "
                         "may move faster than minors, never slower" % (
                             name, policy["patch_max_cells_in_flight"], policy["max_cells_in_flight"]))
    if not 0 < policy["max_gpu_fraction_in_flight"] <= 1:
        raise InputError("%s.policy.max_gpu_fraction_in_flight: %s; give a fraction above 0, at most 1" % (
            name, policy["max_gpu_fraction_in_flight"]))
    if not policy["rings"]:
        raise InputError("%s.policy.rings: empty; list the rings in the order they upgrade" % name)
    rings: Dict[str, Dict[str, Any]] = {}
    for i, raw in enumerate(policy["rings"]):
        where = "%s.policy.rings[%d]" % (name, i)
        ring = _validate(_RING, raw, where)
        _label(ring["name"], where + ".name")
        if ring["name"] in rings:
            raise InputError("%s.name: ring %s is listed twice" % (where, ring["name"]))
        if ring["soak_seconds"] < 0:
            raise InputError("%s (%s).soak_seconds: %d; give 0 or more" % (where, ring["name"], ring["soak_seconds"]))
        target = ring["target"] or policy["target"]
        if not target:
            raise InputError("%s (%s).target: no target for this ring and no policy.target; give one of them" % (
                where, ring["name"]))
        ring["target"] = str(parse_release(_ascii(target, "%s (%s).target" % (where, ring["name"])),
                                           "%s (%s).target" % (where, ring["name"])))
        rings[ring["name"]] = ring
    policy["rings"] = list(rings.values())
    if policy["target"]:
        policy["target"] = str(parse_release(_ascii(policy["target"], "%s.policy.target" % name),
                                             "%s.policy.target" % name))
    policy["hop_versions"] = _hop_versions(policy["hop_versions"], "%s.policy.hop_versions" % name)
    for key in ("halt_check_seconds", "metrics_window_seconds", "cell_timeout_seconds"):
        if policy[key] < 1:
            raise InputError("%s.policy.%s: %d; give 1 or more seconds" % (name, key, policy[key]))
    if not fleet["cells"]:
        raise InputError("%s.cells: empty; list every cell of the fleet" % name)
    cells: Dict[str, Dict[str, Any]] = {}
    for i, raw in enumerate(fleet["cells"]):
        where = "%s.cells[%d]" % (name, i)
        label = raw.get("name") if isinstance(raw, Mapping) else None
        cell = _validate(_CELL, raw, "%s (%s)" % (where, label) if isinstance(label, str) else where)
        _label(cell["name"], where + ".name")
        where = "%s (%s)" % (where, cell["name"])
        cell["pools"] = [_validate(_POOL, pool, "%s.pools[%d]" % (where, j)) for j, pool in enumerate(cell["pools"])]
        if cell["name"] in cells:
            raise InputError("%s.name: cell %s is listed twice" % (where, cell["name"]))
        if cell["ring"] not in rings:
            raise InputError("%s.ring: %s is not a ring of policy.rings (%s); every cell belongs to one" % (
                where, cell["ring"], ", ".join(rings)))
        if cell["gpus"] < 0:
            raise InputError("%s.gpus: %d; give the cell's GPU count (0 for a cell without GPUs)" % (
                where, cell["gpus"]))
        cell["control_plane"] = _running(cell["control_plane"], where + ".control_plane")
        cell["nccl_hosts"] = _nccl_hosts(cell["nccl_hosts"], where + ".nccl_hosts")
        if cell["inference"] is not None:
            cell["inference"] = _inference(cell["inference"], where + ".inference")
        cell["halt_readings"] = _halt_readings(cell["halt_readings"], where + ".halt_readings", cell)
        seen = set()
        for j, pool in enumerate(cell["pools"]):
            pwhere = "%s.pools[%d]" % (where, j)
            _label(pool["name"], pwhere + ".name")
            if pool["name"] in seen:
                raise InputError("%s.name: pool %s is listed twice" % (pwhere, pool["name"]))
            seen.add(pool["name"])
            pool["kubelet"] = _running(pool["kubelet"], pwhere + ".kubelet")
            if pool["nodes"] < 0:
                raise InputError("%s.nodes: %d; give the pool's node count" % (pwhere, pool["nodes"]))
        if cell["kind"] == "training" and not cell["pools"]:
            raise InputError("%s.pools: a training cell without pools; list its node pools and their kubelets, so "
                             "the plan can keep them within the skew policy" % where)
        cells[cell["name"]] = cell
    _check_pairs(cells, name)
    policy["halt"] = parse_halt_policy(policy["halt"], {
        c["name"]: sum(p["nodes"] for p in c["pools"]) for c in cells.values()
        if "not_ready_nodes" in c["halt_readings"]})
    total = sum(c["gpus"] for c in cells.values())
    cap = gpu_cap(policy["max_gpu_fraction_in_flight"], total)
    for cell in cells.values():
        if cell["gpus"] > cap:
            raise InputError(
                "%s.cells (%s).gpus: %d GPUs is %.0f%% of the fleet's %d, over policy.max_gpu_fraction_in_flight "
                "(%s): the cell could never upgrade. Raise the fraction to at least %.2f" % (
                    name, cell["name"], cell["gpus"], 100.0 * cell["gpus"] / total, total,
                    policy["max_gpu_fraction_in_flight"], math.ceil(100.0 * cell["gpus"] / total) / 100))
    majors = {parse_version(c["control_plane"]).major for c in cells.values()} | {
        parse_version(r["target"]).major for r in rings.values()}
    if len(majors) > 1:
        raise InputError("%s: versions of more than one major (%s); Kubernetes upgrades never cross a major" % (
            name, ", ".join("v%d" % m for m in sorted(majors))))
    fleet["rings_by_name"] = rings
    fleet["gpu_cap"] = cap
    fleet["cells_by_name"] = cells
    fleet["gpus"] = total
    return fleet


def _nccl_hosts(value: Optional[List[str]], where: str) -> Optional[List[str]]:
    if value is None:
        return None
    if not value:
        raise InputError("%s: empty; name the inventory hosts all_reduce_perf runs on, or leave it out" % where)
    # each is a play's host pattern: "all", "gpu-*", "!x" or "a:b" would run all_reduce_perf on other hosts
    bad = [h for h in value if not isinstance(h, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", h)]
    if bad:
        raise InputError("%s: %r is not a host name (letters, digits, '.', '_', '-'; no patterns, groups or "
                         "wildcards); give the cell's inventory host names one by one" % (where, bad[0]))
    if "all" in value:
        raise InputError("%s: all is Ansible's every-host pattern; give the cell's inventory host names" % where)
    twice = sorted({h for h in value if value.count(h) > 1})
    if twice:
        raise InputError("%s: %s listed twice" % (where, ", ".join(twice)))
    return list(value)


def _inference(value: Any, where: str) -> Dict[str, Any]:
    out = _validate(_INFERENCE, value, where)
    # The URL is a task argument that reaches logs and job events, so no refusal echoes it, and it may carry no
    # secret: no user:password@, no query string or fragment (where tokens go).
    url = out["metrics_url"]
    try:
        parts = urlsplit(url)
        credentials = parts.username is not None or parts.password is not None
        port = parts.port  # a port that is not a number raises here
    except ValueError:
        raise InputError("%s.metrics_url: not a URL (its host or port does not parse); give the service's metrics "
                         "endpoint as http(s)://HOST:PORT/PATH" % where) from None
    if credentials or "@" in parts.netloc:
        raise InputError("%s.metrics_url: carries credentials (user:password@); they would reach the logs and job "
                         "events: give an endpoint that needs none (in-cluster, or through a proxy)" % where)
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise InputError("%s.metrics_url: has a query string or fragment (where tokens go; they would reach the "
                         "logs and job events): give the bare endpoint, http(s)://HOST:PORT/PATH" % where)
    # fullmatch: "$" would let a trailing newline through; no ; & = in the path (matrix or query-like parameters)
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0 or \
            not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~%+,:/-]*)?", url):
        raise InputError("%s.metrics_url: not an http(s) endpoint (scheme, host, port or path; the path may hold "
                         "letters, digits and . _ ~ %% + , : / - only); give the service's metrics endpoint as "
                         "http(s)://HOST:PORT/PATH" % where)
    if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", out["histogram"]):
        raise InputError("%s.histogram: %r is not a Prometheus metric name; give the request latency histogram's "
                         "name without _bucket" % (where, out["histogram"]))
    if out["histogram"].endswith("_bucket"):
        raise InputError("%s.histogram: %s; give the histogram's name without _bucket" % (where, out["histogram"]))
    return out


def _halt_readings(value: Optional[List[str]], where: str, cell: Mapping[str, Any]) -> List[str]:
    """The readings judged for a cell: all of fleet_readings.API_READINGS and the sourced ones whose source the
    cell names (nccl_hosts, inference), unless the cell names fewer (a cell without GPUs or JobSets may leave
    those out). A sourced reading whose source is not given is refused rather than halting every run on a
    reading that is never taken."""
    sources = [r for r, field in SOURCED_READINGS.items() if cell.get(field)]
    known = list(API_READINGS) + sources
    if value is None:
        return known
    unsourced = sorted(r for r in set(value) & set(SOURCED_READINGS) if r not in sources)
    if unsourced:
        raise InputError("%s: %s needs its source: give %s for this cell, or leave the reading out" % (
            where, ", ".join(unsourced), " and ".join("%s.%s" % (where.rsplit(".", 1)[0], SOURCED_READINGS[r])
                                                      for r in unsourced)))
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise InputError("%s: %s cannot be read by the fleet run; choose from %s" % (
            where, ", ".join(unknown), ", ".join(known)))
    if not value:
        raise InputError("%s: empty; a cell judged on nothing would always promote. Leave it out for all of %s" % (
            where, ", ".join(known)))
    return [r for r in known if r in value]


def gpu_cap(fraction: float, total: int) -> int:
    """GPUs allowed in flight: the fraction of the fleet's, exactly (0.29 x 100 is 29, not 28.999...)."""
    return int(Fraction(str(fraction)) * total)


def _hop_versions(value: Mapping[str, Any], where: str) -> Dict[str, str]:
    out = {}
    for minor, release in value.items():
        key = str(minor).lstrip("v")
        if not re.fullmatch(r"[0-9]+\.[0-9]+", key):  # \d and $ would take other digits and a trailing newline
            raise InputError("%s: key %r is not a minor; give it as \"1.36\"" % (where, minor))
        version = parse_release(_ascii(release, "%s[%s]" % (where, key)), "%s[%s]" % (where, key))
        if version.minor_str != key:
            raise InputError("%s[%s]: %s is not a release of %s; each intermediate hop takes a release of its own "
                             "minor" % (where, key, version, key))
        out[key] = str(version)
    return out


def _running(value: Any, where: str) -> str:
    """A running version as the cluster reports it (vendor suffixes kept), with its patch: the plan needs it."""
    version = parse_version(_ascii(value, where), where)
    if version.patch is None:
        raise InputError("%s: %r names a minor, not the running release; give it as the cluster reports it, such "
                         "as v%s.4" % (where, value, version.minor_str))
    return str(version)


def _ascii(value: Any, where: str) -> Any:
    """A version as given, refused when it is not ASCII (the version parser's \\d takes other scripts' digits)."""
    if isinstance(value, str) and not value.isascii():
        raise InputError("%s: %r is not ASCII; give the version as v1.36.3" % (where, value))
    return value


def _label(value: str, where: str) -> None:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise InputError("%s: %r is not a DNS label (lower-case letters, digits and '-', up to 63)" % (where, value))


def _check_pairs(cells: Mapping[str, Dict[str, Any]], name: str) -> None:
    for cell in cells.values():
        partner = cell.get("dr_partner")
        if not partner:
            continue
        where = "%s.cells (%s).dr_partner" % (name, cell["name"])
        if partner == cell["name"]:
            raise InputError("%s: a cell cannot be its own DR partner" % where)
        other = cells.get(partner)
        if other is None:
            raise InputError("%s: %s is not a cell of the fleet" % (where, partner))
        if other.get("dr_partner") != cell["name"]:
            raise InputError("%s: %s names %s as its partner; a DR pair names each other" % (
                where, partner, other.get("dr_partner") or "no cell"))
        if other["ring"] == cell["ring"]:
            raise InputError(
                "%s: %s and %s are a DR pair and both in ring %s; put them in different rings, so one half stays on "
                "the running version while the other upgrades and soaks" % (where, cell["name"], partner, cell["ring"]))


def _observed(cell: Mapping[str, Any]) -> List[Observed]:
    """One apiserver and, per pool, its (oldest) kubelet: all the skew rules need of a cell."""
    out = [Observed(APISERVER, "control-plane", parse_version(cell["control_plane"]))]
    out += [Observed(KUBELET, "pool " + p["name"], parse_version(p["kubelet"]), p["name"]) for p in cell["pools"]]
    return out


def plan_cell(cell: Mapping[str, Any], target: KubeVersion, name: str = VAR,
              hop_versions: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The cell's path to ``target``: control-plane hops one minor at a time, each pool's drains, and which pools
    must move before the cell's next control-plane hop. Refuses a cell already out of the skew policy; every
    refusal names the cell."""
    where = "%s.cells (%s)" % (name, cell["name"])
    try:
        return _plan_cell(cell, target, hop_versions, where)
    except PolicyError as exc:
        raise PolicyError("%s: %s" % (where, exc.msg)) from exc
    except InputError as exc:
        raise InputError("%s: %s" % (where, exc.msg)) from exc


def _plan_cell(cell: Mapping[str, Any], target: KubeVersion, hop_versions: Optional[Mapping[str, str]],
               where: str) -> Dict[str, Any]:
    observed = _observed(cell)
    broken = skew_violations(observed)
    if broken:
        raise PolicyError("already out of the skew policy: %s. Fix the cell before it joins a fleet run" % (
            "; ".join(v.message() for v in broken)))
    pools = {p["name"]: PoolPolicy(skip_level=p["skip_level"]) for p in cell["pools"]}
    plan = plan_upgrade(observed, target, allow_multi_hop=True, pools=pools, hop_versions=hop_versions)
    nodes = {p["name"]: p["nodes"] for p in cell["pools"]}
    current = parse_version(cell["control_plane"])
    before_next = sorted(p["pool"] for p in plan["pools"] if p["steps"] and p["steps"][0]["after_hop"] == 0
                         and plan["control_plane_path"])
    # patch only: the control plane stays on its minor and no pool drains across a minor
    patch_only = (current.minor == target.minor and current.major == target.major
                  and not any(step["minors"] for p in plan["pools"] for step in p["steps"]))
    return {
        "cell": cell["name"], "ring": cell["ring"], "kind": cell["kind"], "region": cell["region"],
        "inventory": cell["inventory"], "gpus": cell["gpus"], "halt_readings": cell["halt_readings"],
        "nccl_hosts": cell["nccl_hosts"] or [], "inference": cell["inference"],
        "current": str(current), "target": str(target),
        "at_target": not plan["control_plane_path"] and not any(p["steps"] for p in plan["pools"]),
        "patch_only": patch_only,
        "control_plane_path": plan["control_plane_path"],
        "pools": [{"pool": p["pool"], "current": p["current"], "skip_level": p["skip_level"],
                   "nodes": nodes.get(p["pool"], 0), "steps": p["steps"],
                   "must_upgrade_before_hop": p["must_upgrade_before_hop"]} for p in plan["pools"]],
        "node_upgrade_before_next_hop": before_next,
        "node_drains": sum(len(p["steps"]) * max(nodes.get(p["pool"], 0), 1) for p in plan["pools"]),
    }


def fits(batch: Sequence[Mapping[str, Any]], caps: Mapping[str, Any]) -> bool:
    """Whether the cells ``batch`` (their plans) may upgrade at once under ``caps`` (the plan's): at most
    max_cells_in_flight (patch_max_cells_in_flight when each takes a patch release only), at most
    max_gpus_in_flight GPUs, at most one training cell when training_one_at_a_time."""
    cap = caps["patch_max_cells_in_flight"] if all(c["patch_only"] for c in batch) else caps["max_cells_in_flight"]
    return (len(batch) <= cap and sum(c["gpus"] for c in batch) <= caps["max_gpus_in_flight"]
            and not (caps["training_one_at_a_time"] and sum(c["kind"] == "training" for c in batch) > 1))


def _batches(cells: Sequence[Dict[str, Any]], caps: Mapping[str, Any]) -> List[List[str]]:
    """Cells in order, packed into batches that upgrade at once under the caps (:func:`fits`)."""
    out: List[List[str]] = []
    batch: List[Dict[str, Any]] = []
    for cell in cells:
        trial = batch + [cell]
        if batch and not fits(trial, caps):
            out.append([c["cell"] for c in batch])
            trial = [cell]
        batch = trial
    if batch:
        out.append([c["cell"] for c in batch])
    return out


def plan_fleet(value: Any, name: str = VAR) -> Dict[str, Any]:
    """Rings in order; in each, its cells (kind order canary -> training, then by name) in batches under the caps;
    per cell its path. Cells already at their ring's target are listed, not batched. Deterministic."""
    fleet = parse_fleet(value, name)
    policy = fleet["policy"]
    caps = {"max_cells_in_flight": policy["max_cells_in_flight"],
            "patch_max_cells_in_flight": policy["patch_max_cells_in_flight"],
            "max_gpus_in_flight": fleet["gpu_cap"], "training_one_at_a_time": policy["training_one_at_a_time"]}
    rings = []
    cells_out: Dict[str, Dict[str, Any]] = {}
    for ring in policy["rings"]:
        target = parse_release(ring["target"])
        members = sorted((c for c in fleet["cells_by_name"].values() if c["ring"] == ring["name"]),
                         key=lambda c: (KINDS.index(c["kind"]), c["name"]))
        plans = [plan_cell(c, target, name, policy["hop_versions"]) for c in members]
        for plan in plans:
            cells_out[plan["cell"]] = plan
        moving = [p for p in plans if not p["at_target"]]
        rings.append({"ring": ring["name"], "target": ring["target"], "soak_seconds": ring["soak_seconds"],
                      "cells": [p["cell"] for p in plans], "at_target": [p["cell"] for p in plans if p["at_target"]],
                      "batches": _batches(moving, caps),
                      "gpus": sum(p["gpus"] for p in plans)})
    nodes = sum(p["nodes"] for c in fleet["cells_by_name"].values() for p in c["pools"])
    needing = sorted(c for c, p in cells_out.items() if p["node_upgrade_before_next_hop"])
    return {
        "fleet": fleet["name"], "rings": rings, "cells": cells_out,
        "caps": caps,
        "run": {k: policy[k] for k in ("halt_check_seconds", "metrics_window_seconds", "cell_timeout_seconds")},
        "halt_policy": policy["halt"], "disabled_halts": disabled_halts(policy["halt"]),
        "gpus": fleet["gpus"], "nodes": nodes,
        "node_upgrade_before_next_hop": needing,
        "summary": "%d cells (%d nodes, %d GPUs) in %d rings: %d batches; %d cells at target; %d need a node upgrade "
                   "before their next control-plane hop" % (
                       len(cells_out), nodes, fleet["gpus"], len(rings), sum(len(r["batches"]) for r in rings),
                       sum(len(r["at_target"]) for r in rings), len(needing)),
    }
