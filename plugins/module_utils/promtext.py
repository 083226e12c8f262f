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

from typing import Any, Dict, List, Mapping, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import bounded_text, load_json

BUILD_INFO = "kubernetes_build_info"
REQUESTS = "apiserver_request_total"

Sample = Tuple[str, Dict[str, str], float]


def samples(text: Any, where: str) -> List[Sample]:
    """Every sample of the text as (name, labels, value), parsed by prometheus_client's text parser (escapes,
    exemplars and comments a hand parser gets wrong). Text that is not Prometheus exposition is a ParseError."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as exc:  # pragma: no cover - the module reports missing_required_lib first
        raise InputError("the Python library prometheus-client is missing on the controller: pip install "
                         "prometheus-client (pip install -r requirements.txt from the collection)") from exc
    body = bounded_text(text, "%s /metrics" % where)
    try:
        return [(s.name, dict(s.labels), float(s.value)) for family in text_string_to_metric_families(body)
                for s in family.samples]
    except (ValueError, KeyError, IndexError, TypeError, ArithmeticError) as exc:  # a value past a float's range too
        raise ParseError("%s: /metrics is not Prometheus text (%s)" % (where, str(exc)[:200])) from None


def git_version(version_text: Any, where: str) -> str:
    """``gitVersion`` of a ``/version`` answer (``{"major", "minor", "gitVersion", ...}``)."""
    doc = load_json(version_text, "%s /version" % where)
    value = doc.get("gitVersion") if isinstance(doc, Mapping) else None
    if not isinstance(value, str) or not value.startswith("v") or len(value) > 64:
        raise ParseError("%s: /version has no gitVersion (%s); is this a kube-apiserver?" % (
            where, "got %s" % type(doc).__name__ if not isinstance(doc, Mapping) else "keys %s" % ", ".join(
                sorted(map(str, doc))[:8])))
    return value


def apiserver_samples(text: Any, version_text: Any, where: str) -> List[Sample]:
    """The samples of an apiserver's ``/metrics``, once the text proves to be that apiserver's: a
    ``kubernetes_build_info`` series whose ``git_version`` is the server's ``/version`` and at least one
    ``apiserver_request_total`` series. Otherwise a ParseError naming the apiserver and what was missing."""
    version = git_version(version_text, where)
    found = samples(text, where)
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
