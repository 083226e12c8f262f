"""The lab's all_reduce_perf simulator (SIMULATION, lab/simulators/all_reduce_perf) prints the layout real nccl-tests
prints: its output is compared line by line with real captures (tests/fixtures/nccl/README.md names their sources) -
the kinds of lines and their order, the fixed header lines character for character, each row's token count, token
shapes and column edges, the footer. Written without the checks engine's parser, so a parser bug cannot hide a
simulator that drifted from the real tool."""
from __future__ import annotations

import pathlib
import re
from typing import Any, List, Tuple

import pytest

from tests.unit.lab.simulators import Simulators
from tests.conftest import fixture_text

REAL = "real-2.17.8-gh200-2node-wrong.txt"  # nccl-tests 2.17.8, the release line the simulator prints (2.17.6)
REAL_OK = "real-2.18.0-mpirun-tag-output.txt"  # 2.18.0, a passing run, behind mpirun --tag-output
REAL_NA = "real-srun-label-h100-16rank-2node.txt"  # -c 0 (validation: 0), behind srun --label

# Each kind of line nccl-tests 2.17/2.18 prints to stdout, as the captures show it.
KINDS: List[Tuple[str, str]] = [
    ("version", r"# nccl-tests version \d+\.\d+\.\d+ nccl-headers=\d+ nccl-library=\d+"),
    ("starting", r"# Collective test starting: all_reduce_perf(_mpi)?"),
    ("nthread", r"# nThread \d+ nGpus \d+ minBytes \d+ maxBytes \d+ step: \d+\(factor\) warmup iters: \d+ "
                r"iters: \d+ agg iters: \d+ validation: [01] graph: \d+"),
    ("hash", r"#"),
    ("using", r"# Using devices"),
    ("rank", r"#  Rank +\d+ Group +\d+ Pid +\d+ on +\S+ device +\d+ \[[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\] \S.*"),
    ("places", r"# +out-of-place +in-place *"),
    ("columns", r"# +size +count +type +redop +root( +time +algbw +busbw +#wrong){2} *"),
    ("units", r"# +\(B\) +\(elements\)( +\(us\) +\(GB/s\) +\(GB/s\)){2} *"),
    ("row", r" *\d+ +\d+ +[a-z0-9]+ +[a-z]+ +-1( +[0-9.e+]+ +[0-9.]+ +[0-9.]+ +(\d+|N/A)){2}"),
    ("oob", r"# Out of bounds values : \d+ (OK|FAILED)"),
    ("avg", r"# Avg bus bandwidth    : [0-9.e+-]+ "),
    ("concluded", r"# Collective test concluded: all_reduce_perf(_mpi)?"),
    ("empty", r""),
    ("failure", r" \.\. \S+ pid \d+: Test failure common\.cu:\d+"),
]
RANK0 = re.compile(r"^\[\d+,0\]<stdout>:|^ *0:(?: |$)")  # mpirun --tag-output, srun --label


@pytest.fixture
def sim(tmp_path: pathlib.Path) -> Any:
    sims = Simulators(tmp_path, {})

    class Sim:
        def run(self, *args: str, rc: int = 0) -> str:
            return sims.run("all_reduce_perf", *args, rc=rc).stdout

        fault = staticmethod(sims.fault)

    return Sim()


def lines_of(text: str, untag: bool = False) -> List[str]:
    """The lines of ``text``; with ``untag``, rank 0's stdout lines of a launcher-tagged capture, untagged."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    if not untag:
        return lines
    untagged = []
    for line in lines:
        m = RANK0.match(line)
        if m:
            untagged.append(line[m.end():])
    return untagged


def kind(line: str) -> str:
    found = [name for name, pattern in KINDS if re.fullmatch(pattern, line)]
    assert len(found) == 1, "line %r is %s" % (line, found or "of no kind nccl-tests prints")
    return found[0]


def sequence(lines: List[str]) -> List[str]:
    """The kinds in order, each run of rank lines or rows counted once."""
    out: List[str] = []
    for line in lines:
        name = kind(line)
        if not (out and out[-1] == name and name in ("rank", "row", "failure")):
            out.append(name)
    return out


def edges(line: str) -> List[int]:
    """Where each token ends: the right edges of nccl-tests' fixed-width printf columns."""
    return [m.end() for m in re.finditer(r"\S+", line)]


def only(lines: List[str], name: str) -> List[str]:
    return [line for line in lines if kind(line) == name]


def test_a_passing_run_has_the_real_sequence_of_lines(sim: Any) -> None:
    real = lines_of(fixture_text("nccl", REAL_OK), untag=True)
    out = lines_of(sim.run("-b", "8", "-e", "8G", "-f", "2", "-g", "8"))
    assert sequence(out) == sequence(real) == [
        "version", "starting", "nthread", "hash", "using", "rank", "hash", "places", "columns", "units", "row", "oob",
        "avg", "hash", "concluded", "hash", "empty"]


def test_a_failing_run_ends_as_the_real_one_does(sim: Any) -> None:
    sim.fault("nccl-wrong")
    out = lines_of(sim.run("-b", "8", "-e", "128M", "-f", "2", "-g", "8", rc=1))
    real = lines_of(fixture_text("nccl", REAL))
    assert sequence(out) == sequence(real)
    assert only(out, "oob")[0].endswith(" FAILED") and only(real, "oob")[0].endswith(" FAILED")
    assert [int(row.split()[8]) > 0 for row in only(out, "row")][:2] == [True, False]


def test_the_fixed_header_lines_are_the_real_ones_character_for_character(sim: Any) -> None:
    out = lines_of(sim.run("-b", "8", "-e", "1M", "-f", "2", "-g", "8"))
    for reference in (lines_of(fixture_text("nccl", REAL)), lines_of(fixture_text("nccl", REAL_OK), untag=True)):
        for name in ("places", "columns", "units", "hash", "using"):
            assert only(out, name)[0] == only(reference, name)[0], name
        digits = [re.sub(r"\d+", "N", only(x, "nthread")[0]) for x in (out, reference)]
        assert digits[0] == digits[1]


def test_rank_lines_have_the_real_fields_and_widths(sim: Any) -> None:
    out = only(lines_of(sim.run("-b", "8", "-e", "1M", "-f", "2", "-g", "8")), "rank")
    real = only(lines_of(fixture_text("nccl", REAL)), "rank")
    assert len(out) == 8
    shape = r"#  Rank ( \d|\d\d) Group ( \d|\d\d) Pid [ \d]{5}\d+ on [ \S]{9}\S+ device ( \d|\d\d) \[[0-9a-f:]{10}\] "
    assert all(re.match(shape, line) for line in out + real)


def test_rows_have_the_real_tokens_and_column_edges(sim: Any) -> None:
    out = only(lines_of(sim.run("-b", "8", "-e", "8G", "-f", "2", "-g", "8")), "row")
    real = only(lines_of(fixture_text("nccl", REAL)), "row") + only(
        lines_of(fixture_text("nccl", REAL_OK), untag=True), "row")
    assert len(out) == 31
    assert {tuple(edges(row)) for row in out} == {tuple(edges(row)) for row in real}
    assert {len(row.split()) for row in out} == {len(row.split()) for row in real} == {13}
    for row in out:
        cells = row.split()
        assert int(cells[0]) == 4 * int(cells[1]) and cells[2:5] == ["float", "sum", "-1"]
        assert all(re.fullmatch(r"\d+(\.\d{1,2})?", c) for c in cells[5:8] + cells[9:12]), row
        assert all(len(c) <= w for c, w in zip(cells[5:8], (7, 6, 6))), row


def test_without_data_checking_the_wrong_column_is_na_where_the_real_one_is(sim: Any) -> None:
    out = only(lines_of(sim.run("-b", "1G", "-e", "8G", "-f", "2", "-g", "8", "-c", "0")), "row")
    # an older release (rank lines "[0x18]"): only its rows are compared
    real = [line for line in lines_of(fixture_text("nccl", REAL_NA), untag=True)
            if re.fullmatch(dict(KINDS)["row"], line)]
    assert len(real) == 11
    for row in out + real:
        ends = edges(row)
        assert row.split()[8] == row.split()[12] == "N/A"
        assert (ends[8] - ends[7], ends[12] - ends[11]) == (7, 7), row
    assert "validation: 0 " in only(lines_of(sim.run("-b", "1G", "-e", "1G", "-g", "8", "-c", "0")), "nthread")[0]


def test_the_footer_is_the_real_one(sim: Any) -> None:
    out = lines_of(sim.run("-b", "8", "-e", "1M", "-f", "2", "-g", "8"))
    real = lines_of(fixture_text("nccl", REAL_OK), untag=True)
    for lines in (out, real):
        assert [kind(line) for line in lines[-6:]] == ["oob", "avg", "hash", "concluded", "hash", "empty"]
        assert lines[-5].endswith(" ") and not lines[-5].endswith("  ")  # "%g %s" with an empty check verdict
    assert out[-6] == real[-6] == "# Out of bounds values : 0 OK"
