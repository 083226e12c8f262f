"""SIMULATION of a cell's inference service as the fleet's halt reading sees it: its request latency histogram on a
Prometheus /metrics endpoint (http://127.0.0.1:PORTS.inference/metrics, served by the lab controller), for
``inference_p99_ms`` (plugins/module_utils/fleet_readings.py). A real cell's comes from the serving stack's own
metrics (or its Prometheus); there is no model server here.

The service answers RATE requests a second. Their latency is log-normal with a median of 42 ms and a p99 of 118 ms
(the canary latency probe's figures, workloads.py), six times that while any GPU host of the cell has the
``inference-slow`` fault. The counts are the expected ones (fractions of a request), so the reading is the same at
any window: histogram_quantile's estimate from these buckets is 133 ms clean and 925 ms slow. The histogram is
cumulative from the controller's start, as a real process's is: the counts grow by the time elapsed at each scrape,
so two scrapes a window apart give that window's latency.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Iterator, List, Tuple

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import HistogramMetricFamily

from gpufleet_lab import faults
from gpufleet_lab.config import LabConfig

HISTOGRAM = "gpufleet_lab_inference_request_duration_seconds"
# finer around the p99 than prometheus_client's default buckets, so histogram_quantile's estimate is near it
BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RATE = 50.0  # requests a second
MEDIAN_S, P99_S = 0.042, 0.118
SIGMA = math.log(P99_S / MEDIAN_S) / 2.3263478740408408  # the 99th percentile is median x e^(2.326 sigma)
SLOWDOWN = 6.0


def fraction_under(bound: float, slowdown: float) -> float:
    """The log-normal CDF: the share of requests answered within ``bound`` seconds."""
    return 0.5 * (1.0 + math.erf(math.log(bound / (MEDIAN_S * slowdown)) / (SIGMA * math.sqrt(2.0))))


class InferenceService:
    def __init__(self, cfg: LabConfig) -> None:
        self.cfg = cfg
        self.lock = threading.Lock()
        self.last = time.monotonic()
        self.counts = [0.0] * len(BOUNDS)
        self.total = 0.0
        self.sum = 0.0

    def slowdown(self) -> float:
        return SLOWDOWN if any(faults.SLOW_INFERENCE in faults.host_faults(self.cfg, h)
                               for h in self.cfg.gpu_hosts) else 1.0

    def advance(self) -> None:
        """Count the requests served since the last scrape at the latency of now."""
        with self.lock:
            now = time.monotonic()
            served, self.last = RATE * (now - self.last), now
            slowdown = self.slowdown()
            for i, bound in enumerate(BOUNDS):
                self.counts[i] += served * fraction_under(bound, slowdown)
            self.total += served
            self.sum += served * MEDIAN_S * slowdown * math.exp(SIGMA ** 2 / 2)  # the log-normal's mean

    def collect(self) -> Iterator[HistogramMetricFamily]:
        self.advance()
        with self.lock:
            # the expected counts, not whole ones: a window's histogram is then the same shape at any length
            # (floored counts of a few hundred requests moved the estimated p99 by more than the halt's 20%)
            buckets: List[Tuple[str, float]] = [(repr(b), round(c, 3)) for b, c in zip(BOUNDS, self.counts)]
            buckets.append(("+Inf", round(self.total, 3)))
            yield HistogramMetricFamily(HISTOGRAM, "Request latency of the lab's simulated inference service.",
                                        buckets=buckets, sum_value=round(self.sum, 3))


def serve(cfg: LabConfig) -> InferenceService:
    """Serve the histogram on 127.0.0.1:ports.inference from a daemon thread (prometheus_client's own server)."""
    service = InferenceService(cfg)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(service)
    start_http_server(cfg.ports["inference"], addr="127.0.0.1", registry=registry)
    return service
