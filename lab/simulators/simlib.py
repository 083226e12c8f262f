"""Shared helpers for the lab simulators (SIMULATION). Installed at /usr/lib/gpufleet-sim/simlib.py."""
import json
import os
import subprocess
import sys
import time
import uuid

STATE_DIR = os.environ.get("GPUFLEET_SIM_STATE", "/var/lib/gpufleet-lab")
STATE = os.path.join(STATE_DIR, "state.json")
CLUSTER = os.path.join(STATE_DIR, "cluster", "state.json")
REQUESTS = os.path.join(STATE_DIR, "requests")
VERSIONS = os.environ.get("GPUFLEET_SIM_VERSIONS", "/usr/share/gpufleet-sim")


def host():
    return os.environ.get("GPUFLEET_SIM_HOST") or open("/etc/hostname").read().strip()


def load():
    try:
        with open(STATE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save(state):
    tmp = STATE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=2, sort_keys=True)
    os.replace(tmp, STATE)


def fault(name):
    return name in (load().get("faults") or {})


def gpu_count(state=None):
    """GPUs the tools see: the gpu-missing fault hides one (as after XID 94 until a reset)."""
    state = load() if state is None else state
    return int(state.get("gpus", 8)) - (1 if "gpu-missing" in (state.get("faults") or {}) else 0)


def cluster():
    with open(CLUSTER) as f:
        return json.load(f)


def installed(package_key):
    """Version recorded by an installed simulator package (e.g. 'kubeadm' -> 'v1.36.3'), or None."""
    try:
        with open(os.path.join(VERSIONS, package_key + ".version")) as f:
            return f.read().strip()
    except OSError:
        return None


def request(kind, timeout=240, **fields):
    """Ask the lab controller (outside the host) to act, e.g. report the kubelet version this host runs, and
    wait for its answer. Returns the answer dict; exits 1 with its error on failure."""
    os.makedirs(REQUESTS, exist_ok=True)
    rid = "%s-%s-%s" % (host(), kind, uuid.uuid4().hex[:8])
    body = dict(fields, kind=kind, host=host(), id=rid)
    path = os.path.join(REQUESTS, rid + ".json")
    with open(path + ".tmp", "w") as f:
        json.dump(body, f)
    os.replace(path + ".tmp", path)
    answer = os.path.join(REQUESTS, rid + ".done")
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(answer):
            with open(answer) as f:
                result = json.load(f)
            os.unlink(answer)
            if result.get("error"):
                sys.stderr.write("error: %s\n" % result["error"])
                sys.exit(1)
            return result
        time.sleep(0.2)
    sys.stderr.write("error: timed out after %ds waiting for the control plane (lab controller running?)\n" % timeout)
    sys.exit(1)


def notify(kind, **fields):
    """Tell the lab controller something without waiting for an answer (the pause request: the host is frozen
    before any answer could be read)."""
    os.makedirs(REQUESTS, exist_ok=True)
    rid = "%s-%s-%s" % (host(), kind, uuid.uuid4().hex[:8])
    path = os.path.join(REQUESTS, rid + ".json")
    with open(path + ".tmp", "w") as f:
        json.dump(dict(fields, kind=kind, host=host(), id=rid, answer=False), f)
    os.replace(path + ".tmp", path)
    return rid


def minor(version):
    parts = version.lstrip("v").split(".")
    return int(parts[0]), int(parts[1])


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, check=False)
