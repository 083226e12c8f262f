#!/usr/bin/env python3
"""Benchmark: reading who calls a deprecated API from one control-plane host's audit log; prints MB per second and
the read's peak memory (not a test).

Usage: python benchmarks/scan_audit.py [--mb 200] [--deprecated-every 500] [--repeat 3]
The log, written to a temporary directory: the real apiserver events of tests/fixtures/audit/ repeated with new
auditIDs and times up to ``--mb`` megabytes, split as the apiserver rotates it (a current file and two backups, one
of them gzip'd), one event in ``--deprecated-every`` a call to a deprecated API (the legacy client's). A week of a
busy cell's audit log at Metadata level is some gigabytes per apiserver; the module reads it line by line and parses
JSON only for lines that carry the deprecation annotation.
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import json
import pathlib
import statistics
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "collections"))

from ansible_collections.gpufleet.upgrade.plugins.module_utils import audit_callers

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "audit"


def write_log(folder: pathlib.Path, megabytes: int, every: int) -> datetime.datetime:
    events = [json.loads(line) for line in (FIXTURES / "real-1.35.4-cp-2-excerpt.log").read_text().splitlines()]
    plain = [e for e in events if "k8s.io/deprecated" not in e.get("annotations", {})]
    legacy = [e for e in events if e.get("annotations", {}).get("k8s.io/removed-release")]
    start = datetime.datetime(2026, 12, 1)
    parts = [bytearray(), bytearray(), bytearray()]
    size, n = megabytes << 20, 0
    while sum(len(p) for p in parts) < size:
        event = dict(legacy[n % len(legacy)] if n % every == 0 else plain[n % len(plain)])
        event["auditID"] = "%08d-0000-4000-8000-000000000000" % n
        moment = (start + datetime.timedelta(milliseconds=10 * n)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        event["requestReceivedTimestamp"] = event["stageTimestamp"] = moment
        line = json.dumps(event, separators=(",", ":")).encode()  # as the apiserver writes it (kind, apiVersion first)
        parts[min(2, 3 * sum(len(p) for p in parts) // size)] += line + b"\n"
        n += 1
    (folder / "audit-2026-12-01T00-00-00.000.log.gz").write_bytes(gzip.compress(bytes(parts[0]), compresslevel=1))
    (folder / "audit-2026-12-02T00-00-00.000.log").write_bytes(bytes(parts[1]))
    (folder / "audit.log").write_bytes(bytes(parts[2]))
    return start + datetime.timedelta(milliseconds=10 * n, minutes=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--deprecated-every", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        now = write_log(folder, args.mb, args.deprecated_every)
        flags = {"path": str(folder / "audit.log"), "max_backup": 0, "max_age_days": 0, "compress": True}
        times = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            got = audit_callers.read_host("cp-1", flags, 0, now)
            times.append(time.perf_counter() - began)
        tracemalloc.start()
        audit_callers.read_host("cp-1", flags, 0, now)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        calls = sum(r["count"] for r in got["callers"])
    best = min(times)
    print("audit log %d MB in %d files (one gzip'd), %d deprecated calls in %d rows: best %.2f s (median %.2f s), "
          "%.0f MB/s; peak Python memory of the read %.1f MB" % (
              args.mb, len(got["files"]), calls, len(got["callers"]), best, statistics.median(times), args.mb / best,
              peak / 1e6))


if __name__ == "__main__":
    main()
