#!/usr/bin/env python3
"""Benchmark: plan a 120-cell, 10,000-node fleet and print the time taken (not a test; prints figures).

Usage: python benchmarks/plan_fleet.py [--cells 120] [--nodes 10000] [--repeat 5]
The fleet: four rings (canaries, dev/staging, inference, training - half the cells training cells, as in the seed's
fleet), DR pairs of inference cells across rings 2 and 3, two GPU pools per cell, kubelets from current down to
three minors behind, some cells a patch behind, an intermediate hop to v1.37.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
import tracemalloc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "collections"))

from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet


def fleet(cells: int, nodes: int):
    per_cell = max(nodes // cells, 2)
    out = []
    kinds = ["canary"] * 4 + ["dev"] * 8 + ["staging"] * 8 + ["inference"] * 40
    for i in range(cells):
        kind = kinds[i] if i < len(kinds) else "training"
        ring = {"canary": "ring0", "dev": "ring1", "staging": "ring1", "inference": "ring2" if i % 2 else "ring3",
                "training": "ring3"}[kind]
        cp = "v1.36.%d" % (1 + i % 3)
        lag = i % 4 if kind == "training" else 0
        pools = [{"name": "train", "kubelet": "v1.%d.2" % (36 - lag), "nodes": per_cell // 2},
                 {"name": "serve", "kubelet": cp, "nodes": per_cell - per_cell // 2, "skip_level": False}]
        doc = {"name": "cell-%03d" % i, "ring": ring, "kind": kind, "region": "region-%d" % (i % 6),
               "gpus": per_cell * 8, "inventory": "inventories/cell-%03d" % i, "control_plane": cp, "pools": pools}
        if kind == "inference" and 21 <= i <= 57 and i % 2 == 1:  # pairs across rings 2 and 3
            doc["dr_partner"] = "cell-%03d" % (i + 1)
        elif kind == "inference" and 22 <= i <= 58 and i % 2 == 0:
            doc["dr_partner"] = "cell-%03d" % (i - 1)
        out.append(doc)
    return {"name": "bench", "cells": out,
            "policy": {"target": "v1.38.1", "hop_versions": {"1.37": "v1.37.4"}, "max_cells_in_flight": 6,
                       "max_gpu_fraction_in_flight": 0.1,
                       "rings": [{"name": "ring0", "soak_seconds": 3600}, {"name": "ring1", "soak_seconds": 86400},
                                 {"name": "ring2", "soak_seconds": 172800}, {"name": "ring3"}]}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=120)
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    raw = fleet(args.cells, args.nodes)
    timings = []
    plan = None
    for _ in range(args.repeat):
        start = time.perf_counter()
        plan = plan_fleet(raw)
        timings.append(time.perf_counter() - start)
    tracemalloc.start()
    plan_fleet(raw)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert plan is not None
    # the generated fleet's own figures, so a planner change that alters them shows here
    assert len(plan["cells"]) == args.cells and sum(len(r["batches"]) for r in plan["rings"]) > 0
    assert all(len(b) <= plan["caps"]["patch_max_cells_in_flight"] for r in plan["rings"] for b in r["batches"])
    print("plan_fleet: %s" % plan["summary"])
    print("plan_fleet: median %.1f ms, min %.1f ms, max %.1f ms over %d runs (validate + plan); peak %.1f MiB traced"
          % (statistics.median(timings) * 1000, min(timings) * 1000, max(timings) * 1000, len(timings),
             peak / 2 ** 20))


if __name__ == "__main__":
    main()
