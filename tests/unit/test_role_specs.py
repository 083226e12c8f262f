"""Every role declares its interface: meta/argument_specs.yml with types, role-prefixed variables, and defaults
that match defaults/main.yml exactly (STYLE.md, practice 7)."""
from __future__ import annotations

import pathlib

import pytest
import yaml

ROLES = sorted(p for p in (pathlib.Path(__file__).resolve().parents[2] / "roles").iterdir() if p.is_dir())


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_argument_specs_match_defaults(role):
    entries = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    assert "main" in entries, "%s: no main entry point in argument_specs" % role.name
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    spec = {}  # every entry point's options (main's and, e.g., etcd_snapshot's fetch and health)
    for entry in entries.values():
        spec.update(entry.get("options") or {})
    for name, option in spec.items():
        assert name.startswith(role.name + "_"), "%s: %s is not prefixed with the role name" % (role.name, name)
        assert option.get("type"), "%s: %s has no type" % (role.name, name)
        assert option.get("description"), "%s: %s has no description" % (role.name, name)
        if option.get("required"):
            assert name not in defaults, "%s: required %s must not have a default" % (role.name, name)
        else:
            assert name in defaults, "%s: %s is in argument_specs but not in defaults/main.yml" % (role.name, name)
            assert option.get("default") == defaults[name], "%s: default of %s differs" % (role.name, name)
    extra = set(defaults) - set(spec)
    assert not extra, "%s: defaults without an argument spec: %s" % (role.name, sorted(extra))


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_has_a_molecule_scenario_that_verifies(role):
    scenarios = [p for p in (role / "molecule").iterdir() if (p / "molecule.yml").exists()]
    assert scenarios, "%s has no Molecule scenario" % role.name
    for scenario in scenarios:
        assert (scenario / "converge.yml").exists()
        assert (scenario / "verify.yml").exists() or list((scenario / "tests").glob("test_*.py"))
