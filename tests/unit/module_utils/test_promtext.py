"""promtext's selection: only the lines of the samples a reading names are parsed, with exactly the samples a
parse of the whole text gives for them; a selection that is not whole falls back to the whole text, so what is not
Prometheus text is refused as before (plugins/module_utils/promtext.py)."""
from __future__ import annotations

import functools
import gzip
import pathlib

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import promtext
from ansible_collections.gpufleet.upgrade.plugins.module_utils import apiserver_signals as sig
from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_readings, removed_apis
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
REAL = {path.name: gzip.decompress(path.read_bytes()).decode() for path in sorted(FIXTURES.glob("real-*.prom.gz"))}
NAMES = {sig.READ, (removed_apis.DEPRECATED,), ("apiserver_request_duration_seconds_bucket",),
         ("apiserver_storage_objects", "workqueue_depth", "go_goroutines")}


@functools.cache
def whole_parse(fixture):
    return promtext.samples(REAL[fixture], "cp-1")


@pytest.mark.parametrize("fixture", sorted(REAL))
@pytest.mark.parametrize("names", sorted(NAMES))
def test_the_selection_gives_what_the_whole_parse_gives_for_those_names(fixture, names):
    whole = [s for s in whole_parse(fixture) if s[0] in names]
    assert promtext.samples(REAL[fixture], "cp-1", names, optional=names) == whole


def test_the_selection_parses_a_small_part_of_a_real_text(monkeypatch):
    parsed = []  # the parser is imported inside samples(): record the length of what it is given
    from prometheus_client import parser
    original = parser.text_string_to_metric_families
    monkeypatch.setattr(parser, "text_string_to_metric_families", lambda text: parsed.append(len(text)) or
                        original(text))
    text = REAL["real-1.36.3-soak-0-quiet.prom.gz"]
    assert sig.reduce(text, "cp-2")["requests"]
    assert len(parsed) == 1 and parsed[0] < len(text) / 10, (parsed, len(text))


def outcome(call):
    try:
        return call()
    except ParseError as exc:
        return "refused: %s" % exc.msg


QUIET = REAL["real-1.36.3-soak-0-quiet.prom.gz"]
NEEDED = (sig.READ, sig.OPTIONAL)
ODD = {  # each: a text the fast path must not read on its own (what a whole parse says decides)
    "an HTML page around the metrics": "<html><body><pre>\n" + QUIET + "</pre></body></html>\n",
    "a proxy's page after the metrics": QUIET + "<html><head><title>502 Bad Gateway</title></head></html>\n",
    "a broken value on a line no reading uses": QUIET.replace("\ngo_goroutines ", "\ngo_goroutines 12 garbage\n#", 1),
    "a line feed inside another family's label value": QUIET + 'workqueue_depth{name="a\napiserver_request_total'
                                                       '{code="429",resource="pods",verb="GET"} 1000\n',
    "a form feed before a sample the reading uses": QUIET.replace("\napiserver_request_total{",
                                                                  "\n\x0capiserver_request_total{", 1),
    "a {__name__=...} sample": QUIET + '{__name__="apiserver_request_total",code="429",resource="pods",'
                                       'verb="GET"} 1000\n',
    "a sample a counter's TYPE renames": QUIET + '# TYPE apiserver_request counter\napiserver_request{code="429",'
                                                 'resource="pods",verb="GET"} 1000\n',
    "a stray TYPE far from its samples": "# TYPE process_start_time_seconds counter\n" + QUIET,
}


@pytest.mark.parametrize("case", sorted(ODD))
def test_an_odd_text_is_read_as_the_whole_parse_reads_it(case):
    text = ODD[case]
    whole = outcome(lambda: [s for s in promtext.samples(text, "cp-2") if s[0] in sig.READ])
    assert outcome(lambda: promtext.samples(text, "cp-2", *NEEDED)) == whole


def test_a_page_around_real_metrics_is_refused_by_every_reading_as_before():
    version = (FIXTURES / "real-1.35.4-version.json").read_text()
    real = REAL["real-1.35.4-deprecated.prom.gz"]
    for page in ("<html><body><h1>503 Service Unavailable</h1><pre>\n%s</pre></body></html>\n" % real,
                 real + "<html><head><title>502 Bad Gateway</title></head></html>\n"):
        findings = removed_apis.scan_metrics(page, version, removed_apis.target_version("v1.37.0"), "cp-1")
        assert [(f["severity"], "not Prometheus text" in f["message"]) for f in findings] == [("block", True)], \
            findings
        with pytest.raises(InputError, match="cp-1: /metrics is not Prometheus text"):
            sig.reduce(page, "cp-1", version)
        with pytest.raises(InputError, match="not Prometheus text"):
            fleet_readings.scrape_histogram(page, "cp-1", "apiserver_request_duration_seconds")


def test_a_body_cut_off_mid_line_is_refused_on_every_path():
    lines = QUIET.splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if line.startswith(sig.RSS))
    for cut in ("".join(lines[:last + 5]) + lines[last + 5][:7],  # after every line a reading needs
                "".join(lines[:last]) + lines[last].rstrip("\n")[:-1]):  # a value that lost its last digit
        for names in (NEEDED, ()):
            with pytest.raises(ParseError, match="cp-2: /metrics is not Prometheus text .its last line has no line "
                               "feed"):
                promtext.samples(cut, "cp-2", *names)
    with pytest.raises(ParseError, match="not Prometheus text"):  # a required name missing: the whole text decides
        promtext.samples("N/A\n", "cp-2", *NEEDED)


def test_blanks_before_a_name_are_selected_as_the_format_allows():
    text = ("# HELP apiserver_request_total Counter\n# TYPE apiserver_request_total counter\n"
            'apiserver_request_total{verb="LIST",resource="pods",code="200"} 2\n'
            '  apiserver_request_total{verb="GET",resource="pods",code="200"} 3\n'
            '\tapiserver_request_total{verb="PUT",resource="pods",code="200"}\t4\n'
            "other_metric 1\n")
    want = [s for s in promtext.samples(text, "cp-1") if s[0] == "apiserver_request_total"]
    assert len(want) == 3 and promtext.samples(text, "cp-1", ("apiserver_request_total",)) == want
