"""The lab's dcgmi simulator (SIMULATION, lab/simulators/dcgmi) prints the JSON layout real dcgmi prints: the same
top-level keys, the same nesting, the same key paths with the same JSON types, as the real DCGM 4.x report kept in
tests/fixtures/dcgm/ (see its README.md for where it comes from).

Written without the checks engine's parser on purpose: the layout is compared key path by key path, so a wrong idea
of the layout in the parser cannot make the simulator and the parser agree with each other and both be wrong."""
from __future__ import annotations

import json
import pathlib
from typing import Any, Callable, Dict, Tuple

import pytest

from tests.unit.lab.simulators import Simulators
from tests.conftest import fixture_text

REAL_V4 = ("real-4.2.3-gb10-r1.json",)
# Key paths dcgmi prints only when it has something to say there (its JSON writer adds "info" to a test or a result
# with info messages, tests/fixtures/dcgm/README.md): a report may leave them out.
OPTIONAL = {("DCGM Diagnostic", "test_categories", "[]", "tests", "[]", "test_summary", "info"),
            ("DCGM Diagnostic", "test_categories", "[]", "tests", "[]", "test_summary", "info", "[]")}

Path = Tuple[str, ...]


def shape(node: Any, path: Path = ()) -> Dict[Path, str]:
    """Every key path of a JSON document with the JSON type found there; list items are the path element "[]"
    (a list of objects gives the union of its objects' paths, so a list whose items differ in type shows both)."""
    kind = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
            type(None): "null"}[type(node)]
    out = {path: kind}
    children = node.items() if isinstance(node, dict) else (("[]", item) for item in node) \
        if isinstance(node, list) else ()
    for key, child in children:
        for sub, found in shape(child, path + (key,)).items():
            out[sub] = found if out.get(sub, found) == found else "%s|%s" % tuple(sorted((out[sub], found)))
    return out


@pytest.fixture
def dcgmi(tmp_path: pathlib.Path) -> Callable[..., Any]:
    """Runs the simulator against a temporary state directory (tests/unit/lab/simulators.py)."""
    sims = Simulators(tmp_path, {"nvidia-driver": "570.172.08", "dcgm": "4.2.3"})

    def run(*faults: str, level: str = "1") -> Any:
        sims.write_state(faults)
        return json.loads(sims.run("dcgmi", "diag", "-r", level, "-j", rc=226 if faults else 0).stdout)

    return run


@pytest.mark.parametrize("real", REAL_V4)
def test_the_simulator_prints_the_top_level_keys_of_real_dcgmi(dcgmi: Callable[..., Any], real: str) -> None:
    real_doc = json.loads(fixture_text("dcgm", real))
    assert sorted(real_doc) == ["DCGM Diagnostic", "entity_groups", "metadata"]  # the capture is what we think
    assert sorted(dcgmi()) == sorted(real_doc)
    assert sorted(dcgmi("dcgm-fail")) == sorted(real_doc)
    assert sorted(dcgmi()["DCGM Diagnostic"]) == sorted(real_doc["DCGM Diagnostic"]) == ["test_categories"]


@pytest.mark.parametrize("real", REAL_V4)
@pytest.mark.parametrize("level", ["1", "2", "4"])
def test_the_simulator_invents_no_key_nesting_or_type(dcgmi: Callable[..., Any], real: str, level: str) -> None:
    real_shape = shape(json.loads(fixture_text("dcgm", real)))
    for faults in ((), ("dcgm-fail",)):
        sim_shape = shape(dcgmi(*faults, level=level))
        invented = {"/".join(p): k for p, k in sim_shape.items() if real_shape.get(p) != k}
        assert invented == {}, "paths or types real dcgmi does not print (faults %s)" % (faults,)


@pytest.mark.parametrize("real", REAL_V4)
def test_the_simulator_prints_every_key_real_dcgmi_always_prints(dcgmi: Callable[..., Any], real: str) -> None:
    real_shape = shape(json.loads(fixture_text("dcgm", real)))
    sim_shape = shape(dcgmi("dcgm-fail"))  # a failing run: its results carry warnings, as the capture's do
    missing = sorted("/".join(p) for p in real_shape if p not in sim_shape and p not in OPTIONAL)
    assert missing == []


def test_shape_tells_layouts_apart() -> None:
    """The comparison can fail: the layout this project's fixtures used to have (identity nested inside
    "DCGM Diagnostic") differs from the capture's in exactly the moved keys."""
    real_doc = json.loads(fixture_text("dcgm", REAL_V4[0]))
    nested = {"DCGM Diagnostic": dict(real_doc["DCGM Diagnostic"], entity_groups=real_doc["entity_groups"],
                                      metadata=real_doc["metadata"])}
    moved = set(shape(nested)) - set(shape(real_doc))
    assert sorted(p[:2] for p in moved if len(p) == 2) == [("DCGM Diagnostic", "entity_groups"),
                                                         ("DCGM Diagnostic", "metadata")]
    assert shape({"a": [1, "x"]})[("a", "[]")] == "integer|string"
