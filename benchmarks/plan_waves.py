#!/usr/bin/env python3
"""Benchmark: plan waves for a 10,000-node GPU fleet and print the time taken (not a test; prints figures).

Usage: python benchmarks/plan_waves.py [--nodes 10000] [--repeat 5]
The fleet: 3 control-plane nodes, GPU workers in failure domains of 8 nodes (rack sets), 2 rings, 2 GPU types,
DR pairs across neighbouring rack sets, 2% of nodes cordoned before the upgrade.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
import tracemalloc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "collections"))

from ansible_collections.gpufleet.upgrade.plugins.module_utils.planner import (
    Caps, parse_nodes, plan_waves)


def fleet(count: int):
    nodes = [{"name": "cp-%d" % i, "role": "control-plane", "gpus": 0} for i in range(1, 4)]
    for i in range(count - 3):
        domain = i // 8
        nodes.append({"name": "gpu-%05d" % i, "pool": "train-%d" % (domain % 4), "failure_domain": "rs-%04d" % domain,
                      "gpus": 8, "gpu_type": "H100" if domain % 3 else "B200", "ring": 0 if domain % 5 else 1,
                      "dr_pair": "dr-%d" % (domain // 2) if domain % 7 == 0 else "",
                      "unschedulable_before": i % 50 == 0})
    return nodes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    raw = fleet(args.nodes)
    caps = Caps(max_gpu_fraction=0.1, max_nodes_per_wave=200, canaries_per_gpu_type=2)
    timings = []
    plan = None
    for _ in range(args.repeat):
        start = time.perf_counter()
        plan = plan_waves(parse_nodes(raw), caps)
        timings.append(time.perf_counter() - start)
    tracemalloc.start()
    plan_waves(parse_nodes(raw), caps)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert plan is not None
    print("plan_waves: %d nodes (%d GPUs) -> %s" % (args.nodes, plan["total_gpus"], plan["summary"]))
    print("plan_waves: median %.1f ms, min %.1f ms, max %.1f ms over %d runs (parse + plan); peak %.1f MiB traced" % (
        statistics.median(timings) * 1000, min(timings) * 1000, max(timings) * 1000, len(timings), peak / 2 ** 20))


if __name__ == "__main__":
    main()
