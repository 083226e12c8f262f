"""The docs claim only what exists. Every page a reader is sent to - README.md, docs/**/*.md, lab/README.md and the
generated roles/*/README.md - is scanned, and the test fails on:

- a relative link (``[text](path)``) to a file or directory that is not in the checkout;
- a repository path (``plugins/...``, ``roles/...``, ``docs/...``, ``playbooks/...``, ``inventories/...``,
  ``bin/...``, ``lab/...``, ``tests/...``, ``benchmarks/...``, ``changelogs/...``, ``.ci/...``) anywhere in inline
  code or a code block (a command's argument too: ``ansible-playbook playbooks/NAME.yml``) that matches nothing.
  Upper-case words and ``<...>`` are placeholders (``roles/ROLE/molecule/default``, ``inventories/CELL``), ``*`` is a
  glob; a path that .gitignore names exactly is written by the lab (``inventories/lab/hosts.yml``) and passes, and so
  does ``inventories/cell1``, the reader's own inventory in the install examples;
- ``gpufleet.upgrade.NAME`` where NAME is no plugin in plugins/*/ (module, action, filter, test, callback), no
  playbook in playbooks/, no role in roles/ and no action group of meta/runtime.yml;
- ``make TARGET`` (in backticks or a code block) where the Makefile has no such target;
- a variable ``gpufleet_...`` that none of these knows: the variable schema (plugins/module_utils/variables.py,
  which tests/unit/module_utils/test_variables.py keeps complete for the playbooks, roles and inventories), a
  role's meta/argument_specs.yml, defaults/ or vars/, or the playbooks; a ``gpufleet_`` name written as a string
  in lab/gpufleet_lab/*.py is the lab's own (the metric of its inference service) and passes too.
  ``gpufleet_break_glass_*`` is a prefix and passes when a known variable starts with it.

test_a_fake_doc_fails_on_every_kind_of_claim feeds a page with one false claim of each kind, so the checks can
fail."""
from __future__ import annotations

import functools
import pathlib
import re
from typing import Dict, FrozenSet, Iterable, List, Set, Tuple

import pytest
import yaml

from ansible_collections.gpufleet.upgrade.plugins.module_utils import variables

ROOT = pathlib.Path(__file__).resolve().parents[2]
PATH_PREFIXES = ("plugins/", "roles/", "docs/", "playbooks/", "inventories/", "bin/", "lab/", "tests/",
                 "benchmarks/", "changelogs/", ".ci/")
READERS_PATHS = frozenset(("inventories/cell1",))  # the reader's own cell inventory, in the install examples
# what separates a path from the rest of a command line (not a comma: plugins/module_utils/{cell,variables}.py)
CODE_WORD = re.compile(r"[\s\"'=();|`]+")
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FQCN = re.compile(r"(?<![\w.])gpufleet\.upgrade\.([A-Za-z_][A-Za-z0-9_]*)")
MAKE = re.compile(r"(?:^|[\s;&|(`])make\s+(?:-[-\w]+\s+)*([a-z][\w-]*)")
VARIABLE = re.compile(r"(?<![\w.$/-])gpufleet_[a-z0-9_]*[a-z0-9](_?\*)?")
PLACEHOLDER = re.compile(r"<[^>/]*>|\b[A-Z][A-Z0-9_]*[A-Z0-9]\b(?<!README)(?<!LICENSE)(?<!CHANGELOG)")


def doc_pages() -> List[pathlib.Path]:
    pages = [ROOT / "README.md", ROOT / "lab" / "README.md"]
    pages += sorted((ROOT / "docs").rglob("*.md"))
    pages += sorted((ROOT / "roles").glob("*/README.md"))
    return [p for p in pages if p.is_file()]


# -- what exists --------------------------------------------------------------------------------------------------
@functools.cache
def generated_paths() -> FrozenSet[str]:
    """Paths .gitignore names exactly (anchored, no glob): files the lab writes into the checkout."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return frozenset(line.strip("/") for line in lines if line.startswith("/") and "*" not in line)


@functools.cache
def collection_names() -> FrozenSet[str]:
    names: Set[str] = {p.stem for p in (ROOT / "plugins").glob("*/*") if p.suffix in (".py", ".yml", ".yaml")}
    names |= {p.stem for p in (ROOT / "playbooks").glob("*.yml")}
    names |= {p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir()}
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text()) or {}
    names |= set(runtime.get("action_groups") or {})
    names.discard("__init__")
    return frozenset(names)


@functools.cache
def make_targets() -> FrozenSet[str]:
    targets: Set[str] = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][\w.-]*(?:\s+[A-Za-z0-9][\w.-]*)*)\s*:(?![=:])", line)
        if match:
            targets |= set(match.group(1).split())
    return frozenset(targets)


def _yaml_keys(path: pathlib.Path) -> Set[str]:
    data = yaml.safe_load(path.read_text()) or {}
    return set(data) if isinstance(data, dict) else set()


@functools.cache
def known_variables() -> FrozenSet[str]:
    known: Set[str] = set(variables.BY_NAME)
    for role in (ROOT / "roles").iterdir():
        spec = role / "meta" / "argument_specs.yml"
        if spec.is_file():
            for entry in (yaml.safe_load(spec.read_text()).get("argument_specs") or {}).values():
                known |= set((entry or {}).get("options") or {})
        for sub in ("defaults", "vars"):
            for path in (role / sub).glob("*.yml"):
                known |= _yaml_keys(path)
    for path in (ROOT / "playbooks").rglob("*.yml"):
        known |= {m.group(0) for m in VARIABLE.finditer(path.read_text()) if not m.group(1)}
    for path in (ROOT / "lab" / "gpufleet_lab").glob("*.py"):
        known |= set(re.findall(r"[\"'](gpufleet_[a-z0-9_]*[a-z0-9])[\"']", path.read_text()))
    return frozenset(known)


def _expand_braces(text: str) -> List[str]:
    match = re.search(r"\{([^{}]*,[^{}]*)\}", text)
    if not match:
        return [text]
    out: List[str] = []
    for part in match.group(1).split(","):
        out += _expand_braces(text[:match.start()] + part + text[match.end():])
    return out


def repo_path_exists(path: str) -> bool:
    path = path.rstrip("/.,:;")
    if path in generated_paths():
        return True
    for candidate in _expand_braces(path):
        pattern = PLACEHOLDER.sub("*", candidate)
        if "*" in pattern or "?" in pattern:
            if any(ROOT.glob(pattern)):
                continue
            return False
        if not (ROOT / candidate).exists():
            return False
    return True


# -- the checks ----------------------------------------------------------------------------------------------------
def split_code(text: str) -> Tuple[str, List[str], List[str]]:
    """(prose with code removed, inline code spans, lines of fenced code blocks)."""
    blocks: List[str] = []

    def fence(match: re.Match) -> str:
        blocks.extend(match.group(0).splitlines()[1:-1])
        return "\n" * match.group(0).count("\n")

    rest = FENCE.sub(fence, text)
    spans = [m.group(2).strip() for m in INLINE_CODE.finditer(rest)]
    prose = INLINE_CODE.sub(" ", rest)
    return prose, spans, blocks


def problems(page: pathlib.Path, text: str) -> List[str]:
    """Every claim of ``text`` (the page ``page``) that the checkout does not back, one line each."""
    where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    found: List[str] = []
    prose, spans, blocks = split_code(text)
    for match in LINK.finditer(prose):
        target = match.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor on this page
        target_path = target.split("#", 1)[0]
        if not (page.parent / target_path).resolve().exists():
            found.append("%s: link to %s: no such file" % (where, target))
    for line in spans + blocks:
        for word in CODE_WORD.split(line):
            if word.startswith(PATH_PREFIXES) and word not in READERS_PATHS and not repo_path_exists(word):
                found.append("%s: `%s`: no such path in the repository" % (where, word))
    code_lines = spans + [line.split(" #", 1)[0] for line in blocks]
    for line in code_lines:
        for target in MAKE.findall(line):
            if target not in make_targets():
                found.append("%s: `make %s`: the Makefile has no target %s" % (where, target, target))
    for name in FQCN.findall(text):
        if name.isupper():
            continue  # a placeholder (gpufleet.upgrade.ROLE)
        if name not in collection_names():
            found.append("%s: gpufleet.upgrade.%s: no plugin, playbook, role or action group of that name"
                         % (where, name))
    for match in VARIABLE.finditer(text):
        name = match.group(0).rstrip("*")
        if match.group(1):  # a prefix: gpufleet_break_glass_*
            if not any(known.startswith(name) for known in known_variables()):
                found.append("%s: %s*: no variable starts with it" % (where, name))
        elif name not in known_variables():
            found.append("%s: %s: not in the variable schema, a role's argument specs, defaults or vars, or the "
                         "playbooks" % (where, name))
    return sorted(set(found))


def test_every_page_claims_only_what_exists():
    pages = doc_pages()
    assert ROOT / "README.md" in pages and len(pages) > 5, pages
    found: List[str] = []
    for page in pages:
        found += problems(page, page.read_text(encoding="utf-8"))
    assert not found, "\n".join(found)


FAKE = """# A page with one false claim of each kind

See [the missing page](missing-page.md) and [a real one](variables.md#anchor), or [a site](https://example.com/x).
The code is in `plugins/module_utils/nonexistent.py`; the roles in `roles/ROLE/molecule/default` and
`roles/no_such_role/tasks/main.yml`; the lab writes `inventories/lab/hosts.yml`; `out/plan.json` is not checked.
Run `gpufleet.upgrade.no_such_module` or `gpufleet.upgrade.node_state` (`gpufleet.upgrade.ROLE` is a placeholder);
`make no-such-target` and `make wave ARGS="-e x=1"`. Set `gpufleet_no_such_variable` or `gpufleet_target_version`;
`gpufleet_break_glass_*` is a prefix, `gpufleet_nothing_*` is not.

```bash
make bench            # make believe-target in a comment is not a command
make also-missing
ansible-playbook playbooks/no_such_playbook.yml -i inventories/cell1   # see docs/no-such-page.md
```
Or `ansible-playbook -i inventories/example/hosts.yml tests/no_such_test.yml`.
"""


def test_a_fake_doc_fails_on_every_kind_of_claim(tmp_path):
    page = ROOT / "docs" / "fake.md"  # not written: problems() reads the text it is given
    found = problems(page, FAKE)
    expected = [
        "docs/fake.md: link to missing-page.md: no such file",
        "docs/fake.md: `plugins/module_utils/nonexistent.py`: no such path in the repository",
        "docs/fake.md: `roles/no_such_role/tasks/main.yml`: no such path in the repository",
        "docs/fake.md: `playbooks/no_such_playbook.yml`: no such path in the repository",
        "docs/fake.md: `docs/no-such-page.md`: no such path in the repository",
        "docs/fake.md: `tests/no_such_test.yml`: no such path in the repository",
        "docs/fake.md: gpufleet.upgrade.no_such_module: no plugin, playbook, role or action group of that name",
        "docs/fake.md: `make no-such-target`: the Makefile has no target no-such-target",
        "docs/fake.md: `make also-missing`: the Makefile has no target also-missing",
        "docs/fake.md: gpufleet_no_such_variable: not in the variable schema, a role's argument specs, defaults or "
        "vars, or the playbooks",
        "docs/fake.md: gpufleet_nothing_*: no variable starts with it",
    ]
    assert found == sorted(expected)


@pytest.mark.parametrize("path, exists", [
    ("plugins/action/", True), ("roles/ROLE/defaults/main.yml", True), ("inventories/CELL", True),
    ("tests/fixtures/kubeadm/real-*", True), ("inventories/example/baselines/<pool>.yml", True),
    ("plugins/module_utils/{cell,variables}.py", True), ("plugins/module_utils/{cell,nothing}.py", False),
    ("docs/no-such-page.md", False), ("lab/README.md", True),
])
def test_repository_paths(path, exists):
    assert repo_path_exists(path) is exists


def _names(items: Iterable[str]) -> Dict[str, bool]:
    return {name: name in known_variables() for name in items}


def test_known_variables_include_each_source():
    assert _names(["gpufleet_target_version", "etcd_snapshot_backup_dir", "gpufleet_cell"]) == {
        "gpufleet_target_version": True, "etcd_snapshot_backup_dir": True, "gpufleet_cell": True}
