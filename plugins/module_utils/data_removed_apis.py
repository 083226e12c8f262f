# Copyright: gpufleet contributors
# Apache License 2.0
"""Kubernetes APIs that a release removes, each row with the release that deprecated it, the release that removed
it, the replacement and where that comes from (a key of SOURCES).

Kept as Python so it travels with the modules (AnsiballZ ships module_utils ``.py`` files only). Add the rows of
each new release from its changelog's "Deprecation" and "API Change" notes and the migration guide; an alpha API
has no deprecation period, so its ``deprecated_in`` is empty. docs/reference.md section 3 explains how the rows are
used.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Tuple

SOURCES = {
    "guide": "https://kubernetes.io/docs/reference/using-api/deprecation-guide/ (the official deprecated API "
             "migration guide: removed-in and replacement; deprecated-in as pluto records it)",
    "pluto": "https://github.com/FairwindsOps/pluto versions.yaml (deprecated-in, removed-in, replacement) for "
             "alpha and beta APIs the guide does not list",
    "lifecycle": "k8s.io/api zz_generated.prerelease-lifecycle.go of the releases named with the rows "
                 "(APILifecycleDeprecated, APILifecycleRemoved: the apiserver stops serving a beta version at its "
                 "removal release, and its audit events and deprecated-API metric carry that release)",
    "changelog-1.20": "https://github.com/kubernetes/kubernetes/blob/master/CHANGELOG/CHANGELOG-1.20.md "
                      "(settings.k8s.io/v1alpha1 PodPreset and its admission plugin removed)",
    "changelog-1.21": "https://github.com/kubernetes/kubernetes/blob/master/CHANGELOG/CHANGELOG-1.21.md "
                      "(batch/v2alpha1 removed)",
    "changelog-1.29": "https://github.com/kubernetes/kubernetes/blob/master/CHANGELOG/CHANGELOG-1.29.md "
                      "(networking.k8s.io/v1alpha1 ClusterCIDR removed with the MultiCIDRRangeAllocator)",
    "changelog-1.31": "https://github.com/kubernetes/kubernetes/blob/master/CHANGELOG/CHANGELOG-1.31.md "
                      "(resource.k8s.io/v1alpha2 removed: classic DRA replaced by structured parameters, v1alpha3)",
}
SOURCE = "; ".join(SOURCES.values())
RETRIEVED = "2026-11"


class RemovedApi(NamedTuple):
    api_version: str
    kind: str
    resource: str  # plural, as in apiserver metrics
    deprecated_in: str  # "" when the API was never deprecated first (alpha)
    removed_in: str
    replacement: str
    source: str  # a key of SOURCES


REMOVED = [
    # removed in 1.16
    RemovedApi("apps/v1beta1", "Deployment", "deployments", "1.9", "1.16", "apps/v1", "guide"),
    RemovedApi("apps/v1beta1", "ReplicaSet", "replicasets", "", "1.16", "apps/v1", "guide"),
    RemovedApi("apps/v1beta1", "StatefulSet", "statefulsets", "1.9", "1.16", "apps/v1", "guide"),
    RemovedApi("apps/v1beta2", "DaemonSet", "daemonsets", "1.9", "1.16", "apps/v1", "guide"),
    RemovedApi("apps/v1beta2", "Deployment", "deployments", "1.9", "1.16", "apps/v1", "guide"),
    RemovedApi("apps/v1beta2", "ReplicaSet", "replicasets", "", "1.16", "apps/v1", "guide"),
    RemovedApi("apps/v1beta2", "StatefulSet", "statefulsets", "1.9", "1.16", "apps/v1", "guide"),
    RemovedApi("extensions/v1beta1", "DaemonSet", "daemonsets", "1.9", "1.16", "apps/v1", "guide"),
    RemovedApi("extensions/v1beta1", "Deployment", "deployments", "1.9", "1.16", "apps/v1", "guide"),
    RemovedApi("extensions/v1beta1", "NetworkPolicy", "networkpolicies", "1.9", "1.16",
               "networking.k8s.io/v1", "guide"),
    RemovedApi("extensions/v1beta1", "PodSecurityPolicy", "podsecuritypolicies", "1.10", "1.16",
               "policy/v1beta1", "guide"),
    RemovedApi("extensions/v1beta1", "ReplicaSet", "replicasets", "", "1.16", "apps/v1", "guide"),
    # removed in 1.17
    RemovedApi("scheduling.k8s.io/v1alpha1", "PriorityClass", "priorityclasses", "1.14", "1.17",
               "scheduling.k8s.io/v1", "pluto"),
    # removed in 1.20
    RemovedApi("settings.k8s.io/v1alpha1", "PodPreset", "podpresets", "", "1.20",
               "none: the API and its admission plugin were dropped", "changelog-1.20"),
    # removed in 1.21
    RemovedApi("batch/v2alpha1", "CronJob", "cronjobs", "", "1.21", "batch/v1", "changelog-1.21"),
    # removed in 1.22
    RemovedApi("admissionregistration.k8s.io/v1beta1", "MutatingWebhookConfiguration",
               "mutatingwebhookconfigurations", "1.16", "1.22",
               "admissionregistration.k8s.io/v1", "guide"),
    RemovedApi("admissionregistration.k8s.io/v1beta1", "ValidatingWebhookConfiguration",
               "validatingwebhookconfigurations", "1.16", "1.22",
               "admissionregistration.k8s.io/v1", "guide"),
    RemovedApi("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition",
               "customresourcedefinitions", "1.16", "1.22",
               "apiextensions.k8s.io/v1", "guide"),
    RemovedApi("apiregistration.k8s.io/v1beta1", "APIService", "apiservices", "1.10", "1.22",
               "apiregistration.k8s.io/v1", "guide"),
    RemovedApi("authentication.k8s.io/v1beta1", "TokenReview", "tokenreviews", "1.6", "1.22",
               "authentication.k8s.io/v1", "guide"),
    RemovedApi("authorization.k8s.io/v1beta1", "LocalSubjectAccessReview", "localsubjectaccessreviews", "", "1.22",
               "authorization.k8s.io/v1", "guide"),
    RemovedApi("authorization.k8s.io/v1beta1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", "", "1.22",
               "authorization.k8s.io/v1", "guide"),
    RemovedApi("authorization.k8s.io/v1beta1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", "", "1.22",
               "authorization.k8s.io/v1", "guide"),
    RemovedApi("authorization.k8s.io/v1beta1", "SubjectAccessReview", "subjectaccessreviews", "", "1.22",
               "authorization.k8s.io/v1", "guide"),
    RemovedApi("certificates.k8s.io/v1beta1", "CertificateSigningRequest",
               "certificatesigningrequests", "1.19", "1.22",
               "certificates.k8s.io/v1", "guide"),
    RemovedApi("coordination.k8s.io/v1beta1", "Lease", "leases", "1.14", "1.22", "coordination.k8s.io/v1", "guide"),
    RemovedApi("extensions/v1beta1", "Ingress", "ingresses", "1.14", "1.22", "networking.k8s.io/v1", "guide"),
    RemovedApi("networking.k8s.io/v1beta1", "Ingress", "ingresses", "1.19", "1.22", "networking.k8s.io/v1", "guide"),
    RemovedApi("networking.k8s.io/v1beta1", "IngressClass", "ingressclasses", "1.19", "1.22",
               "networking.k8s.io/v1", "guide"),
    RemovedApi("rbac.authorization.k8s.io/v1alpha1", "ClusterRole", "clusterroles", "1.17", "1.22",
               "rbac.authorization.k8s.io/v1", "pluto"),
    RemovedApi("rbac.authorization.k8s.io/v1alpha1", "ClusterRoleBinding", "clusterrolebindings", "1.17", "1.22",
               "rbac.authorization.k8s.io/v1", "pluto"),
    RemovedApi("rbac.authorization.k8s.io/v1alpha1", "Role", "roles", "1.17", "1.22",
               "rbac.authorization.k8s.io/v1", "pluto"),
    RemovedApi("rbac.authorization.k8s.io/v1alpha1", "RoleBinding", "rolebindings", "1.17", "1.22",
               "rbac.authorization.k8s.io/v1", "pluto"),
    RemovedApi("rbac.authorization.k8s.io/v1beta1", "ClusterRole", "clusterroles", "1.17", "1.22",
               "rbac.authorization.k8s.io/v1", "guide"),
    RemovedApi("rbac.authorization.k8s.io/v1beta1", "ClusterRoleBinding", "clusterrolebindings", "1.17", "1.22",
               "rbac.authorization.k8s.io/v1", "guide"),
    RemovedApi("rbac.authorization.k8s.io/v1beta1", "Role", "roles", "1.17", "1.22",
               "rbac.authorization.k8s.io/v1", "guide"),
    RemovedApi("rbac.authorization.k8s.io/v1beta1", "RoleBinding", "rolebindings", "1.17", "1.22",
               "rbac.authorization.k8s.io/v1", "guide"),
    RemovedApi("scheduling.k8s.io/v1beta1", "PriorityClass", "priorityclasses", "1.14", "1.22",
               "scheduling.k8s.io/v1", "guide"),
    RemovedApi("storage.k8s.io/v1beta1", "CSIDriver", "csidrivers", "1.19", "1.22", "storage.k8s.io/v1", "guide"),
    RemovedApi("storage.k8s.io/v1beta1", "CSINode", "csinodes", "1.17", "1.22", "storage.k8s.io/v1", "guide"),
    RemovedApi("storage.k8s.io/v1beta1", "StorageClass", "storageclasses", "1.6", "1.22",
               "storage.k8s.io/v1", "guide"),
    RemovedApi("storage.k8s.io/v1beta1", "VolumeAttachment", "volumeattachments", "1.13", "1.22",
               "storage.k8s.io/v1", "guide"),
    # removed in 1.25
    RemovedApi("autoscaling/v2beta1", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "1.22", "1.25",
               "autoscaling/v2", "guide"),
    RemovedApi("batch/v1beta1", "CronJob", "cronjobs", "1.21", "1.25", "batch/v1", "guide"),
    RemovedApi("discovery.k8s.io/v1beta1", "EndpointSlice", "endpointslices", "1.21", "1.25",
               "discovery.k8s.io/v1", "guide"),
    RemovedApi("events.k8s.io/v1beta1", "Event", "events", "1.19", "1.25", "events.k8s.io/v1", "guide"),
    RemovedApi("node.k8s.io/v1beta1", "RuntimeClass", "runtimeclasses", "1.22", "1.25", "node.k8s.io/v1", "guide"),
    RemovedApi("policy/v1beta1", "PodDisruptionBudget", "poddisruptionbudgets", "1.21", "1.25", "policy/v1", "guide"),
    RemovedApi("policy/v1beta1", "PodSecurityPolicy", "podsecuritypolicies", "1.21", "1.25",
               "none: use Pod Security Admission", "guide"),
    # removed in 1.26
    RemovedApi("autoscaling/v2beta2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "1.23", "1.26",
               "autoscaling/v2", "guide"),
    RemovedApi("flowcontrol.apiserver.k8s.io/v1beta1", "FlowSchema", "flowschemas", "1.23", "1.26",
               "flowcontrol.apiserver.k8s.io/v1", "guide"),
    RemovedApi("flowcontrol.apiserver.k8s.io/v1beta1", "PriorityLevelConfiguration",
               "prioritylevelconfigurations", "1.23", "1.26",
               "flowcontrol.apiserver.k8s.io/v1", "guide"),
    # removed in 1.27
    RemovedApi("storage.k8s.io/v1beta1", "CSIStorageCapacity", "csistoragecapacities", "1.24", "1.27",
               "storage.k8s.io/v1", "guide"),
    # removed in 1.29
    RemovedApi("flowcontrol.apiserver.k8s.io/v1beta2", "FlowSchema", "flowschemas", "1.26", "1.29",
               "flowcontrol.apiserver.k8s.io/v1", "guide"),
    RemovedApi("flowcontrol.apiserver.k8s.io/v1beta2", "PriorityLevelConfiguration",
               "prioritylevelconfigurations", "1.26", "1.29",
               "flowcontrol.apiserver.k8s.io/v1", "guide"),
    RemovedApi("networking.k8s.io/v1alpha1", "ClusterCIDR", "clustercidrs", "", "1.29",
               "none: the MultiCIDRRangeAllocator was dropped", "changelog-1.29"),
    # removed in 1.31
    RemovedApi("resource.k8s.io/v1alpha2", "PodSchedulingContext", "podschedulingcontexts", "", "1.31",
               "none: structured parameters replaced it", "changelog-1.31"),
    RemovedApi("resource.k8s.io/v1alpha2", "ResourceClaim", "resourceclaims", "", "1.31",
               "resource.k8s.io/v1", "changelog-1.31"),
    RemovedApi("resource.k8s.io/v1alpha2", "ResourceClaimParameters", "resourceclaimparameters", "", "1.31",
               "none: structured parameters replaced it", "changelog-1.31"),
    RemovedApi("resource.k8s.io/v1alpha2", "ResourceClaimTemplate", "resourceclaimtemplates", "", "1.31",
               "resource.k8s.io/v1", "changelog-1.31"),
    RemovedApi("resource.k8s.io/v1alpha2", "ResourceClass", "resourceclasses", "", "1.31",
               "resource.k8s.io/v1 DeviceClass", "changelog-1.31"),
    RemovedApi("resource.k8s.io/v1alpha2", "ResourceClassParameters", "resourceclassparameters", "", "1.31",
               "none: structured parameters replaced it", "changelog-1.31"),
    RemovedApi("resource.k8s.io/v1alpha2", "ResourceSlice", "resourceslices", "", "1.31",
               "resource.k8s.io/v1", "changelog-1.31"),
    # removed in 1.32
    RemovedApi("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", "flowschemas", "1.29", "1.32",
               "flowcontrol.apiserver.k8s.io/v1", "guide"),
    RemovedApi("flowcontrol.apiserver.k8s.io/v1beta3", "PriorityLevelConfiguration",
               "prioritylevelconfigurations", "1.29", "1.32",
               "flowcontrol.apiserver.k8s.io/v1", "guide"),
    # removed in 1.33
    RemovedApi("admissionregistration.k8s.io/v1alpha1", "ValidatingAdmissionPolicy",
               "validatingadmissionpolicies", "", "1.33",
               "admissionregistration.k8s.io/v1", "pluto"),
    RemovedApi("admissionregistration.k8s.io/v1alpha1", "ValidatingAdmissionPolicyBinding",
               "validatingadmissionpolicybindings", "", "1.33",
               "admissionregistration.k8s.io/v1", "pluto"),
    # removed in 1.34
    RemovedApi("resource.k8s.io/v1alpha3", "DeviceClass", "deviceclasses", "", "1.34", "resource.k8s.io/v1", "pluto"),
    RemovedApi("resource.k8s.io/v1alpha3", "ResourceClaim", "resourceclaims", "", "1.34",
               "resource.k8s.io/v1", "pluto"),
    RemovedApi("resource.k8s.io/v1alpha3", "ResourceClaimTemplate", "resourceclaimtemplates", "", "1.34",
               "resource.k8s.io/v1", "pluto"),
    RemovedApi("resource.k8s.io/v1alpha3", "ResourceSlice", "resourceslices", "", "1.34",
               "resource.k8s.io/v1", "pluto"),
    # removed in 1.35
    RemovedApi("storage.k8s.io/v1alpha1", "VolumeAttributesClass", "volumeattributesclasses", "", "1.35",
               "storage.k8s.io/v1", "pluto"),
    RemovedApi("storagemigration.k8s.io/v1alpha1", "StorageVersionMigration", "storageversionmigrations", "", "1.35",
               "storagemigration.k8s.io/v1beta1", "pluto"),
    # removed in 1.37 (k8s.io/api v0.35.4 and v0.36.3: each kind's APILifecycleDeprecated and APILifecycleRemoved)
    RemovedApi("networking.k8s.io/v1beta1", "IPAddress", "ipaddresses", "1.34", "1.37", "networking.k8s.io/v1",
               "lifecycle"),
    RemovedApi("networking.k8s.io/v1beta1", "ServiceCIDR", "servicecidrs", "1.34", "1.37", "networking.k8s.io/v1",
               "lifecycle"),
    RemovedApi("storage.k8s.io/v1beta1", "VolumeAttributesClass", "volumeattributesclasses", "1.34", "1.37",
               "storage.k8s.io/v1", "lifecycle"),
    # removed in 1.38: pluto's data says 1.36, the Kubernetes source 1.38 (1.36 still serves it when turned on)
    RemovedApi("resource.k8s.io/v1beta1", "DeviceClass", "deviceclasses", "1.35", "1.38", "resource.k8s.io/v1",
               "lifecycle"),
    RemovedApi("resource.k8s.io/v1beta1", "ResourceClaim", "resourceclaims", "1.35", "1.38",
               "resource.k8s.io/v1", "lifecycle"),
    RemovedApi("resource.k8s.io/v1beta1", "ResourceClaimTemplate", "resourceclaimtemplates", "1.35", "1.38",
               "resource.k8s.io/v1", "lifecycle"),
    RemovedApi("resource.k8s.io/v1beta1", "ResourceSlice", "resourceslices", "1.35", "1.38",
               "resource.k8s.io/v1", "lifecycle"),
    # removed in 1.39
    RemovedApi("resource.k8s.io/v1beta2", "DeviceClass", "deviceclasses", "1.36", "1.39", "resource.k8s.io/v1",
               "lifecycle"),
    RemovedApi("resource.k8s.io/v1beta2", "ResourceClaim", "resourceclaims", "1.36", "1.39",
               "resource.k8s.io/v1", "lifecycle"),
    RemovedApi("resource.k8s.io/v1beta2", "ResourceClaimTemplate", "resourceclaimtemplates", "1.36", "1.39",
               "resource.k8s.io/v1", "lifecycle"),
    RemovedApi("resource.k8s.io/v1beta2", "ResourceSlice", "resourceslices", "1.36", "1.39",
               "resource.k8s.io/v1", "lifecycle"),
]

# Each row by apiVersion and plural resource: what apiserver metrics and audit events name
BY_RESOURCE: Dict[Tuple[str, str], RemovedApi] = {(r.api_version, r.resource): r for r in REMOVED}
