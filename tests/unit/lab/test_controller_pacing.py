"""The lab controller's training and canary pass: played when a watched object changes, no more often than
TRAINING_BUSY_SECONDS, at least every TRAINING_SECONDS, every TRAINING_BUSY_SECONDS while a checkpoint is pending;
its watches start again after a failure, say so once, and never spin (lab/gpufleet_lab/controller.py)."""
from __future__ import annotations

import asyncio
import itertools
import pathlib
import sys
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "lab"))

from gpufleet_lab import controller


# Bounds are one-sided where the machine's load could only make a time longer (CI runs these beside the lab).
@pytest.fixture
def pacing(monkeypatch):
    def set_to(idle, busy):
        monkeypatch.setattr(controller, "TRAINING_SECONDS", idle)
        monkeypatch.setattr(controller, "TRAINING_BUSY_SECONDS", busy)
    return set_to


def run_paced(seconds, busy=lambda: False, wakes=()):
    """Run controller.paced for ``seconds`` with wake-ups at the times in ``wakes``; the times of its passes."""
    passes = []

    async def main():
        wake = asyncio.Event()
        began = time.monotonic()
        task = asyncio.create_task(controller.paced(lambda: passes.append(time.monotonic() - began), wake, busy))
        for at in wakes:
            await asyncio.sleep(max(0.0, at - (time.monotonic() - began)))
            wake.set()
        await asyncio.sleep(max(0.0, seconds - (time.monotonic() - began)))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    return passes


def test_idle_passes_come_every_training_seconds_and_no_sooner(pacing):
    pacing(0.4, 0.05)
    passes = run_paced(1.0)
    assert 2 <= len(passes) <= 3 and passes[0] < 0.3, passes  # at once, then ~0.4 and ~0.8
    assert all(b - a >= 0.39 for a, b in itertools.pairwise(passes)), passes


def test_a_wake_up_plays_at_once_and_a_burst_no_more_often_than_the_busy_interval(pacing):
    pacing(5.0, 0.1)  # an idle pass would come only after 5 s
    passes = run_paced(1.2, wakes=[0.3] + [0.6 + i * 0.01 for i in range(30)])
    assert any(0.3 <= p < 0.55 for p in passes), passes  # the first wake-up plays before the next idle pass
    assert all(b - a >= 0.099 for a, b in itertools.pairwise(passes)), passes  # never closer than the busy interval
    burst = [p for p in passes if p >= 0.6]
    assert 1 <= len(burst) <= 6, passes  # thirty wake-ups in 0.3 s: a pass each 0.1 s at the most


def test_a_pending_checkpoint_is_played_every_busy_interval_without_a_change(pacing):
    pacing(5.0, 0.1)
    passes = run_paced(0.6, busy=lambda: True)
    assert len(passes) >= 3, passes  # idle, there would have been one


def test_a_watch_that_fails_wakes_the_pass_says_so_once_and_does_not_spin(monkeypatch, capsys):
    calls = []

    class Broken:
        def stream(self, func, *args, **kwargs):
            calls.append(time.monotonic())
            raise ConnectionRefusedError("the apiserver is restarting")

    import kubernetes.watch
    monkeypatch.setattr(kubernetes.watch, "Watch", Broken)
    monkeypatch.setattr(controller.kube, "api", lambda cfg, user="admin": None)
    monkeypatch.setattr(controller, "TRAINING_WATCHED", (("Pods", "", "v1", "pods"),))
    monkeypatch.setattr(controller, "WATCH_RETRY_SECONDS", 0.1)
    woken, stop = threading.Event(), threading.Event()
    (thread,) = controller.watch_training(object(), woken.set, stop)
    try:
        assert woken.wait(5), "a failed watch did not wake the pass"
        time.sleep(0.6)
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    assert 2 <= len(calls) <= 8, calls  # about one try per WATCH_RETRY_SECONDS, not a spin
    said = capsys.readouterr().out
    assert said.count("the watch of Pods failed (ConnectionRefusedError: the apiserver is restarting)") == 1, said


def test_a_pass_whose_simulators_cannot_be_made_yet_is_retried_not_fatal(monkeypatch, capsys):
    # A cold machine's first `lab up`: the controller's first pass ran before any apiserver answered, and making the
    # simulators (an API discovery) raised out of the pass and ended the controller.
    monkeypatch.setattr(controller.time, "sleep", lambda seconds: None)
    made, reconciled, sims, said = [], [], [], set()

    class Sim:
        def reconcile(self):
            reconciled.append(1)

    def make():
        made.append(1)
        if len(made) <= 3:
            raise ConnectionResetError("the load balancer has no apiserver yet")
        return [Sim(), Sim()]

    for _ in range(3):
        controller.guarded_pass(sims, make, said)  # must not raise
    assert sims == [] and not reconciled
    assert capsys.readouterr().err.count("ConnectionResetError: the load balancer has no apiserver yet") == 1  # once
    controller.guarded_pass(sims, make, said)
    controller.guarded_pass(sims, make, said)
    assert len(made) == 4 and len(sims) == 2 and len(reconciled) == 4 and not said  # made once more, then kept


def test_the_training_loop_survives_a_cell_that_does_not_answer_yet(monkeypatch):
    # the loop as the controller runs it: its simulators' making fails twice, the loop goes on and then reconciles
    from gpufleet_lab import training, workloads
    monkeypatch.setattr(controller, "TRAINING_SECONDS", 0.05)
    monkeypatch.setattr(controller, "TRAINING_BUSY_SECONDS", 0.01)
    monkeypatch.setattr(controller.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(controller, "watch_training", lambda cfg, wake: [])
    made, reconciled = [], []

    class Sim:
        def __init__(self, cfg):
            made.append(1)
            if len(made) <= 2:
                raise ConnectionResetError("no apiserver yet")

        def reconcile(self):
            reconciled.append(1)
    monkeypatch.setattr(training, "Training", Sim)
    monkeypatch.setattr(workloads, "Workloads", Sim)

    async def main():
        task = asyncio.create_task(controller.training_loop(object()))
        await asyncio.sleep(0.5)
        assert not task.done(), task.exception()
        task.cancel()
    asyncio.run(main())
    assert reconciled


def test_a_request_that_is_not_an_object_is_answered_with_an_error_and_the_loop_goes_on(tmp_path):
    reqdir = tmp_path / "requests"
    reqdir.mkdir()
    for name, text, said in (("r1", "[1, 2]", "not list"), ("r2", '{"kind": "kub', "not text that is not JSON")):
        (reqdir / (name + ".json")).write_text(text)
        asyncio.run(controller.answer_request(object(), reqdir, reqdir / (name + ".json")))
        assert not (reqdir / (name + ".json")).exists()
        assert "a request is a JSON object, %s" % said in (reqdir / (name + ".done")).read_text()
