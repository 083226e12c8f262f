"""Each module end to end through AnsibleModule: argument spec, tool execution (run_command patched to replay a
fixture, so the command line is checked too), check mode, and the failure message a user sees."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpufleet.upgrade.plugins.modules import (
    addon_support, awx_definitions, baseline_info, dcgm_diag, etcd_status, fleet_ledger, fleet_plan, fleet_report,
    gpu_health, kubeadm_plan, nccl_allreduce, node_gate, removed_apis, version_skew)
from tests.conftest import pool_baseline, FIXTURES, fixture_text


def ok(text: str):
    return (0, text, "")


COMPONENTS = [
    {"component": "kube-apiserver", "node": "cp-1", "version": "v1.33.5"},
    {"component": "kubelet", "node": "gpu-a1", "version": "v1.33.5", "pool": "train"},
]


def test_version_skew(run):
    out = run(version_skew, {"components": COMPONENTS, "target": "v1.34.2", "today": "2026-11-30"})
    assert not out.failed and out.result["changed"] is False
    assert out.result["plan"]["control_plane_path"] == ["v1.34.2"]
    assert out.result["support"]["current"]["status"] == "out-of-support"
    fail = run(version_skew, {"components": COMPONENTS, "target": "v1.35.0"})
    assert fail.failed and fail.result["error_type"] == "PolicyError" and "Upgrade to v1.34 first" in fail.result["msg"]
    bad = run(version_skew, {"components": COMPONENTS, "target": "v1.34.2", "today": "30/11/2026"})
    assert bad.failed and bad.result["msg"] == "today: '30/11/2026' is not a date; use YYYY-MM-DD"
    violating = COMPONENTS + [{"component": "kubelet", "node": "gpu-b1", "version": "v1.34.0"}]
    out = run(version_skew, {"components": violating, "target": "v1.34.2"})
    assert out.failed and "already out of the version-skew policy" in out.result["msg"]
    assert out.result["violations"][0]["node"] == "gpu-b1"


def test_kubeadm_plan_runs_kubeadm_json(run):
    out = run(kubeadm_plan, {"target": "v1.36.3"},
              {"upgrade plan v1.36.3 -o json": ok(fixture_text("kubeadm", "real-1.35.4-plan-v1.36.3.json"))})
    # the target named: kubeadm plans for it and never looks up the latest release on the internet
    assert out.result["_calls"] == [["/usr/bin/kubeadm", "upgrade", "plan", "v1.36.3", "-o", "json"]]
    assert out.result["needs_upgrade"] and out.result["kubeadm_required"] == "v1.36.3"
    miss = run(kubeadm_plan, {"target": "v1.37.0", "node": "cp-1", "output": fixture_text("kubeadm",
                                                                                         "real-1.36.3-plan.txt")})
    assert miss.failed and miss.result["msg"].startswith("kubeadm upgrade plan on cp-1 does not offer v1.37.0")
    skipped = run(kubeadm_plan, {"target": "v1.34.2"}, check_mode=True)
    assert skipped.result["skipped"] and skipped.result["_calls"] == []
    failing = run(kubeadm_plan, {}, {"upgrade plan": (1, "", "[ERROR CoreDNSUnsupportedPlugins]: ...")})
    assert failing.failed and "exited 1" in failing.result["msg"]
    assert "CoreDNSUnsupportedPlugins" in failing.result["msg"]


def test_dcgm_diag(run):
    policy = pool_baseline(dcgm={"required_tests": ["memory"], "allowed_skip": []})
    out = run(dcgm_diag, {"level": 2, "baseline": policy, "node": "gpu-a1"},
              {"diag -r 2 -j": (226, fixture_text("dcgm", "synthetic-4.2.3-r2-warning.json"), "")})
    assert not out.failed and out.result["passed"] and len(out.result["warnings_found"]) == 1
    assert out.result["_calls"][0] == ["/usr/bin/dcgmi", "diag", "-r", "2", "-j"]
    fail = run(dcgm_diag, {"baseline": policy, "node": "gpu-a1",
                           "output": fixture_text("dcgm", "synthetic-4.2.3-r1-fail.json")})
    assert fail.failed
    assert fail.result["msg"] == ("dcgm_diag gate failed: gpu-a1 gpu 5 memory: check dcgm_test: measured Fail, "
                                  "baseline Pass (GPU 5: Memory test failed: DBE detected (isolate))")
    assert fail.result["checks"] and fail.result["gate"] == "dcgm_diag"
    parse = run(dcgm_diag, {"baseline": policy, "output": "{trunc"})
    assert parse.failed and parse.result["error_type"] == "ParseError"
    assert run(dcgm_diag, {"baseline": policy}, check_mode=True).result["skipped"]
    canary = run(dcgm_diag, {"baseline": policy, "canary": True},
                 {"diag -r 3 -j": (0, fixture_text("dcgm", "synthetic-4.2.3-r1-pass.json"), "")})
    assert canary.result["level"] == 3  # the baseline's canary_level


def test_nccl_allreduce(run):
    baseline = pool_baseline(nccl={"busbw_gbps": {"8G": 470.0}, "tolerance_pct": 10, "min_runs": 3})
    texts = [fixture_text("nccl", "synthetic-allreduce-8gpu-run%d.txt" % i) for i in (1, 2, 3)]
    out = run(nccl_allreduce, {"baseline": baseline, "outputs": texts})
    assert out.result["passed"] and out.result["median_busbw"][str(8 * 1024 ** 3)] == pytest.approx(480.0, abs=0.01)
    slow = run(nccl_allreduce, {"baseline": baseline, "node": "gpu-a1",
                                "outputs": [fixture_text("nccl", "synthetic-allreduce-8gpu-slow.txt")] * 3})
    assert slow.failed and "gpu-a1 size 8G: check nccl_busbw: measured 336.00, baseline >= 423.00 GB/s" in \
        slow.result["msg"]
    reading = run(nccl_allreduce, {"baseline": baseline, "node": "gpu-a1", "gate": False,
                                   "outputs": [fixture_text("nccl", "synthetic-allreduce-8gpu-slow.txt")] * 3})
    assert not reading.failed and reading.result["passed"] is False  # the same checks, judged by the caller
    assert reading.result["median_busbw"][str(8 * 1024 ** 3)] == pytest.approx(336.0, abs=0.01)
    assert [c["name"] for c in reading.result["checks"] if not c["passed"]] == ["nccl_busbw"]
    assert run(nccl_allreduce, {"baseline": baseline}, check_mode=True).result["skipped"]


def test_nccl_allreduce_runs_the_tool_the_baselines_min_runs(run):
    baseline = pool_baseline(nccl={"busbw_gbps": {"8G": 470.0}, "tolerance_pct": 10, "min_runs": 3,
                                   "args": ["-b", "1G", "-e", "8G", "-f", "2", "-g", "8"]})
    out = run(nccl_allreduce, {"baseline": baseline},
              {"-b 1G -e 8G": ok(fixture_text("nccl", "synthetic-allreduce-8gpu-run1.txt"))})
    assert len(out.result["_calls"]) == 3 and out.result["_calls"][0][1:3] == ["-b", "1G"]
    assert out.result["passed"]
    opted = dict(baseline, opt_out={"nccl": "single-GPU inference nodes have no collective", "xids": {}})
    skipped = run(nccl_allreduce, {"baseline": opted})
    assert skipped.result["passed"] and skipped.result["_calls"] == [] and skipped.result["opt_outs"]


def test_gpu_health(run):
    policy = pool_baseline()
    cmds = {"--query-gpu=": ok(fixture_text("nvidia_smi", "query-gpu-7-of-8.csv")),
            "--query-remapped-rows=": ok(fixture_text("nvidia_smi", "remapped-rows-ok.csv")),
            "-k -b": ok(fixture_text("nvidia_smi", "kern-xid79.log"))}
    out = run(gpu_health, {"baseline": policy, "node": "gpu-a1"}, cmds)
    assert out.failed
    assert out.result["msg"].startswith("gpu_health gate failed: gpu-a1: check gpu_count: measured 7, baseline 8")
    assert "XID 79 on PCI:0000:9a:00" in out.result["msg"]
    assert out.result["_calls"][0][1].startswith("--query-gpu=index,uuid,pci.bus_id")
    good = run(gpu_health, {"baseline": policy, "gpu_output": fixture_text("nvidia_smi", "query-gpu-8-ok.csv"),
                            "remap_output": fixture_text("nvidia_smi", "remapped-rows-ok.csv"),
                            "kernel_log": fixture_text("nvidia_smi", "kern-clean.log")}, check_mode=True)
    assert good.result["passed"] and good.result["gpu_count"] == 8 and good.result["_calls"] == []
    assert run(gpu_health, {"baseline": policy}, check_mode=True).result["skipped"]


def test_node_gate(run):
    node = json.loads(fixture_text("k8s", "node-gpu-a1-ready.json"))
    policy = pool_baseline(node={"kubelet_config": {"cpuManagerPolicy": "static"}})
    out = run(node_gate, {"node": node, "configz": fixture_text("k8s", "configz-gpu-a1.json"),
                          "target_version": "v1.34.2", "baseline": policy})
    assert out.result["passed"] and out.result["node_facts"]["kubelet_version"] == "v1.34.2"
    fail = run(node_gate, {"node": json.loads(fixture_text("k8s", "node-gpu-a1-degraded.json")),
                           "target_version": "v1.34.2", "baseline": pool_baseline(node={"kubelet_config": {}})})
    assert fail.failed and "gpu-a1: check allocatable_gpus: measured 7, baseline 8" in fail.result["msg"]
    real = json.loads(fixture_text("k8s", "kubelet-code-1.36.3-configz-h100-train.json"))
    drifted = json.loads(json.dumps(real))
    drifted["kubeletconfig"]["cpuManagerPolicy"] = "none"
    moved = run(node_gate, {"node": node, "configz": drifted, "configz_before": real, "target_version": "v1.34.2",
                            "baseline": policy})
    assert moved.failed and "gpu-a1 cpuManagerPolicy: check kubelet_config: measured none, baseline static" in \
        moved.result["msg"]
    assert moved.result["kubelet_config_changes"] == {"pool": "h100-train", "node": "gpu-a1", "changes": {
        "cpuManagerPolicy": {"before": "static", "after": "none"}}}
    kept = run(node_gate, {"node": node, "configz": real, "configz_before": real, "target_version": "v1.34.2",
                           "baseline": policy})
    assert kept.result["passed"] and kept.result["kubelet_config_changes"]["changes"] == {}
    assert "kubelet_config_changes" not in out.result  # nothing to compare without configz_before


def test_removed_apis(run):
    secrets = json.loads(fixture_text("k8s", "helm-secrets.json"))
    args = {"target_version": "v1.34.2", "manifest_paths": [str(FIXTURES / "manifests" / "gitops")],
            "helm_secrets": secrets,
            "metrics": [{"apiserver": "cp-1", "text": fixture_text("metrics", "real-1.35.4-deprecated.prom.gz"),
                         "version": fixture_text("metrics", "real-1.35.4-version.json")}]}
    out = run(removed_apis, args)
    assert out.failed and out.result["msg"].startswith("removed_apis gate failed for v1.34.2: ")
    assert len(out.result["blocking"]) == 3  # flowschema (manifest), PDB, Helm HPA; the DRA beta is a notice
    report = run(removed_apis, dict(args, fail_on_blocking=False))
    assert not report.failed and report.result["passed"] is False and len(report.result["files_scanned"]) == 3
    clean = run(removed_apis, {"target_version": "v1.34.2", "metrics": [
        {"apiserver": "cp-2", "text": fixture_text("metrics", "real-1.35.4-deprecated-excerpt.prom").replace(
            'resource="resourceclaims",subresource="",version="v1beta1"} 1', 'resource="resourceclaims",'
            'subresource="",version="v1beta1"} 0'),
         "version": fixture_text("metrics", "real-1.35.4-version.json")}]})
    assert clean.result["passed"] and clean.result["findings"] == []
    proxied = run(removed_apis, {"target_version": "v1.34.2", "metrics": [
        {"apiserver": "cp-2", "text": "<html>502</html>",
         "version": fixture_text("metrics", "real-1.35.4-version.json")}]})
    assert proxied.failed and "apiserver cp-2's /metrics could not be scanned" in proxied.result["msg"]


def test_removed_apis_reads_the_helm_secrets_itself_when_asked(run, monkeypatch):
    from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
    secrets = json.loads(fixture_text("k8s", "helm-secrets.json"))

    class Cluster:
        def helm_release_secrets(self):
            return secrets
    monkeypatch.setattr(kube, "connect", lambda module: Cluster())
    read = run(removed_apis, {"target_version": "v1.34.2", "read_helm_secrets": True, "fail_on_blocking": False})
    given = run(removed_apis, {"target_version": "v1.34.2", "helm_secrets": secrets, "fail_on_blocking": False})
    assert read.result["findings"] and read.result["findings"] == given.result["findings"]
    assert read.result["helm_releases"] == given.result["helm_releases"]
    both = run(removed_apis, {"target_version": "v1.34.2", "read_helm_secrets": True, "helm_secrets": secrets})
    assert both.failed and "leave helm_secrets empty" in both.result["msg"]


def test_addon_support(run):
    image = "quay.io/calico/node:v3.25.1"
    calico = {"apiVersion": "apps/v1", "kind": "DaemonSet",
              "metadata": {"name": "calico-node", "namespace": "kube-system"},
              "spec": {"template": {"spec": {"containers": [{"name": "n", "image": image}]}}}}
    out = run(addon_support, {"target_version": "v1.30.1", "apiserver_version": "v1.29.0", "workloads": [calico]})
    assert out.failed and out.result["msg"].startswith("addon_support: Calico 3.25 (DaemonSet kube-system/")
    assert out.result["blocking"] and out.result["installed"][0]["addon"] == "calico"
    report = run(addon_support, {"target_version": "v1.30.1", "workloads": [calico], "fail_on_blocking": False,
                                 "_ansible_check_mode": True})
    assert not report.failed and report.result["passed"] is False and report.result["changed"] is False
    assert report.result["stages"] == [{"addon": "calico", "name": "Calico", "stage": 3}]
    # the lines to check by hand go out as notices: ansible-core reserves a result's warnings (removed in 2.23)
    for result in (out.result, report.result):
        assert "warnings" not in result and isinstance(result["notices"], list), sorted(result)
    bad = run(addon_support, {"target_version": "v1.30.1", "extra_support": [{"addon": "calico"}]})
    assert bad.failed and "extra_support[0].version: give a MAJOR.MINOR version" in bad.result["msg"]


def test_etcd_status(run):
    out = run(etcd_status, {"cacert": "/pki/ca.crt", "cert": "/pki/c.crt", "key": "/pki/c.key",
                            "snapshot_path": "/backup/snap.db", "expect": {"min_revision": 201}},
              {"--endpoints=https://127.0.0.1:2379 --cacert=/pki/ca.crt": ok(fixture_text(
                  "etcd", "real-3.6.16-endpoint-status-3.json")),
               "snapshot status /backup/snap.db -w json": ok(fixture_text(
                   "etcd", "real-3.6.16-etcdutl-snapshot-status.json"))})
    assert out.result["passed"] and out.result["snapshot"]["revision"] == 201
    assert out.result["_calls"][1][0] == "/usr/bin/etcdutl"
    big = run(etcd_status, {"endpoint_status_output": fixture_text("etcd", "real-3.6.16-endpoint-status-big.json")})
    assert big.failed and "69.9% of quota 1048576" in big.result["msg"]
    snap_fail = run(etcd_status, {"check_endpoints": False, "snapshot_output": fixture_text(
        "etcd", "real-3.6.16-etcdutl-snapshot-status.json"), "expect": {"hash": 7}})
    assert snap_fail.failed
    assert "snapshot: check snapshot_hash: measured 478079473, baseline 7" in snap_fail.result["msg"]
    broken = run(etcd_status, {"check_endpoints": False, "snapshot_path": "/b.db"},
                 {"snapshot status": (1, "", "Error: snapshot file integrity check failed")})
    assert broken.failed and "integrity check failed" in broken.result["msg"]


def test_baseline_info(run):
    out = run(baseline_info, {"path": str(FIXTURES / "baselines" / "h100-train.yml")})
    assert out.result["baseline"]["gpu"]["count"] == 8
    bad = run(baseline_info, {"baseline": {"name": "x", "gpu": {"product": "H100", "count": "8",
                                                                "driver_version": "1"}}, "name": "inline"})
    assert bad.failed and bad.result["msg"] == "inline: field gpu.count: expected an integer, got str ('8')"
    assert bad.result["field"] == "gpu.count"
    neither = run(baseline_info, {})
    assert neither.failed and "one of the following is required: path, baseline" in neither.result["msg"]


def test_fleet_plan(run):
    from tests.unit.module_utils.test_fleet import fleet
    out = run(fleet_plan, {"fleet": fleet()}, check_mode=True)
    assert not out.failed and out.result["changed"] is False
    assert [r["batches"] for r in out.result["rings"]][2] == [["inf-west", "train-a"], ["train-b"]]
    doc = fleet()
    doc["cells"][3]["ring"] = "ring1"
    bad = run(fleet_plan, {"fleet": doc})
    assert bad.failed and bad.result["error_type"] == "InputError"
    assert "inf-east and inf-west are a DR pair and both in ring ring1" in bad.result["msg"]


def test_fleet_plan_takes_relative_paths_from_the_working_directory_it_is_given(run, tmp_path):
    from tests.unit.module_utils.test_fleet import fleet
    doc = fleet()
    doc["cells"][0]["inventory"] = "inventories/canary-1"
    plan = run(fleet_plan, {"fleet": doc, "working_dir": str(tmp_path)}).result
    assert plan["run"]["working_dir"] == str(tmp_path)
    assert plan["paths"]["dir"] == "%s/out/fleet/prod" % tmp_path  # the default ./out of where the run started
    assert plan["cells"][doc["cells"][0]["name"]]["inventory"] == "%s/inventories/canary-1" % tmp_path
    relative = run(fleet_plan, {"fleet": doc, "working_dir": str(tmp_path), "out_dir": "runs"}).result
    assert relative["paths"]["ledger"] == "%s/runs/fleet/prod/ledger.json" % tmp_path


def test_fleet_report_from_the_ledger_and_the_cells_versions(run, tmp_path):
    from tests.unit.module_utils.test_fleet_report import PATCHES, example, ledger_of, versions_of, every_cell
    args = {"fleet": example(), "ledger": ledger_of(canary_1={"state": "done"}),
            "versions": versions_of(*[c for c in every_cell() if c != "train-b"]), "latest_patches": PATCHES,
            "today": "2026-12-01", "dest": str(tmp_path)}
    out = run(fleet_report, args)
    assert out.failed and out.result["msg"] == (
        "fleet prod: 1 alert(s): train-b: its versions could not be read from its API (state pending)")
    assert {r["cell"]: r["state"] for r in out.result["report"]["cells"]}["canary-1"] == "done"
    both = run(fleet_report, dict(args, readings={}))
    assert both.failed and "mutually exclusive" in both.result["msg"]
    alone = run(fleet_report, {k: v for k, v in args.items() if k != "versions"})
    assert alone.failed and "versions" in alone.result["msg"]


def test_fleet_report_fails_on_an_alert_and_writes_nothing_in_check_mode(run, tmp_path):
    from tests.unit.module_utils.test_fleet_report import PATCHES, example, readings
    args = {"fleet": example(), "readings": readings(), "latest_patches": PATCHES, "today": "2026-12-01",
            "dest": str(tmp_path / "report")}
    out = run(fleet_report, args)
    assert not out.failed and out.result["changed"] and len(out.result["files"]) == 3
    assert not run(fleet_report, args).result["changed"]  # the same report: no file rewritten
    behind = dict(args, readings=readings(canary_1={"control_plane": "v1.36.1", "kubelets": {"h100": ["v1.36.1"]}}),
                  dest=str(tmp_path / "check"))
    alert = run(fleet_report, behind, check_mode=True)
    assert alert.failed
    assert "fleet prod: 1 alert(s): canary-1: v1.36.1 is 132 days behind v1.36.3" in alert.result["msg"]
    assert alert.result["files"] == [] and not (tmp_path / "check").exists()
    relative = run(fleet_report, dict(args, dest="out/report"))
    assert relative.failed and "dest: out/report is not an absolute path" in relative.result["msg"]


def test_an_unexpected_error_is_a_clear_failure_naming_the_module(run, monkeypatch):
    from ansible_collections.gpufleet.upgrade.plugins.module_utils import dcgm

    def broken(*args, **kwargs):
        raise KeyError("results")

    monkeypatch.setattr(dcgm_diag, "parse_diag", broken)
    out = run(dcgm_diag, {"baseline": pool_baseline(), "output": "{}",
                          "_ansible_module_name": "gpufleet.upgrade.dcgm_diag"})
    assert out.failed and out.result["error_type"] == "UnexpectedError"
    assert out.result["msg"].startswith("gpufleet.upgrade.dcgm_diag failed on its input (baseline, binary, canary, "
                                        "output given): KeyError: 'results'")
    assert "Nothing was judged as passed" in out.result["msg"] and "Traceback" in out.result["exception"]
    assert dcgm.parse_diag is not broken


def test_fleet_ledger_keeps_the_ledger_judges_halts_and_writes_nothing_in_check_mode(run, tmp_path):
    from tests.unit.module_utils.test_fleet import fleet
    plan = run(fleet_plan, {"fleet": fleet(), "out_dir": str(tmp_path)}).result
    assert plan["paths"]["ledger"] == "%s/fleet/prod/ledger.json" % tmp_path
    assert plan["cells"]["canary-1"]["readings"] == dict({
        which: "%s/fleet/prod/readings/canary-1-v1.36.3-%s.json" % (tmp_path, which) for which in ("before", "after")},
        versions="%s/fleet/prod/report/versions/canary-1.json" % tmp_path)
    assert plan["run"]["max_steps"] > len(plan["rings"])
    path = plan["paths"]["ledger"]
    lock = run(fleet_ledger, {"plan": plan, "path": path, "action": "lock"}).result["lock"]
    base = {"plan": plan, "path": path, "lock": lock["id"]}
    dry = run(fleet_ledger, base, check_mode=True)
    assert dry.result["next"]["action"] == "upgrade" and not os.path.exists(path)
    first = run(fleet_ledger, base)
    assert first.result["changed"] and first.result["hops"]["canary-1"] == ["v1.36.3"]
    assert json.load(open(path))["fleet"] == "prod"
    run(fleet_ledger, dict(base, action="record", cell="canary-1", state="done", version="v1.36.3"))
    run(fleet_ledger, dict(base, action="record", cell="dev-1", state="done", version="v1.36.3"))
    assert run(fleet_ledger, base).result["changed"] is False  # read back: the same ledger
    # a halt: readings before and after on disk, one condition holds
    readings = tmp_path / "readings"
    readings.mkdir()
    from tests.unit.module_utils.test_fleet_run import clean_reading
    clean = clean_reading()
    for cell in ("canary-1", "dev-1"):
        (readings / ("%s-v1.36.3-before.json" % cell)).write_text(json.dumps(clean))
        (readings / ("%s-v1.36.3-after.json" % cell)).write_text(json.dumps(clean))
    (readings / "dev-1-v1.36.3-after.json").write_text(json.dumps(dict(clean, not_ready_nodes=2,
                                                                       not_ready=["gpu-1", "gpu-2"])))
    judged = run(fleet_ledger, dict(base, action="judge", ring="ring0", readings_dir=str(readings)))  # the ring's
    assert judged.result["judged"] == ["canary-1", "dev-1"]
    assert judged.failed and judged.result["msg"].startswith(
        "fleet prod halted in ring ring0: dev-1: not_ready_nodes is 2 (at most 0). Later rings are untouched")
    assert json.load(open(path))["halt"]["cells"] == ["dev-1"]
    still = run(fleet_ledger, dict(base, action="resume", readings_dir=str(readings)))
    assert still.failed and "not_ready_nodes is 2" in still.result["msg"]
    (readings / "dev-1-v1.36.3-after.json").write_text(json.dumps(clean))
    resumed = run(fleet_ledger, dict(base, action="resume", readings_dir=str(readings)))
    assert not resumed.failed and resumed.result["ledger"]["halt"] is None
    assert resumed.result["next"]["action"] == "soak" and resumed.result["next"]["start"] is True
    # a retry needs the typed confirmation; a cell that has not failed has nothing to retry
    bad = run(fleet_ledger, dict(base, action="retry", confirmation="retry dev-1"))
    assert bad.failed and "type 'retry CELL in fleet FLEET'" in bad.result["msg"]
    done = run(fleet_ledger, dict(base, action="retry", confirmation="retry dev-1 in fleet prod"))
    assert done.failed and "dev-1 has not failed (it is done)" in done.result["msg"]
    (tmp_path / "broken.json").write_text("{")
    broken = run(fleet_ledger, dict(base, path=str(tmp_path / "broken.json")))
    assert broken.failed and "is not JSON" in broken.result["msg"]


def test_fleet_ledger_lock_one_run_at_a_time_broken_only_by_its_typed_id(run, tmp_path):
    from tests.unit.module_utils.test_fleet import fleet
    plan = run(fleet_plan, {"fleet": fleet(), "out_dir": str(tmp_path)}).result
    path = plan["paths"]["ledger"]
    base = {"plan": plan, "path": path}
    # check mode takes no lock
    assert run(fleet_ledger, dict(base, action="lock"), check_mode=True).result["changed"]
    assert not os.path.exists(path + ".lock")
    first = run(fleet_ledger, dict(base, action="lock")).result["lock"]
    assert set(first) == {"fleet", "id", "holder", "since", "host", "pid", "started"} and first["fleet"] == "prod"
    assert "@" in first["holder"] and first["pid"] is None  # not run by ansible-playbook: no process to check
    assert oct(os.stat(path + ".lock").st_mode & 0o777) == "0o644"
    # a second run is refused, naming the lock, its holder and the exact words that break it
    second = run(fleet_ledger, dict(base, action="lock"))
    assert second.failed and second.result["msg"].startswith(
        "fleet prod is locked by another run: lock %s, taken by %s at %s." % (first["id"], first["holder"],
                                                                              first["since"]))
    assert "gpufleet_fleet_break_lock='break lock %s of fleet prod'" % first["id"] in second.result["msg"]
    assert second.result["held_by"] == first and "lock" not in second.result  # the other run's, not this one's
    # a ledger write without the lock, or with another id, is refused and writes nothing
    nolock = run(fleet_ledger, base)
    assert nolock.failed and "lock: this call writes fleet prod's ledger" in nolock.result["msg"]
    other = run(fleet_ledger, dict(base, lock="0123456789ab"))
    assert other.failed and "the ledger's lock is not this run's 0123456789ab but lock %s, taken by %s" % (
        first["id"], first["holder"]) in other.result["msg"]
    assert not os.path.exists(path)
    assert not run(fleet_ledger, dict(base, lock=first["id"])).failed and os.path.exists(path)
    # breaking it takes the exact words with the id there now; the break is kept in the ledger
    wrong = run(fleet_ledger, dict(base, action="lock", confirmation="break lock of fleet prod"))
    assert wrong.failed and "type exactly 'break lock %s of fleet prod'" % first["id"] in wrong.result["msg"]
    broke = run(fleet_ledger, dict(base, action="lock", confirmation="break lock %s of fleet prod" % first["id"]))
    new = broke.result["lock"]
    assert new["id"] != first["id"] and "breaking lock %s" % first["id"] in broke.result["msg"]
    used = broke.result["ansible_facts"]["fleet_ledger_break_glass_record"]  # for the change record
    assert used["actions"] == ["break the fleet ledger's lock"] and first["id"] in used["detail"]
    (kept,) = json.load(open(path))["lock_breaks"]
    assert (kept["id"], kept["holder"], kept["new_lock"]) == (first["id"], first["holder"], new["id"])
    assert json.load(open(path))["lock_breaks"] == run(fleet_ledger, dict(base, lock=new["id"])).result["ledger"][
        "lock_breaks"]  # read back and kept
    # the old run can neither write nor release; the new one releases, and the next run takes it again
    stale = run(fleet_ledger, dict(base, action="unlock", lock=first["id"]))
    assert stale.failed and "not this run's %s but lock %s" % (first["id"], new["id"]) in stale.result["msg"]
    assert not run(fleet_ledger, dict(base, action="unlock", lock=new["id"])).failed
    assert not os.path.exists(path + ".lock")
    gone = run(fleet_ledger, dict(base, lock=new["id"], action="record", cell="canary-1", state="done"))
    assert gone.failed and "lock %s is gone" % new["id"] in gone.result["msg"]
    nothing = run(fleet_ledger, dict(base, action="lock", confirmation="break lock x of fleet prod"))
    assert nothing.failed and "fleet prod has no lock to break" in nothing.result["msg"]
    awx = run(fleet_ledger, dict(base, action="lock", holder="AWX job 42 by alice")).result["lock"]
    assert awx["holder"].endswith(" (AWX job 42 by alice)")
    # a lock whose run is alive on this controller (this process stands in for its ansible-playbook) stays
    with open(path + ".lock", "w") as handle:
        json.dump(dict(awx, pid=os.getpid(), started=fleet_ledger._process_start(os.getpid())), handle)
    alive = run(fleet_ledger, dict(base, action="lock", confirmation="break lock %s of fleet prod" % awx["id"]))
    assert alive.failed and "held by a run still alive on this controller (ansible-playbook pid %d" % os.getpid() \
        in alive.result["msg"] and json.load(open(path + ".lock"))["id"] == awx["id"]
    with open(path + ".lock", "w") as handle:  # the same pid, started at another time: a reused pid, a dead run
        json.dump(dict(awx, pid=os.getpid(), started=1), handle)
    assert not run(fleet_ledger, dict(base, action="lock", confirmation="break lock %s of fleet prod" % awx["id"])
                   ).failed
    # a run whose ledger went bad still releases its lock
    mine = json.load(open(path + ".lock"))["id"]
    (tmp_path / "bad.json").write_text("{")
    os.replace(path + ".lock", str(tmp_path / "bad.json.lock"))
    assert not run(fleet_ledger, dict(base, path=str(tmp_path / "bad.json"), action="unlock", lock=mine)).failed
    assert not os.path.exists(str(tmp_path / "bad.json.lock"))
    assert os.listdir(str(tmp_path / "fleet" / "prod")) == ["ledger.json"]  # no claim file left behind


def test_fleet_ledger_before_refuses_a_batch_read_in_part_and_drops_its_readings(run, tmp_path):
    from tests.unit.module_utils.test_fleet import fleet
    spec = fleet()
    spec["cells"][0]["nccl_hosts"] = ["gpu-a1"]
    plan = run(fleet_plan, {"fleet": spec, "out_dir": str(tmp_path)}).result
    readings = tmp_path / "readings"
    readings.mkdir()
    base = {"plan": plan, "path": plan["paths"]["ledger"], "action": "before", "readings_dir": str(readings),
            "cells": ["canary-1", "dev-1"]}
    from tests.unit.module_utils.test_fleet_run import clean_reading
    clean = clean_reading()
    canary = readings / "canary-1-v1.36.3-before.json"
    canary.write_text(json.dumps(dict(clean, nccl_busbw_gbps=None, unmeasured={
        "nccl_busbw_gbps": "gpu-a1: its all_reduce_perf run failed: exit 1"})))
    out = run(fleet_ledger, base)
    assert out.failed and out.result["msg"].startswith(
        "cell(s) canary-1, dev-1 could not be read whole before the upgrade, so the batch was not changed")
    assert out.result["unread"] == {
        "canary-1": "not measured: nccl_busbw_gbps (gpu-a1: its all_reduce_perf run failed: exit 1)",
        "dev-1": "no reading (the reading's output above says why)"}
    assert not canary.exists() and not os.path.exists(base["path"])  # dropped, to be read again; no ledger write
    for cell in ("canary-1", "dev-1"):
        (readings / ("%s-v1.36.3-before.json" % cell)).write_text(json.dumps(dict(clean, nccl_busbw_gbps=400.0)))
    assert not run(fleet_ledger, base).failed
    (readings / "dev-1-v1.36.3-before.json").write_text("{")  # torn: no reading
    assert run(fleet_ledger, base).result["unread"] == {"dev-1": "no reading (the reading's output above says why)"}
    for junk in ("[1]", "null"):  # JSON that is not a reading is none
        (readings / "dev-1-v1.36.3-before.json").write_text(junk)
        assert run(fleet_ledger, base).result["unread"] == {
            "dev-1": "no reading (the reading's output above says why)"}
    (readings / "dev-1-v1.36.3-before.json").write_text(json.dumps(dict(clean, not_ready_nodes=float("nan"))))
    assert run(fleet_ledger, base).result["unread"] == {
        "dev-1": "not measured: not_ready_nodes (refused: not_ready_nodes is nan, not a whole number 0 or more)"}


def test_fleet_ledger_a_lock_file_that_is_not_a_lock_object_is_held_by_unknown(run, tmp_path):
    from tests.unit.module_utils.test_fleet import fleet
    plan = run(fleet_plan, {"fleet": fleet(), "out_dir": str(tmp_path)}).result
    base = {"plan": plan, "path": plan["paths"]["ledger"], "action": "lock"}
    os.makedirs(os.path.dirname(base["path"]))
    for junk in ("[1]", "\"text\"", "{"):
        with open(base["path"] + ".lock", "w") as handle:
            handle.write(junk)
        out = run(fleet_ledger, base)
        assert out.failed and out.result["held_by"]["id"] == "unreadable", junk
        assert "not a JSON object" in out.result["held_by"]["holder"]
    assert fleet_ledger._read_json(str(tmp_path / "gone.json")) is None


def test_awx_definitions_for_a_fleet_plans_it_and_refuses_a_bad_fleet(run):
    from tests.unit.module_utils.test_awx import CONFIG, FLEET_CONFIG, example_fleet
    out = run(awx_definitions, {"config": FLEET_CONFIG, "fleet": example_fleet()}, check_mode=True)
    assert not out.failed and out.result["workflow"]["name"] == "gpufleet fleet prod rollout"
    assert "schedule" not in out.result
    cell = run(awx_definitions, {"config": CONFIG})
    assert not cell.failed and cell.result["workflow"]["name"] == "gpufleet cell1 upgrade"
    doc = example_fleet()
    doc["cells"][0]["ring"] = "ring9"
    bad = run(awx_definitions, {"config": FLEET_CONFIG, "fleet": doc})
    assert bad.failed and bad.result["error_type"] == "InputError" and "ring9" in bad.result["msg"]


def test_a_results_warnings_go_out_as_notices_and_nothing_else_changes():
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import as_result
    assert as_result({"passed": True, "warnings": ["look at x"], "checks": []}) == {
        "passed": True, "notices": ["look at x"], "checks": []}
    assert as_result({"passed": True}) == {"passed": True}
    # an empty list stays in the result: ansible-core drops an empty warnings key, and the preflight report read it
    assert as_result({"passed": True, "warnings": []}) == {"passed": True, "notices": []}


def test_run_module_shows_each_notice_as_a_warning_of_the_task_and_returns_it_as_notices():
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module

    class Module:
        def __init__(self):
            self.warned, self.exited, self.failed = [], None, None

        def warn(self, line):
            self.warned.append(line)

        def exit_json(self, **kw):
            self.exited = kw

        def fail_json(self, **kw):
            self.failed = kw

    ok = Module()
    run_module(ok, lambda: {"passed": True, "warnings": ["legacy token x"], "notices": ["earlier"]})
    assert ok.warned == ["legacy token x"]
    assert ok.exited == {"passed": True, "notices": ["earlier", "legacy token x"], "changed": False}
    gate = Module()

    def failing():
        raise GateFailed("gate failed: y", passed=False, warnings=["look at z"], failures=["y"])
    run_module(gate, failing)
    assert gate.warned == ["look at z"] and "warnings" not in gate.failed
    assert gate.failed["notices"] == ["look at z"] and gate.failed["msg"] == "gate failed: y"
