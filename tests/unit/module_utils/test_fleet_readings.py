"""The fleet's halt readings (plugins/module_utils/fleet_readings.py) from a real kube-apiserver's /metrics
(tests/fixtures/metrics/apiserver-window-*.prom: two scrapes of the lab's v1.35.4 apiserver cp-1, 10 s apart,
trimmed to five resources' series), Node and JobSet objects - and every way a reading fails closed."""
from __future__ import annotations

import itertools
import math
import pathlib

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_readings as fr
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
WINDOW = [(FIXTURES / ("apiserver-window-%d.prom" % i)).read_text() for i in (1, 2)]


def node(name, ready="True", gpus="8"):
    status = {"conditions": [{"type": "Ready", "status": ready}]}
    if gpus is not None:
        status["allocatable"] = {"cpu": "96", fr.GPU: gpus}
    return {"metadata": {"name": name}, "status": status}


def cell_pools(**pools):
    """The cell module's ``pools`` (each pool's nodes, its GPUs, its baseline), for pool_expectations."""
    out = {}
    for name, (nodes, per_node) in pools.items():
        out[name] = {"nodes": list(nodes), "gpus": per_node * len(nodes), "skip_level": True,
                     "baseline": {"name": name, "gpu": {"count": 8}, "node": {"allocatable_gpus": per_node}}}
    return out


def test_a_real_apiserver_scrape_reduces_to_throttled_requests_and_a_latency_histogram():
    first, second = (fr.scrape(text, "cp-1") for text in WINDOW)
    # the LIST of jobsets answered 429 while the CRD's watch cache was initialising: no filter refused it
    assert 'code="429",component="apiserver",dry_run="",group="jobset.x-k8s.io"' in WINDOW[0]
    assert first["throttled"] == 0
    assert math.inf in first["buckets"] and first["buckets"][math.inf] > 0
    bounds = sorted(first["buckets"])
    assert all(first["buckets"][a] <= first["buckets"][b] for a, b in itertools.pairwise(bounds))  # cumulative
    assert second["buckets"][math.inf] > first["buckets"][math.inf]  # the lab's controllers kept asking
    out = fr.apiserver_readings({"cp-1": first}, {"cp-1": second}, 10.0)
    assert out["apiserver_429_per_minute"] == 0.0
    assert 0 < out["apiserver_p99_seconds"] < 1.0
    assert out["apiservers"]["cp-1"]["requests"] == second["buckets"][math.inf] - first["buckets"][math.inf]
    assert out["apiservers"]["cp-1"]["restarted"] is False


def test_watch_connect_and_non_resource_paths_do_not_count_as_latency():
    text = "\n".join([
        "# TYPE apiserver_request_total counter",
        'apiserver_request_total{code="429",resource="pods",verb="LIST"} 3',
        'apiserver_request_total{code="200",resource="pods",verb="WATCH"} 9',
        "# TYPE apiserver_request_terminations_total counter",
        'apiserver_request_terminations_total{code="429",resource="pods",verb="LIST"} 2',
        "# TYPE apiserver_request_duration_seconds histogram",
        'apiserver_request_duration_seconds_bucket{resource="pods",verb="WATCH",le="60"} 0',
        'apiserver_request_duration_seconds_bucket{resource="pods",verb="WATCH",le="+Inf"} 5',
        'apiserver_request_duration_seconds_bucket{resource="",verb="GET",le="0.1"} 7',  # /readyz, /version
        'apiserver_request_duration_seconds_bucket{resource="",verb="GET",le="+Inf"} 7',
        'apiserver_request_duration_seconds_bucket{resource="pods",verb="GET",le="0.1"} 4',
        'apiserver_request_duration_seconds_bucket{resource="pods",verb="GET",le="+Inf"} 4',
        'apiserver_request_duration_seconds_sum{verb="GET"} 0.2',
        'apiserver_request_duration_seconds_count{verb="GET"} 4', ""])
    out = fr.scrape(text, "x")
    assert out == {"throttled": 2.0, "buckets": {0.1: 4.0, math.inf: 4.0}}  # refused: 2 of the 3 LISTs answered 429


def test_histogram_quantile_interpolates_as_prometheus_does():
    buckets = {0.1: 50.0, 0.2: 90.0, 0.4: 100.0, math.inf: 100.0}
    assert fr.histogram_quantile(0.5, buckets) == 0.1
    assert fr.histogram_quantile(0.99, buckets) == pytest.approx(0.2 + 0.2 * 9 / 10)
    assert fr.histogram_quantile(0.99, {0.1: 0.0, math.inf: 0.0}) is None  # nothing served: no latency
    assert fr.histogram_quantile(0.99, {0.1: 1.0, math.inf: 100.0}) == 0.1  # beyond the last bound
    with pytest.raises(InputError, match=r"\+Inf"):
        fr.histogram_quantile(0.99, {0.1: 1.0})


def test_rates_over_the_window_and_an_apiserver_that_restarted_counts_from_zero():
    a = {"throttled": 10.0, "buckets": {0.1: 100.0, 1.0: 110.0, math.inf: 110.0}}
    b = {"throttled": 15.0, "buckets": {0.1: 150.0, 1.0: 210.0, math.inf: 210.0}}
    restarted = {"throttled": 2.0, "buckets": {0.1: 8.0, 1.0: 10.0, math.inf: 10.0}}
    out = fr.apiserver_readings({"cp-1": a, "cp-2": a}, {"cp-1": b, "cp-2": restarted}, 30.0)
    assert out["apiserver_429_per_minute"] == (5 + 2) * 2.0
    assert out["apiservers"]["cp-2"] == {"throttled": 2.0, "requests": 10.0, "restarted": True}
    # restarted and since counted more 429s than before: still counted from zero, not as the difference
    busy = {"throttled": 12.0, "buckets": {0.1: 8.0, 1.0: 10.0, math.inf: 10.0}}
    assert fr.apiserver_readings({"cp-1": a}, {"cp-1": busy}, 60.0)["apiserver_429_per_minute"] == 12.0
    # merged: 58 under 0.1 s, 110 in all: the p99 is in (0.1, 1.0]
    assert 0.1 < out["apiserver_p99_seconds"] <= 1.0
    quiet = fr.apiserver_readings({"cp-1": a}, {"cp-1": a}, 30.0)
    assert quiet["apiserver_p99_seconds"] is None and quiet["apiserver_429_per_minute"] == 0


@pytest.mark.parametrize("first, second, seconds, message", [
    ({"cp-1": {}}, {}, 10, "every apiserver must answer both"),
    ({}, {}, 10, "scraped none"),
    ({"cp-1": {}}, {"cp-1": {}}, 0, "above 0 seconds"),
])
def test_a_window_that_is_not_one_is_refused(first, second, seconds, message):
    with pytest.raises(InputError, match=message):
        fr.apiserver_readings(first, second, seconds)


@pytest.mark.parametrize("text, message", [
    ("", "has no apiserver_request_duration_seconds_bucket or apiserver_request_total"),
    ("# TYPE apiserver_request_total counter\napiserver_request_total{code=\"200\"} 1\n",
     "has no apiserver_request_duration_seconds_bucket"),
    ("<html>login</html>", "not Prometheus text|has no"),
    ('apiserver_request_duration_seconds_bucket{le="x"} 1\napiserver_request_total 1\n', "not Prometheus text"),
])
def test_metrics_that_are_not_an_apiservers_are_refused(text, message):
    with pytest.raises(InputError, match=message):
        fr.scrape(text, "https://cp-1:6443")


def test_nodes_not_ready_and_gpus_allocatable_on_ready_nodes_only():
    nodes = [node("a"), node("b", gpus="7"), node("c", ready="Unknown"), node("d", ready="False"),
             {"metadata": {"name": "e"}, "status": {}}, node("cp-1", gpus=None)]
    pools = fr.pool_expectations(cell_pools(h100=(["a", "b", "c", "d"], 8)))
    out = fr.node_readings(nodes, 32, pools)
    assert out["not_ready_nodes"] == 3 and out["not_ready"] == ["c", "d", "e"]
    assert out["gpus_allocatable"] == 15 and out["gpu_allocatable_fraction"] == round(15 / 32, 4)
    assert out["gpus_expected"] == 32 and out["gpu_nodes_outside_pools"] == {}
    assert fr.node_readings([node("cp-1", gpus=None)], 0)["gpu_allocatable_fraction"] == 1.0
    with pytest.raises(InputError, match="lists no Node"):
        fr.node_readings([], 8, pools)
    with pytest.raises(InputError, match="not a whole number"):
        fr.node_readings([node("a", gpus="8Gi")], 8, pools)
    with pytest.raises(InputError, match="expected_gpus"):
        fr.node_readings([node("a")], -1)


def test_a_pool_that_lost_its_gpus_sets_the_fraction_even_when_the_cells_total_hides_it():
    pools = fr.pool_expectations(cell_pools(h100=(["a", "b"], 8), l40s=(["c", "d"], 8)))
    # h100 has 10 of its 16 (b lost 6); l40s's nodes report 10 each, 2 over their 8: each counts its 8 and is named
    nodes = [node("a"), node("b", gpus="2"), node("c", gpus="10"), node("d", gpus="10")]
    out = fr.node_readings(nodes, 32, pools)
    assert out["gpus_allocatable"] == 26 and out["gpu_allocatable_by_pool"] == {
        "h100": {"allocatable": 10, "expected": 16, "fraction": 0.625, "per_node": 8, "nodes": 2},
        "l40s": {"allocatable": 16, "expected": 16, "fraction": 1.0, "per_node": 8, "nodes": 2}}
    assert out["gpu_allocatable_fraction"] == 0.625
    assert sorted((n, e["state"]) for n, e in out["gpu_allocatable_off_baseline"].items()) == [
        ("b", "below"), ("c", "above"), ("d", "above")]
    # a node outside every pool counts nothing (its GPUs are no pool's), and is listed
    stray = fr.node_readings(nodes + [node("x", gpus="8")], 32, pools)
    assert stray["gpus_allocatable"] == 26 and stray["gpu_nodes_outside_pools"] == {"x": 8}
    empty = fr.node_readings(nodes, 0, fr.pool_expectations({"cpu": {"nodes": [], "gpus": 0, "gpus_per_node": 0}}))
    assert empty["gpu_allocatable_by_pool"]["cpu"]["fraction"] == 1.0 and empty["gpu_allocatable_fraction"] == 1.0


def test_a_pool_node_the_api_does_not_list_leaves_the_gpu_reading_unmeasured_naming_it():
    """An inventory host that is no Node (named otherwise, deleted, never registered) would read as 0 GPUs, and the
    halt would blame the upgrade; the reading is not taken instead, and says which hosts."""
    pools = fr.pool_expectations(cell_pools(h100=(["a", "b.lab"], 8)))
    out = fr.node_readings([node("a"), node("b")], 16, pools)
    assert out["gpu_allocatable_fraction"] is None
    assert out["unmeasured"]["gpu_allocatable_fraction"].startswith("the API lists no Node for pool h100: b.lab (")
    assert out["gpu_allocatable_off_baseline"]["b.lab"] == {"pool": "h100", "allocatable": None, "expected": 8,
                                                            "counted": 0, "state": "no node"}
    whole = fr.node_readings([node("a"), node("b.lab", ready="False")], 16, pools)  # NotReady is listed: a reading
    assert whole["gpu_allocatable_fraction"] == 0.5 and whole["unmeasured"] == {}


@pytest.mark.parametrize("pools", [{"h100": {"nodes": ["a"]}}, {"h100": {"gpus": 8}}, {"h100": "a"},
                                   {"h100": {"nodes": ["a"], "gpus": "8"}}, {"h100": {"nodes": ["a"], "gpus": -1}},
                                   {"h100": {"nodes": "a", "gpus": 8}}])
def test_a_pool_without_its_nodes_or_gpus_is_refused(pools):
    for value in pools.values():
        if isinstance(value, dict):
            value["gpus_per_node"] = 8
    with pytest.raises(InputError, match=r"pools.h100: needs its nodes \(a list of names\) and gpus"):
        fr.pool_expectations(pools)


def test_jobset_restarts_are_summed():
    jobsets = [{"metadata": {"namespace": "training", "name": "llm"}, "status": {"restarts": 2}},
               {"metadata": {"namespace": "training", "name": "idle"}, "status": {}},
               {"metadata": {"namespace": "ml", "name": "new"}}]
    total, per, by_uid = fr.jobset_restarts(jobsets)
    assert (total, per) == (2, {"training/llm": 2})
    # every JobSet by its uid (zero restarts too), or by its name where the API gave no uid
    assert by_uid == {"training/llm": {"name": "training/llm", "restarts": 2},
                      "training/idle": {"name": "training/idle", "restarts": 0},
                      "ml/new": {"name": "ml/new", "restarts": 0}}
    jobsets[0]["metadata"]["uid"] = "5f0c"
    assert fr.jobset_restarts(jobsets)[2]["5f0c"] == {"name": "training/llm", "restarts": 2}
    pools = fr.pool_expectations(cell_pools(h100=(["a"], 8)))
    out = fr.readings({"cp-1": fr.scrape(WINDOW[0], "a")}, {"cp-1": fr.scrape(WINDOW[1], "a")}, 10.0,
                      [node("a")], 8, jobsets, pools)
    assert set(fr.API_READINGS) <= set(out) and out["jobset_restarts"] == 2
    assert fr.readings({"cp-1": fr.scrape(WINDOW[0], "a")}, {"cp-1": fr.scrape(WINDOW[1], "a")}, 10.0,
                       [node("a")], 8, None, pools)["jobset_api"] is False


@pytest.mark.parametrize("urls, gpus, window, timeout, message", [
    ([], 8, 5, 30, "apiserver_urls: empty"),
    (["https://lb:6443", "https://lb:6443"], 8, 5, 30, "https://lb:6443 listed more than once"),
    (["https://a:6443"], 8, 0, 30, "window_seconds: 0; give seconds above 0"),
    (["https://a:6443"], 8, float("nan"), 30, "window_seconds: nan"),
    (["https://a:6443"], 8, 5, -1, "request_timeout: -1"),
    (["https://a:6443"], -1, 5, 30, "expected_gpus: -1"),
])
def test_readings_inputs_are_refused_before_any_request(urls, gpus, window, timeout, message):
    with pytest.raises(InputError, match=message):
        fr.check_inputs("c1", urls, gpus, window, timeout)
    fr.check_inputs("c1", ["https://a:6443", "https://b:6443"], 0, 5, 30)


# -- the versions the fleet report shows ------------------------------------------------------------------------------
def kubelet(name, version):
    return {"metadata": {"name": name}, "status": {"nodeInfo": {"kubeletVersion": version}}}


def test_versions_take_the_oldest_apiserver_and_group_kubelets_by_the_inventorys_pools():
    nodes = [kubelet("cp-1", "v1.36.3"), kubelet("gpu-a1", "v1.35.4"), kubelet("gpu-a2", "v1.36.3"),
             kubelet("stray", "v1.34.1")]
    got = fr.versions({"https://b:6443": "v1.36.3", "https://a:6443": "v1.35.4", "https://c:6443": "v1.36.3"},
                      nodes, {"cp-1": "control-plane", "gpu-a1": "h100-train", "gpu-a2": "h100-train"})
    assert got["control_plane"] == "v1.35.4"  # mid-rollout, a cell is as new as its oldest apiserver
    assert list(got["apiservers"]) == ["https://a:6443", "https://b:6443", "https://c:6443"]
    assert got["kubelets"] == {"control-plane": ["v1.36.3"], "h100-train": ["v1.35.4", "v1.36.3"],
                               fr.NOT_IN_INVENTORY: ["v1.34.1"]}


def test_versions_order_by_version_not_by_text():
    got = fr.versions({"a": "v1.36.10", "b": "v1.36.9"}, [kubelet("n", "v1.36.9")], {"n": "p"})
    assert got["control_plane"] == "v1.36.9"


def test_a_kubelet_without_a_version_stays_empty_for_the_report_to_alert_on():
    got = fr.versions({"a": "v1.36.3"}, [{"metadata": {"name": "n"}, "status": {}}], {"n": "p"})
    assert got["kubelets"] == {"p": [""]}


@pytest.mark.parametrize("apiservers, message", [
    ({}, "no apiserver was read"),
    ({"https://a:6443": "banana"}, "the apiserver https://a:6443 answered version 'banana', which does not parse"),
    ({"https://a:6443": None}, "answered version None"),
])
def test_versions_fail_closed_on_apiservers(apiservers, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        fr.versions(apiservers, [kubelet("n", "v1.36.3")], {})


# -- the sourced readings: the inference service's latency histogram, the NCCL probes -----------------------------
def service_metrics(counts, name="request_duration_seconds", extra=""):
    """Prometheus text of a latency histogram with two series (two routes), ``counts`` per bound split 3:1."""
    lines = ["# HELP %s Request latency." % name, "# TYPE %s histogram" % name]
    for route, share in (("/v1/completions", 0.75), ("/v1/embeddings", 0.25)):
        for bound, count in counts:
            lines.append('%s_bucket{le="%s",route="%s"} %s' % (name, bound, route, count * share))
        lines.append('%s_count{route="%s"} %s' % (name, route, counts[-1][1] * share))
        lines.append('%s_sum{route="%s"} 1.0' % (name, route))
    return "\n".join(lines) + "\n" + extra


BOUNDS = ("0.05", "0.1", "0.25", "0.5", "1.0", "+Inf")


def test_the_inference_p99_is_the_windows_quantile_of_every_series_merged():
    first = fr.scrape_histogram(service_metrics(list(zip(BOUNDS, (100, 190, 200, 200, 200, 200)))), "svc",
                                "request_duration_seconds")
    assert first["route=/v1/completions"][math.inf] == 150 and first["route=/v1/embeddings"][0.05] == 25
    # in the window: 1,000 more requests, 990 under 0.1 s and 10 between 0.25 and 0.5 s
    second = fr.scrape_histogram(service_metrics(list(zip(BOUNDS, (700, 1180, 1190, 1200, 1200, 1200)))), "svc",
                                 "request_duration_seconds")
    out = fr.inference_reading(first, second, "svc")
    assert out["inference_requests"] == 1000
    assert out["inference_p99_ms"] == pytest.approx(100.0)  # the 990th of 1,000 is the last under 0.1 s
    assert out["unmeasured"] == {}
    slow = fr.scrape_histogram(service_metrics(list(zip(BOUNDS, (200, 290, 300, 1100, 1200, 1200)))), "svc",
                               "request_duration_seconds")
    # 900 of the 1,000 under 0.5 s, the rest by 1 s: the 990th at 0.5 + 0.5 x 90/100 s
    assert fr.inference_reading(first, slow, "svc")["inference_p99_ms"] == pytest.approx(950.0)


def test_an_inference_service_that_restarted_counts_from_zero_and_one_that_served_nothing_is_not_measured():
    name = "request_duration_seconds"
    busy = fr.scrape_histogram(service_metrics(list(zip(BOUNDS, (900, 990, 1000, 1000, 1000, 1000)))), "s", name)
    fresh = fr.scrape_histogram(service_metrics(list(zip(BOUNDS, (10, 20, 20, 20, 20, 20)))), "s", name)
    assert fr.inference_reading(busy, fresh, "s")["inference_requests"] == 20
    idle = fr.inference_reading(busy, busy, "s")
    assert idle["inference_p99_ms"] is None and idle["unmeasured"] == {"inference_p99_ms": "s served no request in "
                                                                                          "the window"}


def test_each_inference_series_restarts_on_its_own():
    """One replica restarted in the window (its counts went down) and one did not: the restarted one counts from
    zero, the other from its first scrape, so neither is under- nor over-counted."""
    name = "request_duration_seconds"

    def text(a, b):
        return "".join('%s_bucket{le="%s",pod="%s"} %s\n' % (name, le, pod, count)
                       for pod, counts in (("a", a), ("b", b)) for le, count in zip(("0.1", "+Inf"), counts))
    first = fr.scrape_histogram(text((1000, 1000), (50, 50)), "s", name)
    second = fr.scrape_histogram(text((1100, 1100), (10, 20)), "s", name)  # b restarted: 20 since, 10 slow
    out = fr.inference_reading(first, second, "s")
    # merged before the window's difference, b's restart would hide (1,110 - 1,050 = 60 + 10 = 70 counted)
    assert out["inference_requests"] == 120 and out["inference_restarted"] == ["pod=b"]
    assert out["inference_p99_ms"] == 100.0  # 110 of the 120 under 0.1 s: the 99th is past the last finite bound
    # a replica that is new in the second scrape counts whole; one that went away served nothing in the window
    assert fr.inference_reading({"pod=a": first["pod=a"]}, second, "s")["inference_requests"] == 120
    assert fr.inference_reading(first, {"pod=a": second["pod=a"]}, "s")["inference_requests"] == 100


@pytest.mark.parametrize("text, message", [
    (service_metrics([("0.1", 1), ("+Inf", 1)], name="other_seconds"), "no histogram request_duration_seconds"),
    ("request_duration_seconds_bucket{le=\"0.1\",pod=\"x\"} 1\n", r"request_duration_seconds\{pod=x\} has no "
     r"le=\"\+Inf\" bucket"),
    ("request_duration_seconds_bucket{le=\"0.1\"} one\n", "not Prometheus text"),
    ("request_duration_seconds_bucket{route=\"/\"} 1\n", "not Prometheus text"),
])
def test_inference_metrics_without_the_histogram_are_refused(text, message):
    with pytest.raises(InputError, match=message):
        fr.scrape_histogram(text, "svc", "request_duration_seconds")


def nccl_result(busbw, checks=()):
    return {"passed": not checks, "median_busbw": {str(1024 ** 3): busbw + 20, str(8 * 1024 ** 3): busbw},
            "checks": [{"name": "nccl_runs", "passed": True, "measured": 3}] + list(checks)}


def test_the_nccl_reading_is_the_slowest_probe_at_the_largest_size():
    out = fr.nccl_reading(["gpu-a1", "gpu-b2"], {"gpu-a1": nccl_result(480.0), "gpu-b2": nccl_result(336.0, [
        {"name": "nccl_busbw", "passed": False, "measured": 336.0}])})  # slow is a reading, not a failure
    assert out["nccl_busbw_gbps"] == 336.0 and out["unmeasured"] == {}
    assert out["nccl_busbw_by_host"] == {"gpu-a1": 480.0, "gpu-b2": 336.0}


@pytest.mark.parametrize("results, message", [
    ({"gpu-a1": nccl_result(480.0)}, "gpu-b2: no all_reduce_perf result"),
    ({"gpu-a1": nccl_result(480.0), "gpu-b2": {"failed": True, "msg": "all_reduce_perf: not found"}},
     "gpu-b2: its all_reduce_perf run failed: all_reduce_perf: not found"),
    # the probe play keeps an unreachable host's result (ignore_unreachable) instead of ending the readings
    ({"gpu-a1": nccl_result(480.0), "gpu-b2": {"unreachable": True, "changed": False,
                                              "msg": "Failed to connect to the host via ssh: timed out"}},
     "gpu-b2: unreachable: Failed to connect to the host via ssh: timed out"),
    ({"gpu-a1": nccl_result(480.0), "gpu-b2": nccl_result(480.0, [
        {"name": "nccl_wrong_elements", "passed": False, "measured": 12}])}, "gpu-b2: nccl_wrong_elements 12"),
    ({"gpu-a1": nccl_result(480.0), "gpu-b2": {"passed": True, "median_busbw": {}, "checks": []}},
     "gpu-b2: no bus bandwidth at the baseline's largest size"),
    ({"gpu-a1": nccl_result(480.0), "gpu-b2": {"passed": False, "checks": [],
                                              "median_busbw": {str(8 * 1024 ** 3): None}}},
     "gpu-b2: no bus bandwidth"),
])
def test_an_nccl_probe_without_a_clean_result_leaves_the_reading_unmeasured(results, message):
    out = fr.nccl_reading(["gpu-a1", "gpu-b2"], results)
    assert out["nccl_busbw_gbps"] is None
    assert message in out["unmeasured"]["nccl_busbw_gbps"]


def test_sourced_readings_merge_into_the_cells_readings_with_their_reasons():
    out = {"not_ready_nodes": 0, "unmeasured": {}}
    fr.add_sourced(out, fr.nccl_reading(["gpu-a1"], {}), {"inference_p99_ms": 118.0, "unmeasured": {}})
    assert out["nccl_busbw_gbps"] is None and out["inference_p99_ms"] == 118.0
    assert list(out["unmeasured"]) == ["nccl_busbw_gbps"] and out["not_ready_nodes"] == 0
    with pytest.raises(InputError, match="nccl_hosts: empty"):
        fr.nccl_reading([], {})


# -- issue 33: fail closed, round two ---------------------------------------------------------------------------------
def test_a_node_above_its_pools_gpus_per_node_is_not_hidden_in_the_sum():
    """One node reporting 56 GPUs (a MIG layout change) and three reporting 0 summed to 56 of 32 (1.75): each node
    now counts at most its pool's GPUs per node, and each node off it is named with its count and the expected."""
    pools = fr.pool_expectations(cell_pools(h100=(["a", "b", "c", "d"], 8)))
    assert pools["h100"]["per_node"] == 8
    out = fr.node_readings([node("a", gpus="56"), node("b", gpus="0"), node("c", gpus="0"), node("d", gpus="0")],
                           32, pools)
    assert out["gpus_allocatable"] == 8 and out["gpu_allocatable_fraction"] == 0.25
    assert out["gpu_allocatable_by_pool"]["h100"] == {"allocatable": 8, "expected": 32, "fraction": 0.25,
                                                      "per_node": 8, "nodes": 4}
    assert out["gpu_allocatable_off_baseline"] == {
        "a": {"pool": "h100", "allocatable": 56, "expected": 8, "counted": 8, "state": "above"},
        "b": {"pool": "h100", "allocatable": 0, "expected": 8, "counted": 0, "state": "below"},
        "c": {"pool": "h100", "allocatable": 0, "expected": 8, "counted": 0, "state": "below"},
        "d": {"pool": "h100", "allocatable": 0, "expected": 8, "counted": 0, "state": "below"}}
    # one node above and every other whole: the fraction is whole, the node above is still named
    above = fr.node_readings([node("a", gpus="9"), node("b"), node("c"), node("d")], 32, pools)
    assert above["gpu_allocatable_fraction"] == 1.0
    assert above["gpu_allocatable_off_baseline"] == {
        "a": {"pool": "h100", "allocatable": 9, "expected": 8, "counted": 8, "state": "above"}}
    # a MIG pool expects its baseline's node.allocatable_gpus per node, not gpu.count
    mig = fr.pool_expectations(cell_pools(mig=(["m1", "m2"], 56)))
    whole = fr.node_readings([node("m1", gpus="56"), node("m2", gpus="56")], 112, mig)
    assert whole["gpu_allocatable_fraction"] == 1.0 and whole["gpu_allocatable_off_baseline"] == {}
    # a NotReady node and a Ready one without the resource are named too
    gone = fr.node_readings([node("a"), node("b", ready="False"), node("c", gpus=None), node("d")], 32, pools)
    assert gone["gpu_allocatable_off_baseline"] == {
        "b": {"pool": "h100", "allocatable": 8, "expected": 8, "counted": 0, "state": "not ready"},
        "c": {"pool": "h100", "allocatable": None, "expected": 8, "counted": 0, "state": "below"}}
    assert gone["gpu_allocatable_fraction"] == 0.5


def test_pool_expectations_take_the_gpus_per_node_from_the_baseline_and_refuse_a_pool_that_does_not_add_up():
    pools = cell_pools(h100=(["a", "b"], 8))
    assert fr.pool_expectations(pools) == {"h100": {"nodes": ["a", "b"], "gpus": 16, "per_node": 8}}
    del pools["h100"]["baseline"]["node"]  # a baseline without node.allocatable_gpus offers gpu.count
    assert fr.pool_expectations(pools)["h100"]["per_node"] == 8
    explicit = {"h100": {"nodes": ["a"], "gpus": 4, "gpus_per_node": 4}}
    assert fr.pool_expectations(explicit)["h100"]["per_node"] == 4
    for bad, message in (
            ({"h100": {"nodes": ["a", "b"], "gpus": 16}}, r"pools.h100: no GPUs per node"),
            ({"h100": {"nodes": ["a", "b"], "gpus": 16, "baseline": {}}}, r"pools.h100: no GPUs per node"),
            ({"h100": {"nodes": ["a", "b"], "gpus": 15, "gpus_per_node": 8}},
             r"pools.h100: gpus 15 is not its 2 nodes times 8 GPUs per node \(16\)"),
            ({"h100": {"nodes": ["a"], "gpus": 8, "gpus_per_node": True}}, r"pools.h100: gpus_per_node True"),
            ({"h100": {"nodes": ["a"], "gpus": 8, "gpus_per_node": 8}, "l40s": {"nodes": ["a"], "gpus": 8,
                                                                           "gpus_per_node": 8}},
             r"pools.l40s: node a is in pool h100 too"),
            ({"h100": {"nodes": ["a", "a"], "gpus": 16, "gpus_per_node": 8}}, r"pools.h100: node a listed twice")):
        with pytest.raises(InputError, match=message):
            fr.pool_expectations(bad)


def test_gpus_expected_without_the_pools_to_judge_each_node_against_is_refused():
    with pytest.raises(InputError, match=r"pools: none given for a cell that should have 32 GPUs"):
        fr.node_readings([node("a")], 32)
    with pytest.raises(InputError, match=r"pools: none given"):
        fr.node_readings([node("a")], 32, {})


@pytest.mark.parametrize("value", ["NaN", float("inf"), float("nan"), [1], {"n": 1}, -1, True, "3", 2.5, "\uff11"])
def test_a_jobset_restart_count_that_is_not_a_whole_number_is_a_clear_error_naming_the_jobset(value):
    jobsets = [{"metadata": {"namespace": "training", "name": "llm", "uid": "u1"}, "status": {"restarts": value}}]
    with pytest.raises(InputError, match=r"JobSet training/llm: status.restarts is .* not a whole number"):
        fr.jobset_restarts(jobsets)


@pytest.mark.parametrize("nodes, message", [
    ([node("a", gpus="\uff18")], r"node a: allocatable nvidia.com/gpu is '\uff18', not a whole number of GPUs"),
    ([node("a", gpus="-1")], r"node a: allocatable nvidia.com/gpu is '-1'"),
    ([node("a", gpus=" 8")], r"node a: allocatable nvidia.com/gpu is ' 8'"),
    ([node("a", gpus=["8"])], r"node a: allocatable nvidia.com/gpu is \['8'\]"),
    ([node("a", gpus=8.0)], r"node a: allocatable nvidia.com/gpu is 8.0"),
    (["a"], r"Node #0: not an object"),
    ([{"metadata": {}, "status": {}}], r"Node #0: no metadata.name"),
    ([{"metadata": {"name": "a"}, "status": []}], r"node a: status is not an object"),
    ([{"metadata": {"name": "a"}, "status": {"conditions": ["Ready"]}}], r"node a: status.conditions"),
    ([{"metadata": {"name": "a"}, "status": {"allocatable": ["8"]}}], r"node a: status.allocatable"),
    ([node("a"), node("a")], r"node a is listed twice"),
])
def test_a_node_list_of_the_wrong_shape_is_a_clear_error(nodes, message):
    with pytest.raises(InputError, match=message):
        fr.node_readings(nodes, 8, fr.pool_expectations(cell_pools(h100=(["a"], 8))))


@pytest.mark.parametrize("url", ["https://cp-1:6443\n", "https://\uff43\uff50-1:6443", "https://cp-1:6443/x", "http://cp-1:6443",
                                 "https://cp-1:\uff16\uff14\uff14\uff13"])
def test_apiserver_urls_are_checked_whole_and_ascii(url):
    with pytest.raises(InputError, match=r"apiserver_urls: .* is not an apiserver URL"):
        fr.check_inputs("c1", [url], 8, 5, 30)
    fr.check_inputs("c1", ["https://cp-1:6443", "https://[fd00::1]:6443", "https://10.0.0.1"], 8, 5, 30)
