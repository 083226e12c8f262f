# Copyright: gpufleet contributors
# Apache License 2.0
"""Small shared helpers for reading tool output: JSON/YAML documents and tabwriter tables."""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Sequence, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import ParseError


def load_document(text: str, what: str, allow_yaml: bool = False) -> Any:
    """Parse JSON (or YAML too, with ``allow_yaml``). Errors name the tool (``what``) and quote the output's first
    line, which is usually the tool's own error message."""
    if not isinstance(text, str):
        raise ParseError("%s: expected text output, got %s" % (what, type(text).__name__))
    stripped = text.strip()
    if not stripped:
        raise ParseError("%s: output is empty" % what)
    try:
        return json.loads(stripped)
    except ValueError as exc:
        json_error = exc
    if stripped[0] in "{[":
        raise ParseError("%s: output is not valid JSON (truncated?): %s" % (what, json_error))
    if not allow_yaml:
        raise ParseError("%s: output is not JSON; it starts with %r" % (what, stripped.splitlines()[0][:200]))
    try:
        import yaml  # PyYAML ships with ansible-core on the controller
    except ImportError:  # pragma: no cover - only on a managed node without PyYAML
        raise ParseError("%s: output is not JSON and PyYAML is not installed to read YAML" % what)
    try:
        return yaml.safe_load(stripped)
    except yaml.YAMLError as exc:
        raise ParseError("%s: output is neither valid JSON nor YAML: %s" % (what, exc))


def column_starts(header: str, names: Sequence[str]) -> List[Tuple[str, int]]:
    """Start offsets of each header word, for tabwriter tables whose cells may be empty."""
    out = []
    pos = 0
    for name in names:
        idx = header.find(name, pos)
        if idx < 0:
            raise ParseError("table header %r lacks column %r" % (header.strip(), name))
        out.append((name, idx))
        pos = idx + len(name)
    return out


def slice_row(line: str, columns: Sequence[Tuple[str, int]]) -> Dict[str, str]:
    """Cut a tabwriter row at the header's column offsets. Tolerates cells that overflow by a few spaces by
    snapping each boundary back to the nearest whitespace run."""
    cells: Dict[str, str] = {}
    for i, (name, start) in enumerate(columns):
        end = columns[i + 1][1] if i + 1 < len(columns) else len(line)
        cells[name] = line[start:end].strip() if start < len(line) else ""
    return cells


_WS = re.compile(r"\s{2,}")


def split_wide(line: str) -> List[str]:
    """Split on runs of two or more spaces (tabwriter padding)."""
    return [p for p in _WS.split(line.strip()) if p]
