# Copyright: gpufleet contributors
# Apache License 2.0
"""Kubernetes minor releases: release date and end of life (end of patch support).

A data file kept as Python so that it travels with the modules to managed nodes (AnsiballZ ships module_utils
``.py`` files only). Update it when a release ships or a planned date moves.
"""
from __future__ import annotations

SOURCE = ("https://kubernetes.io/releases/ (release history and end-of-life dates), as recorded in "
          "docs/reference.md section 1, late 2026; EOL dates from 1.33 on are the planned dates")
RETRIEVED = "2026-11"

# minor: (release date, end of life)
RELEASES = {
    "1.28": ("2023-08-15", "2024-10-22"),
    "1.29": ("2023-12-13", "2025-02-28"),
    "1.30": ("2024-04-17", "2025-07-15"),
    "1.31": ("2024-08-13", "2025-11-11"),
    "1.32": ("2024-12-11", "2026-03-10"),
    "1.33": ("2025-04-23", "2026-06-28"),
    "1.34": ("2025-08-27", "2026-10-27"),
    "1.35": ("2025-12-17", "2027-02-28"),
    "1.36": ("2026-04-20", "2027-06-28"),
    # 1.37: the v1.37.0 tag as the Go module proxy dates it (2026-08-26, recorded in docs/reference.md section 1);
    # end of life planned as for its predecessors (the 28th of the 14th month after the release).
    "1.37": ("2026-08-26", "2027-10-28"),
}

# minor: (the etcd image kubeadm installs for a stacked member - constants.SupportedEtcdVersion - , the kubeadm that
# said so). Recorded from the real binaries' `kubeadm config images list --kubernetes-version vX.Y.Z`
# (tests/fixtures/kubeadm/real-*-config-images-list.txt); a later patch release may move it.
KUBEADM_ETCD = {
    "1.35": ("3.6.6-0", "v1.35.4"),
    "1.36": ("3.6.8-0", "v1.36.3"),
    "1.37": ("3.7.0-0", "v1.37.2"),
}
