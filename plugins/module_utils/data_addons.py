# Copyright: gpufleet contributors
# Apache License 2.0
"""Kubernetes compatibility of the cluster addons a GPU-cluster upgrade checks before it moves the control plane to a
new Kubernetes minor: one row per addon release line with the Kubernetes minors that line is documented or tested to
support, and where that comes from (a key of SOURCES).

Kept as Python so it travels with the modules (AnsiballZ ships module_utils ``.py`` files only). ``ADDONS`` names
each addon, the stage at which it is upgraded after the control plane (1 kube-proxy, 2 CoreDNS, 3 CNI, 4 CSI,
5 GPU Operator / NVIDIA device plugin / NVIDIA DRA driver, 6 Kueue and JobSet, 7 other operators, 8 policy engines)
and the image repository suffixes and Helm chart names that identify it in a cluster. ``MATRIX`` holds the rows.

Rules for the rows: a row is added only when a source that was read gives the Kubernetes range of that release line;
``kube_max`` is "" when the source gives only a minimum (no documented upper bound: callers treat it as unknown, a
warning rather than a pass). Versions are the addon's release line as "MAJOR.MINOR" and Kubernetes minors as "1.N".
Vendors word these differently (Calico "we test against", Cilium "e2e tested and guaranteed", Kyverno "Kubernetes
Min/Max", NVIDIA "validated"); a Kubernetes minor outside a row is untested, not necessarily broken.
"""
from __future__ import annotations

from typing import Any, Dict, NamedTuple

SOURCES = {
    # Calico: tigera/docs versioned "System requirements" pages, "Kubernetes requirements / Supported versions"
    "calico-3.25": "https://github.com/tigera/docs calico_versioned_docs/version-3.25/getting-started/kubernetes/"
                   "requirements.mdx @5a06b65 (we test Calico 3.25 against v1.23-v1.28)",
    "calico-3.26": "https://github.com/tigera/docs calico_versioned_docs/version-3.26/getting-started/kubernetes/"
                   "requirements.mdx @16d9d44 (we test against v1.24-v1.28)",
    "calico-3.27": "https://github.com/tigera/docs calico_versioned_docs/version-3.27/getting-started/kubernetes/"
                   "requirements.mdx @16d9d44 (we test against v1.27-v1.29; an earlier copy @04b54fc said v1.24-v1.28)",
    "calico-3.28": "https://github.com/tigera/docs calico_versioned_docs/version-3.28/getting-started/kubernetes/"
                   "requirements.mdx @36a85ef (we test against v1.27-v1.30)",
    "calico-3.29": "https://github.com/tigera/docs calico_versioned_docs/version-3.29/getting-started/kubernetes/"
                   "requirements.mdx @0105982 (we test against v1.29-v1.31; "
                   "https://docs.tigera.io/calico/3.29/getting-started/kubernetes/requirements)",
    # Cilium: Documentation/network/kubernetes/compatibility.rst per release ("e2e tested and guaranteed")
    "cilium-1.18": "https://raw.githubusercontent.com/cilium/cilium/v1.18.14/Documentation/network/kubernetes/"
                   "compatibility.rst (k8s 1.30, 1.31, 1.32, 1.33)",
    "cilium-1.19": "https://github.com/cilium/cilium v1.19.3 Documentation/network/kubernetes/compatibility.rst, as "
                   "mirrored at https://contextqmd.com/libraries/cilium/versions/1.19.3/pages/Documentation/network/"
                   "kubernetes/compatibility (k8s 1.32, 1.33, 1.34, 1.35)",
    # CoreDNS: the version kubeadm installs per Kubernetes minor
    "coredns-k8s": "https://github.com/coredns/deployment/blob/master/kubernetes/CoreDNS-k8s_version.md "
                   "(CoreDNS version installed by kubeadm, rows v1.9 to v1.33)",
    "coredns-1.12": "https://github.com/coredns/deployment/blob/master/kubernetes/CoreDNS-k8s_version.md (v1.33: "
                    "CoreDNS 1.12.0) and https://build.opensuse.org/projects/devel:kubic/packages/coredns-for-k8s1.34/"
                    "files/coredns-for-k8s1.34.changes (CoreDNS 1.12.1, the version in kubernetes v1.34.1 "
                    "build/dependencies.yaml; the CoreDNS table had no v1.34 row when read)",
    "coredns-kubeadm": "https://github.com/kubernetes/kubernetes/blob/v1.36.3/cmd/kubeadm/app/constants/constants.go "
                       "(CoreDNSVersion: v1.13.1 at v1.35.4, v1.14.2 at v1.36.3, v1.14.6 at v1.37.2; read from the "
                       "k8s.io/kubernetes modules the lab builds, and printed by each kubeadm's `config images list`)",
    # NVIDIA GPU Operator: "Platform Support", Supported Operating Systems and Kubernetes Platforms (upstream K8s)
    "gpu-operator-24.6": "https://github.com/NVIDIA/cloud-native-docs gpu-operator/platform-support.rst @0069005, "
                         "life-cycle-policy.rst at the same commit names v24.6.1 (Kubernetes 1.22---1.30)",
    "gpu-operator-25.3": "https://github.com/NVIDIA/cloud-native-docs/pull/217 (July 2025, with the v25.3.1 release "
                         "notes: gpu-operator/platform-support.rst Kubernetes 1.29---1.33)",
    "gpu-operator-26.3": "https://github.com/mikemckiernan/cloud-native-docs (docs-writer fork of "
                         "NVIDIA/cloud-native-docs) gpu-operator/platform-support.rst @8193e86 (Kubernetes "
                         "1.32---1.36; life-cycle-policy.rst at that commit lists 26.3.x as the supported release) "
                         "and release-notes.rst (26.3.2: added support for Kubernetes 1.36)",
    # NVIDIA device plugin and DRA driver
    "device-plugin": "https://github.com/NVIDIA/k8s-device-plugin README.md @00f2a02, v0.17.1 (Prerequisites: "
                     "Kubernetes version >= 1.10; any plugin > v0.3.0 works across Kubernetes upgrades from 1.10)",
    "dra-driver": "https://github.com/NVIDIA/cloud-native-docs gpu-operator/dra-intro-install.rst @02b9dae (DRA Driver "
                  "for GPUs v25.12.0 and later: ComputeDomain needs Kubernetes v1.32 or later, GPU allocation needs "
                  "v1.34.2 or newer)",
    # Kueue and JobSet
    "kueue-0.12": "https://github.com/kubernetes-sigs/kueue README.md @0015a98, installing v0.12.0 (Requires "
                  "Kubernetes 1.29 or newer; E2E tests for Kubernetes 1.30, 1.31, 1.32, 1.33 on Kind)",
    "kueue-0.14": "https://github.com/kubernetes-sigs/kueue site/content/en/docs/installation/_index.md @8a32ac2 "
                  "(A Kubernetes cluster with version 1.29 or newer; the page's feature-gate table reaches v0.14)",
    "jobset-0.5": "https://github.com/kubernetes-sigs/jobset README.md @0b8c19c, installing v0.5.1 (one of the last 3 "
                  "Kubernetes minor versions; E2E tests for Kubernetes 1.27, 1.28, 1.29 on Kind)",
    "kueue-0.17": "https://github.com/kubernetes-sigs/kueue/blob/v0.17.0/README.md, read from the v0.17.0 Go module "
                  "(Requires Kubernetes 1.29 or newer; E2E tests for Kubernetes 1.33, 1.34, 1.35 on Kind)",
    "jobset-0.11": "https://github.com/kubernetes-sigs/jobset/blob/v0.11.1/README.md, read from the v0.11.1 Go module "
                   "(Requires a Kubernetes cluster running one of the last 3 Kubernetes minor versions; E2E tests "
                   "for Kubernetes 1.32, 1.33, 1.34 on Kind)",
    # Kyverno: "Compatibility Matrix" (Kyverno Version, Kubernetes Min, Kubernetes Max)
    "kyverno-a": "https://github.com/kyverno/website src/content/docs/docs/installation/index.md @b47a759 "
                 "(1.12.x 1.26-1.29, 1.13.x 1.28-1.31, 1.14.x 1.29-1.32, 1.15.x 1.30-1.33)",
    "kyverno-b": "https://github.com/kyverno/website src/content/docs/docs/installation/installation.md @1b4e356 "
                 "(1.15.x 1.30-1.33, 1.16.x 1.31-1.34, 1.17.x 1.32-1.35; https://kyverno.io/docs/installation/)",
    "kyverno-c": "https://github.com/kyverno/website src/constants/version.ts @19b84d6 compatibilityMatrix "
                 "(1.18.x 1.32-1.35, 1.17.x 1.32-1.35, 1.16.x 1.31-1.34)",
    # Gatekeeper (no matrix rows, see ADDONS)
    "gatekeeper": "https://open-policy-agent.github.io/gatekeeper/website/docs/install (minimum Kubernetes version "
                  "aligned with the Kubernetes supported versions policy) and https://github.com/open-policy-agent/"
                  "gatekeeper docs/Release_Management.md (assumed compatible with n-3 versions of the latest stable "
                  "Kubernetes release)",
}
RETRIEVED = "2026-11"


# The one schema of an addon and of a matrix row (ansible-core's argument-spec validator reads them): the shipped
# ADDONS and MATRIX are held to them by tests/unit/module_utils/test_addons.py, and the operator's own addons
# (gpufleet_addons) and rows (gpufleet_addon_support) are checked against them by addons.py before anything runs.
# ``managed_by`` and ``rule`` are shipped-only (kubeadm's addons, a project's relative rule): an operator cannot set
# them.
ADDON_SPEC: Dict[str, Dict[str, Any]] = {
    "addon": {"type": "str", "required": True},  # the key: lower-case letters, digits and '_'
    "name": {"type": "str", "required": True},  # as messages show it
    # the addons stage's order after the control plane (3 CNI, 4 CSI, 5 GPU and network operators, 6 Kueue and
    # JobSet, 7 other operators, 8 policy engines; 1 and 2 are kubeadm's kube-proxy and CoreDNS)
    "stage": {"type": "int", "default": 7},
    # image repositories by path suffix (any registry or mirror that keeps the path counts) and Helm chart names:
    # what identifies the addon in a cluster; each belongs to one addon only
    "images": {"type": "list", "elements": "str", "default": []},
    "charts": {"type": "list", "elements": "str", "default": []},
    "network_policy": {"type": "bool", "default": False},  # it enforces NetworkPolicy objects (security checks)
}
SHIPPED_ONLY = ("managed_by", "rule")
ROW_SPEC: Dict[str, Dict[str, Any]] = {
    "addon": {"type": "str", "required": True},  # a key of the addons (shipped or the operator's)
    "version": {"type": "raw", "required": True},  # the addon's release line, "MAJOR.MINOR"
    "kube_min": {"type": "raw", "required": True},  # oldest Kubernetes minor of that line, "1.N"
    "kube_max": {"type": "raw", "default": ""},  # newest; "" when the source gives no upper bound
    "source": {"type": "str", "required": True},  # where the support is documented (a URL; a key of SOURCES here)
}


class AddonSupport(NamedTuple):
    addon: str  # a key of ADDONS (or of the operator's gpufleet_addons)
    version: str  # the addon's release line, "MAJOR.MINOR"
    kube_min: str  # oldest Kubernetes minor of that line, "1.N"
    kube_max: str  # newest Kubernetes minor of that line; "" when the source gives no upper bound
    source: str  # a key of SOURCES


# network_policy: the addon enforces NetworkPolicy objects (the security checks want one when policies exist).
ADDONS: Dict[str, Dict[str, Any]] = {
    # managed_by kubeadm: `kubeadm upgrade apply` moves kube-proxy and CoreDNS itself (its addon phase), so a line
    # the target's kubeadm does not install is no blocker; the CoreDNS rows record which line each minor installs.
    "kube_proxy": dict(name="kube-proxy", stage=1, images=["kube-proxy"], charts=[], managed_by="kubeadm"),
    "coredns": dict(name="CoreDNS", stage=2, images=["coredns/coredns"], charts=["coredns"], managed_by="kubeadm"),
    # not tigera/operator: the operator image carries the operator's own version (v1.x), not Calico's
    "calico": dict(name="Calico", stage=3,
                   images=["calico/node", "calico/cni", "calico/kube-controllers", "calico/typha"],
                   charts=["tigera-operator"], network_policy=True),
    "cilium": dict(name="Cilium", stage=3, images=["cilium/cilium", "cilium/operator-generic", "cilium/operator"],
                   charts=["cilium"], network_policy=True),
    # stage 4 (CSI drivers): no addon recorded yet.
    "gpu_operator": dict(name="NVIDIA GPU Operator", stage=5, images=["nvidia/gpu-operator"],
                         charts=["gpu-operator"]),
    "nvidia_device_plugin": dict(name="NVIDIA device plugin", stage=5, images=["nvidia/k8s-device-plugin"],
                                 charts=["nvidia-device-plugin"]),
    # nvcr.io/nvidia/k8s-dra-driver-gpu up to v25.x; a third-party chart note says the image moved in v0.5.0 to
    # registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu.
    "nvidia_dra_driver": dict(name="NVIDIA DRA Driver for GPUs", stage=5,
                              images=["nvidia/k8s-dra-driver-gpu", "dra-driver-nvidia/dra-driver-nvidia-gpu"],
                              charts=["nvidia-dra-driver-gpu"]),
    "kueue": dict(name="Kueue", stage=6, images=["kueue/kueue"], charts=["kueue"]),
    "jobset": dict(name="JobSet", stage=6, images=["jobset/jobset"], charts=["jobset"]),
    # stage 7 (other operators): no addon recorded yet.
    "kyverno": dict(name="Kyverno", stage=8,
                    images=["kyverno/kyverno", "kyverno/background-controller", "kyverno/reports-controller",
                            "kyverno/cleanup-controller"],
                    charts=["kyverno"]),
    # Gatekeeper has no MATRIX rows: its docs give only a relative policy (SOURCES["gatekeeper"]), no fixed range.
    "gatekeeper": dict(name="OPA Gatekeeper", stage=8, images=["openpolicyagent/gatekeeper"], charts=["gatekeeper"],
                       rule="gatekeeper"),
}

MATRIX = [
    # Calico ("we test Calico X against the following Kubernetes versions"; newer ones "may also work")
    AddonSupport("calico", "3.25", "1.23", "1.28", "calico-3.25"),
    AddonSupport("calico", "3.26", "1.24", "1.28", "calico-3.26"),
    AddonSupport("calico", "3.27", "1.27", "1.29", "calico-3.27"),
    AddonSupport("calico", "3.28", "1.27", "1.30", "calico-3.28"),
    # a later docs revision may list v1.32 too (projectcalico discussion #11717 quotes "v1.29-v1.32")
    AddonSupport("calico", "3.29", "1.29", "1.31", "calico-3.29"),
    # Cilium ("e2e tested and guaranteed"; unlisted versions depend on Kubernetes compatibility)
    AddonSupport("cilium", "1.18", "1.30", "1.33", "cilium-1.18"),
    AddonSupport("cilium", "1.19", "1.32", "1.35", "cilium-1.19"),
    # CoreDNS: the Kubernetes minors whose kubeadm installs that CoreDNS line (the table is a record, not a limit)
    AddonSupport("coredns", "1.8", "1.21", "1.24", "coredns-k8s"),  # 1.8.0 (1.21), 1.8.4 (1.22), 1.8.6 (1.23-1.24)
    AddonSupport("coredns", "1.9", "1.25", "1.26", "coredns-k8s"),  # 1.9.3
    AddonSupport("coredns", "1.10", "1.27", "1.28", "coredns-k8s"),  # 1.10.1
    AddonSupport("coredns", "1.11", "1.29", "1.32", "coredns-k8s"),  # 1.11.1 (1.29-1.30), 1.11.3 (1.31-1.32)
    AddonSupport("coredns", "1.12", "1.33", "1.34", "coredns-1.12"),  # 1.12.0 (1.33), 1.12.1 (1.34)
    AddonSupport("coredns", "1.13", "1.35", "1.35", "coredns-kubeadm"),  # 1.13.1
    AddonSupport("coredns", "1.14", "1.36", "1.37", "coredns-kubeadm"),  # 1.14.2 (1.36), 1.14.6 (1.37)
    # NVIDIA GPU Operator (upstream Kubernetes column of the validated-platforms table)
    AddonSupport("gpu_operator", "24.6", "1.22", "1.30", "gpu-operator-24.6"),
    AddonSupport("gpu_operator", "25.3", "1.29", "1.33", "gpu-operator-25.3"),
    AddonSupport("gpu_operator", "26.3", "1.32", "1.36", "gpu-operator-26.3"),
    # NVIDIA device plugin: only a minimum (Kubernetes >= 1.10), no documented upper bound
    AddonSupport("nvidia_device_plugin", "0.17", "1.10", "", "device-plugin"),
    # NVIDIA DRA driver: only a minimum (ComputeDomain >= 1.32; GPU allocation needs >= 1.34.2), no upper bound
    AddonSupport("nvidia_dra_driver", "25.12", "1.32", "", "dra-driver"),
    # Kueue: 0.12 requires >= 1.29 and is E2E-tested up to 1.33; the 0.14 docs give only the minimum
    AddonSupport("kueue", "0.12", "1.29", "1.33", "kueue-0.12"),
    AddonSupport("kueue", "0.14", "1.29", "", "kueue-0.14"),
    AddonSupport("kueue", "0.17", "1.29", "", "kueue-0.17"),  # E2E-tested 1.33-1.35
    # JobSet: "last 3 Kubernetes minor versions", E2E-tested 1.27-1.29 when v0.5.1 was current
    AddonSupport("jobset", "0.5", "1.27", "1.29", "jobset-0.5"),
    # v0.11.1: the rule is relative ("the last 3 minors"), so no fixed upper bound; E2E-tested 1.32-1.34
    AddonSupport("jobset", "0.11", "1.32", "", "jobset-0.11"),
    # Kyverno compatibility matrix
    AddonSupport("kyverno", "1.12", "1.26", "1.29", "kyverno-a"),
    AddonSupport("kyverno", "1.13", "1.28", "1.31", "kyverno-a"),
    AddonSupport("kyverno", "1.14", "1.29", "1.32", "kyverno-a"),
    AddonSupport("kyverno", "1.15", "1.30", "1.33", "kyverno-b"),
    AddonSupport("kyverno", "1.16", "1.31", "1.34", "kyverno-b"),
    AddonSupport("kyverno", "1.17", "1.32", "1.35", "kyverno-b"),
    AddonSupport("kyverno", "1.18", "1.32", "1.35", "kyverno-c"),
]
