# Copyright: gpufleet contributors
# Apache License 2.0
"""Reading untrusted text: tool output, manifests and baselines, bounded so that no input hangs or crashes a run.

Every reader bounds its input: size (:data:`MAX_TEXT_BYTES`), nesting depth (:data:`MAX_DEPTH`) and, for YAML, the
number of nodes after alias expansion (:data:`MAX_YAML_NODES`: a "billion laughs" document of a few hundred bytes
expands to 10^9 nodes). Files must be regular files: a FIFO named ``*.yaml`` would block a reader forever and a
device such as ``/dev/zero`` never ends. PyYAML and ``json`` have no such bounds, hence these wrappers.
Every refusal is a :class:`ParseError` or :class:`InputError` naming the input and the limit.
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError

# A DNS-1123 label (a namespace, a cell, a ring): ASCII lower-case letters, digits and '-', at most 63. Match it
# whole (fullmatch): '$' would take a trailing newline.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

MAX_TEXT_BYTES = 32 * 1024 * 1024   # the largest tool output, manifest or baseline read
MAX_DEPTH = 64                      # nesting of JSON/YAML documents (Kubernetes objects nest about 15 deep)
MAX_YAML_NODES = 1_000_000          # YAML nodes after alias expansion


def bounded_text(text: Any, what: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """``text`` when it is a string within the size bound."""
    if not isinstance(text, str):
        raise ParseError("%s: expected text output, got %s" % (what, type(text).__name__))
    if len(text) > max_bytes:
        raise ParseError("%s: output is %d characters, more than the %d this reader accepts (wrong file or a "
                         "runaway tool?)" % (what, len(text), max_bytes))
    return text


def check_depth(doc: Any, what: str, max_depth: int = MAX_DEPTH) -> Any:
    """``doc`` when no list or mapping in it nests deeper than ``max_depth`` (iterative: no recursion limit)."""
    stack: List[Tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = list(node.values())
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            raise ParseError("%s: the document nests deeper than %d levels; refusing it" % (what, max_depth))
        stack.extend((child, depth + 1) for child in children)
    return doc


def as_mapping(value: Any) -> Mapping[str, Any]:
    """A field read leniently: the mapping, or {} for anything else (a scan that skips odd objects and goes on)."""
    return value if isinstance(value, Mapping) else {}


def mapping(value: Any, what: str) -> Mapping[str, Any]:
    """An object of a parsed document: {} when absent, a :class:`ParseError` naming ``what`` when not a mapping."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParseError("%s is %s, not an object" % (what, type(value).__name__))
    return value


def load_json(text: Any, what: str) -> Any:
    """Parse JSON within the size and depth bounds."""
    stripped = bounded_text(text, what).strip()
    if not stripped:
        raise ParseError("%s: output is empty" % what)
    try:
        doc = json.loads(stripped)
    except RecursionError:
        raise ParseError("%s: the document nests deeper than %d levels; refusing it" % (what, MAX_DEPTH))
    except ValueError as exc:
        raise ParseError("%s: output is not valid JSON (truncated?): %s" % (what, exc))
    return check_depth(doc, what)


def _yaml_loader() -> Any:
    try:
        import yaml  # PyYAML ships with ansible-core on the controller
    except ImportError:  # pragma: no cover - only on a managed node without PyYAML
        raise ParseError("PyYAML is not installed to read YAML")
    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _check_node_graph(root: Any, what: str) -> None:
    """Refuse a composed YAML node graph that expands past :data:`MAX_YAML_NODES` or nests past
    :data:`MAX_DEPTH`, or that refers to itself. Aliases share nodes, so sizes are memoised per node."""
    size: Dict[int, int] = {}
    depth: Dict[int, int] = {}
    on_path: set = set()
    stack: List[Tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        value = node.value
        children = ([c for pair in value for c in pair] if node.id == "mapping" else list(value)) \
            if node.id in ("mapping", "sequence") else []
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > MAX_YAML_NODES:
                raise ParseError("%s: YAML aliases expand to more than %d nodes (an alias bomb?); expand the "
                                 "document without aliases" % (what, MAX_YAML_NODES))
            if depth[key] > MAX_DEPTH:
                raise ParseError("%s: the document nests deeper than %d levels; refusing it" % (what, MAX_DEPTH))
            continue
        if key in size:
            continue
        if key in on_path:
            raise ParseError("%s: a YAML alias refers to the node that contains it (a recursive document)" % what)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


def yaml_problem(exc: Exception) -> str:
    """What is wrong and where (line, column), never the text around it: PyYAML's own message quotes the source
    line, and a YAML document may carry secrets (a Helm release's values, a pod's env)."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    if not problem:
        return type(exc).__name__
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = " at line %d, column %d" % (mark.line + 1, mark.column + 1) if mark is not None else ""
    return (" ".join(str(problem).split()) + where)[:300]


def load_yaml(text: Any, what: str, multi: bool = False) -> Any:
    """Parse YAML (every document when ``multi``, as a list) within the size, depth and expansion bounds."""
    text = bounded_text(text, what)
    yaml, loader_class = _yaml_loader()
    # First the event stream (libyaml's parser is iterative): its nesting is checked before anything recursive
    # (PyYAML's composer; libyaml's overflows the C stack on deep input) sees the document.
    try:
        depth = 0
        for event in yaml.parse(text, Loader=loader_class):
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ParseError("%s: the document nests deeper than %d levels; refusing it" % (what, MAX_DEPTH))
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    except yaml.YAMLError as exc:
        raise ParseError("%s: not valid YAML: %s" % (what, yaml_problem(exc)))
    loader = loader_class(text)
    try:
        docs = []
        while loader.check_node():
            node = loader.get_node()
            _check_node_graph(node, what)
            docs.append(loader.construct_document(node))
            if not multi and loader.check_node():
                raise ParseError("%s: expected one YAML document, found several" % what)
        if multi:
            return docs
        return docs[0] if docs else None
    except RecursionError:
        raise ParseError("%s: the document nests deeper than %d levels; refusing it" % (what, MAX_DEPTH))
    except yaml.YAMLError as exc:
        raise ParseError("%s: not valid YAML: %s" % (what, yaml_problem(exc)))
    finally:
        loader.dispose()


def load_document(text: Any, what: str, allow_yaml: bool = False) -> Any:
    """Parse JSON (or YAML too, with ``allow_yaml``: output that does not start with ``{`` or ``[``). Errors name
    the tool (``what``) and quote the output's first line, which is usually the tool's own error message."""
    stripped = bounded_text(text, what).strip()
    if not stripped:
        raise ParseError("%s: output is empty" % what)
    if stripped[0] in "{[":
        return load_json(stripped, what)
    if not allow_yaml:
        raise ParseError("%s: output is not JSON; it starts with %r" % (what, stripped.splitlines()[0][:200]))
    return load_yaml(stripped, what)


def read_file(path: str, what: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The text of a regular file. Refuses, by name: a missing file or dangling symlink, a symlink loop, a FIFO,
    a device or a directory, a file over ``max_bytes``, and bytes that are not UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise InputError("%s: %s does not exist (or is a symlink to nothing)" % (what, path), path=path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError("%s: %s is a symlink loop" % (what, path), path=path)
        raise InputError("%s: cannot open %s: %s" % (what, path, exc.strerror), path=path)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a directory" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else "special")
            raise InputError("%s: %s is %s, not a regular file; refusing to read it" % (what, path, kind),
                             path=path)
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InputError("%s: %s is larger than %d bytes; refusing to read it" % (what, path, max_bytes),
                         path=path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("%s: %s is not UTF-8 text (%s)" % (what, path, exc.reason), path=path)


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
