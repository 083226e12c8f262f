"""The fleet run on the lab's three fleet cells (lab/lab.yml `fleet`, `bin/lab fleet`; playbooks/fleet.yml), each
a small cell of its own ring: ring0 the canary cell, ring1 the inference cell, ring2 the training cell with its
gang. Every cell upgrades through its own inventory with its own upgrade_wave.yml; halts come from the cells' own
API (apiserver /metrics, Nodes, JobSets), their NCCL probe host and their inference service.

The story: a fleet whose cell points at another cell's inventory is refused before anything moves; then NCCL going
slow on the inference cell during ring1's soak halts the fleet with the cell, the condition and the readings named,
ring0 done and ring2 untouched; a rerun with the fault still there stays halted, and the fleet report shows it;
once it is cleared the same command resumes from the ledger and soaks ring1 again, holding there with
gpufleet_fleet_until_ring=ring1 (as an AWX rollout's node); the next run upgrades ring2 and completes; a last run
changes nothing.

Needs the fleet cells (they run beside the other lab tests' cells); each is reset to `from` first when it is not
there."""
from __future__ import annotations

import datetime
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
import yaml

from tests.lab import conftest
from tests.lab.conftest import ROOT

from gpufleet_lab import config as lab_config

pytestmark = pytest.mark.lab
BIN = pathlib.Path(sys.executable).parent


def lab_cli(cell, *args):
    return conftest.lab_cli(*args, cell=cell)


def versions(cell):
    return set(json.loads(lab_cli(cell, "status").stdout)["apiserver_versions"].values())


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The fleet cells up on `from`, the fleet file `bin/lab fleet` writes, and the names of the cells by ring."""
    cells = lab_config.fleet_cells()
    for cell in cells:
        cfg = lab_config.load(cell=cell)
        lab_cli(cell, "up")
        if versions(cell) != {cfg.from_version}:
            lab_cli(cell, "reset")
            lab_cli(cell, "up")
    doc = yaml.safe_load(lab_cli(cells[0], "fleet").stdout)
    assert [c["kind"] for c in doc["gpufleet_fleet"]["cells"]] == ["canary", "inference", "training"]
    rings = doc["gpufleet_fleet"]["policy"]["rings"]
    rings[1]["soak_seconds"] = 30  # ring1's soak: three checks, so the fault below lands before the last
    path = tmp_path_factory.mktemp("fleet") / "fleet.yml"
    path.write_text(yaml.safe_dump(doc))
    yield path, doc["gpufleet_fleet"]
    for cell in cells:
        for host in lab_config.load(cell=cell).gpu_hosts:
            lab_cli(cell, "clear", host)


def run_fleet(fleet_file, out, *extra, background=False):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", GPUFLEET_CHANGE_RECORD_DIR=str(out / "change-records"),
               PATH="%s:%s" % (BIN, os.environ["PATH"]))
    argv = [str(BIN / "ansible-playbook"), "playbooks/fleet.yml", "-e", "@%s" % fleet_file,
            "-e", "gpufleet_out_dir=%s" % out, *extra]
    log = open(out / ("fleet-%d.log" % time.time_ns()), "w+")
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    if background:
        return proc, log
    return finish(proc, log)


def finish(proc, log, timeout=3000):
    started = time.time()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # the cells' async waves end with their own timeout (the fleet's cell_timeout_seconds)
        raise
    log.seek(0)
    output = log.read()
    print("fleet.yml: rc=%d (%s)" % (proc.returncode, log.name))
    return proc.returncode, output, started


def report_fleet_while_halted(fleet_file, spec, out, probe):
    canary, inference, training = (c["name"] for c in spec["cells"])
    target, before = spec["policy"]["target"], spec["cells"][2]["control_plane"]
    old_minor, new_minor = (".".join(v.lstrip("v").split(".")[:2]) for v in (before, target))
    newer = "v%s.%d" % (old_minor, int(before.split(".")[2]) + 1)
    today = datetime.date.today()
    patches = out / "latest-patches.yml"
    patches.write_text(yaml.safe_dump({"gpufleet_fleet_latest_patches": {
        old_minor: {"version": newer, "released": str(today - datetime.timedelta(days=60))},
        new_minor: {"version": target, "released": str(today - datetime.timedelta(days=5))}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               GPUFLEET_CHANGE_RECORD_DIR=str(out / "change-records"), PATH="%s:%s" % (BIN, os.environ["PATH"]))
    started = time.time()
    proc = subprocess.run([str(BIN / "ansible-playbook"), "playbooks/fleet_report.yml", "-e", "@%s" % fleet_file,
                           "-e", "@%s" % patches, "-e", "gpufleet_out_dir=%s" % out], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=900)
    print("fleet report while halted in %.0f s" % (time.time() - started))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-6000:]
    said = " ".join(output.split())  # the YAML callback folds long lines
    assert "fleet lab: 2 alert(s): %s: halted (%s: nccl_busbw_gbps fell from" % (inference, inference) in said, \
        output[-6000:]
    assert "%s: %s is 60 days behind %s" % (training, before, newer) in said
    report = json.loads((out / "fleet" / "lab" / "report" / "fleet-report.json").read_text())
    rows = {r["cell"]: r for r in report["cells"]}
    assert rows[inference]["state"] == "halted" and "nccl_busbw_gbps" in rows[inference]["reason"]
    assert probe in rows[inference]["reason"]
    assert rows[inference]["control_plane"] == target and len(rows[inference]["alerts"]) == 1
    assert rows[canary]["state"] == "done" and rows[canary]["control_plane"] == target and not rows[canary]["alerts"]
    assert rows[training]["state"] == "pending" and rows[training]["control_plane"] == before
    for cell in (canary, inference, training):  # every pool of the cell's inventory, each kubelet read from its Node
        cfg = lab_config.load(cell=cell)
        pools = {p["pool"]: p for p in rows[cell]["pools"]}
        assert "not-in-inventory" not in pools
        assert sum(p["nodes"] for p in pools.values()) == len(cfg.hosts), pools
    assert {p["oldest"] for p in rows[training]["pools"]} == {before}
    assert report["version_spread"] == {before: 1, target: 2}
    html = (out / "fleet" / "lab" / "report" / "fleet-report.html").read_text()
    assert "halted" in html and training in html


def ledger(out):
    return json.loads((out / "fleet" / "lab" / "ledger.json").read_text())


def test_a_cell_with_another_cells_inventory_is_refused_before_anything_moves(fleet, tmp_path):
    _, spec = fleet
    wrong = dict(spec, cells=[dict(c) for c in spec["cells"]])
    wrong["cells"][0]["inventory"] = wrong["cells"][1]["inventory"]  # ring0's cell, pointed at ring1's inventory
    fleet_file = tmp_path / "wrong.yml"
    fleet_file.write_text(yaml.safe_dump({"gpufleet_fleet": wrong}))
    started = time.time()
    rc, out, _ = run_fleet(fleet_file, tmp_path)
    print("wrong inventory refused in %.0f s" % (time.time() - started))
    first = spec["cells"][0]["name"]
    assert rc != 0
    assert "the inventory is cell %s's (gpufleet_cluster_name), not %s's" % (spec["cells"][1]["name"], first) in out
    assert "cell(s) %s could not be read whole before the upgrade, so the batch was not changed" % first in out
    assert ledger(tmp_path)["cells"][first]["state"] == "pending"
    assert not (tmp_path / "fleet" / "lab" / "ledger.json.lock").exists(), "a failed run kept its lock"
    for cell in spec["cells"]:
        assert versions(cell["name"]) == {cell["control_plane"]}, "%s moved" % cell["name"]


def test_a_halt_in_ring1s_soak_stops_the_fleet_before_ring2_then_it_resumes_and_upgrades_every_ring(fleet, tmp_path):
    path, spec = fleet
    canary, inference, training = (c["name"] for c in spec["cells"])
    target, before = spec["policy"]["target"], spec["cells"][2]["control_plane"]
    began = time.time()
    proc, log = run_fleet(path, tmp_path, background=True)
    # a second run of the same fleet while this one holds the ledger is refused, naming the lock, and leaves it
    lock_file = tmp_path / "fleet" / "lab" / "ledger.json.lock"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not lock_file.exists():
        time.sleep(0.2)
    assert lock_file.exists(), "the fleet run took no lock:\n" + open(log.name).read()[-4000:]
    held = json.loads(lock_file.read_text())
    rc, out, _ = run_fleet(path, tmp_path)
    assert rc != 0 and "fleet lab is locked by another run: lock %s, taken by %s" % (held["id"], held["holder"]) \
        in out, out[-3000:]
    assert json.loads(lock_file.read_text()) == held and proc.poll() is None
    # wait for ring1's soak: ring0 done and soaked, the inference cell upgraded and judged clean after its wave
    deadline = time.time() + 2400
    while time.time() < deadline and proc.poll() is None:
        state = ledger(tmp_path) if (tmp_path / "fleet" / "lab" / "ledger.json").exists() else None
        if state and state["rings"]["ring1"]["soak_started"]:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the fleet ended before ring1's soak:\n" + open(log.name).read()[-6000:]
    print("ring0 (%s) soaked, ring1 (%s) upgraded and judged clean, soak started after %.0f s" % (
        canary, inference, time.time() - began))
    probe = spec["cells"][1]["nccl_hosts"][0]
    lab_cli(inference, "fault", probe, "nccl-slow")  # the inference cell's fabric: all-reduce 30 % slower
    rc, out, _ = finish(proc, log)
    print("halted %.0f s after the start" % (time.time() - began))
    assert rc != 0
    said = " ".join(out.split())
    assert "fleet lab halted in ring ring1: " in said, out[-6000:]
    assert "%s: nccl_busbw_gbps fell from" % inference in said
    state = ledger(tmp_path)
    assert state["halt"]["cells"] == [inference] and state["halt"]["ring"] == "ring1"
    (cond,) = [c for c in state["halt"]["conditions"] if c["condition"] == "nccl_busbw_gbps"]
    assert cond["cell"] == inference and cond["after"] < 0.8 * cond["before"], cond
    assert state["rings"]["ring0"]["soak_done"] and not state["rings"]["ring2"]["soak_started"]
    assert {c: (e["state"], e["version"]) for c, e in state["cells"].items() if c != training} == {
        canary: ("done", target), inference: ("done", target)}
    assert state["cells"][training]["state"] == "pending"
    assert versions(canary) == versions(inference) == {target}
    assert versions(training) == {before}, "ring2 moved during ring1's halt"

    # the fault is still there: the fleet stays halted, ring2 untouched
    started = time.time()
    rc, out, _ = run_fleet(path, tmp_path)
    print("still halted, refused in %.0f s" % (time.time() - started))
    assert rc != 0 and "fleet lab halted in ring ring1: %s: nccl_busbw_gbps" % inference in " ".join(out.split())
    assert ledger(tmp_path)["cells"][training]["state"] == "pending"

    # the fleet report from the ledger and the cells' versions read now: the inference cell halted on the target
    # and ring2 pending on `from` with a newer patch of `from` out for 60 days - two alerts that fail the report's
    # run
    report_fleet_while_halted(path, spec, tmp_path, probe)

    # cleared: the same command resumes from the ledger, soaks ring1 again, upgrades ring2, completes
    lab_cli(inference, "clear", probe)
    # as an AWX rollout's node (playbooks/awx_configure_fleet.yml): resume, soak ring1 again, hold after it
    started = time.time()
    rc, out, _ = run_fleet(path, tmp_path, "-e", "gpufleet_fleet_until_ring=ring1")
    print("resumed, ring1 soaked again and held in %.0f s" % (time.time() - started))
    assert rc == 0, out[-8000:]
    assert "every ring up to ring1 of fleet lab is done and soaked; ring ring2 waits" in out
    state = ledger(tmp_path)
    assert state["halt"] is None and state["rings"]["ring1"]["soak_done"]
    assert not state["rings"]["ring2"]["soak_started"]
    assert state["cells"][training]["state"] == "pending"
    assert versions(training) == {before}, "ring2 moved past its hold"
    # past the approval: the same command, every ring
    started = time.time()
    rc, out, _ = run_fleet(path, tmp_path)
    print("upgraded and soaked ring2 in %.0f s" % (time.time() - started))
    assert rc == 0, out[-8000:]
    assert "every ring of fleet lab is done and soaked" in out
    state = ledger(tmp_path)
    assert state["halt"] is None and state["last_halt"]["cells"] == [inference]
    assert {c: (e["state"], e["version"]) for c, e in state["cells"].items()} == {
        canary: ("done", target), inference: ("done", target), training: ("done", target)}
    assert all(r["soak_done"] for r in state["rings"].values())
    assert versions(training) == {target}
    wave_log = (tmp_path / "fleet" / "lab" / "logs" / ("%s.log" % training)).read_text()
    assert "== gpufleet fleet: %s to %s" % (training, target) in wave_log and "failed=0" in wave_log
    print("the whole fleet story in %.0f s" % (time.time() - began))

    # done: a last run starts no wave and leaves the ledger as it was
    logs = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "fleet" / "lab" / "logs").iterdir()}
    started = time.time()
    rc, out, _ = run_fleet(path, tmp_path)
    print("complete fleet rerun in %.0f s" % (time.time() - started))
    assert rc == 0 and "every ring of fleet lab is done and soaked" in out
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "fleet" / "lab" / "logs").iterdir()} == logs
    assert ledger(tmp_path) == state
