"""The wave benchmark (`make bench-wave`): gpufleet's upgrade of the lab cell against the peer an SRE would
otherwise run, side by side, from the same starting state, and both against the lower bound.

- (a) gpufleet: ``playbooks/upgrade_wave.yml`` as operators run it (``make wave``);
- (b) the peer: ``benchmarks/peer_upgrade.yml`` - the same preflight, snapshot and control plane, then every GPU node
  one at a time with the real ``kubectl drain --ignore-daemonsets --delete-emptydir-data --timeout``, the same
  package upgrade and gates, ``kubectl uncordon``; no gang handling.

Each starts from ``bin/lab reset`` and ``bin/lab up`` (the cell on ``from``, the training gang admitted and running,
its periodic checkpoint every ``--checkpoint-interval`` seconds). Every task's result is timed per host by the
benchmark-only callback ``benchmarks/callbacks/bench_timing.py``.

Figures, per run:
- window: the playbook's wall clock;
- essential time: what the tools and the cluster took - a command's own ``delta``, a wait's ``elapsed``, and the
  whole of the tasks that wait on the cluster or a tool (drain, gang stop and resume, canary workloads, GPU
  diagnostics, soaks: ``WAITING``); everything else a task took is controller overhead;
- lower bound, from gpufleet's plan (its waves) and gpufleet's measured essential times: the steps before the
  nodes, plus the control-plane hosts one after another, plus per wave the slowest node of the wave;
- training work lost in GPU-seconds (the lab's lost-work log, SIMULATION of the training framework); for the peer
  also its expectation over the periodic checkpoint's phase, from the times its gang restarted (one run sees one
  phase: a lucky or an unlucky one);
- gang interruptions (stops by gpufleet, restarts after an eviction) per upgraded GPU node;
- controller overhead per host per stage (a stage is a role: drain, node_upgrade, gpu_validate, uncordon,
  kubeadm_upgrade, ...).

Goals (issue 12): window within 1.10 x the lower bound; lost work at least 20 x less than the peer's and no more
than the checkpoint time x the gang's GPUs per stop; overhead under 0.5 s per host per stage. A goal missed is
printed with the stage that holds it back. SIMULATION: the lab's GPUs, kubelets and training framework are
simulated (lab/simulators, lab/gpufleet_lab); the apiserver, scheduler, job controller, kubectl, SSH and apt are
real.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any, Dict, List, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lab"))

from kubernetes import client, config

from gpufleet_lab import config as lab_config
from gpufleet_lab import training

from benchlib import revision

# Tasks whose whole time is the cluster's or a tool's (they wait on pods, a checkpoint, a diagnostic, a soak)
WAITING = {"gpufleet.upgrade.node_drain", "gpufleet.upgrade.gang", "gpufleet.upgrade.canary_workload",
           "gpufleet.upgrade.dcgm_diag", "gpufleet.upgrade.nccl_allreduce", "ansible.builtin.pause",
           "ansible.builtin.wait_for", "ansible.builtin.wait_for_connection", "ansible.builtin.command",
           "ansible.builtin.shell", "ansible.builtin.apt", "ansible.builtin.systemd_service", "ansible.builtin.systemd"}
GOAL_WINDOW, GOAL_LOSS_RATIO, GOAL_OVERHEAD = 1.10, 20.0, 0.5


def essential(line: Dict[str, Any]) -> float:
    """The seconds of a task that were the tool's or the cluster's (the rest of its wall time is the controller's):
    the tool's own time where the module reports it (its last attempt's), the sleeps between the attempts of a task
    retried with ``until``, and the whole of a task that waits on the cluster or a tool (``WAITING``)."""
    if line["status"] == "skipped":
        return 0.0
    retried = 0.0
    if line.get("attempts") and line.get("delay") is not None:
        retried = max(int(line["attempts"]) - 1, 0) * float(line["delay"])
    if line["action"] in WAITING and line.get("tool") is None:
        return line["wall"]
    return min(float(line.get("tool") or 0.0) + retried, line["wall"])


def stage_of(line: Dict[str, Any]) -> str:
    return line["role"] or "playbook"


def read_timing(path: pathlib.Path) -> List[Dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def per_host_stage(lines: List[Dict[str, Any]]) -> Dict[Tuple[str, str, str], Dict[str, float]]:
    """(play, host, stage) -> wall, essential and task count."""
    out: Dict[Tuple[str, str, str], Dict[str, float]] = defaultdict(lambda: {"wall": 0.0, "essential": 0.0,
                                                                            "tasks": 0})
    for line in lines:
        key = (line["play"], line["host"], stage_of(line))
        out[key]["wall"] += line["wall"]
        out[key]["essential"] += essential(line)
        out[key]["tasks"] += 1
    return out


WAVE_PLAY = "Upgrade a wave of GPU nodes"  # playbooks/node_pool.yml


def lower_bound(lines: List[Dict[str, Any]], waves: List[List[str]], control_plane: List[str]) -> Dict[str, float]:
    """Essential time of every task outside the node waves, the slowest host of each (the hosts of a task run at
    once; the control plane's run one host at a time, so they add up), plus per wave the slowest node's essential
    time in the wave."""
    per_task: Dict[Tuple[str, str, float], float] = defaultdict(float)
    cp = 0.0
    node: Dict[str, float] = defaultdict(float)
    for line in lines:
        seconds = essential(line)
        if line["play"] == WAVE_PLAY:
            node[line["host"]] += seconds
            continue
        key = (line["play"], line["task"], line["start"])
        per_task[key] = max(per_task[key], seconds)
        if line["host"] in control_plane and stage_of(line) == "kubeadm_upgrade":
            cp += seconds
    rest = sum(per_task.values())
    parts = {"control_plane": round(cp, 1), "other_steps": round(rest - cp, 1),
             "waves": round(sum(max((node.get(n, 0.0) for n in wave), default=0.0) for wave in waves), 1)}
    parts["total"] = round(sum(parts.values()), 1)
    return parts


def phase_loss(events: List[Dict[str, Any]], interval: float, origin: float) -> float:
    """GPU-seconds lost with periodic checkpoints at ``origin`` + k x ``interval``: a restart loses the work since
    the later of the last checkpoint and the time the gang last started computing; a stop (gpufleet checkpoints
    first) loses what it lost."""
    lost = 0.0
    for ev in events:
        if ev["kind"] != "restart":
            lost += ev["lost_gpu_seconds"]
            continue
        checkpoint = ev["at"] - (ev["at"] - origin) % interval
        lost += max(ev["at"] - max(checkpoint, ev["computing_since"]), 0.0) * ev["gpus"]
    return lost


def expected_loss(events: List[Dict[str, Any]], interval: float, steps: int = 120) -> float:
    """The mean of ``phase_loss`` over the periodic checkpoint's phase (one run sees one phase)."""
    return sum(phase_loss(events, interval, interval * k / steps) for k in range(steps)) / steps


class Lab:
    def __init__(self) -> None:
        self.cfg = lab_config.load()

    def fresh(self) -> None:
        for args in (["reset"], ["up"]):
            subprocess.run([str(ROOT / "bin" / "lab")] + args, check=True, cwd=ROOT)
        api = config.new_client_from_config(str(self.cfg.kubeconfig))
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    def jobset(self) -> Dict[str, Any]:
        return self.custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", training.NS, "jobsets",
                                                        "llm-pretrain")

    def set_interval(self, seconds: float) -> None:
        self.custom.patch_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", training.NS, "jobsets", "llm-pretrain",
            {"metadata": {"annotations": {training.INTERVAL: str(int(seconds))}}})

    def wait_gang_computing(self, timeout: float = 120) -> Dict[str, Any]:
        """Until the lab's gang computes (every rank running, noted by the lab on its JobSet); its JobSet."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            js = self.jobset()
            if (js["metadata"].get("annotations") or {}).get(training.RANKS):
                return js
            time.sleep(1)
        raise SystemExit("bench_wave: the lab's training gang llm-pretrain is not computing (every rank running) "
                         "%d s after `bin/lab up`; see `bin/lab status` and the lab controller's log" % timeout)

    def lost_log(self) -> List[Dict[str, Any]]:
        path = self.cfg.run / "lost-work.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def gang_facts(js: Dict[str, Any]) -> Dict[str, Any]:
    """GPUs, checkpoint time and the last checkpoint of the lab's gang, from its JobSet (no figure assumed)."""
    ann = js["metadata"].get("annotations") or {}
    last = ann.get(training.LAST)
    return {"gpus": training.jobset_gpus(js), "checkpoint_seconds": float(ann.get(training.DELAY, "5")),
            "last_checkpoint": training.parse_time(last).timestamp() if last else None,
            "restarts": int((js.get("status") or {}).get("restarts") or 0)}


def run_playbook(lab: Lab, name: str, argv: List[str], out: pathlib.Path, interval: float) -> Dict[str, Any]:
    lab.fresh()
    lab.set_interval(interval)
    gang = gang_facts(lab.wait_gang_computing())
    timing = out / ("%s-timing.jsonl" % name)
    timing.unlink(missing_ok=True)
    env = dict(os.environ, ANSIBLE_CALLBACK_PLUGINS=str(ROOT / "benchmarks" / "callbacks"),
               ANSIBLE_CALLBACKS_ENABLED="gpufleet.upgrade.change_record,bench_timing",
               GPUFLEET_BENCH_TIMING=str(timing))
    log = out / ("%s.log" % name)
    before = len(lab.lost_log())
    print("bench_wave: %s: %s (log %s)" % (name, " ".join(argv), log), flush=True)
    started = time.time()
    with open(log, "w") as handle:
        proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False)
    window = time.time() - started
    if proc.returncode != 0:
        raise SystemExit("bench_wave: %s failed (exit %d); its output is in %s:\n%s" % (
            name, proc.returncode, log, log.read_text()[-4000:]))
    events = lab.lost_log()[before:]
    bad = [e for e in events if e.get("kind") not in ("stop", "restart")]
    if bad:
        raise SystemExit("bench_wave: lost-work entries without a kind (stop or restart): %s; the lab controller "
                         "is older than this bench - `bin/lab down && bin/lab up`" % bad[:2])
    restarts = gang_facts(lab.jobset())["restarts"] - gang["restarts"]
    logged = sum(1 for e in events if e["kind"] == "restart")
    if restarts != logged:
        raise SystemExit("bench_wave: %s: the JobSet counts %d restarts, the lost-work log %d; the figures would "
                         "not be the gang's" % (name, restarts, logged))
    return {"window": window, "started": started, "timing": read_timing(timing), "events": events,
            "gang": gang}


def summarise(run: Dict[str, Any], bound: float, gpu_nodes: List[str], interval: float) -> Dict[str, Any]:
    stages = per_host_stage(run["timing"])
    overhead: Dict[str, List[float]] = defaultdict(list)
    for (play, _host, stage), fig in stages.items():
        overhead["%s | %s" % (play, stage)].append(fig["wall"] - fig["essential"])
    per_stage = {k: round(sum(v) / len(v), 2) for k, v in overhead.items()}
    events = run["events"]
    stops = sum(1 for e in events if e["kind"] == "stop")
    restarts = sum(1 for e in events if e["kind"] == "restart")
    observed_phase = run["gang"]["last_checkpoint"]
    return {"window_s": round(run["window"], 1), "lower_bound_s": round(bound, 1),
            "ratio": round(run["window"] / bound, 2) if bound else None,
            "lost_gpu_seconds": round(sum(e["lost_gpu_seconds"] for e in events), 1),
            # the same model at this run's checkpoint phase: it should be near what the lab logged
            "model_lost_gpu_seconds": round(phase_loss(events, interval, observed_phase), 1)
            if observed_phase is not None else None,
            "expected_lost_gpu_seconds": round(expected_loss(events, interval), 1),
            "gang_stops": stops, "gang_restarts": restarts,
            "interruptions_per_node": round((stops + restarts) / len(gpu_nodes), 2),
            "essential_s": round(sum(essential(x) for x in run["timing"]), 1),
            "overhead_per_host_stage_s": dict(sorted(per_stage.items(), key=lambda kv: -kv[1])),
            "events": [{k: e[k] for k in ("time", "kind", "reason", "seconds_since_checkpoint", "gpus",
                                          "lost_gpu_seconds")} for e in events]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint-interval", type=float, default=600.0)
    parser.add_argument("--only", choices=["gpufleet", "peer"], help="run one of the two (the table needs both)")
    parser.add_argument("--out", default=str(ROOT / "out" / "bench"))
    args = parser.parse_args()
    if args.checkpoint_interval < 30:
        raise SystemExit("--checkpoint-interval=%s: give at least 30 seconds (a checkpoint takes seconds)" %
                         args.checkpoint_interval)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lab = Lab()
    cfg = lab.cfg
    kubectl = cfg.bin_dir("kubernetes", cfg.to_version) / "kubectl"
    inventory = str(cfg.inventory)
    runs: Dict[str, Dict[str, Any]] = {}
    if args.only in (None, "gpufleet"):
        runs["gpufleet"] = run_playbook(lab, "gpufleet", [
            str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "playbooks/upgrade_wave.yml",
            "-i", inventory], out, args.checkpoint_interval)
    if args.only in (None, "peer"):
        runs["peer"] = run_playbook(lab, "peer", [
            str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "benchmarks/peer_upgrade.yml",
            "-i", inventory, "-e", "peer_kubectl=%s" % kubectl], out, args.checkpoint_interval)
    base = runs.get("gpufleet")
    if base is not None:
        waves = plan_waves(base["timing"], cfg.gpu_hosts)
    else:
        waves = [[n] for n in cfg.gpu_hosts]  # --only peer: no gpufleet plan ran; one node a wave
    base = base or runs["peer"]
    bound = lower_bound(base["timing"], waves, list(cfg.control_plane))
    table = {name: summarise(run, bound["total"], cfg.gpu_hosts, args.checkpoint_interval)
             for name, run in runs.items()}
    gang = base["gang"]
    report = {"revision": revision(), "checkpoint_interval_s": args.checkpoint_interval, "waves": waves,
              "gang_gpus": gang["gpus"], "checkpoint_seconds": gang["checkpoint_seconds"], "lower_bound": bound,
              "runs": table, "goals": goals(table, gang["gpus"] * gang["checkpoint_seconds"])}
    (out / "bench-wave.json").write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    print("bench_wave: figures in %s" % (out / "bench-wave.json"))


def plan_waves(lines: List[Dict[str, Any]], gpu_nodes: List[str]) -> List[List[str]]:
    """gpufleet's waves as its run went through them (each GPU host's ``gpufleet_wave``, set by node_pool.yml from
    the cell module's plan). Fails when a GPU node ran in no wave: the bound would not be the plan's."""
    waves: Dict[str, List[str]] = {}
    for line in lines:
        if line["play"] == WAVE_PLAY and line.get("wave") and line["host"] in gpu_nodes:
            hosts = waves.setdefault(line["wave"], [])
            if line["host"] not in hosts:
                hosts.append(line["host"])
    missing = sorted(set(gpu_nodes) - {h for hosts in waves.values() for h in hosts})
    if missing:
        raise SystemExit("bench_wave: no gpufleet_wave seen for %s in play %r (playbooks/node_pool.yml): the lower "
                         "bound needs the plan's waves; has the play or the variable been renamed?" % (
                             ", ".join(missing), WAVE_PLAY))
    return list(waves.values())


def goals(table: Dict[str, Any], stop_bound: float) -> List[Dict[str, Any]]:
    """Issue 12's goals against gpufleet's figures; each missed one says what holds it back. ``stop_bound``: the
    checkpoint time x the gang's GPUs (GPU-seconds)."""
    out: List[Dict[str, Any]] = []
    ours = table.get("gpufleet")
    if not ours:
        return out
    worst = next(iter(ours["overhead_per_host_stage_s"].items()), ("none", 0.0))
    out.append({"goal": "window <= %.2f x lower bound" % GOAL_WINDOW, "value": ours["ratio"],
                "met": ours["ratio"] is not None and ours["ratio"] <= GOAL_WINDOW,
                "held_back_by": "controller overhead, most in %s (%.2f s per host)" % worst})
    per_stop = max((e["lost_gpu_seconds"] for e in ours["events"]), default=0.0)
    out.append({"goal": "lost work per stop <= checkpoint time x gang GPUs (%.0f GPU-s), no restart" % stop_bound,
                "value": per_stop, "met": per_stop <= stop_bound and ours["gang_restarts"] == 0,
                "held_back_by": "%d restarts of the gang" % ours["gang_restarts"] if ours["gang_restarts"]
                else "the time between the checkpoint and the stop"})
    peer = table.get("peer")
    if peer:
        theirs = peer["expected_lost_gpu_seconds"]
        if theirs <= 0:
            out.append({"goal": "lost work >= %d x less than the peer's" % GOAL_LOSS_RATIO, "value": "peer lost 0",
                        "met": False, "held_back_by": "the peer lost no work: the run met no gang to compare"})
        else:
            ratio = theirs / ours["lost_gpu_seconds"] if ours["lost_gpu_seconds"] else float("inf")
            out.append({"goal": "lost work >= %d x less than the peer's expected" % GOAL_LOSS_RATIO,
                        "value": round(ratio, 1) if ratio != float("inf") else "inf",
                        "met": ratio >= GOAL_LOSS_RATIO, "held_back_by": "gpufleet's stops"})
    out.append({"goal": "controller overhead < %.1f s per host per stage" % GOAL_OVERHEAD, "value": worst[1],
                "met": worst[1] < GOAL_OVERHEAD, "held_back_by": worst[0]})
    return out


def print_table(report: Dict[str, Any]) -> None:
    runs = report["runs"]
    print("\nbench_wave: lower bound %.1f s (other steps %.1f, control plane %.1f, %d waves %.1f), "
          "checkpoint every %d s" % (report["lower_bound"]["total"], report["lower_bound"]["other_steps"],
                                     report["lower_bound"]["control_plane"], len(report["waves"]),
                                     report["lower_bound"]["waves"], report["checkpoint_interval_s"]))
    print("%-10s %9s %7s %6s %10s %10s %6s %9s %7s %s" % ("run", "window s", "bound", "ratio", "lost GPU-s",
                                                         "expected", "stops", "restarts", "per node",
                                                         "worst overhead per host per stage"))
    for name, row in runs.items():
        worst = next(iter(row["overhead_per_host_stage_s"].items()), ("-", 0.0))
        print("%-10s %9.1f %7.1f %6.2f %10.1f %10s %6d %9d %7.2f %s %.2f s" % (
            name, row["window_s"], row["lower_bound_s"], row["ratio"] or 0, row["lost_gpu_seconds"],
            row.get("expected_lost_gpu_seconds", "-"), row["gang_stops"], row["gang_restarts"],
            row["interruptions_per_node"], worst[0], worst[1]))
    for goal in report["goals"]:
        print("goal %-62s %-10s %s%s" % (goal["goal"], goal["value"], "met" if goal["met"] else "MISSED",
                                         "" if goal["met"] or not goal.get("held_back_by")
                                         else " - held back by " + goal["held_back_by"]))


if __name__ == "__main__":
    main()
