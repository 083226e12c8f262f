"""Each role's README.md is generated from its meta/argument_specs.yml by bin/roles-readme and is current: rendered
again here in memory, it must equal the checked-in file (as docs/variables.md is checked against the variable
schema in tests/unit/module_utils/test_variables.py)."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = sorted(p.parent.parent for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))


def generator():
    loader = importlib.machinery.SourceFileLoader("roles_readme", str(ROOT / "bin" / "roles-readme"))
    spec = importlib.util.spec_from_loader("roles_readme", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


RENDER = generator().render


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_readme_is_generated_from_its_argument_specs(role):
    readme = role / "README.md"
    assert readme.is_file(), "roles/%s/README.md is missing: run bin/roles-readme %s (make docs-gen)" % (
        role.name, role.name)
    assert readme.read_text(encoding="utf-8") == RENDER(role), (
        "roles/%s/README.md is stale: run bin/roles-readme %s (make docs-gen)" % (role.name, role.name))


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_readme_names_every_entry_point_and_option(role):
    text = RENDER(role)
    for entry, spec in yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"].items():
        assert "## Entry point `%s`" % entry in text
        for name, option in (spec.get("options") or {}).items():
            row = next(line for line in text.splitlines() if line.startswith("| `%s` |" % name))
            assert "| yes |" in row if option.get("required") else "| no |" in row, row


def test_a_changed_spec_makes_the_readme_stale(tmp_path):
    role = tmp_path / "demo"
    (role / "meta").mkdir(parents=True)
    spec = {"argument_specs": {"main": {"short_description": "Demo", "options": {
        "demo_mode": {"type": "str", "default": "a", "choices": ["a", "b"], "description": "C(a) or C(b)."},
        "demo_items": {"type": "list", "elements": "str", "required": True, "description": ["One.", "Two |."]}}}}}
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(spec))
    before = RENDER(role)
    assert "| `demo_mode` | str | no | `a` | `a`, `b` | `a` or `b`. |" in before
    assert "| `demo_items` | list of str | yes | - | - | One. Two \\|. |" in before
    spec["argument_specs"]["main"]["options"]["demo_mode"]["default"] = "b"
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(spec))
    assert RENDER(role) != before
