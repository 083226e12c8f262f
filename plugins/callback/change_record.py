# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: change_record
type: aggregate
short_description: Write a change record (JSON and Markdown) for every gpufleet run
version_added: 0.1.0
description:
  - Records, for every playbook run, the objective, the version diff, the canary scope, each wave's hosts and
    timings, every gate's measured value against its baseline (the C(checks) that gpufleet.upgrade modules return),
    the failures, and the rollback trigger conditions. Writes C(<time>-<playbook>.json) and C(.md).
  - Plays describe themselves with variables - C(gpufleet_objective), C(gpufleet_target_version), C(gpufleet_wave)
    (a wave name or number), C(gpufleet_canary) (true for canary waves) and C(gpufleet_rollback_triggers) (a list).
  - The run's objective is C(gpufleet_run_objective) where a play has it (a playbook of stages, such as
    C(upgrade_wave.yml), sets it on its imports), else the first play's C(gpufleet_objective); each play's own
    objective is kept with the play.
  - Results of tasks with C(no_log) are recorded as censored; their values never reach the record.
  - Break glass has its own section - each confirmed switch (M(gpufleet.upgrade.cell)) and each use of one by a
    role (a fact named C(*_break_glass_record), e.g. C(drain_break_glass_record) - drain without eviction, forced
    drain, gangs stopped without a checkpoint, a skipped NCCL gate, an etcd restore) with who, when, which nodes.
    So do the baselines' opt-outs and the training gangs resumed or left stopped.
  - The security checks (M(gpufleet.upgrade.security_checks)) have their own section - the baseline taken, Pod
    Security pinning, the admission probes, NetworkPolicies and their CNI, legacy tokens and the RBAC diff against
    the baseline - beside their checks in the gates table.
  - So do the canary workloads (M(gpufleet.upgrade.canary_workload)) - each training gang's bus bandwidth and each
    inference service's latency, on which canary nodes, how long it took, and why one that failed did not finish.
  - So do the kubelet settings the upgrade changed, per pool, with the nodes they changed on (the
    C(kubelet_config_changes) of M(gpufleet.upgrade.node_gate) - each node's running C(/configz) before and after).
  - So does each control-plane host's soak (M(gpufleet.upgrade.apiserver_soak)) - every signal after the move, with
    the reading before it and its peers' - beside its checks in the gates table.
  - So do the node disruptions of the upgrade cycle (M(gpufleet.upgrade.node_state) read with C(cycle)) - per node,
    the targets it was drained for on the way to the cycle's last version (one for a skip-level training node).
  - The records are written owner-only (0600, in a 0700 directory). Under ansible-runner (an AWX job, or the
    runner CLI) a copy also goes to the job's artifact directory (C(AWX_ISOLATED_DATA_DIR)/gpufleet/change-records).
requirements:
  - enable it in ansible.cfg (C(callbacks_enabled = gpufleet.upgrade.change_record)) or with
    C(ANSIBLE_CALLBACKS_ENABLED)
options:
  output_dir:
    description:
      - Directory for the records. Unset (the default), they go to C(change-records) in the run's output
        directory - C(gpufleet_out_dir) (from -e, the play or the inventory; the C(out_dir) of
        M(gpufleet.upgrade.cell) where the playbook reads the cell), else C(GPUFLEET_OUT_DIR), else C(./out) of the
        working directory; never inside the installed collection.
    type: path
    env:
      - name: GPUFLEET_CHANGE_RECORD_DIR
    ini:
      - section: callback_change_record
        key: output_dir
"""

import datetime
import getpass
import json
import os
import re
import time

from ansible.plugins.callback import CallbackBase

from ansible_collections.gpufleet.upgrade.plugins.module_utils import apiserver_signals as signals
from ansible_collections.gpufleet.upgrade.plugins.module_utils import cell as cell_utils
from ansible_collections.gpufleet.upgrade.plugins.module_utils import security

DEFAULT_TRIGGERS = [
    "a gate fails on a canary node: stop; the canary stays cordoned with the reason annotated",
    "kube-apiserver /readyz fails after a control-plane step: stop; restore from the verified etcd snapshot "
    "(playbooks/etcd_restore.yml, break-glass)",
    "GPUs allocatable below the baseline, an XID from the fatal list, DCGM failure, or NCCL bus bandwidth below "
    "the baseline tolerance on any upgraded node: stop later waves",
    "a training gang does not confirm its checkpoint in time: do not stop it; leave its nodes for a later window",
]


def _now():
    return datetime.datetime.now(datetime.UTC)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.upgrade.change_record"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        self.record = None
        self._task_start = {}
        self._play = None
        self._out_dir = None
        self._run_objective = ""

    # -- collection --------------------------------------------------------------------------------------------
    def v2_playbook_on_start(self, playbook):
        self.record = {"playbook": os.path.basename(playbook._file_name), "started": _now().isoformat(),
                       "operator": getpass.getuser(), "objective": "", "target_version": "", "version_diff": {},
                       "canary_scope": [], "plays": [], "gates": [], "failures": [], "rollback_triggers": [],
                       "cell": "", "run_id": "", "break_glass": [], "opt_outs": [],
                       "gangs": {"resumed": [], "stay_stopped": []}, "security": [],
                       "canary_workloads": [], "disruptions": {}, "kubelet_config": [], "control_plane_soak": []}
        self._started = time.time()
        self._run_objective = ""

    def v2_playbook_on_play_start(self, play):
        manager = play.get_variable_manager()
        variables = manager.get_vars(play=play) if manager else {}

        def var(name, default=None):
            """A play variable, rendered; the default when it cannot be rendered (a record never breaks a run)."""
            if name not in variables:
                return default
            try:
                from ansible.template import Templar
                return Templar(loader=play._loader, variables=variables).template(variables[name])
            except Exception:
                return default

        if self._out_dir is None:
            self._out_dir = self._inventory_out_dir(play, manager)
        self._play = {"name": play.get_name(), "objective": str(var("gpufleet_objective") or ""),
                      "wave": var("gpufleet_wave", ""), "canary": bool(var("gpufleet_canary", False)),
                      "started": _now().isoformat(), "hosts": {}}
        self.record["plays"].append(self._play)
        run_objective = var("gpufleet_run_objective")
        if run_objective and not self._run_objective:  # the run's own: it replaces a play's taken before it
            self._run_objective = self.record["objective"] = str(run_objective)
        for key, field in (("gpufleet_objective", "objective"), ("gpufleet_target_version", "target_version")):
            value = var(key)
            if value and not self.record[field]:
                self.record[field] = str(value)
        triggers = var("gpufleet_rollback_triggers")
        if isinstance(triggers, list) and not self.record["rollback_triggers"]:
            self.record["rollback_triggers"] = [str(t) for t in triggers]

    @staticmethod
    def _inventory_out_dir(play, manager):
        """gpufleet_out_dir for a playbook without the cell task (etcd_backup, etcd_restore, awx_configure): from
        -e, the play or the inventory (as its first host sees it), rendered; None when unset or not renderable
        (then GPUFLEET_OUT_DIR or ./out). A cell task later in the run gives the same directory."""
        try:
            inventory = getattr(manager, "_inventory", None)
            hosts = inventory.get_hosts(play.hosts) if inventory else []
            variables = manager.get_vars(play=play, host=hosts[0]) if hosts else manager.get_vars(play=play)
            if variables.get("gpufleet_out_dir") in (None, ""):
                return None
            from ansible.template import Templar
            value = Templar(loader=play._loader, variables=variables).template(variables["gpufleet_out_dir"])
            return cell_utils.out_dir(value, os.environ, os.getcwd()) if isinstance(value, str) and value else None
        except Exception:  # a record never breaks a run; the default directory is used
            return None

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._task_start[task._uuid] = time.time()

    def _host_entry(self, host, wave=""):
        return self._play["hosts"].setdefault(host, {"ok": 0, "changed": 0, "failed": 0, "skipped": 0,
                                                     "unreachable": 0, "seconds": 0.0, "wave": wave})

    def _host_wave(self, result):
        """The wave of a host: its own ``gpufleet_wave`` (set by add_host when waves are planned at run time, one
        play with serial batches), else the play's."""
        host_vars = getattr(result._host, "vars", None) or {}
        wave = host_vars.get("gpufleet_wave")
        canary = host_vars.get("gpufleet_canary")
        return (str(wave) if wave else self._play["wave"],
                self._play["canary"] if canary is None else str(canary).lower() in ("true", "1", "yes"))

    def _account(self, result, status):
        if self._play is None:
            return
        host = result._host.get_name()
        wave, canary = self._host_wave(result)
        entry = self._host_entry(host, wave)
        entry[status] += 1
        started = self._task_start.get(result._task._uuid)
        if started:
            entry["seconds"] = round(entry["seconds"] + time.time() - started, 2)
        res = result._result
        if res.get("changed") and status == "ok":
            entry["changed"] += 1
        censored = bool(res.get("_ansible_no_log"))
        action = result._task.action or ""
        if not censored:
            self._record_break_glass_use(host, result._task.get_name(), res)
        if not censored and action.startswith("gpufleet.upgrade."):
            if action.endswith(".cell"):
                self._record_cell(result._task.get_name(), res)
            if action.endswith(".gang"):
                self._record_gangs(res)
            if action.endswith(".security_checks") and (isinstance(res.get("security"), dict) or res.get("psa_changes")
                                                        or res.get("baseline")):
                self.record["security"].append({
                    "task": result._task.get_name(), "wave": wave, "passed": res.get("passed"),
                    "report": res.get("security") or {}, "psa_changes": res.get("psa_changes") or {},
                    "baseline": res.get("baseline") or {}})
            if action.endswith(".node_state") and isinstance(res.get("disruptions"), dict):
                self.record["disruptions"] = {
                    "cycle": str(res.get("cycle") or ""),
                    "nodes": {str(k): [str(t) for t in v] for k, v in sorted(res["disruptions"].items())
                              if isinstance(v, list)}}
            changes = res.get("kubelet_config_changes")
            if action.endswith(".node_gate") and isinstance(changes, dict) and isinstance(changes.get("changes"), dict):
                self.record["kubelet_config"].append({
                    "pool": str(changes.get("pool")), "node": str(changes.get("node")), "changes": changes["changes"]})
            if action.endswith(".apiserver_soak") and isinstance(res.get("checks"), list):
                self.record["control_plane_soak"].append({
                    "host": str(res.get("node") or host), "passed": bool(res.get("passed")),
                    "reading": res.get("reading") or {}, "before": res.get("before"), "peers": res.get("peers") or {}})
            if action.endswith(".canary_workload") and isinstance(res.get("canary"), list):
                self.record["canary_workloads"] += [dict(r, wave=wave) for r in res["canary"] if isinstance(r, dict)]
            for line in res.get("opt_outs") or []:
                opt_out = {"host": host, "opt_out": str(line)}
                if opt_out not in self.record["opt_outs"]:
                    self.record["opt_outs"].append(opt_out)
            for check in res.get("checks") or []:
                self.record["gates"].append({"host": host, "task": result._task.get_name(), "wave": wave,
                                             "check": check.get("name"),
                                             "subject": check.get("subject"), "measured": check.get("measured"),
                                             "baseline": check.get("expected"), "passed": check.get("passed"),
                                             "severity": check.get("severity"), "detail": check.get("detail", "")})
            plan = res.get("plan") if isinstance(res.get("plan"), dict) else None
            if plan and "current" in plan and "target" in plan:
                self.record["version_diff"] = {"from": plan["current"], "to": plan["target"],
                                               "control_plane_path": plan.get("control_plane_path", [])}
                if not self.record["target_version"]:  # set in the inventory rather than as a play variable
                    self.record["target_version"] = str(plan["target"])
            if isinstance(res.get("canaries"), list):
                self.record["canary_scope"] = res["canaries"]
        if canary and host not in self.record["canary_scope"]:
            self.record["canary_scope"].append(host)
        if status in ("failed", "unreachable"):
            message = "censored (no_log)" if censored else str(res.get("msg") or res.get("stderr") or "")[:2000]
            self.record["failures"].append({"host": host, "task": result._task.get_name(), "action": action,
                                            "wave": wave, "status": status, "message": message,
                                            "ignored": bool(getattr(result, "_task_fields", {}).get(
                                                "ignore_errors"))})

    def _record_cell(self, task, res):
        """The cell's canonical target (whatever spelling the run was given), name and run id, and each
        break-glass switch it confirmed."""
        cell = res.get("cell") if isinstance(res.get("cell"), dict) else {}
        if not cell:
            return
        self.record["target_version"] = str(cell.get("target", self.record["target_version"]))
        self.record["cell"] = str(cell.get("name", ""))
        self.record["run_id"] = str(cell.get("run_id", ""))
        self._out_dir = str(cell.get("out_dir") or "") or None
        for used in cell.get("break_glass_used") or []:
            if not any(e["event"] == "confirmed" and e["action"] == used.get("action")
                       for e in self.record["break_glass"]):
                self.record["break_glass"].append({
                    "time": _now().isoformat(), "operator": self.record["operator"], "event": "confirmed",
                    "action": used.get("action"), "confirmation": used.get("confirmation"),
                    "effect": used.get("effect"), "nodes": [], "task": task})

    def _record_break_glass_use(self, host, task, res):
        """A role's use of a break-glass switch (a fact named *_break_glass_record): who, what, when, which
        nodes."""
        facts = res.get("ansible_facts") if isinstance(res.get("ansible_facts"), dict) else {}
        for name, used in sorted(facts.items()):
            if name.endswith("_break_glass_record") and isinstance(used, dict):
                self.record["break_glass"].append({
                    "time": _now().isoformat(), "operator": self.record["operator"], "event": "used", "host": host,
                    "task": task, "action": ", ".join(str(a) for a in used.get("actions") or []),
                    "stage": str(used.get("stage", "")), "nodes": [str(n) for n in used.get("nodes") or []],
                    "detail": str(used.get("detail", ""))})

    def _record_gangs(self, res):
        """Gangs resumed, and gangs left stopped with why (the latest word on each gang wins)."""
        if "held" not in res:
            return
        gangs = self.record["gangs"]
        stays = {e["gang"]: e["why"] for e in gangs["stay_stopped"]}
        for gang in res.get("resumed") or []:
            stays.pop(gang, None)
            if gang not in gangs["resumed"]:
                gangs["resumed"].append(gang)
        for held in res.get("held") or []:
            if isinstance(held, dict):
                stays[str(held.get("gang"))] = str(held.get("message"))
        gangs["stay_stopped"] = [{"gang": g, "why": w} for g, w in sorted(stays.items())]

    def v2_runner_on_ok(self, result):
        self._account(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._account(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._account(result, "unreachable")

    def v2_runner_on_skipped(self, result):
        self._account(result, "skipped")

    # -- output ------------------------------------------------------------------------------------------------
    def v2_playbook_on_stats(self, stats):
        if self.record is None:
            return
        self.record["finished"] = _now().isoformat()
        self.record["duration_s"] = round(time.time() - self._started, 2)
        self.record["outcome"] = "failed" if any(not f["ignored"] for f in self.record["failures"]) else "succeeded"
        if not self.record["rollback_triggers"]:
            self.record["rollback_triggers"] = list(DEFAULT_TRIGGERS)
        outdir = self.get_option("output_dir") or os.path.join(
            self._out_dir or cell_utils.out_dir(None, os.environ, os.getcwd()), "change-records")
        os.makedirs(outdir, mode=0o700, exist_ok=True)
        stamp = _now().strftime("%Y%m%dT%H%M%SZ")
        base = _claim(outdir, stamp, re.sub(r"[^A-Za-z0-9_.-]", "_", self.record["playbook"]))
        _write_private(base + ".json", json.dumps(self.record, indent=2, sort_keys=True, default=str))
        _write_private(base + ".md", markdown(self.record))
        # Under ansible-runner (AWX jobs, the runner CLI) the artifact directory travels with the job's results.
        artifacts = os.environ.get("AWX_ISOLATED_DATA_DIR")
        if artifacts:
            copy_dir = os.path.join(artifacts, "gpufleet", "change-records")
            os.makedirs(copy_dir, mode=0o700, exist_ok=True)
            for ext in (".json", ".md"):
                with open(base + ext, encoding="utf-8") as handle:
                    _write_private(os.path.join(copy_dir, os.path.basename(base) + ext), handle.read())
        self._display.display("gpufleet change record: %s.json and .md" % base)


def _claim(outdir, stamp, playbook):
    """The record's path without extension, STAMP-PLAYBOOK, or STAMP.N-PLAYBOOK when runs finish in the same second
    (each keeps its own record; the name is claimed with O_EXCL, so concurrent runs cannot take the same one)."""
    for n in range(1, 1000):
        base = os.path.join(outdir, "%s-%s" % (stamp if n == 1 else "%s.%d" % (stamp, n), playbook))
        try:
            os.close(os.open(base + ".json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            continue
        return base
    raise OSError("change record: %s holds 999 records of %s from %s; clear it" % (outdir, playbook, stamp))


def _write_private(path, text):
    """Write a record readable by its owner only (0600), whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _cell(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def soak_lines(entries):
    """Each control-plane host's soak: its signals after the move, with the reading before and the peers'."""
    if not entries:
        return ["- no control-plane host soaked by this run"]
    lines = []
    for entry in entries:
        after = entry.get("reading") or {}
        before = entry.get("before") or {}
        peers = entry.get("peers") or {}
        lines.append("- %s: **%s** over %s s (peers %s)" % (
            _cell(entry["host"]), "passed" if entry["passed"] else "FAILED", after.get("seconds", "-"),
            ", ".join(sorted(peers)) or "none"))
        for signal in signals.SIGNALS:
            lines.append("  - %s: %s after, %s before, peers %s" % (
                signal, _cell(after.get(signal)), _cell(before.get(signal)) if before else "not read",
                ", ".join(_cell(peers[name].get(signal)) for name in sorted(peers)) or "-"))
    return lines


def kubelet_config_lines(entries):
    """Per pool, each kubelet setting the upgrade changed (the running /configz before and after), with the nodes
    it changed on."""
    if not entries:
        return ["- not compared by this run (the node gate compares a pool's nodes when its baseline names kubelet "
                "settings)"]
    pools = {}
    for entry in entries:
        per_key = pools.setdefault(entry["pool"], {"nodes": set(), "keys": {}})
        per_key["nodes"].add(entry["node"])
        for key, change in sorted(entry["changes"].items()):
            text = "%s -> %s" % (json.dumps((change or {}).get("before")), json.dumps((change or {}).get("after")))
            per_key["keys"].setdefault(key, {}).setdefault(text, set()).add(entry["node"])
    lines = []
    for pool, seen in sorted(pools.items()):
        verdict = "no setting changed" if not seen["keys"] else "changed:"
        lines.append("- %s (%d node(s) compared): %s" % (_cell(pool), len(seen["nodes"]), verdict))
        for key, texts in sorted(seen["keys"].items()):
            for text, nodes in sorted(texts.items()):
                lines.append("  - `%s`: %s on %s" % (_cell(key), _cell(text), ", ".join(sorted(nodes))))
    return lines


def markdown(rec):
    lines = ["# Change record: %s" % rec["playbook"], "",
             "- Objective: %s" % (rec["objective"] or "(not given: set gpufleet_run_objective or gpufleet_objective)"),
             "- Outcome: **%s**" % rec["outcome"],
             "- Operator: %s; started %s; finished %s (%.0f s)" % (
                 rec["operator"], rec["started"], rec["finished"], rec["duration_s"]),
             "- Cell: %s; run id %s" % (rec.get("cell") or "-", rec.get("run_id") or "-"),
             "- Target version: %s" % (rec["target_version"] or "-")]
    diff = rec["version_diff"]
    if diff:
        lines.append("- Version diff: %s -> %s (control plane: %s)" % (
            diff["from"], diff["to"], " -> ".join(diff.get("control_plane_path") or []) or "no change"))
    lines.append("- Canary scope: %s" % (", ".join(rec["canary_scope"]) or "none"))
    lines += ["", "## Waves", "", "| play | wave | canary | host | ok | changed | failed | unreachable | seconds |",
              "|---|---|---|---|---|---|---|---|---|"]
    for play in rec["plays"]:
        for host, e in sorted(play["hosts"].items()):
            lines.append("| %s | %s | %s | %s | %d | %d | %d | %d | %.1f |" % (
                _cell(play["name"]), _cell(e.get("wave") or play["wave"]), "yes" if host in rec["canary_scope"] else "",
                host, e["ok"], e["changed"],
                e["failed"], e["unreachable"], e["seconds"]))
    lines += ["", "## Break glass", ""]
    lines += ["- %s %s by %s: %s%s%s%s" % (
        e["time"], e["event"], e["operator"], _cell(e["action"]),
        (" (%s)" % _cell(e["confirmation"])) if e.get("confirmation") else "",
        (" on %s" % ", ".join(e["nodes"])) if e.get("nodes") else "",
        (" - %s" % _cell(e.get("detail") or e.get("effect"))) if (e.get("detail") or e.get("effect")) else "")
        for e in rec["break_glass"]] or ["- none"]
    lines += ["", "## Opt-outs of the baselines", ""]
    lines += ["- %s: %s" % (e["host"], _cell(e["opt_out"])) for e in rec["opt_outs"]] or ["- none"]
    lines += ["", "## Training gangs", ""]
    lines += ["- resumed: %s" % _cell(g) for g in rec["gangs"]["resumed"]]
    lines += ["- stays stopped: %s" % _cell(g["why"]) for g in rec["gangs"]["stay_stopped"]]
    if not rec["gangs"]["resumed"] and not rec["gangs"]["stay_stopped"]:
        lines.append("- none stopped")
    lines += ["", "## Security", ""]
    for entry in rec.get("security") or []:
        lines.append("### %s%s" % (_cell(entry["task"]), " (wave %s)" % _cell(entry["wave"]) if entry["wave"] else ""))
        lines += ["- Pod Security pinned by this run: %s -> %s" % kv for kv in sorted(entry["psa_changes"].items())]
        base = entry["baseline"]
        if base:
            lines.append("- baseline of %s taken %s" % (base.get("target"), base.get("taken")))
        lines += [_cell(line) for line in security.markdown_lines(entry["report"])]
    if not rec.get("security"):
        lines.append("- not checked by this run")
    lines += ["", "## Canary workloads", ""]
    for run in rec.get("canary_workloads") or []:
        if run.get("busbw"):
            figures = "bus bandwidth %s" % ", ".join("%s: %s GB/s" % (k, "-" if v is None else "%.1f" % v)
                                                     for k, v in sorted(run["busbw"].items()))
        elif run.get("latency"):
            figures = "p99 %.1f ms, p50 %.1f ms, %d errors of %d requests" % tuple(
                run["latency"].get(k, 0) for k in ("p99_ms", "p50_ms", "errors", "requests"))
        else:
            figures = "no result"
        lines.append("- %s %s on %s (pool %s): **%s** in %.0f s - %s%s" % (
            run.get("workload"), run.get("name"), ",".join(run.get("nodes") or []), run.get("pool"),
            "passed" if run.get("passed") else "FAILED", run.get("seconds") or 0, _cell(figures),
            (" - %s" % _cell(run["note"])) if run.get("note") else ""))
    if not rec.get("canary_workloads"):
        lines.append("- none ran")
    cycle = rec.get("disruptions") or {}
    lines += ["", "## Node disruptions this cycle", ""]
    if cycle.get("nodes"):
        lines.append("Drains per node on the way to %s (one per target the node was taken out of service for):" %
                     _cell(cycle.get("cycle") or "-"))
        lines.append("")
        lines += ["- %s: %d (%s)" % (node, len(targets), ", ".join(targets) or "not drained")
                  for node, targets in sorted(cycle["nodes"].items())]
    else:
        lines.append("- not counted by this run")
    lines += ["", "## Control-plane soak", ""] + soak_lines(rec.get("control_plane_soak") or [])
    lines += ["", "## Kubelet configuration, per pool", ""] + kubelet_config_lines(rec.get("kubelet_config") or [])
    lines += ["", "## Gates", "", "| host | check | subject | measured | baseline | result |",
              "|---|---|---|---|---|---|"]
    for gate in rec["gates"]:
        result = ("OPT-OUT" if gate["severity"] == "opt-out" else "pass") if gate["passed"] else (
            "WARN" if gate["severity"] == "warn" else "**FAIL**")
        lines.append("| %s | %s | %s | %s | %s | %s |" % tuple(_cell(v) for v in (
            gate["host"], gate["check"], gate["subject"], gate["measured"], gate["baseline"], result)))
    lines += ["", "## Failures", ""]
    lines += ["- %s / %s (%s): %s%s" % (f["host"], _cell(f["task"]), f["status"], _cell(f["message"]),
                                        " (ignored)" if f["ignored"] else "") for f in rec["failures"]] or ["- none"]
    lines += ["", "## Rollback triggers", ""] + ["- %s" % t for t in rec["rollback_triggers"]] + [""]
    return "\n".join(lines)
