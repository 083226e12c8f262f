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


def test_stop_returns_once_the_last_thread_is_gone_and_its_port_is_free(tmp_path):
    """A process whose first thread has exited is a zombie while its other threads still run and hold its sockets
    (an etcd member SIGKILLed mid-shutdown): stop waits for them, so the next process can bind the same port."""
    import socket
    import time
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "leader_exits_first.py"
    script.write_text(  # SIGTERM ignored; the first thread exits after 0.5 s, another holds the socket 2 s more
        "import ctypes, signal, socket, threading, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('127.0.0.1', %d)); s.listen()\n"
        "threading.Thread(target=time.sleep, args=(2.5,)).start()\n"
        "time.sleep(0.5)\n"
        "ctypes.CDLL(None).pthread_exit(None)\n" % port)
    procs.start(tmp_path, "leader", [sys.executable, str(script)])
    time.sleep(0.3)
    assert procs.pid_of(tmp_path, "leader")
    began = time.time()
    assert procs.stop(tmp_path, "leader", timeout=8)
    assert time.time() - began > 1.5, "stop returned while a thread still held the socket"
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))  # free: the whole process is gone
