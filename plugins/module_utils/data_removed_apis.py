# Copyright: gpufleet contributors
# Apache License 2.0
"""Removed Kubernetes APIs: (group/version, kind, resource, removed in, replacement).

Kept as Python so it travels with the modules. Update it from the migration guide for each new release.
"""
from __future__ import annotations

SOURCE = ("https://kubernetes.io/docs/reference/using-api/deprecation-guide/ (official deprecated API migration "
          "guide) and pluto's versions data for alpha/beta removals after 1.32, as recorded in shared/REFERENCE.md "
          "section 3, late 2026")

# (apiVersion, kind, resource (plural, as in apiserver metrics), removed_in, replacement apiVersion)
REMOVED = [
    # 1.16
    ("extensions/v1beta1", "NetworkPolicy", "networkpolicies", "1.16", "networking.k8s.io/v1"),
    ("extensions/v1beta1", "DaemonSet", "daemonsets", "1.16", "apps/v1"),
    ("extensions/v1beta1", "Deployment", "deployments", "1.16", "apps/v1"),
    ("extensions/v1beta1", "ReplicaSet", "replicasets", "1.16", "apps/v1"),
    ("extensions/v1beta1", "PodSecurityPolicy", "podsecuritypolicies", "1.16", "policy/v1beta1"),
    ("apps/v1beta1", "Deployment", "deployments", "1.16", "apps/v1"),
    ("apps/v1beta1", "ReplicaSet", "replicasets", "1.16", "apps/v1"),
    ("apps/v1beta1", "StatefulSet", "statefulsets", "1.16", "apps/v1"),
    ("apps/v1beta2", "Deployment", "deployments", "1.16", "apps/v1"),
    ("apps/v1beta2", "ReplicaSet", "replicasets", "1.16", "apps/v1"),
    ("apps/v1beta2", "StatefulSet", "statefulsets", "1.16", "apps/v1"),
    ("apps/v1beta2", "DaemonSet", "daemonsets", "1.16", "apps/v1"),
    # 1.22
    ("admissionregistration.k8s.io/v1beta1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
     "1.22", "admissionregistration.k8s.io/v1"),
    ("admissionregistration.k8s.io/v1beta1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
     "1.22", "admissionregistration.k8s.io/v1"),
    ("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition", "customresourcedefinitions", "1.22",
     "apiextensions.k8s.io/v1"),
    ("apiregistration.k8s.io/v1beta1", "APIService", "apiservices", "1.22", "apiregistration.k8s.io/v1"),
    ("authentication.k8s.io/v1beta1", "TokenReview", "tokenreviews", "1.22", "authentication.k8s.io/v1"),
    ("authorization.k8s.io/v1beta1", "SubjectAccessReview", "subjectaccessreviews", "1.22",
     "authorization.k8s.io/v1"),
    ("authorization.k8s.io/v1beta1", "LocalSubjectAccessReview", "localsubjectaccessreviews", "1.22",
     "authorization.k8s.io/v1"),
    ("authorization.k8s.io/v1beta1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", "1.22",
     "authorization.k8s.io/v1"),
    ("authorization.k8s.io/v1beta1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", "1.22",
     "authorization.k8s.io/v1"),
    ("certificates.k8s.io/v1beta1", "CertificateSigningRequest", "certificatesigningrequests", "1.22",
     "certificates.k8s.io/v1"),
    ("coordination.k8s.io/v1beta1", "Lease", "leases", "1.22", "coordination.k8s.io/v1"),
    ("extensions/v1beta1", "Ingress", "ingresses", "1.22", "networking.k8s.io/v1"),
    ("networking.k8s.io/v1beta1", "Ingress", "ingresses", "1.22", "networking.k8s.io/v1"),
    ("networking.k8s.io/v1beta1", "IngressClass", "ingressclasses", "1.22", "networking.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRole", "clusterroles", "1.22", "rbac.authorization.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRoleBinding", "clusterrolebindings", "1.22",
     "rbac.authorization.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "Role", "roles", "1.22", "rbac.authorization.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "RoleBinding", "rolebindings", "1.22", "rbac.authorization.k8s.io/v1"),
    ("scheduling.k8s.io/v1beta1", "PriorityClass", "priorityclasses", "1.22", "scheduling.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", "CSIDriver", "csidrivers", "1.22", "storage.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", "CSINode", "csinodes", "1.22", "storage.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", "StorageClass", "storageclasses", "1.22", "storage.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", "VolumeAttachment", "volumeattachments", "1.22", "storage.k8s.io/v1"),
    # 1.25
    ("batch/v1beta1", "CronJob", "cronjobs", "1.25", "batch/v1"),
    ("discovery.k8s.io/v1beta1", "EndpointSlice", "endpointslices", "1.25", "discovery.k8s.io/v1"),
    ("events.k8s.io/v1beta1", "Event", "events", "1.25", "events.k8s.io/v1"),
    ("autoscaling/v2beta1", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "1.25", "autoscaling/v2"),
    ("policy/v1beta1", "PodDisruptionBudget", "poddisruptionbudgets", "1.25", "policy/v1"),
    ("policy/v1beta1", "PodSecurityPolicy", "podsecuritypolicies", "1.25",
     "none: use Pod Security Admission"),
    ("node.k8s.io/v1beta1", "RuntimeClass", "runtimeclasses", "1.25", "node.k8s.io/v1"),
    # 1.26
    ("flowcontrol.apiserver.k8s.io/v1beta1", "FlowSchema", "flowschemas", "1.26", "flowcontrol.apiserver.k8s.io/v1"),
    ("flowcontrol.apiserver.k8s.io/v1beta1", "PriorityLevelConfiguration", "prioritylevelconfigurations", "1.26",
     "flowcontrol.apiserver.k8s.io/v1"),
    ("autoscaling/v2beta2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "1.26", "autoscaling/v2"),
    # 1.27
    ("storage.k8s.io/v1beta1", "CSIStorageCapacity", "csistoragecapacities", "1.27", "storage.k8s.io/v1"),
    # 1.29
    ("flowcontrol.apiserver.k8s.io/v1beta2", "FlowSchema", "flowschemas", "1.29", "flowcontrol.apiserver.k8s.io/v1"),
    ("flowcontrol.apiserver.k8s.io/v1beta2", "PriorityLevelConfiguration", "prioritylevelconfigurations", "1.29",
     "flowcontrol.apiserver.k8s.io/v1"),
    # 1.32
    ("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", "flowschemas", "1.32", "flowcontrol.apiserver.k8s.io/v1"),
    ("flowcontrol.apiserver.k8s.io/v1beta3", "PriorityLevelConfiguration", "prioritylevelconfigurations", "1.32",
     "flowcontrol.apiserver.k8s.io/v1"),
    # later alpha/beta removals (tracked by pluto)
    ("admissionregistration.k8s.io/v1alpha1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", "1.33",
     "admissionregistration.k8s.io/v1"),
    ("admissionregistration.k8s.io/v1alpha1", "ValidatingAdmissionPolicyBinding",
     "validatingadmissionpolicybindings", "1.33", "admissionregistration.k8s.io/v1"),
    ("resource.k8s.io/v1alpha3", "DeviceClass", "deviceclasses", "1.34", "resource.k8s.io/v1"),
    ("resource.k8s.io/v1alpha3", "ResourceClaim", "resourceclaims", "1.34", "resource.k8s.io/v1"),
    ("resource.k8s.io/v1alpha3", "ResourceClaimTemplate", "resourceclaimtemplates", "1.34", "resource.k8s.io/v1"),
    ("resource.k8s.io/v1alpha3", "ResourceSlice", "resourceslices", "1.34", "resource.k8s.io/v1"),
    ("storage.k8s.io/v1alpha1", "VolumeAttributesClass", "volumeattributesclasses", "1.35", "storage.k8s.io/v1"),
    ("storagemigration.k8s.io/v1alpha1", "StorageVersionMigration", "storageversionmigrations", "1.35",
     "storagemigration.k8s.io/v1beta1"),
    ("resource.k8s.io/v1beta1", "DeviceClass", "deviceclasses", "1.36", "resource.k8s.io/v1"),
    ("resource.k8s.io/v1beta1", "ResourceClaim", "resourceclaims", "1.36", "resource.k8s.io/v1"),
    ("resource.k8s.io/v1beta1", "ResourceClaimTemplate", "resourceclaimtemplates", "1.36", "resource.k8s.io/v1"),
    ("resource.k8s.io/v1beta1", "ResourceSlice", "resourceslices", "1.36", "resource.k8s.io/v1"),
]
