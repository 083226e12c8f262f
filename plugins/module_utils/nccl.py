# Copyright: gpufleet contributors
# Apache License 2.0
"""nccl-tests ``all_reduce_perf`` parser and bandwidth gate (docs/reference.md section 5).

Reads the stdout table (current layout with a ``root`` column and ``#wrong``; the pre-Aug-2022 layout without
``root`` and with a float ``error`` column; the per-iteration layout with extra ``i_*`` columns) and the ``-J``
JSON file (``results[]{size, count, type, redop, root, out_of_place{time, alg_bw, bus_bw, nwrong}, in_place}``,
``out_of_bounds{count, okay}``, ``average_bus_bandwidth{bandwidth, okay}``).
"""
from __future__ import annotations

import math
import re
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, opted_out, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import bounded_text, load_document

_ERROR_LINE = re.compile(r"^(?P<host>\S+): Test (?P<kind>NCCL|CUDA) failure (?P<where>\S+) '?(?P<msg>.*?)'?\s*$")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<n>\d+)\s*(?P<state>OK|FAILED)?")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<bw>[0-9.eE+-]+|nan)")
_RANK = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d+)")
_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2, "G": 1024 ** 3, "GB": 1024 ** 3}


def parse_size(value: Any, what: str = "size") -> int:
    """``8589934592``, ``8G``, ``512M``, ``1K`` (binary units, as nccl-tests' -b/-e) to bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = re.fullmatch(r"\s*([0-9]+)\s*([KMG]?B?)\s*", str(value), re.IGNORECASE | re.ASCII)
    if not match:
        raise InputError("%s: %r is not a size; use bytes or a number with K, M or G (e.g. 8G)" % (what, value))
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]


def parse_output(text: str) -> Dict[str, Any]:
    """Parse stdout or -J JSON into ``{format, rows[{size, count, type, redop, root, oop_busbw, ip_busbw,
    oop_algbw, ip_algbw, wrong}], out_of_bounds, avg_busbw, errors[], ranks, hosts[]}``."""
    if not isinstance(text, str) or not bounded_text(text, "all_reduce_perf").strip():
        raise ParseError("all_reduce_perf: output is empty (did the test start?)")
    if text.lstrip().startswith("{"):
        return _parse_json(load_document(text, "all_reduce_perf -J"))
    return _parse_stdout(text)


def _num(token: str) -> Optional[float]:
    """A measured number; None for N/A, nan and non-finite values (``inf``, ``1e309``): not a measurement."""
    if token in ("N/A", "nan", "-nan"):
        return None
    value = float(token)
    return value if math.isfinite(value) else None


def _parse_stdout(text: str) -> Dict[str, Any]:
    rows: List[Dict[str, Any]] = []
    errors: List[Dict[str, str]] = []
    hosts: List[str] = []
    ranks = 0
    oob: Optional[int] = None
    avg: Optional[float] = None
    avg_seen = False
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
                avg_seen = True
                try:
                    avg = _num(m.group("bw"))
                except ValueError:
                    raise ParseError("all_reduce_perf: line %d: average bus bandwidth %r is not a number" % (
                        lineno, m.group("bw")[:40]))
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
    if not errors and (oob is None or not avg_seen):
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
        # Unmeasured (None) when either column is N/A: all_reduce_perf prints N/A when run with -c 0.
        if any(w is None for w in wrong_values):
            wrong = None
        elif fmt == "legacy":
            # the legacy float error column is a max relative error, not a count; > 0 counts as wrong
            wrong = sum(1 for w in wrong_values if w is not None and w > 1e-6)
        else:
            wrong = int(sum(w or 0 for w in wrong_values))
        return {"size": int(head[0]), "count": int(head[1]), "type": head[2], "redop": head[3], "root": int(head[4]),
                "oop_time": _num(oop[0]), "oop_algbw": _num(oop[1]), "oop_busbw": _num(oop[2]),
                "ip_time": _num(ip[0]), "ip_algbw": _num(ip[1]), "ip_busbw": _num(ip[2]), "wrong": wrong}
    except (ValueError, IndexError, OverflowError) as exc:
        raise ParseError("all_reduce_perf: malformed data row at line %d (%s): %r" % (
            lineno, exc, " ".join(tokens)[:300]))


def _parse_json(doc: Any) -> Dict[str, Any]:
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ParseError("all_reduce_perf -J: expected an object with a results list")
    rows = []
    for i, res in enumerate(doc["results"]):
        try:
            oop = res.get("out_of_place") or {}
            ip = res.get("in_place") or {}
            # nwrong missing from either half is unmeasured, as N/A is in the table.
            nw = [_f(x.get("nwrong")) for x in (oop, ip)]
            wrong = None if any(w is None for w in nw) else int(sum(w or 0 for w in nw))
            rows.append({"size": int(res["size"]), "count": int(res["count"]), "type": str(res.get("type", ""))[:20],
                         "redop": str(res.get("redop", ""))[:20],
                         "root": int(str(res.get("root", "-1")).strip() or -1),
                         "oop_time": _f(oop.get("time")), "oop_algbw": _f(oop.get("alg_bw")),
                         "oop_busbw": _f(oop.get("bus_bw")), "ip_time": _f(ip.get("time")),
                         "ip_algbw": _f(ip.get("alg_bw")), "ip_busbw": _f(ip.get("bus_bw")), "wrong": wrong})
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise ParseError("all_reduce_perf -J: results[%d] is malformed: %s" % (i, str(exc)[:200]))
    oob_doc, avg_doc, config = doc.get("out_of_bounds"), doc.get("average_bus_bandwidth"), doc.get("config")
    oob = oob_doc.get("count") if isinstance(oob_doc, dict) else None
    avg = avg_doc.get("bandwidth") if isinstance(avg_doc, dict) else None
    listed = config.get("devices") if isinstance(config, dict) else None
    devices = [d for d in listed if isinstance(d, dict)] if isinstance(listed, list) else []
    raw_errors = doc.get("errors")
    errors = raw_errors if isinstance(raw_errors, list) else []
    try:
        oob_count = None if oob is None or isinstance(oob, bool) else int(oob)
    except (TypeError, ValueError, OverflowError):
        raise ParseError("all_reduce_perf -J: out_of_bounds.count is %r, not a number" % (str(oob)[:50],))
    return {"format": "json", "rows": rows, "out_of_bounds": oob_count, "avg_busbw": _f(avg),
            "errors": [{"host": "", "kind": "NCCL", "where": "", "message": str(e)[:500]} for e in errors if e],
            "ranks": len(devices), "hosts": sorted({str(d.get("hostname", ""))[:100] for d in devices} - {""}),
            "concluded": True}


def _f(value: Any) -> Optional[float]:
    """A finite number from JSON; None when missing, nan or not finite."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ParseError("all_reduce_perf -J: %r is not a number" % (str(value)[:50],))
    return number if math.isfinite(number) else None


def busbw_by_size(parsed: Mapping[str, Any]) -> Dict[int, float]:
    """Best of out-of-place and in-place bus bandwidth per message size (GB/s); sizes without a finite,
    non-negative value are left out (unmeasured)."""
    out: Dict[int, float] = {}
    for row in parsed["rows"]:
        values = [v for v in (row["oop_busbw"], row["ip_busbw"]) if v is not None and v >= 0]
        if values:
            out[row["size"]] = max(values)
    return out


def judge_runs(runs: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any], node: str = "") -> Dict[str, Any]:
    """Judge several parsed runs against a validated pool baseline (``nccl``: ``busbw_gbps`` {size: GB/s},
    ``tolerance_pct``, ``min_runs``; ``opt_out.nccl``).

    The median over runs of the bus bandwidth at each baseline size must be at least ``baseline * (1 -
    tolerance)``. Any wrong element, out-of-bounds value or NCCL/CUDA error fails; so does anything unmeasured: a
    ``#wrong`` of N/A (run with ``-c 0``), a run without the out-of-bounds count, a size without a finite value."""
    subject = node or "node"
    if baseline["opt_out"].get("nccl"):
        summary = summarize([opted_out("nccl_busbw", subject, baseline["opt_out"]["nccl"])])
        summary["median_busbw"] = {}
        return summary
    policy = baseline["nccl"]
    if not runs:
        raise InputError("nccl: no runs to judge; give at least one all_reduce_perf output")
    expected = {parse_size(k, "baseline.nccl.busbw_gbps key"): float(v) for k, v in policy["busbw_gbps"].items()}
    tolerance = float(policy["tolerance_pct"]) / 100.0
    min_runs = int(policy["min_runs"])
    checks: List[Check] = [Check("nccl_runs", subject, len(runs) >= min_runs, len(runs), ">= %d" % min_runs,
                                 "bandwidth varies run to run; judge a median")]
    for i, run in enumerate(runs):
        label = "%s run %d" % (subject, i + 1)
        for err in run["errors"]:
            checks.append(Check("nccl_error", label, False, "%s failure %s" % (err["kind"], err["message"]),
                                "no error", err["host"]))
        unmeasured = sum(1 for r in run["rows"] if r["wrong"] is None)
        if unmeasured or not run["rows"]:
            checks.append(Check("nccl_wrong_elements", label, False, "not measured (#wrong N/A in %d row(s))"
                                % unmeasured if run["rows"] else "no data rows", 0,
                                "all_reduce_perf checks results only with -c 1 (its default); drop -c 0"))
        else:
            wrong = sum(r["wrong"] for r in run["rows"])
            checks.append(Check("nccl_wrong_elements", label, wrong == 0, wrong, 0))
        oob = run["out_of_bounds"]
        checks.append(Check("nccl_out_of_bounds", label, oob == 0, "not reported" if oob is None else oob, 0))
    per_run = [busbw_by_size(r) for r in runs]
    medians: Dict[int, Optional[float]] = {}
    for size, base in sorted(expected.items()):
        values = [r[size] for r in per_run if size in r]
        floor = base * (1.0 - tolerance)
        if len(values) < len(runs):
            medians[size] = None
            checks.append(Check("nccl_busbw", "%s size %s" % (subject, human_size(size)), False,
                                "not measured in %d of %d run(s)" % (len(runs) - len(values), len(runs)),
                                ">= %.2f GB/s" % floor, "size not in the run or no finite bandwidth; widen -b/-e"))
            continue
        med = statistics.median(values)
        medians[size] = med
        checks.append(Check("nccl_busbw", "%s size %s" % (subject, human_size(size)), med >= floor, round(med, 2),
                            ">= %.2f GB/s (%.2f - %g%%)" % (floor, base, tolerance * 100),
                            "median of %d run(s)" % len(values)))
    summary = summarize(checks)
    summary["median_busbw"] = {str(k): v for k, v in medians.items()}
    return summary


def human_size(size: int) -> str:
    for unit, factor in (("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if size >= factor and size % factor == 0:
            return "%d%s" % (size // factor, unit)
    return str(size)
