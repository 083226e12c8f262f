# Copyright: gpufleet contributors
# Apache License 2.0
"""Prometheus text from a kube-apiserver, parsed once with prometheus_client and proved to be that apiserver's.

A ``/metrics`` body is only evidence when it is the apiserver's own: a proxy's HTML error page, the ``/version``
JSON, kube-state-metrics' or node-exporter's text, or an empty 200 from a wrong port parse to "nothing found", and
"nothing found" would pass a scan. So a scan first requires ``kubernetes_build_info{git_version}`` equal to the
``gitVersion`` that the same server's ``/version`` answers, and the apiserver's own request counter
(``apiserver_request_total``); anything else is refused, naming the apiserver.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import bounded_text, load_json

BUILD_INFO = "kubernetes_build_info"
REQUESTS = "apiserver_request_total"

Sample = Tuple[str, Dict[str, str], float]


def samples(text: Any, where: str, names: Optional[Iterable[str]] = None, optional: Iterable[str] = ()) -> List[Sample]:
    """Every sample of the text as (name, labels, value), parsed by prometheus_client's text parser (escapes,
    exemplars and comments a hand parser gets wrong). Text that is not Prometheus exposition, or whose last line is
    cut off (the format ends every line with a line feed), is a ParseError.

    With ``names`` (sample names as written, ``apiserver_request_duration_seconds_bucket``), only the samples of
    those names; and when every line of the text is well formed (_ODD_LINE), only those names' lines are parsed: an
    apiserver's text is 1-2 MB of some 13,000 samples, a reading needs a few hundred of them, and the whole parse
    costs about 0.4 CPU-s, the selection about a sixth of that (benchmarks/read_metrics.py). prometheus_client
    decides in every other case: a text with any odd line (an HTML page around metrics, a proxy's page after them,
    a broken value, a form feed or a ``{__name__=...}`` sample), a sample that a ``# TYPE`` could rename into one of
    ``names`` (``F`` becomes ``F_total`` under a counter's TYPE, ``F_info`` under an info's), or a name not in
    ``optional`` without a sample: the whole text is parsed, so what it refuses is refused and what it reads is
    read."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as exc:  # pragma: no cover - the module reports missing_required_lib first
        raise InputError("the Python library prometheus-client is missing on the controller: pip install "
                         "prometheus-client (pip install -r requirements.txt from the collection)") from exc
    body = bounded_text(text, "%s /metrics" % where)
    if body and not body.endswith("\n"):
        raise ParseError("%s: /metrics is not Prometheus text (its last line has no line feed: the body was cut "
                         "off, or is not exposition text)" % where)
    wanted = frozenset(names or ())

    def parse(chosen: str) -> List[Sample]:
        try:
            return [(s.name, dict(s.labels), float(s.value)) for family in text_string_to_metric_families(chosen)
                    for s in family.samples if not wanted or s.name in wanted]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ParseError("%s: /metrics is not Prometheus text (%s)" % (where, str(exc)[:200])) from None

    if wanted and not _ODD_LINE.search(body):
        lines = list(_selector(wanted).finditer(body))
        if all(line.group(1) in wanted for line in lines):  # no sample a TYPE line renames (none in real texts)
            found = parse("".join(line.group(0) for line in lines))  # no # TYPE: the names as written
            if {sample[0] for sample in found} >= wanted - frozenset(optional):
                return found
    return parse(body)


# A line of exposition text is blank, a comment (# HELP, # TYPE or any other), or NAME[{LABELS}] VALUE [TIMESTAMP]
# [# EXEMPLAR]; this matches the start of any other line. Written here because prometheus_client has no check of a
# line short of parsing it: it only decides whether the fast path may be taken, never whether a text is refused.
_NUMBER = r"[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|Inf|inf|NaN|nan)"
_ODD_LINE = re.compile(r"^(?![ \t]*(?:#[^\n]*|[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^\n]*\})?[ \t]+%s(?:[ \t]+-?[0-9]+)?"
                       r"(?:[ \t]+#[^\n]*)?)?[ \t]*\r?$)" % _NUMBER, re.M)
# What a family's name adds for its samples (a histogram's, a summary's, a counter's, an info's).
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info")


@functools.lru_cache(maxsize=16)
def _selector(names: frozenset) -> re.Pattern[str]:
    """The sample lines, in a text whose every line is well formed, of ``names`` and of their families' names
    (group 1: the line's name)."""
    families = set(names)
    for name in names:
        families.update(name[:-len(suffix)] for suffix in _SUFFIXES if name.endswith(suffix))
    alternatives = "|".join(re.escape(n) for n in sorted(families, key=len, reverse=True))
    return re.compile(r"^[ \t]*(%s)[ \t{].*\n" % alternatives, re.M)


def git_version(version_text: Any, where: str) -> str:
    """``gitVersion`` of a ``/version`` answer (``{"major", "minor", "gitVersion", ...}``)."""
    doc = load_json(version_text, "%s /version" % where)
    value = doc.get("gitVersion") if isinstance(doc, Mapping) else None
    if not isinstance(value, str) or not value.startswith("v") or len(value) > 64:
        raise ParseError("%s: /version has no gitVersion (%s); is this a kube-apiserver?" % (
            where, "got %s" % type(doc).__name__ if not isinstance(doc, Mapping) else "keys %s" % ", ".join(
                sorted(map(str, doc))[:8])))
    return value


def apiserver_samples(text: Any, version_text: Any, where: str, names: Optional[Iterable[str]] = None,
                      optional: Iterable[str] = ()) -> List[Sample]:
    """The samples of an apiserver's ``/metrics``, once the text proves to be that apiserver's: a
    ``kubernetes_build_info`` series whose ``git_version`` is the server's ``/version`` and at least one
    ``apiserver_request_total`` series. Otherwise a ParseError naming the apiserver and what was missing."""
    version = git_version(version_text, where)
    found = samples(text, where, None if names is None else {BUILD_INFO, REQUESTS, *names}, optional)
    builds = sorted({sample[1].get("git_version", "") for sample in found if sample[0] == BUILD_INFO})
    if version not in builds:
        raise ParseError("%s: the /metrics text is not this apiserver's: %s, while its /version is %s (a proxy, a "
                         "wrong port or another exporter answered; read /metrics from the apiserver itself)" % (
                             where, "kubernetes_build_info{git_version} is %s" % ", ".join(builds) if builds
                             else "it has no kubernetes_build_info", version))
    if not any(sample[0] == REQUESTS for sample in found):
        raise ParseError("%s: /metrics has kubernetes_build_info but no %s, so it is not a kube-apiserver's own "
                         "metrics (or these credentials see only part of them)" % (where, REQUESTS))
    return found
