# Copyright: gpufleet contributors
# Apache License 2.0
"""The fleet run's decisions, as pure functions over the plan (fleet.py), the fleet ledger and the halt readings:
which step comes next, how the ledger changes, and whether a halt condition holds.

The ledger is the run's memory, read back on every run (durable: a JSON file the caller keeps): per cell its
ring, state (pending, upgrading, done, failed), version, reason and last change; per ring when its soak began and
ended; and the halt that stopped the fleet, if any. A cell that fails is never retried automatically: the fleet
stops and names it, and only a typed confirmation naming the fleet and the cell puts it back to pending.

Halt conditions compare each cell's readings after its upgrade (and during the ring's soak) with the readings
before, against thresholds from the fleet policy. A reading that is missing is a halt, never a pass.

A readings file is checked where it is read (``check_reading``): counts are whole numbers 0 or more, fractions
finite and within [0, 1], latencies and rates finite and 0 or more; ``jobset_restarts`` comes with its per-JobSet
``jobset_restart_counts`` (and ``jobset_api``) and is their sum; ``not_ready_nodes`` is the length of ``not_ready``;
``gpu_allocatable_fraction`` comes with its breakdowns (fleet_readings.node_readings: ``gpus_allocatable``,
``gpus_expected``, ``gpu_allocatable_by_pool``, ``gpu_allocatable_off_baseline``), and they give it. A reading that
does not hold together is refused: not measured, with why (``refused: ...``), so the fleet halts naming it - before
the upgrade as after it - never a pass and never a crash. Each wanted reading must be measured and whole both
before and after.

The GPU condition halts when the fraction is under its floor, and also on any node ``above`` its pool's GPUs per
node (``gpu_allocatable_off_baseline``): such a node counts only its expected GPUs in the fraction, so it can never
make up for another node's loss, and it is a change (a MIG layout, a device plugin's config) that no floor lets
pass. Only a GPU halt switched off with a reason (``policy.halt.disabled.min_gpu_allocatable_fraction``) skips it.
"""
from __future__ import annotations

import datetime
import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, PolicyError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import fits
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet_readings import whole

LEDGER_VERSION = 1
CELL_STATES = ("pending", "upgrading", "done", "failed")

# reading name -> (the threshold, how it is judged)
CONDITIONS = (
    ("apiserver_429_per_minute", "max_429_per_minute_increase", "increase"),
    ("apiserver_p99_seconds", "max_latency_regression", "regression"),
    ("not_ready_nodes", "max_not_ready_nodes", "ceiling"),
    ("gpu_allocatable_fraction", "min_gpu_allocatable_fraction", "floor"),
    ("nccl_busbw_gbps", "max_nccl_regression", "drop"),
    ("jobset_restarts", "max_jobset_restarts_increase", "increase"),
    ("inference_p99_ms", "max_inference_p99_regression", "regression"),
)


def halts(cell: str, before: Optional[Mapping[str, Any]], after: Optional[Mapping[str, Any]],
          policy: Mapping[str, Any], wanted: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    """Every halt condition that holds for ``cell``: ``[{cell, condition, before, after, threshold, message}]``.

    ``wanted``: the readings this cell must have (default: all of CONDITIONS); a wanted reading missing before or
    after is a halt, since a condition that could not be measured is not a pass."""
    out = []
    names = wanted if wanted is not None else [c[0] for c in CONDITIONS]
    unknown = sorted(set(names) - {c[0] for c in CONDITIONS})
    if unknown:
        raise InputError("halt readings of %s: unknown %s; known: %s" % (
            cell, ", ".join(unknown), ", ".join(c[0] for c in CONDITIONS)))
    before, after = check_reading(cell, "before", before), check_reading(cell, "after", after)
    disabled = policy.get("disabled") or {}
    for name, limit_key, how in CONDITIONS:
        if name not in names:
            continue
        limit = policy[limit_key]
        old = (before or {}).get(name)
        new = (after or {}).get(name)
        if new is None or old is None:  # each wanted reading, measured and whole, before and after
            why = ((after if new is None else before) or {}).get("unmeasured") or {}
            out.append({"cell": cell, "condition": name, "before": old, "after": new, "threshold": limit,
                        "message": "%s: %s was not measured %s%s; a halt condition that cannot be read halts" % (
                            cell, name, "after the upgrade" if new is None else "before the upgrade",
                            " (%s)" % why[name] if isinstance(why, Mapping) and why.get(name) else "")})
            continue
        if name == "jobset_restarts" and (before or {}).get("jobset_api") is True and \
                (after or {}).get("jobset_api") is False:  # 0 restarts from an API that is gone is not a reading
            out.append({"cell": cell, "condition": name, "before": old, "after": None, "threshold": limit,
                        "message": "%s: jobset_restarts was not measured after the upgrade (the JobSet API was served "
                                   "before and is not now: its CRD or controller is gone); a halt condition that "
                                   "cannot be read halts" % cell})
            continue
        try:
            old_f = _number(old) if old is not None else 0.0
            new_f = _number(new)
            rise = _jobset_rise(before, after) if name == "jobset_restarts" else None
        except (TypeError, ValueError, AttributeError):  # NaN compares false both ways: it would pass every test
            out.append({"cell": cell, "condition": name, "before": old, "after": new, "threshold": limit,
                        "message": "%s: %s reading %r / %r is not a number; a halt condition that cannot be read "
                                   "halts" % (cell, name, old, new)})
            continue
        if rise is not None:
            held = rise[0] > limit
            text = "rose by %d, JobSet by JobSet (%s; at most +%g)" % (rise[0], rise[1] or "none restarted", limit)
        elif how == "increase":
            held, text = new_f - old_f > limit, "rose from %g to %g (at most +%g)" % (old_f, new_f, limit)
        elif how == "regression":
            floor = policy.get("apiserver_p99_floor_seconds", 0.0) if name == "apiserver_p99_seconds" else 0.0
            held = new_f > old_f * (1 + limit) and new_f > floor  # a few ms more on a fast apiserver is noise
            text = "rose from %g to %g (at most %g%% over%s)" % (
                old_f, new_f, 100 * limit, ", or up to %g s" % floor if floor else "")
        elif how == "drop":
            held = new_f < old_f * (1 - limit)
            text = "fell from %g to %g (at most %g%% under)" % (old_f, new_f, 100 * limit)
        elif how == "ceiling":
            held, text = new_f > limit, "is %g (at most %g)" % (new_f, limit)
        else:  # floor
            held, text = new_f < limit, "is %g (at least %g)" % (new_f, limit)
        if held and name == "gpu_allocatable_fraction":
            text += _pools_under((after or {}).get("gpu_allocatable_by_pool"), limit)
            text += _nodes_below((after or {}).get("gpu_allocatable_off_baseline"))
        if name == "gpu_allocatable_fraction" and limit_key not in disabled:
            above = _nodes_above((after or {}).get("gpu_allocatable_off_baseline"))
            if above:
                held = True
                text += above
        if held and name == "nccl_busbw_gbps":
            text += _probes_under((after or {}).get("nccl_busbw_by_host"), old_f * (1 - limit))
        if held:
            out.append({"cell": cell, "condition": name, "before": old, "after": new, "threshold": limit,
                        "message": "%s: %s %s" % (cell, name, text)})
    return out


def _number(value: Any) -> float:
    """``value`` as a finite float; ValueError for NaN, infinities, booleans and anything that is not a number."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a reading")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError("not finite")
    return out


def _count(value: Any) -> int:
    """A whole number 0 or more; ValueError otherwise (a boolean, a float, a string, NaN, an infinity)."""
    if whole(value):
        return int(value)
    raise ValueError("not a whole number 0 or more")


def _what(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _rule(doc: Mapping[str, Any], key: str, how: str) -> Any:
    """``doc[key]`` checked as ``how`` (count, fraction, number: finite and 0 or more, flag, mapping); ValueError
    naming the field and its value."""
    value = doc.get(key)
    if how == "count":
        try:
            return _count(value)
        except ValueError:
            raise ValueError("%s is %s, not a whole number 0 or more" % (key, _what(value))) from None
    if how == "flag":
        if not isinstance(value, bool):
            raise ValueError("%s is %s, not true or false" % (key, _what(value)))
        return value
    if how == "mapping":
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise ValueError("%s is %s, not a mapping" % (key, _what(value)))
        return value
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    ok = math.isfinite(number) and number >= 0
    if how == "fraction" and not (ok and number <= 1):
        raise ValueError("%s is %s, not a fraction (a number from 0 to 1)" % (key, _what(value)))
    if not ok:
        raise ValueError("%s is %s, not a finite number 0 or more" % (key, _what(value)))
    return number


# each reading checked by check_reading: how its value is judged; the breakdowns it must come with are checked by
# the functions below
READING_RULES = {"apiserver_429_per_minute": "number", "apiserver_p99_seconds": "number", "not_ready_nodes": "count",
                 "gpu_allocatable_fraction": "fraction", "nccl_busbw_gbps": "number", "jobset_restarts": "count",
                 "inference_p99_ms": "number"}


def _check_not_ready(doc: Mapping[str, Any]) -> None:
    count = _rule(doc, "not_ready_nodes", "count")
    names = doc.get("not_ready")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise ValueError("not_ready is %s, not the list of NotReady nodes' names" % _what(names))
    if len(names) != count:
        raise ValueError("not_ready names %d node(s), not not_ready_nodes %d" % (len(names), count))


def _check_jobsets(doc: Mapping[str, Any]) -> None:
    total = _rule(doc, "jobset_restarts", "count")
    if "jobset_restart_counts" not in doc:
        raise ValueError("jobset_restarts comes without jobset_restart_counts (each JobSet's count by uid), so its "
                         "rise cannot be judged JobSet by JobSet")
    counts = _rule(doc, "jobset_restart_counts", "mapping")
    _rule(doc, "jobset_api", "flag")
    seen = 0
    for uid, entry in counts.items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ValueError("jobset_restart_counts.%s is %s, not {name, restarts}" % (uid, _what(entry)))
        try:
            seen += _count(entry.get("restarts"))
        except ValueError:
            raise ValueError("jobset_restart_counts.%s (JobSet %s).restarts is %s, not a whole number 0 or more" % (
                uid, entry["name"], _what(entry.get("restarts")))) from None
    if seen != total:
        raise ValueError("jobset_restart_counts add up to %d, not jobset_restarts %d" % (seen, total))


def _check_gpus(doc: Mapping[str, Any]) -> None:
    """The GPU fraction and its breakdowns (fleet_readings.node_readings) hold together: each pool's GPUs are its
    expected ones less what its nodes off the baseline miss, the cell's are the pools' sum, and the fraction is the
    lowest of the cell's and each pool's."""
    fraction = _rule(doc, "gpu_allocatable_fraction", "fraction")
    have, want = _rule(doc, "gpus_allocatable", "count"), _rule(doc, "gpus_expected", "count")
    by_pool = _rule(doc, "gpu_allocatable_by_pool", "mapping")
    off = _rule(doc, "gpu_allocatable_off_baseline", "mapping")
    missing: Dict[str, int] = {pool: 0 for pool in by_pool}
    listed: Dict[str, int] = {pool: 0 for pool in by_pool}
    for node, entry in off.items():
        where = "gpu_allocatable_off_baseline.%s" % node
        if not isinstance(entry, Mapping) or not isinstance(entry.get("pool"), str) or entry["pool"] not in by_pool or \
                entry.get("state") not in ("above", "below", "not ready", "no node"):
            raise ValueError("%s is %s, not {pool, allocatable, expected, counted, state} of a pool of the reading" % (
                where, _what(entry)))
        pool = by_pool[entry["pool"]]
        expected, counted = _rule(entry, "expected", "count"), _rule(entry, "counted", "count")
        gpus = None if entry.get("allocatable") is None else _rule(entry, "allocatable", "count")
        if not isinstance(pool, Mapping) or expected != pool.get("per_node"):
            raise ValueError("%s.expected is %d, not its pool's GPUs per node" % (where, expected))
        ready = entry["state"] in ("above", "below")
        if counted != (min(gpus or 0, expected) if ready else 0) or \
                (entry["state"] == "above") != ((gpus or 0) > expected) or \
                (entry["state"] == "below" and (gpus or 0) >= expected):
            raise ValueError("%s: %s GPUs allocatable, %d counted, is not %s" % (where, gpus, counted, entry["state"]))
        if entry["state"] == "no node":
            raise ValueError("%s: the API lists no Node for it, yet the fraction is %g" % (where, fraction))
        missing[entry["pool"]] += expected - counted
        listed[entry["pool"]] += 1
    lowest = 1.0 if want == 0 else min(1.0, have / float(want))
    total = 0
    for name, pool in by_pool.items():
        where = "gpu_allocatable_by_pool.%s" % name
        if not isinstance(pool, Mapping):
            raise ValueError("%s is %s, not {allocatable, expected, fraction, per_node, nodes}" % (where, _what(pool)))
        gpus, expected = _rule(pool, "allocatable", "count"), _rule(pool, "expected", "count")
        per_node, nodes = _rule(pool, "per_node", "count"), _rule(pool, "nodes", "count")
        share = _rule(pool, "fraction", "fraction")
        if expected != per_node * nodes or listed[name] > nodes:
            raise ValueError("%s: expected %d is not its %d nodes times %d GPUs per node" % (
                where, expected, nodes, per_node))
        if gpus != expected - missing[name]:
            raise ValueError("%s: %d of %d GPUs, but its nodes off the baseline account for %d missing" % (
                where, gpus, expected, missing[name]))
        exact = 1.0 if expected == 0 else gpus / float(expected)
        if abs(share - exact) > 1e-4:
            raise ValueError("%s.fraction is %g, not its %d of %d" % (where, share, gpus, expected))
        lowest = min(lowest, exact)
        total += gpus
    if total != have:
        raise ValueError("gpus_allocatable is %d, not the pools' %d" % (have, total))
    if want and not by_pool:
        raise ValueError("gpu_allocatable_by_pool is empty for %d GPUs expected: no node was judged" % want)
    if abs(fraction - lowest) > 1e-4:
        raise ValueError("gpu_allocatable_fraction is %g, not the lowest of the cell's and each pool's (%g)" % (
            fraction, round(lowest, 4)))


_BREAKDOWNS = {"not_ready_nodes": _check_not_ready, "jobset_restarts": _check_jobsets,
               "gpu_allocatable_fraction": _check_gpus}


def check_reading(cell: str, which: str, doc: Any) -> Optional[Dict[str, Any]]:
    """A cell's readings file (``which``: before or after) checked where it is read: None when it is not a mapping
    (no reading); otherwise a copy in which each reading that does not hold together (its value, or its breakdowns:
    READING_RULES, _check_not_ready, _check_jobsets, _check_gpus) is None - not measured - with why in
    ``unmeasured`` (``refused: ...``) and its name in ``refused``. A reading that is absent or None stays so (the
    judgement halts on it). Reading it again gives the same."""
    if not isinstance(doc, Mapping):
        return None
    out = dict(doc)
    why = doc.get("unmeasured")
    out["unmeasured"] = {str(k): str(v) for k, v in why.items()} if isinstance(why, Mapping) else {}
    refused = doc.get("refused")
    out["refused"] = sorted({str(r) for r in refused}) if isinstance(refused, list) else []
    for name, how in READING_RULES.items():
        if doc.get(name) is None:
            continue
        try:
            _rule(doc, name, how)
            if name in _BREAKDOWNS:
                _BREAKDOWNS[name](doc)
        except ValueError as exc:
            out[name] = None
            out["unmeasured"][name] = "refused: %s" % exc
            out["refused"] = sorted(set(out["refused"]) | {name})
    return out


def _jobset_rise(before: Optional[Mapping[str, Any]],
                 after: Optional[Mapping[str, Any]]) -> Optional[Tuple[int, str]]:
    """The JobSets' restarts since ``before``, each JobSet (by uid) on its own: one that is new counts whole, one
    that is gone counts nothing (a sum would let a deleted JobSet's restarts hide another's). Both readings come
    through check_reading, which refuses a total without its per-JobSet counts; None only when either has none."""
    old = (before or {}).get("jobset_restart_counts")
    new = (after or {}).get("jobset_restart_counts")
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return None
    rise, named = 0, []
    for uid, js in sorted(new.items(), key=lambda kv: str(kv[1].get("name"))):
        was = old.get(uid)
        more = max(_count(js.get("restarts")) - (_count(was.get("restarts")) if was else 0), 0)
        if more:
            rise += more
            named.append("%s +%d%s" % (js.get("name"), more, "" if was else " (new since the reading before)"))
    return rise, ", ".join(named)


def _pools_under(by_pool: Any, limit: float) -> str:
    """The pools under the GPU floor, for the halt's message."""
    if not isinstance(by_pool, Mapping):
        return ""
    low = ["%s %s of %s" % (pool, v.get("allocatable"), v.get("expected")) for pool, v in sorted(by_pool.items())
           if isinstance(v, Mapping) and isinstance(v.get("fraction"), (int, float)) and v["fraction"] < limit]
    return " (pool %s)" % ", ".join(low) if low else ""


def _nodes_below(off: Any) -> str:
    """The pool nodes counting fewer GPUs than their pool's per node, for the GPU halt's message."""
    if not isinstance(off, Mapping):
        return ""
    low = ["%s %s of %s%s" % (node, v["counted"], v["expected"], "" if v["state"] == "below" else " (%s)" % v["state"])
           for node, v in sorted(off.items()) if isinstance(v, Mapping) and v.get("state") != "above"]
    return " (node %s)" % ", ".join(low) if low else ""


def _nodes_above(off: Any) -> str:
    """The pool nodes offering more GPUs than their pool's per node: the GPU halt holds on each."""
    if not isinstance(off, Mapping):
        return ""
    high = sorted(node for node, v in off.items() if isinstance(v, Mapping) and v.get("state") == "above")
    if not high:
        return ""
    return ", but node %s %s more GPUs than %s pool's baseline (%s): a node above its baseline is a change (a MIG " \
        "layout?), never a pass" % (", ".join(high), "offers" if len(high) == 1 else "offer",
                                    "its" if len(high) == 1 else "their", ", ".join(
                                        "%s %s of %s in pool %s" % (n, off[n]["allocatable"], off[n]["expected"],
                                                                    off[n]["pool"]) for n in high))


def _probes_under(by_host: Any, floor: float) -> str:
    """The NCCL probe hosts under the floor, for the halt's message (the reading is the slowest of them)."""
    if not isinstance(by_host, Mapping):
        return ""
    low = ["%s %g GB/s" % (host, value) for host, value in sorted(by_host.items())
           if isinstance(value, (int, float)) and value < floor]
    return " (probe %s)" % ", ".join(low) if low else ""


# -- the ledger ----------------------------------------------------------------------------------------------------
def new_ledger(plan: Mapping[str, Any]) -> Dict[str, Any]:
    return {"version": LEDGER_VERSION, "fleet": plan["fleet"], "halt": None,
            "rings": {r["ring"]: {"soak_started": None, "soak_done": None} for r in plan["rings"]},
            "cells": {name: {"ring": c["ring"], "state": "done" if c["at_target"] else "pending",
                             "version": c["current"], "target": c["target"], "reason": "", "updated": None,
                             "change_record": None}
                      for name, c in sorted(plan["cells"].items())}}


def check_ledger(ledger: Any, plan: Mapping[str, Any]) -> Dict[str, Any]:
    """The ledger read back, checked against the plan; a new one when there is none. A ledger of another fleet,
    of an unknown version, or with a cell the plan does not have is refused (it would steer the wrong run); a cell
    new to the plan starts pending."""
    if ledger in (None, {}):
        return new_ledger(plan)
    if not isinstance(ledger, Mapping) or ledger.get("version") != LEDGER_VERSION:
        raise InputError("fleet ledger: not a version-%d gpufleet ledger; move it aside to start the fleet over"
                         % LEDGER_VERSION)
    if ledger.get("fleet") != plan["fleet"]:
        raise InputError("fleet ledger: it belongs to fleet %s, not %s; give this fleet's ledger" % (
            ledger.get("fleet"), plan["fleet"]))
    cells = dict(ledger.get("cells") or {})
    extra = sorted(set(cells) - set(plan["cells"]))
    if extra:
        raise InputError("fleet ledger: cell(s) %s are not in the fleet any more; remove them from the ledger, or "
                         "put them back in the fleet" % ", ".join(extra))
    fresh = new_ledger(plan)
    for name, entry in cells.items():
        if not isinstance(entry, Mapping) or entry.get("state") not in CELL_STATES:
            raise InputError("fleet ledger: cell %s has state %r; one of %s" % (
                name, (entry or {}).get("state") if isinstance(entry, Mapping) else entry, ", ".join(CELL_STATES)))
        merged = dict(fresh["cells"][name], **entry)
        merged["ring"] = plan["cells"][name]["ring"]
        if merged["target"] != plan["cells"][name]["target"] and merged["state"] == "done":
            merged["state"] = "pending"  # a new target for a cell that finished the old one
        merged["target"] = plan["cells"][name]["target"]
        fresh["cells"][name] = merged
    for ring, entry in (ledger.get("rings") or {}).items():
        if ring in fresh["rings"]:
            fresh["rings"][ring].update(entry or {})
    for ring in plan["rings"]:  # a soak belongs to the cells it soaked: a ring with a cell still to move has none
        if any(fresh["cells"][c]["state"] != "done" for c in ring["cells"]):
            fresh["rings"][ring["ring"]] = {"soak_started": None, "soak_done": None}
    fresh["halt"] = ledger.get("halt")
    for kept in ("last_halt", "lock_breaks"):
        if ledger.get(kept):
            fresh[kept] = ledger[kept]
    return fresh


def next_step(plan: Mapping[str, Any], ledger: Mapping[str, Any], now: datetime.datetime) -> Dict[str, Any]:
    """What the fleet does next: ``stop`` (a failed cell), ``upgrade`` (the next cells of the first unfinished
    ring, under the caps given what is already upgrading), ``wait`` (cells still upgrading, no room), ``soak``
    (the ring is done; its soak has ``remaining`` seconds - 0 when its time is up: the soak's last check still has to
    read clean before it is marked done, so no ring is promoted on time alone), ``stop`` also for a recorded halt,
    ``held`` (every ring up to the plan's ``run.until_ring`` is done and soaked: the next ring waits for a later run,
    as an AWX workflow's approval between rings wants), or ``complete``. Rings are strictly in order: nothing of a
    ring starts before the one before it soaked clean."""
    cells = ledger["cells"]
    order = [r["ring"] for r in plan["rings"]]
    until = until_ring(plan, (plan.get("run") or {}).get("until_ring"))
    if ledger.get("halt"):
        return {"action": "stop", "cells": halted_cells(ledger),
                "message": "%s; it resumes only when the halted cells read clean again" % ledger["halt"]["message"]}
    failed = sorted(c for c, e in cells.items() if e["state"] == "failed")
    if failed:
        reasons = "; ".join("%s: %s" % (c, cells[c]["reason"] or "no reason") for c in failed)
        return {"action": "stop", "cells": failed,
                "message": "cell(s) %s failed (%s); a failed cell is not retried automatically: fix it, then put it "
                           "back with gpufleet_fleet_retry='retry %s in fleet %s'" % (
                               ", ".join(failed), reasons, failed[0], plan["fleet"])}
    held = {r["ring"] for r in plan["rings"][order.index(until) + 1:]} if until else set()
    for index, ring in enumerate(plan["rings"]):
        name = ring["ring"]
        members = ring["cells"]
        upgrading = [c for c in members if cells[c]["state"] == "upgrading"]
        pending = [c for c in members if cells[c]["state"] == "pending"]
        soak = ledger["rings"][name]
        if not pending and not upgrading and soak.get("soak_done"):
            fresh = _fresh_check(plan, ledger, index, held, now)
            if fresh:
                return fresh
            continue
        if name in held:
            return {"action": "held", "ring": name, "cells": [],
                    "message": "every ring up to %s of fleet %s is done and soaked; ring %s waits for a run past it "
                               "(gpufleet_fleet_until_ring)" % (until, plan["fleet"], name)}
        if pending or upgrading:
            batch = _room(plan, ring, cells, upgrading)
            if batch:
                return {"action": "upgrade", "ring": name, "cells": batch,
                        "message": "ring %s: upgrade %s" % (name, ", ".join(batch))}
            return {"action": "wait", "ring": name, "cells": upgrading,
                    "message": "ring %s: %s still upgrading" % (name, ", ".join(upgrading))}
        started = soak.get("soak_started")
        if not started:
            return {"action": "soak", "ring": name, "remaining": ring["soak_seconds"], "start": True,
                    "message": "ring %s done: soak %d s before the next ring" % (name, ring["soak_seconds"])}
        elapsed = (now - datetime.datetime.fromisoformat(started)).total_seconds()
        remaining = max(int(ring["soak_seconds"] - elapsed), 0)
        if remaining:
            return {"action": "soak", "ring": name, "remaining": remaining, "start": False,
                    "message": "ring %s soaking: %d s left" % (name, remaining)}
        return {"action": "soak", "ring": name, "remaining": 0, "start": False,
                "message": "ring %s soaked %d s: a last check before the next ring" % (name, ring["soak_seconds"])}
    return {"action": "complete", "message": "every ring of fleet %s is done and soaked" % plan["fleet"]}


def _fresh_check(plan: Mapping[str, Any], ledger: Mapping[str, Any], index: int, held: Any,
                 now: datetime.datetime) -> Optional[Dict[str, Any]]:
    """A last check of a soaked ring before the next ring starts, when its clean check is older than one
    ``halt_check_seconds`` - as after a run that held there (an AWX approval may come a day later): the next ring
    is promoted on a clean reading of now, never on a stale one. None: no check needed."""
    rings = plan["rings"]
    if index + 1 >= len(rings) or rings[index + 1]["ring"] in held:
        return None
    following = [ledger["cells"][c] for c in rings[index + 1]["cells"]]
    if all(e["state"] != "pending" for e in following) or any(
            e["state"] != "pending" and e.get("updated") for e in following):
        return None  # the next ring has nothing to start, or this run of it began (a cell recorded since)
    name = rings[index]["ring"]
    done = datetime.datetime.fromisoformat(ledger["rings"][name]["soak_done"])
    age = (now - done).total_seconds()
    if age <= plan["run"]["halt_check_seconds"]:
        return None
    return {"action": "soak", "ring": name, "remaining": 0, "start": False,
            "message": "ring %s soaked clean %d s ago: a fresh check before ring %s starts" % (
                name, age, rings[index + 1]["ring"])}


def _room(plan: Mapping[str, Any], ring: Mapping[str, Any], cells: Mapping[str, Any],
          upgrading: List[str]) -> List[str]:
    """The next cells of the ring that fit beside the ones upgrading: the plan's batches in order, each batch's
    pending cells, as long as the caps still hold with the upgrading cells counted."""
    info = plan["cells"]
    chosen: List[str] = []
    for batch in ring["batches"]:
        for cell in batch:
            if cells[cell]["state"] != "pending":
                continue
            if not fits([info[c] for c in upgrading + chosen + [cell]], plan["caps"]):
                return chosen
            chosen.append(cell)
        if chosen:
            return chosen  # one batch at a time: the next batch waits for this one
    return chosen


def record(ledger: Mapping[str, Any], cell: str, state: str, now: datetime.datetime, version: str = "",
           reason: str = "", change_record: Optional[str] = None) -> Dict[str, Any]:
    """The ledger with ``cell`` moved to ``state`` (a new dict; the input is not changed)."""
    if state not in CELL_STATES:
        raise InputError("fleet ledger: state %r is not one of %s" % (state, ", ".join(CELL_STATES)))
    if cell not in ledger["cells"]:
        raise InputError("fleet ledger: %s is not a cell of fleet %s" % (cell, ledger["fleet"]))
    out = dict(ledger, cells=dict(ledger["cells"]))
    entry = dict(out["cells"][cell], state=state, reason=reason, updated=now.isoformat())
    if version:
        entry["version"] = version
    if change_record:
        entry["change_record"] = change_record
    out["cells"][cell] = entry
    return out


def retry(ledger: Mapping[str, Any], cell: str, confirmation: str, now: datetime.datetime) -> Dict[str, Any]:
    """Put a failed cell back to pending: only with the typed confirmation ``retry CELL in fleet FLEET``."""
    wanted = "retry %s in fleet %s" % (cell, ledger["fleet"])
    if confirmation != wanted:
        raise InputError("gpufleet_fleet_retry: type exactly %r to put failed cell %s back (got %r)" % (
            wanted, cell, confirmation))
    if ledger["cells"].get(cell, {}).get("state") != "failed":
        raise InputError("gpufleet_fleet_retry: %s has not failed (it is %s); nothing to retry" % (
            cell, ledger["cells"].get(cell, {}).get("state", "not a cell of the fleet")))
    return record(ledger, cell, "pending", now, reason="retried: %s" % confirmation)


def soak(ledger: Mapping[str, Any], ring: str, now: datetime.datetime, done: bool = False) -> Dict[str, Any]:
    """The ledger with ``ring``'s soak started (or, with ``done``, ended) at ``now``."""
    if ring not in ledger["rings"]:
        raise InputError("fleet ledger: %s is not a ring of fleet %s" % (ring, ledger["fleet"]))
    out = dict(ledger, rings=dict(ledger["rings"]))
    change = {"soak_done": now.isoformat()} if done else {"soak_started": now.isoformat(), "soak_done": None}
    out["rings"][ring] = dict(out["rings"][ring], **change)
    return out


def halt(ledger: Mapping[str, Any], ring: str, found: List[Dict[str, Any]], now: datetime.datetime) -> Dict[str, Any]:
    """The ledger of a fleet stopped by ``found`` halt conditions in ``ring``: the halt is recorded with its
    readings, and the ring's soak starts over when the run resumes (a soak interrupted by a halt is not clean)."""
    if not found:
        raise InputError("fleet halt: no halt condition given")
    out = dict(ledger, rings=dict(ledger["rings"]))
    out["rings"][ring] = dict(out["rings"][ring], soak_started=None, soak_done=None)
    out["halt"] = {"ring": ring, "at": now.isoformat(), "conditions": list(found),
                   "cells": sorted({f["cell"] for f in found}),
                   "message": "fleet %s halted in ring %s: %s" % (ledger["fleet"], ring,
                                                                  "; ".join(f["message"] for f in found))}
    return out


def clear_halt(ledger: Mapping[str, Any]) -> Dict[str, Any]:
    """The ledger of a resumed fleet (its halt conditions read clean again): the halt moves to ``last_halt``."""
    return dict(ledger, halt=None, last_halt=ledger.get("halt") or ledger.get("last_halt"))


# -- what the fleet playbook asks -----------------------------------------------------------------------------------
def hops(plan: Mapping[str, Any], cell: str) -> List[str]:
    """The releases ``cell``'s control plane takes, one wave run each. A hop the plan could only name by its minor
    (no ``policy.hop_versions`` entry) is refused: a wave needs the release."""
    info = plan["cells"].get(cell)
    if info is None:
        raise InputError("%s is not a cell of fleet %s" % (cell, plan["fleet"]))
    path = list(info["control_plane_path"]) or ([info["target"]] if not info["at_target"] else [])
    bare = [h for h in path if h.count(".") < 2]
    if bare:
        raise InputError("cell %s: the hop(s) %s have no release; set gpufleet_fleet.policy.hop_versions (such as "
                         "{\"%s\": \"%s.3\"}) so each wave knows the release to take" % (
                             cell, ", ".join(bare), bare[0].lstrip("v"), bare[0]))
    return path


def runnable(plan: Mapping[str, Any], ledger: Mapping[str, Any]) -> Dict[str, List[str]]:
    """Every cell still to move and its hops, checked before anything runs (one bad cell refuses the run)."""
    return {c: hops(plan, c) for c, e in sorted(ledger["cells"].items()) if e["state"] != "done"}


def judge(plan: Mapping[str, Any], cells: List[str], before: Mapping[str, Any],
          after: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The halt conditions that hold for ``cells`` (their readings before the upgrade and now), each cell judged
    on its own ``halt_readings`` against the fleet's thresholds."""
    found: List[Dict[str, Any]] = []
    for cell in cells:
        found += halts(cell, before.get(cell), after.get(cell), plan["halt_policy"],
                       plan["cells"][cell]["halt_readings"])
    return found


def unread_before(plan: Mapping[str, Any], cells: List[str], before: Mapping[str, Any]) -> Dict[str, str]:
    """Per cell of ``cells`` whose reading before its upgrade is missing or lacks one of its ``halt_readings``, why:
    such a cell is not upgraded (every later judgement of it would halt on the gap, after the change)."""
    out: Dict[str, str] = {}
    for cell in cells:
        reading = check_reading(cell, "before", before.get(cell))
        if reading is None:
            out[cell] = "no reading (the reading's output above says why)"
            continue
        why: Mapping[str, Any] = reading.get("unmeasured") or {}
        if not isinstance(why, Mapping):
            why = {}
        gaps = [_gap(name, reading.get(name), why) for name in plan["cells"][cell]["halt_readings"]
                if not _measured(reading.get(name))]
        if gaps:
            out[cell] = "not measured: " + "; ".join(gaps)
    return out


def _gap(name: str, value: Any, why: Mapping[str, Any]) -> str:
    """A reading that is not a number, for unread_before: its name, with why it was not measured or its value."""
    if why.get(name):
        return "%s (%s)" % (name, why[name])
    return name if value is None else "%s (%r is not a number)" % (name, value)


def _measured(value: Any) -> bool:
    try:
        _number(value)
    except (TypeError, ValueError):
        return False
    return True


def paths(out_dir: str, fleet: str) -> Dict[str, str]:
    """The fleet run's files under ``out_dir`` (cell.out_dir's rule): the ledger, the cells' readings (before their
    upgrade, and the latest after it), each cell wave's log, and the fleet report (playbooks/fleet_report.yml) with
    the versions it read from each cell."""
    base = "%s/fleet/%s" % (out_dir.rstrip("/"), fleet)
    return {"dir": base, "ledger": base + "/ledger.json", "readings": base + "/readings", "logs": base + "/logs",
            "report": base + "/report"}


def versions_file(report_dir: str, cell: str) -> str:
    """Where the fleet report keeps the versions it read from ``cell`` (replaced on every report)."""
    return "%s/versions/%s.json" % (report_dir.rstrip("/"), cell)


def max_steps(plan: Mapping[str, Any]) -> int:
    """An upper bound on the fleet playbook's steps (each batch one step, each ring a soak and a promotion, then
    the last look): the playbook loops this many times at most and each step first asks next_step."""
    return sum(len(r["batches"]) + 2 for r in plan["rings"]) + 1


def until_ring(plan: Mapping[str, Any], name: Optional[str]) -> Optional[str]:
    """The ring a run stops after (``gpufleet_fleet_until_ring``), checked against the plan's rings; None: all."""
    if name in (None, ""):
        return None
    rings = [r["ring"] for r in plan["rings"]]
    if name not in rings:
        raise InputError("gpufleet_fleet_until_ring: %s is not a ring of fleet %s; give one of %s" % (
            name, plan["fleet"], ", ".join(rings)))
    return str(name)


def retry_cell(confirmation: str) -> str:
    """The cell named by a retry confirmation ``retry CELL in fleet FLEET`` (retry() checks the rest)."""
    words = (confirmation or "").split()
    if len(words) != 5 or words[0] != "retry" or words[2:4] != ["in", "fleet"]:
        raise InputError("gpufleet_fleet_retry: type 'retry CELL in fleet FLEET' naming the failed cell and the fleet "
                         "(got %r)" % confirmation)
    return words[1]


def resume_interrupted(ledger: Mapping[str, Any], now: datetime.datetime) -> Dict[str, Any]:
    """The ledger as a new run finds it: a cell still ``upgrading`` was left so by a run that ended mid-wave (one
    fleet run at a time), and goes back to pending - its wave resumes from its own per-node ledger."""
    out = dict(ledger)
    for cell, entry in sorted(ledger["cells"].items()):
        if entry["state"] == "upgrading":
            out = record(out, cell, "pending", now, reason="resumed: the run that upgraded it ended mid-wave")
    return out


def halted_cells(ledger: Mapping[str, Any]) -> List[str]:
    """The cells a recorded halt names (also from a halt written before it listed them)."""
    halt = ledger.get("halt") or {}
    return sorted(set(halt.get("cells") or [c.get("cell") for c in halt.get("conditions") or [] if c.get("cell")]))


def readings_file(folder: str, cell: str, target: str, which: str) -> str:
    """Where a cell's readings are kept: ``CELL-TARGET-before.json`` once per target (the baseline every later
    reading of that upgrade is judged against), ``CELL-TARGET-after.json`` the latest one."""
    return "%s/%s-%s-%s.json" % (folder.rstrip("/"), cell, target, which)


def soak_cells(plan: Mapping[str, Any], ring: str, have_before: List[str]) -> List[str]:
    """The cells a ring's soak judges: every cell of the ring with a reading before its upgrade to this target.
    A ring that moved cells (it had batches) but has none is refused: a soak that judges nothing is no soak."""
    info = next((r for r in plan["rings"] if r["ring"] == ring), None)
    if info is None:
        raise InputError("%s is not a ring of fleet %s" % (ring, plan["fleet"]))
    cells = [c for c in info["cells"] if c in have_before]
    if info["batches"] and not cells:
        raise InputError("ring %s: no cell has a reading from before its upgrade to judge the soak against (in the "
                         "fleet's readings); the soak cannot pass on nothing" % ring)
    return cells


# -- the lock: one fleet run at a time per ledger ------------------------------------------------------------------
# A run takes the lock (a file beside the ledger, created only if absent) before it reads the ledger, every ledger
# write checks that the lock is still its own, and the run releases it at its end, failed or not. A lock left by a
# run that was killed is broken only with a typed confirmation naming its id and the fleet, and the break is kept in
# the ledger (``lock_breaks``).
def lock_path(ledger_path: str) -> str:
    return ledger_path + ".lock"


def lock_record(fleet: str, lock_id: str, holder: str, now: datetime.datetime, host: str = "",
                pid: Optional[int] = None, started: Optional[int] = None) -> Dict[str, Any]:
    """The lock file's content; ``host``, ``pid`` and ``started`` name the run's ansible-playbook process, so a
    break can refuse a lock whose run is still alive on the same controller."""
    return {"fleet": fleet, "id": lock_id, "holder": holder, "since": now.isoformat(), "host": host, "pid": pid,
            "started": started}


def break_phrase(fleet: str, lock_id: str) -> str:
    return "break lock %s of fleet %s" % (lock_id, fleet)


def held_elsewhere(fleet: str, lock: Mapping[str, Any]) -> str:
    """The refusal for a run that finds another run's lock."""
    return ("fleet %s is locked by another run: lock %s, taken by %s at %s. One fleet run at a time per ledger: wait "
            "for it to end. If that run is gone (killed, its machine lost), break its lock with -e \"gpufleet_fleet_"
            "break_lock='%s'\"" % (fleet, lock.get("id"), lock.get("holder"), lock.get("since"),
                                   break_phrase(fleet, str(lock.get("id")))))


def check_break(fleet: str, lock: Optional[Mapping[str, Any]], confirmation: str,
                alive: bool = False) -> Mapping[str, Any]:
    """The lock ``confirmation`` breaks: it must name the lock there now, by its id, and the fleet, and its run
    must not be ``alive`` (still running on this controller: two runs would write one ledger)."""
    if not lock:
        raise InputError("gpufleet_fleet_break_lock: fleet %s has no lock to break; run without it" % fleet)
    wanted = break_phrase(fleet, str(lock.get("id")))
    if confirmation != wanted:
        raise InputError("gpufleet_fleet_break_lock: type exactly %r to break the lock taken by %s at %s (got %r)" % (
            wanted, lock.get("holder"), lock.get("since"), confirmation))
    if alive:
        raise PolicyError("gpufleet_fleet_break_lock: lock %s of fleet %s is held by a run still alive on this "
                          "controller (ansible-playbook pid %s, taken by %s at %s); it was not broken. Wait for "
                          "that run, or stop it, then break the lock" % (
                              lock.get("id"), fleet, lock.get("pid"), lock.get("holder"), lock.get("since")))
    return lock


def check_holds(fleet: str, lock: Optional[Mapping[str, Any]], lock_id: Optional[str]) -> None:
    """Refuse a ledger write by a run that does not hold the lock (none taken, or broken and taken by another)."""
    if not lock_id:
        raise InputError("lock: this call writes fleet %s's ledger; give the id the lock action returned "
                         "(playbooks/fleet.yml takes it first)" % fleet)
    if not lock:
        raise PolicyError("fleet %s: this run's lock %s is gone (removed by hand?); the ledger is not written. Run "
                          "the fleet again" % (fleet, lock_id))
    if lock.get("id") != lock_id:
        raise PolicyError("fleet %s: the ledger's lock is not this run's %s but lock %s, taken by %s at %s (this "
                          "run's was broken?); the ledger is not written. Stop this run" % (
                              fleet, lock_id, lock.get("id"), lock.get("holder"), lock.get("since")))


def record_break(ledger: Mapping[str, Any], broken: Mapping[str, Any], by: Mapping[str, Any]) -> Dict[str, Any]:
    """The ledger with the broken lock kept: whose it was, since when, who broke it and when."""
    entry = {"id": broken.get("id"), "holder": broken.get("holder"), "since": broken.get("since"),
             "broken_by": by["holder"], "broken_at": by["since"], "new_lock": by["id"]}
    return dict(ledger, lock_breaks=list(ledger.get("lock_breaks") or []) + [entry])
