"""Background processes of the lab: started detached (they outlive `lab up`), tracked by pid files."""
from __future__ import annotations

import ctypes
import os
import pathlib
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from typing import Any, Callable, Dict, List, Optional


class LabError(Exception):
    """A lab step failed; the message says which and where its log is."""


def _pidfile(run: pathlib.Path, name: str) -> pathlib.Path:
    return run / "pids" / (name + ".pid")


def log_path(run: pathlib.Path, name: str) -> pathlib.Path:
    return run / "logs" / (name + ".log")


def _starttime(pid: int) -> Optional[str]:
    """When the process started (clock ticks since boot, /proc/PID/stat field 22): set at fork, so it tells a
    recycled pid from ours even in the moment before our process has exec'd its program."""
    try:
        fields = pathlib.Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":  # a zombie does not count
        return None
    return fields[19]


def pid_of(run: pathlib.Path, name: str) -> Optional[int]:
    """The pid of the lab process NAME if it is alive and is still the process the lab started (a pid file left
    behind after a reboot may name an unrelated process by now)."""
    try:
        pid_text, _, started = _pidfile(run, name).read_text().strip().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    now = _starttime(pid)
    if now is None or (started and started != now):
        return None
    return pid


def cmdline(pid: int) -> List[str]:
    """The command line process ``pid`` runs ([] when it is gone)."""
    try:
        raw = pathlib.Path("/proc/%d/cmdline" % pid).read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0")[:-1]


def start(run: pathlib.Path, name: str, argv: List[str], env: Optional[Dict[str, str]] = None,
          netns: str = "") -> int:
    """Start ``argv`` in its own session, output to logs/NAME.log; in network namespace ``netns`` when given
    (`ip netns` name: nsenter joins it and execs ``argv``, so once it has, the pid and /proc/PID/cmdline are
    ``argv``'s). Returns the pid (an existing one if running). One start of a name at a time, across processes
    (the lab controller's static-pod workers and `lab up` both start components)."""
    import fcntl
    (run / "pids").mkdir(parents=True, exist_ok=True)
    (run / "logs").mkdir(parents=True, exist_ok=True)
    with open(run / "pids" / (name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        existing = pid_of(run, name)
        if existing:
            return existing
        if netns:
            if not os.path.exists(os.path.join(NETNS_DIR, netns)):
                raise LabError("%s: network namespace %s is missing (`bin/lab up` makes it)" % (name, netns))
            argv = ["nsenter", "--net=%s/%s" % (NETNS_DIR, netns), "--"] + argv
        with open(log_path(run, name), "ab") as log:
            try:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, env=dict(os.environ, **(env or {})), close_fds=True)
            except OSError as exc:
                raise LabError("%s: cannot start %s: %s" % (name, argv[0], exc)) from exc
        _pidfile(run, name).write_text("%d %s" % (proc.pid, _starttime(proc.pid) or ""))
        return proc.pid


def _threads(pid: int, started: Optional[str]) -> int:
    """How many threads of the process ``pid`` that started at ``started`` are left (0: gone, or the pid is another
    process's now). A process whose first thread has exited shows as a zombie while its other threads still exit
    and still hold its sockets: a member stopped that way still had its peer port when the next one bound it."""
    try:
        fields = pathlib.Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
        if fields[19] != started:
            return 0
        return len(os.listdir("/proc/%d/task" % pid))
    except (OSError, IndexError):
        return 0


STOP_SECONDS = 15.0  # how long a stop waits after SIGTERM before SIGKILL, unless its caller gives another


def stop(run: pathlib.Path, name: str, timeout: float = STOP_SECONDS) -> bool:
    """Stop NAME: SIGTERM to its process group, SIGKILL after ``timeout``; returns once its last thread is gone (its
    ports free), or False when it was not running."""
    pid = pid_of(run, name)
    if not pid:
        _pidfile(run, name).unlink(missing_ok=True)
        return False
    started = _starttime(pid)
    try:
        os.killpg(pid, signal.SIGTERM)
    except OSError:
        pass
    deadline = time.time() + timeout
    while time.time() < deadline and pid_of(run, name):
        time.sleep(0.1)
    if pid_of(run, name):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        deadline = time.time() + 10  # gone before anything restarts on its port
        while time.time() < deadline and pid_of(run, name):
            time.sleep(0.1)
    deadline = time.time() + 10
    while time.time() < deadline and _threads(pid, started) > 1:  # a zombie's other threads still exiting
        time.sleep(0.05)
    _pidfile(run, name).unlink(missing_ok=True)
    return True


def running(run: pathlib.Path) -> List[str]:
    pids = run / "pids"
    if not pids.is_dir():
        return []
    return sorted(p.stem for p in pids.glob("*.pid") if pid_of(run, p.stem))


def tail(path: pathlib.Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _poll(url: str, ctx: ssl.SSLContext, run: pathlib.Path, name: str, timeout: float,
          cancel: Optional[Callable[[], bool]] = None) -> None:
    """Wait until ``url`` answers 200; fail with the process log when the process exits or time runs out, or at
    once when ``cancel()`` says so. Never through a proxy (the lab's addresses are its own)."""
    deadline = time.time() + timeout
    last = ""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
    while time.time() < deadline:
        if not pid_of(run, name):
            raise LabError("%s exited while starting; last lines of %s:\n%s" % (
                name, log_path(run, name), tail(log_path(run, name))))
        if cancel is not None and cancel():
            raise LabError("%s: its manifest changed while it started" % name)
        try:
            with opener.open(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except Exception as exc:  # any failure means "not yet"
            last = str(exc)
        time.sleep(0.5)
    raise LabError("%s did not become healthy at %s within %ds (%s); last lines of %s:\n%s" % (
        name, url, timeout, last, log_path(run, name), tail(log_path(run, name))))


def wait_https(url: str, pki: pathlib.Path, run: pathlib.Path, name: str, timeout: float = 120.0,
               client: str = "admin") -> None:
    """Wait for ``url`` with the lab's CA and a client certificate from the lab's PKI."""
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / (client + ".crt")), str(pki / (client + ".key")))
    _poll(url, ctx, run, name, timeout)


def wait_port(run: pathlib.Path, name: str, port: int, timeout: float = 60.0) -> None:
    """Wait until 127.0.0.1:``port`` accepts connections (a server with no health endpoint)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not pid_of(run, name):
            raise LabError("%s exited while starting; last lines of %s:\n%s" % (
                name, log_path(run, name), tail(log_path(run, name))))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            time.sleep(0.3)
    raise LabError("%s did not listen on 127.0.0.1:%d within %ds; last lines of %s:\n%s" % (
        name, port, timeout, log_path(run, name), tail(log_path(run, name))))


def wait_probe(url: str, run: pathlib.Path, name: str, timeout: float, netns: str = "",
               cancel: Optional[Callable[[], bool]] = None) -> None:
    """Wait until ``url`` answers 200 from inside network namespace ``netns``, as a kubelet probes a static pod
    (HTTPS unverified, as a kubelet's probe is)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    in_netns(netns or None, _poll, url, ctx, run, name, timeout, cancel)


CLONE_NEWNET = 0x40000000  # <sched.h>: setns(2)'s namespace type for a network namespace
NETNS_DIR = "/run/netns"  # where `ip netns add` mounts a named namespace
_LIBC = ctypes.CDLL(None, use_errno=True)  # setns(2)


def in_netns(namespace: Optional[str], fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with its sockets in network namespace ``namespace`` (as a kubelet's probe runs in its pod's;
    None: here). setns(2) moves only the calling thread, so it runs on a thread of its own that ends with it
    (os.setns is Python 3.12's; the lab runs 3.11)."""
    if not namespace:
        return fn(*args)
    result: dict = {}

    def run() -> None:
        try:
            try:
                fd = os.open(os.path.join(NETNS_DIR, namespace), os.O_RDONLY)
            except OSError as exc:
                raise LabError("network namespace %s: %s (`bin/lab up` makes it)" % (namespace, exc)) from exc
            try:
                if _LIBC.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise LabError("setns into network namespace %s: %s" % (namespace, os.strerror(err)))
            finally:
                os.close(fd)
            result["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller's thread
            result["error"] = exc
    thread = threading.Thread(target=run, name="netns-" + namespace, daemon=True)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")
