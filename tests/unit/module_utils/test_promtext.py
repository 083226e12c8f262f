"""What promtext refuses that a reading could otherwise take for an apiserver's metrics: real metrics inside or
before a page that is not exposition text, and values past a float's range, in each of the three readings that
parse /metrics (the soak's reduce, the fleet's histogram, the removed-API scan): a named refusal, never a pass and
never an unexpected error (plugins/module_utils/promtext.py). A parse of part of the text once accepted the pages
(a review of 7319b42 found it; it was taken out): these keep any such shortcut honest."""
from __future__ import annotations

import gzip
import pathlib

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import apiserver_signals as sig
from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_readings, promtext, removed_apis
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
REAL = gzip.decompress((FIXTURES / "real-1.35.4-deprecated.prom.gz").read_bytes()).decode()
VERSION = (FIXTURES / "real-1.35.4-version.json").read_text()
PAGES = {
    "inside an HTML page": "<html><body><h1>503 Service Unavailable</h1><pre>\n%s</pre></body></html>\n" % REAL,
    "before a proxy's page": REAL + "<html><head><title>502 Bad Gateway</title></head></html>\n",
    "with a broken value on a line no reading uses": REAL.replace("\ngo_goroutines ", "\ngo_goroutines 12 garbage\n#",
                                                                  1),
    "with a value past a float's range": REAL + "go_memstats_frees_total %s\n" % ("9" * 400),
}


@pytest.mark.parametrize("case", sorted(PAGES))
def test_real_metrics_in_a_text_that_is_not_exposition_are_refused_by_every_reading(case):
    page = PAGES[case]
    with pytest.raises(ParseError, match="cp-1: /metrics is not Prometheus text"):
        promtext.samples(page, "cp-1")
    findings = removed_apis.scan_metrics(page, VERSION, removed_apis.target_version("v1.37.0"), "cp-1")
    assert [(f["severity"], "not Prometheus text" in f["message"]) for f in findings] == [("block", True)], findings
    with pytest.raises(InputError, match="cp-1: /metrics is not Prometheus text"):
        sig.reduce(page, "cp-1", VERSION)
    with pytest.raises(InputError, match="not Prometheus text"):
        fleet_readings.scrape_histogram(page, "cp-1", "apiserver_request_duration_seconds")
