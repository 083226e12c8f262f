"""The lab is real where it claims to be, and its simulators speak the formats the checks engine reads."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import pytest
import yaml
from kubernetes import client, config, dynamic
from kubernetes.client.rest import ApiException

from ansible_collections.gpufleet.upgrade.plugins.module_utils import apiserver_signals
from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import load_file
from ansible_collections.gpufleet.upgrade.plugins.module_utils.dcgm import judge_diag, parse_diag
from ansible_collections.gpufleet.upgrade.plugins.module_utils.drain import selects
from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import (
    judge_endpoints, judge_snapshot, parse_endpoint_status, parse_snapshot_status)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.gpu_health import (
    judge_health, parse_query_gpu, parse_remapped_rows, scan_kernel_log)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.kubeadm_config import upgrade_configuration
from ansible_collections.gpufleet.upgrade.plugins.module_utils.kubeadm_plan import judge_plan, parse_plan
from ansible_collections.gpufleet.upgrade.plugins.module_utils.nccl import judge_runs, parse_output
from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import scan_metrics, target_version
from gpufleet_lab import kubeadm as lab_kubeadm
from tests.lab.conftest import (ROOT, apiserver_get, apiserver_version, etcd_flags, lab_cli, lab_config, lab_env,
                                podman_exec, wait_control_plane)

pytestmark = pytest.mark.lab

# The lab pool's baseline (inventories/lab/baselines), as the gates take it.
LAB_BASELINE = load_file(str(ROOT / "inventories" / "lab" / "baselines" / "h100-train.yml"))
ETCD_FLAGS = etcd_flags(lab_config.load())  # this run's cell (conftest)


def core(cfg):
    return client.CoreV1Api(config.new_client_from_config(str(cfg.kubeconfig)))


def run_ok(host, *cmd):
    proc = podman_exec(host, *cmd)
    assert proc.returncode == 0, "%s on %s failed: %s %s" % (" ".join(cmd), host, proc.stdout, proc.stderr)
    return proc.stdout


def apt_install(host, spec):
    """Move a (held) package to a version, up or down, as the upgrade roles will."""
    return run_ok(host, "apt-get", "install", "-y", "-q", "--allow-change-held-packages", "--allow-downgrades", spec)


def gpu_checks(cfg, host):
    gpus = parse_query_gpu(run_ok(host, "nvidia-smi", "--query-gpu=index,uuid,pci.bus_id,name,driver_version,"
                                        "persistence_mode,ecc.errors.uncorrected.volatile.total",
                                  "--format=csv,noheader,nounits"))
    remaps = parse_remapped_rows(run_ok(host, "nvidia-smi", "--query-remapped-rows=gpu_bus_id,gpu_uuid,"
                                        "remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,"
                                        "remapped_rows.failure", "--format=csv,noheader,nounits"))
    return judge_health(gpus, remaps, scan_kernel_log(run_ok(host, "journalctl", "-k")), LAB_BASELINE, host)


def dcgm_checks(host):
    proc = podman_exec(host, "dcgmi", "diag", "-r", "1", "-j")
    return judge_diag(parse_diag(proc.stdout), LAB_BASELINE, host)


def nccl_checks(host):
    runs = [parse_output(podman_exec(host, "all_reduce_perf", "-b", "1G", "-e", "8G", "-f", "2", "-g", "8").stdout)
            for _ in range(3)]
    return judge_runs(runs, LAB_BASELINE, host)


# -- the control plane is real ----------------------------------------------------------------------------------
def test_apiservers_report_their_true_version(lab):
    for host in lab.control_plane:
        assert apiserver_version(lab, host) == lab.from_version
    kubectl = lab.bin_dir("kubernetes", lab.from_version) / "kubectl"
    out = subprocess.run([str(kubectl), "--kubeconfig", str(lab.kubeconfig), "version", "-o", "json"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["serverVersion"]["gitVersion"] == lab.from_version


def test_apiservers_serve_every_series_the_readings_need_and_not_the_histograms_the_lab_turns_off(lab):
    """Each apiserver's own /metrics reduces for the soak and proves itself for the removed-API scan (the real
    readers), and has none of the histograms the lab's --disabled-metrics turns off (lab/gpufleet_lab/kubeadm.py)."""
    for host in lab.control_plane:
        texts = {path: apiserver_get(lab, host, path, timeout=30) for path in ("/metrics", "/version")}
        reduced = apiserver_signals.reduce(texts["/metrics"], host, texts["/version"])
        assert reduced["requests"] and any(reduced["buckets"].values()) and reduced["rss_bytes"], reduced
        findings = scan_metrics(texts["/metrics"], texts["/version"], target_version(lab.to_version), host)
        assert not [f for f in findings if f.get("unreadable")], findings  # the text proved to be this apiserver's
        names = {line.split("{")[0].split(" ")[0] for line in texts["/metrics"].splitlines() if line[:1] != "#"}
        off = [n for n in names for m in lab_kubeadm.DISABLED_METRICS if n.startswith(m)]
        assert not off, "%s serves %s: a cell made before --disabled-metrics; `bin/lab reset` recreates it" % (
            host, sorted(off)[:5])


def test_gpu_nodes_ready_with_8_gpus(lab):
    nodes = {n.metadata.name: n for n in core(lab).list_node(label_selector="gpufleet.io/lab=true").items}
    assert sorted(nodes) == sorted(lab.hosts)
    for host in lab.gpu_hosts:
        node = nodes[host]
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert node.metadata.labels["gpufleet.io/rack-set"] == lab.rack_set_of(host)
        assert node.status.node_info.kubelet_version == lab.from_version


def test_eviction_against_exhausted_pdb_gets_429(lab):
    host = lab.gpu_hosts[-1]
    lab_cli("fault", host, "pdb-block")
    try:
        api = core(lab)
        policy = client.PolicyV1Api(api.api_client)
        deadline = time.time() + 60
        while time.time() < deadline:  # the disruption controller computes the PDB status
            pdb = policy.read_namespaced_pod_disruption_budget("pdb-block-" + host, "gpufleet-lab-faults")
            if pdb.status and pdb.status.observed_generation and pdb.status.current_healthy == 1:
                break
            time.sleep(1)
        assert pdb.status.disruptions_allowed == 0
        (pod,) = api.list_namespaced_pod("gpufleet-lab-faults", label_selector="app=pdb-block-" + host).items
        assert pod.spec.node_name == host and pod.metadata.owner_references[0].kind == "ReplicaSet"
        with pytest.raises(ApiException) as err:
            api.create_namespaced_pod_eviction(pod.metadata.name, "gpufleet-lab-faults", {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod.metadata.name, "namespace": "gpufleet-lab-faults"}})
        assert err.value.status == 429
        assert "Cannot evict pod as it would violate the pod's disruption budget" in err.value.body
    finally:
        lab_cli("clear", host)
    deadline = time.time() + 30
    while api.list_namespaced_pod("gpufleet-lab-faults", label_selector="app=pdb-block-" + host).items:
        assert time.time() < deadline, "clear left the guarded pod behind"
        time.sleep(1)


# Selectors as the drain reads them, each against the pods the real disruption controller counts for it.
PDB_SELECTORS = {
    "labels": {"matchLabels": {"app": "a", "tier": "x"}},
    "in": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
    "not-in": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]},
    "exists": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
    "absent": {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
    "both": {"matchLabels": {"app": "b"}, "matchExpressions": [{"key": "tier", "operator": "NotIn",
                                                                   "values": ["y"]}]},
    "empty": {},
}
PDB_POD_LABELS = [{"app": "a", "tier": "x"}, {"app": "a"}, {"app": "b", "tier": "y"}, {"app": "b"}, {"tier": "x"},
                  {}]


def test_drain_selects_the_pods_the_disruption_controller_counts(lab):
    """drain.selects decides which PDB names a refused pod; the disruption controller of the lab's real
    kube-controller-manager counts, for a PDB with an integer minAvailable, every pod its selector selects
    (status.expectedPods). Both must agree on every selector kind, the empty one (all pods) included."""
    api, ns = core(lab), "gpufleet-lab-selectors"
    policy = client.PolicyV1Api(api.api_client)
    api.create_namespace({"metadata": {"name": ns}})
    try:
        pods = []
        for i, labels in enumerate(PDB_POD_LABELS):
            pod = {"metadata": {"name": "p%d" % i, "namespace": ns, "labels": labels},
                   "spec": {"nodeSelector": {"gpufleet.io/none": "none"},  # stays Pending: counted, never run
                            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
            api.create_namespaced_pod(ns, pod)
            pods.append(pod)
        for name, selector in PDB_SELECTORS.items():
            policy.create_namespaced_pod_disruption_budget(ns, {
                "metadata": {"name": name}, "spec": {"minAvailable": 1, "selector": selector}})
        expected = {name: sum(1 for pod in pods if selects({"spec": {"selector": sel}}, pod))
                    for name, sel in PDB_SELECTORS.items()}
        deadline, counted = time.time() + 60, {}
        while time.time() < deadline:
            counted = {p.metadata.name: p.status.expected_pods for p in policy.list_namespaced_pod_disruption_budget(
                ns).items if p.status and p.status.observed_generation == p.metadata.generation}
            if counted == expected:
                break
            time.sleep(1)
        assert counted == expected
        assert expected == {"labels": 1, "in": 4, "not-in": 4, "exists": 3, "absent": 3, "both": 1, "empty": 6}
    finally:
        api.delete_namespace(ns)


def test_etcd_snapshot_from_etcdctl_verifies_with_etcdutl(lab):
    endpoints = parse_endpoint_status(run_ok("cp-1", "etcdctl", *ETCD_FLAGS, "endpoint", "status", "--cluster",
                                             "-w", "json"))
    assert len(endpoints) == len(lab.control_plane)  # one member per control-plane host
    assert judge_endpoints(endpoints)["passed"]
    run_ok("cp-1", "etcdctl", *ETCD_FLAGS, "snapshot", "save", "/tmp/lab-snapshot.db")
    snap = parse_snapshot_status(run_ok("cp-1", "etcdutl", "snapshot", "status", "/tmp/lab-snapshot.db", "-w", "json"))
    summary = judge_snapshot(snap, {"min_revision": 1, "min_keys": 50})
    assert summary["passed"], summary["failures"]


def test_apt_sees_pinned_versions_and_holds(lab):
    policy = run_ok("gpu-a1", "apt-cache", "policy", "kubeadm")
    for version in lab.versions:
        assert version.lstrip("v") + "-1.1" in policy
    assert "Installed: %s-1.1" % lab.from_version.lstrip("v") in policy
    holds = run_ok("gpu-a1", "apt-mark", "showhold").split()
    assert {"kubeadm", "kubelet", "kubectl", "nvidia-driver-570-server", "nvidia-fabricmanager-570"} <= set(holds)
    # a held package does not move without --allow-change-held-packages
    proc = podman_exec("gpu-a1", "apt-get", "install", "-y", "-q", "kubeadm=%s-1.1" % lab.to_version.lstrip("v"))
    assert proc.returncode != 0 and "held" in (proc.stdout + proc.stderr)
    # fabric manager must equal the driver: its package depends on the driver at its exact version...
    old, new = lab.drivers["from"], lab.drivers["to"]
    fm_old, fm_new = ("nvidia-fabricmanager-%s" % v.split(".")[0] for v in (old, new))
    drv_old, drv_new = ("nvidia-driver-%s-server" % v.split(".")[0] for v in (old, new))
    assert "Depends: %s (= %s-0lab1)" % (drv_new, new) in run_ok("gpu-a1", "apt-cache", "show", fm_new)
    # ...so apt will not put the new branch's fabric manager beside the installed driver: it would pull in the
    # new driver, which conflicts with the old one
    proc = podman_exec("gpu-a1", "apt-get", "install", "-y", "-q", "--allow-change-held-packages", fm_new,
                       fm_old + "-")
    words = proc.stdout + proc.stderr
    assert proc.returncode == 100, words
    assert "The following packages have unmet dependencies:" in words
    assert " %s : Conflicts: nvidia-driver-any" % drv_old in words and \
        " %s : Conflicts: nvidia-driver-any" % drv_new in words, words
    assert "Installed: %s-0lab1" % old in run_ok("gpu-a1", "apt-cache", "policy", fm_old)  # nothing moved
    # and with the driver swapped in the same transaction (what gpu_stack does on a drained node) it goes through
    sim = run_ok("gpu-a1", "apt-get", "install", "-s", "-q", "--allow-change-held-packages", fm_new, drv_new,
                 fm_old + "-", drv_old + "-")
    assert "Inst %s (%s-0lab1" % (fm_new, new) in sim and "Inst %s (%s-0lab1" % (drv_new, new) in sim, sim


def test_ansible_reaches_every_host_through_podman(lab):
    ansible = str(pathlib.Path(sys.executable).parent / "ansible")  # the same venv as pytest
    proc = subprocess.run([ansible, "-i", str(lab.inventory / "hosts.yml"), "all", "-m", "ansible.builtin.ping",
                           "-o"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("SUCCESS") == len(lab.machines)  # the cell's hosts and the backup host


# -- simulators speak the engine's formats ------------------------------------------------------------------------
def test_simulators_parse_and_pass_when_healthy(lab):
    host = lab.gpu_hosts[0]
    assert gpu_checks(lab, host)["passed"]
    assert dcgm_checks(host)["passed"]
    summary = nccl_checks(host)
    assert summary["passed"], summary["failures"]


@pytest.mark.parametrize("fmt", ["text", "json", "yaml"])
def test_kubeadm_plan_parses(lab, fmt):
    """The real kubeadm (the lab's package carries it for plan and dry runs) plans against what the lab keeps
    true: kubeadm-config, the component configs, the control-plane mirror pods (lab/gpufleet_lab/kubeadm.py)."""
    host = "cp-1"
    assert run_ok(host, "kubeadm", "version", "-o", "short").strip() == lab.from_version  # the real binary's
    try:
        apt_install(host, "kubeadm=%s-1.1" % lab.to_version.lstrip("v"))
        args = ["kubeadm", "upgrade", "plan", lab.to_version] + ([] if fmt == "text" else ["-o", fmt])
        plan = parse_plan(run_ok(host, *args))
        assert plan["available"] and plan["offered_versions"] == [lab.to_version]
        assert judge_plan(plan, lab.to_version)["needs_upgrade"]
        components = plan["upgrades"][0]["components"]
        kubelets = [c for c in components if c["name"] == "kubelet"]
        assert sorted(k["node"] for k in kubelets) == sorted(lab.hosts)
        # the control plane's CURRENT, per host, is read from the mirror pods' images
        assert sorted((c["node"], c["current"]) for c in components if c["name"] == "kube-apiserver") == [
            (h, lab.from_version) for h in sorted(lab.control_plane)]
    finally:
        apt_install(host, "kubeadm=%s-1.1" % lab.from_version.lstrip("v"))
    # kubeadm at the cluster's version offers nothing: its progress lines alone, exit 0
    assert parse_plan(run_ok(host, "kubeadm", "upgrade", "plan", lab.from_version))["available"] is False


# -- faults change what the checks see -----------------------------------------------------------------------------
def _test_failure(measured):
    """nccl-tests' own words for a run whose data was wrong (" .. HOST pid N: Test failure common.cu:LINE")."""
    return measured.startswith("Test failure common.cu:")


# Each fault fails its own gate and only that: the failed checks (name, subject, measured) are exactly these.
# A measured value given as a callable is judged by it (bandwidth varies from run to run, under the floor).
GATE_FAULTS = {
    "gpu-missing": ("gpu", {("gpu_count", "", 7)}),
    "xid79": ("gpu", {("gpu_xid", "", lambda m: m.startswith("XID 79 on PCI:0000:9a:00"))}),
    "ecc": ("gpu", {("gpu_uncorrectable_ecc", " gpu 4", 2)}),
    "remap-pending": ("gpu", {("gpu_remap_pending", " gpu 6", "yes")}),
    "dcgm-fail": ("dcgm", {("dcgm_test", " gpu 5 memory", "Fail")}),
    "hostengine-down": ("dcgm", {("dcgm_runtime", "", "Unable to connect to the host engine: the DCGM host engine "
                                                      "is not running (nv-hostengine)")}),
    "nccl-slow": ("nccl", {("nccl_busbw", " size 1G", lambda m: m < 450.0 * 0.9),  # baseline less tolerance
                           ("nccl_busbw", " size 8G", lambda m: m < 470.0 * 0.9)}),
    "nccl-wrong": ("nccl", {(name, " run %d" % run, value) for run in (1, 2, 3)
                            for name, value in (("nccl_wrong_elements", 1024), ("nccl_out_of_bounds", 1),
                                                ("nccl_error", _test_failure))}),
}


@pytest.mark.parametrize("kind", sorted(GATE_FAULTS))
def test_gpu_faults_fail_the_checks(lab, kind):
    host = lab.gpu_hosts[1]
    check, expected = GATE_FAULTS[kind]
    judge = {"gpu": lambda: gpu_checks(lab, host), "dcgm": lambda: dcgm_checks(host),
             "nccl": lambda: nccl_checks(host)}[check]
    assert judge()["passed"]
    lab_cli("fault", host, kind)
    try:
        summary = judge()
    finally:
        lab_cli("clear", host)
    failed = [c for c in summary["checks"] if not c["passed"] and c["severity"] == "fail"]
    assert not summary["passed"] and len(failed) == len(expected), summary["failures"]
    for name, subject, measured in expected:
        (match,) = [c for c in failed if c["name"] == name and c["subject"] == host + subject]
        assert measured(match["measured"]) if callable(measured) else match["measured"] == measured, match
    assert judge()["passed"]


def test_gpu_missing_shows_on_the_node(lab):
    host = lab.gpu_hosts[1]
    lab_cli("fault", host, "gpu-missing")
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            if core(lab).read_node(host).status.allocatable["nvidia.com/gpu"] == "7":
                break
            time.sleep(0.5)
        assert core(lab).read_node(host).status.allocatable["nvidia.com/gpu"] == "7"
    finally:
        lab_cli("clear", host)
    deadline = time.time() + 30
    while time.time() < deadline and core(lab).read_node(host).status.allocatable["nvidia.com/gpu"] != "8":
        time.sleep(0.5)
    assert core(lab).read_node(host).status.allocatable["nvidia.com/gpu"] == "8"


def test_unreachable_host(lab):
    host = lab.gpu_hosts[0]
    lab_cli("fault", host, "unreachable")
    try:
        assert podman_exec(host, "true").returncode != 0
    finally:
        lab_cli("clear", host)
    assert podman_exec(host, "true").returncode == 0


def test_snapshot_fail_fault(lab):
    """Through the `bin/lab` CLI itself (lab_cli calls fault and clear in the test's process): a fault on a host of
    the wrong kind is refused, naming it; snapshot-fail on a control-plane host fails etcdctl; clear undoes it."""
    def cli(*args):
        return subprocess.run([str(ROOT / "bin" / "lab"), *args], check=False, capture_output=True, text=True,
                              env=lab_env(), timeout=120)
    wrong = cli("fault", "gpu-a1", "snapshot-fail")
    assert wrong.returncode == 1 and "fault snapshot-fail applies to control-plane hosts only" in wrong.stderr, \
        wrong.stderr
    made = cli("fault", "cp-2", "snapshot-fail")
    assert made.returncode == 0 and "fault snapshot-fail on cp-2" in made.stdout, made.stdout + made.stderr
    try:
        proc = podman_exec("cp-2", "etcdctl", *ETCD_FLAGS, "snapshot", "save", "/tmp/s.db")
        assert proc.returncode != 0 and "no space left on device" in proc.stderr
    finally:
        cleared = cli("clear", "cp-2")
    assert cleared.returncode == 0 and "faults cleared on cp-2" in cleared.stdout, cleared.stdout + cleared.stderr
    proc = podman_exec("cp-2", "etcdctl", *ETCD_FLAGS, "snapshot", "save", "/tmp/s.db")
    assert proc.returncode == 0, proc.stderr


# -- the training gang (SIMULATION of JobSet, Kueue and the training framework) ---------------------------------------
def _wait(predicate, timeout=45, step=0.5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def test_training_gang_checkpoint_stop_readmit(lab):
    api = core(lab)
    dyn = dynamic.DynamicClient(api.api_client)
    jobsets = dyn.resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")
    workloads = dyn.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")

    def running():
        pods = api.list_namespaced_pod("training", label_selector="jobset.sigs.k8s.io/jobset-name=llm-pretrain").items
        return [p for p in pods if p.status.phase == "Running"] if len(pods) == 2 else []

    ranks = _wait(lambda: len(running()) == 2 and running())
    assert ranks and all(p.spec.node_name in lab.gpu_hosts for p in ranks)
    # the owner chain of a real cluster: each rank's controller is a batch/v1 Job, whose controller is the JobSet
    batch = client.BatchV1Api(api.api_client)
    uid = jobsets.get(name="llm-pretrain", namespace="training").metadata.uid
    for pod in ranks:
        owner = next(r for r in pod.metadata.owner_references if r.controller)
        assert owner.kind == "Job"
        job = batch.read_namespaced_job(owner.name, "training")
        assert [(r.kind, r.uid, r.controller) for r in job.metadata.owner_references] == [("JobSet", uid, True)]
        assert job.spec.backoff_limit == 0
    ann = lambda: jobsets.get(name="llm-pretrain", namespace="training").metadata.annotations  # noqa: E731
    # a rank's node refuses to checkpoint: no confirmation
    lab_cli("fault", ranks[0].spec.node_name, "checkpoint-never")
    try:
        jobsets.patch(name="llm-pretrain", namespace="training", content_type="application/merge-patch+json",
                      body={"metadata": {"annotations": {"gpufleet.io/checkpoint-requested": "never-1"}}})
        time.sleep(8)
        assert ann().get("gpufleet.io/checkpoint-completed") != "never-1"
    finally:
        lab_cli("clear", ranks[0].spec.node_name)
    # checkpoint-and-yield: the job answers the same token
    token = "t-%d" % time.time()
    jobsets.patch(name="llm-pretrain", namespace="training", content_type="application/merge-patch+json",
                  body={"metadata": {"annotations": {"gpufleet.io/checkpoint-requested": token}}})
    assert _wait(lambda: ann().get("gpufleet.io/checkpoint-completed") == token)
    # stop the gang as a unit
    lost_before = (lab.run / "lost-work.jsonl").read_text().splitlines() if (lab.run / "lost-work.jsonl").exists() \
        else []
    workloads.patch(name="jobset-llm-pretrain", namespace="training", content_type="application/merge-patch+json",
                    body={"spec": {"active": False}})
    try:
        assert _wait(lambda: not api.list_namespaced_pod("training").items)
        assert jobsets.get(name="llm-pretrain", namespace="training").spec.suspend is True
        conds = _wait(lambda: workloads.get(name="jobset-llm-pretrain", namespace="training").status)
        evicted = next(c for c in conds["conditions"] if c["type"] == "Evicted")
        assert evicted["status"] == "True" and evicted["reason"] == "Deactivated"
        entry = json.loads((lab.run / "lost-work.jsonl").read_text().splitlines()[len(lost_before)])
        assert entry["jobset"] == "llm-pretrain" and entry["gpus"] == 16
        assert entry["seconds_since_checkpoint"] < 60  # bounded by the checkpoint just taken
    finally:
        workloads.patch(name="jobset-llm-pretrain", namespace="training",
                        content_type="application/merge-patch+json", body={"spec": {"active": True}})
    assert _wait(lambda: len(running()) == 2)
    # a rank evicted alone (what a plain `kubectl drain` does) restarts the whole gang from its last checkpoint:
    # one loss logged, one restart counted, new ranks that keep running
    computing = lambda: (jobsets.get(name="llm-pretrain", namespace="training").metadata.annotations  # noqa: E731
                         .get("gpufleet-lab/ranks"))
    assert _wait(computing)
    old = {p.metadata.name for p in running()}
    restarts = lambda: int(getattr(jobsets.get(name="llm-pretrain", namespace="training").status,  # noqa: E731
                                   "restarts", 0) or 0)
    before = restarts()
    victim = sorted(old)[0]
    lines = len((lab.run / "lost-work.jsonl").read_text().splitlines())
    api.create_namespaced_pod_eviction(victim, "training", {"metadata": {"name": victim, "namespace": "training"}})
    assert _wait(lambda: len((lab.run / "lost-work.jsonl").read_text().splitlines()) > lines)
    entry = json.loads((lab.run / "lost-work.jsonl").read_text().splitlines()[-1])
    assert entry["kind"] == "restart" and victim in entry["reason"] and entry["gpus"] == 16
    assert _wait(lambda: restarts() == before + 1)
    assert _wait(lambda: computing() and not set(computing().split(",")) & old)
    time.sleep(10)  # the new ranks keep running (KWOK does not complete them), and no second restart comes
    assert len(running()) == 2 and restarts() == before + 1
    assert len((lab.run / "lost-work.jsonl").read_text().splitlines()) == lines + 1


# -- an upgrade passes through a mixed-version HA control plane -----------------------------------------------------
def test_rollout_shows_both_apiserver_versions_through_the_load_balancer(lab):
    to = lab.to_version.lstrip("v") + "-1.1"
    back = lab.from_version.lstrip("v") + "-1.1"
    # the real kubeadm, at the cell's version, refuses a target above its own minor (past the two preflight checks
    # the lab's hosts cannot pass: the inventory's configuration below says why)
    proc = podman_exec("cp-1", "kubeadm", "upgrade", "apply", lab.to_version, "-y",
                       "--ignore-preflight-errors=SystemVerification,ContainerRuntimeVersion")
    assert proc.returncode != 0 and "higher than the kubeadm minor release" in proc.stderr, proc.stderr[-2000:]
    # kubeadm's UpgradeConfiguration as the lab inventory gives it (inventories/lab/group_vars): no container
    # runtime and cgroup v1 on the lab's hosts, the shared PKI not renewed, a short manifest timeout
    settings = yaml.safe_load((ROOT / "inventories" / "lab" / "group_vars" / "kube_control_plane.yml").read_text())
    config_text = yaml.safe_dump(upgrade_configuration(settings["kubeadm_upgrade_configuration"], []))
    # the lab's clean-up goes back down one minor, which kubeadm does only when forced
    back_text = yaml.safe_dump(upgrade_configuration(dict(settings["kubeadm_upgrade_configuration"], apply=dict(
        settings["kubeadm_upgrade_configuration"]["apply"], forceUpgrade=True)), []))
    # the fault's run waits out a shorter manifest timeout: nothing is started, so nothing needs the inventory's 60 s
    fault_text = yaml.safe_dump(upgrade_configuration(dict(settings["kubeadm_upgrade_configuration"], timeouts={
        "upgradeManifests": "15s"}), []))
    for path, text in (("/etc/kubernetes/lab-upgrade.yaml", config_text), ("/etc/kubernetes/lab-back.yaml", back_text),
                       ("/etc/kubernetes/lab-fault.yaml", fault_text)):
        assert podman_exec("cp-1", "sh", "-c", "cat > " + path, stdin=text).returncode == 0
    with_config = ["-y", "--config", "/etc/kubernetes/lab-upgrade.yaml"]
    apt_install("cp-1", "kubeadm=" + to)
    dry = podman_exec("cp-1", "kubeadm", "upgrade", "apply", lab.to_version, "--dry-run", *with_config)
    assert dry.returncode == 0 and "[upgrade/successful] Finished dryrunning successfully!" in dry.stdout, \
        dry.stdout[-2000:] + dry.stderr[-2000:]
    assert "image: registry.k8s.io/kube-apiserver:%s" % lab.to_version in dry.stdout  # the manifest it would write
    assert apiserver_version(lab, "cp-1") == lab.from_version  # a dry run changes nothing
    # a new apiserver manifest that never starts (the apiserver-start-fail fault): the real kubeadm waits out its
    # manifest timeout, rolls the manifests back and says so; the host runs its old manifest
    before = podman_exec("cp-1", "cat", "/etc/kubernetes/manifests/kube-apiserver.yaml").stdout
    lab_cli("fault", "cp-1", "apiserver-start-fail")
    try:
        failed = podman_exec("cp-1", "kubeadm", "upgrade", "apply", lab.to_version, "-y", "--config",
                             "/etc/kubernetes/lab-fault.yaml")
    finally:
        lab_cli("clear", "cp-1")
    assert failed.returncode != 0
    assert "couldn't upgrade control plane. kubeadm has tried to recover everything into the earlier state" in \
        failed.stderr and "static Pod hash for component kube-apiserver on Node cp-1 did not change" in \
        failed.stderr, failed.stderr[-2000:]
    assert podman_exec("cp-1", "cat", "/etc/kubernetes/manifests/kube-apiserver.yaml").stdout == before
    assert apiserver_version(lab, "cp-1") == lab.from_version
    try:
        out = run_ok("cp-1", "kubeadm", "upgrade", "apply", lab.to_version, *with_config)
        assert "[upgrade] SUCCESS!" in out, out[-2000:]
        # the real kubeadm wrote the manifest; the lab runs what it says (version, flags) and the mirror pod
        # carries it: the image, the hash kubeadm waited for, kubeadm-config's kubernetesVersion
        manifest = yaml.safe_load(podman_exec("cp-1", "cat", "/etc/kubernetes/manifests/kube-apiserver.yaml").stdout)
        assert manifest["spec"]["containers"][0]["image"] == "registry.k8s.io/kube-apiserver:%s" % lab.to_version
        pod = core(lab).read_namespaced_pod("kube-apiserver-cp-1", "kube-system")
        assert pod.spec.containers[0].image == "registry.k8s.io/kube-apiserver:%s" % lab.to_version
        assert pod.spec.containers[0].command == manifest["spec"]["containers"][0]["command"]
        kubeadm_config = core(lab).read_namespaced_config_map("kubeadm-config", "kube-system")
        assert "kubernetesVersion: %s" % lab.to_version in kubeadm_config.data["ClusterConfiguration"]
        images = {h: core(lab).read_namespaced_pod("kube-apiserver-%s" % h, "kube-system").spec.containers[0].image
                  for h in lab.control_plane}
        assert images["cp-2"] == "registry.k8s.io/kube-apiserver:%s" % lab.from_version
        # and the real kubeadm now plans nothing: kubeadm-config names the target, the other hosts follow with
        # `kubeadm upgrade node` (so kubeadm_upgrade judges the plan only while its first host is behind)
        assert parse_plan(run_ok("cp-1", "kubeadm", "upgrade", "plan", lab.to_version))["available"] is False
        versions = {h: apiserver_version(lab, h) for h in lab.control_plane}
        assert versions == {"cp-1": lab.to_version, "cp-2": lab.from_version, "cp-3": lab.from_version}
        # through the load balancer, clients see both versions during the rollout
        seen = set()
        for _ in range(12):
            seen.add(client.VersionApi(config.new_client_from_config(str(lab.kubeconfig))).get_code().git_version)
        assert seen == {lab.from_version, lab.to_version}
        # each host's controller manager and scheduler run its own manifests, as kubeadm moved them with the
        # apiserver; cp-2 and cp-3 are not upgraded yet
        wait_control_plane(lab, {h: lab.to_version if h == "cp-1" else lab.from_version for h in lab.control_plane})
        # the kubelet restarted at a new package version reports it on its Node
        apt_install("gpu-b1", "kubelet=" + to)
        run_ok("gpu-b1", "systemctl", "restart", "kubelet")
        assert core(lab).read_node("gpu-b1").status.node_info.kubelet_version == lab.to_version
    finally:
        # The lab's own clean-up, not gpufleet's way back (that is playbooks/etcd_restore.yml, tested in
        # tests/lab/test_etcd_snapshot_role.py): the real kubeadm takes cp-1 down one minor, as it allows, so the
        # tests after this one start from the cell's version (forced, as kubeadm wants for a downgrade); its addon
        # phase is skipped, or the target's kubeadm would move CoreDNS to the version it pins.
        apt_install("gpu-b1", "kubelet=" + back)
        run_ok("gpu-b1", "systemctl", "restart", "kubelet")
        run_ok("cp-1", "kubeadm", "upgrade", "apply", lab.from_version, "-y", "--config",
               "/etc/kubernetes/lab-back.yaml", "--skip-phases=addon")
        apt_install("cp-1", "kubeadm=" + back)
        run_ok("cp-1", "apt-mark", "hold", "kubeadm", "kubelet")
    assert apiserver_version(lab, "cp-1") == lab.from_version
