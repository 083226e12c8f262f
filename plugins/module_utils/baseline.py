# Copyright: gpufleet contributors
# Apache License 2.0
"""Pool baselines: one YAML document per node pool / GPU type, holding every gate threshold.

Loading validates the whole document against :data:`SCHEMA` and reports the first problem as
``FILE: field a.b.c: expected TYPE, got ...`` with the fix. Unknown fields are errors too (a typo in a threshold
name must not silently disable a gate).
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import BaselineError

# field: (type, required, default). A dict value is a nested section: (SCHEMA, required, None).
# Types: "str", "int", "float" (int accepted), "bool", "list[str]", "list[int]", "map[str]" (any scalar values),
# "map[float]" (size -> GB/s).
SCHEMA: Dict[str, Tuple[Any, bool, Any]] = {
    "name": ("str", True, None),
    "description": ("str", False, ""),
    "gpu": ({
        "product": ("str", False, ""),
        "count": ("int", True, None),
        "driver_version": ("str", True, None),
        "persistence_mode": ("bool", False, True),
        "fabric_manager": ("bool", False, False),
        "fatal_xids": ("list[int]", False, [48, 63, 64, 74, 79, 94, 95]),
    }, True, None),
    "dcgm": ({
        "level": ("int", False, 1),
        "required_tests": ("list[str]", False, []),
        "allowed_skip": ("list[str]", False, []),
        "warnings_fail": ("bool", False, False),
        "warning_max_severity": ("int", False, 1),
    }, False, None),
    "nccl": ({
        "busbw_gbps": ("map[float]", True, None),
        "tolerance_pct": ("float", False, 10.0),
        "min_runs": ("int", False, 3),
        "args": ("list[str]", False, ["-b", "8", "-e", "8G", "-f", "2", "-g", "8"]),
    }, False, None),
    "node": ({
        "allocatable_gpus": ("int", False, None),
        "kubelet_config": ("map[str]", False, {}),
    }, False, None),
    "etcd": ({
        "max_quota_ratio": ("float", False, 0.6),
        "quota_bytes": ("int", False, 2147483648),
    }, False, None),
}

_TYPE_NAMES = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean (true/false)",
               "list[str]": "a list of strings", "list[int]": "a list of integers",
               "map[str]": "a mapping of key: value", "map[float]": "a mapping of size: GB/s"}


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "list[int]":
        return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if kind == "map[str]":
        return isinstance(value, dict)
    if kind == "map[float]":
        return isinstance(value, dict) and bool(value) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in value.values())
    raise AssertionError(kind)


def _describe(value: Any) -> str:
    return "%s (%r)" % (type(value).__name__, value) if not isinstance(value, (dict, list)) else type(value).__name__


def validate(doc: Any, source: str = "baseline", schema: Optional[Dict[str, Tuple[Any, bool, Any]]] = None,
             prefix: str = "") -> Dict[str, Any]:
    """Validate and fill defaults. Raises :class:`BaselineError` naming the file, the field and the type."""
    schema = SCHEMA if schema is None else schema
    if not isinstance(doc, Mapping):
        raise BaselineError("%s: %s must be a mapping, got %s" % (source, prefix.rstrip(".") or "the document",
                                                                  _describe(doc)), file=source)
    out: Dict[str, Any] = {}
    unknown = sorted(set(doc) - set(schema))
    if unknown:
        raise BaselineError("%s: field %s%s is not a baseline field; allowed here: %s" % (
            source, prefix, unknown[0], ", ".join(sorted(schema))), file=source, field=prefix + str(unknown[0]))
    for key, (kind, required, default) in schema.items():
        path = prefix + key
        if key not in doc or doc[key] is None:
            if required:
                expected = "a section" if isinstance(kind, dict) else _TYPE_NAMES[kind]
                raise BaselineError("%s: field %s is missing: expected %s" % (source, path, expected),
                                    file=source, field=path)
            if isinstance(kind, dict):
                continue
            out[key] = default
            continue
        value = doc[key]
        if isinstance(kind, dict):
            out[key] = validate(value, source, kind, path + ".")
        elif not _type_ok(kind, value):
            raise BaselineError("%s: field %s: expected %s, got %s" % (source, path, _TYPE_NAMES[kind],
                                                                        _describe(value)),
                                file=source, field=path, expected=kind)
        else:
            out[key] = float(value) if kind == "float" else value
    if prefix == "" and "node" in out and out["node"].get("allocatable_gpus") is None:
        out["node"]["allocatable_gpus"] = out["gpu"]["count"]
    return out


def load_file(path: str) -> Dict[str, Any]:
    """Read and validate a YAML baseline file."""
    import yaml
    try:
        with open(path, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle)
    except FileNotFoundError:
        raise BaselineError("%s: baseline file not found; create it from inventories/example/baselines/" % path,
                            file=path)
    except yaml.YAMLError as exc:
        raise BaselineError("%s: not valid YAML: %s" % (path, str(exc).splitlines()[0]), file=path)
    return validate(doc, path)
