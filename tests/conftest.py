"""Shared test helpers. The collection resolves as ``ansible_collections.gpufleet.upgrade`` through the
``collections/`` symlink (pytest ``pythonpath``)."""
from __future__ import annotations

import pathlib

import pytest

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def fixture_text(*parts: str) -> str:
    return FIXTURES.joinpath(*parts).read_text(encoding="utf-8")


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
