#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: apiserver_soak
short_description: Soak one control-plane host's apiserver on its signals - 429s, p99 latency, relists, memory, /readyz
version_added: 0.5.0
description:
  - With O(state=before), reads the host's apiserver's C(/metrics) twice, C(signals.before_seconds) apart, before the
    host moves, and returns the window's signals (C(reading)) for the soak.
  - With O(state=soak), after the host moved, waits until its new apiserver process is C(signals.warmup_seconds)
    old (C(process_start_time_seconds)), then reads it and every peer apiserver at the start of the soak and every
    C(signals.interval_seconds) for O(soak_seconds), with no retry. Each time it asks the host's C(/readyz) (any
    answer but ok fails at once) and judges the window so far - the requests refused 429 per minute (API Priority
    and Fairness or max-in-flight; not a watch cache's 429 while it initialises), the p99 latency of
    read (GET), list (LIST) and write requests (long-running ones left out), LIST and WATCH requests per minute,
    the resident memory - against O(before) and against the median of the peers over the same window. A signal
    above C(ratio x reference + slack) for every reference that was measured fails the host at once, naming the
    signal and its value before, after and on the peers; at the end, a signal still unmeasured (a verb class with
    fewer than C(signals.min_requests) requests) fails too - never a pass.
  - Each C(/metrics) text must be the apiserver's own (C(kubernetes_build_info) equal to its C(/version), the request
    counter and latency histogram present); a host's apiserver that restarted within the soak fails it. A peer
    that cannot be read fails the soak naming the peer.
  - At each reading it sends C(signals.probe_requests) requests of each verb class to every apiserver it reads - a
    GET of a ConfigMap in C(kube-public) that does not exist, a LIST with C(limit=1), a server-side dry-run create -
    so a quiet cell's classes are measured too (the credentials need get, list and create on ConfigMaps in
    C(kube-public)). A probe that fails (not a 404 for the GET) fails the soak naming the apiserver.
  - Changes nothing (the probe's create is a dry run); the judgement is the same in check mode.
options:
  node:
    description: The control-plane host being soaked, its inventory name (messages and the change record name it).
    type: str
    required: true
  apiserver_url:
    description: The host's own apiserver (C(gpufleet_apiserver_url)), not a load-balanced address.
    type: str
    required: true
  apiservers:
    description: Every control-plane host's own apiserver, host to URL (the cell's C(apiserver_urls)); the others
      than O(node) are its peers. Empty, or this host alone, on a single control-plane host - then only O(before)
      is a reference.
    type: dict
    default: {}
  state:
    description: C(before) reads the window before the host moves; C(soak) soaks it after.
    type: str
    choices: [before, soak]
    default: soak
  before:
    description:
      - With O(state=soak), the C(reading) of this module's O(state=before) run on the host. Leave it out when the
        host already ran the target when the run reached it (a rerun after its soak failed); then its peers alone
        are the reference, as a reading of the new process would excuse what it shows.
    type: dict
  soak_seconds:
    description: With O(state=soak), how long the soak lasts after the warm-up (C(gpufleet_soak_seconds)).
    type: int
    default: 30
  signals:
    description:
      - The soak's settings and thresholds (the cell's C(settings.soak_signals), from C(gpufleet_soak_signals));
        missing keys take their defaults. C(interval_seconds) 10, C(warmup_seconds) 60, C(before_seconds) 30,
        C(min_requests) 50, C(probe_requests) 20, C(throttled_ratio) 2 and C(throttled_slack_per_minute) 5,
        C(latency_ratio) 2 and C(latency_slack_seconds) 0.1, C(latency_ceiling_seconds) 1 and
        C(list_ceiling_seconds) 30 (the Kubernetes API call latency SLO, used when no reference was measured),
        C(relists_ratio) 3 and C(relists_slack_per_minute) 60, C(rss_ratio) 2 and C(rss_slack_bytes) 512 MiB. A
        rate's slack is at least one minute's worth of events over a shorter window.
    type: dict
    default: {}
  request_timeout:
    description: Seconds each request to an apiserver may take.
    type: float
    default: 30
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Read this host's apiserver before it moves
  gpufleet.upgrade.apiserver_soak:
    node: cp-1
    apiserver_url: https://10.0.0.11:6443
    state: before
    signals: "{{ gpufleet_cell.settings.soak_signals }}"
  register: before
  delegate_to: localhost

- name: Soak it after kubeadm moved it
  gpufleet.upgrade.apiserver_soak:
    node: cp-1
    apiserver_url: https://10.0.0.11:6443
    apiservers: {cp-1: "https://10.0.0.11:6443", cp-2: "https://10.0.0.12:6443", cp-3: "https://10.0.0.13:6443"}
    before: "{{ before.reading }}"
    soak_seconds: 300
    signals: "{{ gpufleet_cell.settings.soak_signals }}"
  delegate_to: localhost
"""

RETURN = r"""
node:
  description: The control-plane host read or soaked (O(node)).
  returned: success
  type: str
reading:
  description: The window's signals (throttled_per_minute, p99_seconds.read|list|write, requests per class,
    relists_per_minute (LIST requests), rss_bytes, seconds, unmeasured with why), of the window before
    (O(state=before)) or of the whole soak (O(state=soak)).
  returned: success
  type: dict
peers:
  description: With O(state=soak), each peer's signals over the soak's window.
  returned: state is soak
  type: dict
checks:
  description: With O(state=soak), one check per signal (name, subject, measured, before, peers, limit, expected,
    passed, detail), as the change record keeps gates.
  returned: state is soak
  type: list
  elements: dict
passed:
  description: Every signal measured and none regressed.
  returned: state is soak
  type: bool
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import apiserver_signals as signals
from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(node=dict(type="str", required=True), apiserver_url=dict(type="str", required=True),
                           apiservers=dict(type="dict", default={}),
                           state=dict(type="str", choices=["before", "soak"], default="soak"),
                           before=dict(type="dict"), soak_seconds=dict(type="int", default=30),
                           signals=dict(type="dict", default={}), request_timeout=dict(type="float", default=30.0),
                           **kube.KUBE_ARGSPEC),
        supports_check_mode=True,
    )
    p = module.params

    def body():
        cfg = signals.settings(p["signals"], "signals")
        plan = signals.soak_inputs(p["node"], p["apiserver_url"], p["apiservers"], p["before"], p["soak_seconds"],
                                   p["state"])
        apis = {name: kube.connect(module, host=url) for name, url in plan["apiservers"].items()}
        wait = p["request_timeout"]

        def scrape(name):
            api = apis[name]
            try:
                return signals.reduce(api.metrics_text(wait), name, api.raw_text("/version", wait))
            except kube.KubeError as exc:
                raise GateFailed("%s: the apiserver %s could not be read: %s" % (
                    name, plan["apiservers"][name], exc.msg)) from None

        def readyz():
            try:
                text = apis[p["node"]].raw_text("/readyz", wait)
            except kube.KubeError as exc:
                raise GateFailed("%s: /readyz failed during the soak: %s" % (p["node"], exc.msg)) from None
            if text.strip() != "ok":
                raise GateFailed("%s: /readyz answered %r during the soak, not ok" % (p["node"], text[:300]))

        def probe(name):
            try:
                apis[name].soak_probe(cfg["probe_requests"], wait)
            except kube.KubeError as exc:
                raise GateFailed("%s: the soak's probe requests to %s failed: %s" % (
                    name, plan["apiservers"][name], exc.msg)) from None

        return signals.run(p["node"], plan, cfg, scrape, readyz, time.monotonic, time.time, time.sleep, probe)

    run_module(module, body)


if __name__ == "__main__":
    main()
