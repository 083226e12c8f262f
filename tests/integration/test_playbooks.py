"""The main job and the collection as users run them: ansible-playbook on the example inventory, and the built
collection installed elsewhere (as AWX does) with its modules called by FQCN."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys


ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent


def ansible(tool, *args, cwd=ROOT, env_extra=None, check=False):
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", PATH="%s:%s" % (BIN, os.environ["PATH"]))
    env.update(env_extra or {})
    env = {k: v for k, v in env.items() if v is not None}  # None: unset it
    proc = subprocess.run([str(BIN / tool), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (
            tool, proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
    return proc


def plan(tmp_path, *extra, inventory="inventories/example/hosts.yml", env_records=None):
    out = tmp_path / "out"
    env = {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
           "GPUFLEET_CHANGE_RECORD_DIR": env_records or str(tmp_path / "records")}
    proc = ansible("ansible-playbook", "playbooks/plan.yml", "-i", inventory, "-e", "gpufleet_out_dir=%s" % out,
                   *extra, env_extra=env)
    return proc, out / "plan.json"


def test_change_record_follows_gpufleet_out_dir_without_a_cell_task(tmp_path):
    """A playbook that does not read the cell (etcd_backup, awx_configure, this test's) still records into
    gpufleet_out_dir when the inventory or -e sets it."""
    env = {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "GPUFLEET_CHANGE_RECORD_DIR": None, "GPUFLEET_OUT_DIR": None,
           "ANSIBLE_CALLBACKS_ENABLED": "gpufleet.upgrade.change_record"}
    ansible("ansible-playbook", "tests/integration/playbooks/change_record.yml", "-e",
            "fixtures=%s" % (ROOT / "tests" / "fixtures"), "-e", "gpufleet_out_dir=%s" % (tmp_path / "o"),
            env_extra=env)
    assert len(list((tmp_path / "o" / "change-records").glob("*-change_record.yml.json"))) == 1


def test_plan_by_fqcn_writes_to_the_working_directory(tmp_path):
    """As a Galaxy user runs it: the playbook by its FQCN from another directory, no output directory given - the
    plan and the change record land in ./out of that directory, nothing inside the collection."""
    def outputs():  # what a plan run would write into the checkout (other tests write out/fuzz in parallel)
        out = ROOT / "out"
        return {p: p.stat().st_mtime for p in [out / "plan.json", *out.glob("change-records/*plan.yml*")]
                if p.exists()}

    before = outputs()
    env = {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "GPUFLEET_CHANGE_RECORD_DIR": None,
           "GPUFLEET_OUT_DIR": None}
    proc = ansible("ansible-playbook", "gpufleet.upgrade.plan", "-i", str(ROOT / "inventories/example/hosts.yml"),
                   cwd=tmp_path, env_extra=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["target"] == "v1.36.1"
    records = list((tmp_path / "out" / "change-records").glob("*-plan.yml.json"))
    assert len(records) == 1, sorted(p.name for p in tmp_path.rglob("*"))
    assert outputs() == before


def test_plan_example_cell(tmp_path):
    proc, out = plan(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    doc = json.loads(out.read_text())
    assert doc["target"] == "v1.36.1" and doc["skew"]["control_plane_path"] == ["v1.36.1"]
    waves = doc["waves"]
    assert [w["kind"] for w in waves][:4] == ["control-plane"] * 3 + ["canary"]
    assert sorted(n for w in waves for n in w["nodes"]) == sorted(
        ["cp-1", "cp-2", "cp-3"] + ["gpu-a%d" % i for i in range(1, 5)] + ["gpu-b%d" % i for i in range(1, 5)]
        + ["inf-a1", "inf-b1"])
    for w in waves:  # the DR pair chat-api (inf-a1, inf-b1) never upgrades together
        assert not {"inf-a1", "inf-b1"} <= set(w["nodes"])
    assert doc["keep_cordoned"] == ["gpu-a4"]
    assert doc["pools"]["h100-train"]["baseline"]["gpu"]["count"] == 8
    assert doc["run_id"] == "gpufleet-cell1-v1.36.1"
    # a second run changes nothing
    again, _ = plan(tmp_path)
    assert again.returncode == 0 and "changed=0" in again.stdout


def test_plan_refuses_a_skipped_minor_then_plans_it_when_asked(tmp_path):
    proc, out = plan(tmp_path, "-e", "gpufleet_target_version=v1.37.0")
    assert proc.returncode != 0 and not out.exists()
    assert "the control plane never skips a minor" in proc.stdout and "Upgrade to v1.36 first" in proc.stdout
    proc, out = plan(tmp_path, "-e", "gpufleet_target_version=v1.37.0", "-e", "gpufleet_allow_multi_hop=true",
                     "-e", "gpufleet_allow_unsupported_target=true")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert json.loads(out.read_text())["skew"]["control_plane_path"] == ["v1.36", "v1.37.0"]


def test_plan_refuses_downgrade_before_anything(tmp_path):
    proc, out = plan(tmp_path, "-e", "gpufleet_target_version=v1.34.2")
    assert proc.returncode != 0 and not out.exists()
    assert "downgrades are refused" in proc.stdout


def test_plan_rejects_an_inventory_without_required_groups(tmp_path):
    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  hosts:\n    lonely: {ansible_host: lonely.example.invalid}\n")
    proc, out = plan(tmp_path, inventory=str(inv))
    assert proc.returncode != 0 and not out.exists()
    assert "the inventory needs the groups kube_control_plane, etcd and gpu_nodes" in proc.stdout


def test_plan_rejects_a_broken_baseline(tmp_path):
    inv_dir = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "example", inv_dir)
    baseline = inv_dir / "baselines" / "l40s-infer.yml"
    baseline.write_text(baseline.read_text().replace("count: 4", "count: four"))
    proc, out = plan(tmp_path, inventory=str(inv_dir / "hosts.yml"))
    assert proc.returncode != 0 and not out.exists()
    assert "l40s-infer.yml: field gpu.count: expected an integer, got str ('four')" in proc.stdout


def test_built_collection_installs_and_runs_by_fqcn(tmp_path):
    build = ansible("ansible-galaxy", "collection", "build", "--output-path", str(tmp_path), str(ROOT), check=True)
    (artifact,) = tmp_path.glob("gpufleet-upgrade-*.tar.gz")
    assert "Created collection" in build.stdout
    dest = tmp_path / "installed"
    # Install from outside the checkout, so the checkout's own copy of the collection is not in sight.
    isolated = {"ANSIBLE_CONFIG": str(tmp_path / "none.cfg")}
    ansible("ansible-galaxy", "collection", "install", "--no-deps", "--force", "-p", str(dest), str(artifact),
            cwd=tmp_path, env_extra=isolated, check=True)
    installed = dest / "ansible_collections" / "gpufleet" / "upgrade"
    assert (installed / "plugins" / "action" / "controller.py").is_file()
    assert not (installed / "collections").exists() and not (installed / ".ansible").exists()
    # Run from a directory without ansible.cfg: the module must resolve from the installed collection only, and its
    # action through the installed meta/runtime.yml's routing (-vvvv prints where it ran).
    work = tmp_path / "elsewhere"
    work.mkdir()
    args = json.dumps({"components": [{"component": "kube-apiserver", "node": "cp-1", "version": "v1.35.0"},
                                      {"component": "kubelet", "node": "g1", "version": "v1.33.0"}],
                       "target": "v1.36.1"})
    env = {"ANSIBLE_COLLECTIONS_PATH": str(dest), "ANSIBLE_CONFIG": str(work / "none.cfg")}
    proc = ansible("ansible", "localhost", "-m", "gpufleet.upgrade.version_skew", "-a", args, "-o", "-vvvv",
                   cwd=work, env_extra=env, check=True)
    assert "gpufleet: gpufleet.upgrade.version_skew runs in the worker process" in proc.stdout
    result = json.loads(proc.stdout.split("localhost | SUCCESS => ", 1)[1].splitlines()[0])
    assert result["plan"]["control_plane_path"] == ["v1.36.1"] and result["plan"]["node_drains"] == 1
    assert result["plan"]["pools"][0]["skip_level"] is True
    doc = ansible("ansible-doc", "gpufleet.upgrade.dcgm_diag", cwd=work, env_extra=env, check=True)
    assert str(installed) in doc.stdout


def test_check_mode_from_checkout():
    args = {"components": [{"component": "kube-apiserver", "node": "cp", "version": "v1.35.0"}], "target": "v1.36.1"}
    proc = ansible("ansible", "localhost", "-m", "gpufleet.upgrade.version_skew", "-a", json.dumps(args), "--check",
                   "-o", env_extra={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}, check=True)
    assert "localhost | SUCCESS => " in proc.stdout
    assert json.loads(proc.stdout.split(" => ", 1)[1])["changed"] is False


def test_change_record_callback(tmp_path):
    env = {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_CALLBACKS_ENABLED": "gpufleet.upgrade.change_record",
           "GPUFLEET_CHANGE_RECORD_DIR": str(tmp_path / "records"),
           "AWX_ISOLATED_DATA_DIR": str(tmp_path / "artifacts")}  # as ansible-runner sets it for a job
    proc = ansible("ansible-playbook", "tests/integration/playbooks/change_record.yml", "-e",
                   "fixtures=%s" % (ROOT / "tests" / "fixtures"), env_extra=env)
    assert proc.returncode != 0  # the gate failed the run
    (record_json,) = (tmp_path / "records").glob("*-change_record.yml.json")
    record = json.loads(record_json.read_text())
    assert record["objective"] == "rehearse the change record" and record["outcome"] == "failed"
    assert record["version_diff"] == {"from": "v1.35.3", "to": "v1.36.1", "control_plane_path": ["v1.36.1"]}
    assert record["canary_scope"] == ["localhost"]
    gpu_count = next(g for g in record["gates"] if g["check"] == "gpu_count")
    assert (gpu_count["measured"], gpu_count["baseline"], gpu_count["passed"]) == (7, 8, False)
    assert record["failures"][0]["message"].startswith("gpu_health gate failed: gpu-a1: check gpu_count: measured 7")
    assert record["rollback_triggers"]
    markdown = record_json.with_suffix(".md").read_text()
    assert "| localhost | gpu_count | gpu-a1 | 7 | 8 | **FAIL** |" in markdown
    assert record["kubelet_config"] == [{"pool": "h100-train", "node": "gpu-a1", "changes": {
        "cpuManagerPolicy": {"before": "none", "after": "static"}}}]
    assert "## Kubelet configuration, per pool\n\n- h100-train (1 node(s) compared): changed:\n" \
           '  - `cpuManagerPolicy`: "none" -> "static" on gpu-a1\n' in markdown
    for text in (record_json.read_text(), markdown):
        assert "hunter2-secret-value" not in text
    (used,) = record["break_glass"]
    assert (used["event"], used["action"], used["nodes"], used["stage"]) == (
        "used", "disable_eviction", ["gpu-a1", "gpu-a2"], "drain")
    assert used["operator"] and used["time"]
    assert "## Break glass" in markdown
    assert "used by %s: disable_eviction on gpu-a1, gpu-a2" % used["operator"] in markdown
    copy = tmp_path / "artifacts" / "gpufleet" / "change-records" / record_json.name
    assert copy.read_text() == record_json.read_text()  # handed to the job's artifacts too
    for path in (record_json, record_json.with_suffix(".md"), copy, copy.with_suffix(".md")):
        assert path.stat().st_mode & 0o777 == 0o600, path  # owner only
    assert (tmp_path / "records").stat().st_mode & 0o777 == 0o700


def test_kubeadm_upgrade_refuses_apply_arguments_that_move_etcd(tmp_path):
    """The role's UpgradeConfiguration always says etcdUpgrade false; an --etcd-upgrade in
    kubeadm_upgrade_apply_args, or etcdUpgrade in kubeadm_upgrade_configuration, is refused before any host is read,
    naming it (localhost stands in for the host)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("kube_control_plane:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    proc = ansible("ansible-playbook", "-i", str(inventory), "tests/integration/playbooks/kubeadm_etcd_upgrade.yml",
                   env_extra={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    assert proc.returncode != 0
    assert "extra kubeadm argument --etcd-upgrade=true: kubeadm takes no such flag beside --config" in \
        " ".join(proc.stdout.split()), proc.stdout[-3000:]
    assert "Read this host's apiserver version" not in proc.stdout
    # nor may the configuration say it
    field = ansible("ansible-playbook", "-i", str(inventory), "tests/integration/playbooks/kubeadm_etcd_upgrade.yml",
                    "-e", json.dumps({"kubeadm_upgrade_apply_args": [],
                                      "kubeadm_upgrade_configuration": {"node": {"etcdUpgrade": True}}}),
                    env_extra={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    assert field.returncode != 0
    assert "kubeadm_upgrade_configuration.node.etcdUpgrade is set; remove it" in " ".join(field.stdout.split())
    assert "Read this host's apiserver version" not in field.stdout
    # other apply arguments pass the check: the run goes on to read the (absent) apiserver
    other = ansible("ansible-playbook", "-i", str(inventory), "tests/integration/playbooks/kubeadm_etcd_upgrade.yml",
                    "-e", json.dumps({"kubeadm_upgrade_apply_args": ["--v=5"]}),
                    env_extra={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    assert "Read this host's apiserver version" in other.stdout, other.stdout[-3000:]


def test_change_record_names_the_runs_objective_not_its_first_stages(tmp_path):
    env = {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "GPUFLEET_CHANGE_RECORD_DIR": str(tmp_path / "records")}
    proc = ansible("ansible-playbook", "tests/integration/playbooks/change_record_stages.yml", env_extra=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    (record_json,) = (tmp_path / "records").glob("*-change_record_stages.yml.json")
    record = json.loads(record_json.read_text())
    assert record["objective"] == "rehearse a run of stages"
    assert [p["objective"] for p in record["plays"]] == ["the first stage", "the second stage"]
    assert "- Objective: rehearse a run of stages" in record_json.with_suffix(".md").read_text()


def test_change_record_takes_each_hosts_wave_from_add_host(tmp_path):
    env = {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "GPUFLEET_CHANGE_RECORD_DIR": str(tmp_path / "records")}
    proc = ansible("ansible-playbook", "tests/integration/playbooks/change_record_waves.yml", "-e",
                   "fixtures=%s" % (ROOT / "tests" / "fixtures"), env_extra=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    (record_json,) = (tmp_path / "records").glob("*-change_record_waves.yml.json")
    record = json.loads(record_json.read_text())
    hosts = {h: e for p in record["plays"] for h, e in p["hosts"].items()}
    assert hosts["node-canary"]["wave"] == "1 (canary: rs-a)" and hosts["node-rest"]["wave"] == "2 (domain: rs-b)"
    assert record["canary_scope"] == ["node-canary"]
    waves = {g["host"]: g["wave"] for g in record["gates"]}
    assert waves == {"node-canary": "1 (canary: rs-a)", "node-rest": "2 (domain: rs-b)"}
    assert "| One play, a wave per batch | 1 (canary: rs-a) | yes | node-canary |" in record_json.with_suffix(
        ".md").read_text()


def _add_host_waves(stdout):
    """The waves node_pool.yml put its hosts in: its add_host results, from the json callback."""
    doc, _ = json.JSONDecoder().raw_decode(stdout[stdout.index("{"):])
    for play in doc["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == "Put the GPU nodes in wave order":
                result = next(iter(task["hosts"].values()))
                waves = {}
                for item in result["results"]:
                    added = item["add_host"]
                    waves.setdefault(added["host_vars"]["gpufleet_wave"], []).append(added["host_name"])
                return waves
    raise AssertionError("node_pool.yml did not put hosts in waves")


def test_plan_and_node_pool_plan_the_same_waves(tmp_path):
    # node_pool.yml's planning part runs alone with --tags plan (no cluster is touched); plan.yml writes its plan
    proc, out = plan(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    planned = {w["label"]: w["nodes"] for w in json.loads(out.read_text())["gpu_waves"]}
    pool = ansible("ansible-playbook", "playbooks/node_pool.yml", "-i", "inventories/example/hosts.yml",
                   "--tags", "plan", env_extra={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
                                                "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    assert pool.returncode == 0, pool.stdout[-3000:]
    assert _add_host_waves(pool.stdout) == planned
    assert list(planned) == ["1 (canary: rs-a)", "2 (domain: rs-a)", "3 (domain: rs-b)"]


def test_every_spelling_of_the_target_plans_and_records_the_same(tmp_path):
    docs, records = [], []
    for spelling in ("1.36.1", "v1.36.1"):
        run_dir = tmp_path / spelling
        run_dir.mkdir()
        proc, out = plan(run_dir, "-e", "gpufleet_target_version=%s" % spelling,
                         env_records=str(run_dir / "records"))
        assert proc.returncode == 0, proc.stdout[-3000:]
        docs.append(json.loads(out.read_text()))
        (record,) = (run_dir / "records").glob("*-plan.yml.json")
        records.append(json.loads(record.read_text()))
    assert docs[0] == docs[1] and docs[0]["target"] == "v1.36.1" and docs[0]["run_id"] == "gpufleet-cell1-v1.36.1"
    assert [(r["target_version"], r["run_id"]) for r in records] == [("v1.36.1", "gpufleet-cell1-v1.36.1")] * 2


def test_wave_playbooks_refuse_a_limit_before_anything(tmp_path):
    proc = ansible("ansible-playbook", "playbooks/node_pool.yml", "-i", "inventories/example/hosts.yml",
                   "--limit", "gpu-a1", env_extra={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    assert proc.returncode != 0
    assert "--limit gpu-a1: the upgrade plays plan whole failure domains" in proc.stdout


def test_change_records_of_runs_finishing_in_the_same_second_are_all_kept(tmp_path):
    from ansible_collections.gpufleet.upgrade.plugins.callback import change_record

    bases = [change_record._claim(str(tmp_path), "20261201T020000Z", "preflight.yml") for _ in range(3)]
    assert [pathlib.Path(b).name for b in bases] == [
        "20261201T020000Z-preflight.yml", "20261201T020000Z.2-preflight.yml", "20261201T020000Z.3-preflight.yml"]
    assert sorted(p.name for p in tmp_path.glob("*-preflight.yml.json")) == [pathlib.Path(b).name + ".json"
                                                                            for b in bases]  # newest sorts last
    assert {oct(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()} == {"0o600"}


def test_fleet_report_by_fqcn_from_another_directory_fails_closed_on_cells_it_cannot_read(tmp_path):
    """The fleet report as a Galaxy user runs it, from their own directory: the fleet's relative inventories and the
    default ./out are that directory's (fleet_plan's action plugin), not the collection's playbooks/; a cell whose
    inventory cannot be read is an alert naming it, and the report is still written for the others."""
    patches = tmp_path / "patches.yml"
    patches.write_text("gpufleet_fleet_latest_patches: {'1.36': {version: v1.36.3, released: '2026-07-22'}}\n")
    # the operator's own ansible.cfg in their directory, found by the fleet's child runs only if they start there
    (tmp_path / "ansible.cfg").write_text("[defaults]\ncollections_path = %s\n" % (ROOT / "collections"))
    env = {"ANSIBLE_CONFIG": None, "GPUFLEET_CHANGE_RECORD_DIR": None, "GPUFLEET_OUT_DIR": None}
    empty = tmp_path / "none.yml"  # not the lab's inventory (ansible.cfg's default): the fleet names its cells'
    empty.write_text("all: {}\n")
    args = ["gpufleet.upgrade.fleet_report", "-i", str(empty), "-e", "@%s" % (ROOT / "docs/fleet-example.yml"),
            "-e", "@%s" % patches]
    first = ansible("ansible-playbook", *args, cwd=tmp_path, env_extra=env)  # no ledger: refused, no cell read
    assert first.returncode != 0 and "no fleet ledger at %s/out/fleet/prod/ledger.json" % tmp_path in " ".join(
        first.stdout.split())
    assert not (tmp_path / "out" / "fleet" / "prod" / "report").exists()
    proc = ansible("ansible-playbook", "gpufleet.upgrade.fleet_report", "-i", str(empty),
                   "-e", "@%s" % (ROOT / "docs/fleet-example.yml"),
                   "-e", "@%s" % patches, "-e", "gpufleet_fleet_never_ran=true", cwd=tmp_path, env_extra=env)
    assert proc.returncode != 0
    report = json.loads((tmp_path / "out" / "fleet" / "prod" / "report" / "fleet-report.json").read_text())
    assert report["alerts"] == ["%s: its versions could not be read from its API (state %s)" % (r["cell"], r["state"])
                                for r in report["cells"]]
    # the cells' inventories were looked for where it started, and each refused by name
    said = " ".join(proc.stdout.split())  # the YAML callback folds long lines
    assert "the inventory (%s) has no kube_control_plane hosts" % (tmp_path / "inventories" / "canary-1") in said
    assert not (ROOT / "playbooks" / "out").exists()
