"""docs/variables.md is generated from the schema and current; every gpufleet_* name the playbooks, roles and the
inventories use is in the schema; the cell-wide settings are checked with their one default each."""
from __future__ import annotations

import pathlib
import re

import pytest

from ansible_collections.gpufleet.upgrade.plugins.plugin_utils import cell_action
from ansible_collections.gpufleet.upgrade.plugins.module_utils import cell, variables
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_docs_variables_md_is_generated_from_the_schema():
    doc = ROOT / "docs" / "variables.md"
    assert doc.read_text() == variables.markdown(), "docs/variables.md is stale: run make docs-gen"


def test_every_gpufleet_variable_used_is_in_the_schema():
    used = set()
    for base in ("playbooks", "roles", "inventories/example", "inventories/lab/group_vars"):
        for path in (ROOT / base).rglob("*.yml"):
            if "molecule" in path.parts:
                continue
            used |= {(m, str(path.relative_to(ROOT))) for m in re.findall(r"(?<![\w.])gpufleet_[a-z0-9_]*[a-z0-9]",
                                                                          path.read_text())}
    missing = sorted((name, where) for name, where in used if name not in variables.BY_NAME
                     and name != "gpufleet_break_glass")  # the prefix, in a comment
    assert not missing, missing


def test_the_cell_reads_only_documented_variables():
    for name in cell.HOST_VARS:
        assert variables.BY_NAME[name].where == "host", name
    for name in cell_action.CELL_VARS:
        if name != "ansible_limit":
            assert variables.BY_NAME[name].where in ("cell", "run"), name


def test_settings_defaults_and_bounds():
    assert variables.settings({}) == {"soak_seconds": 30, "reach_timeout": 60, "observe_seconds": 60,
                                      "only_canaries": False, "audit_callers": True,
                                      "audit_lookback_minutes": 10080}
    assert variables.settings({"gpufleet_audit_callers": "false", "gpufleet_audit_lookback_minutes": "0"})[
        "audit_lookback_minutes"] == 0
    with pytest.raises(InputError, match="gpufleet_audit_lookback_minutes: expected whole minutes from 0 to 129600"):
        variables.settings({"gpufleet_audit_lookback_minutes": 129601})
    with pytest.raises(InputError, match="gpufleet_audit_callers: expected true or false"):
        variables.settings({"gpufleet_audit_callers": "sometimes"})
    assert variables.settings({"gpufleet_soak_seconds": "5", "gpufleet_only_canaries": "true"})["soak_seconds"] == 5
    with pytest.raises(InputError, match="gpufleet_reach_timeout: expected whole seconds from 1 to 3600, got 0"):
        variables.settings({"gpufleet_reach_timeout": 0})
    with pytest.raises(InputError, match="gpufleet_soak_seconds: expected whole seconds"):
        variables.settings({"gpufleet_soak_seconds": "30s"})
    with pytest.raises(InputError, match="gpufleet_soak_seconds"):
        variables.settings({"gpufleet_soak_seconds": True})
    with pytest.raises(InputError, match="gpufleet_only_canaries: expected true or false"):
        variables.settings({"gpufleet_only_canaries": "maybe"})
