# Copyright: gpufleet contributors
# Apache License 2.0
"""``dcgmi diag -r N -j`` (DCGM 4.x and 3.x) parser and gate (docs/reference.md section 5).

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
STATUSES = ("Pass", "Skip", "Fail", "Warn")
RESULT_PASS, RESULT_SKIP, RESULT_WARN, RESULT_FAIL = "pass", "skip", "warn", "fail"


def _text(value: Any, limit: int = 500) -> str:
    return str(value)[:limit] if value is not None else ""


def parse_diag(text: str, warning_max_severity: int = 1) -> Dict[str, Any]:
    """Normalize to ``{format, version, driver_version, runtime_error, gpus[], results[]}`` where each result is
    ``{category, test, gpu, status, outcome, warnings[{text, error_id, severity}]}`` and outcome is one of
    pass, skip, warn, fail. Anything not in DCGM's shape is a :class:`ParseError` naming where it is."""
    doc = load_document(text, "dcgmi diag")
    if not isinstance(doc, dict):
        raise ParseError("dcgmi diag: expected a JSON object, got %s" % type(doc).__name__)
    if KEY_V4 in doc:
        body, fmt = doc[KEY_V4], "dcgm4"
    elif KEY_V3 in doc:
        body, fmt = doc[KEY_V3], "dcgm3"
    else:
        raise ParseError("dcgmi diag: neither %r nor %r at the top level (was -j given?); keys: %s" % (
            KEY_V4, KEY_V3, ", ".join(sorted(str(k) for k in doc)[:10]) or "none"))
    if not isinstance(body, dict):
        raise ParseError("dcgmi diag: %r is not an object" % (KEY_V4 if fmt == "dcgm4" else KEY_V3))
    metadata: Dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
    out: Dict[str, Any] = {
        "format": fmt,
        "version": _text(metadata.get("version") or body.get("version"), 100),
        "driver_version": _text(metadata.get("Driver Version Detected") or body.get("Driver Version Detected"), 100),
        "runtime_error": _text(body.get("runtime_error"), 2000),
        "gpus": [],
        "results": [],
    }
    if out["runtime_error"]:
        return out
    categories = body.get("test_categories")
    if not isinstance(categories, list):
        raise ParseError("dcgmi diag: 'test_categories' is missing or not a list (truncated output?)")
    groups = body.get("entity_groups") or []
    if not isinstance(groups, list):
        raise ParseError("dcgmi diag: 'entity_groups' is not a list")
    for gi, group in enumerate(groups):
        if not isinstance(group, dict):
            raise ParseError("dcgmi diag: entity_groups[%d] is not an object" % gi)
        if group.get("entity_group") != "GPU":
            continue
        entities = group.get("entities") or []
        if not isinstance(entities, list) or not all(isinstance(e, dict) for e in entities):
            raise ParseError("dcgmi diag: entity_groups[%d].entities is not a list of objects" % gi)
        for ent in entities:
            out["gpus"].append({"id": _text(ent.get("entity_id"), 20), "serial": _text(ent.get("serial_num"), 100),
                                "device_id": _text(ent.get("device_id"), 100)})
    if not out["gpus"] and isinstance(body.get("GPU Device IDs"), list):
        out["gpus"] = [{"id": str(i), "serial": "", "device_id": _text(d, 100)}
                       for i, d in enumerate(body["GPU Device IDs"])]
    for ci, category in enumerate(categories):
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            raise ParseError("dcgmi diag: test_categories[%d] has no tests list" % ci)
        for ti, test in enumerate(category["tests"]):
            if not isinstance(test, dict) or not isinstance(test.get("name"), str):
                raise ParseError("dcgmi diag: test_categories[%d].tests[%d] has no name" % (ci, ti))
            results = test.get("results") or []
            if not isinstance(results, list):
                raise ParseError("dcgmi diag: test_categories[%d].tests[%d].results is not a list" % (ci, ti))
            for ri, result in enumerate(results):
                where = "%s/%s results[%d]" % (_text(category.get("category"), 100), test["name"][:100], ri)
                out["results"].extend(_results(_text(category.get("category"), 100), test["name"][:100], result,
                                               where, warning_max_severity))
    return out


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
            warnings.append({"text": _text(w.get("warning", "")), "error_id": _text(w.get("error_id"), 20) or None,
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
    ``dcgm.allowed_skip`` (tests that may skip; any other skip fails), ``dcgm.warnings_fail``, and coverage of
    ``gpu.count`` GPUs (the report's GPU list and the GPUs its per-GPU results name). A report with no test results,
    or one that does not say which GPUs it covered, fails."""
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
    if parsed["gpus"]:
        checks.append(Check("dcgm_gpu_count", subject, listed == expected_gpus, listed, expected_gpus,
                            "GPUs the report lists"))
    checks.append(Check("dcgm_gpu_coverage", subject, len(covered) == expected_gpus,
                        "%d GPU(s)%s" % (len(covered), (": " + ",".join(covered[:16])) if covered else ""),
                        "%d GPU(s), from gpu.count" % expected_gpus,
                        "GPUs named by per-GPU results" if covered else
                        "no result names a GPU: the report does not say what it diagnosed"))
    summary = summarize(checks)
    summary["tests"] = sorted({r["test"].lower() for r in results})
    return summary
