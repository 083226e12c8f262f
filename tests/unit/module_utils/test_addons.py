from __future__ import annotations

import base64
import gzip
import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.addons import (
    catalog, check_addons, check_definition, check_row, first_supporting, parse_inputs, parse_releases, split_image,
    stage_problems, support_rows, version_line)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_addons import ADDONS, MATRIX, SHIPPED_ONLY, SOURCES
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import scan_helm_secrets
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version

ROWS = [  # the operator's rows: the judgement is tested on them, apart from what the shipped matrix says
    {"addon": "calico", "version": "3.28", "kube_min": "1.28", "kube_max": "1.30", "source": "https://a.example/3.28"},
    {"addon": "calico", "version": "3.29", "kube_min": "1.29", "kube_max": "1.31", "source": "https://a.example/3.29"},
    {"addon": "calico", "version": "3.30", "kube_min": "1.30", "kube_max": "1.32", "source": "https://a.example/3.30"},
    {"addon": "kueue", "version": "0.13", "kube_min": "1.29", "kube_max": "", "source": "https://k.example/0.13"},
]


def workload(kind, namespace, name, *images, init=()):
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": {"containers": [{"name": "c%d" % i, "image": image}
                                                          for i, image in enumerate(images)],
                                           "initContainers": [{"name": "i", "image": image} for image in init]}}}}


def helm_secret(namespace, name, chart, chart_version, app_version, revision=1, status="deployed"):
    release = {"name": name, "namespace": namespace, "version": revision, "info": {"status": status},
               "chart": {"metadata": {"name": chart, "version": chart_version, "appVersion": app_version}},
               "config": {"password": "hunter2"}, "manifest": ""}
    data = base64.b64encode(base64.b64encode(gzip.compress(json.dumps(release).encode()))).decode()
    return {"type": "helm.sh/release.v1", "metadata": {"name": "sh.helm.release.v1.%s.v%d" % (name, revision),
                                                      "namespace": namespace}, "data": {"release": data}}


def releases(*secrets):
    """The release metadata removed_apis hands on after decoding the secrets (as the preflight role passes it)."""
    out: list = []
    scan_helm_secrets(list(secrets), parse_version("v1.31.0"), out)
    return out


@pytest.mark.parametrize("image, expected", [
    ("quay.io/calico/node:v3.29.1", ("quay.io/calico/node", "v3.29.1", "")),
    ("localhost:5000/calico/node:v3.29.1@sha256:ab", ("localhost:5000/calico/node", "v3.29.1", "sha256:ab")),
    ("registry.local:5000/kueue/kueue@sha256:cd", ("registry.local:5000/kueue/kueue", "", "sha256:cd")),
    ("coredns/coredns", ("coredns/coredns", "", "")),
])
def test_split_image(image, expected):
    assert split_image(image) == expected


def test_version_lines():
    assert [version_line(v) for v in ("v3.29.1", "25.3.0", "0.13", "v1.31.2-gke.1", "v01.35.0", "latest", "", 1.3,
                                      None)] == ["3.29", "25.3", "0.13", "1.31", "1.35", None, None, None, None]


def test_an_addon_too_old_for_the_target_blocks_naming_it_its_version_and_the_first_that_supports_it():
    result = check_addons([workload("DaemonSet", "kube-system", "calico-node", "quay.io/calico/node:v3.28.2",
                                    init=["quay.io/calico/node:v3.28.2"])], [],
                          "v1.31.4", apiserver="v1.30.2", extra_support=ROWS)
    assert not result["passed"]
    (message,) = result["blocking"]  # one per workload and version, however many containers run the image
    assert message == ("Calico 3.28 (DaemonSet kube-system/calico-node image quay.io/calico/node:v3.28.2) supports "
                       "Kubernetes 1.28-1.30, not the target 1.31; upgrade it to Calico 3.29 or later first")
    assert result["findings"][0]["first_supporting"] == "3.29" and result["summary"] == ["calico 3.28 block"]


def test_the_advised_release_must_also_run_on_todays_control_plane():
    rows = support_rows(ROWS)
    target = parse_version("v1.31.0")
    assert first_supporting("calico", target, parse_version("v1.30.1"), rows) == ("3.29", True)
    assert first_supporting("calico", target, parse_version("v1.28.1"), rows) == (None, False)  # 3.29 needs 1.29
    result = check_addons([workload("DaemonSet", "kube-system", "calico-node", "calico/node:v3.28.0")], [],
                          "v1.31.0", apiserver="v1.28.3", extra_support=ROWS)
    assert "no newer release in the matrix supports both the current control plane and 1.31" in result["blocking"][0]
    # never a downgrade: an older line that supports the target is not advised
    older = check_addons([workload("Deployment", "kueue-system", "kueue", "registry.k8s.io/kueue/kueue:v0.17.0")], [],
                         "v1.36.0", apiserver="v1.35.1", extra_support=[dict(ROWS[3], version="0.17", kube_max="1.35")])
    assert "upgrade it" not in older["blocking"][0] and "no newer release in the matrix" in older["blocking"][0]


def test_supported_passes_and_no_upper_bound_warns():
    result = check_addons([workload("Deployment", "calico-system", "calico-kube-controllers",
                                    "docker.io/calico/kube-controllers:v3.30.0", "calico/node:v3.30.0"),
                           workload("Deployment", "kueue-system", "kueue-controller-manager",
                                    "registry.k8s.io/kueue/kueue:v0.13.4")], [], "v1.31.0", extra_support=ROWS)
    assert result["passed"] and result["blocking"] == []
    assert [f["severity"] for f in result["findings"]] == ["ok", "warn"]
    assert result["warnings"] == ["Kueue 0.13 (Deployment kueue-system/kueue-controller-manager image "
                                  "registry.k8s.io/kueue/kueue:v0.13.4) documents Kubernetes 1.29 or later with no "
                                  "upper bound; check that it supports 1.31"]


def test_a_release_the_matrix_does_not_know_blocks():
    result = check_addons([workload("DaemonSet", "kube-system", "calico-node", "calico/node:v3.10.0")], [],
                          "v1.31.0", extra_support=ROWS)
    (message,) = result["blocking"]
    assert "Calico 3.10" in message and "is not in the addon matrix" in message
    assert "gpufleet_addon_support: [{addon: calico, version: '3.10'" in message
    assert message.endswith("(Calico 3.29 supports 1.31)")
    newer = check_addons([workload("DaemonSet", "kube-system", "calico-node", "calico/node:v3.99.0")], [],
                         "v1.31.0", extra_support=ROWS)
    assert newer["blocking"][0].endswith("source: URL}]")  # no older release is offered in its place


def test_an_untagged_image_blocks_unless_its_version_is_declared():
    untagged = [workload("Deployment", "kueue-system", "kueue-controller-manager",
                         "registry.k8s.io/kueue/kueue@sha256:" + "a" * 64)]
    result = check_addons(untagged, [], "v1.31.0", extra_support=ROWS)
    assert not result["passed"] and "its version cannot be read" in result["blocking"][0]
    assert "gpufleet_addon_versions: {kueue: 'X.Y.Z'}" in result["blocking"][0]
    declared = check_addons(untagged, [], "v1.31.0", extra_support=ROWS, declared_versions={"kueue": "v0.13.1"})
    assert declared["passed"] and declared["installed"][0]["version"] == "0.13"
    assert declared["installed"][0]["where"].endswith("(version declared)")


def test_helm_releases_newest_deployed_revision_and_app_version_first():
    found = releases(helm_secret("calico-system", "calico", "tigera-operator", "v3.28.0", "v3.28.0", revision=1,
                                 status="superseded"),
                     helm_secret("calico-system", "calico", "tigera-operator", "v3.30.1", "v3.30.1", revision=2),
                     helm_secret("kueue-system", "kueue", "kueue", "0.13.2", "v0.13.2", revision=4),
                     helm_secret("web", "site", "nginx", "15.0.0", "1.25.0"))
    assert "hunter2" not in json.dumps(found)  # metadata only: no values reach the addon check
    result = check_addons([], found, "v1.31.0", extra_support=ROWS)
    assert [(i["addon"], i["version"]) for i in result["installed"]] == [("calico", "3.30"), ("kueue", "0.13")]
    assert result["installed"][0]["where"] == ("Helm release calico-system/calico (chart tigera-operator-v3.30.1, "
                                               "revision 2)")
    assert [s["addon"] for s in result["stages"]] == ["calico", "kueue"]  # the addons stage's order
    # a chart whose appVersion is not a version is not read from the chart's own version (Kyverno's differ)
    odd = check_addons([], releases(helm_secret("kyverno", "kyverno", "kyverno", "3.2.6", "latest")), "v1.31.0")
    assert odd["installed"][0]["version"] == "" and "its version cannot be read from 'latest'" in odd["blocking"][0]


def test_kubeadms_kube_proxy_and_coredns_are_reported_never_blocking():
    result = check_addons([workload("DaemonSet", "kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:v1.31.2"),
                           workload("Deployment", "kube-system", "coredns",
                                    "registry.k8s.io/coredns/coredns:v1.8.6")], [], "v1.34.1", apiserver="v1.33.0")
    assert result["passed"] and [f["severity"] for f in result["findings"]] == ["ok", "ok"]
    assert result["findings"][1]["message"] == (
        "CoreDNS 1.8 (Deployment kube-system/coredns image registry.k8s.io/coredns/coredns:v1.8.6): kubeadm upgrade "
        "apply moves it to the version it pins for 1.34 (CoreDNS 1.12)")
    helm = check_addons([], releases(helm_secret("dns", "coredns", "coredns", "1.29.0", "1.9.3")), "v1.34.1")
    assert helm["passed"] and helm["findings"][0]["severity"] == "warn"
    assert "is not kubeadm's to move" in helm["warnings"][0]


def test_gatekeeper_has_a_rule_not_a_range_so_it_is_a_warning():
    result = check_addons([workload("Deployment", "gatekeeper-system", "gatekeeper-controller-manager",
                                    "openpolicyagent/gatekeeper:v3.17.1")], [], "v1.34.0")
    assert result["passed"] and result["findings"][0]["severity"] == "warn"
    assert "publishes no fixed Kubernetes range" in result["warnings"][0] and "n-3" in result["warnings"][0]


def test_images_of_other_software_and_odd_objects_are_not_addons():
    odd = [{"kind": "Deployment", "metadata": "x", "spec": "y"}, "not a mapping", None,
           {"kind": "DaemonSet", "spec": {"template": {"spec": {"containers": "nginx"}}}},
           {"kind": "Deployment", "spec": {"template": {"spec": {"containers": [None, {"image": 7}]}}}}]
    result = check_addons(odd + [workload("Deployment", "web", "site", "nginx:1.25", "example.com/calico/nodejs:1.0",
                                          init=["busybox:1.36"])],
                          [{"chart": ["x"], "status": "deployed"}, "junk"], "v1.31.0")
    assert result["installed"] == [] and result["passed"]


@pytest.mark.parametrize("support, versions, message", [
    ({"addon": "calico"}, None, "gpufleet_addon_support: expected a list of rows"),
    ([{"addon": "flannel", "version": "0.1", "kube_min": "1.30", "source": "x"}], None,
     r"gpufleet_addon_support\[0\].addon: 'flannel' is not one of"),
    ([{"addon": "coredns", "version": "1.12", "kube_min": "1.30", "source": "x"}], None,
     r"kubeadm moves coredns itself: it needs no row"),
    ([{"addon": ["calico"], "version": "1.12", "kube_min": "1.30", "source": "x"}], None,
     r"gpufleet_addon_support\[0\].addon: \['calico'\] is not one of"),
    ([{"addon": "calico", "version": "three", "kube_min": "1.30", "source": "x"}], None,
     r"gpufleet_addon_support\[0\].version: give a MAJOR.MINOR version"),
    ([{"addon": "kueue", "version": "0.20", "kube_min": 1.30, "source": "x"}], None,
     r"gpufleet_addon_support\[0\].kube_min: quote it \('1.30' - YAML read the unquoted kube_min as the number 1.3\)"),
    ([{"addon": "calico", "version": "3.31", "kube_min": "1.30", "kube_max": "soon", "source": "x"}], None,
     r"gpufleet_addon_support\[0\].kube_max"),
    ([{"addon": "calico", "version": "3.31", "kube_min": "1.36", "kube_max": "1.30", "source": "x"}], None,
     r"gpufleet_addon_support\[0\]: kube_min 1.36 is above kube_max 1.30"),
    ([ROWS[0], {"addon": "calico", "version": "3.31", "kube_min": "1.30", "kube_max": "1.33"}], None,
     r"gpufleet_addon_support\[1\].source: required"),
    ([ROWS[0], ROWS[0]], None, r"gpufleet_addon_support\[1\]: calico 3.28 is already given by "
                               r"gpufleet_addon_support\[0\]"),
    ([], {"flannel": "0.1"}, "gpufleet_addon_versions: 'flannel' is not an addon"),
    ([], {"kueue": "latest"}, "gpufleet_addon_versions.kueue: give a MAJOR.MINOR version"),
    ([], {"kueue": 0.10}, r"gpufleet_addon_versions.kueue: quote it \('0.10'"),
    ([], ["kueue"], "gpufleet_addon_versions: expected a mapping"),
])
def test_bad_addon_inputs_are_refused_naming_the_field(support, versions, message):
    with pytest.raises(InputError, match=message):
        parse_inputs(support, versions)


def test_the_operators_rows_win_over_the_shipped_ones():
    inputs = parse_inputs([{"addon": "calico", "version": "v3.29.0", "kube_min": "1.20", "kube_max": "1.40",
                            "source": "https://mirror.example/calico"}], {"kueue": "v0.13.1"})
    assert inputs == {"defined": [], "support": [{"addon": "calico", "version": "3.29", "kube_min": "1.20",
                                                  "kube_max": "1.40", "source": "https://mirror.example/calico"}],
                      "versions": {"kueue": "0.13"}}
    rows = support_rows(inputs["support"])
    shipped = [r for r in MATRIX if (r.addon, r.version) == ("calico", "3.29")]
    assert rows[0].source == "https://mirror.example/calico" and len(rows) == len(MATRIX) + 1 - len(shipped)
    assert [r.source for r in rows if (r.addon, r.version) == ("calico", "3.29")] == ["https://mirror.example/calico"]


def test_every_matrix_row_is_consistent_and_sourced():
    assert MATRIX, "the shipped matrix is empty"
    for row in MATRIX:
        assert row.addon in ADDONS and row.source in SOURCES, row
        assert version_line(row.version) == row.version and version_line(row.kube_min) == row.kube_min, row
        if row.kube_max:
            assert tuple(map(int, row.kube_min.split("."))) <= tuple(map(int, row.kube_max.split("."))), row
    assert len({(r.addon, r.version) for r in MATRIX}) == len(MATRIX)
    for key, spec in ADDONS.items():
        assert spec["name"] and isinstance(spec["stage"], int) and (spec["images"] or spec["charts"]), key
        assert spec.get("rule") in (None, *SOURCES), key
    assert all(source.startswith("http") for source in SOURCES.values())


def test_the_shipped_addons_and_rows_pass_the_schema_the_operators_own_are_held_to():
    for key, spec in ADDONS.items():  # each against the others, as an operator's addon is against every other one
        others = {k: v for k, v in ADDONS.items() if k != key}
        definition = {k: v for k, v in spec.items() if k not in SHIPPED_ONLY}
        if spec.get("managed_by"):  # kubeadm's two take stages 1 and 2, which an operator's addon may not
            definition["stage"] = 3
        if key == "kube_proxy":  # kubeadm's image has no organisation in its path (registry.k8s.io/kube-proxy)
            definition["images"] = ["kube-proxy/kube-proxy"]
        assert check_definition(dict(definition, addon=key + "_x"), key, others)["name"] == spec["name"]
    for row in MATRIX:
        assert check_row(row._asdict(), "MATRIX %s %s" % (row.addon, row.version), shipped=True) == row


NETWORK_OPERATOR = {"addon": "nvidia_network_operator", "name": "NVIDIA Network Operator", "stage": 5,
                    "images": ["nvidia/cloud-native/network-operator"], "charts": ["network-operator"]}
NETWORK_ROW = {"addon": "nvidia_network_operator", "version": "24.4", "kube_min": "1.27", "kube_max": "1.29",
               "source": "https://docs.nvidia.com/networking/display/kubernetes2440/platform-support.html"}


def test_an_addon_the_code_does_not_know_is_found_and_judged_by_the_operators_rows():
    images = [workload("Deployment", "nvidia-network-operator", "network-operator",
                       "nvcr.io/nvidia/cloud-native/network-operator:v24.4.1")]
    helm = releases(helm_secret("nvidia-network-operator", "netop", "network-operator", "24.4.1", "v24.4.1"))
    result = check_addons(images, helm, "v1.29.4", "v1.28.9", [NETWORK_ROW], None, [NETWORK_OPERATOR])
    assert [(e["addon"], e["version"], e["via"]) for e in result["installed"]] == [
        ("nvidia_network_operator", "24.4", "workload"), ("nvidia_network_operator", "24.4", "helm")]
    assert result["passed"] and {f["severity"] for f in result["findings"]} == {"ok"}
    assert result["stages"] == [{"addon": "nvidia_network_operator", "name": "NVIDIA Network Operator", "stage": 5}]
    late = check_addons(images, [], "v1.30.0", "v1.29.4", [NETWORK_ROW], None, [NETWORK_OPERATOR])
    assert late["blocking"] == ["NVIDIA Network Operator 24.4 (Deployment nvidia-network-operator/network-operator "
                                "image nvcr.io/nvidia/cloud-native/network-operator:v24.4.1) supports Kubernetes "
                                "1.27-1.29, not the target 1.30; no newer release in the matrix supports both the "
                                "current control plane and 1.30: add the row of one that does (gpufleet_addon_support) "
                                "or go through an intermediate minor"]
    # without its definition it is not found at all, and a row naming it is refused
    assert check_addons(images, helm, "v1.29.4")["installed"] == []
    with pytest.raises(InputError, match=r"extra_support\[0\].addon: 'nvidia_network_operator' is not one of .*"
                                         "define an addon the code does not know in gpufleet_addons first"):
        check_addons(images, helm, "v1.29.4", None, [NETWORK_ROW])
    # without a row it blocks as any unknown release does, and its own addons stage place orders its release
    unknown = check_addons(images, [], "v1.29.4", None, [], None, [NETWORK_OPERATOR])
    assert "is not in the addon matrix" in unknown["blocking"][0]
    rel = {"addon": "nvidia_network_operator", "release": "netop", "namespace": "nvidia-network-operator",
           "chart": "nvidia/network-operator", "version": "24.4.1"}
    kueue = {"addon": "kueue", "release": "kueue", "namespace": "kueue-system", "chart": "kueue/kueue"}
    assert [r["release"] for r in parse_releases([kueue, rel], known=catalog([NETWORK_OPERATOR]))] == ["netop", "kueue"]
    with pytest.raises(InputError, match=r"'nvidia_network_operator' is not an addon gpufleet knows .*gpufleet_addons"):
        parse_releases([rel])


def test_the_cell_carries_the_operators_addons_and_their_rows():
    inputs = parse_inputs([NETWORK_ROW], {"nvidia_network_operator": "v24.4.1"}, [NETWORK_OPERATOR])
    assert inputs["defined"] == [dict(NETWORK_OPERATOR, network_policy=False)]
    assert inputs["support"] == [NETWORK_ROW] and inputs["versions"] == {"nvidia_network_operator": "24.4"}


@pytest.mark.parametrize("defined, message", [
    ({"addon": "x"}, "gpufleet_addons: expected a list of addons"),
    (["netop"], r"gpufleet_addons\[0\]: expected a mapping"),
    ([dict(NETWORK_OPERATOR, addon="calico")], r"gpufleet_addons\[0\].addon: calico is a shipped addon \(Calico\)"),
    ([NETWORK_OPERATOR, NETWORK_OPERATOR], r"gpufleet_addons\[1\].addon: nvidia_network_operator is defined twice"),
    ([dict(NETWORK_OPERATOR, addon="Net-Op")], r"gpufleet_addons\[0\].addon: 'Net-Op'; give a key of lower-case"),
    ([dict(NETWORK_OPERATOR, stage=2)], r"gpufleet_addons\[0\].stage: 2; give 3 \(CNI\) to 8"),
    ([dict(NETWORK_OPERATOR, stage="five")], r"gpufleet_addons\[0\]: .*stage"),
    ([dict(NETWORK_OPERATOR, images=[], charts=[])], r"gpufleet_addons\[0\]: neither images nor charts"),
    ([dict(NETWORK_OPERATOR, images=["network-operator"])],
     r"gpufleet_addons\[0\].images: 'network-operator'; give an image repository as ORG/NAME"),
    ([dict(NETWORK_OPERATOR, images=["nvcr.io/nvidia/x:v1"])], r"gpufleet_addons\[0\].images: 'nvcr.io/nvidia/x:v1'"),
    ([dict(NETWORK_OPERATOR, images=["kueue/kueue"])],
     r"gpufleet_addons\[0\].images: kueue/kueue already identifies kueue \(Kueue\)"),
    ([NETWORK_OPERATOR, dict(NETWORK_OPERATOR, addon="netop2", images=["x/y"])],
     r"gpufleet_addons\[1\].charts: network-operator already identifies nvidia_network_operator"),
    ([dict(NETWORK_OPERATOR, charts=["Network Operator"])], r"gpufleet_addons\[0\].charts: 'Network Operator' is not"),
    ([dict(NETWORK_OPERATOR, managed_by="kubeadm")], r"gpufleet_addons\[0\].managed_by: only the shipped addons"),
    ([dict(NETWORK_OPERATOR, registry="nvcr.io")], r"gpufleet_addons\[0\]: .*registry"),
    ([dict(NETWORK_OPERATOR, name=" ")], r"gpufleet_addons\[0\].name: empty"),
])
def test_a_bad_addon_definition_is_refused_naming_the_field(defined, message):
    with pytest.raises(InputError, match=message):
        parse_inputs([], None, defined)


@pytest.mark.parametrize("row, message", [
    (dict(NETWORK_ROW, kube_min="1.30"), r"gpufleet_addon_support\[0\]: kube_min 1.30 is above kube_max 1.29, an "
                                         "empty range"),
    (dict(NETWORK_ROW, kube_max="2.0"), r"gpufleet_addon_support\[0\].kube_max: 2.0 is not a Kubernetes minor"),
    (dict(NETWORK_ROW, kube_min="0.27"), r"gpufleet_addon_support\[0\].kube_min: 0.27 is not a Kubernetes minor"),
    (dict(NETWORK_ROW, url="https://x"), r"gpufleet_addon_support\[0\]: .*url"),
    (dict(NETWORK_ROW, source=" "), r"gpufleet_addon_support\[0\].source: required"),
])
def test_an_operators_row_with_an_impossible_range_is_refused(row, message):
    with pytest.raises(InputError, match=message):
        parse_inputs([row], None, [NETWORK_OPERATOR])


def test_addon_releases_are_checked_and_put_in_the_seeds_order():
    rel = {"release": "r", "namespace": "ns", "chart": "repo/chart", "version": "1.0.0"}
    out = parse_releases([dict(rel, addon="kyverno", release="policy"), dict(rel, addon="cilium", release="cni"),
                          dict(rel, addon="kueue", release="queue"), dict(rel, addon="jobset", release="jobs")])
    assert [(r["release"], r["stage"]) for r in out] == [("cni", 3), ("queue", 6), ("jobs", 6), ("policy", 8)]
    assert out[0]["has_values"] is False and out[0]["timeout"] == 600  # the defaults, filled in once
    assert parse_releases(None) == []


@pytest.mark.parametrize("item, message", [
    ({"addon": "cilium", "namespace": "n", "chart": "c"}, r"gpufleet_addon_releases\[0\]: missing required arguments: "
                                                          r"release"),
    ({"addon": "flannel", "release": "r", "namespace": "n", "chart": "c"}, r"addon: 'flannel' is not an addon"),
    ({"addon": "coredns", "release": "r", "namespace": "n", "chart": "c"}, r"moved by kubeadm's own addon phase"),
    ({"addon": "cilium", "release": "R_1", "namespace": "n", "chart": "c"}, r"release: 'R_1' is not a valid Helm"),
    ({"addon": "cilium", "release": "r", "namespace": "n", "chart": "c", "timeout": 5}, r"timeout: 5 s; give 30"),
    ({"addon": "cilium", "release": "r", "namespace": "n", "chart": "c", "values": "x"}, r"values"),
    ({"addon": "cilium", "release": "r", "namespace": "n", "chart": "c", "crds": ["https://x/crd.yaml"]},
     r"crds: 'https://x/crd.yaml'; give paths of CRD manifest files on the controller"),
])
def test_a_bad_addon_release_is_refused_naming_the_field(item, message):
    with pytest.raises(InputError, match=message):
        parse_releases([item])
    with pytest.raises(InputError, match="listed twice"):
        parse_releases([{"addon": "cilium", "release": "r", "namespace": "n", "chart": "c"}] * 2)


def test_what_would_stop_the_addons_stage_blocks_before_the_control_plane_moves():
    releases = parse_releases([{"addon": "cilium", "release": "cilium", "namespace": "kube-system", "chart": "c",
                                "crds": ["/crds/cilium.yaml"]},
                               {"addon": "kueue", "release": "kueue", "namespace": "kueue-system", "chart": "c"},
                               {"addon": "kyverno", "release": "kyverno", "namespace": "kyverno", "chart": "c"}])
    helm = [{"namespace": "kube-system", "name": "cilium", "revision": 3, "status": "superseded"},
            {"namespace": "kube-system", "name": "cilium", "revision": 4, "status": "deployed"},
            {"namespace": "kueue-system", "name": "kueue", "revision": 2, "status": "failed"}]
    problems = stage_problems(releases, helm, lambda path: False)
    assert problems == [
        "gpufleet_addon_releases: release kube-system/cilium: CRD file /crds/cilium.yaml is not on the controller",
        "gpufleet_addon_releases: release kueue-system/kueue: its latest revision 2 is failed, not deployed; fix it "
        "with helm (history, rollback) before the window",
        "gpufleet_addon_releases: release kyverno/kyverno is not a Helm release in the cluster (helm list -n "
        "kyverno); fix the name or install it first - the addons stage upgrades releases, it does not install them"]
    assert stage_problems(releases[:1], helm, lambda path: True) == []
    assert "values" not in releases[0] and releases[0]["has_values"] is False  # values are not handed on


# -- whole values only (issue 33): `$` matched before a trailing newline, \d took Unicode digits ------------------
@pytest.mark.parametrize("field, value, message", [
    ("release", "cni\n", r"release: 'cni\\n' is not a valid Helm release name"),
    ("namespace", "kube-system\n", r"namespace: 'kube-system\\n' is not a valid namespace name"),
    ("release", "cn\uff49", "is not a valid Helm release name"),
])
def test_a_release_name_or_namespace_with_a_trailing_newline_or_unicode_is_refused(field, value, message):
    item = dict({"addon": "cilium", "release": "cni", "namespace": "kube-system", "chart": "c"}, **{field: value})
    with pytest.raises(InputError, match=message):
        parse_releases([item])


def test_an_addon_version_takes_ascii_digits_only():
    assert version_line("v0.13.1") == "0.13" and version_line("v0.1\u0663.1") is None  # an Arabic-Indic three
    with pytest.raises(InputError, match="gpufleet_addon_versions"):
        parse_inputs(None, {"kueue": "v0.1\u0663.1"})
