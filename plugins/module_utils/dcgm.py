# Copyright: gpufleet contributors
# Apache License 2.0
"""``dcgmi diag -r N -j`` (DCGM 4.x and 3.x) parser and gate (REFERENCE.md section 5).

DCGM reports a warning as status "Fail" in JSON (only the text view prints "Warn"), so a result is classified by
the severity of its warnings: ``error_severity`` at or below ``warning_max_severity`` (default 1,
DCGM_ERROR_MONITOR: "can run workloads, monitor") is a warning; anything above (ISOLATE 2, UNKNOWN 3, TRIAGE 4,
CONFIG 5, RESET 6) or a Fail without any severity is a failure.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_document

KEY_V4 = "DCGM Diagnostic"
KEY_V3 = "DCGM GPU Diagnostic"
STATUSES = ("Pass", "Skip", "Fail", "Warn")
RESULT_PASS, RESULT_SKIP, RESULT_WARN, RESULT_FAIL = "pass", "skip", "warn", "fail"


def parse_diag(text: str, warning_max_severity: int = 1) -> Dict[str, Any]:
    """Normalize to ``{format, version, driver_version, runtime_error, gpus[], results[]}`` where each result is
    ``{category, test, gpu, status, outcome, warnings[{text, error_id, severity}]}`` and outcome is one of
    pass, skip, warn, fail."""
    doc = load_document(text, "dcgmi diag")
    if not isinstance(doc, dict):
        raise ParseError("dcgmi diag: expected a JSON object, got %s" % type(doc).__name__)
    if KEY_V4 in doc:
        body, fmt = doc[KEY_V4], "dcgm4"
    elif KEY_V3 in doc:
        body, fmt = doc[KEY_V3], "dcgm3"
    else:
        raise ParseError("dcgmi diag: neither %r nor %r at the top level (was -j given?); keys: %s" % (
            KEY_V4, KEY_V3, ", ".join(sorted(doc)) or "none"))
    if not isinstance(body, dict):
        raise ParseError("dcgmi diag: %r is not an object" % (KEY_V4 if fmt == "dcgm4" else KEY_V3))
    metadata: Dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
    out: Dict[str, Any] = {
        "format": fmt,
        "version": metadata.get("version") or body.get("version") or "",
        "driver_version": metadata.get("Driver Version Detected") or body.get("Driver Version Detected") or "",
        "runtime_error": body.get("runtime_error") or "",
        "gpus": [],
        "results": [],
    }
    if out["runtime_error"]:
        return out
    categories = body.get("test_categories")
    if not isinstance(categories, list):
        raise ParseError("dcgmi diag: 'test_categories' is missing or not a list (truncated output?)")
    for group in body.get("entity_groups") or []:
        if isinstance(group, dict) and group.get("entity_group") == "GPU":
            for ent in group.get("entities") or []:
                out["gpus"].append({"id": str(ent.get("entity_id")), "serial": ent.get("serial_num", ""),
                                    "device_id": ent.get("device_id", "")})
    if not out["gpus"] and isinstance(body.get("GPU Device IDs"), list):
        out["gpus"] = [{"id": str(i), "serial": "", "device_id": d} for i, d in enumerate(body["GPU Device IDs"])]
    for ci, category in enumerate(categories):
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            raise ParseError("dcgmi diag: test_categories[%d] has no tests list" % ci)
        for ti, test in enumerate(category["tests"]):
            if not isinstance(test, dict) or "name" not in test:
                raise ParseError("dcgmi diag: test_categories[%d].tests[%d] has no name" % (ci, ti))
            for ri, result in enumerate(test.get("results") or []):
                where = "%s/%s results[%d]" % (category.get("category"), test["name"], ri)
                out["results"].extend(_results(category.get("category", ""), test["name"], result, where,
                                               warning_max_severity))
    return out


def _results(category: str, test: str, result: Any, where: str, max_sev: int) -> List[Dict[str, Any]]:
    if not isinstance(result, dict):
        raise ParseError("dcgmi diag: %s is not an object" % where)
    status = result.get("status")
    if status not in STATUSES:
        raise ParseError("dcgmi diag: %s has status %r, expected one of %s" % (where, status, ", ".join(STATUSES)))
    if "entity_id" in result:
        if result.get("entity_group", "GPU") != "GPU":
            gpus = ["%s:%s" % (result.get("entity_group"), result["entity_id"])]
        else:
            gpus = [str(result["entity_id"])]
    elif "gpu_id" in result:
        gpus = [str(result["gpu_id"])]
    elif "gpu_ids" in result:
        gpus = [g.strip() for g in str(result["gpu_ids"]).split(",") if g.strip()]
    else:
        gpus = ["all"]
    warnings: List[Dict[str, Any]] = []
    for w in result.get("warnings") or []:
        if isinstance(w, dict):
            sev = w.get("error_severity")
            warnings.append({"text": str(w.get("warning", "")), "error_id": w.get("error_id"),
                             "severity": int(sev) if isinstance(sev, (int, float, str)) and str(sev).isdigit()
                             else None})
        else:
            warnings.append({"text": str(w), "error_id": None, "severity": None})
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


def judge_diag(parsed: Dict[str, Any], policy: Mapping[str, Any], node: str = "") -> Dict[str, Any]:
    """Judge against ``policy``: ``required_tests`` (must be present and not skipped), ``allowed_skip`` (tests that
    may skip; any other skip fails), ``warnings_fail`` (bool), ``expected_gpus`` (optional int)."""
    subject = node or "node"
    checks: List[Check] = []
    if parsed["runtime_error"]:
        checks.append(Check("dcgm_runtime", subject, False, parsed["runtime_error"], "no runtime error",
                            "dcgmi diag could not run its tests"))
        return summarize(checks)
    required = [str(t) for t in policy.get("required_tests") or []]
    allowed_skip = {str(t).lower() for t in policy.get("allowed_skip") or []}
    warnings_fail = bool(policy.get("warnings_fail", False))
    expected_gpus: Optional[int] = policy.get("expected_gpus")
    seen = {r["test"].lower() for r in parsed["results"]}
    for test in required:
        checks.append(Check("dcgm_test_present", "%s %s" % (subject, test), test.lower() in seen, test.lower() in seen,
                            True, "required test missing from the report; run a higher -r level?"))
    for r in parsed["results"]:
        label = "%s gpu %s %s" % (subject, r["gpu"], r["test"])
        if r["outcome"] == RESULT_FAIL:
            text = "; ".join(w["text"] for w in r["warnings"]) or "no detail"
            checks.append(Check("dcgm_test", label, False, "Fail", "Pass", text))
        elif r["outcome"] == RESULT_WARN:
            text = "; ".join(w["text"] for w in r["warnings"]) or "warning"
            checks.append(Check("dcgm_test", label, False, "Warn", "Pass", text,
                                severity="fail" if warnings_fail else "warn"))
        elif r["outcome"] == RESULT_SKIP:
            allowed = r["test"].lower() in allowed_skip and r["test"] not in required
            checks.append(Check("dcgm_test", label, allowed, "Skip", "Pass or allowed skip",
                                "" if allowed else "test skipped but not in allowed_skip"))
        else:
            checks.append(Check("dcgm_test", label, True, "Pass", "Pass"))
    if expected_gpus is not None and parsed["gpus"]:
        checks.append(Check("dcgm_gpu_count", subject, len(parsed["gpus"]) == expected_gpus, len(parsed["gpus"]),
                            expected_gpus, "GPUs DCGM diagnosed"))
    summary = summarize(checks)
    summary["tests"] = sorted(seen)
    return summary
