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
