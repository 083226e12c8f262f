"""The fleet report (plugins/module_utils/fleet_report.py): versions and skew per cell, days to EOL and behind the
latest patch, the patch-SLO alerts, and fail-closed readings; Markdown and HTML renderings."""
from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet_report import (
    build_report, html_page, markdown, readings_from_ledger, write_files)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet
from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_run

ROOT = pathlib.Path(__file__).resolve().parents[3]
TODAY = "2026-12-01"
PATCHES = {"1.35": {"version": "v1.35.4", "released": "2026-04-15"},
           "1.36": {"version": "v1.36.3", "released": "2026-07-22"}}


def example():
    return yaml.safe_load((ROOT / "docs" / "fleet-example.yml").read_text())["gpufleet_fleet"]


def readings(**changes):
    out = {c["name"]: {"control_plane": "v1.36.3", "state": "done",
                       "kubelets": {p["name"]: ["v1.36.3", "v1.36.3"] for p in c["pools"]}}
           for c in example()["cells"]}
    for cell, reading in changes.items():
        if reading is None:
            out.pop(cell.replace("_", "-"))
        else:
            out[cell.replace("_", "-")].update(reading)
    return out


def test_a_fleet_on_its_latest_patches_has_no_alert():
    report = build_report(example(), readings(train_a={"state": "upgrading", "kubelets": {
        "h100-train": ["v1.33.6", "v1.36.3"]}}), PATCHES, TODAY)
    assert report["alerts"] == []
    assert report["version_spread"] == {"v1.36.3": 5}
    train = next(r for r in report["cells"] if r["cell"] == "train-a")
    assert train["pools"] == [{"pool": "h100-train", "oldest": "v1.33.6", "newest": "v1.36.3", "nodes": 2,
                               "minors_behind": 3}]
    assert train["days_to_eol"] == 209 and train["days_behind_latest_patch"] == 0  # 1.36 EOL 2027-06-28
    assert report["rings"][2] == {"ring": "ring2", "target": "v1.36.3", "cells": 3,
                                  "states": {"upgrading": 1, "done": 2}}


def test_patch_slo_and_end_of_life_alerts():
    old = readings(canary_1={"control_plane": "v1.35.3", "kubelets": {"h100": ["v1.35.3"]}},  # 230 days behind v1.35.4
                   inf_east={"control_plane": "v1.33.13", "kubelets": {"l40s": ["v1.33.13"]}})
    report = build_report(example(), old, dict(PATCHES, **{"1.33": {"version": "v1.33.13",
                                                                   "released": "2026-06-11"}}), TODAY)
    assert "canary-1: v1.35.3 is 230 days behind v1.35.4 (released 2026-04-15; the patch SLO is 30 days)" in \
        report["alerts"]
    assert any(a.startswith("inf-east: v1.33 reached end of life on 2026-06-28") for a in report["alerts"])
    assert len(report["alerts"]) == 2
    # 29 days behind is within the SLO, 31 is not
    near = readings(canary_1={"control_plane": "v1.36.1"})
    assert build_report(example(), near, PATCHES, "2026-08-20")["alerts"] == []
    assert len(build_report(example(), near, PATCHES, "2026-08-22")["alerts"]) == 1


def test_what_cannot_be_read_is_an_alert_never_a_pass():
    bad = readings(canary_1=None, inf_east={"control_plane": "<b>latest</b>"},
                   inf_west={"kubelets": {"l40s": []}}, train_b={"state": "finished"})
    report = build_report(example(), bad, {"1.36": PATCHES["1.36"]}, TODAY)
    text = "\n".join(report["alerts"])
    assert "canary-1: no reading of the cell" in text
    assert "inf-east.control_plane: '<b>latest</b>'" in text
    assert "inf-west: pool l40s has no kubelet reading" in text
    assert "train-b: state 'finished' is not one of pending" in text
    # a running minor with no latest-patch data
    report = build_report(example(), readings(train_a={"control_plane": "v1.35.4", "kubelets": {
        "h100-train": ["v1.35.4"]}}), {"1.36": PATCHES["1.36"]}, TODAY)
    assert report["alerts"] == ["train-a: no latest patch known for v1.35; add latest_patches['1.35']"]
    # kubelets out of the skew policy
    skewed = readings(train_a={"kubelets": {"h100-train": ["v1.32.9"]}})
    assert "out of the skew policy" in build_report(example(), skewed, PATCHES, TODAY)["alerts"][0]
    # the skew policy's own rules (versions.skew_violations): kubelets older than 1.25 may lag two minors only
    old = readings(train_a={"control_plane": "v1.26.15", "kubelets": {"h100-train": ["v1.23.17"]}})
    alerts = build_report(example(), old, dict(PATCHES, **{"1.26": {"version": "v1.26.15", "released": "2024-03-14"}}),
                          TODAY)["alerts"]
    assert "train-a: pool h100-train kubelets v1.23.17..v1.23.17 are out of the skew policy against the control " \
        "plane v1.26.15" in alerts


@pytest.mark.parametrize("args, message", [
    (({"nowhere": {}}, PATCHES, TODAY), r"readings: nowhere not a cell of the fleet"),
    ((None, {}, TODAY), r"latest_patches: expected a mapping of minor"),
    ((None, {"1.36": {"version": "v1.35.4", "released": "2026-01-01"}}, TODAY),
     r"v1\.35\.4 is not a release of 1\.36"),
    ((None, {"1.36": {"version": "v1.36.3"}}, TODAY), r"latest_patches\[1\.36\]: expected \{version, released\}"),
    ((None, PATCHES, "01/12/2026"), r"today: '01/12/2026' is not a date"),
])
def test_bad_input_is_refused(args, message):
    with pytest.raises(InputError, match=message):
        build_report(example(), *args)


def test_declared_versions_when_there_is_no_reading_and_the_renderings(tmp_path):
    report = build_report(example(), None, PATCHES, TODAY)
    assert {r["state"] for r in report["cells"]} == {"pending"}
    assert report["version_spread"] == {"v1.35.4": 5}
    md = markdown(report)
    assert "| train-a | ring2 | training | pending | v1.35.4 | h100-train v1.33.6..v1.33.6 (2 behind) | 89 |" in md
    page = html_page(build_report(example(), readings(inf_east={"control_plane": "<b>x</b>"}), PATCHES, TODAY))
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page  # readings are escaped
    assert page.count("<svg") == 2 and page.count('<tr class="alerting">') == 1
    first = write_files(str(tmp_path), report)
    assert first["changed"] and sorted(pathlib.Path(f).name for f in first["files"]) == [
        "fleet-report.html", "fleet-report.json", "fleet-report.md"]
    assert json.loads((tmp_path / "fleet-report.json").read_text())["fleet"] == "prod"
    assert write_files(str(tmp_path), report)["changed"] is False


# -- fed from the fleet ledger and the versions read from each cell ----------------------------------------------------
def ledger_of(**cells):
    ledger = fleet_run.new_ledger(plan_fleet(example()))
    for name, changes in cells.items():
        ledger["cells"][name.replace("_", "-")].update(changes)
    return ledger


def versions_of(*names, control_plane="v1.36.3"):
    out = {}
    for c in example()["cells"]:
        if c["name"] in names:
            out[c["name"]] = {"control_plane": control_plane,
                              "kubelets": {p["name"]: [control_plane] for p in c["pools"]}}
    return out


def every_cell():
    return [c["name"] for c in example()["cells"]]


def plan():
    return plan_fleet(example())


def test_the_ledger_gives_state_reason_and_change_record_and_the_cells_their_versions():
    ledger = ledger_of(canary_1={"state": "done", "change_record": "out/fleet/prod/logs/canary-1.log"},
                       inf_east={"state": "failed", "reason": "upgrade_wave.yml exited 2"})
    got = readings_from_ledger(plan(), ledger, versions_of(*every_cell()))
    assert got["canary-1"]["state"] == "done" and got["canary-1"]["change_record"].endswith("canary-1.log")
    assert (got["inf-east"]["state"], got["inf-east"]["reason"]) == ("failed", "upgrade_wave.yml exited 2")
    assert got["train-a"]["control_plane"] == "v1.36.3" and "unread" not in got["train-a"]
    report = build_report(example(), got, PATCHES, TODAY)
    assert {r["cell"]: r["state"] for r in report["cells"]}["inf-east"] == "failed"
    assert report["alerts"] == ["inf-east: failed (upgrade_wave.yml exited 2)"]  # a stopped fleet fails the report


def test_a_halted_cell_is_halted_with_its_conditions_and_a_soaking_ring_shows():
    ledger = ledger_of(canary_1={"state": "done"}, inf_east={"state": "done"})
    ledger["halt"] = {"ring": "ring1", "cells": ["inf-east"], "message": "fleet prod halted in ring ring1",
                      "conditions": [{"cell": "inf-east", "condition": "not_ready_nodes",
                                      "message": "inf-east: not_ready_nodes is 2 (at most 0)"},
                                     {"cell": "canary-1", "condition": "x", "message": "not this cell's"}]}
    ledger["rings"]["ring0"] = {"soak_started": "2026-12-01T10:00:00+00:00", "soak_done": None}
    got = readings_from_ledger(plan(), ledger, versions_of(*every_cell()))
    assert (got["inf-east"]["state"], got["inf-east"]["reason"]) == (
        "halted", "inf-east: not_ready_nodes is 2 (at most 0)")
    assert got["canary-1"]["state"] == "soaking"
    assert build_report(example(), got, PATCHES, TODAY)["alerts"] == [
        "inf-east: halted (inf-east: not_ready_nodes is 2 (at most 0))"]
    ledger["rings"]["ring0"]["soak_done"] = "2026-12-01T10:10:00+00:00"
    assert readings_from_ledger(plan(), ledger, versions_of(*every_cell()))["canary-1"]["state"] == "done"


def test_the_ledger_is_read_back_as_the_fleet_run_reads_it_so_an_older_target_is_not_done():
    ledger = ledger_of(**{c.replace("-", "_"): {"state": "done", "target": "v1.35.4"} for c in every_cell()})
    got = readings_from_ledger(plan(), ledger, versions_of(*every_cell(), control_plane="v1.35.4"))
    assert {r["state"] for r in got.values()} == {"pending"}  # done was the old target; this one has not started
    with pytest.raises(InputError, match="fleet ledger: not a version-1 gpufleet ledger"):
        readings_from_ledger(plan(), dict(ledger, version=999), {})


def test_a_cell_whose_versions_could_not_be_read_is_an_alert_naming_it_and_its_state():
    got = readings_from_ledger(plan(), ledger_of(train_b={"state": "done"}),
                               dict(versions_of(*every_cell()), **{"train-b": None}))
    report = build_report(example(), got, PATCHES, TODAY)
    assert report["alerts"] == ["train-b: its versions could not be read from its API (state done)"]
    assert {r["cell"]: r["control_plane"] for r in report["cells"]}["train-b"] is None
    missing = {k: v for k, v in versions_of(*every_cell()).items() if k != "train-b"}  # no entry at all
    assert readings_from_ledger(plan(), None, missing)["train-b"]["unread"] is True


def test_a_pool_without_nodes_and_a_host_without_a_node_are_alerts():
    versions = versions_of(*every_cell())
    versions["train-a"]["kubelets"] = {}  # no Node of its pool in the API
    versions["train-b"]["no_node"] = ["gpu-b7"]
    report = build_report(example(), readings_from_ledger(plan(), None, versions), PATCHES, TODAY)
    pools = [p["name"] for c in example()["cells"] if c["name"] == "train-a" for p in c["pools"]]
    assert report["alerts"] == [
        "train-a: pool(s) %s of the fleet have no kubelet read from the cell's Nodes" % ", ".join(sorted(pools)),
        "train-b: inventory host(s) gpu-b7 have no Node in the cell's API"]


def test_without_a_ledger_cells_at_their_target_are_done_and_the_others_pending():
    got = readings_from_ledger(plan(), None, versions_of(*every_cell()))
    expected = {name: "done" if c["at_target"] else "pending" for name, c in plan()["cells"].items()}
    assert {name: r["state"] for name, r in got.items()} == expected
    assert "pending" in expected.values()


@pytest.mark.parametrize("ledger, versions, message", [
    ({"version": 1, "fleet": "other", "cells": {}}, {}, "fleet ledger: it belongs to fleet other, not prod"),
    ("not a ledger", {}, "fleet ledger: not a version-1 gpufleet ledger"),
    (None, {"nowhere-1": {"control_plane": "v1.36.3"}}, "versions: nowhere-1 not a cell of the fleet prod"),
])
def test_a_ledger_of_another_fleet_or_versions_of_a_stranger_are_refused(ledger, versions, message):
    with pytest.raises(InputError, match=message):
        readings_from_ledger(plan(), ledger, versions)


def test_each_disabled_halt_is_shown_with_its_reason():
    fleet = example()
    fleet["policy"]["halt"] = {"min_gpu_allocatable_fraction": 0, "disabled": {
        "min_gpu_allocatable_fraction": "CHG-1234: pool h100 is being repartitioned to MIG <b>"}}
    report = build_report(fleet, readings(), PATCHES, TODAY)
    assert report["disabled_halts"] == [{"threshold": "min_gpu_allocatable_fraction", "value": 0,
                                         "reason": "CHG-1234: pool h100 is being repartitioned to MIG <b>"}]
    assert not report["alerts"]
    assert "## Halts switched off\n\n- min_gpu_allocatable_fraction: 0 (CHG-1234: pool h100 is being repartitioned " \
           "to MIG <b>)" in markdown(report)
    page = html_page(report)
    assert '<ul id="disabled-halts"><li>min_gpu_allocatable_fraction: 0 (CHG-1234: pool h100 is being repartitioned ' \
           'to MIG &lt;b&gt;)</li></ul>' in page
    plain = build_report(example(), readings(), PATCHES, TODAY)
    assert plain["disabled_halts"] == [] and '<ul id="disabled-halts"><li>none</li></ul>' in html_page(plain)
    assert "Halts switched off" not in markdown(plain)
