"""all_reduce_perf parsing and the bandwidth gate, on real captures (tests/fixtures/nccl/README.md names each source)
and on inputs derived from them in the tests below."""
from __future__ import annotations

import json
import re

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.nccl import (
    busbw_by_size, judge_runs, legacy_tolerance, parse_output, parse_size, with_exit_status)
from tests.conftest import fixture_text, pool_baseline

# A pool whose 8-GPU H100 nodes reach ~470 GB/s at 4 GiB (the real single-node capture below).
BASELINE = pool_baseline(nccl={"busbw_gbps": {"1G": 450.0, "4G": 470.0}, "tolerance_pct": 10, "min_runs": 3})
G = 1024 ** 3
H100 = "real-h100-8gpu-single-node.txt"  # nccl-tests issue 290: 8 GPUs, one node
H100_16 = "real-h100-16rank-2node.txt"  # 16 ranks over two nodes, 8 B to 8 GiB
WRONG = "real-2.17.8-gh200-2node-wrong.txt"  # nccl-tests issue 369: #wrong 96 and 32 at 1 MiB
TAGGED = "real-2.18.0-mpirun-tag-output.txt"  # mpirun --tag-output, stdout and stderr tagged
LAUNCHER = "real-mpijob-launcher-2node-t4.txt"  # kubectl logs of an MPIJob launcher (mpirun --tag-output)
SRUN = "real-srun-label-h100-16rank-2node.txt"  # srun --label, -c 0
LEGACY = "real-legacy-k80-4gpu.txt"  # the pre-Aug-2022 layout: float error column, no root


def text(name):
    return fixture_text("nccl", name)


def run(name):
    return parse_output(text(name))


# -- the current layout ---------------------------------------------------------------------------------------------
def test_current_layout_of_a_real_8_gpu_node():
    parsed = run(H100)
    assert (parsed["format"], parsed["ranks"], parsed["hosts"], parsed["prefix"]) == ("current", 8, ["node005"], None)
    assert [r["size"] for r in parsed["rows"]] == [128 * 1024 ** 2 * 2 ** i for i in range(6)]
    last = parsed["rows"][-1]
    assert (last["root"], last["oop_busbw"], last["ip_busbw"], last["oop_time"], last["wrong"]) == (
        -1, 473.60, 476.53, 15870.0, 0)
    assert parsed["out_of_bounds"] == 0 and parsed["avg_busbw"] == pytest.approx(439.369)
    assert not parsed["concluded"]  # this release had no "# Collective test concluded" line
    assert busbw_by_size(parsed) == {128 * 1024 ** 2: 382.99, 256 * 1024 ** 2: 413.97, 512 * 1024 ** 2: 431.81,
                                     G: 465.25, 2 * G: 469.64, 4 * G: 476.53}


def test_a_real_multi_node_run_names_both_hosts():
    parsed = run(H100_16)
    assert parsed["ranks"] == 16 and parsed["hosts"] == ["ztan-mig-235z", "ztan-mig-gq73"]
    assert len(parsed["rows"]) == 31 and parsed["rows"][-1]["size"] == 8 * G


def test_three_runs_pass_on_median():
    summary = judge_runs([run(H100)] * 3, BASELINE, "node005")
    assert summary["passed"], summary["failures"]
    assert summary["median_busbw"] == {str(G): 465.25, str(4 * G): 476.53}


def test_a_slower_pool_fails_with_numbers():
    summary = judge_runs([run(H100_16)] * 3, BASELINE, "n")
    assert summary["failures"] == [
        "n size 1G: check nccl_busbw: measured 298.82, baseline >= 405.00 GB/s (450.00 - 10%) (median of 3 run(s))",
        "n size 4G: check nccl_busbw: measured 330.58, baseline >= 423.00 GB/s (470.00 - 10%) (median of 3 run(s))"]


def test_one_slow_run_of_three_does_not_fail_the_median():
    assert judge_runs([run(H100), run(H100_16), run(H100)], BASELINE)["passed"]


def test_too_few_runs_fail():
    summary = judge_runs([run(H100)], BASELINE, "n")
    assert summary["failures"] == ["n: check nccl_runs: measured 1, baseline >= 3 (bandwidth varies run to run; "
                                   "judge a median)"]


# -- wrong elements and errors ----------------------------------------------------------------------------------------
def test_real_wrong_elements_fail_with_the_count_and_the_failure_lines():
    parsed = run(WRONG)
    assert [r["wrong"] for r in parsed["rows"] if r["wrong"]] == [128] and parsed["out_of_bounds"] == 4
    assert parsed["errors"] == [
        {"host": "gpu-1-1", "kind": "Test", "where": "common.cu:1189", "message": "common.cu:1189 (pid 662195)"},
        {"host": "gpu-1-7", "kind": "Test", "where": "common.cu:1189", "message": "common.cu:1189 (pid 2448661)"}]
    policy = pool_baseline(nccl={"busbw_gbps": {"128M": 20.0}, "tolerance_pct": 10, "min_runs": 1})
    assert judge_runs([parsed], policy, "n")["failures"] == [
        "n run 1: check nccl_error: measured Test failure common.cu:1189 (pid 662195), baseline no error (gpu-1-1)",
        "n run 1: check nccl_error: measured Test failure common.cu:1189 (pid 2448661), baseline no error (gpu-1-7)",
        "n run 1: check nccl_wrong_elements: measured 128, baseline 0",
        "n run 1: check nccl_out_of_bounds: measured 4, baseline 0"]


def test_real_cuda_failure_before_the_table():
    parsed = run("real-cuda-failure-h100-8gpu.txt")
    assert parsed["format"] == "unknown" and parsed["rows"] == []
    assert parsed["errors"][0] == {"host": "test", "kind": "CUDA", "where": "common.cu:941",
                                   "message": "system not yet initialized"}
    failures = judge_runs([parsed] * 3, BASELINE, "n")["failures"]
    assert failures[:3] == [
        "n run 1: check nccl_error: measured CUDA failure system not yet initialized, baseline no error (test)",
        "n run 1: check nccl_error: measured Test failure common.cu:891 (pid 54340), baseline no error (test)",
        "n run 1: check nccl_wrong_elements: measured no data rows, baseline 0 (all_reduce_perf checks results only "
        "with -c 1 (its default); drop -c 0)"]


def test_errors_of_every_rank_are_kept():
    parsed = run("real-2.17.8-gh200-2node-cuda-busy.txt")
    assert parsed["ranks"] == 8 and parsed["hosts"] == ["gpu-1-1", "gpu-1-7"]
    assert [(e["kind"], e["host"]) for e in parsed["errors"]].count(("CUDA", "gpu-1-7")) == 4
    assert len(parsed["errors"]) == 12
    assert {e["message"] for e in parsed["errors"] if e["kind"] == "CUDA"} == {
        "CUDA-capable device(s) is/are busy or unavailable"}


def test_without_data_checking_the_real_na_column_fails_as_unmeasured():
    parsed = run(SRUN)
    assert all(r["wrong"] is None for r in parsed["rows"])
    summary = judge_runs([parsed] * 3, BASELINE, "n")
    assert summary["failures"][0] == ("n run 1: check nccl_wrong_elements: measured not measured (#wrong N/A in 11 "
                                      "row(s)), baseline 0 (all_reduce_perf checks results only with -c 1 (its "
                                      "default); drop -c 0)")


# -- the legacy layout and nccl-tests' own tolerance ----------------------------------------------------------------
def legacy(error="2e-07", dtype="float", ranks=None, keep_ranks=True):
    """The real K80 capture with every error cell set to ``error``, its rows re-typed as ``dtype`` (counts follow)
    and, with ``ranks``, that many rank lines; printed with nccl-tests' legacy formats."""
    words = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int32": 4, "uint8": 1}
    out = []
    for line in text(LEGACY).splitlines():
        cells = line.split()
        if re.match(r"^#\s+Rank\s", line):
            if keep_ranks and (ranks is None or cells[2] == "0"):
                out.extend([line] if ranks is None else [
                    "#   Rank %2d Pid %6d on %10s device %2d [0x00] Tesla K80" % (r, 100 + r, "h%d" % (r // 8), r % 8)
                    for r in range(ranks)])
            continue
        if line[:1] == " " and len(cells) == 12:
            size = int(cells[0])
            out.append("%12li  %12li  %8s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s" % (
                size, size // words[dtype], dtype, cells[3], cells[4], cells[5], cells[6], error, cells[8], cells[9],
                cells[10], error))
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_real_legacy_layout():
    parsed = run(LEGACY)
    assert (parsed["format"], parsed["ranks"], len(parsed["rows"])) == ("legacy", 4, 7)
    assert parsed["rows"][-1]["root"] == -1 and parsed["rows"][-1]["oop_busbw"] == 2.56
    assert [r["wrong"] for r in parsed["rows"]] == [0] * 7
    assert parse_output(legacy()) == parsed  # the rewriting helper reproduces the capture


@pytest.mark.parametrize("dtype,ranks,expected", [
    ("float", 2, 1e-5), ("float", 4, 3e-5), ("float", 128, 1.27e-3), ("half", 8, 7e-2), ("bfloat16", 2, 1e-2),
    ("double", 8, 7e-12), ("int32", 8, 7e-200), ("uint8", 1, 0.0)])
def test_legacy_tolerance_is_nccl_tests_own(dtype, ranks, expected):
    assert legacy_tolerance(dtype, ranks) == pytest.approx(expected, rel=1e-9, abs=0)


@pytest.mark.parametrize("error,dtype,ranks,wrong", [
    ("2e-05", "float", None, 0),      # within 1e-5 x 3 for 4 ranks (was counted wrong: > 1e-6)
    ("3e-05", "float", None, 0),      # at the bound: nccl-tests counts only what exceeds it
    ("4e-05", "float", None, 14),     # beyond: both halves of all 7 rows
    ("2e-06", "float", 128, 0),       # the healthy 128-GPU run of the issue
    ("2e-02", "half", 4, 0),          # half: 1e-2 x 3
    ("2e-02", "half", 2, 14),         # half over 2 ranks: 1e-2
    ("1e+00", "int32", 8, 14),        # integers must be exact
    ("0e+00", "int32", 8, 0),
    ("1e-12", "double", 4, 0),
    ("4e-12", "double", 4, 14),
])
def test_legacy_error_is_judged_by_type_and_rank_count(error, dtype, ranks, wrong):
    parsed = parse_output(legacy(error, dtype, ranks))
    assert parsed["ranks"] == (ranks or 4)
    assert sum(r["wrong"] for r in parsed["rows"]) == wrong
    assert {r["type"] for r in parsed["rows"]} == {dtype}


def test_a_legacy_table_without_rank_lines_cannot_be_judged():
    with pytest.raises(ParseError, match=r"line 9: the error column is judged against nccl-tests' tolerance for the "
                                         r"data type times \(ranks - 1\), and no '# Rank' line came before the table"):
        parse_output(legacy(keep_ranks=False))


# -- launcher prefixes and streams ----------------------------------------------------------------------------------
def test_mpirun_tag_output_is_read_per_rank():
    parsed = run(TAGGED)
    assert (parsed["prefix"], parsed["stream"], parsed["ranks"], parsed["hosts"]) == (
        "mpirun --tag-output", "rank 0 stdout", 2, ["lab"])
    assert len(parsed["rows"]) == 8 and parsed["rows"][-1]["ip_busbw"] == 2.31 and parsed["concluded"]
    assert parsed["out_of_bounds"] == 0 and parsed["avg_busbw"] == pytest.approx(1.57614)


def test_an_mpijob_launcher_log_with_every_ranks_nccl_info():
    parsed = run(LAUNCHER)
    assert (parsed["ranks"], parsed["hosts"]) == (2, ["test-nccl-efa-worker-0", "test-nccl-efa-worker-1"])
    assert [r["size"] for r in parsed["rows"][:4]] == [0, 0, 4, 8]  # -b 1: sizes round down to whole floats
    assert len(parsed["rows"]) == 31 and parsed["rows"][-1]["oop_busbw"] == 3.11


def test_kubectl_prefix_in_front_of_mpirun_tags():
    parsed = run("synthetic-kubectl-prefix-mpijob-launcher.txt")
    assert parsed["prefix"] == "kubectl logs --prefix + mpirun --tag-output"
    assert parsed["stream"] == "pod test-nccl-efa-launcher-tx47t/test-nccl-efa-launcher, rank 0 stdout"
    assert parsed["rows"] == run(LAUNCHER)["rows"]


def test_srun_label_is_read():
    parsed = run(SRUN)
    assert (parsed["prefix"], parsed["stream"], parsed["ranks"], parsed["hosts"]) == (
        "srun --label", "task 0", 16, ["node005", "node007"])
    assert parsed["rows"][-1]["oop_busbw"] == 155.57


def tag(name, prefix):
    return "".join(prefix + line + "\n" for line in text(name).splitlines())


def test_a_table_from_every_rank_is_taken_from_rank_0_when_they_agree():
    lines = list(zip(tag(H100, "[1,1]<stdout>:").splitlines(), tag(H100, "[1,0]<stdout>:").splitlines()))
    parsed = parse_output("\n".join(line for pair in lines for line in pair))
    assert parsed["stream"] == "rank 0 stdout" and parsed["rows"] == run(H100)["rows"]


def test_tables_from_every_rank_that_disagree_are_refused():
    mixed = tag(H100, "[1,0]<stdout>:") + tag(H100_16, "[1,1]<stdout>:")
    with pytest.raises(ParseError, match=r"2 streams each printed a result table and they disagree \(rank 0 stdout: 8 "
                                         r"rank\(s\) on node005, 6 rows; rank 1 stdout: 16 rank\(s\) on "
                                         r"ztan-mig-235z,ztan-mig-gq73, 31 rows\)"):
        parse_output(mixed)


@pytest.mark.parametrize("mixed,message", [
    # half the lines srun-labelled, half mpirun-tagged
    (lambda: "".join((" 0: " if i % 2 else "[1,0]<stdout>:") + line + "\n"
                     for i, line in enumerate(text(H100).splitlines())),
     r"nccl-tests' lines carry different prefixes \(mpirun --tag-output from line 1; srun --label from line 2\)"),
    # tagged output with the table's lines untagged
    (lambda: tag(H100, "[1,0]<stdout>:").replace("[1,0]<stdout>:   2684", "   2684"),
     r"different prefixes \(mpirun --tag-output from line 1; no prefix from line 17\)"),
    # kubectl logs --timestamps: a prefix this reader does not know
    (lambda: tag(H100, "2025-03-04T09:13:02.118214310Z "),
     r"line 1: '2025-03-04T09:13:02.118214310Z ' in front of nccl-tests' output is not a prefix this reader knows"),
    # an MPI implementation's rank prefix that is not Open MPI's --tag-output
    (lambda: tag(H100, "[0] "), r"line 1: '\[0\] ' in front of nccl-tests' output is not a prefix"),
    # two ranks' writes in one line
    (lambda: tag(TAGGED, "").replace("[1,0]<stdout>:     2097152", "[1,0]<stdout>:     20[1,1]<stdout>:97152"),
     r"line 21: a launcher tag '\[1,1\]<stdout>:' in the middle of a line"),
])
def test_mixed_unknown_and_interleaved_prefixes_fail_closed(mixed, message):
    with pytest.raises(ParseError, match=message):
        parse_output(mixed())


def test_two_processes_printing_into_one_untagged_stream_are_refused():
    first, second = text(H100).splitlines(), text(H100_16).splitlines()
    interleaved = "\n".join(a + "\n" + b for a, b in zip(first, second))
    with pytest.raises(ParseError, match=r"line 2: a second '# nThread' run header in one stream"):
        parse_output(interleaved)


def test_rows_out_of_order_are_refused():
    lines = text(H100_16).splitlines()
    rows = [i for i, line in enumerate(lines) if line.startswith("   ")]
    lines[rows[10]], lines[rows[11]] = lines[rows[11]], lines[rows[10]]
    with pytest.raises(ParseError, match=r"line 35: size 8192 after 16384: rows out of order"):
        parse_output("\n".join(lines))


def test_a_rank_listed_twice_is_refused():
    with pytest.raises(ParseError, match=r"line 5: rank 0 is listed twice \(on node005 and node005\)"):
        parse_output(text(H100).replace("# Using devices\n", "# Using devices\n" + text(H100).splitlines()[3] + "\n"))


# -- layouts and other binaries ---------------------------------------------------------------------------------------
def test_unknown_column_headings_are_refused_naming_them():
    with pytest.raises(ParseError, match=r"line 14: column headings 'size count type redop root time algbw busbw "
                                         r"#wrong time algbw busbw #wrong timestamp' are not a layout this reader "
                                         r"knows \(it reads nccl-tests 2.x stdout"):
        parse_output(text(H100).replace("busbw #wrong\n", "busbw #wrong timestamp\n"))


@pytest.mark.parametrize("old,new,message", [
    ("float     sum      -1    613.3", "float    none      -1    613.3", "reduction 'none' is not an all-reduce"),
    ("134217728      33554432     float", "134217728      67108864     float", "size 134217728, count 67108864"),
    ("float     sum      -1    613.3", "float     sum       0    613.3", "root 0 are not an all-reduce's"),
    ("float     sum      -1    613.3", "fp128     sum      -1    613.3", "data type 'fp128' is not one"),
    ("382.34      0\n", "382.34      0  extra\n", "14 columns where the header has 13"),
    ("382.34      0\n", "382.34     -1\n", "#wrong is not a count"),
])
def test_rows_that_are_not_an_all_reduce_are_refused(old, new, message):
    with pytest.raises(ParseError, match=re.escape(message)):
        parse_output(text(H100).replace(old, new))


def test_another_collective_is_refused_by_its_name():
    with pytest.raises(ParseError, match="line 2: this is all_gather_perf output, not all_reduce_perf's"):
        parse_output(text(WRONG).replace("starting: all_reduce_perf", "starting: all_gather_perf"))


def test_cputime_and_per_iteration_layouts():
    cputime = parse_output(text(H100).replace("  time   algbw", "cputime   algbw"))
    assert cputime["format"] == "current" and cputime["rows"] == run(H100)["rows"]
    head = ("#       size         count      type   redop    root     time   algbw   busbw #wrong    i_min    i_max"
            "    i_p99    i_cv%     time   algbw   busbw #wrong    i_min    i_max    i_p99    i_cv%")
    row = ("  1073741824     268435456     float     sum      -1   4038.8  265.85  465.25      0  4001.10  4090.22"
           "  4090.22     0.61   4043.6  265.54  464.70      0  4010.00  4080.00  4080.00     0.55")
    per_iter = parse_output("\n".join([head, row, "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 465"]))
    assert per_iter["format"] == "per-iter" and busbw_by_size(per_iter) == {G: 465.25}


# -- JSON ------------------------------------------------------------------------------------------------------------
def test_json():
    doc = json.loads(text("synthetic-allreduce-8gpu.json"))
    parsed = parse_output(json.dumps(doc))
    assert parsed["format"] == "json" and parsed["ranks"] == 8 and parsed["hosts"] == ["gpu-a1"]
    last = doc["results"][-1]
    assert busbw_by_size(parsed)[8 * G] == max(last["out_of_place"]["bus_bw"], last["in_place"]["bus_bw"])
    assert parsed["out_of_bounds"] == 0


def test_json_without_nwrong_or_out_of_bounds_fails():
    doc = json.loads(text("synthetic-allreduce-8gpu.json"))
    for res in doc["results"]:
        for half in ("out_of_place", "in_place"):
            res[half].pop("nwrong", None)
    doc.pop("out_of_bounds", None)
    summary = judge_runs([parse_output(json.dumps(doc))] * 3, BASELINE, "n")
    assert not summary["passed"]
    assert any("nccl_wrong_elements: measured not measured" in f for f in summary["failures"])
    assert any("nccl_out_of_bounds: measured not reported" in f for f in summary["failures"])


# -- malformed input and sizes ----------------------------------------------------------------------------------------
def test_truncated_is_a_clear_error():
    cut = "\n".join(text(H100_16).splitlines()[:40])
    with pytest.raises(ParseError, match=r"output ends before the summary footer \(truncated\? the test may have "
                                         r"been killed\); 17 data rows read"):
        parse_output(cut)


@pytest.mark.parametrize("value,message", [
    ("", "empty"),
    ("bash: all_reduce_perf: command not found", "no result table"),
    ('{"results": [{"size": "x"}]}', r"results\[0\] is malformed"),
    ("# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n1024 256 float sum -1 1.0\n",
     "malformed data row"),
])
def test_malformed(value, message):
    with pytest.raises(ParseError, match=message):
        parse_output(value)


@pytest.mark.parametrize("value,expected", [(8, 8), ("8G", 8 * G), ("512M", 512 * 1024 ** 2), ("1K", 1024),
                                            ("1024", 1024), ("2GB", 2 * G)])
def test_parse_size(value, expected):
    assert parse_size(value) == expected


def test_parse_size_error_names_field():
    with pytest.raises(InputError, match="baseline.nccl.busbw_gbps key: 'lots'"):
        judge_runs([run(H100)], dict(BASELINE, nccl=dict(BASELINE["nccl"], busbw_gbps={"lots": 1.0})))


@pytest.mark.parametrize("value", ["inf", "1e309", "nan"])
def test_a_bus_bandwidth_that_is_not_a_measurement_fails(value):
    bad = parse_output(text(H100).replace("473.60", value).replace("476.53", value))
    summary = judge_runs([bad] * 3, BASELINE, "n")
    assert summary["failures"] == ["n size 4G: check nccl_busbw: measured not measured in 3 of 3 run(s), baseline >= "
                                   "423.00 GB/s (size not in the run or no finite bandwidth; widen -b/-e)"]


def test_opt_out_judges_nothing_and_says_why():
    opted = pool_baseline(opt_out={"nccl": "single-GPU nodes: there is no collective to measure"})
    summary = judge_runs([], opted, "n")
    assert summary["passed"] and summary["opt_outs"] == [
        "n: nccl_busbw opted out: single-GPU nodes: there is no collective to measure"]


@pytest.mark.parametrize("size", ["\u0668G", "1\uff10M"])  # an Arabic-Indic eight, a full-width zero
def test_a_size_takes_ascii_digits_only(size):
    with pytest.raises(InputError, match="is not a size"):
        parse_size(size, "nccl.busbw_gbps")


def test_a_rank_the_launcher_saw_die_fails_a_table_that_looks_complete():
    """Rank 0's table can be complete while another rank was killed: mpirun's and srun's own lines say so."""
    clean = fixture_text("nccl", "real-h100-8gpu-single-node.txt")
    assert parse_output(clean)["errors"] == []
    for launcher in ("mpirun noticed that process rank 3 with PID 0 on node gpu-a1 exited on signal 9 (Killed).",
                     "srun: error: gpu-a1: task 3: exited with exit code 1",
                     "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=42.0. Some of the step tasks have "
                     "been OOM Killed."):
        parsed = parse_output(clean + launcher + "\n")
        (error,) = parsed["errors"]
        assert error["kind"] == "launcher" and error["message"] == launcher
        summary = judge_runs([parsed] * 3, BASELINE, "gpu-a1")
        assert not summary["passed"] and any("check nccl_error: measured launcher failure " + launcher[:40] in f
                                             for f in summary["failures"]), summary["failures"]


def test_a_repeated_row_is_refused_not_overwritten():
    """The same size twice in one table (two processes' rows interleaved) is refused; the later row must not win."""
    clean = fixture_text("nccl", "real-h100-8gpu-single-node.txt")
    row = ("  1073741824     268435456     float     sum      -1   4038.8  265.85  465.25      0   4043.6  265.54  "
           "464.70      0\n")
    slow = row.replace("465.25", " 46.52").replace("464.70", " 46.47")
    with pytest.raises(ParseError, match=r"size 1073741824 after 1073741824: rows out of order or repeated"):
        parse_output(clean.replace(row, row + slow))


def test_a_non_zero_exit_the_output_does_not_explain_is_an_error():
    clean = parse_output(fixture_text("nccl", "real-h100-8gpu-single-node.txt"))
    assert with_exit_status(clean, 0) is clean
    failed = with_exit_status(clean, 137)
    assert failed["errors"] == [{"host": "", "kind": "exit", "where": "",
                                 "message": "all_reduce_perf exited 137 with no error in its output"}]
    summary = judge_runs([failed] * 3, BASELINE, "gpu-a1")
    assert any("check nccl_error: measured exit failure all_reduce_perf exited 137" in f for f in summary["failures"])
    wrong = parse_output(fixture_text("nccl", "real-2.17.8-gh200-2node-wrong.txt"))
    assert with_exit_status(wrong, 1)["errors"] == wrong["errors"]  # its own words already say why
