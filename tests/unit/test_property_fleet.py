"""Property tests of the fleet's fail-closed parts (issue 33; the harness: tests/unit/property.py).

- GPU readings: a real Node (tests/fixtures/k8s/node-gpu-a1-ready.json) as a cell's four GPU nodes in two pools
  (8 and, MIG, 56 GPUs per node) and a control-plane node, mutated: a node's allocatable raised above or lowered
  below its pool's count, given as another type, full-width digits, NaN; a field or a node removed; a node twice;
  Ready changed; a subtree replaced by random JSON. Any pool node off its expected count must never pass the GPU
  halt (fleet_readings.readings, then fleet_run.halts against a clean reading before).
- Readings files: a clean reading before and after (from the same functions, through JSON), mutated: a judged value
  or a breakdown's replaced by random JSON (NaN, infinities, lists, strings, negatives), a required key removed, a
  per-JobSet breakdown that no longer adds up, a NotReady node more, a whole file replaced. A reading that is refused
  or off must never give "no halt".
- The fleet policy: docs/fleet-example.yml with a halt threshold mutated, with or without a reason in
  ``policy.halt.disabled``: a threshold that switches its halt off is never accepted without a reason.
"""
from __future__ import annotations

import copy
import json
import math
import pathlib
from typing import Any, Dict, List

import yaml
from hypothesis import strategies as st

from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_readings as fr
from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_run
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import parse_halt_policy, plan_fleet
from tests.conftest import fixture_text
from tests.unit.property import check_property, json_tree, paths

ROOT = pathlib.Path(__file__).resolve().parents[2]
WINDOW = [{"cp-1": fr.scrape(fixture_text("metrics", "apiserver-window-%d.prom" % i), "cp-1")} for i in (1, 2)]
POLICY = parse_halt_policy({})
POOLS = fr.pool_expectations({
    "h100": {"nodes": ["gpu-a1", "gpu-a2"], "gpus": 16, "baseline": {"gpu": {"count": 8},
                                                                     "node": {"allocatable_gpus": 8}}},
    "mig": {"nodes": ["gpu-b1", "gpu-b2"], "gpus": 112, "baseline": {"gpu": {"count": 8},
                                                                    "node": {"allocatable_gpus": 56}}}})
EXPECTED = {n: p["per_node"] for p in POOLS.values() for n in p["nodes"]}
JOBSETS = [{"metadata": {"namespace": "training", "name": "llm", "uid": "u1"}, "status": {"restarts": 2}},
           {"metadata": {"namespace": "training", "name": "eval", "uid": "u2"}, "status": {"restarts": 1}}]


def _nodes() -> List[Dict[str, Any]]:
    """The cell's Node list: the real Node as each GPU node with its pool's count, and a control-plane node."""
    base = json.loads(fixture_text("k8s", "node-gpu-a1-ready.json"))
    out = []
    for name in ["cp-1"] + sorted(EXPECTED):
        node = copy.deepcopy(base)
        node["metadata"]["name"] = name
        for part in ("allocatable", "capacity"):
            if name == "cp-1":
                node["status"][part].pop(fr.GPU)
            else:
                node["status"][part][fr.GPU] = str(EXPECTED[name])
        out.append(node)
    return out


NODES = _nodes()


def _reading(nodes: Any, jobsets: Any = JOBSETS) -> Dict[str, Any]:
    """The cell's readings as the fleet_readings module writes them (through JSON, as the file is read back)."""
    return json.loads(json.dumps(fr.readings(WINDOW[0], WINDOW[1], 10.0, nodes, 128, jobsets, POOLS)))


CLEAN = _reading(NODES)


# -- (a) GPU readings from mutated Node lists -------------------------------------------------------------------------
GPU_VALUES = st.one_of(st.integers(-2, 130), st.integers(-2, 130).map(str), json_tree(),
                       st.sampled_from(["\uff18", "\uff15\uff16", " 8", "8\n", "8Gi", "NaN", "1e400", "", "-0", "08",
                                        "56", "57", "55", "9", "7", "0", "8.0", "1_6"]))
NODE_KEYS = [("metadata", "name"), ("metadata",), ("status",), ("status", "allocatable"),
             ("status", "allocatable", fr.GPU), ("status", "conditions")]


def _set(doc: Any, path: tuple, value: Any, remove: bool = False) -> None:
    for key in path[:-1]:
        if (isinstance(doc, dict) and key in doc) or (
                isinstance(doc, list) and isinstance(key, int) and key < len(doc)):
            doc = doc[key]
        else:
            return
    if isinstance(doc, dict):
        if remove:
            doc.pop(path[-1], None)
        else:
            doc[path[-1]] = value
    elif isinstance(doc, list) and isinstance(path[-1], int) and path[-1] < len(doc):
        if remove:
            del doc[path[-1]]
        else:
            doc[path[-1]] = value


def _node_op(nodes: List[Any], op: Any) -> List[Any]:
    kind, i, arg = op
    i %= len(nodes) if nodes else 1
    if not nodes:
        return nodes
    if kind == "gpu":
        _set(nodes[i], ("status", "allocatable", fr.GPU), arg)
    elif kind == "remove":
        _set(nodes[i], NODE_KEYS[arg % len(NODE_KEYS)], None, remove=True)
    elif kind == "ready":
        for c in (nodes[i].get("status") or {}).get("conditions") or []:
            if isinstance(c, dict) and c.get("type") == "Ready":
                c["status"] = arg
    elif kind == "subtree":
        found = paths(nodes[i])
        if found:
            _set(nodes[i], found[arg[0] % len(found)], arg[1])
    elif kind == "drop":
        del nodes[i]
    elif kind == "twice":
        nodes.append(copy.deepcopy(nodes[i]))
    return nodes


NODE_OPS = st.one_of(
    st.tuples(st.just("gpu"), st.integers(0, 4), GPU_VALUES),
    st.tuples(st.just("remove"), st.integers(0, 4), st.integers(0, 20)),
    st.tuples(st.just("ready"), st.integers(0, 4), st.sampled_from(["False", "Unknown", "true", None, 1, "True"])),
    st.tuples(st.just("subtree"), st.integers(0, 4), st.tuples(st.integers(0, 500), json_tree())),
    st.tuples(st.sampled_from(["drop", "twice"]), st.integers(0, 4), st.none()))


def _mutated_nodes(ops: List[Any]) -> List[Any]:
    nodes = copy.deepcopy(NODES)
    for op in ops:
        nodes = _node_op(nodes, op)
    return nodes


def _off_expected(nodes: List[Any]) -> bool:
    """Whether a pool node is not exactly as expected: missing or listed twice, not Ready, or offering another count
    than its pool's GPUs per node (as the API gives it: a string of digits, or the number)."""
    for name, want in EXPECTED.items():
        found = [n for n in nodes if isinstance(n, dict) and isinstance(n.get("metadata"), dict)
                 and n["metadata"].get("name") == name]
        if len(found) != 1:
            return True
        status = found[0].get("status")
        if not isinstance(status, dict):
            return True
        conditions = status.get("conditions")
        if not isinstance(conditions, list) or not any(
                isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return True
        allocatable = status.get("allocatable")
        gpus = allocatable.get(fr.GPU) if isinstance(allocatable, dict) else None
        if gpus != str(want) and not (type(gpus) is int and gpus == want):
            return True
    return False


def _gpus_pass(nodes: List[Any]) -> bool:
    return fleet_run.halts("cell-1", CLEAN, _reading(nodes), POLICY, ["gpu_allocatable_fraction"]) == []


def test_a_pool_node_off_its_gpu_count_never_passes():
    assert _gpus_pass(copy.deepcopy(NODES)) and not _off_expected(NODES)  # the clean cell passes
    check_property("fleet GPU readings (Node lists)", st.lists(NODE_OPS, min_size=1, max_size=2).map(_mutated_nodes),
                   _gpus_pass, must_fail=_off_expected)


# -- (b) readings files: validation and the halt judgement on a clean pair, mutated -----------------------------------
KINDS = {("apiserver_429_per_minute",): "number", ("apiserver_p99_seconds",): "number",
         ("not_ready_nodes",): "count", ("gpu_allocatable_fraction",): "fraction", ("jobset_restarts",): "count",
         ("gpus_allocatable",): "count", ("gpus_expected",): "count", ("jobset_api",): "flag",
         ("jobset_restart_counts",): "mapping", ("gpu_allocatable_by_pool",): "mapping",
         ("gpu_allocatable_off_baseline",): "mapping", ("not_ready",): "list"}
KINDS.update({("jobset_restart_counts", uid, "restarts"): "count" for uid in CLEAN["jobset_restart_counts"]})
KINDS.update({("gpu_allocatable_by_pool", pool, field): "fraction" if field == "fraction" else "count"
              for pool in POOLS for field in ("allocatable", "expected", "fraction", "per_node", "nodes")})
# removing any of these leaves a reading that is missing or does not add up (every JobSet and pool counts above 0)
REQUIRED = [k for k in KINDS] + [("jobset_restart_counts", uid) for uid in CLEAN["jobset_restart_counts"]] + [
    ("gpu_allocatable_by_pool", pool) for pool in POOLS]


def _valid(kind: str, value: Any) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "count":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if kind == "number":
        return number and math.isfinite(value) and value >= 0
    if kind == "fraction":
        return number and math.isfinite(value) and 0 <= value <= 1
    if kind == "flag":
        return isinstance(value, bool)
    if kind == "mapping":
        return isinstance(value, dict)
    return isinstance(value, list)


def _pair(op: Any) -> Dict[str, Any]:
    """A clean before/after pair with one mutation, and whether it must halt."""
    kind, side, arg = op
    docs = {"before": copy.deepcopy(CLEAN), "after": copy.deepcopy(CLEAN)}
    doc = docs[side]
    must = False
    if kind == "replace":
        path, value = arg
        _set(doc, path, value)
        must = not _valid(KINDS[path], value)
    elif kind == "remove":
        _set(doc, arg, None, remove=True)
        must = True
    elif kind == "skew":  # one JobSet's count changed, the total not: the breakdown does not add up
        uid, delta = arg
        doc["jobset_restart_counts"][uid]["restarts"] += delta
        must = True
    elif kind == "total":
        doc["jobset_restarts"] += arg
        must = True
    elif kind == "down":  # a whole reading, off: more nodes NotReady after (the ceiling is 0)
        docs["after"]["not_ready"] = sorted(docs["after"]["not_ready"] + ["gpu-x%d" % i for i in range(arg)])
        docs["after"]["not_ready_nodes"] = len(docs["after"]["not_ready"])
        must = True
    elif kind == "file":  # the whole file is something else
        docs[side] = arg
        must = True
    elif kind == "subtree":
        found = paths(doc)
        path = found[arg[0] % len(found)]
        _set(doc, path, arg[1])
        must = path in KINDS and not _valid(KINDS[path], arg[1])
    return dict(docs, must=must)


BAD = st.one_of(json_tree(), st.sampled_from([-1, -0.5, float("nan"), float("inf"), -float("inf"), [1], "3", True,
                                              None, {"restarts": 1}, 1.5, 2 ** 70]))
READING_OPS = st.one_of(
    st.tuples(st.just("replace"), st.sampled_from(["before", "after"]), st.tuples(st.sampled_from(sorted(KINDS)), BAD)),
    st.tuples(st.just("remove"), st.sampled_from(["before", "after"]), st.sampled_from(REQUIRED)),
    st.tuples(st.just("skew"), st.sampled_from(["before", "after"]),
              st.tuples(st.sampled_from(sorted(CLEAN["jobset_restart_counts"])), st.integers(1, 5))),
    st.tuples(st.just("total"), st.sampled_from(["before", "after"]), st.integers(1, 5)),
    st.tuples(st.just("down"), st.just("after"), st.integers(1, 3)),
    st.tuples(st.just("file"), st.sampled_from(["before", "after"]), json_tree()),
    st.tuples(st.just("subtree"), st.sampled_from(["before", "after"]), st.tuples(st.integers(0, 500), json_tree())))


def _readings_pass(pair: Dict[str, Any]) -> bool:
    return fleet_run.halts("cell-1", pair["before"], pair["after"], POLICY, list(fr.API_READINGS)) == []


def test_a_readings_file_that_is_refused_or_off_never_gives_no_halt():
    assert _readings_pass({"before": CLEAN, "after": copy.deepcopy(CLEAN)})  # the clean pair passes
    check_property("fleet readings files", READING_OPS.map(_pair), _readings_pass, must_fail=lambda p: p["must"])


# -- (c) the fleet policy: a threshold that switches its halt off needs a reason ---------------------------------------
EXAMPLE = yaml.safe_load((ROOT / "docs" / "fleet-example.yml").read_text())["gpufleet_fleet"]
FEWEST_NODES = min(sum(p["nodes"] for p in c["pools"]) for c in EXAMPLE["cells"])
OFF = {"min_gpu_allocatable_fraction": lambda v: v <= 0, "max_nccl_regression": lambda v: v >= 1,
       "apiserver_p99_floor_seconds": lambda v: v >= 60, "max_latency_regression": lambda v: v >= 100,
       "max_inference_p99_regression": lambda v: v >= 100, "max_429_per_minute_increase": lambda v: v >= 100000,
       "max_jobset_restarts_increase": lambda v: v >= 1000, "max_not_ready_nodes": lambda v: v >= FEWEST_NODES}
THRESHOLD_VALUES = st.one_of(
    st.sampled_from([0, -0.0, 0.0, 1e-9, 0.5, 1, 1.0, 1.5, 2, 3, 7, 8, 16, 59.9, 60, 61, 99.9, 100, 999, 1000, 99999,
                     100000, 1e9, 1e10, float("inf"), float("nan"), -1, True, False, None, "0", "1", "60", "inf",
                     "\uff10", "x", [], {}]),
    st.floats(-5, 2e5), st.integers(-5, 200000))
REASONS = st.one_of(st.none(), st.sampled_from(["CHG-1234: pool h100 repartitioned to MIG", "", " ", "a\nb", 3,
                                                "x" * 301]))


def _policy(draw: Any) -> Dict[str, Any]:
    (key, value, reason), extra = draw
    halt: Dict[str, Any] = {key: value}
    if extra is not None:
        halt[extra[0]] = extra[1]
    if reason is not None:
        halt["disabled"] = {key: reason}
    doc = copy.deepcopy(EXAMPLE)
    doc["policy"]["halt"] = halt
    return {"fleet": doc, "key": key, "value": value, "reason": reason, "extra": extra}


def _switched_off_without_reason(case: Dict[str, Any]) -> bool:
    """Whether a drawn threshold (a finite number: strings are not judged here) switches its halt off and the policy
    gives no usable reason for it."""
    reason = case["reason"]
    usable = isinstance(reason, str) and reason.strip() and len(reason) <= 300 and reason.isprintable()
    for key, value in [(case["key"], case["value"])] + ([tuple(case["extra"])] if case["extra"] else []):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        if OFF[key](value) and not (usable and key == case["key"]):
            return True
    return False


def _policy_accepted(case: Dict[str, Any]) -> bool:
    plan_fleet(case["fleet"])
    return True


def test_a_threshold_that_switches_its_halt_off_is_never_accepted_without_a_reason():
    assert _policy_accepted(_policy(((sorted(OFF)[0], 0.5, None), None)))
    draws = st.tuples(st.tuples(st.sampled_from(sorted(OFF)), THRESHOLD_VALUES, REASONS),
                      st.one_of(st.none(), st.tuples(st.sampled_from(sorted(OFF)), THRESHOLD_VALUES)))
    check_property("fleet halt policy", draws.map(_policy), _policy_accepted, must_fail=_switched_off_without_reason)
