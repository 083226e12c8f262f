# Copyright: gpufleet contributors
# Apache License 2.0
"""nccl-tests ``all_reduce_perf`` parser and bandwidth gate (docs/reference.md section 5).

Reads the stdout table and the ``-J`` JSON file (``results[]{size, count, type, redop, root, out_of_place{time,
alg_bw, bus_bw, nwrong}, in_place}``, ``out_of_bounds{count, okay}``, ``average_bus_bandwidth{bandwidth, okay}``).

Stdout layouts understood, by their column headings: the current one (``size count type redop root`` then ``time
algbw busbw #wrong`` out of place and in place; ``cputime`` for ``time`` with ``-C``; the per-iteration ``i_min
i_max i_p99 i_cv%`` columns), printed by nccl-tests since the Aug 2022 releases (2.13 to 2.18 seen), and the earlier
one without ``root`` and with a floating-point ``error`` column (nccl-tests 2.x before Aug 2022). Any other heading
is refused, naming what was found.

Launcher prefixes are read and stripped: ``mpirun --tag-output`` (``[JOB,RANK]<stdout>:``, ``<stderr>:``,
``<stddiag>:``), ``srun --label`` (``N: ``) and ``kubectl logs --prefix`` (``[pod/NAME/CONTAINER] ``, also in front
of the two others). Each rank's stream (and each pod's) is read on its own; rank 0 of an MPI build prints the one
table. A mix of prefixes, an unknown prefix in front of nccl-tests' lines, a tag in the middle of a line, two tables
or two run headers in one stream, rows out of order and tables from several ranks that disagree are refused: they
mean interleaved or concatenated output, or an nccl-tests built without MPI started once per process.
"""
from __future__ import annotations

import math
import re
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, opted_out, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import bounded_text, load_document

TOOL = "all_reduce_perf"
UNDERSTOOD = ("nccl-tests 2.x stdout: the layout with root and #wrong columns (releases since Aug 2022, 2.13 to 2.18 "
              "seen; also -C cputime and the per-iteration i_* columns) or the earlier one with a float error column "
              "and no root")
_ERROR_LINE = re.compile(r"^(?P<host>\S+): Test (?P<kind>NCCL|CUDA) failure (?P<where>\S+) '?(?P<msg>.*?)'?\s*$")
_TEST_FAILURE = re.compile(r"^\.\.\s+(?P<host>\S+)\s+pid\s+(?P<pid>\d+):\s+Test failure\s+(?P<where>\S+)\s*$")
_LAST_ERROR = re.compile(r"^#\s*error:\s*(?P<msg>.+)$")
# What the launcher prints when a rank dies (Open MPI's mpirun/prterun, Slurm's srun): the table rank 0 printed may
# look complete, but a rank did not finish.
_LAUNCHER_FAILURE = re.compile(r"^(?:(?:mpirun|prterun) (?:noticed that process rank \d+ .{0,200}exited on signal"
                               r"|has exited due to process rank \d+)|Primary job +terminated normally, but \d+ process"
                               r"|srun: error: .{0,200}(?:exited with exit code [1-9]|Terminated|Killed)"
                               r"|slurmstepd: error: .{0,200}(?:CANCELLED|oom-kill|Killed))")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<n>\d+)\s*(?P<state>OK|FAILED)?")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<bw>[0-9.eE+-]+|nan|-nan|inf|-inf)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(?P<name>\S+)")
_NTHREAD = re.compile(r"^#\s*nThread\s+\d+")
# "#  Rank %2d Group %2d Pid %6d on %10s device %2d [...] NAME" (current); "#   Rank %2d Pid %6d on ..." (before the
# Group field).
_RANK = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+"
                   r"device\s+(?P<dev>\d+)")
_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2, "G": 1024 ** 3, "GB": 1024 ** 3}

# Launcher prefixes: mpirun --tag-output, srun --label, kubectl logs --prefix ("[pod/%s/%s] ", kubectl
# pkg/cmd/logs/logs.go addPrefixIfNeeded).
_TAG_MPIRUN = re.compile(r"^\[(?P<job>\d+),(?P<rank>\d+)\]<(?P<chan>stdout|stderr|stddiag)>:")
_TAG_SRUN = re.compile(r"^\s*(?P<rank>\d+):(?: |$)")
_TAG_KUBECTL = re.compile(r"^\[pod/(?P<pod>[^/\]\s]+)/(?P<container>[^\]\s]*)\] ")
_TAG_INSIDE = re.compile(r"\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:|\[pod/[^/\]\s]+/[^\]\s]*\] ")
# Lines only nccl-tests prints; one found after other text means a prefix this reader does not know.
_MARKER = re.compile(r"#\s*(?:nThread\s|Using devices|Rank\s+\d+\s|Out of bounds values|Avg bus bandwidth|"
                     r"Collective test|nccl-tests version|size\s+count\s)")

# Column headings (after "#") of each stdout layout: name, heading, (first token of out-of-place, of in-place).
_HEAD = ("size", "count", "type", "redop", "root")
_HALF = ("time", "algbw", "busbw", "#wrong")
_ITER = ("i_min", "i_max", "i_p99", "i_cv%")
_LAYOUTS: Dict[Tuple[str, ...], Tuple[str, int, int]] = {
    _HEAD + _HALF + _HALF: ("current", 5, 9),
    _HEAD + ("cputime",) + _HALF[1:] + ("cputime",) + _HALF[1:]: ("current", 5, 9),
    _HEAD + _HALF + _ITER + _HALF + _ITER: ("per-iter", 5, 13),
    _HEAD[:4] + ("time", "algbw", "busbw", "error") * 2: ("legacy", 4, 8),
}
# Bytes per element of each type name nccl-tests prints (src/common.cu test_typenames; "char" and "int" are the
# NCCL 1 names).
_WORD = {"int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2, "bfloat16": 2, "int32": 4,
         "uint32": 4, "int": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8}
_REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum")
# The legacy "error" column is the largest absolute difference from the expected result over all ranks. nccl-tests
# counted it wrong when it exceeded DeltaMaxValue(type) * (nranks - 1) (src/common.cu CheckData and DeltaMaxValue,
# before the Aug 2022 #wrong count): 1e-2 for half and bfloat16, 1e-5 for float, 1e-12 for double, 1e-200 (exact)
# for the integer types. Its "Out of bounds values" footer counts the same verdicts and stays authoritative where
# the printed error ("%5.0le", one digit) is too coarse to tell.
_DELTA_MAX = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12, "int8": 1e-200, "uint8": 1e-200,
              "int32": 1e-200, "uint32": 1e-200, "int64": 1e-200, "uint64": 1e-200, "char": 1e-200, "int": 1e-200}


def parse_size(value: Any, what: str = "size") -> int:
    """``8589934592``, ``8G``, ``512M``, ``1K`` (binary units, as nccl-tests' -b/-e) to bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = re.fullmatch(r"\s*([0-9]+)\s*([KMG]?B?)\s*", str(value), re.IGNORECASE | re.ASCII)
    if not match:
        raise InputError("%s: %r is not a size; use bytes or a number with K, M or G (e.g. 8G)" % (what, value))
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]


def legacy_tolerance(dtype: str, ranks: int) -> float:
    """The largest ``error`` nccl-tests' pre-Aug-2022 layout accepted for ``dtype`` over ``ranks`` ranks."""
    if dtype not in _DELTA_MAX:
        raise ParseError("%s: data type %r in the error-column layout is not one nccl-tests checked (%s)" % (
            TOOL, dtype[:20], ", ".join(sorted(_DELTA_MAX))))
    return _DELTA_MAX[dtype] * (ranks - 1)


def parse_output(text: str) -> Dict[str, Any]:
    """Parse stdout or -J JSON into ``{format, rows[{size, count, type, redop, root, oop_busbw, ip_busbw,
    oop_algbw, ip_algbw, wrong}], out_of_bounds, avg_busbw, errors[], ranks, hosts[], concluded, prefix, stream}``.
    ``prefix`` names the launcher prefix read (None without one); ``stream`` the rank or pod whose table it is."""
    if not isinstance(text, str) or not bounded_text(text, TOOL).strip():
        raise ParseError("%s: output is empty (did the test start?)" % TOOL)
    if text.lstrip().startswith("{"):
        return _parse_json(load_document(text, "all_reduce_perf -J"))
    return _parse_stdout(text)


def _num(token: str) -> Optional[float]:
    """A measured number; None for N/A, nan and non-finite values (``inf``, ``1e309``): not a measurement."""
    if token in ("N/A", "nan", "-nan"):
        return None
    value = float(token)
    return value if math.isfinite(value) else None


Key = Tuple[str, str, str, str]  # (pod/container, launcher, rank, channel); "" where absent


def _split_prefix(line: str) -> Tuple[Key, str]:
    """(stream key, the line without its launcher prefixes)."""
    pod = launcher = rank = chan = ""
    m = _TAG_KUBECTL.match(line)
    if m:
        pod, line = "%s/%s" % (m.group("pod"), m.group("container")), line[m.end():]
    m = _TAG_MPIRUN.match(line)
    if m:
        launcher, rank, chan = "mpirun", "%s,%s" % (m.group("job"), m.group("rank")), m.group("chan")
        line = line[m.end():]
    else:
        m = _TAG_SRUN.match(line)
        if m:
            launcher, rank, line = "srun", m.group("rank"), line[m.end():]
    return (pod, launcher, rank, chan), line


def _prefix_kind(key: Key) -> str:
    kinds = (["kubectl logs --prefix"] if key[0] else []) + (
        {"mpirun": ["mpirun --tag-output"], "srun": ["srun --label"]}.get(key[1], []))
    return " + ".join(kinds) or "no prefix"


def _stream_label(key: Key) -> str:
    pod, launcher, rank, chan = key
    parts = ["pod " + pod] if pod else []
    if launcher == "mpirun":
        parts.append("rank %s %s" % (rank.split(",")[1], chan))
    elif launcher == "srun":
        parts.append("task " + rank)
    return ", ".join(parts)


def _is_content(stripped: str) -> bool:
    """A line nccl-tests itself prints: a '#' line, a data row, an error line."""
    tokens = stripped.split()
    return (stripped.startswith("#") or (len(tokens) >= 11 and tokens[0].isdigit() and tokens[1].isdigit())
            or "Test NCCL failure" in stripped or "Test CUDA failure" in stripped
            or bool(_TEST_FAILURE.match(stripped)))


def _parse_stdout(text: str) -> Dict[str, Any]:
    streams: Dict[Key, List[Tuple[int, str]]] = {}
    kinds: Dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        key, content = _split_prefix(raw)
        inside = _TAG_INSIDE.search(content)
        if inside:
            raise ParseError("%s: line %d: a launcher tag %r in the middle of a line: output of several ranks "
                             "interleaved (unbuffered writes); rerun and keep each rank's lines whole" % (
                                 TOOL, lineno, inside.group(0)[:60]))
        stripped = content.strip()
        if not stripped:
            continue
        marker = _MARKER.search(stripped)
        if marker and marker.start() > 0 and not stripped.startswith("#"):
            raise ParseError("%s: line %d: %r in front of nccl-tests' output is not a prefix this reader knows "
                             "(it reads mpirun --tag-output '[1,0]<stdout>:', srun --label '0: ' and kubectl logs "
                             "--prefix '[pod/NAME/CONTAINER] '; drop other prefixes such as --timestamps)" % (
                                 TOOL, lineno, stripped[:marker.start()][:60]))
        if _is_content(stripped):
            kinds.setdefault(_prefix_kind(key), lineno)
        streams.setdefault(key, []).append((lineno, stripped))
    if len(kinds) > 1:
        found = "; ".join("%s from line %d" % (k, n) for k, n in sorted(kinds.items(), key=lambda i: i[1]))
        raise ParseError("%s: nccl-tests' lines carry different prefixes (%s): output of different launchers or "
                         "runs mixed; give one run's output as its launcher printed it" % (TOOL, found))
    read = [_read_stream(key, lines) for key, lines in streams.items()]
    errors = sorted((e for r in read for e in r["errors"]), key=lambda e: e["line"])
    tables = [r for r in read if r["fmt"] is not None]
    if not tables:
        if errors:
            return {"format": "unknown", "rows": [], "out_of_bounds": None, "avg_busbw": None,
                    "errors": [_public(e) for e in errors], "ranks": max((len(r["ranks"]) for r in read), default=0),
                    "hosts": _hosts(max(read, key=lambda r: len(r["ranks"]))["ranks"]),
                    "concluded": False, "prefix": _prefix_of(kinds), "stream": ""}
        raise ParseError("%s: no result table found (not all_reduce_perf output? expected %s)" % (TOOL, UNDERSTOOD))
    chosen = _choose(tables)
    if not errors and (chosen["oob"] is None or not chosen["avg_seen"]):
        raise ParseError("%s: output ends before the summary footer (truncated? the test may have been killed); %d "
                         "data rows read" % (chosen["where"], len(chosen["rows"])))
    return {"format": chosen["fmt"], "rows": chosen["rows"], "out_of_bounds": chosen["oob"],
            "avg_busbw": chosen["avg"], "errors": [_public(e) for e in errors], "ranks": len(chosen["ranks"]),
            "hosts": _hosts(chosen["ranks"]), "concluded": chosen["concluded"], "prefix": _prefix_of(kinds),
            "stream": chosen["label"]}


def _prefix_of(kinds: Mapping[str, int]) -> Optional[str]:
    kind = next(iter(kinds), "no prefix")
    return None if kind == "no prefix" else kind


def _public(error: Mapping[str, Any]) -> Dict[str, str]:
    return {k: error[k] for k in ("host", "kind", "where", "message")}


def _hosts(ranks: Sequence[Tuple[int, int, str, int]]) -> List[str]:
    hosts: List[str] = []
    for rank in ranks:
        if rank[2] not in hosts:
            hosts.append(rank[2])
    return hosts


def _choose(tables: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The one table; of several (every rank printed one), rank 0's when all describe the same communicator and
    sizes, else a clear error."""
    if len(tables) == 1:
        return tables[0]
    first = tables[0]
    keys = [_row_key(r) for r in first["rows"]]
    same = all(t["ranks"] == first["ranks"] and [_row_key(r) for r in t["rows"]] == keys for t in tables[1:])
    if not same:
        raise ParseError("%s: %d streams each printed a result table and they disagree (%s): every process ran its "
                         "own communicator (nccl-tests built without MPI=1 and started once per process?) or "
                         "several runs were mixed; no table measured the whole job" % (
                             TOOL, len(tables), "; ".join("%s: %d rank(s) on %s, %d rows" % (
                                 t["label"] or "untagged", len(t["ranks"]), ",".join(_hosts(t["ranks"])) or "no host",
                                 len(t["rows"])) for t in tables[:4])))
    zero = [t for t in tables if t["rank"] in ("0", "")]
    return zero[0] if zero else first


def _row_key(row: Mapping[str, Any]) -> Tuple[Any, ...]:
    return (row["size"], row["count"], row["type"], row["redop"], row["root"])


def _read_stream(key: Key, lines: List[Tuple[int, str]]) -> Dict[str, Any]:
    label = _stream_label(key)
    where = "%s (%s)" % (TOOL, label) if label else TOOL
    st: Dict[str, Any] = {"label": label, "where": where, "rank": key[2].split(",")[-1], "fmt": None, "rows": [],
                          "oob": None, "avg": None, "avg_seen": False, "concluded": False, "ranks": [],
                          "errors": []}
    layout: Optional[Tuple[str, int, int]] = None
    runs = 0
    for lineno, s in lines:
        m = _LAUNCHER_FAILURE.match(s)
        if m:
            st["errors"].append({"line": lineno, "host": "", "kind": "launcher", "where": "",
                                 "message": s[:300]})
            continue
        m = _ERROR_LINE.match(s)
        if m:
            st["errors"].append({"line": lineno, "host": m.group("host"), "kind": m.group("kind"),
                                 "where": m.group("where"), "message": m.group("msg")})
            continue
        m = _TEST_FAILURE.match(s)
        if m:
            st["errors"].append({"line": lineno, "host": m.group("host"), "kind": "Test", "where": m.group("where"),
                                 "message": "%s (pid %s)" % (m.group("where"), m.group("pid"))})
            continue
        if "Test NCCL failure" in s or "Test CUDA failure" in s:
            raise ParseError("%s: line %d: an error line not in nccl-tests' 'HOST: Test NCCL|CUDA failure FILE:LINE "
                             "'MESSAGE'' form: %r" % (where, lineno, s[:200]))
        if s.startswith("#"):
            heading = s[1:].split()
            if heading[:1] == ["size"]:
                if layout is not None:
                    raise ParseError("%s: line %d: a second column header: two result tables in one stream (runs "
                                     "concatenated, or processes of an nccl-tests built without MPI=1 each printing "
                                     "their own)" % (where, lineno))
                found = _LAYOUTS.get(tuple(heading))
                if found is None:
                    raise ParseError("%s: line %d: column headings %r are not a layout this reader knows (it reads %s)"
                                     % (where, lineno, " ".join(heading)[:200], UNDERSTOOD))
                layout = found
                st["fmt"] = found[0]
                continue
            if _NTHREAD.match(s):
                runs += 1
                if runs > 1:
                    raise ParseError("%s: line %d: a second '# nThread' run header in one stream: the output of "
                                     "several processes or runs interleaved (nccl-tests built without MPI=1 and "
                                     "started once per process prints one header each)" % (where, lineno))
                continue
            _header_line(st, s, lineno, where)
            continue
        tokens = s.split()
        if not tokens[0].isdigit():
            continue  # NCCL INFO/WARN chatter, launcher messages
        if layout is None:
            if len(tokens) < 11 or not tokens[1].isdigit():
                continue  # a message that starts with a number; no table has begun
            raise ParseError("%s: data row at line %d before the column header" % (where, lineno))
        row = _row(tokens, layout, lineno, where, len(st["ranks"]))
        previous = st["rows"][-1] if st["rows"] else None
        if previous is not None and _row_key(previous)[2:] == _row_key(row)[2:] and (
                row["size"] < previous["size"] or 0 < row["size"] == previous["size"]):
            raise ParseError("%s: line %d: size %d after %d: rows out of order or repeated, the output of several "
                             "processes interleaved" % (where, lineno, row["size"], previous["size"]))
        st["rows"].append(row)
    return st


def _header_line(st: Dict[str, Any], s: str, lineno: int, where: str) -> None:
    m = _STARTING.match(s)
    if m and not m.group("name").startswith(TOOL):
        raise ParseError("%s: line %d: this is %s output, not all_reduce_perf's" % (
            where, lineno, m.group("name")[:60]))
    m = _RANK.match(s)
    if m:
        rank = (int(m.group("rank")), int(m.group("pid")), m.group("host")[:100], int(m.group("dev")))
        clash = [r for r in st["ranks"] if r[0] == rank[0]]
        if clash:
            raise ParseError("%s: line %d: rank %d is listed twice (on %s and %s): the headers of several processes "
                             "in one stream (nccl-tests built without MPI=1 and started once per process?)" % (
                                 where, lineno, rank[0], clash[0][2], rank[2]))
        st["ranks"].append(rank)
        return
    m = _OOB.match(s)
    if m:
        st["oob"] = int(m.group("n"))
        return
    m = _AVG.match(s)
    if m:
        st["avg_seen"] = True
        try:
            st["avg"] = _num(m.group("bw"))
        except ValueError:
            raise ParseError("%s: line %d: average bus bandwidth %r is not a number" % (
                where, lineno, m.group("bw")[:40]))
        return
    m = _LAST_ERROR.match(s)
    if m:
        st["errors"].append({"line": lineno, "host": "", "kind": "NCCL", "where": "",
                             "message": m.group("msg").strip()[:500]})
        return
    if s.startswith("# Collective test concluded"):
        st["concluded"] = True


def _row(tokens: List[str], layout: Tuple[str, int, int], lineno: int, where: str, ranks: int) -> Dict[str, Any]:
    fmt, oop_at, ip_at = layout
    width = {"current": 13, "per-iter": 21, "legacy": 12}[fmt]
    try:
        if len(tokens) != width:
            raise ValueError("%d columns where the header has %d" % (len(tokens), width))
        size, count, dtype, redop = int(tokens[0]), int(tokens[1]), tokens[2], tokens[3]
        root = int(tokens[4]) if fmt != "legacy" else -1
        if dtype not in _WORD:
            raise ValueError("data type %r is not one nccl-tests prints" % dtype[:20])
        if redop not in _REDOPS:
            raise ValueError("reduction %r is not an all-reduce operation (another nccl-tests binary?)" % redop[:20])
        if root != -1 or size != count * _WORD[dtype]:
            raise ValueError("size %d, count %d, root %d are not an all-reduce's (size = count x %d bytes of %s, "
                             "root -1): another nccl-tests binary?" % (size, count, root, _WORD[dtype], dtype))
        oop, ip = tokens[oop_at:oop_at + 4], tokens[ip_at:ip_at + 4]
        marks = [_num(oop[3]), _num(ip[3])]
        # Unmeasured (None) when either column is N/A: all_reduce_perf prints N/A when run with -c 0.
        if any(w is None for w in marks):
            wrong: Optional[int] = None
        elif fmt == "legacy":
            if ranks < 1:
                raise ParseError("%s: line %d: the error column is judged against nccl-tests' tolerance for the "
                                 "data type times (ranks - 1), and no '# Rank' line came before the table to count "
                                 "ranks: keep the output from '# Using devices' on" % (where, lineno))
            tolerance = legacy_tolerance(dtype, ranks)
            wrong = sum(1 for w in marks if w is not None and (w < 0 or w > tolerance))
        else:
            if any(w is not None and (w < 0 or w != int(w)) for w in marks):
                raise ValueError("#wrong is not a count")
            wrong = int(sum(w or 0 for w in marks))
        return {"size": size, "count": count, "type": dtype, "redop": redop, "root": root,
                "oop_time": _num(oop[0]), "oop_algbw": _num(oop[1]), "oop_busbw": _num(oop[2]),
                "ip_time": _num(ip[0]), "ip_algbw": _num(ip[1]), "ip_busbw": _num(ip[2]), "wrong": wrong}
    except (ValueError, IndexError, OverflowError) as exc:
        raise ParseError("%s: malformed data row at line %d (%s): %r" % (where, lineno, exc, " ".join(tokens)[:300]))


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
            "concluded": True, "prefix": None, "stream": ""}


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


def with_exit_status(parsed: Dict[str, Any], rc: int) -> Dict[str, Any]:
    """The parsed run, with the tool's exit status as an error when it failed without saying why in its output:
    all_reduce_perf exits non-zero on wrong data (which its table shows) and on a failure it may not print (a rank
    killed, an abort after the table); a table that looks clean does not outweigh the exit status."""
    if rc == 0 or parsed["errors"]:
        return parsed
    return dict(parsed, errors=[{"host": "", "kind": "exit", "where": "",
                                 "message": "%s exited %d with no error in its output" % (TOOL, rc)}])


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
