#!/usr/bin/env python3
"""Benchmark: the removed-API scan over a directory of 5,000 manifests; prints files per second (not a test).

Usage: python benchmarks/scan_manifests.py [--files 5000] [--repeat 3]
The corpus, written to a temporary directory: rendered-chart-like files of 1-6 documents each (Deployments,
Services, ConfigMaps, PodDisruptionBudgets, CronJobs, FlowSchemas), one in 20 using an API the target removes, one
in 10 a ``List`` or typed ``*List``, extensions in mixed case, and one file in 500 that is not valid YAML. The YAML
loader in use (libyaml's CSafeLoader when PyYAML has it) is printed with the figures.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "collections"))

from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import (
    scan_paths, target_version)

DEPLOYMENT = """apiVersion: {api}
kind: Deployment
metadata:
  name: app-{n}
  namespace: team-{ns}
  labels: {{app: app-{n}, tier: backend}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: app-{n}}}}}
  template:
    metadata: {{labels: {{app: app-{n}}}}}
    spec:
      containers:
      - name: main
        image: registry.example/app-{n}@sha256:{digest}
        resources: {{limits: {{cpu: "2", memory: 4Gi}}}}
        env: [{{name: MODE, value: serve}}, {{name: SHARD, value: "{n}"}}]
"""
SERVICE = """apiVersion: v1
kind: Service
metadata: {{name: app-{n}, namespace: team-{ns}}}
spec:
  selector: {{app: app-{n}}}
  ports: [{{port: 80, targetPort: 8080}}]
"""
CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata: {{name: app-{n}-config, namespace: team-{ns}}}
data:
  settings.yaml: |
    shards: {n}
    log_level: info
"""
PDB = """apiVersion: {pdb_api}
kind: PodDisruptionBudget
metadata: {{name: app-{n}, namespace: team-{ns}}}
spec: {{maxUnavailable: 1, selector: {{matchLabels: {{app: app-{n}}}}}}}
"""
CRONJOB = """apiVersion: {cron_api}
kind: CronJob
metadata: {{name: report-{n}, namespace: team-{ns}}}
spec:
  schedule: "0 3 * * *"
  jobTemplate: {{spec: {{template: {{spec: {{restartPolicy: Never, containers: [{{name: r, image: busybox}}]}}}}}}}}
"""
TYPED_LIST = """apiVersion: {pdb_api}
kind: PodDisruptionBudgetList
metadata: {{}}
items:
- metadata: {{name: list-{n}-a, namespace: team-{ns}}}
  spec: {{minAvailable: 1}}
- metadata: {{name: list-{n}-b, namespace: team-{ns}}}
  spec: {{minAvailable: 1}}
"""


def corpus(root: pathlib.Path, count: int) -> int:
    """Write ``count`` files; return the findings a correct scan reports for v1.34 (an object per removed API in a
    readable file, plus one per unreadable file)."""
    expected = 0
    parts = [DEPLOYMENT, SERVICE, CONFIGMAP, PDB, CRONJOB]
    for n in range(count):
        old = n % 20 in (0, 5)
        fields = {"n": n, "ns": n % 37, "digest": "%064x" % n,
                  "api": "extensions/v1beta1" if old else "apps/v1",
                  "pdb_api": "policy/v1beta1" if old else "policy/v1",
                  "cron_api": "batch/v1beta1" if old else "batch/v1"}
        chosen = [parts[(n + i) % len(parts)] for i in range(1 + n % 6)]
        docs = [part.format(**fields) for part in chosen]
        found = sum(1 for part in chosen if part in (DEPLOYMENT, PDB, CRONJOB)) if old else 0
        if n % 10 == 5:
            docs.append(TYPED_LIST.format(**fields))
            found += 2 if old else 0
        text = "---\n".join(docs)
        if n % 500 == 499:
            text += "bad: [unclosed\n"
            found = 1
        expected += found
        suffix = (".yaml", ".yml", ".YAML", ".json")[n % 4] if n % 4 != 3 else ".Yml"
        (root / ("team-%02d" % (n % 37))).mkdir(exist_ok=True)
        (root / ("team-%02d" % (n % 37)) / ("chart-%05d%s" % (n, suffix))).write_text(text)
    return expected


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import yaml
    loader = "CSafeLoader (libyaml)" if hasattr(yaml, "CSafeLoader") else "SafeLoader (pure Python)"
    target = target_version("v1.34.2")
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-scan-") as tmp:
        root = pathlib.Path(tmp)
        expected = corpus(root, args.files)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            findings, scanned = scan_paths([str(root)], target)
            times.append(time.perf_counter() - started)
    unreadable = sum(1 for f in findings if f.get("unreadable"))
    if len(findings) != expected or len(scanned) != args.files:
        sys.exit("the scan is wrong: %d findings in %d files, expected %d in %d" % (
            len(findings), len(scanned), expected, args.files))
    best, median = min(times), statistics.median(times)
    print("removed-API scan: %d files (%.1f MB), %d findings (%d unreadable files), YAML loader %s"
          % (len(scanned), size / 1e6, len(findings), unreadable, loader))
    print("  best %.2f s = %.0f files/s; median of %d runs %.2f s = %.0f files/s"
          % (best, len(scanned) / best, args.repeat, median, len(scanned) / median))


if __name__ == "__main__":
    main()
