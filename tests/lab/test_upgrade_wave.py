"""The full upgrade of the lab cell with playbooks/upgrade_wave.yml, as an operator runs it (issue 4's "done
when"): bad input refused before any change; each injected fault halts at the right point with the right message
while later waves never start; after each fault is cleared a rerun resumes from the per-node ledger; the cell ends
on the next minor with every gate green, the training gang checkpointed, stopped, readmitted and its lost work
bounded by the checkpoint time; a change record is written; a second run changes nothing.
The finishing run is the AWX job: the upgrade_wave template launched with its survey, through ansible-runner with
process isolation in the execution-environment image (tests/lab/awx_job.py), as the operator relaunches it from AWX
once the faults are cleared.

One story in one test: every step starts from the state the previous one left, as in a real maintenance window.
The module fixture starts from a fresh lab (`lab reset` + `up`) and leaves the upgraded cell behind (the AWX jobs'
tests and the etcd window that `make test` runs after it on this cell take it as it is); a story that did not reach
its end leaves a fresh one instead, so that no half-upgraded cell with a fault armed fails the tests after it for
the wrong reason."""
from __future__ import annotations

import calendar
import concurrent.futures
import json
import os
import pathlib
import re
import resource
import subprocess
import sys
import time

import pytest
import yaml
from kubernetes import client, config

from gpufleet_lab import cluster as lab_cluster
from gpufleet_lab import helm as lab_helm
from gpufleet_lab import kube as lab_kube
from gpufleet_lab import kubeadm as lab_kubeadm
from gpufleet_lab import network as lab_network
from gpufleet_lab import procs
from tests.lab import awx_job
from tests.lab.conftest import ROOT, apiserver_version, etcd_flags, lab_cli, podman_exec

pytestmark = pytest.mark.lab
BIN = pathlib.Path(sys.executable).parent
WAVES = [["gpu-a1"], ["gpu-a2"], ["gpu-b1", "gpu-b2"]]  # canary, then rack set rs-a's rest, then rs-b (cap 16 GPUs)
ANN = "gpufleet.io/"


@pytest.fixture(scope="module")
def cell(lab, tmp_path_factory):
    # from a fresh cell: reset, unless `make test` has just reset this one for it (GPUFLEET_LAB_FRESH; taken once)
    if os.environ.pop("GPUFLEET_LAB_FRESH", "") != lab.cell:
        lab_cli("reset")
    lab_cli("up")
    records = tmp_path_factory.mktemp("change-records")
    story = {"finished": False}
    yield lab, records, story
    if not story["finished"]:
        lab_cli("reset")
        lab_cli("up")


def run(lab, records, playbook, *extra):
    # JSON results: one line per message, so the messages are matched as the user reads them (no YAML folding)
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", GPUFLEET_CHANGE_RECORD_DIR=str(records),
               PATH="%s:%s" % (BIN, os.environ["PATH"]))
    started, cpu = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([str(BIN / "ansible-playbook"), "playbooks/" + playbook, "-i", str(lab.inventory), *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=3000)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the run's own processes on this machine, not the hosts'
    print("%s %s: rc=%d in %.0f s, %.1f CPU-s" % (playbook, " ".join(extra), proc.returncode, time.time() - started,
                                                 after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime))
    return proc


def core(lab):
    return client.CoreV1Api(config.new_client_from_config(str(lab.kubeconfig)))


def nodes(lab):
    return {n.metadata.name: n for n in core(lab).list_node().items}


def ann(node, key):
    return (node.metadata.annotations or {}).get(ANN + key)


def apiservers(lab):
    return json.loads(lab_cli("status").stdout)["apiserver_versions"]


def etcd_version(lab):
    """What the cell's etcd members report they run (etcdctl endpoint status, through consensus)."""
    proc = podman_exec("cp-1", "etcdctl", *etcd_flags(lab), "endpoint", "status", "--cluster", "-w", "json")
    assert proc.returncode == 0, proc.stderr
    return sorted({e["Status"]["version"] for e in json.loads(proc.stdout)})


def kubeadm_runs(host):
    """Every kubeadm apply and node run on this host: its arguments (argv) and the version the real binary reported
    (binary), as the lab's kubeadm package records them before it runs the real one."""
    proc = podman_exec(host, "cat", "/var/lib/gpufleet-lab/kubeadm-calls.jsonl")
    return [json.loads(line) for line in proc.stdout.splitlines()] if proc.returncode == 0 else []


UPGRADE_CONFIG = "/etc/kubernetes/gpufleet-upgrade-config.yaml"  # the kubeadm_upgrade role's default


def host_file(lab, host, path):
    proc = podman_exec(host, "cat", path)
    assert proc.returncode == 0, (host, path, proc.stderr)
    return proc.stdout


def manifest_text(lab, host, component):
    return host_file(lab, host, "/etc/kubernetes/manifests/%s.yaml" % component)


def running_args(lab, host, component):
    """The flags the host's process of static pod ``component`` runs with, the host's files written as the host
    has them (the lab runs the process on the lab machine: lab/gpufleet_lab/cluster.py component_argv); and it runs
    in the host's own network namespace."""
    pid = procs.pid_of(lab.run, lab_cluster.process_name(component, host))
    assert pid, (host, component)
    ns, want = os.stat("/proc/%d/ns/net" % pid), os.stat("/run/netns/" + lab_network.netns(lab, host))
    assert (ns.st_dev, ns.st_ino) == (want.st_dev, want.st_ino), (host, component)
    argv = pathlib.Path("/proc/%d/cmdline" % pid).read_bytes().decode().split("\0")[1:-1]
    for on_host, here in lab_cluster.host_paths(lab, host):
        argv = [a.replace(here, on_host) for a in argv]
    return argv


def kubeadm_config_managers(lab):
    """The field managers of the kubeadm-config ConfigMap."""
    api = config.new_client_from_config(str(lab.kubeconfig))
    cm = client.CoreV1Api(api).read_namespaced_config_map("kubeadm-config", "kube-system")
    return sorted({m.manager for m in cm.metadata.managed_fields or []})


def untouched(lab, names):
    """Nodes the run never started on: old kubelet, schedulable, no ledger."""
    current = nodes(lab)
    for name in names:
        n = current[name]
        assert n.status.node_info.kubelet_version == lab.from_version, name
        assert not n.spec.unschedulable, name
        assert ann(n, "upgrade-phase") is None, name


def failed_on(lab, name, reason_part):
    n = nodes(lab)[name]
    assert n.spec.unschedulable, "%s must stay cordoned" % name
    assert ann(n, "upgrade-phase") == "failed", name
    assert reason_part in (ann(n, "upgrade-reason") or ""), ann(n, "upgrade-reason")


def held_by(lab, name, reason_part):
    n = nodes(lab)[name]
    assert n.spec.unschedulable, "%s must stay cordoned" % name
    assert ann(n, "upgrade-phase") == "held", (name, ann(n, "upgrade-phase"), ann(n, "upgrade-reason"))
    assert reason_part in (ann(n, "upgrade-reason") or ""), ann(n, "upgrade-reason")


def first_pending_wave(lab):
    current = nodes(lab)
    for index, wave in enumerate(WAVES):
        if any(ann(current[n], "upgrade-phase") != "done" for n in wave):
            return index
    return None


def gang_nodes(lab):
    pods = core(lab).list_namespaced_pod("training").items
    return sorted({p.spec.node_name for p in pods if p.spec.node_name and not p.metadata.deletion_timestamp})


def workload_active(lab):
    custom = client.CustomObjectsApi(config.new_client_from_config(str(lab.kubeconfig)))
    return custom.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "training", "workloads",
                                               "jobset-llm-pretrain")["spec"]["active"]


def assert_halted(proc, *needles):
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-5000:]
    for needle in needles:
        assert needle in out, "%r not in output:\n%s" % (needle, out[-6000:])


def gpu_fault(lab, records, fault, needle, reason, *extra):
    """Inject ``fault`` on the first node of the first wave not finished; the GPU waves halt there with the
    message, the node stays cordoned with the reason, later waves never start; clear it."""
    index = first_pending_wave(lab)
    host = WAVES[index][0]
    lab_cli("fault", host, fault)
    try:
        if fault == "pdb-block":  # the guarded pod runs and the disruption controller has judged its budget
            policy = client.PolicyV1Api(config.new_client_from_config(str(lab.kubeconfig)))
            deadline = time.time() + 60
            while True:
                pdb = policy.read_namespaced_pod_disruption_budget("pdb-block-" + host, "gpufleet-lab-faults")
                if pdb.status and pdb.status.observed_generation and pdb.status.current_healthy == 1:
                    break
                assert time.time() < deadline, "the pdb-block fault's budget was never computed"
                time.sleep(1)
        proc = run(lab, records, "node_pool.yml", *extra)
    finally:
        lab_cli("clear", host)
    assert_halted(proc, needle, "Later waves were not started")
    failed_on(lab, host, reason)
    untouched(lab, [n for wave in WAVES[index + 1:] for n in wave])


def test_upgrade_wave_halts_on_every_fault_resumes_and_finishes(cell, tmp_path):
    lab, records, story = cell
    started = time.time()

    # 1. Bad input: refused before any change, naming the field and the fix. The runs change nothing, so they
    #    run side by side.
    bad = {
        "skip": ("upgrade_wave.yml", "-e", "gpufleet_target_version=v1.37.0"),
        "down": ("preflight.yml", "-e", "gpufleet_target_version=v1.34.0"),
        "nobase": ("preflight.yml", "-e", "gpufleet_baseline_dir=/nonexistent"),
        "short": ("preflight.yml", "-e", "gpufleet_target_version=v1.36"),
        "limited": ("upgrade_wave.yml", "--limit", "gpu-a1"),
        "other": ("upgrade_wave.yml", "-e", "gpufleet_cluster_uid=2f1e0000-0000-4000-8000-00000000c0de"),
        # an addon that does not support the target (the operator's own matrix row says Kueue 0.17 stops at 1.35)
        # and one the shipped matrix does not know (the lab inventory defines it), its own row stopping at 1.35:
        # one preflight reports both blockers
        "addon": ("preflight.yml", "-e", json.dumps({"gpufleet_addon_support": [
            {"addon": "kueue", "version": "0.17", "kube_min": "1.30", "kube_max": "1.35",
             "source": "https://example.invalid/kueue-0.17-notes"},
            {"addon": "sigstore_policy_controller", "version": "0.10", "kube_min": "1.32", "kube_max": "1.35",
             "source": "https://github.com/sigstore/policy-controller#support-policy"}]})),
        "addon-row": ("preflight.yml", "-e", json.dumps({"gpufleet_addon_support": [{"addon": "kueue"}]})),
        "addon-range": ("preflight.yml", "-e", json.dumps({"gpufleet_addon_support": [
            {"addon": "sigstore_policy_controller", "version": "0.10", "kube_min": "1.36", "kube_max": "1.35",
             "source": "https://github.com/sigstore/policy-controller#support-policy"}]})),
    }
    with concurrent.futures.ThreadPoolExecutor(len(bad)) as pool:
        refused = dict(zip(bad, pool.map(lambda args: run(lab, records, *args), bad.values())))
    assert_halted(refused["skip"], "v1.37.0")
    assert_halted(refused["down"], "downgrade")
    assert_halted(refused["nobase"], "/nonexistent/h100-train.yml")
    assert_halted(refused["short"], "is not a full release; give one such as v1.36.0")
    assert_halted(refused["limited"], "--limit gpu-a1: the upgrade plays plan whole failure domains")
    assert_halted(refused["other"], "is not cell lab's: its kube-system UID is",
                  "the inventory records 2f1e0000-0000-4000")
    assert_halted(refused["addon"], "addon: Kueue 0.17 (Deployment kueue-system/kueue-controller-manager image "
                  "registry.k8s.io/kueue/kueue:v0.17.0) supports Kubernetes 1.30-1.35, not the target %s" %
                  lab.to_version.lstrip("v").rsplit(".", 1)[0])
    assert_halted(refused["addon-row"], "gpufleet_addon_support[0].version: give a MAJOR.MINOR version")
    assert_halted(refused["addon"], "Sigstore policy-controller 0.10 (Deployment cosign-system/policy-controller-"
                  "webhook image %s) supports Kubernetes 1.32-1.35, not the target %s" % (
                      lab_kube.POLICY_CONTROLLER_IMAGE, lab.to_version.lstrip("v").rsplit(".", 1)[0]))
    assert_halted(refused["addon-range"], "gpufleet_addon_support[0]: kube_min 1.36 is above kube_max 1.35, an empty "
                  "range")
    assert set(apiservers(lab).values()) == {lab.from_version}
    untouched(lab, [n for wave in WAVES for n in wave])

    # 2. etcd snapshot fails: the control plane never starts.
    lab_cli("fault", "cp-1", "snapshot-fail")
    try:
        proc = run(lab, records, "upgrade_wave.yml", "-e", "etcd_snapshot_reuse_minutes=0")
    finally:
        lab_cli("clear", "cp-1")
    assert_halted(proc, "etcd snapshot on cp-1 failed", "etcd is still running and healthy")
    assert set(apiservers(lab).values()) == {lab.from_version}

    # 3. The real kubeadm upgrade apply on the first control-plane host writes the new kube-apiserver manifest,
    #    which never starts (the lab's kubelet stand-in holds it back): kubeadm rolls the manifests back after its
    #    manifest timeout (the lab's UpgradeConfiguration lowers it) and the wave halts there with kubeadm's words;
    #    cp-2, cp-3 and every GPU node untouched, cp-1 runs its old manifest again.
    #    The new apiserver never starts, so kubeadm only waits its manifest timeout out: this run gives it 15 s, not
    #    the inventory's 60 s (which covers a real start on a busy machine).
    before = manifest_text(lab, "cp-1", "kube-apiserver")
    settings = yaml.safe_load((ROOT / "inventories" / "lab" / "group_vars" / "kube_control_plane.yml").read_text())
    short = dict(settings["kubeadm_upgrade_configuration"], timeouts={"upgradeManifests": "15s"})
    lab_cli("fault", "cp-1", "apiserver-start-fail")
    try:
        proc = run(lab, records, "upgrade_wave.yml", "-e", json.dumps({"kubeadm_upgrade_configuration": short}))
        # still under the fault: cp-1 serves its old version from its old manifest, which its mirror pod carries
        assert apiserver_version(lab, "cp-1") == lab.from_version
        pod = core(lab).read_namespaced_pod("kube-apiserver-cp-1", "kube-system")
        assert pod.metadata.annotations["kubernetes.io/config.hash"] == lab_kubeadm.config_hash(before)
    finally:
        lab_cli("clear", "cp-1")
    assert_halted(proc, "kubeadm upgrade apply %s -y --config %s failed on cp-1" % (lab.to_version, UPGRADE_CONFIG),
                  "couldn't upgrade control plane. kubeadm has tried to recover everything into the earlier state",
                  "static Pod hash for component kube-apiserver on Node cp-1 did not change",
                  "every node wave were not")
    assert set(apiservers(lab).values()) == {lab.from_version}
    assert manifest_text(lab, "cp-1", "kube-apiserver") == before  # rolled back by kubeadm itself
    untouched(lab, [n for wave in WAVES for n in wave])

    # 3b. Each control-plane host's new apiserver is soaked on its signals against the reading before it moved and
    #     its peers, with no retry. cp-2's writes go through an admission webhook that answers after 8 s, once
    #     kubeadm moved it: cp-1 moves and soaks clean, the run halts at cp-2's soak naming its write latency with
    #     its values, cp-3 untouched. Then cp-3's apiserver answers a load client 429 (API Priority and Fairness, a
    #     level with no seats) once moved: the rerun soaks cp-2 again - it ran the target already, so its peers
    #     alone are the reference - and halts at cp-3's soak naming the 429s. These two runs are the control-plane
    #     stage alone (control_plane.yml, as an operator reruns a halted stage): the whole pipeline halting at the
    #     control plane is step 3's.
    for host, fault, halts in (("cp-2", "soak-latency", "p99_seconds.write"),
                               ("cp-3", "soak-429", "throttled_per_minute")):
        lab_cli("fault", host, fault)
        try:
            proc = run(lab, records, "control_plane.yml")
        finally:
            lab_cli("clear", host)
        assert_halted(proc, "%s: the control-plane soak failed: %s" % (host, halts))
        out = proc.stdout + proc.stderr
        found = re.search(r"%s: the control-plane soak failed: %s ([0-9.]+)(?: s|/min)(?: \(the last [0-9]+ s\))?, "
                          r"before ([0-9.]+|unmeasured)(?: s|/min)?, peers ([0-9.]+|unmeasured)(?: s|/min)? "
                          r"\(limit ([0-9.]+)" % (host, re.escape(halts)), out)
        assert found, out[-6000:]
        after, limit = float(found.group(1)), float(found.group(4))
        assert after >= 10 * limit, found.group(0)  # the fault is at least ten times past its threshold
        node = nodes(lab)[host]  # the ledger keeps why (its kubelet was not reached: it is not cordoned)
        assert ann(node, "upgrade-phase") == "failed" and "the control-plane soak failed" in ann(node, "upgrade-reason")
        versions = apiservers(lab)
        assert versions[host] == lab.to_version and versions["cp-1"] == lab.to_version
        assert versions["cp-3"] == (lab.from_version if host == "cp-2" else lab.to_version)
        untouched(lab, [n for wave in WAVES for n in wave])
        # the run's change record keeps each soak: every signal after the move, before it and on the peers
        record = json.loads(sorted(records.glob("*control_plane.yml.json"), key=lambda p: p.stat().st_mtime)[-1]
                            .read_text())
        soaks = {e["host"]: e for e in record["control_plane_soak"]}
        assert soaks[host]["passed"] is False and abs(soaks[host]["reading"][halts] - after) < 0.06
        clean = "cp-1" if host == "cp-2" else "cp-2"
        assert soaks[clean]["passed"] is True and set(soaks[clean]["peers"]) == {"cp-1", "cp-2", "cp-3"} - {clean}
        assert (soaks[clean]["before"] is None) == (host == "cp-3")  # cp-2 ran the target when the rerun reached it
        assert {g["check"] for g in record["gates"] if g["subject"] == clean} >= {
            "apiserver_throttled_per_minute", "apiserver_p99_seconds_write", "apiserver_rss_bytes"}

    # 4. The control plane goes through; the first wave holding a rank of the gang cannot checkpoint: the gang
    #    is not stopped, that wave stays cordoned, later waves never start.
    etcd_before = etcd_version(lab)
    gpu_hosts = [n for wave in WAVES for n in wave]
    for host in gpu_hosts:
        lab_cli("fault", host, "checkpoint-never")
    try:
        ranks = gang_nodes(lab)
        proc = run(lab, records, "upgrade_wave.yml", "-e", "drain_checkpoint_timeout=5")
    finally:
        for host in gpu_hosts:
            lab_cli("clear", host)
    assert set(apiservers(lab).values()) == {lab.to_version}
    # The real kubeadm of the target ran apply on cp-1 and node on the others, each with the role's
    # UpgradeConfiguration, which keeps etcd out; etcd runs what it ran before (the lab's etcd is external, which
    # kubeadm never upgrades whatever etcdUpgrade says: the configuration is what guards a stacked member)
    runs = {host: kubeadm_runs(host) for host in sorted(apiservers(lab))}
    assert [r["argv"][:2] for r in runs["cp-1"]][-1:] == [["upgrade", "apply"]], runs
    assert all(r and r[-1]["argv"][:2] == ["upgrade", "node"] for h, r in runs.items() if h != "cp-1"), runs
    assert {r[-1]["binary"] for r in runs.values()} == {lab.to_version}, runs  # the binary's own version string
    for host in runs:
        argv = runs[host][-1]["argv"]
        assert "--config" in argv and argv[argv.index("--config") + 1] == UPGRADE_CONFIG, argv
        given = yaml.safe_load(host_file(lab, host, UPGRADE_CONFIG))
        assert given["apply"]["etcdUpgrade"] is False and given["node"]["etcdUpgrade"] is False, given
    assert etcd_version(lab) == etcd_before and etcd_before, etcd_before
    # each control-plane component runs what kubeadm's manifest says, and kubeadm-config is kubeadm's
    for host in runs:
        for component in lab_kubeadm.COMPONENTS:
            manifest = yaml.safe_load(manifest_text(lab, host, component))
            assert manifest["spec"]["containers"][0]["image"].endswith(":" + lab.to_version)
            assert running_args(lab, host, component) == manifest["spec"]["containers"][0]["command"][1:]
    assert "kubeadm" in kubeadm_config_managers(lab), kubeadm_config_managers(lab)
    assert_halted(proc, "checkpoint not confirmed within 5s", "The gang was NOT stopped")
    halted = next(i for i, wave in enumerate(WAVES) if set(wave) & set(ranks))
    for host in WAVES[halted]:
        failed_on(lab, host, "checkpoint not confirmed")
    assert workload_active(lab) is True
    untouched(lab, [n for wave in WAVES[halted + 1:] for n in wave])

    # 5. Gate faults, each on the first unfinished wave: it halts there, the node keeps its reason.
    gpu_fault(lab, records, "gpu-missing", "check gpu_count: measured 7, baseline 8", "gpu_health")
    gpu_fault(lab, records, "xid79", "check gpu_xid: measured XID 79", "gpu_health")
    gpu_fault(lab, records, "dcgm-fail", "dcgm_diag gate failed", "dcgm_diag")
    gpu_fault(lab, records, "nccl-slow", "nccl_allreduce gate failed", "nccl_allreduce")
    gpu_fault(lab, records, "pdb-block", "Cannot evict pod as it would violate the pod's disruption budget",
              "PodDisruptionBudget gpufleet-lab-faults/pdb-block-", "-e", "drain_timeout=10",
              "-e", "drain_retry_interval=2")

    # 6. An unreachable host stops its wave before anything on it changes.
    index = first_pending_wave(lab)
    host = WAVES[index][-1]
    lab_cli("fault", host, "unreachable")
    try:
        proc = run(lab, records, "node_pool.yml")
    finally:
        lab_cli("clear", host)
    assert_halted(proc, "Reach every host of the wave before anything on it changes", "timed out waiting for")
    untouched(lab, [n for wave in WAVES[index + 1:] for n in wave])

    # 7. Wave boundaries that hold, in a wave of two nodes (no canary: a rack set per wave). The rack set is the
    #    first one the story has not finished anything of (where the lab's scheduler put the gang's ranks decides
    #    how far step 4 got); its node still on the old kubelet package is the one to fail.
    two = ["-e", json.dumps({"gpufleet_wave_caps": {"max_gpu_fraction": 0.5, "canaries_per_gpu_type": 0}})]
    current = nodes(lab)
    racks = [sorted(hosts) for _, hosts in sorted(lab.rack_sets.items())]
    index = next(i for i, rack in enumerate(racks) if all(ann(current[h], "upgrade-phase") != "done" for h in rack))
    rack, later = racks[index], [h for r in racks[index + 1:] for h in r]
    bad = [h for h in rack if current[h].status.node_info.kubelet_version == lab.from_version][-1]
    mate = next(h for h in rack if h != bad)
    wave = "Wave %d (domain: %s) failed" % (index + 1, lab.rack_set_of(bad))
    # 7a. The node hangs in the middle of its kubelet package upgrade (the new package's preinst pauses it): over
    #     SSH Ansible reports it UNREACHABLE. It is recorded failed - unreachable, with the stage - its wave-mate is
    #     held because of it, and the next wave does not start.
    lab_cli("fault", bad, "pause-in-upgrade")
    try:
        proc = run(lab, records, "node_pool.yml", *two)
    finally:
        lab_cli("clear", bad)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "UNREACHABLE" in out, out[-6000:]
    failed_on(lab, bad, "unreachable during the package upgrade")
    held_by(lab, mate, "held: wave-mate %s failed unreachable during the package upgrade" % bad)
    untouched(lab, later)
    # 7b. It fails a gate: it keeps its own reason, its healthy wave-mate is held because of it, later waves untouched.
    lab_cli("fault", bad, "gpu-missing")
    try:
        proc = run(lab, records, "node_pool.yml", *two)
    finally:
        lab_cli("clear", bad)
    assert_halted(proc, wave, "Later waves were not started")
    failed_on(lab, bad, "check gpu_count: measured 7, baseline 8")
    held_by(lab, mate, "held: wave-mate %s failed" % bad)
    untouched(lab, later)

    # 8. Everything cleared: the rerun, from AWX in the execution environment, resumes and finishes. The target
    #    answered without its v gives the same ledger.
    ee_image = lab_cli("ee").stdout.strip().splitlines()[-1]  # built beside the lab tests by now (layer-cached)
    job = awx_job.run(lab, tmp_path, "upgrade_wave", image=ee_image,
                      answers={"gpufleet_target_version": lab.to_version.lstrip("v")})
    assert job.rc == 0, job.stdout[-6000:]
    assert set(apiservers(lab).values()) == {lab.to_version}
    for name, n in nodes(lab).items():
        assert n.status.node_info.kubelet_version == lab.to_version, name
        assert not n.spec.unschedulable, name
        assert ann(n, "upgrade-phase") == "done" and ann(n, "upgrade-target") == lab.to_version, name
    assert workload_active(lab) is True
    # The addons stage (after the control plane) moved the lab's Helm release with the real helm; kubeadm's addon
    # phase moved kube-proxy and CoreDNS once every apiserver ran the target.
    releases = json.loads(lab_helm.run(lab, "history", lab_helm.RELEASE, "-n", lab_helm.NAMESPACE, "-o",
                                       "json").stdout)
    assert releases[-1]["status"] == "deployed" and releases[-1]["chart"] == "%s-%s" % (
        lab_helm.CHART.name, lab_helm.VERSIONS[-1]), releases
    apps = client.AppsV1Api(config.new_client_from_config(str(lab.kubeconfig)))
    proxy = apps.read_namespaced_daemon_set("kube-proxy", "kube-system").spec.template.spec.containers[0].image
    assert proxy == "registry.k8s.io/kube-proxy:%s" % lab.to_version
    deadline = time.time() + 60
    while len(gang_nodes(lab)) < 2:
        assert time.time() < deadline, "the gang was not readmitted"
        time.sleep(1)

    # The gang was only ever stopped as a unit right after a confirmed checkpoint: no rank died alone, and each
    # stop lost at most the seconds since that checkpoint (the lab job checkpoints in 3 s).
    losses = [json.loads(line) for line in (lab.run / "lost-work.jsonl").read_text().splitlines()]
    losses = [e for e in losses if calendar.timegm(time.strptime(e["time"], "%Y-%m-%dT%H:%M:%SZ")) >= started - 1]
    assert losses and all(e["reason"] == "workload deactivated" for e in losses), losses
    assert max(e["seconds_since_checkpoint"] for e in losses) < 30, losses

    # The change record of the finishing run: waves with hosts, every gate against its baseline, green.
    record = json.loads(job.records("*-upgrade_wave.yml.json")[-1].read_text())  # kept with the AWX job
    assert record["outcome"] == "succeeded" and record["target_version"] == lab.to_version
    gates = record["gates"]
    assert {g["check"] for g in gates} >= {"gpu_count", "gpu_xid", "dcgm_test", "nccl_busbw"}, gates[:5]
    assert all(g["passed"] or g["severity"] == "warn" for g in gates)
    waves = {host: e["wave"] for p in record["plays"] for host, e in p["hosts"].items() if e.get("wave")}
    assert waves.get("gpu-a1", "").startswith("1 (canary") and waves.get("gpu-b2", "").startswith("3 (domain")
    assert "gpu-a1" in record["canary_scope"]
    # The security checks ran in preflight, after the control plane and after each of the three waves, against
    # the baseline taken before the control plane moved (the apiserver's reconciled system: roles are recorded).
    # (a wave with nodes still to do is checked before it starts too: which waves those are depends on the story)
    checked = [e for e in record["security"] if e["report"]]
    assert all(e["passed"] for e in checked), checked
    labels = [(e["task"].split(" : ")[-1].split(" - ")[0].split(" (")[0], e["wave"].split(" ")[0]) for e in checked
              if not e["task"].startswith("Security before the wave")]
    assert labels == [("Judge the security that must survive the upgrade", ""),
                      ("Security after the control plane", ""), ("Security after the wave", "1"),
                      ("Security after the wave", "2"), ("Security after the wave", "3")], labels
    assert all(e["report"]["baseline"]["target"] == lab.to_version for e in checked)
    # The device plugin's chart brings a Role that reads one Secret from 0.17.4 (lab/charts): after the addons stage
    # it is a new powerful grant, judged expected only because the Helm release revision it applied holds it.
    helm = {g for e in checked for g in (e["report"].get("rbac") or {}).get("expected_powerful_grants") or []}
    assert any(g.startswith("ServiceAccount nvidia-device-plugin/nvidia-device-plugin: reads Secrets") and
               "(Helm release nvidia-device-plugin/nvidia-device-plugin revision 2 (chart 0.17.4))" in g
               for g in helm), helm

    # The canary wave ran work on gpu-a1 before the later waves (in whichever run got the canary through its
    # gates): the training gang's all-reduce and the inference service's latency, both judged and passed. Which
    # run that was depends on where the scheduler put the gang's ranks (step 4): a CLI run of the story, whose
    # records are in `records`, or the finishing AWX job, whose records are kept with the job - the newest.
    paths = sorted(records.glob("*.json")) + job.records("*.json")
    canaries = [(r["workload"], tuple(r["nodes"]), r["passed"]) for path in paths
                for r in json.loads(path.read_text()).get("canary_workloads") or []]
    assert canaries[-2:] == [("training", ("gpu-a1",), True), ("inference", ("gpu-a1",), True)], canaries

    # 9. A second run on the finished cell changes nothing.
    again = run(lab, records, "upgrade_wave.yml")
    assert again.returncode == 0, again.stdout[-4000:]
    recap = re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", again.stdout, re.M)
    assert recap and all(changed == "0" for _, changed in recap), recap

    # 9b. A security fault after a wave halts the next wave: a ServiceAccount bound to cluster-admin mid-window.
    rbac = client.RbacAuthorizationV1Api(config.new_client_from_config(str(lab.kubeconfig)))
    rbac.create_cluster_role_binding({"metadata": {"name": "story-escalation"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "training"}]})
    try:
        proc = run(lab, records, "node_pool.yml")
    finally:
        rbac.delete_cluster_role_binding("story-escalation")
    assert_halted(proc, "Security after the wave", "check rbac_no_new_powerful_grant: measured ServiceAccount "
                  "training/default: every ")
    assert "through ClusterRole cluster-admin (cluster), by binding story-escalation" in proc.stdout
    assert proc.stdout.count("TASK [Security after the wave") == 1, "a later wave ran after the halt"

    # 10. Gates only, on the finished cell: nothing changes, every gate passes.
    check = run(lab, records, "validate.yml")
    assert check.returncode == 0, check.stdout[-4000:]
    recap = re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", check.stdout, re.M)
    assert recap and all(changed == "0" for _, changed in recap), recap

    # 11. Maintenance of one node: drained and held for a manual repair, then returned after its self-test.
    repair = ["-e", "gpufleet_node=gpu-a2", "-e", "gpufleet_maintenance_action=repair"]
    held = run(lab, records, "maintenance.yml", *repair)
    assert held.returncode == 0, held.stdout[-4000:]
    n = nodes(lab)["gpu-a2"]
    assert n.spec.unschedulable and ann(n, "upgrade-phase") == "drained"
    assert "gpu-a2" not in gang_nodes(lab)
    back = run(lab, records, "maintenance.yml", *repair, "-e", "gpufleet_repaired=true",
               "-e", "gpufleet_observe_seconds=1")
    assert back.returncode == 0, back.stdout[-4000:]
    n = nodes(lab)["gpu-a2"]
    assert not n.spec.unschedulable and ann(n, "upgrade-phase") == "done"
    refused = run(lab, records, "maintenance.yml", "-e", "gpufleet_node=cp-1",
                  "-e", "gpufleet_maintenance_action=repair")
    assert_halted(refused, "Set gpufleet_node to one host of gpu_nodes")

    # 12. Break glass needs the typed confirmation naming the cell, the action and the target, and is recorded.
    refused = run(lab, records, "validate.yml", "-l", "gpu-a1", "-e", "gpufleet_break_glass_skip_nccl=true")
    assert_halted(refused, "needs the exact confirmation 'skip nccl on lab for %s'" % lab.to_version)
    before = set(records.glob("*-validate.yml.json"))
    skipped = run(lab, records, "validate.yml", "-l", "gpu-a1",
                  "-e", "gpufleet_break_glass_skip_nccl='skip nccl on lab for %s'" % lab.to_version)
    assert skipped.returncode == 0, skipped.stdout[-4000:]
    (record_path,) = set(records.glob("*-validate.yml.json")) - before
    glass = json.loads(record_path.read_text())["break_glass"]
    assert [(g["event"], g["action"]) for g in glass] == [("confirmed", "skip_nccl"), ("used", "skip_nccl")]
    assert glass[1]["nodes"] == ["gpu-a1"] and glass[0]["confirmation"] == "skip nccl on lab for %s" % lab.to_version
    story["finished"] = True
