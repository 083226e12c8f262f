# Copyright: gpufleet contributors
# Apache License 2.0
"""Shared documentation for gpufleet.upgrade modules."""
from __future__ import annotations


class ModuleDocFragment:
    # Modules that only judge data (never change a host).
    CHECK = r"""
attributes:
  check_mode:
    support: full
    description: Judges data only; nothing on the host changes in either mode.
  diff_mode:
    support: none
    description: Returns no diff.
notes:
  - A failed gate fails the task with a message naming the node, the check, the measured value and the baseline.
    The full list of checks is returned in C(checks) either way.
"""

    # Modules that run a tool on the host, or judge its captured output.
    TOOL = r"""
options:
  binary:
    description:
      - Name or full path of the tool to run when O(output) is not given.
    type: str
  args:
    description:
      - Arguments for the tool. The module's default arguments are used when omitted.
    type: list
    elements: str
  output:
    description:
      - Output of the tool captured elsewhere. When given, the tool is not run and the output is judged as is.
    type: str
attributes:
  check_mode:
    support: full
    description: In check mode the tool is not run (it may load GPUs for minutes); captured O(output) is still judged.
  diff_mode:
    support: none
    description: Returns no diff.
notes:
  - A failed gate fails the task with a message naming the node, the check, the measured value and the baseline.
    The full list of checks is returned in C(checks) either way.
"""

    # Gates judged against a pool baseline.
    BASELINE = r"""
options:
  baseline:
    description:
      - The pool baseline, as M(gpufleet.upgrade.baseline_info) or M(gpufleet.upgrade.cell) return it
        (C(pools[POOL].baseline)). It is validated again here against the one baseline schema, which holds every
        default; the module adds none of its own.
      - A check is skipped only when the baseline opts out of it by name (C(opt_out)) with a reason; the gate then
        prints the opt-out and returns it in C(checks) (severity C(opt-out)) and C(opt_outs).
    type: dict
    required: true
"""

    # Modules that act on a cluster through the Kubernetes API (run on the controller: delegate_to localhost).
    # Used with kubernetes.core.k8s_auth_options: the connection options are kubernetes.core's.
    KUBE = r"""
notes:
  - Connects as M(kubernetes.core.k8s) does - the same options, each also read from its C(K8S_AUTH_*) variable
    (C(K8S_AUTH_KUBECONFIG), C(K8S_AUTH_CONTEXT), C(K8S_AUTH_HOST), C(K8S_AUTH_API_KEY), C(K8S_AUTH_SSL_CA_CERT),
    C(K8S_AUTH_VERIFY_SSL), ...) with the same precedence - so both always talk to the same cluster.
  - Unlike kubernetes.core, never falls back to the in-cluster service account - in an AWX job pod that is the
    cluster running AWX. With no option or variable set, C($KUBECONFIG) or else C(~/.kube/config) is used (as
    by kubernetes.core after its in-cluster attempt) if it exists; otherwise the module fails.
requirements:
  - the C(kubernetes) Python library on the host that runs the module (the controller)
attributes:
  check_mode:
    support: full
    description: Reads the cluster and returns what it would change, changing nothing.
  diff_mode:
    support: none
    description: Returns no diff.
"""
