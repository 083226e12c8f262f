"""The cell: one typed object built once from the inventory, every inventory check in one place."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import apiserver_signals
from ansible_collections.gpufleet.upgrade.plugins.module_utils.cell import build, components, out_dir, pools_of, run_id
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from tests.conftest import pool_baseline

GROUPS = {"kube_control_plane": ["cp-1", "cp-2", "cp-3"], "etcd": ["cp-1", "cp-2", "cp-3"],
          "gpu_nodes": ["gpu-a1", "gpu-a2", "gpu-b1", "gpu-b2"]}
HOSTS = {"cp-1": {}, "cp-2": {}, "cp-3": {},
         "gpu-a1": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-a"},
         "gpu-a2": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-a"},
         "gpu-b1": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-b"},
         "gpu-b2": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-b"}}
CELL = {"gpufleet_cluster_name": "lab", "gpufleet_target_version": "v1.36.3",
        "gpufleet_wave_caps": {"max_gpu_fraction": 0.5}}
BASELINES = {"h100-train": pool_baseline()}


def cell(groups=None, hosts=None, cell_vars=None, baselines=None, **kw):
    return build(groups or GROUPS, hosts if hosts is not None else HOSTS, dict(CELL, **(cell_vars or {})),
                 baselines if baselines is not None else BASELINES, **kw)


def test_the_lab_cell():
    c = cell()
    assert c.target == "v1.36.3" and c.run_id == "gpufleet-lab-v1.36.3" and c.first_control_plane == "cp-1"
    assert [w["nodes"] for w in c.gpu_waves] == [["gpu-a1"], ["gpu-a2"], ["gpu-b1", "gpu-b2"]]
    assert [w["label"] for w in c.gpu_waves] == ["1 (canary: rs-a)", "2 (domain: rs-a)", "3 (domain: rs-b)"]
    assert c.gpu_waves[2]["earlier"] == ["cp-1", "cp-2", "cp-3", "gpu-a1", "gpu-a2"]
    gpu = next(n for n in c.nodes if n["name"] == "gpu-a1")
    assert (gpu["gpus"], gpu["gpu_type"]) == (8, "NVIDIA-H100-80GB-HBM3")  # from the pool baseline
    assert c.host_pool["cp-1"] == "control-plane" and c.pools["h100-train"]["nodes"] == GROUPS["gpu_nodes"]
    assert c.pools["h100-train"]["gpus"] == 8 * len(GROUPS["gpu_nodes"])  # what the fleet's GPU reading expects
    mig = pool_baseline(node={"allocatable_gpus": 56})  # 8 GPUs, each split into 7 MIG slices
    assert cell(baselines={"h100-train": mig}).pools["h100-train"]["gpus"] == 56 * len(GROUPS["gpu_nodes"])
    assert c.break_glass == {"disable_eviction": False, "force_drain": False, "skip_checkpoint": False,
                             "skip_nccl": False, "map_kube_apis": False}


@pytest.mark.parametrize("spelling", ["1.36.3", "v1.36.3", " v1.36.3 "])
def test_every_spelling_of_the_target_gives_the_same_target_and_run_id(spelling):
    c = cell(cell_vars={"gpufleet_target_version": spelling})
    assert (c.target, c.run_id) == ("v1.36.3", "gpufleet-lab-v1.36.3")
    assert run_id("lab", spelling) == "gpufleet-lab-v1.36.3"


@pytest.mark.parametrize("target,message", [
    ("v1.36", "is not a full release; give one such as v1.36.0"),
    ("v1.36.3-rc.1", "is not a full release"),
    ("v1.99999999999.0", "not a plausible Kubernetes version (minor 99999999999 is above 999)"),
    ("latest", "is not a Kubernetes version"),
    (None, "gpufleet_target_version: required"),
])
def test_bad_targets_are_refused_naming_the_variable(target, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cell(cell_vars={"gpufleet_target_version": target})


def test_a_limit_is_refused_unless_the_playbook_allows_it():
    with pytest.raises(InputError, match="--limit gpu-a1: the upgrade plays plan whole failure domains"):
        cell(cell_vars={"ansible_limit": "gpu-a1"})
    assert cell(cell_vars={"ansible_limit": "gpu-a1"}, allow_limit=True).target == "v1.36.3"


@pytest.mark.parametrize("mutate,message", [
    (lambda g, h, b: g.pop("etcd"), "the inventory needs the groups kube_control_plane, etcd and gpu_nodes"),
    (lambda g, h, b: h["gpu-a1"].pop("gpufleet_pool"), "gpu-a1: gpufleet_pool (the node pool"),
    (lambda g, h, b: h["gpu-a1"].pop("gpufleet_failure_domain"), "gpu-a1: gpufleet_failure_domain"),
    (lambda g, h, b: h["gpu-a1"].update(gpufleet_pool="a100"), "gpu-a1: no baseline for its pool 'a100'"),
    (lambda g, h, b: h["gpu-a1"].update(gpufleet_gpus=8), "gpu-a1: gpufleet_gpus is not read: the GPU count comes "
                                                          "from the pool baseline"),
    (lambda g, h, b: g["gpu_nodes"].append("cp-1"), "cp-1: in both kube_control_plane and gpu_nodes"),
    (lambda g, h, b: h["gpu-a1"].update(gpufleet_canary="maybe"), "gpu-a1: gpufleet_canary: expected true or false"),
    (lambda g, h, b: b.update({"h100-train": dict(b["h100-train"], name="other")}),
     "the baseline of pool 'h100-train' is named 'other'"),
    (lambda g, h, b: h["gpu-a1"].update(drain_break_glass_force=True),
     "gpu-a1 sets drain_break_glass_force in the inventory: break glass is confirmed per run"),
])
def test_inventory_checks_name_the_host_and_the_fix(mutate, message):
    groups, hosts, baselines = copy.deepcopy(GROUPS), copy.deepcopy(HOSTS), dict(BASELINES)
    mutate(groups, hosts, baselines)
    with pytest.raises(InputError) as err:
        cell(groups=groups, hosts=hosts, baselines=baselines)
    assert message in err.value.msg


def test_break_glass_needs_the_exact_confirmation_for_this_cell_and_target():
    with pytest.raises(InputError, match="needs the exact confirmation 'force drain on lab for v1.36.3'"):
        cell(cell_vars={"gpufleet_break_glass_force_drain": True})
    with pytest.raises(InputError, match="needs the exact confirmation"):
        cell(cell_vars={"gpufleet_break_glass_force_drain": "force drain on prod for v1.36.3"})
    c = cell(cell_vars={"gpufleet_break_glass_force_drain": "force drain on lab for v1.36.3",
                        "gpufleet_break_glass_skip_nccl": "skip nccl on lab for v1.36.3"})
    assert c.break_glass["force_drain"] and c.break_glass["skip_nccl"] and not c.break_glass["disable_eviction"]
    assert [u["action"] for u in c.break_glass_used] == ["force_drain", "skip_nccl"]


def test_planner_inputs_come_from_the_inventory_once():
    hosts = copy.deepcopy(HOSTS)
    hosts["gpu-b2"]["gpufleet_canary"] = True
    hosts["gpu-a2"]["gpufleet_unschedulable_before"] = True
    c = cell(hosts=hosts)
    assert c.canaries == ["gpu-b2"] and c.keep_cordoned == ["gpu-a2"]


def test_observed_versions_make_the_skew_components():
    hosts = {h: dict(v, gpufleet_observed_kubelet="v1.35.4") for h, v in HOSTS.items()}
    for h in GROUPS["kube_control_plane"]:
        hosts[h]["gpufleet_observed_control_plane"] = "v1.35.4"
    c = cell(hosts=hosts, cell_vars={"gpufleet_observed_kubectl": "v1.35.4"}).as_dict()
    items = components(c, c["observed"])
    assert {(i["component"], i["node"]) for i in items} >= {("kube-apiserver", "cp-1"), ("kubelet", "gpu-b2"),
                                                            ("kubectl", "")}
    assert next(i for i in items if i["node"] == "gpu-a1")["pool"] == "h100-train"
    hosts["gpu-a1"].pop("gpufleet_observed_kubelet")
    with pytest.raises(InputError, match="observed versions are partial: gpu-a1"):
        cell(hosts=hosts)
    with pytest.raises(InputError, match="no version for cp-1"):
        components(c, {"apiservers": {}, "kubelets": {}})


def test_pools_to_load():
    assert pools_of(GROUPS, HOSTS) == ["h100-train"]


def test_out_dir_default_is_out_of_the_working_directory():
    assert out_dir(None, {}, "/home/sre/window") == "/home/sre/window/out"
    assert out_dir("", {"GPUFLEET_OUT_DIR": "/var/lib/gpufleet"}, "/x") == "/var/lib/gpufleet"
    assert out_dir("reports/../runs", {"GPUFLEET_OUT_DIR": "/ignored"}, "/x") == "/x/runs"
    with pytest.raises(InputError, match="gpufleet_out_dir: expected a directory path"):
        out_dir(["out"], {}, "/x")


def test_settings_urls_and_the_expected_cell():
    c = cell(hosts=dict(HOSTS, **{"cp-2": {"gpufleet_apiserver_url": "https://10.0.0.12:6443"}}),
             cell_vars={"gpufleet_soak_seconds": 5, "gpufleet_expected_cell": "lab"})
    assert c.settings == {"soak_seconds": 5, "reach_timeout": 60, "observe_seconds": 60, "only_canaries": False,
                          "audit_callers": True, "audit_lookback_minutes": 10080,
                          "soak_signals": apiserver_signals.settings(None)}
    tuned = cell(cell_vars={"gpufleet_soak_signals": {"min_requests": 5, "interval_seconds": 2}})
    assert tuned.settings["soak_signals"]["min_requests"] == 5
    assert tuned.settings["soak_signals"]["warmup_seconds"] == 60
    with pytest.raises(InputError, match=r"gpufleet_soak_signals.interval_seconds: 0; give 1 to 600"):
        cell(cell_vars={"gpufleet_soak_signals": {"interval_seconds": 0}})
    assert c.apiserver_urls == {"cp-1": "https://127.0.0.1:6443", "cp-2": "https://10.0.0.12:6443",
                                "cp-3": "https://127.0.0.1:6443"}
    with pytest.raises(InputError, match="launched for cell 'cell7', but the inventory is cell 'lab'"):
        cell(cell_vars={"gpufleet_expected_cell": "cell7"})
    with pytest.raises(InputError, match="cp-1: gpufleet_apiserver_url: expected an https:// URL"):
        cell(hosts=dict(HOSTS, **{"cp-1": {"gpufleet_apiserver_url": "10.0.0.11:6443"}}))


def test_cell_wide_variables_must_be_the_same_on_every_host():
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.cell import same_everywhere

    same_everywhere({"cp-1": {"gpufleet_soak_seconds": 5}, "gpu-a1": {"gpufleet_soak_seconds": 5}},
                    ["gpufleet_soak_seconds"])
    with pytest.raises(InputError, match="gpufleet_reach_timeout is cell-wide but differs between hosts "
                                         r"\(120 on gpu-a1; None on cp-1\)"):
        same_everywhere({"cp-1": {}, "gpu-a1": {"gpufleet_reach_timeout": 120}}, ["gpufleet_reach_timeout"])


def test_addon_inputs_are_read_and_checked_with_the_cell():
    rows = [{"addon": "kueue", "version": "v0.17.0", "kube_min": "1.30", "kube_max": "1.36",
             "source": "https://example.invalid/kueue"}]
    built = cell(cell_vars={"gpufleet_addon_support": rows, "gpufleet_addon_versions": {"jobset": "v0.11.1"}})
    assert built.addons == {"support": [dict(rows[0], version="0.17")], "versions": {"jobset": "0.11"},
                            "releases": [], "defined": []}
    assert cell().addons == {"support": [], "versions": {}, "releases": [], "defined": []}
    # an addon the code does not know: defined by the inventory, its rows and its Helm release taken with it
    csi = {"addon": "ceph_csi", "name": "Ceph CSI", "stage": 4, "images": ["cephcsi/cephcsi"], "charts": []}
    own = cell(cell_vars={"gpufleet_addons": [csi], "gpufleet_addon_support": [
        {"addon": "ceph_csi", "version": "3.14", "kube_min": "1.31", "kube_max": "", "source": "https://x.example"}],
        "gpufleet_addon_releases": [releases_of := {"addon": "ceph_csi", "release": "ceph-csi-rbd",
                                                    "namespace": "ceph-csi", "chart": "ceph-csi/ceph-csi-rbd"}]})
    assert own.addons["defined"] == [dict(csi, network_policy=False)]
    assert [(r["release"], r["stage"]) for r in own.addons["releases"]] == [("ceph-csi-rbd", 4)]
    with pytest.raises(InputError, match=r"gpufleet_addon_releases\[0\].addon: 'ceph_csi' is not an addon"):
        cell(cell_vars={"gpufleet_addon_releases": [releases_of]})
    releases = [{"addon": "kueue", "release": "kueue", "namespace": "kueue-system", "chart": "kueue/kueue"},
                {"addon": "cilium", "release": "cilium", "namespace": "kube-system", "chart": "cilium/cilium"}]
    assert [r["release"] for r in cell(cell_vars={"gpufleet_addon_releases": releases}).addons["releases"]] == [
        "cilium", "kueue"]  # the CNI before Kueue, whatever the inventory's order
    with pytest.raises(InputError, match=r"gpufleet_addon_releases\[0\].addon: 'nope'"):
        cell(cell_vars={"gpufleet_addon_releases": [dict(releases[0], addon="nope")]})
    with pytest.raises(InputError, match=r"gpufleet_addon_support\[0\].source: required"):
        cell(cell_vars={"gpufleet_addon_support": [dict(rows[0], source="")]})


def test_security_inputs_are_read_and_checked_with_the_cell():
    probe = {"namespace": "inference", "image": "registry.example/app:latest", "expect": "require-signed"}
    accepted = [{"binding": "break-glass", "role": "cluster-admin", "subject": "User alice", "reason": "INC-42"}]
    release = {"addon": "kueue", "release": "kueue", "namespace": "kueue-system", "chart": "kueue/kueue",
               "version": "0.17.0"}
    built = cell(cell_vars={"gpufleet_security_admission_probes": [probe], "gpufleet_security_rbac_accepted": accepted,
                            "gpufleet_addon_releases": [release]})
    assert built.security == {"admission_probes": [probe], "rbac_accepted": accepted,
                              "addon_releases": [{"release": "kueue-system/kueue", "version": "0.17.0"}]}
    assert cell().security == {"admission_probes": [], "rbac_accepted": [], "addon_releases": []}
    with pytest.raises(InputError, match=r"gpufleet_security_admission_probes\[0\].expect: required"):
        cell(cell_vars={"gpufleet_security_admission_probes": [dict(probe, expect=" ")]})
    with pytest.raises(InputError, match="gpufleet_security_rbac_expected: binding-name patterns are no longer"):
        cell(cell_vars={"gpufleet_security_rbac_expected": ["system:*"]})
    with pytest.raises(InputError, match=r"gpufleet_security_rbac_accepted\[0\]: binding, role and subject are exact"):
        cell(cell_vars={"gpufleet_security_rbac_accepted": [dict(accepted[0], binding="kubeadm:*")]})


def test_canary_workloads_are_read_with_the_cell_and_planned_on_canary_waves_only():
    workloads = {"training": {"image": "registry.example/nccl:1"}}
    with_figures = {"h100-train": pool_baseline(canary={"training_busbw_gbps": {"8G": 400.0}, "training_nodes": 1})}
    built = cell(cell_vars={"gpufleet_canary_workloads": workloads}, baselines=with_figures)
    assert built.canary_workloads["training"]["image"] == "registry.example/nccl:1"
    assert [w["canary_runs"] for w in built.gpu_waves] == [
        [{"workload": "training", "pool": "h100-train", "nodes": ["gpu-a1"]}], [], []]
    assert cell().canary_workloads == {} and all(w["canary_runs"] == [] for w in cell().gpu_waves)
    with pytest.raises(InputError, match=r"pool h100-train: baseline canary.training_busbw_gbps is not set"):
        cell(cell_vars={"gpufleet_canary_workloads": workloads})
    with pytest.raises(InputError, match=r"a gang of 2 node\(s\), but the pool has 1 canary node\(s\) in its wave"):
        cell(cell_vars={"gpufleet_canary_workloads": workloads},
             baselines={"h100-train": pool_baseline(canary={"training_busbw_gbps": {"8G": 400.0}})})
    with pytest.raises(InputError, match=r"gpufleet_canary_workloads: .*image"):
        cell(cell_vars={"gpufleet_canary_workloads": {"training": {}}}, baselines=with_figures)


def test_a_wave_wider_than_the_runs_forks_is_named_with_the_forks_it_needs():
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.cell import forks_warning
    waves = cell().gpu_waves  # 1, 1 and 2 nodes
    assert forks_warning(waves, 2) is None and forks_warning(waves, 20) is None
    assert forks_warning(waves, 1) == (
        "wave(s) 3 have up to 2 nodes but ansible_forks is 1: each of their tasks reaches the nodes 1 at a time, so "
        "such a wave takes about 2 times as long as planned; set forks to at least 2 (ansible.cfg [defaults] forks, "
        "-f 2, or the AWX job template's forks)")
    wide = [{"index": 1, "nodes": ["n%d" % i for i in range(41)]}, {"index": 2, "nodes": ["x"] * 20}]
    assert "wave(s) 1 have up to 41 nodes but ansible_forks is 20" in forks_warning(wide, 20)
    assert "about 3 times as long" in forks_warning(wide, 20)
    for unknown in (None, 0, "20", True):  # not known: nothing to say
        assert forks_warning(waves, unknown) is None


def test_a_skip_level_cycle_keeps_its_skip_level_pools_out_of_this_hops_waves():
    hosts = dict(HOSTS, **{h: dict(HOSTS[h], gpufleet_pool="h100-serve") for h in ("gpu-b1", "gpu-b2")})
    baselines = dict(BASELINES, **{"h100-serve": pool_baseline(name="h100-serve")})
    policies = {"h100-serve": {"skip_level": False}}
    c = cell(hosts=hosts, baselines=baselines, cell_vars={"gpufleet_pool_policies": policies,
                                                         "gpufleet_cycle_target_version": "1.37.2"})
    assert (c.cycle_target, c.holding_pools) == ("v1.37.2", ["h100-train"])
    assert [w["nodes"] for w in c.gpu_waves] == [["gpu-b1"], ["gpu-b2"]]  # only the pool that follows each hop
    assert "h100-train stay at their kubelet until the cycle's last hop v1.37.2" in c.summary
    last = cell(hosts=hosts, baselines=baselines, cell_vars={"gpufleet_pool_policies": policies,
                                                            "gpufleet_target_version": "v1.37.2",
                                                            "gpufleet_cycle_target_version": "v1.37.2"})
    assert last.holding_pools == [] and sorted(n for w in last.gpu_waves for n in w["nodes"]) == GROUPS["gpu_nodes"]
    plain = cell()
    assert (plain.cycle_target, plain.holding_pools) == ("v1.36.3", [])


@pytest.mark.parametrize("cycle,message", [
    ("v1.35.9", "is below this run's target v1.36.3"),
    ("v1.39.0", "is 3 minors above this run's target v1.36.3"),
    ("v2.37.0", "changes the major version"),
    ("1.37", "is not a full release; give one such as v1.37.0"),
])
def test_a_cycle_target_that_cannot_end_this_run_s_cycle_is_refused(cycle, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")) as err:
        cell(cell_vars={"gpufleet_cycle_target_version": cycle})
    assert "Nothing was changed" in str(err.value)


# -- hostile values (issue 33): every cell variable is type-checked where it enters, naming it and the fix --------
@pytest.mark.parametrize("cell_vars, message", [
    ({"gpufleet_wave_caps": [0.5]}, "gpufleet_wave_caps: expected a mapping such as {max_gpu_fraction: 0.25}"),
    ({"gpufleet_wave_caps": "max_gpu_fraction=0.5"}, "gpufleet_wave_caps: expected a mapping"),
    ({"gpufleet_wave_caps": {"max_gpu_fraction": "0.5"}}, "gpufleet_wave_caps.max_gpu_fraction: expected a fraction"),
    ({"gpufleet_pool_policies": [None]}, "gpufleet_pool_policies: expected a mapping of pool to {skip_level: bool}"),
    ({"gpufleet_pool_policies": {"h100-train": {"skip_level": "yes"}}},
     "gpufleet_pool_policies.h100-train.skip_level: expected a boolean"),
    ({"gpufleet_expected_cell": ["lab"]}, "gpufleet_expected_cell: expected the cell's name, a string"),
    ({"gpufleet_cluster_name": ["lab"]}, "gpufleet_cluster_name (the cell's name"),
    # cell names are ASCII DNS labels: full-width letters, other Unicode and a trailing newline are refused
    ({"gpufleet_cluster_name": "\uff47\uff50\uff55"}, "gpufleet_cluster_name='\uff47\uff50\uff55': not a DNS label"),
    ({"gpufleet_cluster_name": "lab\n"}, "gpufleet_cluster_name='lab\\n': not a DNS label"),
    ({"gpufleet_cluster_name": "l\u00e4b"}, "not a DNS label"),
    ({"gpufleet_cluster_name": "lab\u0663"}, "not a DNS label"),  # an Arabic-Indic digit: str.isalnum() takes it
    ({"gpufleet_cluster_name": "-lab"}, "not a DNS label"),
    ({"gpufleet_target_version": "v1.3\u0666.3"}, "gpufleet_target_version: 'v1.3\u0666.3' is not a Kubernetes "
                                                  "version"),  # \d takes an Arabic-Indic six
    ({"gpufleet_target_version": 1.36}, "gpufleet_target_version: expected a Kubernetes version"),
    # etcd moves in a window of its own, never in a run that moves Kubernetes
    ({"gpufleet_etcd_target_version": "3.7.3"}, "gpufleet_etcd_target_version=3.7.3: etcd moves in a window of its "
                                                "own (playbooks/etcd_upgrade.yml)"),
])
def test_a_cell_variable_of_the_wrong_type_or_form_is_refused_naming_it(cell_vars, message):
    with pytest.raises(InputError) as err:
        cell(cell_vars=cell_vars)
    assert message in err.value.msg


@pytest.mark.parametrize("url", ["https://127.0.0.1:6443\n", "https://127.0.0.1:\uff16443", "https://\uff4c\uff42"])
def test_an_apiserver_url_with_a_trailing_newline_or_unicode_is_refused(url):
    with pytest.raises(InputError, match="cp-1: gpufleet_apiserver_url: expected an https:// URL"):
        cell(hosts=dict(HOSTS, **{"cp-1": {"gpufleet_apiserver_url": url}}))
