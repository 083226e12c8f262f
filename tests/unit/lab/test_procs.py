"""Lab process tracking: a pid file only counts while its pid still runs the program the lab started."""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "lab"))

from gpufleet_lab import procs


def test_start_track_stop(tmp_path):
    pid = procs.start(tmp_path, "sleeper", ["/bin/sleep", "30"])
    assert procs.pid_of(tmp_path, "sleeper") == pid
    assert procs.start(tmp_path, "sleeper", ["/bin/sleep", "30"]) == pid  # idempotent
    assert procs.running(tmp_path) == ["sleeper"]
    assert procs.stop(tmp_path, "sleeper")
    assert procs.pid_of(tmp_path, "sleeper") is None and procs.running(tmp_path) == []


def test_recycled_pid_is_not_ours(tmp_path):
    (tmp_path / "pids").mkdir()
    # a stale pid file whose pid now belongs to another process (here: this one, started at another time) must
    # not count, nor be signalled
    import os
    (tmp_path / "pids" / "etcd.pid").write_text("%d 1" % os.getpid())
    assert procs.pid_of(tmp_path, "etcd") is None
    assert procs.stop(tmp_path, "etcd") is False
