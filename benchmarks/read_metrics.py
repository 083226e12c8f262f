#!/usr/bin/env python3
"""Benchmark: reducing one real apiserver's /metrics to the control-plane soak's counters, the whole text parsed
against only the lines of the samples the reading uses (promtext.samples with names); prints CPU-ms per reading
(not a test).

Usage: python benchmarks/read_metrics.py [--repeat 5]
The text: tests/fixtures/metrics/real-1.36.3-soak-0-quiet.prom.gz, a real kube-apiserver v1.36.3's /metrics (about
1.6 MB, 12,700 samples). A soak reads every apiserver of the cell at each reading, preflight each once; the fleet's
halt readings each apiserver of every cell of a ring at each check.
"""
from __future__ import annotations

import argparse
import gzip
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "collections"))

from benchlib import revision  # noqa: E402

from ansible_collections.gpufleet.upgrade.plugins.module_utils import apiserver_signals, promtext  # noqa: E402

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "metrics" / \
    "real-1.36.3-soak-0-quiet.prom.gz"


def cpu_ms(call, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.process_time()
        call()
        times.append(time.process_time() - began)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    text = gzip.decompress(FIXTURE.read_bytes()).decode()
    whole = cpu_ms(lambda: promtext.samples(text, "cp-1"), args.repeat)
    reading = cpu_ms(lambda: apiserver_signals.reduce(text, "cp-1"), args.repeat)
    print("apiserver /metrics of %.1f MB: the whole text parsed %.0f CPU-ms, one soak reading (its samples' lines "
          "alone) %.0f CPU-ms, %.1fx less; median of %d, on %s" % (
              len(text) / 1e6, whole, reading, whole / reading, args.repeat, revision()))


if __name__ == "__main__":
    main()
