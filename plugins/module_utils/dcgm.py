# Copyright: gpufleet contributors
# Apache License 2.0
"""``dcgmi diag -r N -j`` (DCGM 4.x and 3.x) parser and gate (docs/reference.md section 5).

Checked against a real report of DCGM 4.2.3 and against the JSON writer of dcgmi in DCGM's 4.x and 3.3 sources
(both named in tests/fixtures/dcgm/README.md). The identity of the run sits at the TOP of the document, beside the
results:

* DCGM 4.x: ``{"DCGM Diagnostic": {"test_categories": [...]}, "entity_groups": [{"entity_group": "GPU",
  "entities": [{"entity_id", "serial_num", "device_id"}]}], "metadata": {"version", "Driver Version Detected"}}``.
* DCGM 3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [...]}, "version", "Driver Version Detected",
  "GPU Device IDs": [...], "GPU Device Serials": {index: serial}}``.
* Either line when dcgmi could not run: ``{"<name>": {"version", "runtime_error"}}``.

Anything else (another top-level key, a version outside 3.x/4.x, no version) is a :class:`ParseError` naming the
layouts understood and the top-level keys found.

DCGM reports a warning as status "Fail" in JSON (only the text view prints "Warn"), so a result is classified by
the severity of its warnings: ``error_severity`` at or below ``warning_max_severity`` (default 1,
DCGM_ERROR_MONITOR: "can run workloads, monitor") is a warning; anything above (ISOLATE 2, UNKNOWN 3, TRIAGE 4,
CONFIG 5, RESET 6) or a Fail without any severity is a failure.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_document

KEY_V4 = "DCGM Diagnostic"
KEY_V3 = "DCGM GPU Diagnostic"
DRIVER = "Driver Version Detected"
DEVICE_IDS, SERIALS = "GPU Device IDs", "GPU Device Serials"
TOP_V4 = frozenset((KEY_V4, "entity_groups", "metadata"))
TOP_V3 = frozenset((KEY_V3, "version", DRIVER, DEVICE_IDS, SERIALS))
MAJOR = {"dcgm4": "4", "dcgm3": "3"}
UNDERSTOOD = ("understood: DCGM 4.x ('DCGM Diagnostic' with 'metadata' and 'entity_groups' beside it) and DCGM 3.x "
              "('DCGM GPU Diagnostic' with 'version', 'Driver Version Detected' and 'GPU Device IDs' beside it)")
STATUSES = ("Pass", "Skip", "Fail", "Warn")
RESULT_PASS, RESULT_SKIP, RESULT_WARN, RESULT_FAIL = "pass", "skip", "warn", "fail"


def _text(value: Any, limit: int = 500) -> str:
    return str(value)[:limit] if value is not None else ""


def _layout_error(problem: str, doc: Mapping[str, Any]) -> ParseError:
    keys = ", ".join(repr(str(k)[:60]) for k in sorted(doc, key=str)[:12]) or "none"
    return ParseError("dcgmi diag: %s; %s; top-level keys found: %s" % (problem, UNDERSTOOD, keys))


def _identity(doc: Mapping[str, Any], fmt: str) -> Dict[str, Any]:
    """Version, driver and GPU list from the top of the document, where dcgmi prints them."""
    name = KEY_V4 if fmt == "dcgm4" else KEY_V3
    extra = sorted(str(k)[:60] for k in doc if k not in (TOP_V4 if fmt == "dcgm4" else TOP_V3))
    if extra:
        raise _layout_error("%r with unknown key(s) beside it: %s" % (name, ", ".join(extra[:10])), doc)
    if fmt == "dcgm4":
        header = doc.get("metadata")
        if not isinstance(header, dict):
            raise _layout_error("%r without a 'metadata' object beside it (DCGM 4.x prints the version and driver "
                                "there)" % name, doc)
        where = "metadata."
    else:
        header, where = doc, ""
    version, driver = header.get("version"), header.get(DRIVER, "")
    if not isinstance(version, str) or not version.strip():
        raise _layout_error("no DCGM version at %sversion" % where, doc)
    if version.strip().split(".")[0] != MAJOR[fmt]:
        raise _layout_error("the DCGM %s.x layout reports version %r" % (MAJOR[fmt], version[:50]), doc)
    if not isinstance(driver, str):
        raise _layout_error("%s%r is not a string" % (where, DRIVER), doc)
    gpus: List[Dict[str, str]] = []
    if fmt == "dcgm4":
        groups = doc.get("entity_groups", [])
        if not isinstance(groups, list):
            raise ParseError("dcgmi diag: 'entity_groups' is not a list")
        for gi, group in enumerate(groups):
            if not isinstance(group, dict):
                raise ParseError("dcgmi diag: entity_groups[%d] is not an object" % gi)
            if group.get("entity_group") != "GPU":
                continue
            entities = group.get("entities")
            if not isinstance(entities, list) or not all(isinstance(e, dict) and "entity_id" in e
                                                         for e in entities):
                raise ParseError("dcgmi diag: entity_groups[%d].entities is not a list of objects with an "
                                 "entity_id" % gi)
            gpus.extend({"id": _text(e["entity_id"], 20), "serial": _text(e.get("serial_num"), 100),
                         "device_id": _text(e.get("device_id"), 100)} for e in entities)
    else:
        ids, serials = doc.get(DEVICE_IDS, []), doc.get(SERIALS, {})
        if not isinstance(ids, list) or not isinstance(serials, dict):
            raise ParseError("dcgmi diag: %r is not a list or %r is not an object" % (DEVICE_IDS, SERIALS))
        gpus = [{"id": str(i), "serial": _text(serials.get(str(i)), 100), "device_id": _text(d, 100)}
                for i, d in enumerate(ids)]
    return {"version": _text(version.strip(), 100), "driver_version": _text(driver.strip(), 100), "gpus": gpus}


def parse_diag(text: str, warning_max_severity: int = 1) -> Dict[str, Any]:
    """Normalize to ``{format, version, driver_version, runtime_error, gpus[], results[]}`` where each result is
    ``{category, test, gpu, status, outcome, warnings[{text, error_id, severity}]}`` and outcome is one of
    pass, skip, warn, fail. ``gpus`` is ``[{id, serial, device_id}]``. Anything not in DCGM's shape is a
    :class:`ParseError` naming where it is."""
    doc = load_document(text, "dcgmi diag")
    if not isinstance(doc, dict):
        raise ParseError("dcgmi diag: expected a JSON object, got %s" % type(doc).__name__)
    if KEY_V4 in doc and KEY_V3 in doc:
        raise _layout_error("both %r and %r at the top level" % (KEY_V4, KEY_V3), doc)
    if KEY_V4 in doc:
        fmt, name = "dcgm4", KEY_V4
    elif KEY_V3 in doc:
        fmt, name = "dcgm3", KEY_V3
    else:
        raise _layout_error("neither %r nor %r at the top level (was -j given?)" % (KEY_V4, KEY_V3), doc)
    body = doc[name]
    if not isinstance(body, dict):
        raise ParseError("dcgmi diag: %r is not an object" % name)
    if body.get("runtime_error"):
        # dcgmi could not run the tests: {"<name>": {"version", "runtime_error"}} and nothing beside it
        return {"format": fmt, "version": _text(body.get("version"), 100), "driver_version": "",
                "runtime_error": _text(body["runtime_error"], 2000), "gpus": [], "results": []}
    out: Dict[str, Any] = dict(_identity(doc, fmt), format=fmt, runtime_error="", results=[])
    categories = body.get("test_categories")
    if not isinstance(categories, list):
        raise ParseError("dcgmi diag: 'test_categories' is missing or not a list (truncated output?)")
    for ci, category in enumerate(categories):
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            raise ParseError("dcgmi diag: test_categories[%d] has no tests list" % ci)
        cat = _text(category.get("category"), 100)
        for ti, test in enumerate(category["tests"]):
            if not isinstance(test, dict) or not isinstance(test.get("name"), str):
                raise ParseError("dcgmi diag: test_categories[%d].tests[%d] has no name" % (ci, ti))
            results = test.get("results") or []
            if not isinstance(results, list):
                raise ParseError("dcgmi diag: test_categories[%d].tests[%d].results is not a list" % (ci, ti))
            found: List[Dict[str, Any]] = []
            for ri, result in enumerate(results):
                where = "%s/%s results[%d]" % (cat, test["name"][:100], ri)
                found.extend(_results(cat, test["name"][:100], result, where, warning_max_severity))
            if "test_summary" in test:
                found.extend(_summary(cat, test["name"][:100], test["test_summary"], found, warning_max_severity))
            out["results"].extend(found)
    return out


def _summary(category: str, test: str, summary: Any, found: List[Dict[str, Any]],
             max_sev: int) -> List[Dict[str, Any]]:
    """DCGM 4.x ``test_summary``: the test's overall status, with the errors that name no entity. Those errors
    become a result for GPU "all"; a summary that fails while no result of the test does is one too (fail closed:
    the failure is then in no result we read)."""
    where = "%s/%s test_summary" % (category, test)
    if not isinstance(summary, dict) or summary.get("status") not in STATUSES:
        raise ParseError("dcgmi diag: %s has no status among %s" % (where, ", ".join(STATUSES)))
    entityless = {k: v for k, v in summary.items() if k not in ("entity_group", "entity_group_id", "entity_id")}
    if summary.get("warnings"):
        return _results(category, test, entityless, where, max_sev)
    if summary["status"] == "Fail" and not any(r["status"] in ("Fail", "Warn") for r in found):
        return _results(category, test, dict(entityless, warnings=[
            "test_summary says Fail but no result of the test does"]), where, max_sev)
    return []


def _results(category: str, test: str, result: Any, where: str, max_sev: int) -> List[Dict[str, Any]]:
    if not isinstance(result, dict):
        raise ParseError("dcgmi diag: %s is not an object" % where)
    status = result.get("status")
    if status not in STATUSES:
        raise ParseError("dcgmi diag: %s has status %r, expected one of %s" % (
            where, _text(status, 50), ", ".join(STATUSES)))
    if "entity_id" in result:
        if result.get("entity_group", "GPU") != "GPU":
            gpus = ["%s:%s" % (_text(result.get("entity_group"), 20), _text(result["entity_id"], 20))]
        else:
            gpus = [_text(result["entity_id"], 20)]
    elif "gpu_id" in result:
        gpus = [_text(result["gpu_id"], 20)]
    elif "gpu_ids" in result:
        gpus = [g.strip() for g in _text(result["gpu_ids"], 500).split(",") if g.strip()]
    else:
        gpus = ["all"]
    raw_warnings = result.get("warnings") or []
    if not isinstance(raw_warnings, list):
        raw_warnings = [raw_warnings]
    warnings: List[Dict[str, Any]] = []
    for w in raw_warnings:
        if isinstance(w, dict):
            sev = w.get("error_severity")
            # DCGM 3.x Deployment (level-one) tests carry the text under "warnings", every other result "warning"
            warnings.append({"text": _text(w["warning"] if "warning" in w else w.get("warnings", "")),
                             "error_id": _text(w.get("error_id"), 20) or None,
                             "severity": int(sev) if isinstance(sev, (int, str)) and not isinstance(sev, bool)
                             and str(sev).isdigit() and len(str(sev)) < 4 else None})
        else:
            warnings.append({"text": _text(w), "error_id": None, "severity": None})
    if status == "Pass":
        outcome = RESULT_PASS
    elif status == "Skip":
        outcome = RESULT_SKIP
    elif status == "Warn":
        outcome = RESULT_WARN
    elif warnings and all(w["severity"] is not None and w["severity"] <= max_sev for w in warnings):
        outcome = RESULT_WARN
    else:
        outcome = RESULT_FAIL
    return [{"category": category, "test": test, "gpu": gpu, "status": status, "outcome": outcome,
             "warnings": warnings} for gpu in gpus]


def judge_diag(parsed: Dict[str, Any], baseline: Mapping[str, Any], node: str = "") -> Dict[str, Any]:
    """Judge against a validated pool baseline: ``dcgm.required_tests`` (present, with a result, not skipped),
    ``dcgm.allowed_skip`` (tests that may skip; any other skip fails), ``dcgm.warnings_fail``, the driver DCGM ran
    on against ``gpu.driver_version``, and coverage of ``gpu.count`` GPUs (the report's GPU list and the GPUs its
    per-GPU results name). A report with no test results, one that does not name its driver, or one that does not
    say which GPUs it covered, fails."""
    subject = node or "node"
    policy, expected_gpus = baseline["dcgm"], int(baseline["gpu"]["count"])
    checks: List[Check] = []
    if parsed["runtime_error"]:
        checks.append(Check("dcgm_runtime", subject, False, parsed["runtime_error"], "no runtime error",
                            "dcgmi diag could not run its tests"))
        return summarize(checks)
    required = [str(t) for t in policy["required_tests"]]
    allowed_skip = {str(t).lower() for t in policy["allowed_skip"]}
    warnings_fail = bool(policy["warnings_fail"])
    results = parsed["results"]
    checks.append(Check("dcgm_results", subject, bool(results), len(results), "at least one test result",
                        "" if results else "the report holds no test results: nothing was diagnosed"))
    driver, expected_driver = parsed["driver_version"], str(baseline["gpu"]["driver_version"])
    checks.append(Check("dcgm_driver_version", subject, driver == expected_driver, driver or "not reported",
                        expected_driver, "the driver DCGM ran on ('Driver Version Detected')" if driver else
                        "the report does not say which driver it ran on"))
    seen = {r["test"].lower() for r in results if r["outcome"] != RESULT_SKIP}
    for test in required:
        present = test.lower() in seen
        checks.append(Check("dcgm_test_present", "%s %s" % (subject, test), present, present, True,
                            "" if present else "required test missing from the report (or skipped); run a higher "
                                               "-r level?"))
    for r in results:
        label = "%s gpu %s %s" % (subject, r["gpu"], r["test"])
        if r["outcome"] == RESULT_FAIL:
            text = "; ".join(w["text"] for w in r["warnings"]) or "no detail"
            checks.append(Check("dcgm_test", label, False, "Fail", "Pass", text))
        elif r["outcome"] == RESULT_WARN:
            text = "; ".join(w["text"] for w in r["warnings"]) or "warning"
            checks.append(Check("dcgm_test", label, False, "Warn", "Pass", text,
                                severity="fail" if warnings_fail else "warn"))
        elif r["outcome"] == RESULT_SKIP:
            allowed = r["test"].lower() in allowed_skip
            checks.append(Check("dcgm_test", label, allowed, "Skip", "Pass or allowed skip",
                                "" if allowed else "test skipped but not in allowed_skip"))
        else:
            checks.append(Check("dcgm_test", label, True, "Pass", "Pass"))
    listed = len(parsed["gpus"])
    covered = sorted({r["gpu"] for r in results if r["gpu"].isdigit()}, key=int)
    checks.append(Check("dcgm_gpu_count", subject, listed == expected_gpus, listed, expected_gpus,
                        "GPUs the report lists" if listed else
                        "the report lists no GPU ('entity_groups' / 'GPU Device IDs'): it does not say what it ran on"))
    checks.append(Check("dcgm_gpu_coverage", subject, len(covered) == expected_gpus,
                        "%d GPU(s)%s" % (len(covered), (": " + ",".join(covered[:16])) if covered else ""),
                        "%d GPU(s), from gpu.count" % expected_gpus,
                        "GPUs named by per-GPU results" if covered else
                        "no result names a GPU: the report does not say what it diagnosed"))
    summary = summarize(checks)
    summary["tests"] = sorted({r["test"].lower() for r in results})
    return summary
