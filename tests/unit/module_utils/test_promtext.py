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
from ansible_collections.gpufleet.upgrade.plugins.module_utils import removed_apis
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import ParseError

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


def test_a_selection_that_is_not_whole_is_the_whole_text_and_refused_as_before():
    text = REAL["real-1.36.3-soak-0-quiet.prom.gz"]
    lines = text.splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if line.startswith(sig.RSS))
    # cut off mid-line after every line the reading needs: no trailing line feed, so the whole text is parsed
    cut = "".join(lines[:last + 5]) + lines[last + 5][:7]
    with pytest.raises(ParseError, match="not Prometheus text"):
        promtext.samples(cut, "cp-2", sig.READ, sig.OPTIONAL)
    # a required name missing: the whole text decides, and what is not Prometheus text is refused as such
    with pytest.raises(ParseError, match="not Prometheus text"):
        promtext.samples("N/A\n", "cp-2", sig.READ, sig.OPTIONAL)
    with pytest.raises(ParseError, match="not Prometheus text"):
        promtext.samples("<html><body>502 Bad Gateway</body></html>\n", "cp-2", sig.READ, sig.OPTIONAL)


def test_blanks_before_a_token_are_selected_as_the_format_allows():
    text = ("# HELP  apiserver_request_total Counter\n#\tTYPE apiserver_request_total counter\n"
            '  apiserver_request_total{verb="GET",resource="pods",code="200"} 3\n'
            "other_metric 1\n")
    want = [s for s in promtext.samples(text, "cp-1") if s[0] == "apiserver_request_total"]
    assert want and promtext.samples(text, "cp-1", ("apiserver_request_total",)) == want
