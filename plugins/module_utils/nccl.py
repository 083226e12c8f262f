# Copyright: gpufleet contributors
# Apache License 2.0
"""nccl-tests ``all_reduce_perf`` parser and bandwidth gate (REFERENCE.md section 5).

Reads the stdout table (current layout with a ``root`` column and ``#wrong``; the pre-Aug-2022 layout without
``root`` and with a float ``error`` column; the per-iteration layout with extra ``i_*`` columns) and the ``-J``
JSON file (``results[]{size, count, type, redop, root, out_of_place{time, alg_bw, bus_bw, nwrong}, in_place}``,
``out_of_bounds{count, okay}``, ``average_bus_bandwidth{bandwidth, okay}``).
"""
from __future__ import annotations

import re
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_document

_ERROR_LINE = re.compile(r"^(?P<host>\S+): Test (?P<kind>NCCL|CUDA) failure (?P<where>\S+) '?(?P<msg>.*?)'?\s*$")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<n>\d+)\s*(?P<state>OK|FAILED)?")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<bw>[0-9.eE+-]+|nan)")
_RANK = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d+)")
_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2, "G": 1024 ** 3, "GB": 1024 ** 3}


def parse_size(value: Any, what: str = "size") -> int:
    """``8589934592``, ``8G``, ``512M``, ``1K`` (binary units, as nccl-tests' -b/-e) to bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = re.match(r"^\s*(\d+)\s*([KMG]?B?)\s*$", str(value), re.IGNORECASE)
    if not match:
        raise InputError("%s: %r is not a size; use bytes or a number with K, M or G (e.g. 8G)" % (what, value))
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]


def parse_output(text: str) -> Dict[str, Any]:
    """Parse stdout or -J JSON into ``{format, rows[{size, count, type, redop, root, oop_busbw, ip_busbw,
    oop_algbw, ip_algbw, wrong}], out_of_bounds, avg_busbw, errors[], ranks, hosts[]}``."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("all_reduce_perf: output is empty (did the test start?)")
    if text.lstrip().startswith("{"):
        return _parse_json(load_document(text, "all_reduce_perf -J"))
    return _parse_stdout(text)


def _num(token: str) -> Optional[float]:
    if token in ("N/A", "nan", "-nan"):
        return None
    return float(token)


def _parse_stdout(text: str) -> Dict[str, Any]:
    rows: List[Dict[str, Any]] = []
    errors: List[Dict[str, str]] = []
    hosts: List[str] = []
    ranks = 0
    oob: Optional[int] = None
    avg: Optional[float] = None
    fmt: Optional[str] = None
    concluded = False
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        m = _ERROR_LINE.match(stripped)
        if m:
            errors.append({"host": m.group("host"), "kind": m.group("kind"), "where": m.group("where"),
                           "message": m.group("msg")})
            continue
        if stripped.startswith("#"):
            if "size" in stripped and "count" in stripped and "type" in stripped:
                fmt = "current" if " root " in stripped + " " else "legacy"
                if "i_min" in stripped:
                    fmt = "per-iter"
            m = _RANK.match(stripped)
            if m:
                ranks += 1
                if m.group("host") not in hosts:
                    hosts.append(m.group("host"))
            m = _OOB.match(stripped)
            if m:
                oob = int(m.group("n"))
            m = _AVG.match(stripped)
            if m:
                avg = _num(m.group("bw"))
            if stripped.startswith("# Collective test concluded"):
                concluded = True
            continue
        tokens = stripped.split()
        if not tokens[0].isdigit():
            continue  # NCCL INFO/WARN chatter
        if fmt is None:
            raise ParseError("all_reduce_perf: data row at line %d before the column header" % lineno)
        rows.append(_row(tokens, fmt, lineno))
    if fmt is None and not errors:
        raise ParseError("all_reduce_perf: no result table found (not all_reduce_perf output?)")
    if not errors and (oob is None or avg is None):
        raise ParseError("all_reduce_perf: output ends before the summary footer (truncated? the test may have "
                         "been killed); %d data rows read" % len(rows))
    return {"format": fmt or "unknown", "rows": rows, "out_of_bounds": oob, "avg_busbw": avg, "errors": errors,
            "ranks": ranks, "hosts": hosts, "concluded": concluded}


def _row(tokens: List[str], fmt: str, lineno: int) -> Dict[str, Any]:
    try:
        if fmt == "legacy":
            # size count type redop | time algbw busbw error | time algbw busbw error
            if len(tokens) < 12:
                raise ValueError("expected 12 columns")
            head, oop, ip = tokens[:4] + ["-1"], tokens[4:8], tokens[8:12]
        elif fmt == "per-iter":
            # size count type redop root | time algbw busbw #wrong i_min i_max i_p99 i_cv% | (same) in-place
            if len(tokens) < 21:
                raise ValueError("expected 21 columns")
            head, oop, ip = tokens[:5], tokens[5:9], tokens[13:17]
        else:
            if len(tokens) < 13:
                raise ValueError("expected 13 columns")
            head, oop, ip = tokens[:5], tokens[5:9], tokens[9:13]
        wrong_values = [_num(oop[3]), _num(ip[3])]
        if fmt == "legacy":
            # the legacy float error column is a max relative error, not a count; > 0 counts as wrong
            wrong = sum(1 for w in wrong_values if w is not None and w > 1e-6) or None
            if wrong is None and all(w is not None for w in wrong_values):
                wrong = 0
        else:
            wrong = None if all(w is None for w in wrong_values) else int(sum(w or 0 for w in wrong_values))
        return {"size": int(head[0]), "count": int(head[1]), "type": head[2], "redop": head[3], "root": int(head[4]),
                "oop_time": _num(oop[0]), "oop_algbw": _num(oop[1]), "oop_busbw": _num(oop[2]),
                "ip_time": _num(ip[0]), "ip_algbw": _num(ip[1]), "ip_busbw": _num(ip[2]), "wrong": wrong}
    except (ValueError, IndexError) as exc:
        raise ParseError("all_reduce_perf: malformed data row at line %d (%s): %r" % (lineno, exc, " ".join(tokens)))


def _parse_json(doc: Any) -> Dict[str, Any]:
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ParseError("all_reduce_perf -J: expected an object with a results list")
    rows = []
    for i, res in enumerate(doc["results"]):
        try:
            oop = res.get("out_of_place") or {}
            ip = res.get("in_place") or {}
            nw = [x.get("nwrong") for x in (oop, ip) if x]
            wrong = None if all(w is None for w in nw) else int(sum(float(w or 0) for w in nw))
            rows.append({"size": int(res["size"]), "count": int(res["count"]), "type": res.get("type", ""),
                         "redop": res.get("redop", ""), "root": int(str(res.get("root", "-1")).strip() or -1),
                         "oop_time": _f(oop.get("time")), "oop_algbw": _f(oop.get("alg_bw")),
                         "oop_busbw": _f(oop.get("bus_bw")), "ip_time": _f(ip.get("time")),
                         "ip_algbw": _f(ip.get("alg_bw")), "ip_busbw": _f(ip.get("bus_bw")), "wrong": wrong})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ParseError("all_reduce_perf -J: results[%d] is malformed: %s" % (i, exc))
    oob = (doc.get("out_of_bounds") or {}).get("count")
    avg = (doc.get("average_bus_bandwidth") or {}).get("bandwidth")
    hosts = sorted({d.get("hostname", "") for d in (doc.get("config") or {}).get("devices") or []} - {""})
    return {"format": "json", "rows": rows, "out_of_bounds": oob, "avg_busbw": _f(avg),
            "errors": [{"host": "", "kind": "NCCL", "where": "", "message": e} for e in doc.get("errors") or [] if e],
            "ranks": len((doc.get("config") or {}).get("devices") or []), "hosts": hosts, "concluded": True}


def _f(value: Any) -> Optional[float]:
    if value is None or value == "nan":
        return None
    return float(value)


def busbw_by_size(parsed: Mapping[str, Any]) -> Dict[int, float]:
    """Best of out-of-place and in-place bus bandwidth per message size (GB/s)."""
    out: Dict[int, float] = {}
    for row in parsed["rows"]:
        values = [v for v in (row["oop_busbw"], row["ip_busbw"]) if v is not None]
        if values:
            out[row["size"]] = max(values)
    return out


def judge_runs(runs: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any], node: str = "") -> Dict[str, Any]:
    """Judge several parsed runs. ``baseline``: ``busbw_gbps`` {size: GB/s}, ``tolerance_pct``, ``min_runs``.

    The median over runs of the bus bandwidth at each baseline size must be at least ``baseline * (1 -
    tolerance)``. Any wrong element, out-of-bounds value or NCCL/CUDA error fails."""
    subject = node or "node"
    if not runs:
        raise InputError("nccl: no runs to judge; give at least one all_reduce_perf output")
    expected = {parse_size(k, "baseline.nccl.busbw_gbps key"): float(v) for k, v in baseline["busbw_gbps"].items()}
    tolerance = float(baseline.get("tolerance_pct", 10.0)) / 100.0
    min_runs = int(baseline.get("min_runs", 1))
    checks: List[Check] = [Check("nccl_runs", subject, len(runs) >= min_runs, len(runs), ">= %d" % min_runs,
                                 "bandwidth varies run to run; judge a median")]
    for i, run in enumerate(runs):
        label = "%s run %d" % (subject, i + 1)
        for err in run["errors"]:
            checks.append(Check("nccl_error", label, False, "%s failure %s" % (err["kind"], err["message"]),
                                "no error", err["host"]))
        wrong = sum(r["wrong"] or 0 for r in run["rows"])
        checks.append(Check("nccl_wrong_elements", label, wrong == 0, wrong, 0))
        if run["out_of_bounds"] is not None:
            checks.append(Check("nccl_out_of_bounds", label, run["out_of_bounds"] == 0, run["out_of_bounds"], 0))
    per_run = [busbw_by_size(r) for r in runs]
    medians: Dict[int, Optional[float]] = {}
    for size, base in sorted(expected.items()):
        values = [r[size] for r in per_run if size in r]
        floor = base * (1.0 - tolerance)
        if not values:
            medians[size] = None
            checks.append(Check("nccl_busbw", "%s size %s" % (subject, _human(size)), False, "not measured",
                                ">= %.2f GB/s" % floor, "size not in the run; widen -b/-e"))
            continue
        med = statistics.median(values)
        medians[size] = med
        checks.append(Check("nccl_busbw", "%s size %s" % (subject, _human(size)), med >= floor, round(med, 2),
                            ">= %.2f GB/s (%.2f - %g%%)" % (floor, base, tolerance * 100),
                            "median of %d run(s)" % len(values)))
    summary = summarize(checks)
    summary["median_busbw"] = {str(k): v for k, v in medians.items()}
    return summary


def _human(size: int) -> str:
    for unit, factor in (("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if size >= factor and size % factor == 0:
            return "%d%s" % (size // factor, unit)
    return str(size)
