"""Bounded property/fuzz test of every parser and gate (hypothesis, derandomized so CI repeats it exactly).

Each target gets real-format fixtures mutated the ways broken tools, truncated pipes and hostile files break them
(truncation, a line dropped or doubled, a value replaced by N/A, [N/A], inf, 1e309, nan, an empty string, garbage,
a huge or absurd number, deep nesting, YAML aliases), and random text. Properties:
- no hang: every call returns within HANG_SECONDS (SIGALRM);
- no uncaught exception: the only exceptions are gpufleet's own (a clear, named error);
- no wrong verdict: a failing tool output, mutated in any way that keeps its evidence, never passes its gate.
The figures (inputs tried, clear errors, crashes, hangs, wrong verdicts) are printed at the end of the test run.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import signal
from typing import Any, Dict, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.upgrade.plugins.module_utils import (
    baseline, dcgm, etcd, gpu_health, kubeadm_plan, nccl, node_gate, removed_apis, versions)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.cell import build
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_json
from tests.conftest import fixture_text, pool_baseline

ROOT = pathlib.Path(__file__).resolve().parents[2]
HANG_SECONDS = 5
EXAMPLES = 150
FIGURES: Dict[str, Dict[str, int]] = {}
BASE = pool_baseline(nccl={"busbw_gbps": {"1G": 450.0, "8G": 470.0}, "tolerance_pct": 10, "min_runs": 1},
                     node={"kubelet_config": {}})
V136 = versions.parse_version("v1.36.3")
TOKENS = ["N/A", "[N/A]", "[Not Supported]", "[Unknown Error]", "inf", "-inf", "1e309", "nan", "-nan", "", "x" * 300,
          "99999999999999999999999", "-1", "\x00", "\u2028", "{", "]", "*a", "&a", "true", "null", "~", "'", '"']

settings.register_profile("gpufleet-fuzz", derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def _mutate(text: str, op: int, where: float, token: str) -> str:
    lines = text.splitlines()
    i = int(where * max(len(lines) - 1, 0))
    if op == 0:
        return text[: int(where * len(text))]
    if op == 1 and lines:
        return "\n".join(lines[:i] + lines[i + 1:])
    if op == 2 and lines:
        return "\n".join(lines[:i] + [lines[i]] * 3 + lines[i + 1:])
    if op == 3 and lines:
        words = lines[i].split(" ")
        j = int(where * 7919) % len(words)
        words[j] = token
        return "\n".join(lines[:i] + [" ".join(words)] + lines[i + 1:])
    if op == 4:
        return "\n".join(lines[:i] + [token * (1 + int(where * 50))] + lines[i:])
    if op == 5:
        return "[" * (200 + int(where * 5000)) + text
    return text.replace(": ", ": &a " if where < 0.5 else ": *a ", 1)


def mutations(*fixtures: str):
    """Fixture texts mutated once or twice, plus random text."""
    texts = [fixture_text(*f.split("/")) for f in fixtures]
    one = st.builds(_mutate, st.sampled_from(texts), st.integers(0, 6), st.floats(0, 1), st.sampled_from(TOKENS))
    return st.one_of(one, st.builds(_mutate, one, st.integers(0, 6), st.floats(0, 1), st.sampled_from(TOKENS)),
                     st.text(max_size=400))


def _json_tree():
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
    return st.recursive(leaves, lambda c: st.one_of(st.lists(c, max_size=4),
                                                    st.dictionaries(st.text(max_size=10), c, max_size=4)),
                        max_leaves=30)


def structured(fixture: str):
    """A JSON fixture with one subtree replaced by random JSON (keys kept, values of any type)."""
    doc = json.loads(fixture_text(*fixture.split("/")))

    def paths(node, prefix=()):
        yield prefix
        if isinstance(node, dict):
            for k, v in node.items():
                yield from paths(v, prefix + (k,))
        elif isinstance(node, list):
            for k, v in enumerate(node):
                yield from paths(v, prefix + (k,))

    all_paths = [p for p in paths(doc) if p]

    def replace(path, value):
        out = json.loads(json.dumps(doc))
        cursor = out
        for key in path[:-1]:
            cursor = cursor[key]
        cursor[path[-1]] = value
        return json.dumps(out)

    return st.builds(replace, st.sampled_from(all_paths), _json_tree())


# Each target: (strategy, judge -> True when the gate passed, False when it failed; must_fail: the input's evidence
# makes it a failing output, so a PASS is a wrong verdict).
def _nccl(text):
    return nccl.judge_runs([nccl.parse_output(text)], BASE, "n")["passed"]


def _dcgm(text):
    return dcgm.judge_diag(dcgm.parse_diag(text), BASE, "n")["passed"]


def _gpus(text):
    remap = fixture_text("nvidia_smi", "remapped-rows-ok.csv")
    log = gpu_health.scan_kernel_log(fixture_text("nvidia_smi", "kern-clean.log"))
    return gpu_health.judge_health(gpu_health.parse_query_gpu(text), gpu_health.parse_remapped_rows(remap), log,
                                   BASE, "n")["passed"]


def _remaps(text):
    gpus = gpu_health.parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-8-ok.csv"))
    log = gpu_health.scan_kernel_log(fixture_text("nvidia_smi", "kern-clean.log"))
    return gpu_health.judge_health(gpus, gpu_health.parse_remapped_rows(text), log, BASE, "n")["passed"]


def _kernel(text):
    gpus = gpu_health.parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-8-ok.csv"))
    remap = gpu_health.parse_remapped_rows(fixture_text("nvidia_smi", "remapped-rows-ok.csv"))
    return gpu_health.judge_health(gpus, remap, gpu_health.scan_kernel_log(text), BASE, "n")["passed"]


def _node(text):
    return node_gate.judge_node(load_json(text, "Node"), None, "v1.34.2", dict(BASE, node={"allocatable_gpus": 8,
                                                                               "kubelet_config": {}}))["passed"]


def _etcd(text):
    return etcd.judge_endpoints(etcd.parse_endpoint_status(text))["passed"]


def _snapshot(text):
    return etcd.judge_snapshot(etcd.parse_snapshot_status(text), {"min_revision": 1})["passed"]


def _kubeadm(text):
    kubeadm_plan.judge_plan(kubeadm_plan.parse_plan(text), "v1.34.2", required=True)  # raises unless offered
    return True


def _manifest(text):
    return not any(f["blocks_target"] for f in removed_apis.scan_manifest_text(text, V136, "fuzz.yaml"))


def _metrics(text):
    return not any(f["blocks_target"] for f in removed_apis.scan_metrics(text, V136, "cp-1"))


def _helm(text):
    return not removed_apis.scan_helm_secrets([{"type": "helm.sh/release.v1", "data": {"release": text}}], V136)


def _baseline(text):
    baseline.load_text(text, "fuzz.yml")
    return True


def _version(text):
    versions.parse_release(text)
    return True


def _cell(text):
    hosts = json.loads(text)
    groups = {"kube_control_plane": ["cp-1"], "etcd": ["cp-1"], "gpu_nodes": sorted(hosts)[:4]}
    build(groups, hosts, {"gpufleet_cluster_name": "fuzz", "gpufleet_target_version": "v1.36.3"},
          {"h100-train": BASE})
    return True


CELL_HOST_VARS = ["gpufleet_pool", "gpufleet_failure_domain", "gpufleet_ring", "gpufleet_dr_pair", "gpufleet_canary",
                  "gpufleet_unschedulable_before", "gpufleet_observed_kubelet", "gpufleet_gpus",
                  "drain_break_glass_force"]


def _cell_hosts(var: str, value: Any) -> str:
    """The small cell's inventory with one host variable of gpu-a1 set to any JSON value."""
    hosts = json.loads(CELL_HOSTS)
    hosts["gpu-a1"][var] = value
    return json.dumps(hosts)


CELL_HOSTS = json.dumps({"cp-1": {}, "gpu-a1": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-a"},
                         "gpu-b1": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-b"}})

TARGETS: Dict[str, tuple] = {
    "nccl stdout (slow)": (mutations("nccl/allreduce-8gpu-slow.txt"), _nccl, True),
    "nccl stdout (wrong)": (mutations("nccl/allreduce-8gpu-wrong.txt"), _nccl, True),
    "nccl stdout (good)": (mutations("nccl/allreduce-8gpu-run1.txt", "nccl/allreduce-legacy-2021.txt"), _nccl,
                           False),
    "nccl -J json": (st.one_of(mutations("nccl/allreduce-8gpu.json"), structured("nccl/allreduce-8gpu.json")), _nccl,
                     False),
    "dcgmi diag (fail)": (st.one_of(mutations("dcgm/diag-r1-fail.json"), structured("dcgm/diag-r1-fail.json")), _dcgm,
                          True),
    "dcgmi diag (pass)": (st.one_of(mutations("dcgm/diag-r1-pass.json", "dcgm/diag-dcgm3-fail.json"),
                                    structured("dcgm/diag-r1-pass.json")), _dcgm, False),
    "nvidia-smi --query-gpu (7 of 8)": (mutations("nvidia_smi/query-gpu-7-of-8.csv"), _gpus, True),
    "nvidia-smi --query-gpu (ok)": (mutations("nvidia_smi/query-gpu-8-ok.csv"), _gpus, False),
    "nvidia-smi --query-remapped-rows (pending)": (mutations("nvidia_smi/remapped-rows-pending.csv"), _remaps, True),
    "journalctl -k (XID 79)": (mutations("nvidia_smi/kern-xid79.log"), _kernel, "Xid"),
    "Node object": (st.one_of(mutations("k8s/node-gpu-a1-ready.json"), structured("k8s/node-gpu-a1-degraded.json")),
                    _node, False),
    "etcdctl endpoint status": (st.one_of(mutations("etcd/endpoint-status-ok.json"),
                                          structured("etcd/endpoint-status-alarm-36.json")), _etcd, False),
    "etcd snapshot status": (st.one_of(mutations("etcd/snapshot-status.json"),
                                       structured("etcd/snapshot-status-etcdutl36.json")), _snapshot, False),
    "kubeadm upgrade plan": (st.one_of(mutations("kubeadm/plan-1.34-text.txt", "kubeadm/plan-1.34.yaml",
                                                 "kubeadm/plan-1.27-legacy.txt"), structured("kubeadm/plan-1.34.json")),
                             _kubeadm, False),
    "manifests": (mutations("manifests/broken.yaml", "baselines/h100-train.yml"), _manifest, False),
    "apiserver /metrics": (mutations("metrics/apiserver-cp-1.prom"), _metrics, False),
    "helm release secret": (st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.hex())),
                            _helm, False),
    "baseline YAML": (mutations("baselines/h100-train.yml"), _baseline, False),
    "versions": (st.one_of(st.text(max_size=40), st.from_regex(r"v?[0-9]{1,14}\.[0-9]{1,14}(\.[0-9]{1,14})?",
                                                               fullmatch=True)), _version, False),
    "cell inventory": (st.builds(_cell_hosts, st.sampled_from(CELL_HOST_VARS), _json_tree()), _cell, False),
}


def _keeps_evidence(must_fail: Any, original: Optional[str], mutated: str) -> bool:
    """For kernel logs the evidence is the XID line: a mutation that removed it made a different (clean) log."""
    if must_fail is True:
        return True
    return isinstance(must_fail, str) and must_fail in mutated and mutated.count("\n") >= 3


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_parsers_never_hang_crash_or_pass_a_failing_output(name):
    strategy, judge, must_fail = TARGETS[name]
    figures = FIGURES.setdefault(name, {"inputs": 0, "clear errors": 0, "crashes": 0, "hangs": 0,
                                        "wrong verdicts": 0})
    problems = []

    @settings(settings.get_profile("gpufleet-fuzz"), max_examples=EXAMPLES)
    @given(strategy)
    def run(text):
        figures["inputs"] += 1
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(HANG_SECONDS)
        try:
            passed = judge(text)
        except GpufleetError:
            figures["clear errors"] += 1
            return
        except Hang:
            figures["hangs"] += 1
            problems.append(("hang", text[:300]))
            return
        except Exception as exc:  # counting exactly these is the point
            figures["crashes"] += 1
            problems.append(("crash %s: %s" % (type(exc).__name__, exc), text[:300]))
            return
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        if must_fail and passed and _keeps_evidence(must_fail, None, text):
            figures["wrong verdicts"] += 1
            problems.append(("wrong verdict: PASS", text[:300]))

    run()
    out = pathlib.Path(os.environ.get("GPUFLEET_FUZZ_DIR", str(ROOT / "out" / "fuzz")))
    out.mkdir(parents=True, exist_ok=True)
    (out / (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".json")).write_text(
        json.dumps({"target": name, **figures}))
    assert not problems, "%s: %d problem(s), first: %r" % (name, len(problems), problems[0])
