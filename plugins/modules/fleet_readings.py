#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_readings
short_description: Read a cell's fleet halt readings from its own API - apiserver 429s and latency, nodes, GPUs, JobSets
version_added: 0.4.0
description:
  - Scrapes every apiserver of the cell (O(apiserver_urls), with the connection's credentials) twice,
    O(window_seconds) apart, and reports the requests refused 429 per minute (API Priority and Fairness or
    max-in-flight, C(apiserver_request_terminations_total), or APF's own count where higher; not a watch cache's
    429 while it initialises) and the p99 request latency over the window (C(apiserver_request_duration_seconds);
    WATCH and CONNECT left out).
  - Reads the Nodes (C(not_ready_nodes); C(gpu_allocatable_fraction), allocatable C(nvidia.com/gpu) on Ready nodes,
    each node counting at most its pool's GPUs per node, over O(expected_gpus) and each pool's) and the JobSets
    (C(jobset_restarts), the sum of C(status.restarts)). A Node list or JobSet of the wrong shape, a GPU count or
    restart count that is not a whole number (full-width digits, NaN, an infinity, a list), fails the task naming
    the node or JobSet and the field.
  - The readings are judged by M(gpufleet.upgrade.fleet_ledger) against the ones taken before the cell's upgrade;
    this module judges nothing. An apiserver that does not answer, or metrics without the two series, fail the task -
    a reading that could not be taken is never a pass.
options:
  cell:
    description: The cell's name, for messages.
    type: str
    required: true
  apiserver_urls:
    description: Every apiserver of the cell, each its own URL (C(gpufleet_apiserver_url) of each control-plane host).
    type: list
    elements: str
    required: true
  expected_gpus:
    description: The GPUs the cell should have allocatable (the fleet's C(cells[].gpus)).
    type: int
    required: true
  window_seconds:
    description: Seconds between the two scrapes of each apiserver (the fleet's C(policy.metrics_window_seconds)).
    type: float
    required: true
  request_timeout:
    description: Seconds each API request may take; an apiserver that accepts and never answers fails the task.
    type: float
    default: 30
  node_pools:
    description:
      - The inventory's pool of each node (the cell's C(host_pool) from M(gpufleet.upgrade.cell)), for the kubelet
        versions per pool in C(readings.versions) (with O(versions_only)). A Node not listed is reported under
        C(not-in-inventory).
    type: dict
    default: {}
  pools:
    description:
      - The cell's pools (C(pools) from M(gpufleet.upgrade.cell)), each with its C(nodes) and C(gpus) (its nodes
        times its baseline's GPUs per node) and its C(baseline) (whose C(node.allocatable_gpus), else C(gpu.count),
        is the GPUs one node of the pool should offer; C(gpus_per_node) overrides it). Each node is judged against
        it and counts at most it, C(gpu_allocatable_fraction) is the lowest of the cell's and each pool's fraction,
        C(gpu_allocatable_by_pool) gives each pool's, and C(gpu_allocatable_off_baseline) names each pool node that
        does not count exactly it (C(above), C(below), C(not ready), C(no node)). A pool without its nodes, GPUs or
        GPUs per node, or whose GPUs are not its nodes times its GPUs per node, is refused; so is a cell with
        O(expected_gpus) and no pools.
    type: dict
    default: {}
  nccl_hosts:
    description:
      - The cell's NCCL probe hosts (the fleet's C(cells[].nccl_hosts)). With them the readings include
        C(nccl_busbw_gbps), the slowest host's median bus bandwidth at its baseline's largest size, from
        O(nccl_results).
    type: list
    elements: str
    default: []
  nccl_results:
    description:
      - Each probe host's M(gpufleet.upgrade.nccl_allreduce) result, run with
        O(gpufleet.upgrade.nccl_allreduce#module:gate=false) (C(passed), C(checks), C(median_busbw)). A host
        without one, or with a failed check other than the bandwidth itself, leaves C(nccl_busbw_gbps) unmeasured.
    type: dict
    default: {}
  inference_metrics_url:
    description:
      - The inference service's Prometheus metrics endpoint (the fleet's C(cells[].inference.metrics_url)), scraped
        with the apiservers, O(window_seconds) apart, for C(inference_p99_ms). An endpoint that does not answer fails
        the task.
    type: str
  inference_histogram:
    description:
      - The request latency histogram at O(inference_metrics_url), in seconds (each series differenced on its
        own, then merged).
    type: str
  versions_only:
    description:
      - Read only the versions (each apiserver's, the kubelets' per pool) for the fleet report
        (playbooks/fleet_report.yml) - no metrics window, no halt readings.
    type: bool
    default: false
requirements:
  - the C(prometheus-client) Python library on the controller (requirements.txt)
extends_documentation_fragment:
  - gpufleet.upgrade.common.KUBE
  - kubernetes.core.k8s_auth_options
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: The cell's halt readings
  gpufleet.upgrade.fleet_readings:
    cell: "{{ __gpufleet_cell.cell.name }}"
    apiserver_urls: "{{ __gpufleet_cell.cell.apiserver_urls.values() | list }}"
    expected_gpus: 32
    window_seconds: 30
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
readings:
  description:
    - C(apiserver_429_per_minute), C(apiserver_p99_seconds) (null when no request was served in the window),
      C(not_ready_nodes), C(gpu_allocatable_fraction), C(jobset_restarts), and what they come from
      (C(apiservers), C(not_ready), C(gpus_allocatable), C(gpus_expected), C(gpu_allocatable_by_pool),
      C(gpu_allocatable_off_baseline), C(gpu_nodes_outside_pools), C(jobsets_restarted), C(jobset_restart_counts),
      C(jobset_api)).
    - With O(nccl_hosts), C(nccl_busbw_gbps) and C(nccl_busbw_by_host); with O(inference_metrics_url),
      C(inference_p99_ms) and C(inference_requests). C(unmeasured) says why a reading is null.
    - With O(versions_only), only C(versions) - C(control_plane) (the oldest apiserver's version), C(apiservers)
      (URL to version), C(kubelets) (pool to its kubelets' versions) and C(no_node) (inventory hosts with no Node) -
      with C(cell) and C(taken).
  returned: success
  type: dict
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_readings, kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def main():
    module = AnsibleModule(
        argument_spec=dict(cell=dict(type="str", required=True),
                           apiserver_urls=dict(type="list", elements="str", required=True),
                           expected_gpus=dict(type="int", required=True),
                           window_seconds=dict(type="float", required=True),
                           request_timeout=dict(type="float", default=30.0),
                           node_pools=dict(type="dict", default={}),
                           pools=dict(type="dict", default={}),
                           nccl_hosts=dict(type="list", elements="str", default=[]),
                           nccl_results=dict(type="dict", default={}),
                           inference_metrics_url=dict(type="str"),
                           inference_histogram=dict(type="str"),
                           versions_only=dict(type="bool", default=False), **kube.KUBE_ARGSPEC),
        required_together=[("inference_metrics_url", "inference_histogram")],
        supports_check_mode=True,
    )
    params = module.params

    def body():
        fleet_readings.check_inputs(params["cell"], params["apiserver_urls"], params["expected_gpus"],
                                    params["window_seconds"], params["request_timeout"])
        pools = fleet_readings.pool_expectations(params["pools"])
        wait = params["request_timeout"]
        apis = {url: kube.connect(module, host=url) for url in params["apiserver_urls"]}
        api = kube.connect(module)
        if params["versions_only"]:
            found = fleet_readings.versions({url: a.server_version(wait) for url, a in apis.items()},
                                            api.list_nodes(wait), params["node_pools"])
            return {"readings": {"versions": found, "cell": params["cell"], "taken": kube.now_rfc3339()},
                    "msg": "%s: control plane %s" % (params["cell"], found["control_plane"])}
        service, histogram = params["inference_metrics_url"], params["inference_histogram"]

        def inference():
            try:
                text = open_url(service, timeout=wait).read().decode("utf-8", "replace")
            except Exception as exc:  # URLError, HTTPError, a timeout: the service could not be read
                why = "%s: %s" % (type(exc).__name__, exc)
                raise GpufleetError("%s: the inference metrics endpoint %s did not answer (%s); check "
                                    "cells[].inference.metrics_url" % (params["cell"], service, why)) from None
            return fleet_readings.scrape_histogram(text, service, histogram)

        first = {url: fleet_readings.scrape(api.metrics_text(wait), url) for url, api in apis.items()}
        served = inference() if service else None
        started = time.monotonic()
        time.sleep(params["window_seconds"])
        second = {url: fleet_readings.scrape(api.metrics_text(wait), url) for url, api in apis.items()}
        served_after = inference() if service else None
        seconds = time.monotonic() - started
        out = fleet_readings.readings(first, second, seconds, api.list_nodes(wait), params["expected_gpus"],
                                      api.list_custom_served(kube.JOBSET), pools)
        if params["nccl_hosts"]:
            fleet_readings.add_sourced(out, fleet_readings.nccl_reading(params["nccl_hosts"], params["nccl_results"]))
        if service:
            fleet_readings.add_sourced(out, fleet_readings.inference_reading(served, served_after, service))
        out["cell"] = params["cell"]
        out["taken"] = kube.now_rfc3339()
        return {"readings": out, "msg": "%s: %s" % (params["cell"], ", ".join(
            "%s %s" % (k, out[k]) for k in fleet_readings.API_READINGS + tuple(fleet_readings.SOURCED_READINGS)
            if k in out))}

    run_module(module, body)


if __name__ == "__main__":
    main()
