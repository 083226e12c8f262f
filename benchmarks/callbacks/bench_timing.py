# Copyright: gpufleet contributors
# Apache License 2.0
"""Benchmark-only callback (not part of the collection): one JSON line per task result per host, for
benchmarks/bench_wave.py. Each line names the play, the role (the stage), the task, the host, its wave, the task's
wall time for that host (from the task's start to its result), the time the tool itself reported where the module
reports one (command/shell/raw ``delta``, wait_for/wait_for_connection ``elapsed``) and, for a task retried with
``until``, its attempts and delay - so that the controller's share of a stage can be told from the tools'. Enable
with ANSIBLE_CALLBACK_PLUGINS=benchmarks/callbacks, ANSIBLE_CALLBACKS_ENABLED=bench_timing and
GPUFLEET_BENCH_TIMING=FILE."""
from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: bench_timing
type: aggregate
short_description: per-host task timings for benchmarks/bench_wave.py (benchmark only)
description: [One JSON line per task result per host, written to GPUFLEET_BENCH_TIMING.]
"""


def tool_seconds(res):
    """The seconds the tool itself took, from what the module returned (None where it reports none)."""
    delta = res.get("delta")
    if isinstance(delta, str) and delta.count(":") == 2:
        h, m, s = delta.split(":")
        try:
            return int(h) * 3600 + int(m) * 60 + float(s)
        except ValueError:
            return None
    elapsed = res.get("elapsed")
    if isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool):
        return float(elapsed)
    return None


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_timing"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display)
        self._path = os.environ.get("GPUFLEET_BENCH_TIMING")
        self._play = ""
        self._task_started = {}

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._task_started[task._uuid] = time.time()

    def v2_playbook_on_handler_task_start(self, task):
        self._task_started[task._uuid] = time.time()

    def _write(self, result, status):
        if not self._path:
            return
        task = result._task
        now = time.time()
        started = self._task_started.get(task._uuid, now)
        res = result._result if isinstance(result._result, dict) else {}
        role = task._role.get_name(include_role_fqcn=False) if task._role else ""
        wave = (getattr(result._host, "vars", None) or {}).get("gpufleet_wave") or ""  # set by node_pool.yml's add_host
        line = {"play": self._play, "role": role, "task": task.get_name(), "action": task.action,
                "host": result._host.get_name(), "wave": str(wave), "status": status, "start": round(started, 3),
                "end": round(now, 3), "wall": round(now - started, 3), "tool": tool_seconds(res),
                # a task retried with until: the sleeps between its attempts were spent waiting on what it polls
                "attempts": res.get("attempts") if isinstance(res.get("attempts"), int) else None,
                "delay": float(task.delay or 0) if task.until else None}
        with open(self._path, "a") as handle:
            handle.write(json.dumps(line) + "\n")

    def v2_runner_on_ok(self, result):
        self._write(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._write(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._write(result, "unreachable")

    def v2_runner_on_skipped(self, result):
        self._write(result, "skipped")
