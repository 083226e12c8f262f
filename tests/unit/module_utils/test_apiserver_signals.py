"""The control-plane soak's signals: the reduction of a real apiserver's /metrics, the window within one process,
the judgement against the reading before and the peers, and the soak's loop with its clock handed in."""
from __future__ import annotations

import gzip
import math
import pathlib
import re

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import apiserver_signals as sig
from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_readings
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed, InputError

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
REAL = gzip.decompress((FIXTURES / "real-1.35.4-deprecated.prom.gz").read_bytes()).decode()
VERSION = (FIXTURES / "real-1.35.4-version.json").read_text()
CFG = sig.settings({"min_requests": 10, "interval_seconds": 5, "warmup_seconds": 20, "before_seconds": 10})


def test_a_real_apiservers_metrics_reduce_to_the_soaks_counters():
    reduced = sig.reduce(REAL, "cp-1", VERSION)
    assert reduced["rss_bytes"] == 282062848.0 and reduced["started"] == 1796476648.79
    assert reduced["throttled"] == 0 and reduced["requests"]["GET"] > 0 and reduced["requests"]["LIST"] > 0
    assert set(reduced["buckets"]) == {"read", "list", "write"}
    for kind in sig.CLASSES:  # cumulative: every class's +Inf bucket holds its requests
        assert reduced["buckets"][kind][math.inf] == max(reduced["buckets"][kind].values()) > 0
    # the fleet's scrape is this reduction, every class merged
    merged = fleet_readings.scrape(REAL, "cp-1")["buckets"]
    assert merged[math.inf] == sum(reduced["buckets"][k][math.inf] for k in sig.CLASSES)


def real_soak(name):
    return sig.reduce(gzip.decompress((FIXTURES / ("real-1.36.3-soak-%s.prom.gz" % name)).read_bytes()).decode(),
                      "cp-2", (FIXTURES / "real-1.36.3-soak-version.json").read_text())


def test_a_real_apiserver_under_the_lab_faults_shows_each_signal():
    quiet, throttled, slow = real_soak("0-quiet"), real_soak("1-throttled"), real_soak("2-slow-webhook")
    assert quiet["version"] == "v1.36.3" and quiet["started"] == throttled["started"] == slow["started"]
    rejected = sig.window(quiet, throttled, 12.0, 5, "cp-2")  # APF's no-seat level: 7,205 429s in 12 s
    assert rejected["throttled_per_minute"] == 36025.0 and rejected["p99_seconds.read"] < 0.05
    webhook = sig.window(throttled, slow, 23.0, 5, "cp-2")  # writes through the webhook that answers after 4 s
    assert webhook["requests"]["write"] == 16 and webhook["p99_seconds.write"] > 4.0
    judged = {c["signal"]: c for c in sig.judge("cp-2", rejected, webhook, {}, CFG)}
    assert not judged["p99_seconds.write"]["passed"] and judged["p99_seconds.read"]["passed"]


@pytest.mark.parametrize("text, version, message", [
    (REAL, VERSION.replace("v1.35.4", "v1.36.3"), "the /metrics text is not this apiserver's"),
    ("<html><body>502 Bad Gateway</body></html>", VERSION, "cp-1"),
    ("\n".join(line for line in REAL.splitlines() if "apiserver_request_duration_seconds" not in line), VERSION,
     "cp-1: /metrics has no apiserver_request_duration_seconds_bucket"),
    (REAL, '{"kind": "Status"}', "cp-1: /version has no gitVersion"),
    ("", VERSION, "cp-1: the /metrics text is not this apiserver's: it has no kubernetes_build_info"),
    ("N/A\n", VERSION, "cp-1: /metrics is not Prometheus text"),
    (REAL[:len(REAL) // 3], VERSION, "cp-1: /metrics is not Prometheus text"),  # cut off mid-line
    (REAL, "", "cp-1 /version: output is empty"),
    (REAL, "N/A", "cp-1 /version: output is not valid JSON"),
])
def test_metrics_that_are_not_this_apiservers_are_refused_naming_the_host(text, version, message):
    with pytest.raises(InputError, match=message):
        sig.reduce(text, "cp-1", version)


def scrape(started=1000.0, throttled=0.0, get=0.0, lists=0.0, watch=0.0, puts=0.0, slow_puts=0.0, rss=4e8,
           fast=0.005, slow=2.5, version="v1.35.4"):
    """reduce()'s shape: ``get``/``lists``/``puts`` requests answered in ``fast`` seconds, ``slow_puts`` in
    ``slow``."""
    def buckets(fast_n, slow_n=0.0):
        out = {}
        for bound in (0.005, 0.025, 0.1, 0.5, 1.0, 2.0, 4.0, 8.0, math.inf):
            out[bound] = (fast_n if bound >= fast else 0.0) + (slow_n if bound >= slow else 0.0)
        return out
    return {"throttled": throttled, "started": started, "rss_bytes": rss, "version": version,
            "requests": {"GET": get, "LIST": lists, "WATCH": watch, "PUT": puts + slow_puts},
            "buckets": {"read": buckets(get), "list": buckets(lists), "write": buckets(puts, slow_puts)}}


def test_a_window_gives_rates_and_p99s_and_leaves_a_thin_class_unmeasured():
    reading = sig.window(scrape(get=100, lists=10, puts=50), scrape(get=220, lists=40, watch=5, puts=55,
                                                                    throttled=30), 60.0, 10, "cp-1")
    assert reading["throttled_per_minute"] == 30 and reading["relists_per_minute"] == 30  # LISTs: WATCHes end late
    assert reading["requests"] == {"read": 120, "list": 30, "write": 5}
    assert reading["p99_seconds.read"] == pytest.approx(0.00495, abs=1e-4) and reading["p99_seconds.write"] is None
    assert reading["unmeasured"] == {"p99_seconds.write": "5 write requests in 60 s, fewer than min_requests 10"}
    assert reading["rss_bytes"] == 4e8


def test_a_window_across_a_restart_is_refused():
    with pytest.raises(GateFailed, match="restarted within the window"):
        sig.window(scrape(get=100), scrape(started=2000.0, get=150), 30.0, 10, "cp-1")
    with pytest.raises(GateFailed, match="restarted within the window"):  # same start time, counter went down
        sig.window(scrape(get=100, throttled=9), scrape(get=150, throttled=2), 30.0, 10, "cp-1")


def reading(**values):
    out = {s: None for s in sig.SIGNALS}
    out.update({"throttled_per_minute": 0.0, "p99_seconds.read": 0.01, "p99_seconds.list": 0.05,
                "p99_seconds.write": 0.02, "relists_per_minute": 20.0, "rss_bytes": 4e8, "unmeasured": {}})
    out.update({k.replace("__", "."): v for k, v in values.items()})
    return out


def failed(checks):
    return {c["signal"]: c for c in checks if not c["passed"]}


def test_a_signal_regressed_against_the_reading_before_and_the_peers_fails_naming_its_values():
    checks = sig.judge("cp-1", reading(), reading(throttled_per_minute=600.0, p99_seconds__write=3.0),
                       {"cp-2": reading(), "cp-3": reading(throttled_per_minute=2.0)}, CFG)
    bad = failed(checks)
    assert sorted(bad) == ["p99_seconds.write", "throttled_per_minute"]
    assert bad["throttled_per_minute"]["detail"] == "throttled_per_minute 600.0/min, before 0.0/min, peers 1.0/min"
    assert bad["throttled_per_minute"]["limit"] == 7.0  # peers' median 1/min x 2 + 5
    assert bad["p99_seconds.write"]["limit"] == pytest.approx(0.14)
    assert sig.failure("cp-1", checks) == (
        "cp-1: the control-plane soak failed: throttled_per_minute 600.0/min, before 0.0/min, peers 1.0/min "
        "(limit 7.0/min); p99_seconds.write 3.000 s, before 0.020 s, peers 0.020 s (limit 0.140 s)")


def test_a_rise_the_peers_share_is_the_cells_not_the_hosts():
    busy = reading(p99_seconds__read=0.9, throttled_per_minute=50.0)
    assert failed(sig.judge("cp-1", reading(), busy, {"cp-2": busy, "cp-3": busy}, CFG)) == {}
    # with no peers (one control-plane host) the reading before decides alone
    assert sorted(failed(sig.judge("cp-1", reading(), busy, {}, CFG))) == ["p99_seconds.read", "throttled_per_minute"]


def test_unmeasured_is_never_a_pass_and_an_unreferenced_latency_meets_the_slo_ceiling():
    after = reading(p99_seconds__write=None)
    after["unmeasured"] = {"p99_seconds.write": "3 write requests in 30 s, fewer than min_requests 10"}
    assert failed(sig.judge("cp-1", reading(), after, {}, CFG))["p99_seconds.write"]["detail"] == (
        "p99_seconds.write unmeasured: 3 write requests in 30 s, fewer than min_requests 10")
    nothing = reading(p99_seconds__list=None)
    judged = {c["signal"]: c for c in sig.judge("cp-1", nothing, reading(p99_seconds__list=12.0), {}, CFG)}
    assert judged["p99_seconds.list"]["passed"] and judged["p99_seconds.list"]["limit"] == 30.0
    judged = {c["signal"]: c for c in sig.judge("cp-1", nothing, reading(p99_seconds__list=31.0), {}, CFG)}
    assert not judged["p99_seconds.list"]["passed"]


class Clock:
    def __init__(self):
        self.t = 0.0

    def sleep(self, seconds):
        assert seconds >= 0
        self.t += seconds


def soak(host_scrapes, peer_scrapes, before=None, seconds=15, ready=lambda: None, cfg=CFG):
    """Run the soak with scrapes given per call (each list is consumed in order)."""
    clock = Clock()
    feeds = {"cp-1": iter(host_scrapes), "cp-2": iter(peer_scrapes)}
    plan = sig.soak_inputs("cp-1", "https://10.0.0.11:6443", {"cp-2": "https://10.0.0.12:6443"},
                           before or reading(), seconds, "soak")
    return sig.run("cp-1", plan, cfg, lambda name: next(feeds[name]), ready, lambda: clock.t,
                   lambda: 1000.0 + clock.t, clock.sleep), clock


def steady(n, started=1000.0, version="v1.35.4", **rates):
    """n scrapes 5 s apart of a process answering ``rates`` requests per 5 s."""
    return [scrape(started=started, version=version, **{k: v * i for k, v in rates.items()}) for i in range(n)]


NEW = "v1.36.3"  # the host's release after the move; the peers still run v1.35.4


def test_a_quiet_soak_passes_and_returns_its_readings():
    host = steady(6, version=NEW, get=20, lists=5, puts=10)
    result, clock = soak(host, steady(5, get=20, lists=5, puts=10))
    assert result["passed"] and clock.t == 35.0  # 20 s warm-up (the process is 0 s old), then 15 s
    assert result["reading"]["seconds"] == 15 and result["reading"]["requests"]["read"] == 60
    assert set(result["peers"]) == {"cp-2"} and all(c["passed"] for c in result["checks"])


def moved(n=8, throttled=0.0, slow_puts=0.0):
    """The host after its move: two quiet scrapes (the warm-up's and the soak's start), then ``throttled`` 429s and
    ``slow_puts`` slow writes more at each reading."""
    return steady(2, version=NEW, get=20, lists=5, puts=10) + [
        scrape(version=NEW, get=40 + 20 * i, lists=10 + 5 * i, puts=20 + 10 * i, throttled=throttled * i,
               slow_puts=slow_puts * i) for i in range(1, n)]


def test_a_throttled_host_fails_at_the_first_reading_that_shows_it():
    with pytest.raises(GateFailed) as err:
        soak(moved(throttled=100.0), steady(6, get=20, lists=5, puts=10), seconds=30)
    # a 5 s window: the slack is a minute's worth of events (5), so the limit is 60/min
    assert "throttled_per_minute 1200.0/min, before 0.0/min, peers 0.0/min (limit 60.0/min)" in err.value.msg
    assert err.value.details["reading"]["seconds"] == 5  # it did not wait out the soak


def test_one_429_in_a_short_window_is_not_a_regression():
    host = steady(2, version=NEW, get=20, lists=5, puts=10) + [
        scrape(version=NEW, get=40 + 20 * i, lists=10 + 5 * i, puts=20 + 10 * i, throttled=1.0) for i in range(1, 4)]
    result, _ = soak(host, steady(5, get=20, lists=5, puts=10))
    assert result["passed"] and result["reading"]["throttled_per_minute"] == 4.0


def test_a_slow_host_fails_on_its_write_latency_once_measured():
    with pytest.raises(GateFailed, match=r"p99_seconds.write 3.\d+ s, before 0.020 s, peers 0.005 s"):
        soak(moved(slow_puts=4.0), steady(6, get=20, lists=5, puts=10), seconds=30)


def test_a_late_regression_is_judged_on_the_last_interval_not_diluted_by_the_soak():
    quiet = steady(62, version=NEW, get=20, lists=5, puts=10)  # 300 s of soak, then 8 429s in 5 s, twice
    late = quiet + [scrape(version=NEW, get=1220 + 20 * i, lists=305 + 5 * i, puts=610 + 10 * i, throttled=8.0 * i)
                    for i in range(1, 3)]
    with pytest.raises(GateFailed) as err:
        soak(late, steady(64, get=20, lists=5, puts=10), seconds=400)
    assert "throttled_per_minute 96.0/min (the last 5 s), before 0.0/min, peers 0.0/min (limit 60.0/min)" in \
        err.value.msg
    assert err.value.details["reading"]["throttled_per_minute"] < 60  # the whole soak's rate alone would pass


def test_a_peer_already_at_the_target_is_no_reference():
    clock = Clock()
    feeds = {"cp-1": iter(moved(throttled=100.0)), "cp-2": iter(moved(throttled=100.0)[1:])}
    plan = sig.soak_inputs("cp-1", "https://10.0.0.11:6443", {"cp-2": "https://10.0.0.12:6443"}, reading(), 30,
                           "soak")
    with pytest.raises(GateFailed) as err:  # cp-2 carries the same 429s, yet the reading before still decides
        sig.run("cp-1", plan, CFG, lambda name: next(feeds[name]), lambda: None, lambda: clock.t,
                lambda: 1000.0 + clock.t, clock.sleep)
    assert "throttled_per_minute 1200.0/min, before 0.0/min, peers unmeasured" in err.value.msg
    assert err.value.details["peers_at_target"] == ["cp-2"] and "cp-2" in err.value.details["peers"]


def test_readyz_restart_and_an_unmeasured_end_fail_the_soak():
    def not_ready():
        raise GateFailed("cp-1: /readyz failed during the soak: HTTP 500 [-]etcd failed")
    with pytest.raises(GateFailed, match=r"/readyz failed"):
        soak(steady(6, version=NEW, get=20), steady(5, get=20), ready=not_ready)
    restarted = steady(2, version=NEW, get=20, lists=5, puts=10) + steady(5, started=1030.0, version=NEW, get=20,
                                                                         lists=5, puts=10)
    with pytest.raises(GateFailed, match="its new apiserver restarted during the soak"):
        soak(restarted, steady(5, get=20, lists=5, puts=10))
    warm = steady(1, version=NEW) + steady(5, started=1010.0, version=NEW, get=20, lists=5, puts=10)
    with pytest.raises(GateFailed, match="restarted during its warm-up"):
        soak(warm, steady(5, get=20, lists=5, puts=10))
    with pytest.raises(GateFailed, match="p99_seconds.write unmeasured"):  # one write a reading: 3 in 15 s
        soak(steady(6, version=NEW, get=20, lists=5, puts=1), steady(5, get=20, lists=5, puts=1))


def test_a_rerun_with_every_peer_moved_and_no_reading_before_is_judged_against_those_peers():
    clock = Clock()
    feeds = {"cp-3": iter(moved()), "cp-1": iter(moved()[1:]), "cp-2": iter(moved()[1:])}
    plan = sig.soak_inputs("cp-3", "https://10.0.0.13:6443", {"cp-1": "https://10.0.0.11:6443",
                                                              "cp-2": "https://10.0.0.12:6443"}, None, 10, "soak")
    result = sig.run("cp-3", plan, CFG, lambda name: next(feeds[name]), lambda: None, lambda: clock.t,
                     lambda: 1000.0 + clock.t, clock.sleep)
    assert result["passed"] and result["peers_at_target"] == ["cp-1", "cp-2"]
    assert {c["signal"]: c["peers"] for c in result["checks"]}["rss_bytes"] == 4e8


def test_metrics_without_the_process_series_fail_the_soak():
    with pytest.raises(InputError, match="cp-1: /metrics has no process_start_time_seconds"):
        soak([scrape(started=None, version=NEW)], [])
    no_rss = [dict(s, rss_bytes=None) for s in steady(6, version=NEW, get=20, lists=5, puts=10)]
    with pytest.raises(GateFailed, match="rss_bytes unmeasured: cp-1: /metrics has no process_resident_memory_bytes"):
        soak(no_rss, steady(5, get=20, lists=5, puts=10))


def test_without_a_reading_before_the_peers_alone_are_the_reference():
    clock = Clock()
    feeds = {"cp-1": iter(moved(throttled=100.0)), "cp-2": iter(steady(6, get=20, lists=5, puts=10))}
    plan = sig.soak_inputs("cp-1", "https://10.0.0.11:6443", {"cp-1": "https://10.0.0.11:6443",
                                                              "cp-2": "https://10.0.0.12:6443"}, None, 30, "soak")
    with pytest.raises(GateFailed, match=r"throttled_per_minute 1200.0/min, before unmeasured, peers 0.0/min"):
        sig.run("cp-1", plan, CFG, lambda name: next(feeds[name]), lambda: None, lambda: clock.t,
                lambda: 1000.0 + clock.t, clock.sleep)


def test_the_soak_probes_every_apiserver_at_every_reading():
    clock, probed = Clock(), []
    feeds = {"cp-1": iter(steady(6, version=NEW, get=20, lists=5, puts=10)),
             "cp-2": iter(steady(5, get=20, lists=5, puts=10))}
    plan = sig.soak_inputs("cp-1", "https://10.0.0.11:6443", {"cp-2": "https://10.0.0.12:6443"}, reading(), 15,
                           "soak")
    sig.run("cp-1", plan, CFG, lambda name: next(feeds[name]), lambda: None, lambda: clock.t,
            lambda: 1000.0 + clock.t, clock.sleep, probed.append)
    assert probed == ["cp-1", "cp-2"] * 3


def test_the_reading_before_is_one_window_of_the_host():
    clock, probed = Clock(), []
    feed = iter(steady(2, get=30, lists=3, puts=12))
    plan = sig.soak_inputs("cp-1", "https://10.0.0.11:6443", {}, None, 0, "before")
    out = sig.run("cp-1", plan, CFG, lambda name: next(feed), None, lambda: clock.t, None, clock.sleep, probed.append)
    assert clock.t == 10 and out["reading"]["requests"] == {"read": 30, "list": 3, "write": 12}
    assert out["reading"]["p99_seconds.list"] is None  # 3 LISTs: unmeasured, for the soak to know
    assert probed == ["cp-1", "cp-1"]  # at each interval of the window
    # the old apiserver restarting within the window: read once more, then refuse
    clock = Clock()
    feed = iter([scrape(get=10), scrape(started=2000.0, get=5)] + steady(2, started=2000.0, get=30))
    assert sig.run("cp-1", plan, CFG, lambda name: next(feed), None, lambda: clock.t, None, clock.sleep)["reading"]
    feed = iter([scrape(get=10), scrape(started=2000.0, get=5), scrape(started=2000.0), scrape(started=3000.0)])
    with pytest.raises(GateFailed, match="restarted within the window"):
        sig.run("cp-1", plan, CFG, lambda name: next(feed), None, lambda: clock.t, None, clock.sleep)


def with_lines(text, after, *extra):
    """``text`` with ``extra`` lines inserted after the first line that starts with ``after``."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(after))
    return "\n".join(lines[:at + 1] + list(extra) + lines[at + 1:]) + "\n"


EVICTION = ('apiserver_request_total{code="429",component="apiserver",dry_run="",group="",resource="pods",'
            'scope="resource",subresource="eviction",verb="POST",version="v1"} 40')
GET_429 = ('apiserver_request_total{code="429",component="apiserver",dry_run="",group="",resource="pods",'
           'scope="resource",subresource="",verb="GET",version="v1"} 3')
WATCH_429 = ('apiserver_request_total{code="429",component="apiserver",dry_run="",group="kueue.x-k8s.io",'
             'resource="workloads",scope="cluster",subresource="",verb="WATCH",version="v1beta2"} 7')
TERMINATED = ("# HELP apiserver_request_terminations_total [ALPHA] Number of requests which apiserver terminated in "
              "self-defense.", "# TYPE apiserver_request_terminations_total counter",
              'apiserver_request_terminations_total{code="429",component="apiserver",group="",resource="pods",'
              'scope="resource",subresource="",verb="GET",version="v1"} 3',
              'apiserver_request_terminations_total{code="504",component="apiserver",group="",resource="pods",'
              'scope="resource",subresource="",verb="GET",version="v1"} 11')
REJECTED = ("# HELP apiserver_flowcontrol_rejected_requests_total [BETA] Number of requests rejected by API Priority "
            "and Fairness subsystem", "# TYPE apiserver_flowcontrol_rejected_requests_total counter",
            'apiserver_flowcontrol_rejected_requests_total{flow_schema="global-default",priority_level='
            '"global-default",reason="queue-full"} %s')


def test_only_the_requests_a_filter_refused_are_throttling():
    # the capture's apiserver has refused nothing (neither counter is there yet): the 429s that no filter gave -
    # the eviction API's, a watch cache's while it initialises - are no throttling, whatever their verb
    text = with_lines(REAL, "apiserver_request_total{", EVICTION, GET_429, WATCH_429)
    assert sig.reduce(text, "cp-1", VERSION)["throttled"] == 0
    # a filter ended three requests 429 (the 504s are timeouts, not refusals); APF's own count where it is higher
    terminated = with_lines(text, "# TYPE apiserver_request_duration_seconds", *TERMINATED)
    assert sig.reduce(terminated, "cp-1", VERSION)["throttled"] == 3
    for apf, throttled in ((5, 5), (2, 3)):
        rejected = with_lines(terminated, "# TYPE apiserver_request_duration_seconds", *REJECTED[:2],
                              REJECTED[2] % apf)
        assert sig.reduce(rejected, "cp-1", VERSION)["throttled"] == throttled


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1"])
def test_a_count_that_is_no_number_is_refused_naming_the_series(value):
    bad = with_lines(REAL, "# TYPE apiserver_request_duration_seconds", *REJECTED[:2], REJECTED[2] % value)
    with pytest.raises(InputError, match=r"cp-1: /metrics gives apiserver_flowcontrol_rejected_requests_total\{"
                                         r"flow_schema='global-default',.* the value (nan|inf|-1.0), not a finite"):
        sig.reduce(bad, "cp-1", VERSION)
    terminated = with_lines(REAL, "# TYPE apiserver_request_duration_seconds", *TERMINATED[:2],
                            TERMINATED[2].rsplit(" ", 1)[0] + " " + value)
    with pytest.raises(InputError, match="gives apiserver_request_terminations_total"):
        sig.reduce(terminated, "cp-1", VERSION)
    # the request counter, a latency bucket, the resident memory and the start time: each the capture's first line
    for series in ("apiserver_request_total{", "apiserver_request_duration_seconds_bucket{",
                   "process_resident_memory_bytes ", "process_start_time_seconds "):
        line = next(line for line in REAL.splitlines() if line.startswith(series))
        with pytest.raises(InputError, match="gives %s" % series.strip(" {")):
            sig.reduce(REAL.replace(line, line.rsplit(" ", 1)[0] + " " + value), "cp-1", VERSION)


def test_a_bucket_bound_that_is_nan_is_refused():
    line = next(line for line in REAL.splitlines() if line.startswith("apiserver_request_duration_seconds_bucket{")
                and 'resource="' in line and 'resource=""' not in line)
    bound = re.search(r'le="([^"]+)"', line).group(1)
    with pytest.raises(InputError, match="cp-1: /metrics is not Prometheus text"):
        sig.reduce(REAL.replace(line, line.replace('le="%s"' % bound, 'le="NaN"')), "cp-1", VERSION)


def test_a_refusal_counter_that_appears_or_takes_over_between_two_scrapes_is_one_process():
    quiet = sig.reduce(REAL, "cp-1", VERSION)  # neither counter yet: its first refusal makes it appear
    first = sig.reduce(with_lines(REAL, "# TYPE apiserver_request_duration_seconds", *TERMINATED), "cp-1", VERSION)
    both = with_lines(REAL, "# TYPE apiserver_request_duration_seconds", *TERMINATED[:2],
                      TERMINATED[2].rsplit(" ", 1)[0] + " 4", *REJECTED[:2], REJECTED[2] % 9)
    second = sig.reduce(both, "cp-1", VERSION)  # APF's own count now the higher
    assert sig.window(quiet, first, 60.0, 1, "cp-1")["throttled_per_minute"] == 3.0
    assert sig.window(first, second, 60.0, 1, "cp-1")["throttled_per_minute"] == 6.0
    readings = fleet_readings.apiserver_readings({"cp-1": fleet_readings.scrape(REAL, "cp-1")},
                                                 {"cp-1": fleet_readings.scrape(both, "cp-1")}, 30.0)
    assert readings["apiserver_429_per_minute"] == 18.0 and not readings["apiservers"]["cp-1"].get("restarted")


def test_the_real_apf_rejections_are_the_filters_429s():
    # the lab's soak-429 fault on a real apiserver: every refusal counted once in each counter
    for name in ("0-quiet", "1-throttled", "2-slow-webhook"):
        text = gzip.decompress((FIXTURES / ("real-1.36.3-soak-%s.prom.gz" % name)).read_bytes()).decode()
        counts = {m: sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(m + "{")
                         and ("code=" not in line or 'code="429"' in line))
                  for m in (sig.TERMINATIONS, sig.APF_REJECTED)}
        assert counts[sig.TERMINATIONS] == counts[sig.APF_REJECTED] == real_soak(name)["throttled"] > 20000


def test_a_real_apiserver_just_started_answers_429_while_its_watch_caches_initialise_and_is_not_throttled():
    # cp-1 of lab-b a minute after it started: twelve 429s to the controller manager's and the lab controller's
    # WATCHes and LISTs of CRDs ("storage is (re)initializing" in the audit log), no filter refused a request
    text = gzip.decompress((FIXTURES / "real-1.36.3-fresh-start.prom.gz").read_bytes()).decode()
    version = (FIXTURES / "real-1.36.3-fresh-start-version.json").read_text()
    answered = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith('apiserver_request_total{code="429"'))
    assert answered == 12 and sig.TERMINATIONS not in text and sig.APF_REJECTED not in text
    reduced = sig.reduce(text, "cp-1", version)
    assert reduced["throttled"] == 0 and reduced["version"] == "v1.36.3"
    assert fleet_readings.scrape(text, "cp-1")["throttled"] == 0  # the fleet's 429 reading is the same reduction


def test_non_resource_paths_are_not_the_apiservers_requests():
    lines = REAL.splitlines()
    reduced = sig.reduce(with_lines(REAL, "apiserver_request_total{", EVICTION, GET_429, WATCH_429), "cp-1", VERSION)
    assert reduced["version"] == "v1.35.4"
    readyz = sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("apiserver_request_total{")
                 and re.search(r'[{,]resource=""', line) and 'verb="GET"' in line)
    assert readyz > 0  # the capture's own /metrics, /version and /readyz GETs: not resource requests
    every_get = sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("apiserver_request_total{")
                    and 'verb="GET"' in line)
    assert reduced["requests"]["GET"] == every_get - readyz + 3


@pytest.mark.parametrize("args, message", [
    (("cp-1", "https://lb:6443", {"cp-2": "https://lb:6443"}, reading(), 30, "soak"),
     "https://lb:6443 given for more than one host"),
    (("cp-1", "https://a:6443", {"cp-1": "https://b:6443"}, reading(), 30, "soak"),
     "apiservers.cp-1 is 'https://b:6443' but apiserver_url is 'https://a:6443'"),
    (("cp-1", "http://a:6443", {}, reading(), 30, "soak"), "apiserver_url: 'http://a:6443' is not an apiserver URL"),
    (("cp-1", "https://a:6443", {"cp-2": "https://b:6443\n"}, reading(), 30, "soak"), "apiservers.cp-2"),
    (("cp-1", "https://a:6443", {}, {"throttled_per_minute": 1}, 30, "soak"), "before: no p99_seconds.read"),
    (("cp-1", "https://a:6443", {}, reading(rss_bytes=float("nan")), 30, "soak"), r"before.rss_bytes: nan"),
    (("cp-1", "https://a:6443", {}, reading(), 0, "soak"), "soak_seconds: 0; give 1 to 86400"),
    (("cp-1", "https://127.0.0.1:6443", {}, reading(), 30, "soak"), "apiserver_url: https://127.0.0.1:6443 is a "
                                                                     "loopback address"),
])
def test_bad_soak_inputs_are_refused_before_any_request(args, message):
    with pytest.raises(InputError, match=message):
        sig.soak_inputs(*args)


@pytest.mark.parametrize("value, message", [
    ({"interval": 5}, "gpufleet_soak_signals: .*interval"),
    ({"interval_seconds": 0}, r"gpufleet_soak_signals.interval_seconds: 0; give 1 to 600"),
    ({"latency_ratio": 0.5}, r"latency_ratio: 0.5; give a ratio of 1 or more"),
    ({"rss_slack_bytes": -1}, r"rss_slack_bytes: -1; give 0 or more"),
    ({"min_requests": "many"}, "min_requests"),
    (["x"], "gpufleet_soak_signals: expected a mapping"),
])
def test_bad_soak_settings_are_refused_naming_the_field(value, message):
    with pytest.raises(InputError, match=message):
        sig.settings(value)


def test_the_soak_settings_default_in_one_place():
    assert sig.settings(None) == {k: v["default"] for k, v in sig.SPEC.items()}
