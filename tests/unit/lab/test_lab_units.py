"""Lab pieces that need no running lab: the apt repository contents (real dpkg-deb and dpkg-scanpackages), the
inventory it writes, the fault catalogue."""
from __future__ import annotations

import dataclasses
import gzip
import itertools
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "lab"))

from gpufleet_lab import config, faults, hosts, kubeadm, packages
from gpufleet_lab.procs import LabError


@pytest.fixture
def cfg(tmp_path):
    base = config.load()
    cfg = dataclasses.replace(base, cache=tmp_path / "cache", run=tmp_path / "run", inventory=tmp_path / "inv")
    for version in cfg.versions:  # stand-ins for the Go-built binaries
        d = cfg.bin_dir("kubernetes", version)
        d.mkdir(parents=True)
        for name in ("kubectl", "kubeadm"):
            (d / name).write_text("#!/bin/sh\necho %s %s\n" % (name, version))
    d = cfg.bin_dir("etcd", cfg.etcd_version)
    d.mkdir(parents=True)
    for name in ("etcdctl", "etcdutl"):
        (d / name).write_text("#!/bin/sh\necho %s\n" % name)
    return cfg


@pytest.mark.skipif(not shutil.which("dpkg-scanpackages"), reason="needs dpkg-dev (lab/build/host-setup.sh)")
def test_apt_repository(cfg):
    repo, count = packages.ensure_repo(cfg)
    index = (repo / "Packages").read_text()
    stanzas = [dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
               for block in index.strip().split("\n\n")]
    by_name = {}
    for s in stanzas:
        by_name.setdefault(s["Package"], []).append(s)
    assert len(stanzas) == count
    assert sorted(s["Version"] for s in by_name["kubeadm"]) == ["1.35.4-1.1", "1.36.3-1.1", "1.37.2-1.1"]
    fm = by_name["nvidia-fabricmanager-570"][0]
    assert fm["Depends"] == "nvidia-driver-570-server (= 570.172.08-0lab1)"
    assert by_name["nvidia-driver-580-server"][0]["Conflicts"] == "nvidia-driver-any"
    # the package really carries the simulator and its version marker
    deb = repo / by_name["kubeadm"][0]["Filename"]
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    assert "./usr/bin/kubeadm" in listing and "./usr/share/gpufleet-sim/kubeadm.version" in listing
    # built once per content: a second call reuses it
    assert packages.ensure_repo(cfg) == (repo, count)


def test_inventory_groups(cfg):
    path = hosts.write_inventory(cfg, "0d1f5c3a-7b1e-4c55-9a43-5e2b6f1a9c77")
    inv = yaml.safe_load(path.read_text())["all"]
    assert inv["vars"]["gpufleet_cluster_uid"] == "0d1f5c3a-7b1e-4c55-9a43-5e2b6f1a9c77"  # the cell's identity
    # reached over SSH as real hosts are (no podman connection): one loopback port per host, the lab's key
    assert "ansible_connection" not in inv["vars"] and inv["vars"]["ansible_host"] == "127.0.0.1"
    assert pathlib.Path(inv["vars"]["ansible_ssh_private_key_file"]).is_file()
    assert sorted(inv["children"]["kube_control_plane"]["hosts"]) == cfg.control_plane
    racks = inv["children"]["gpu_nodes"]["children"]
    assert {g: sorted(v["hosts"]) for g, v in racks.items()} == {"rack_set_rs_a": ["gpu-a1", "gpu-a2"],
                                                                 "rack_set_rs_b": ["gpu-b1", "gpu-b2"]}
    assert racks["rack_set_rs_a"]["vars"]["gpufleet_failure_domain"] == "rs-a"
    ports = [inv["children"]["kube_control_plane"]["hosts"][h]["ansible_port"] for h in cfg.control_plane]
    ports += [v["hosts"][h]["ansible_port"] for v in racks.values() for h in v["hosts"]]
    assert len(set(ports)) == len(cfg.hosts) and ports[0] == cfg.ports["ssh"]


def test_fault_catalogue_covers_the_issue():
    wanted = {"gpu-missing", "xid79", "dcgm-fail", "nccl-slow", "pdb-block", "checkpoint-never", "unreachable",
              "apiserver-start-fail", "snapshot-fail", "pause-in-upgrade"}
    assert wanted <= set(faults.kinds())


def test_fault_scope_errors(cfg):
    with pytest.raises(faults.LabError, match="unknown host"):
        faults.inject(cfg, "gpu-z9", "xid79")
    with pytest.raises(faults.LabError, match="applies to GPU hosts only"):
        faults.inject(cfg, "cp-1", "xid79")


def every_port(cfg) -> list:
    """Every TCP port a cell listens on: lab.yml's, each apiserver's, each host's sshd, KWOK's server."""
    return sorted(list(cfg.ports.values()) + [cfg.apiserver_port(h) for h in cfg.control_plane]
                  + [hosts.ssh_port(cfg, h) for h in cfg.machines] + [cfg.ports["kwok"] + 1])


def test_cells_are_twins_with_their_own_ports_state_hosts_and_inventory(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUFLEET_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GPUFLEET_LAB_CELL", raising=False)
    first = config.load()
    monkeypatch.setenv("GPUFLEET_LAB_CELL", "lab-b")
    twin = config.load()
    assert (first.cell, twin.cell) == ("lab", "lab-b")
    assert not set(every_port(first)) & set(every_port(twin))  # the two can run at once on one machine
    assert twin.ports["apiserver_lb"] == first.ports["apiserver_lb"] + config.CELL_PORT_STEP
    assert first.run == tmp_path / "cache" / "run" and first.inventory == ROOT / "inventories" / "lab"
    assert twin.run == tmp_path / "cache" / "run-lab-b" and twin.inventory == twin.run / "inventory"
    assert twin.out_dir == twin.run / "out" and first.out_dir == ROOT / "out"
    assert {hosts.container(first, "cp-1"), hosts.container(twin, "cp-1")} == {"gpufleet-lab-cp-1",
                                                                               "gpufleet-lab-b-cp-1"}
    # the twin's inventory: its own etcd, SSH ports and outputs, the lab cell's committed settings and baselines
    inv = yaml.safe_load(hosts.write_inventory(twin, "uid-b").read_text())["all"]
    assert inv["children"]["etcd"]["vars"]["etcd_snapshot_endpoints"] == [
        "https://127.0.0.1:%d" % (twin.ports["etcd"] + i) for i in range(3)]  # one member per control-plane host
    assert inv["children"]["etcd"]["hosts"]["cp-2"] == {
        "etcd_restore_member_name": "cp-2",
        "etcd_restore_peer_url": "http://127.0.0.1:%d" % (twin.ports["etcd_peer"] + 1)}
    assert inv["vars"]["gpufleet_out_dir"] == str(twin.out_dir)
    assert inv["vars"]["gpufleet_kubeconfig"] == str(twin.kubeconfig)
    shared = ROOT / "inventories" / "lab" / "group_vars"
    assert (twin.inventory / "group_vars" / "etcd.yml").resolve() == shared / "etcd.yml"
    assert (twin.inventory / "baselines" / "h100-train.yml").is_file()
    # and what Molecule scenarios read of it
    from gpufleet_lab.__main__ import shell_env
    env = shell_env(twin)
    assert "export GPUFLEET_LAB_APISERVER_1=https://10.217.1.10:%d\n" % twin.apiserver_port("cp-1") in env
    assert "export GPUFLEET_LAB_KUBECONFIG=%s\n" % twin.kubeconfig in env
    assert "export GPUFLEET_LAB_ETCD=https://127.0.0.1:%d\n" % twin.ports["etcd"] in env


def test_unknown_cell_is_refused_naming_the_variable_and_the_cells(monkeypatch):
    monkeypatch.setenv("GPUFLEET_LAB_CELL", "lab-z")
    with pytest.raises(config.ConfigError, match=r"GPUFLEET_LAB_CELL=lab-z is not a lab cell: use one of lab, lab-b, "
                                                 r"fleet-canary"):
        config.load()


def test_the_labs_fleet_cells_plan_one_ring_each_canary_inference_training(tmp_path, monkeypatch):
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet
    from gpufleet_lab.__main__ import fleet_doc
    monkeypatch.setenv("GPUFLEET_LAB_CACHE", str(tmp_path))
    doc = fleet_doc()["gpufleet_fleet"]
    plan = plan_fleet(doc)
    names = config.fleet_cells()
    assert names == ["fleet-canary", "fleet-inference", "fleet-training"]
    assert [r["cells"] for r in plan["rings"]] == [[c] for c in names]
    assert [plan["cells"][n]["kind"] for n in names] == ["canary", "inference", "training"]
    assert plan["cells"]["fleet-training"]["inventory"] == str(tmp_path / "run-fleet-training" / "inventory")
    assert all(p["control_plane_path"] == [config.load(cell=names[0]).to_version] for p in plan["cells"].values())
    assert plan["caps"]["max_gpus_in_flight"] == max(c["gpus"] for c in doc["cells"])  # one cell at a time
    # small cells: one control-plane host, a GPU node in each of two rack sets, their own ports
    small = config.load(cell="fleet-inference")
    assert (small.control_plane, small.rack_sets, small.backup_hosts, small.kind) == (
        ["cp-1"], {"rs-a": ["gpu-a1"], "rs-b": ["gpu-b1"]}, [], "inference")
    every = [set(every_port(config.load(cell=c))) for c in config.cells()]  # no two cells share a port
    assert len(set().union(*every)) == sum(len(ports) for ports in every)
    # any cell, as a fleet of one (tests/lab/test_fleet_readings.py reads its own cell so)
    assert [c["name"] for c in fleet_doc(["lab-b"])["gpufleet_fleet"]["cells"]] == ["lab-b"]


def lab_doc(**changes):
    doc = yaml.safe_load((ROOT / "lab" / "lab.yml").read_text())
    doc.update(changes)
    return doc


@pytest.mark.parametrize("cells, message", [
    (["lab", "lab"], r"cells: lab is listed twice"),
    (["Lab"], r"cells\[0\].name: give a name of lower-case letters"),
    ([{"name": "x", "kind": "prod"}],
     r"cells\[0\].kind: 'prod'; give one of canary, dev, staging, inference, training"),
    ([{"name": "x", "size": 2}], r"cells\[0\]: unknown key\(s\) size; a cell has name, kind and hosts"),
    ([{"name": "x", "hosts": {"control_plane": [], "rack_sets": {"r": ["g1", "g2"]}}}],
     r"cells\[0\].hosts.control_plane: give a list of at least one host name"),
    ([{"name": "x", "hosts": {"control_plane": ["cp-1"], "rack_sets": {"r": ["g1"]}}}],
     r"cells\[0\].hosts.rack_sets: give at least two GPU hosts"),
    ([{"name": "x", "hosts": {"control_plane": ["g1"], "rack_sets": {"r": ["g1", "g2"]}}}],
     r"cells\[0\].hosts: host names must be distinct"),
    ([{"name": "x", "hosts": {"control_plane": ["cp-1"], "rack_sets": ["g1", "g2"]}}],
     r"cells\[0\].hosts.rack_sets: give rack set names"),
    ([3], r"cells\[0\]: give a cell name or a mapping"),
])
def test_bad_cells_are_refused_naming_the_entry_and_the_fix(tmp_path, cells, message):
    path = tmp_path / "lab.yml"
    path.write_text(yaml.safe_dump(lab_doc(cells=cells)))
    with pytest.raises(config.ConfigError, match=message):
        config.cells(path)


@pytest.mark.parametrize("fleet, message", [
    (None, r"fleet: give the list of cells"),
    (["lab", "nope"], r"fleet: nope is not a cell; give distinct cells of `cells`"),
    (["lab", "lab"], r"fleet: a cell is listed twice"),
])
def test_bad_fleet_cells_are_refused(tmp_path, fleet, message):
    path = tmp_path / "lab.yml"
    path.write_text(yaml.safe_dump(lab_doc(fleet=fleet)))
    with pytest.raises(config.ConfigError, match=message):
        config.fleet_cells(path)


def test_a_twin_cells_group_vars_link_the_committed_ones_and_name_the_twin(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFLEET_LAB_CACHE", str(tmp_path))
    cfg = config.load(cell=config.cells()[1])
    old = cfg.inventory / "group_vars"
    old.parent.mkdir(parents=True)
    old.symlink_to(ROOT / "inventories" / "lab" / "group_vars")  # the layout before twins had names
    hosts.write_inventory(cfg, "uid-1")
    assert not old.is_symlink() and (old / "gpu_nodes.yml").resolve() == (
        ROOT / "inventories" / "lab" / "group_vars" / "gpu_nodes.yml").resolve()
    assert (old / "all" / "00-lab.yml").resolve() == (ROOT / "inventories" / "lab" / "group_vars" / "all.yml").resolve()
    assert yaml.safe_load((old / "all" / "50-cell.yml").read_text()) == {"gpufleet_cluster_name": cfg.cell}
    hosts.write_inventory(cfg, "uid-1")  # again: the same
    assert sorted(p.name for p in old.iterdir()) == ["all", "etcd.yml", "gpu_nodes.yml", "kube_control_plane.yml"]


def _without(text, families):
    """``text`` without the samples of ``families`` and their # HELP / # TYPE lines (what --disabled-metrics drops)."""
    def family(line):
        name = line.split(" ")[2] if line.startswith(("# HELP ", "# TYPE ")) else line.split("{")[0].split(" ")[0]
        return next((f for f in families if name == f or name in (f + "_bucket", f + "_sum", f + "_count")), None)
    return "".join(line for line in text.splitlines(keepends=True) if not family(line))


METRICS = ROOT / "tests" / "fixtures" / "metrics"
REAL_METRICS = sorted(METRICS.glob("real-*.prom.gz"))


@pytest.mark.parametrize("capture", REAL_METRICS, ids=[p.name for p in REAL_METRICS])
def test_the_readings_give_the_same_results_without_the_metrics_the_labs_apiservers_turn_off(capture):
    """The lab's apiservers drop the big histograms no reading uses (kubeadm.DISABLED_METRICS, through kubeadm's
    ClusterConfiguration, so an upgrade keeps it): on each real capture (which still has them all), the soak's
    reduction, the fleet's reading and the removed-API scan give exactly what they give on the capture without
    them. A reading that starts to use one of them fails here."""
    from ansible_collections.gpufleet.upgrade.plugins.module_utils import apiserver_signals, fleet_readings
    from ansible_collections.gpufleet.upgrade.plugins.module_utils import removed_apis
    whole = gzip.decompress(capture.read_bytes()).decode()
    names = {line.split("{")[0].split(" ")[0] for line in whole.splitlines() if line[:1] not in ("#", "")}
    missing = [f for f in kubeadm.DISABLED_METRICS if not names & {f, f + "_bucket", f + "_count"}]
    assert not missing, "%s lacks %s: recapture from an apiserver without --disabled-metrics" % (capture.name, missing)
    cut = _without(whole, kubeadm.DISABLED_METRICS)
    assert 0.3 < len(cut) / len(whole) < 0.5, len(cut) / len(whole)  # these families are most of the text
    parts = capture.name[:-len(".prom.gz")].split("-")  # real-1.36.3-soak-0-quiet: real-1.36.3-soak-version.json
    version_text = next(METRICS / name for name in ("-".join(parts[:k]) + "-version.json"
                                                    for k in range(len(parts), 1, -1))
                        if (METRICS / name).is_file()).read_text()
    assert apiserver_signals.reduce(cut, "cp-1", version_text) == apiserver_signals.reduce(whole, "cp-1", version_text)
    assert fleet_readings.scrape(cut, "cp-1") == fleet_readings.scrape(whole, "cp-1")
    target = removed_apis.target_version("v1.38.0")
    assert removed_apis.scan_metrics(cut, version_text, target, "cp-1") == \
        removed_apis.scan_metrics(whole, version_text, target, "cp-1")


def test_what_kubeadm_reads_and_its_own_manifests(cfg):
    """The kubeadm configuration the cell is made with names external etcd at the paths the hosts mount and the
    lab's apiserver flags (the real kubeadm uploads it, and makes CoreDNS and kube-proxy from it); each
    control-plane host's manifests are the real kubeadm's (init phase control-plane, at its apiserver's version, with
    the host's advertise address on the lab's bridge); a mirror pod is made from the manifest that runs, bound to the
    host's Node, with the hash that changes with the manifest."""
    init, cluster, kubelet = yaml.safe_load_all(kubeadm.kubeadm_config(cfg, "v1.36.3", "cp-2"))  # what kubeadm uploads
    assert init["kind"] == "InitConfiguration" and kubelet["kind"] == "KubeletConfiguration"
    assert init["nodeRegistration"]["name"] == "cp-2"
    assert init["localAPIEndpoint"] == {"advertiseAddress": cfg.node_address("cp-2"),
                                        "bindPort": cfg.apiserver_port("cp-2")}
    assert cluster["kubernetesVersion"] == "v1.36.3" and cluster["kind"] == "ClusterConfiguration"
    # etcd where the apiservers reach it from their hosts' network namespaces: the lab machine's bridge address
    assert cluster["etcd"]["external"]["endpoints"] == ["https://10.217.0.1:%d" % (cfg.ports["etcd"] + i)
                                                        for i in range(3)]
    assert cluster["etcd"]["external"]["certFile"] == "/etc/kubernetes/pki/etcd-client.crt"
    flags = {a["name"]: a["value"] for a in cluster["apiServer"]["extraArgs"]}
    assert "bind-address" not in flags  # every address of its host
    assert flags["disabled-metrics"] == ",".join(kubeadm.DISABLED_METRICS)
    assert cluster["controllerManager"]["extraArgs"] == [{"name": "node-monitor-grace-period", "value": "60s"},
                                                         {"name": "leader-elect-retry-period", "value": "5s"}]
    assert cluster["scheduler"]["extraArgs"] == [{"name": "leader-elect-retry-period", "value": "5s"}]
    assert kubeadm.mirror_pod(cfg, "kube-apiserver", "cp-1") is None  # nothing runs yet
    running = kubeadm.running_manifest(cfg, "cp-1", "kube-apiserver")
    running.parent.mkdir(parents=True)
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "kube-apiserver", "namespace": "kube-system", "labels": {"component": "kube-apiserver",
                                                                         "tier": "control-plane"}},
        "spec": {"containers": [{"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.36.3",
                                 "command": ["kube-apiserver", "--secure-port=6443"]}]}, "status": {}})
    running.write_text(text)
    pod = kubeadm.mirror_pod(cfg, "kube-apiserver", "cp-1")
    meta = pod["metadata"]
    assert meta["name"] == "kube-apiserver-cp-1" and pod["spec"]["nodeName"] == "cp-1" and "status" not in pod
    assert meta["labels"] == {"component": "kube-apiserver", "tier": "control-plane"}
    assert pod["spec"]["containers"][0]["command"] == ["kube-apiserver", "--secure-port=6443"]
    assert meta["annotations"]["kubernetes.io/config.mirror"] == meta["annotations"]["kubernetes.io/config.hash"]
    assert kubeadm.manifest_version(text) == "v1.36.3"
    running.write_text(text.replace("6443", "6444"))
    assert kubeadm.mirror_pod(cfg, "kube-apiserver", "cp-1")["metadata"]["annotations"][
        "kubernetes.io/config.hash"] != meta["annotations"]["kubernetes.io/config.hash"]  # a new manifest, a new hash
    with pytest.raises(LabError, match="no image tag"):
        kubeadm.manifest_version(text.replace(":v1.36.3", ""))


def test_manifests_come_from_kubeadm_and_the_apiserver_runs_what_they_say(cfg):
    """`lab up` asks kubeadm (here a stand-in that records its arguments and writes what the real one writes into
    KUBEADM_INIT_DRYRUN_DIR) for each control-plane host's manifests, once, at the host's version; the etcd host gets
    etcd.yaml; an apiserver manifest runs as the built binary of its image's version with the host's certificate
    paths made the lab's."""
    for version in cfg.versions:
        stand_in = cfg.bin_dir("kubernetes", version) / "kubeadm"
        stand_in.write_text(
            '#!/bin/sh\necho "$@" >> "%s/kubeadm-args"\n'
            'if [ "$3" = kubeconfig ]; then echo "$4 of $6" > "$8/$4.conf"; exit 0; fi\n'
            'for c in kube-apiserver kube-controller-manager kube-scheduler; do '
            'printf "spec:\\n  containers:\\n  - image: registry.k8s.io/$c:%s\\n    command: [$c, '
            '--client-ca-file=/etc/kubernetes/pki/ca.crt]\\n" > "$KUBEADM_INIT_DRYRUN_DIR/$c.yaml"; done\n'
            % (cfg.cache, version))
        stand_in.chmod(0o755)
    (cfg.bin_dir("kubernetes", cfg.from_version) / "kube-apiserver").write_text("")
    state = {"apiserver": {h: cfg.from_version for h in cfg.control_plane}, "kubelet": {}}
    state["apiserver"]["cp-3"] = cfg.to_version
    kubeadm.write_manifests(cfg, state)
    kubeadm.write_etcd_manifests(cfg)
    args = (cfg.cache / "kubeadm-args").read_text().splitlines()
    manifests = [a for a in args if a.startswith("init phase control-plane all --dry-run --config ")]
    kubeconfigs = [a for a in args if a.startswith("init phase kubeconfig ")]
    assert len(manifests) == 3 and len(kubeconfigs) == 6 and len(args) == 9
    # kubeadm's own controller-manager.conf and scheduler.conf, signed with the cell's CA (its certificatesDir)
    from gpufleet_lab import cluster
    config_used = kubeconfigs[0].split()[5]
    assert kubeconfigs[0].split()[3] == "controller-manager" and kubeconfigs[1].split()[3] == "scheduler"
    assert kubeconfigs[0].split()[7] == str(cluster.host_kubeconfig(cfg, "cp-1", "scheduler").parent)
    assert cluster.host_kubeconfig(cfg, "cp-3", "scheduler").read_text() == "scheduler of %s\n" % config_used.replace(
        "cp-1", "cp-3")
    assert not pathlib.Path(config_used).exists()  # the work file goes
    assert sorted(p.name for p in kubeadm.manifests_dir(cfg, "cp-1").iterdir()) == [
        "etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"]
    text = (kubeadm.manifests_dir(cfg, "cp-3") / "kube-apiserver.yaml").read_text()
    assert kubeadm.manifest_version(text) == cfg.to_version
    kubeadm.write_manifests(cfg, state)  # made once
    assert len((cfg.cache / "kubeadm-args").read_text().splitlines()) == 9
    version, argv = kubeadm.cluster.component_argv(
        cfg, "cp-1", "kube-apiserver", (kubeadm.manifests_dir(cfg, "cp-1") / "kube-apiserver.yaml").read_text())
    assert version == cfg.from_version
    assert argv == [str(cfg.bin_dir("kubernetes", cfg.from_version) / "kube-apiserver"),
                    "--client-ca-file=%s/ca.crt" % cfg.pki]
    with pytest.raises(LabError, match="the lab has no kube-apiserver"):  # cp-3's version has no build here
        kubeadm.cluster.component_argv(cfg, "cp-3", "kube-apiserver", text)
    with pytest.raises(LabError, match="kube-scheduler manifest runs .'kube-apiserver'., not kube-scheduler"):
        kubeadm.cluster.component_argv(cfg, "cp-1", "kube-scheduler", text)


def test_each_control_plane_host_runs_an_etcd_member_of_its_manifests_image(cfg):
    """One member per control-plane host, each its host's etcd.yaml; the member runs the etcd build of the image's
    version (an upgrade's new image restarts it on the other build); `lab up` keeps an image an upgrade set."""
    from gpufleet_lab import cluster
    kubeadm.write_etcd_manifests(cfg)
    texts = {h: (kubeadm.manifests_dir(cfg, h) / "etcd.yaml").read_text() for h in cfg.control_plane}
    assert len(texts) == 3
    for version in cfg.etcd_versions:
        (cfg.bin_dir("etcd", version)).mkdir(parents=True, exist_ok=True)
        (cfg.bin_dir("etcd", version) / "etcd").write_text("")
    version, argv = cluster.etcd_argv(cfg, "cp-2", texts["cp-2"])
    assert version == cfg.etcd_version and argv[0] == str(cfg.bin_dir("etcd", cfg.etcd_version) / "etcd")
    peers = ",".join("cp-%d=http://127.0.0.1:%d" % (i + 1, cfg.ports["etcd_peer"] + i) for i in range(3))
    assert "--name=cp-2" in argv and "--initial-cluster=%s" % peers in argv
    assert "--advertise-client-urls=https://127.0.0.1:%d" % (cfg.ports["etcd"] + 1) in argv
    newer = texts["cp-2"].replace(cfg.etcd_version.lstrip("v") + "-0", cfg.etcd_next_version.lstrip("v") + "-0")
    assert newer != texts["cp-2"]
    assert cluster.etcd_argv(cfg, "cp-2", newer)[0] == cfg.etcd_next_version
    with pytest.raises(LabError, match="asks for etcd v9.9.9, which the lab has not built"):
        cluster.etcd_argv(cfg, "cp-2", texts["cp-2"].replace(cfg.etcd_version.lstrip("v") + "-0", "9.9.9-0"))
    (kubeadm.manifests_dir(cfg, "cp-2") / "etcd.yaml").write_text(newer)
    kubeadm.write_etcd_manifests(cfg)  # an upgraded member keeps its image
    assert (kubeadm.manifests_dir(cfg, "cp-2") / "etcd.yaml").read_text() == newer


REAL_MANIFESTS = ROOT / "tests" / "fixtures" / "kubeadm"  # real-1.35.4-manifest-*: see its README.md


@pytest.mark.parametrize("component, url", [
    ("kube-apiserver", "https://10.217.0.10:16443/readyz"),  # its readiness probe, on the host's address
    ("kube-controller-manager", "https://127.0.0.1:10257/healthz"),  # its startup probe: it has no readiness one
    ("kube-scheduler", "https://127.0.0.1:10259/readyz"),
])
def test_real_kubeadm_manifests_run_as_written_with_the_hosts_paths_made_the_labs(cfg, component, url):
    """The real kubeadm's manifests (fixtures): each component runs its manifest's command, every flag kept, only the
    host's certificate directory and kubeconfigs made the lab machine's; the player waits on the probe a kubelet
    would (kubeadm names its port probe-port), in the host's network namespace."""
    from gpufleet_lab import cluster
    text = (REAL_MANIFESTS / ("real-1.35.4-manifest-%s.yaml" % component)).read_text()
    (cfg.bin_dir("kubernetes", "v1.35.4") / component).parent.mkdir(parents=True, exist_ok=True)
    (cfg.bin_dir("kubernetes", "v1.35.4") / component).write_text("")
    version, argv = cluster.component_argv(cfg, "cp-1", component, text)
    command = yaml.safe_load(text)["spec"]["containers"][0]["command"]
    assert version == "v1.35.4" and argv[0] == str(cfg.bin_dir("kubernetes", "v1.35.4") / component)
    back = [a.replace(str(cfg.pki) + "/", "/etc/kubernetes/pki/") for a in argv[1:]]
    for user in cluster.COMPONENT_USERS:
        back = [a.replace(str(cluster.host_kubeconfig(cfg, "cp-1", user)), "/etc/kubernetes/%s.conf" % user)
                for a in back]
    assert back == command[1:] and len(argv) > 5
    assert not [a for a in argv if "/etc/kubernetes" in a]  # every host path the manifest names is mapped
    assert cluster.probe_url(cfg, "cp-1", text) == url
    unnamed = text.replace("name: probe-port", "name: other-port")
    with pytest.raises(LabError, match="probes port 'probe-port', which is neither a number nor a port"):
        cluster.probe_url(cfg, "cp-1", unnamed)


def test_each_control_plane_host_has_its_own_network_namespace_on_the_labs_bridge(monkeypatch, tmp_path):
    """Every cell's hosts have their own addresses, namespaces and veth names (an interface name has 15 characters
    at most), none of them the lab machine's own address."""
    from gpufleet_lab import network
    monkeypatch.setenv("GPUFLEET_LAB_CACHE", str(tmp_path))
    cells = [config.load(cell=name) for name in config.cells()]
    addresses = [c.node_address(h) for c in cells for h in c.hosts]
    names = [network.netns(c, h) for c in cells for h in c.hosts]
    links = [network.veth(c, h) for c in cells for h in c.hosts]
    assert len(set(addresses)) == len(addresses) and network.lab_address(cells[0]) not in addresses
    assert len(set(names)) == len(names) and len(set(links)) == len(links)
    assert all(len(link) <= 15 for link in links)
    assert cells[0].apiserver_url("cp-2") == "https://%s:%d" % (cells[0].node_address("cp-2"),
                                                                cells[0].apiserver_port("cp-2"))


@pytest.mark.parametrize("later, message", [
    (["v1.38.1"], r"versions.later: v1.38.1 - each must be one minor above the one before it"),
    ("v1.37.2", r"versions.later: give a list of releases"),
    ([137], r"versions.later: give a list of releases"),
])
def test_later_lab_versions_must_follow_to_one_minor_at_a_time(tmp_path, later, message):
    doc = lab_doc()
    doc["versions"] = dict(doc["versions"], later=later)
    path = tmp_path / "lab.yml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(config.ConfigError, match=message):
        config.load(path)
    doc["versions"]["later"] = ["v1.37.2"]
    path.write_text(yaml.safe_dump(doc))
    assert config.load(path).versions == [doc["versions"]["from"], doc["versions"]["to"], "v1.37.2"]


def test_static_pod_player_runs_what_the_manifest_says_and_survives_kubeadm_s_rollback(cfg, monkeypatch):
    """The lab's kubelet stand-in (controller.StaticPods.play), with the processes faked: nothing before `lab up`
    finished; a new manifest restarts its component; under apiserver-start-fail a new apiserver manifest is held
    back (not a controller manager's) but the old one, rolled back by kubeadm, runs again even with the fault on; a
    manifest that cannot run stops nothing; one that does not come up is stopped and not retried until the manifest
    changes."""
    from gpufleet_lab import cluster, controller
    calls, alive, fault = [], {"pid": 1}, {"on": False}

    def restart(cfg_, host, component, text, cancel=None):
        calls.append(("restart", component, text))
        if "broken" in text:
            raise LabError("not ready")
        kubeadm.running_manifest(cfg_, host, component).write_text(text)
        return kubeadm.manifest_version(text)

    def argv(cfg_, host, component, text):
        if "nobuild" in text:
            raise LabError("the lab has no kube-apiserver")
        return kubeadm.manifest_version(text), [component]
    monkeypatch.setattr(cluster, "restart_component", restart)
    monkeypatch.setattr(cluster, "component_argv", argv)
    monkeypatch.setattr(cluster, "probe_url", lambda cfg_, host, text: "https://127.0.0.1:1/livez")
    monkeypatch.setattr(controller.procs, "pid_of", lambda run, name: alive["pid"])
    monkeypatch.setattr(controller.procs, "stop", lambda run, name, timeout=0: calls.append(("stop", name)))
    monkeypatch.setattr(controller.faults, "host_faults",
                        lambda cfg_, host: ["apiserver-start-fail"] if fault["on"] else [])

    def manifest(version, extra="", component="kube-apiserver"):
        return ("spec:\n  containers:\n  - image: registry.k8s.io/%s:%s\n"
                "    command: [%s%s]\n" % (component, version, component, extra))
    old, new = manifest("v1.35.4"), manifest("v1.36.3")
    pods = controller.StaticPods(cfg)
    running = kubeadm.running_manifest(cfg, "cp-1", "kube-apiserver")
    running.parent.mkdir(parents=True)
    running.write_text(old)
    kcm = kubeadm.running_manifest(cfg, "cp-1", "kube-controller-manager")
    kcm.write_text(manifest("v1.35.4", component="kube-controller-manager"))
    assert not pods.play("cp-1", "kube-apiserver", new, restart=True) and calls == []  # `lab up` is not through
    (cfg.run / cluster.UP_MARK).parent.mkdir(parents=True, exist_ok=True)
    (cfg.run / cluster.UP_MARK).write_text("now")
    assert not pods.play("cp-1", "kube-apiserver", old, restart=True) and calls == []  # it runs already
    fault["on"] = True
    assert not pods.play("cp-1", "kube-apiserver", new, restart=True) and calls == []  # held back by the fault
    new_kcm = manifest("v1.36.3", component="kube-controller-manager")  # the fault holds the apiserver only
    assert pods.play("cp-1", "kube-controller-manager", new_kcm, restart=True)
    assert calls == [("restart", "kube-controller-manager", new_kcm)] and kcm.read_text() == new_kcm
    assert cluster.load_state(cfg)["apiserver"]["cp-1"] == cfg.from_version  # the state records apiservers
    del calls[:]
    alive["pid"] = None  # the old apiserver died meanwhile; kubeadm rolled the manifest back
    assert pods.play("cp-1", "kube-apiserver", old, restart=True) and calls[0] == ("restart", "kube-apiserver", old)
    fault["on"], alive["pid"] = False, 1
    assert pods.play("cp-1", "kube-apiserver", new, restart=True) and running.read_text() == new
    assert cluster.load_state(cfg)["apiserver"]["cp-1"] == "v1.36.3"
    del calls[:]
    assert not pods.play("cp-1", "kube-apiserver", manifest("v1.36.3", ", nobuild"), restart=True)
    assert calls == []  # cannot run: nothing stopped
    broken = manifest("v1.36.3", ", broken")
    assert not pods.play("cp-1", "kube-apiserver", broken, restart=True)
    assert calls == [("restart", "kube-apiserver", broken), ("stop", "apiserver-cp-1")]  # did not come up: stopped
    assert not pods.play("cp-1", "kube-apiserver", broken, restart=True) and len(calls) == 2  # not retried


def test_a_static_pod_that_exits_is_started_again_backing_off_and_never_given_up(cfg, monkeypatch):
    """A controller manager or scheduler exits when it loses its apiserver ("leaderelection lost"); as a kubelet
    does, the player starts the same manifest again at once, then backs off before each next start (5 s, doubling,
    to 40 s) whether or not the start worked, until the pod has run 80 s; one not ready in time is left (not
    stopped, not refused)."""
    from gpufleet_lab import cluster, controller
    now, calls, fail = {"t": 1000.0}, [], {"on": True}
    monkeypatch.setattr(controller.time, "monotonic", lambda: now["t"])

    def restart(cfg_, host, component, text, cancel=None):
        calls.append(now["t"])
        assert cancel is not None and cancel() is False  # its manifest on disk is still the one it starts
        if fail["on"]:
            raise LabError("scheduler-cp-1 did not become healthy at https://127.0.0.1:10259/readyz within 90s\nlog")
        return "v1.35.4"
    monkeypatch.setattr(cluster, "restart_component", restart)
    monkeypatch.setattr(cluster, "start_component", restart)
    monkeypatch.setattr(cluster, "component_argv", lambda cfg_, host, component, text: ("v1.35.4", [component]))
    monkeypatch.setattr(cluster, "probe_url", lambda cfg_, host, text: "https://127.0.0.1:10259/readyz")
    monkeypatch.setattr(controller.procs, "pid_of", lambda run, name: None)  # it exited
    monkeypatch.setattr(controller.procs, "stop", lambda run, name, timeout=0: calls.append("stop"))
    text = "spec:\n  containers:\n  - image: registry.k8s.io/kube-scheduler:v1.35.4\n    command: [kube-scheduler]\n"
    for path in (kubeadm.running_manifest(cfg, "cp-1", "kube-scheduler"),
                 kubeadm.manifests_dir(cfg, "cp-1") / "kube-scheduler.yaml"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (cfg.run / cluster.UP_MARK).parent.mkdir(parents=True, exist_ok=True)
    (cfg.run / cluster.UP_MARK).write_text("now")
    pods = controller.StaticPods(cfg)
    key = ("cp-1", "kube-scheduler")

    for _ in range(5):  # each time: the first second at which the player starts it again (it does not come up)
        tried = len(calls)
        while not pods.play("cp-1", "kube-scheduler", text, restart=True) and len(calls) == tried:
            now["t"] += 1
    assert [b - a for a, b in itertools.pairwise(calls)] == [5, 10, 20, 40]  # at once, then backing off
    assert "stop" not in calls and key not in pods.refused  # never stopped, never given up
    fail["on"] = False
    now["t"] += 40
    assert pods.play("cp-1", "kube-scheduler", text, restart=True)
    assert not pods.play("cp-1", "kube-scheduler", text, restart=True)  # it exits again at once: backing off
    now["t"] += controller.STABLE_SECONDS  # it ran long enough: the next exit is restarted at once
    assert pods.play("cp-1", "kube-scheduler", text, restart=True) and pods.backoff[key][1] == 5.0
    # its manifest moved away (a restore) and back: started again even when a start failed before
    fail["on"] = True
    now["t"] += 100
    assert not pods.play("cp-1", "kube-scheduler", text, restart=False)
    pods.step("cp-1", "kube-scheduler", "scheduler-cp-1", None)  # gone: nothing remembered of it
    assert key not in pods.backoff and key not in pods.refused
    fail["on"] = False
    assert pods.play("cp-1", "kube-scheduler", text, restart=False)


def test_the_player_acts_on_each_pod_from_a_worker_of_its_own(cfg, monkeypatch):
    """reconcile() hands each settled manifest to a worker of its own and skips a pod whose worker is busy: a pod
    whose probe takes long holds up no other pod's stop."""
    import threading

    from gpufleet_lab import controller
    gate, seen = threading.Event(), []
    monkeypatch.setattr(controller, "SETTLE_SECONDS", 0.0)
    monkeypatch.setattr(controller.StaticPods, "write_containers", lambda self: None)

    def step(self, host, component, name, text):
        seen.append((host, component))
        if (host, component) == ("cp-1", "kube-apiserver"):
            gate.wait(10)  # a long probe
        return False
    monkeypatch.setattr(controller.StaticPods, "step", step)
    pods = controller.StaticPods(cfg)
    pods.reconcile()  # first sight of each manifest (gone): not settled yet
    pods.reconcile()
    for worker in [w for k, w in pods.busy.items() if k != ("cp-1", "kube-apiserver")]:
        worker.join(5)
    everything = {(h, c) for h, c, _ in pods.pods()}
    assert set(seen) == everything and len(seen) == len(everything)  # every pod acted on, one held up
    pods.reconcile()
    assert seen.count(("cp-1", "kube-apiserver")) == 1  # busy: not handed out again
    assert seen.count(("cp-2", "kube-apiserver")) == 2
    gate.set()
    pods.busy[("cp-1", "kube-apiserver")].join(5)
    assert all(w.daemon for w in pods.busy.values())  # the controller's exit never waits for one


def test_a_manifest_must_settle_before_the_player_acts(cfg, monkeypatch):
    from gpufleet_lab import controller
    now = {"t": 100.0}
    monkeypatch.setattr(controller.time, "monotonic", lambda: now["t"])
    pods = controller.StaticPods(cfg)
    assert not pods.settled(("cp-1", "kube-apiserver"), None)  # first seen missing
    now["t"] += controller.SETTLE_SECONDS / 2
    assert not pods.settled(("cp-1", "kube-apiserver"), None)
    now["t"] += controller.SETTLE_SECONDS
    assert pods.settled(("cp-1", "kube-apiserver"), None)
    assert not pods.settled(("cp-1", "kube-apiserver"), "text")  # it changed: wait again


def test_a_cell_made_by_an_older_lab_is_refused_naming_the_reset(cfg):
    """A cell's state from before the hosts had their own network namespaces (its manifests, certificates and
    kubeadm-config name other addresses) is not mended: `lab up` says to reset it; a new cell records its layout."""
    from gpufleet_lab import cluster
    cluster.check_layout(cfg)  # a new cell
    assert (cfg.run / cluster.LAYOUT_FILE).read_text() == cluster.CELL_LAYOUT + "\n"
    cluster.save_state(cfg, cluster.load_state(cfg))
    cluster.check_layout(cfg)  # its own layout: fine
    (cfg.run / cluster.LAYOUT_FILE).unlink()
    with pytest.raises(LabError, match=r"cell lab was made by an older lab .*GPUFLEET_LAB_CELL=lab bin/lab reset"):
        cluster.check_layout(cfg)


class FakeIp:
    """`ip` as network.py calls it, over a model of the machine: namespaces, links (with the namespace each is in)
    and addresses; it refuses what the real one refuses (a link that exists, a namespace that does not)."""

    def __init__(self):
        self.namespaces, self.links, self.addrs, self.calls = set(), {"": {"lo"}}, {}, []

    def __call__(self, *args, check=True):
        import json as _json
        self.calls.append(" ".join(args))
        ns, rest = (args[1], list(args[2:])) if args[:1] == ("-n",) else ("", list(args))
        ok, out = True, ""
        if rest[:2] == ["-j", "netns"]:
            out = _json.dumps([{"name": n} for n in sorted(self.namespaces)])
        elif rest[:2] == ["netns", "add"]:
            ok = rest[2] not in self.namespaces
            self.namespaces.add(rest[2])
            self.links[rest[2]] = {"lo"}
        elif rest[:2] == ["netns", "del"]:
            self.namespaces.discard(rest[2])
            self.links.pop(rest[2], None)
        elif rest[:3] == ["link", "show", "dev"]:
            ok = rest[3] in self.links.get(ns, set())
        elif rest[:2] == ["link", "add"]:
            name, peer_ns = rest[2], (rest[rest.index("netns") + 1] if "netns" in rest else "")
            ok = name not in self.links[ns] and "eth0" not in self.links.get(peer_ns, set())
            if ok:
                self.links[ns].add(name)
                if rest[3:5] == ["type", "veth"]:
                    self.links[peer_ns].add("eth0")
        elif rest[:2] == ["link", "del"]:
            ok = rest[2] in self.links.get(ns, set())
            self.links.get(ns, set()).discard(rest[2])
        elif rest[:2] == ["link", "set"]:
            ok = rest[2] in self.links.get(ns, set())
        elif "addr" in rest and "show" in rest:
            dev = rest[rest.index("dev") + 1]
            if dev in self.links.get(ns, set()):
                out = _json.dumps([{"addr_info": [{"local": a} for a in sorted(self.addrs.get((ns, dev), ()))]}])
            else:
                ok = False
        elif rest[:2] in (["addr", "add"], ["addr", "del"]):
            key = (ns, rest[rest.index("dev") + 1])
            address = rest[2].split("/")[0]
            have = self.addrs.setdefault(key, set())
            ok = (address not in have) if rest[1] == "add" else (address in have)
            (have.add if rest[1] == "add" else have.discard)(address)
        else:
            raise AssertionError("unexpected ip call: %s" % " ".join(args))
        if check and not ok:
            raise LabError("ip %s failed" % " ".join(args))
        return subprocess.CompletedProcess(args, 0 if ok else 1, out, "" if ok else "error")


def test_the_labs_network_is_made_once_mended_when_half_made_and_taken_down(cfg, monkeypatch):
    """`lab up` makes the bridge, the lab machine's address and one namespace per host with only its address; run
    again it changes nothing; a pair whose namespace was deleted under it, or a namespace holding another address
    (lab.yml's order changed), is mended; `lab down` removes the cell's namespaces and pairs, not the bridge."""
    from gpufleet_lab import network
    fake = FakeIp()
    monkeypatch.setattr(network, "ip", fake)
    made = network.ensure_network(cfg)
    assert made[0] == "10.217.0.1" and len(made) == 1 + len(cfg.hosts)
    for host in cfg.hosts:
        name = network.netns(cfg, host)
        assert name in fake.namespaces and fake.addrs[(name, "eth0")] == {cfg.node_address(host)}
        assert network.veth(cfg, host) in fake.links[""]
    assert fake.addrs[("", "gpufleet-lab0")] == {"10.217.0.1"}
    assert network.ensure_network(cfg) == []  # again: nothing to make
    gone = network.netns(cfg, "gpu-a1")
    fake.namespaces.discard(gone)  # deleted under a live process: its veth's peer went with it
    del fake.links[gone]
    fake.addrs.pop((gone, "eth0"))
    fake.addrs[(network.netns(cfg, "cp-2"), "eth0")].add("10.217.0.99")
    assert sorted(network.ensure_network(cfg)) == sorted([
        "%s (%s)" % (cfg.node_address("gpu-a1"), gone)])
    assert fake.addrs[(gone, "eth0")] == {cfg.node_address("gpu-a1")}
    assert fake.addrs[(network.netns(cfg, "cp-2"), "eth0")] == {cfg.node_address("cp-2")}  # the stray address went
    assert sorted(network.remove_network(cfg)) == sorted(network.netns(cfg, h) for h in cfg.hosts)
    assert not fake.namespaces and fake.links[""] == {"lo", "gpufleet-lab0"}
