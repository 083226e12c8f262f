#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_ledger
short_description: Keep a fleet run's ledger, say its next step, and halt it on a condition
version_added: 0.4.0
description:
  - The fleet ledger is a JSON file per fleet (per cell its ring, state, version, reason and change record; per
    ring its soak; the halt that stopped the fleet). It is read back on every run, checked against the plan, and
    written atomically after each change. Every call returns the ledger and the next step
    (C(upgrade), C(wait), C(soak), C(promote), C(stop) or C(complete)).
  - C(read) also refuses, before anything runs, a cell whose path has a hop without a release, and puts a cell
    left C(upgrading) by a run that ended mid-wave back to pending (its wave resumes from its per-node ledger).
  - One fleet run at a time per ledger. C(lock) takes the ledger's lock (the file C(PATH.lock), created only if
    there is none) and returns its id; every call that writes the ledger must give it as O(lock), and is refused
    when the lock is not that run's. C(unlock) releases it. Another run's lock is refused, naming who took it and
    when; one left by a run that was killed is broken only by C(lock) with the typed confirmation
    C(break lock ID of fleet FLEET), and the break is kept in the ledger's C(lock_breaks). A lock whose run is
    still alive on this controller (its ansible-playbook process, by pid and start time) is not broken.
  - Taking, breaking and releasing the lock are atomic (O_EXCL to create it; a rename aside to break or release
    it, so of two runs that break or release at once one wins, and neither removes a lock it does not hold).
  - Each readings file is checked as it is read - counts whole numbers 0 or more, fractions within [0, 1], latencies
    and rates finite and 0 or more, C(jobset_restarts) with its per-JobSet C(jobset_restart_counts) adding up to it,
    the GPU fraction with breakdowns that give it; a reading that does not hold together is not measured, naming
    why, so it halts (never a pass, never a crash).
  - C(before) refuses a batch whose cells were not read whole before their upgrade, naming each gap, and drops
    those readings so the next run takes them again.
  - C(judge) compares the readings of O(cells) - by default, for a soak, every cell of O(ring) with a reading
    before its upgrade, and never none - (files C(CELL-TARGET-before.json) and C(CELL-TARGET-after.json) in
    O(readings_dir), as C(playbooks/fleet_readings.yml) writes them) with the fleet policy's thresholds. A
    condition that holds (the GPU condition also on any node above its pool's GPUs per node), or a reading that is
    missing or refused, before or after, halts the fleet - the halt is written to the ledger with
    the cell, the condition and the readings, and the task fails naming them.
  - C(resume) is C(judge) for a halted fleet's cells - clean readings clear the halt (the ring's soak starts
    over), otherwise the fleet stays halted.
  - C(retry) puts a failed cell back to pending, only with the typed confirmation C(retry CELL in fleet FLEET).
options:
  plan:
    description: The fleet plan (M(gpufleet.upgrade.fleet_plan)'s C(plan)).
    type: dict
    required: true
  path:
    description: The ledger file (created on the first run).
    type: path
    required: true
  action:
    description: What to do.
    type: str
    choices: [lock, unlock, read, before, record, soak, judge, resume, retry]
    default: read
  lock:
    description: The id C(lock) returned, for every call that writes the ledger and for C(unlock).
    type: str
  holder:
    description: For C(lock), who runs it, kept in the lock after C(USER@HOST) (playbooks/fleet.yml gives the AWX
      job id and its launcher); another run's refusal names it.
    type: str
  cell:
    description: The cell, for C(record) and C(retry) (for C(retry) the one O(confirmation) names by default).
    type: str
  cells:
    description: The cells to judge, for C(judge); the batch whose readings before are checked, for C(before).
    type: list
    elements: str
    default: []
  ring:
    description: The ring, for C(soak) and C(judge).
    type: str
  state:
    description: The cell's new state, for C(record).
    type: str
    choices: [pending, upgrading, done, failed]
  version:
    description: The cell's control-plane release after the change, for C(record).
    type: str
    default: ""
  reason:
    description: Why, for C(record) (a failure's cause).
    type: str
    default: ""
  change_record:
    description: Where the cell's run left its log or change record, for C(record).
    type: str
  done:
    description: For C(soak), the soak ended clean (else it starts now).
    type: bool
    default: false
  readings_dir:
    description: Where the cells' readings files are, for C(judge) and C(resume); with it every call whose next
      step is a soak returns the cells that soak judges (C(soak_cells)).
    type: path
  confirmation:
    description: For C(retry), exactly C(retry CELL in fleet FLEET); for C(lock), exactly
      C(break lock ID of fleet FLEET) to break a lock left by a run that is gone.
    type: str
attributes:
  check_mode:
    support: full
    description: Computes the change and the next step; writes nothing.
  diff_mode:
    support: none
    description: Returns no diff.
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Take the fleet's lock (one run at a time per ledger)
  gpufleet.upgrade.fleet_ledger:
    plan: "{{ __fleet }}"
    path: out/fleet/prod/ledger.json
    action: lock
  register: __lock

- name: Read the fleet ledger back and say what comes next
  gpufleet.upgrade.fleet_ledger:
    plan: "{{ __fleet }}"  # the registered result of gpufleet.upgrade.fleet_plan
    path: out/fleet/prod/ledger.json
  register: __ledger

- name: Record a cell's wave as done
  gpufleet.upgrade.fleet_ledger:
    plan: "{{ __fleet }}"
    path: out/fleet/prod/ledger.json
    action: record
    cell: canary-1
    state: done
    version: v1.36.3
    lock: "{{ __lock.lock.id }}"
"""

RETURN = r"""
lock:
  description: The run's lock (C(fleet), C(id), C(holder), C(since), C(host), C(pid), C(started)).
  returned: action is lock
  type: dict
held_by:
  description: When C(lock) is refused, the lock another run holds (C(id), C(holder), C(since)).
  returned: when the lock is held by another run
  type: dict
ansible_facts:
  description: When C(lock) broke another run's lock, C(fleet_ledger_break_glass_record) (the change record lists
    it under Break glass).
  returned: when a lock was broken
  type: dict
ledger:
  description: The ledger after the action.
  returned: always, except for unlock
  type: dict
next:
  description: The next step (C(action), C(ring), C(cells), C(remaining), C(message)); see fleet_run.next_step.
  returned: always
  type: dict
hops:
  description: Per cell still to move, the releases its waves take (C(read)).
  returned: action is read
  type: dict
soak_cells:
  description: When the next step is a soak and O(readings_dir) is given, the cells it reads and judges.
  returned: sometimes
  type: list
judged:
  description: The cells C(judge) or C(resume) judged.
  returned: action is judge or resume
  type: list
unread:
  description: Per cell of the batch not read whole before its upgrade, why (C(before) fails with it).
  returned: action is before, when it fails
  type: dict
halts:
  description: The halt conditions found (C(cell), C(condition), C(before), C(after), C(threshold), C(message)).
  returned: action is judge or resume
  type: list
"""

import datetime
import getpass
import json
import os
import socket
import tempfile
import uuid

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_run
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, PolicyError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def _read_json(path):
    """The JSON document at ``path``, None when there is none; ValueError when it is not JSON. (Opened at once, not
    checked first: a lock removed between a check and the open would raise.)"""
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def _write_json(path, doc, prefix, indent=None):
    """Write ``doc`` to ``path`` atomically (a temporary file beside it, then renamed over it), mode 0644."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix)
    with os.fdopen(fd, "w") as handle:
        json.dump(doc, handle, indent=indent, sort_keys=True)
        handle.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _load(path):
    try:
        return _read_json(path)
    except ValueError as exc:
        raise InputError("fleet ledger %s is not JSON (%s); restore it from the run's copy, or move it aside to start "
                         "the fleet over" % (path, exc)) from None


def _save(path, ledger):
    _write_json(path, ledger, ".ledger-", indent=1)


def _load_lock(path):
    """The lock at ``path`` (None when there is none); a file that is not a JSON object reads as a lock held by
    "unknown", so it is never taken as free (breaking it needs the typed confirmation)."""
    try:
        found = _read_json(path)
        if found is None or isinstance(found, dict):
            return found
    except ValueError:
        pass
    return {"id": "unreadable", "holder": "unknown (%s is not a JSON object)" % path, "since": "unknown"}


def _process_start(pid):
    """The start time of process ``pid`` (clock ticks since boot, /proc/PID/stat field 22), None when it is gone;
    with the pid it names one process, even after its pid is reused."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _run_process():
    """The pid and start of this run's ansible-playbook: the topmost ancestor whose command line names it (its
    workers are forks of it, with its command line); (None, None) when there is none (not run by a playbook)."""
    found, pid = (None, None), os.getppid()
    while pid > 1:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                argv = handle.read().split(b"\0")
            with open("/proc/%d/stat" % pid) as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if any(os.path.basename(a) == b"ansible-playbook" for a in argv[:2]):
            found = (pid, _process_start(pid))
        pid = parent
    return found


def _alive(lock):
    """Whether the run holding ``lock`` is alive on this controller (same host, its pid with its start time)."""
    pid, started = lock.get("pid"), lock.get("started")
    if lock.get("host") != socket.gethostname() or not isinstance(pid, int) or started is None:
        return False
    return _process_start(pid) == started


def _claim(path, lock_id):
    """Move the lock at ``path`` aside if it is ``lock_id``'s, atomically: (the lock found, whether it was that
    one and is now removed); (None, False) when there is none. Of two runs that claim at once, one's rename wins;
    a lock that is another's is put back (unless a new one was made meanwhile: its run stops at its next write)."""
    aside = "%s.claim-%s" % (path, uuid.uuid4().hex[:12])
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return None, False
    found = _load_lock(aside)
    if found.get("id") == lock_id:
        os.remove(aside)
        return found, True
    try:
        os.link(aside, path)
    except FileExistsError:
        pass
    os.remove(aside)
    return found, False


def _create(path, mine, fleet):
    """Create the lock file only if there is none (O_EXCL): of two runs that start at once one gets it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        held = _load_lock(path) or {}
        raise PolicyError(fleet_run.held_elsewhere(fleet, held), held_by=held) from None
    with os.fdopen(fd, "w") as handle:
        json.dump(mine, handle)


def _unlock(module, plan, path):
    """C(unlock): release this run's lock; a lock that is another's (this run's was broken) stays."""
    p, fleet = module.params, plan["fleet"]
    if module.check_mode:
        fleet_run.check_holds(fleet, _load_lock(path), p["lock"])
        return {"changed": True, "msg": "fleet %s: would release lock %s" % (fleet, p["lock"])}
    found, mine = _claim(path, p["lock"])
    if not mine:
        fleet_run.check_holds(fleet, found, p["lock"])  # raises: gone, or another run's
    return {"changed": True, "msg": "fleet %s: lock %s released" % (fleet, p["lock"])}


def _lock(module, plan, ledger, path, now):
    """C(lock): take the ledger's lock, or break a dead run's under the typed confirmation."""
    p, fleet = module.params, plan["fleet"]
    held = _load_lock(path)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a container's uid with no passwd entry and no USER
        user = "uid %d" % os.getuid()
    pid, started = _run_process()
    holder = "%s@%s%s" % (user, socket.gethostname(), " (%s)" % p["holder"] if p["holder"] else "")
    mine = fleet_run.lock_record(fleet, uuid.uuid4().hex[:12], holder, now, socket.gethostname(), pid, started)
    if held and not p["confirmation"]:
        raise PolicyError(fleet_run.held_elsewhere(fleet, held), held_by=held)
    broken = fleet_run.check_break(fleet, held, p["confirmation"], held and _alive(held)) if p["confirmation"] \
        else None
    if module.check_mode:
        return {"changed": True, "ledger": ledger, "lock": mine, "msg": "fleet %s: would take the lock" % fleet}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if broken:  # under the typed confirmation: move the dead run's lock aside (one breaker wins), then take it
        found, claimed = _claim(path, broken["id"])
        if not claimed:
            raise PolicyError("fleet %s: lock %s changed while it was being broken (%s); nothing was broken. Run "
                              "again to see who holds it" % (fleet, broken["id"], "now lock %s of %s" % (
                                  found.get("id"), found.get("holder")) if found else "it was released"),
                              held_by=found)
    _create(path, mine, fleet)
    if broken:  # the ledger read again under the lock: another run may have written it since the read above
        ledger = fleet_run.record_break(fleet_run.check_ledger(_load(p["path"]), plan), broken, mine)
        _save(p["path"], ledger)
    module.log("fleet %s: lock %s taken%s" % (fleet, mine["id"], " (broke lock %s)" % broken["id"] if broken else ""))
    breaking = ", breaking lock %s of %s" % (broken["id"], broken["holder"]) if broken else ""
    out = {"changed": True, "ledger": ledger, "lock": mine,
           "msg": "fleet %s: lock %s taken by %s%s" % (fleet, mine["id"], mine["holder"], breaking)}
    if broken:  # a break-glass use: the change record's callback lists it with its operator and time
        out["ansible_facts"] = {"fleet_ledger_break_glass_record": {
            "actions": ["break the fleet ledger's lock"], "stage": "fleet lock", "nodes": [],
            "detail": "fleet %s: lock %s of %s (since %s) broken with %r" % (
                fleet, broken.get("id"), broken.get("holder"), broken.get("since"), p["confirmation"])}}
    return out


def _readings(folder, plan, cells, which):
    """The cells' readings files, each checked as it is read (fleet_run.check_reading: a reading that does not hold
    together is not measured, with why)."""
    out = {}
    for cell in cells:
        path = fleet_run.readings_file(folder, cell, plan["cells"][cell]["target"], which)
        try:
            found = fleet_run.check_reading(cell, which, _read_json(path))
        except ValueError:  # a torn or hand-edited reading is no reading: judged as not measured
            found = None
        if found is not None:  # none, or JSON that is not a reading: not measured
            out[cell] = found
    return out


def _check_before(module, plan, cells, folder):
    """C(before): refuse the batch when a cell's reading before is missing or incomplete, and drop that reading so
    the next run takes it again (playbooks/tasks/fleet_read_cell.yml keeps a reading before once it exists)."""
    gaps = fleet_run.unread_before(plan, cells, _readings(folder, plan, cells, "before"))
    if not gaps:
        return
    for cell in gaps:
        path = fleet_run.readings_file(folder, cell, plan["cells"][cell]["target"], "before")
        if os.path.exists(path) and not module.check_mode:
            os.remove(path)
    raise PolicyError("cell(s) %s could not be read whole before the upgrade, so the batch was not changed (their "
                      "later readings would have nothing to compare with): %s. Their readings before are dropped, "
                      "so the next run reads them again: fix the cause and run the fleet again" % (
                          ", ".join(sorted(gaps)), "; ".join("%s: %s" % kv for kv in sorted(gaps.items()))),
                      unread=gaps)


def _soak_cells(folder, plan, ring):
    """The cells a soak of ``ring`` judges (fleet_run.soak_cells), from the cells' readings before on disk."""
    return fleet_run.soak_cells(plan, ring, [
        c for c, info in plan["cells"].items()
        if os.path.exists(fleet_run.readings_file(folder or "", c, info["target"], "before"))])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            plan=dict(type="dict", required=True), path=dict(type="path", required=True),
            action=dict(type="str", default="read", choices=["lock", "unlock", "read", "before", "record", "soak",
                                                             "judge", "resume", "retry"]),
            lock=dict(type="str"), holder=dict(type="str"),
            cell=dict(type="str"), cells=dict(type="list", elements="str", default=[]), ring=dict(type="str"),
            state=dict(type="str", choices=list(fleet_run.CELL_STATES)), version=dict(type="str", default=""),
            reason=dict(type="str", default=""), change_record=dict(type="str"), done=dict(type="bool", default=False),
            readings_dir=dict(type="path"), confirmation=dict(type="str")),
        required_if=[("action", "record", ("cell", "state")), ("action", "retry", ("confirmation",)),
                     ("action", "soak", ("ring",)), ("action", "judge", ("ring", "readings_dir")),
                     ("action", "resume", ("readings_dir",)), ("action", "unlock", ("lock",)),
                     ("action", "before", ("cells", "readings_dir"))],
        supports_check_mode=True,
    )
    p = module.params

    def body():
        plan, now = p["plan"], datetime.datetime.now(datetime.UTC)
        lock_path = fleet_run.lock_path(p["path"])
        if p["action"] == "unlock":  # whatever the ledger holds: a run that failed on it still releases its lock
            return _unlock(module, plan, lock_path)
        before = fleet_run.check_ledger(_load(p["path"]), plan)
        ledger, extra = before, {}
        if p["action"] == "lock":
            return _lock(module, plan, before, lock_path, now)
        if p["action"] == "read":
            ledger = fleet_run.resume_interrupted(ledger, now)
            extra["hops"] = fleet_run.runnable(plan, ledger)
        elif p["action"] == "before":  # reads the readings; writes no ledger (a refused batch has no change)
            _check_before(module, plan, p["cells"], p["readings_dir"])
            return {"ledger": ledger, "next": fleet_run.next_step(plan, ledger, now), "changed": False,
                    "msg": "cell(s) %s read whole before the upgrade" % ", ".join(p["cells"])}
        elif p["action"] == "record":
            ledger = fleet_run.record(ledger, p["cell"], p["state"], now, p["version"], p["reason"],
                                      p["change_record"])
        elif p["action"] == "soak":
            ledger = fleet_run.soak(ledger, p["ring"], now, p["done"])
        elif p["action"] == "retry":
            cell = p["cell"] or fleet_run.retry_cell(p["confirmation"])
            ledger = fleet_run.retry(ledger, cell, p["confirmation"], now)
        elif p["action"] in ("judge", "resume"):
            halt = ledger.get("halt")
            if p["action"] == "resume" and not halt:
                extra["halts"] = []
            else:
                ring = p["ring"] if p["action"] == "judge" else halt["ring"]
                if p["action"] == "resume":
                    cells = fleet_run.halted_cells(ledger)
                else:
                    cells = p["cells"] or _soak_cells(p["readings_dir"], plan, ring)
                found = fleet_run.judge(plan, cells, _readings(p["readings_dir"], plan, cells, "before"),
                                        _readings(p["readings_dir"], plan, cells, "after"))
                extra["halts"], extra["judged"] = found, cells
                ledger = fleet_run.halt(ledger, ring, found, now) if found else (
                    fleet_run.clear_halt(ledger) if halt else ledger)
        changed = ledger != before or not os.path.exists(p["path"])
        if changed and not module.check_mode:
            fleet_run.check_holds(plan["fleet"], _load_lock(lock_path), p["lock"])
            _save(p["path"], ledger)
        if extra.get("halts"):
            raise PolicyError(ledger["halt"]["message"] + ". Later rings are untouched; clear the cause and run the "
                              "fleet again - it resumes from its ledger (%s)" % p["path"],
                              halts=extra["halts"], judged=extra["judged"], ledger=ledger)
        step = fleet_run.next_step(plan, ledger, now)
        if step["action"] == "soak" and p["readings_dir"]:
            extra["soak_cells"] = _soak_cells(p["readings_dir"], plan, step["ring"])
        return dict(extra, ledger=ledger, next=step, changed=changed, msg=step["message"])

    run_module(module, body)


if __name__ == "__main__":
    main()
