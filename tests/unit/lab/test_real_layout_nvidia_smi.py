"""The lab's nvidia-smi (SIMULATION, lab/simulators/nvidia-smi) prints the CSV layout real nvidia-smi prints for the
gate's queries (plugins/module_utils/gpu_health.py GPU_FIELDS and REMAP_FIELDS): the simulated lines are compared
column by column with the real captures in tests/fixtures/nvidia_smi (README.md names their sources) - the ", "
separator, the number of columns, the header cells with their units, and the shape of each value by a pattern
written from the captures. Written without gpu_health's parser on purpose, so a parser that read a wrong layout
could not hide a simulator that prints one.

The captures are of ``--query-gpu``. No public capture of ``--query-remapped-rows`` was found: its identity
columns are the aliases ``--help-query-gpu`` gives for pci.bus_id and uuid ('"pci.bus_id" or "gpu_bus_id"') and
are held to those captured columns; its remapped_rows.* columns are held to the values the captures print for the
same fields queried through ``--query-gpu`` (0, 0, No, No) and to the Yes of the captured ``nvidia-smi -q``
report, which is as far as the captures go (Azure's compatibility test of the query expects 0/1 for
remapped_rows.failure; README.md has the link)."""
from __future__ import annotations

import pathlib
import re
from typing import Any, Callable, Dict, List, Tuple

import pytest

from tests.unit.lab.simulators import Simulators
from tests.conftest import fixture_text

REAL_FULL = ("real-query-gpu-h100-590.48.01.txt", "real-query-gpu-h200-580.173.02.txt")
REAL_GTX = "real-query-gpu-gtx-5gpu.txt"
REAL_Q = "smi-q-remapped-rows-pending.txt"

GPU_FIELDS = ("index", "uuid", "pci.bus_id", "name", "driver_version", "persistence_mode",
              "ecc.errors.uncorrected.volatile.total")
REMAP_FIELDS = ("gpu_bus_id", "gpu_uuid", "remapped_rows.correctable", "remapped_rows.uncorrectable",
                "remapped_rows.pending", "remapped_rows.failure")
UNIT_FIELDS = ("serial", "memory.total", "power.draw", "temperature.gpu")

# Written from the captures; test_the_patterns_are_the_captures holds each one to every captured value it covers.
HEX8_4_4_4_12 = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
BUS_ID = r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]"  # 00000000:83:00.0; upper case as in -q's 00000000:10:1C.0
SHAPES = {
    "index": r"[0-9]+",
    "uuid": r"GPU-" + HEX8_4_4_4_12,  # lower-case hex (GPU-f3da2e71-6e43-729a-e3ae-f731ed96d50c)
    "pci.bus_id": BUS_ID,
    "name": r"[A-Za-z][A-Za-z0-9 -]*[A-Za-z0-9]",  # NVIDIA H100 80GB HBM3, NVIDIA A100-SXM4-80GB, GeForce GTX 1080 Ti
    "driver_version": r"[0-9]{3}\.[0-9]{2,3}\.[0-9]{2}",  # 590.48.01, 580.173.02, 510.73.08
    "persistence_mode": r"Enabled|Disabled",  # the CSV's mode words (display_active prints Disabled in the same row)
    "ecc.errors.uncorrected.volatile.total": r"[0-9]+",
    "serial": r"[0-9]{13}",
    "memory.total": r"[0-9]+ MiB",
    "power.draw": r"[0-9]+\.[0-9]{2} W",
    "temperature.gpu": r"[0-9]+",
    "gpu_bus_id": BUS_ID,
    "gpu_uuid": r"GPU-" + HEX8_4_4_4_12,
    "remapped_rows.correctable": r"[0-9]+",
    "remapped_rows.uncorrectable": r"[0-9]+",
    "remapped_rows.pending": r"Yes|No",  # No in the CSV captures, Yes in the -q capture's Remapped Rows block
    "remapped_rows.failure": r"Yes|No",
}
NOUNITS = {"memory.total": r"[0-9]+", "power.draw": r"[0-9]+\.[0-9]{2}"}
SEPARATOR = re.compile(r",(?! )|\s$|^\s|  ")  # a comma not followed by one space, a stray space


def capture(name: str) -> Tuple[List[str], List[str], List[Dict[str, str]]]:
    """(the queried fields, the header cells, the rows keyed by field) of a captured --query-gpu run."""
    lines = fixture_text("nvidia_smi", name).splitlines()
    at = next(i for i, line in enumerate(lines) if "--query-gpu=" in line)
    found = re.search(r"--query-gpu=(\S+) --format=csv$", lines[at])
    assert found, lines[at]
    fields = found.group(1).split(",")
    header = lines[at + 1].split(", ")
    rows = [dict(zip(fields, line.split(", "))) for line in lines[at + 2:]]
    assert all(len(line.split(", ")) == len(fields) for line in lines[at + 1:])
    return fields, header, rows


def test_the_captures_are_what_the_patterns_were_written_from() -> None:
    """The captures hold the values the patterns describe (so a fixture edit shows here first)."""
    h100, h200 = (capture(name)[2][0] for name in REAL_FULL)
    ours = GPU_FIELDS + UNIT_FIELDS + ("remapped_rows.correctable", "remapped_rows.uncorrectable",
                                       "remapped_rows.pending", "remapped_rows.failure")
    assert [h100[f] for f in ours] == [
        "0", "GPU-00000000-0000-0000-0000-000000000000", "00000000:00:09.0", "NVIDIA H100 80GB HBM3", "590.48.01",
        "Enabled", "0", "0000000000000", "81559 MiB", "69.85 W", "41", "0", "0", "No", "No"]
    assert [h200[f] for f in ours] == [
        "0", "GPU-00000000-0000-0000-0000-000000000000", "00000000:83:00.0", "NVIDIA H200", "580.173.02",
        "Enabled", "0", "0000000000000", "143771 MiB", "85.12 W", "37", "0", "0", "No", "No"]
    assert h100["display_active"] == h200["display_active"] == "Disabled"
    gtx = capture(REAL_GTX)[2]
    assert [(r["index"], r["uuid"]) for r in gtx][:2] == [("0", "GPU-f3da2e71-6e43-729a-e3ae-f731ed96d50c"),
                                                          ("1", "GPU-15ea7bf9-1a0e-2d7f-9c62-c28e5ca1aaf1")]


def test_the_patterns_are_the_captures() -> None:
    """Every pattern matches every captured value of its field, and the header names each field as the simulator
    must: the bare field name, with its unit in brackets after it where the value carries one."""
    seen = {f: 0 for f in SHAPES}
    for name in REAL_FULL + (REAL_GTX,):
        fields, header, rows = capture(name)
        for field, cell in zip(fields, header):
            assert cell == field or re.fullmatch(re.escape(field) + r" \[[A-Za-z%]+\]", cell), cell
        for row in rows:
            for field, value in row.items():
                if field in SHAPES:
                    assert re.fullmatch(SHAPES[field], value), (name, field, value)
                    seen[field] += 1
        for line in fixture_text("nvidia_smi", name).splitlines()[-1 - len(rows):]:
            assert not SEPARATOR.search(line), line
    report = fixture_text("nvidia_smi", REAL_Q)
    q_bus = re.search(r"^GPU (\S+)$", report, re.M)
    q_name = re.search(r"^\s+Product Name\s+: (.+)$", report, re.M)
    q_driver = re.search(r"^Driver Version\s+: (.+)$", report, re.M)
    q_pending = re.search(r"^\s+Pending\s+: (.+)$", report, re.M)
    assert q_bus and q_name and q_driver and q_pending
    assert re.fullmatch(BUS_ID, q_bus.group(1)) and q_bus.group(1) == "00000000:10:1C.0"
    assert re.fullmatch(SHAPES["name"], q_name.group(1)) and re.fullmatch(SHAPES["driver_version"], q_driver.group(1))
    assert re.fullmatch(SHAPES["remapped_rows.pending"], q_pending.group(1)) and q_pending.group(1) == "Yes"
    uncaptured = {f for f, count in seen.items() if not count}
    assert uncaptured == {"gpu_bus_id", "gpu_uuid"}  # the --query-remapped-rows spellings: no capture of them


@pytest.fixture
def smi(tmp_path: pathlib.Path) -> Callable[..., Any]:
    """Runs the simulators against a temporary state directory (tests/unit/lab/simulators.py)."""
    sims = Simulators(tmp_path, {"nvidia-driver": "570.172.08"},
                      {"gpus": 8, "persistence": True, "services": {}, "boot_time": 1764489600})

    def run(*args: str, faults: Tuple[str, ...] = (), tool: str = "nvidia-smi", **state: Any) -> str:
        sims.write_state(faults, **state)
        return sims.run(tool, *args).stdout

    return run


def cells(line: str, fields: Tuple[str, ...]) -> Dict[str, str]:
    assert not SEPARATOR.search(line), repr(line)
    values = line.split(", ")
    assert len(values) == len(fields), repr(line)
    return dict(zip(fields, values))


@pytest.mark.parametrize("faults,persistence,count", [
    ((), True, 8), (("ecc",), True, 8), (("gpu-missing",), True, 7), (("remap-pending", "xid79"), True, 8),
    ((), False, 8)])
def test_query_gpu_lines_have_the_real_layout(smi: Callable[..., Any], faults: Tuple[str, ...], persistence: bool,
                                             count: int) -> None:
    out = smi("--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader,nounits", faults=faults,
              persistence=persistence)
    assert out.endswith("\n") and "\n\n" not in out
    rows = [cells(line, GPU_FIELDS) for line in out.splitlines()]
    assert len(rows) == count
    for row in rows:
        for field, value in row.items():
            assert re.fullmatch(SHAPES[field], value), (field, value)
    assert {r["persistence_mode"] for r in rows} == {"Enabled" if persistence else "Disabled"}
    assert [r["ecc.errors.uncorrected.volatile.total"] for r in rows] == \
        ["2" if ("ecc" in faults and i == 4) else "0" for i in range(count)]
    assert len({r["uuid"] for r in rows}) == len({r["pci.bus_id"] for r in rows}) == count


def test_the_header_and_units_are_the_real_ones(smi: Callable[..., Any]) -> None:
    """--format=csv (what the captures ran): each header cell is the one the real header has for that field, and
    the values carry the same units; nounits drops them from the values."""
    fields = GPU_FIELDS + UNIT_FIELDS
    real_fields, real_header, _ = capture(REAL_FULL[0])
    real_cell = dict(zip(real_fields, real_header))
    out = smi("--query-gpu=" + ",".join(fields), "--format=csv").splitlines()
    assert out[0] == ", ".join(real_cell[f] for f in fields)
    assert out[0].endswith("serial, memory.total [MiB], power.draw [W], temperature.gpu")
    for line in out[1:]:
        row = cells(line, fields)
        for field in fields:
            assert re.fullmatch(SHAPES[field], row[field]), (field, row[field])
    bare = smi("--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits").splitlines()
    assert len(bare) == 8
    for line in bare:
        row = cells(line, fields)
        for field in fields:
            assert re.fullmatch(NOUNITS.get(field, SHAPES[field]), row[field]), (field, row[field])


@pytest.mark.parametrize("faults,count", [((), 8), (("remap-pending",), 8), (("gpu-missing",), 7)])
def test_remapped_rows_lines_have_the_real_layout(smi: Callable[..., Any], faults: Tuple[str, ...],
                                                  count: int) -> None:
    out = smi("--query-remapped-rows=" + ",".join(REMAP_FIELDS), "--format=csv,noheader,nounits", faults=faults)
    rows = [cells(line, REMAP_FIELDS) for line in out.splitlines()]
    assert len(rows) == count
    for row in rows:
        for field, value in row.items():
            assert re.fullmatch(SHAPES[field], value), (field, value)
    flagged = [(r["gpu_bus_id"], r["remapped_rows.uncorrectable"], r["remapped_rows.pending"],
                r["remapped_rows.failure"]) for r in rows if r["remapped_rows.pending"] != "No"]
    assert flagged == ([("00000000:BA:00.0", "1", "Yes", "No")] if "remap-pending" in faults else [])
    header = smi("--query-remapped-rows=" + ",".join(REMAP_FIELDS), "--format=csv").splitlines()[0]
    assert header == ", ".join(REMAP_FIELDS)


def test_a_gpu_keeps_its_uuid_across_calls_and_tools(smi: Callable[..., Any]) -> None:
    """A GPU's UUID is immutable: the same in every call, in both queries, and in the kernel's 'NVRM: GPU at
    PCI:...: GPU-...' line for its bus (kern-real-xid79-dmesg.log)."""
    query = "--query-gpu=pci.bus_id,uuid"
    first = dict(line.split(", ") for line in smi(query, "--format=csv,noheader").splitlines())
    assert dict(line.split(", ") for line in smi(query, "--format=csv,noheader").splitlines()) == first
    remap = smi("--query-remapped-rows=gpu_bus_id,gpu_uuid", "--format=csv,noheader", faults=("remap-pending",))
    assert dict(line.split(", ") for line in remap.splitlines()) == first
    kernel = smi("-k", faults=("xid79",), tool="journalctl")
    found = re.search(r"NVRM: GPU at PCI:0000:9a:00: (GPU-\S+)$", kernel, re.M)
    assert found and found.group(1) == first["00000000:9A:00.0"]
