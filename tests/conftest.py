"""Shared test helpers. The collection resolves as ``ansible_collections.gpufleet.upgrade`` through the
``collections/`` symlink (pytest ``pythonpath``)."""
from __future__ import annotations

import pathlib

import pytest

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def fixture_text(*parts: str) -> str:
    """A fixture's text; a ``.gz`` one decompressed (large real captures are kept compressed)."""
    path = FIXTURES.joinpath(*parts)
    if path.suffix == ".gz":
        import gzip
        return gzip.decompress(path.read_bytes()).decode("utf-8")
    return path.read_text(encoding="utf-8")


@pytest.fixture
def fixtures() -> pathlib.Path:
    return FIXTURES


def pool_baseline(source: str = "h100-train.yml", **sections):
    """A validated pool baseline from ``tests/fixtures/baselines/SOURCE``, with ``sections`` merged in first
    (``gpu={"count": 4}`` changes one field of a section; ``opt_out={...}`` adds opt-outs)."""
    import yaml

    from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import validate

    doc = yaml.safe_load(fixture_text("baselines", source))
    for name, fields in sections.items():
        if isinstance(fields, dict) and isinstance(doc.get(name), dict):
            doc[name] = dict(doc[name], **fields)
        else:
            doc[name] = fields
    return validate(doc, source)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The fuzz test's figures (tests/unit/test_fuzz_parsers.py), summed over its targets, and the fleet report's
    screenshot (tests/integration/test_fleet_report_browser.py) when this run took one (xdist workers' own output
    never reaches the terminal, so it is named here)."""
    import json
    import os
    import time

    started = getattr(config, "_gpufleet_started", time.time())
    shot = pathlib.Path(__file__).parents[1] / "out" / "fleet-report" / "fleet-report.png"
    if shot.is_file() and shot.stat().st_mtime >= started - 1:
        terminalreporter.write_sep("-", "fleet report screenshot")
        terminalreporter.write_line("%s (%d bytes)" % (shot, shot.stat().st_size))
    out = pathlib.Path(os.environ.get("GPUFLEET_FUZZ_DIR", str(pathlib.Path(__file__).parents[1] / "out" / "fuzz")))
    rows = [json.loads(p.read_text()) for p in sorted(out.glob("*.json")) if p.stat().st_mtime >= started - 1]
    if not rows:
        return
    keys = ("inputs", "clear errors", "crashes", "hangs", "wrong verdicts")
    total = {k: sum(r[k] for r in rows) for k in keys}
    terminalreporter.write_sep("-", "parser fuzz figures (%d targets)" % len(rows))
    terminalreporter.write_line(", ".join("%s %d" % (k, total[k]) for k in keys))
    for r in rows:
        terminalreporter.write_line("  %-44s %s" % (r["target"], ", ".join("%s %d" % (k, r[k]) for k in keys)))


@pytest.hookimpl(tryfirst=True)  # before -m selects: a lab test without its own mark is still a lab test
def pytest_collection_modifyitems(config, items):
    """Everything under tests/lab needs the lab (marked, so `-m "not lab"` never runs it in parallel against a live
    lab). The canary tests move the control plane, so they come after the tests that need the lab on `from`; the
    upgrade-wave story comes after them: it starts from a fresh lab and leaves the cell it upgraded (a fresh one when
    it failed). The jobs in the execution-environment image come last, on the cell it leaves (they only read it).
    `make lab-tests` runs the story and those jobs on one lab cell and the rest on another at the same time
    (Makefile, lab-tests-a/-b); the order here holds within each."""
    lab_dir = pathlib.Path(__file__).parent / "lab"
    for item in items:
        if lab_dir in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.lab)
    late = {"test_canary.py": 1, "test_upgrade_wave.py": 2, "test_awx_runner.py": 3}
    items.sort(key=lambda item: late.get(pathlib.Path(str(item.fspath)).name, 0))


def pytest_configure(config):
    import time

    config._gpufleet_started = time.time()
