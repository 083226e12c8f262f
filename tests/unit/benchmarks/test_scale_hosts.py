"""The host-scale benchmark's inputs (benchmarks/scale_hosts.py): bad sizes and forks are refused before any host
is started, and forks 0 means as wide as the wave."""
from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

import scale_hosts


def test_forks_zero_is_the_wave_width():
    assert scale_hosts.forks_for(64, 0) == 64
    assert scale_hosts.forks_for(64, 20) == 20
    assert scale_hosts.parse_forks("20,0") == [20, 0]


@pytest.mark.parametrize("sizes", [[], [0], [8, 4], [8, 8], [200]])
def test_bad_sizes_refused(sizes):
    with pytest.raises(SystemExit, match="--sizes"):
        scale_hosts.check_plan(sizes, [20])


@pytest.mark.parametrize("text", ["twenty", "20,-1"])
def test_bad_forks_refused(text):
    with pytest.raises(SystemExit, match="--forks"):
        scale_hosts.parse_forks(text)


def test_host_names_and_ports_do_not_meet_the_lab_cells():
    assert scale_hosts.host_name(3) == "hb-03"
    import yaml
    from gpufleet_lab import config
    lab = yaml.safe_load((ROOT / "lab" / "lab.yml").read_text())
    # ten cells' ports (each cell's are lab.yml's plus CELL_PORT_STEP), each with a port per host from its ssh one
    highest = max(int(v) for v in lab["ports"].values()) + 10 * config.CELL_PORT_STEP + 64
    assert scale_hosts.PORT_BASE > highest
