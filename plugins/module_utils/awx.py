# Copyright: gpufleet contributors
# Apache License 2.0
"""AWX configuration as data: the job templates, surveys, the snapshot-key credential type, the upgrade workflow
and its maintenance-window schedule for one cell, computed once here and applied by playbooks/awx_configure.yml
with the awx.awx modules (tests/unit/module_utils/test_awx.py checks every definition against those modules'
argument specs). The same definitions say how AWX launches each job (its extra vars and credentials), which the
ansible-runner rehearsal in tests/lab uses to run a template as AWX would."""
from __future__ import annotations

import datetime
import re
import threading
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet_report import parse_latest_patches
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_release

SNAPSHOT_CREDENTIAL_TYPE = "gpufleet etcd snapshot key"
BREAK_GLASS_SURVEY = (
    ("gpufleet_break_glass_disable_eviction", "Break glass: delete pods without the eviction API",
     "disable eviction on {cell} for {target}"),
    ("gpufleet_break_glass_force_drain", "Break glass: drain pods that have no controller",
     "force drain on {cell} for {target}"),
    ("gpufleet_break_glass_skip_checkpoint", "Break glass: stop gangs without a checkpoint",
     "skip checkpoint on {cell} for {target}"),
    ("gpufleet_break_glass_skip_nccl", "Break glass: leave out the NCCL gate", "skip nccl on {cell} for {target}"),
)
# playbook: (template description, survey asks for break glass, needs the snapshot key, is a wave template)
TEMPLATES = {
    "preflight": ("Preflight of the cell: versions, skew, removed APIs, etcd, GPU health - changes nothing.",
                  False, False),
    "etcd_backup": ("Encrypted etcd snapshot, verified and copied off the node.", False, True),
    "control_plane": ("Control plane, one host at a time (kubeadm), with a health soak after each.", False, False),
    "addons": ("The addons' Helm releases after the control plane, in the seed's order (Helm rolls back a failure).",
               False, False),
    "canary": ("The canary waves of the GPU pools only.", True, False),
    "node_pool": ("Every GPU node wave (canaries first, then whole failure domains under the GPU cap).", True, False),
    "upgrade_wave": ("The whole upgrade in one job: preflight, snapshot, control plane, addons, every wave.", True,
                     True),
    "validate": ("DCGM, NCCL and node checks of GPU nodes (use a limit for some).", True, False),
    "maintenance": ("Maintenance of one GPU node: drain, upgrade or repair, validate, uncordon.", True, False),
}
WORKFLOW = ("preflight", "etcd_backup", "control_plane", "addons", "canary", "approval", "node_pool")
# Whole-value patterns, matched with fullmatch (``$`` also matches before a trailing newline) and ASCII only (``\d``
# and str.isalnum() take full-width and other Unicode digits and letters).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,99}")
PLAYBOOK_DIR = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")
# Jinja's markers: AWX hands a job template's extra_vars to ansible-playbook, which templates them, so a value that
# holds one would run as Jinja on the AWX side (a lookup, a pipe) - refused, naming the field.
JINJA = re.compile(r"\{[{%#]")
CELL_FIELDS = ("organization", "project", "inventory", "execution_environment", "cell", "target", "credentials",
               "window", "backup_dir", "snapshot_copies", "playbook_dir")
FLEET_FIELDS = ("organization", "project", "inventory", "execution_environment", "credentials", "out_dir",
                "latest_patches", "instance_groups", "playbook_dir")


def no_templates(value: Any, where: str, control: bool = True) -> None:
    """Refuse Jinja (``{{``, ``{%``, ``{#``) anywhere in ``value`` - keys and values, at any depth - and, with
    ``control``, control characters (a newline) in its strings, naming the path; what reaches AWX must be data.
    Walked with a stack, not recursion: a value nested thousands deep is refused the same way."""
    stack = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, Mapping):
            for key, child in item.items():
                stack.append((key, "%s key %r" % (path, key)))
                stack.append((child, "%s.%s" % (path, key)))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, "%s[%d]" % (path, i)) for i, child in enumerate(item))
        elif isinstance(item, str):
            jinja = JINJA.search(item)
            if jinja:
                raise InputError("%s: %r holds Jinja (%s); AWX templates the extra vars it gives a job, so it would "
                                 "run there - give the value without '{{', '{%%' or '{#'" % (
                                     path[:300], item[:200], jinja.group(0)))
            if control and any(ord(c) < 32 or ord(c) == 127 for c in item):
                raise InputError("%s: %r holds a control character (a newline, a tab); give it on one line without "
                                 "them" % (path[:300], item[:200]))


def _known(config: Mapping[str, Any], fields: Any, where: str) -> None:
    unknown = sorted(str(k) for k in config if k not in fields)
    if unknown:
        raise InputError("%s: unknown field(s) %s; expected %s" % (where, ", ".join(unknown), ", ".join(fields)))


def _name(config: Mapping[str, Any], key: str, where: str = "awx") -> str:
    value = config.get(key)
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise InputError("%s.%s: expected a name (ASCII letters, digits, space, '.', '_', '-'; up to 100), got %r"
                         % (where, key, value))
    return value


def _absolute_dir(config: Mapping[str, Any], key: str, what: str) -> str:
    """``config[key]``: an absolute directory in the job, without ``..``; ``what`` says what it is for."""
    value = config.get(key)
    if not isinstance(value, str) or not value.startswith("/") or ".." in value.split("/"):
        raise InputError("awx.%s: expected an absolute directory %s, got %r" % (key, what, value))
    no_templates(value, "awx.%s" % key)
    return value


# -- the maintenance window's rule, checked as AWX checks a schedule's rule -----------------------------------------
# AWX (the ansible/awx repository) refuses a rule in two places: SchedulePreviewSerializer.validate_rrule in
# awx/api/serializers.py (the textual rules; the messages below quote its words) and Schedule.rrulestr in
# awx/main/models/schedules.py (a naive UNTIL is read in DTSTART's zone - coerce_naive_until -, then
# dateutil.rrule.rrulestr with forceset and the UTC zone names, and a DTSTART left without a zone - a TZID that
# dateutil.tz.gettz does not find - is refused). Multiple BYMONTHDAYs or BYMONTHs, BYYEARDAY and BYWEEKNO are refused
# by the AWX releases before rule sets (their validate_rrule, same words); they stay refused here so that every AWX
# takes the rule. The zone names are looked up on the controller: its time zone data, like AWX's, must know the zone.
RRULE_EXAMPLE = "DTSTART;TZID=UTC:20261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA"
RRULE_DATETIME = re.compile(r"[0-9]{8}T[0-9]{6}Z?")
# AWX refuses a BYDAY whose first day has a number before it (BYDAY[:=][0-9]+[a-zA-Z]{2}: 2MO, not -1SU); here every
# day of the list is checked, so MO,2TU is refused too
RRULE_BYDAY_NUMERIC = re.compile(r"[0-9]+[A-Z]{2}")
RRULE_PROPERTIES = ("DTSTART", "RRULE", "EXRULE", "EXDATE", "RDATE")
# How long the search for the next occurrence may take. dateutil has no bound of its own: a rule whose parts never
# coincide (BYSETPOS=2 on a MINUTELY rule, an EXRULE that removes every occurrence) is walked period by period to
# the year 9999, which is hours for an HOURLY or MINUTELY rule. AWX computes the next run the same way when it saves
# a schedule.
RRULE_SEARCH_SECONDS = 10.0


def _rrule_refused(text: Any, why: str) -> InputError:
    return InputError("awx.window.rrule: %s; give an iCal rule AWX accepts, such as %r; got %r" % (
        why, RRULE_EXAMPLE, text[:300] if isinstance(text, str) else text))


def _awx_says(words: str, what: str = "") -> str:
    return "AWX refuses it: '%s'%s" % (words, " (%s)" % what if what else "")


def check_rrule(text: Any, now: Optional[datetime.datetime] = None) -> None:
    """Refuse the maintenance window's iCal rule ``text`` where AWX would refuse it, naming the field and the rule
    broken in AWX's words, and refuse a rule with no occurrence after ``now`` (default: the current time) - AWX
    accepts that one, but its schedule would never run. Reads nothing but the controller's time zone data (and the
    clock when ``now`` is not given)."""
    if not isinstance(text, str):
        raise _rrule_refused(text, "expected a string")
    if not text.isascii() or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise _rrule_refused(text, "expected ASCII on one line, its parts separated by spaces (no newline, tab or "
                                   "full-width character)")
    try:
        from dateutil import parser as du_parser, rrule as du_rrule, tz as du_tz
    except ImportError as exc:  # pragma: no cover - python-dateutil is in requirements.txt (kubernetes needs it too)
        raise InputError("awx.window.rrule: checking the rule needs the Python library python-dateutil on the "
                         "controller: pip install -r requirements.txt from the collection") from exc
    dtstarts: List[Any] = []
    rules: List[Any] = []
    for prop in text.split(" "):
        if not prop:
            continue
        head, colon, value = prop.partition(":")
        params = head.split(";")
        if not colon or params[0] not in RRULE_PROPERTIES:
            raise _rrule_refused(text, "%r is not a part AWX takes: DTSTART and RRULE (and EXRULE), each NAME:VALUE "
                                       "in upper case, separated by spaces" % prop[:100])
        if params[0] in ("EXDATE", "RDATE"):
            raise _rrule_refused(text, _awx_says("%s not allowed in rrule" % params[0]))
        (dtstarts if params[0] == "DTSTART" else rules).append((params[0], params[1:], value))

    start_hint = "DTSTART;TZID=ZONE:YYYYMMDDTHHMMSS, or DTSTART:YYYYMMDDTHHMMSSZ in UTC"
    if not dtstarts:
        raise _rrule_refused(text, _awx_says("Valid DTSTART required in rrule", start_hint))
    if len(dtstarts) > 1:
        raise _rrule_refused(text, _awx_says("Multiple DTSTART is not supported"))
    start_params, start = dtstarts[0][1], dtstarts[0][2]
    if not RRULE_DATETIME.fullmatch(start):
        raise _rrule_refused(text, _awx_says("Valid DTSTART required in rrule", start_hint))
    tzids = [p[len("TZID="):] for p in start_params if p.startswith("TZID=")]
    if not tzids and not start.endswith("Z"):
        raise _rrule_refused(text, _awx_says("DTSTART cannot be a naive datetime",
                                             "give ;TZID=ZONE, or a trailing Z for UTC"))
    zone: Any = du_tz.UTC
    if tzids:
        tzid = tzids[-1]
        # never a path: gettz opens a file by the name it is given
        found = (du_tz.gettz(tzid) if len(tzids) == 1 and tzid and not tzid.startswith("/")
                 and ".." not in tzid.split("/") else None)
        if found is None:
            raise _rrule_refused(text, _awx_says("A valid TZID must be provided (e.g., America/New_York)",
                                                 "no time zone %r in the controller's time zone data" % tzid[:100]))
        zone = found

    if not any(rule[0] == "RRULE" for rule in rules):
        raise _rrule_refused(text, _awx_says("One or more rule required in rrule"))
    props = ["%s:%s" % (";".join(["DTSTART"] + start_params), start)]  # what dateutil reads, UNTIL coerced
    for name, rule_params, value in rules:
        rule = "%s:%s" % (name, value)
        if value != value.upper():  # AWX reads COUNT and UNTIL in upper case only (a lower-case until= fails there)
            raise _rrule_refused(text, "write the rule in upper case, as AWX reads it: %s" % rule)
        parts: Dict[str, List[str]] = {}
        for pair in value.upper().split(";"):
            key, part = pair.partition("=")[::2]
            parts.setdefault(key, []).append(part)
        one = {key: values[-1] for key, values in parts.items()}
        if "INTERVAL" not in parts:
            raise _rrule_refused(text, _awx_says("INTERVAL required in rrule", rule))
        if "SECONDLY" in parts.get("FREQ", []):
            raise _rrule_refused(text, _awx_says("SECONDLY is not supported", rule))
        if any(RRULE_BYDAY_NUMERIC.fullmatch(day) for days in parts.get("BYDAY", []) for day in days.split(",")):
            raise _rrule_refused(text, _awx_says("BYDAY with numeric prefix not supported", rule))
        if "COUNT" in parts and "UNTIL" in parts:
            raise _rrule_refused(text, _awx_says("RRULE may not contain both COUNT and UNTIL", rule))
        if any(count.isdigit() and int(count) > 999 for count in parts.get("COUNT", [])):
            raise _rrule_refused(text, _awx_says("COUNT > 999 is unsupported", rule))
        if any("," in days for days in parts.get("BYMONTHDAY", [])):
            raise _rrule_refused(text, _awx_says("Multiple BYMONTHDAYs not supported", rule))
        if any("," in months for months in parts.get("BYMONTH", [])):
            raise _rrule_refused(text, _awx_says("Multiple BYMONTHs not supported", rule))
        for key in ("BYYEARDAY", "BYWEEKNO"):
            if key in parts:
                raise _rrule_refused(text, _awx_says("%s not supported" % key, rule))
        # not AWX's own checks: dateutil fails on these with an unhelpful message (a missing FREQ) or not at all (an
        # INTERVAL of 0 repeats the same period without end - RFC 5545 wants a positive integer)
        if "FREQ" not in parts:
            raise _rrule_refused(text, _awx_says("rrule parsing failed validation", "FREQ is required: %s" % rule))
        repeated = sorted(key for key, values in parts.items() if len(values) > 1)
        if repeated:  # dateutil takes the last, AWX's checks the first
            raise _rrule_refused(text, "%s given more than once (RFC 5545: each rule part at most once): %s" % (
                ", ".join(repeated), rule))
        if not one["INTERVAL"].isdigit() or int(one["INTERVAL"]) < 1:
            raise _rrule_refused(text, "INTERVAL must be a positive integer (RFC 5545): %s" % rule)
        until, given = one.get("UNTIL"), value
        if until is not None:
            if not RRULE_DATETIME.fullmatch(until):
                raise _rrule_refused(text, _awx_says("rrule parsing failed validation", "UNTIL=YYYYMMDDTHHMMSS in "
                                                     "DTSTART's zone, or with a trailing Z in UTC: %s" % rule))
            if not until.endswith("Z"):  # AWX's coerce_naive_until: a naive UNTIL is in DTSTART's zone
                try:
                    local = datetime.datetime.strptime(until, "%Y%m%dT%H%M%S").replace(tzinfo=zone)
                except ValueError as exc:
                    raise _rrule_refused(text, _awx_says("rrule parsing failed validation: %s" % exc, rule))
                utc = local.astimezone(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
                given = ";".join("UNTIL=" + utc if pair.upper().startswith("UNTIL=") else pair
                                 for pair in value.split(";"))
        props.append("%s:%s" % (";".join([name] + rule_params), given))

    utc_names = {name: du_tz.UTC for name in du_parser.parserinfo().UTCZONE}
    try:
        ruleset = du_rrule.rrulestr(" ".join(props), tzinfos=utc_names, forceset=True)
    except Exception as exc:  # dateutil raises ValueError, TypeError, OverflowError...: AWX catches all of them
        raise _rrule_refused(text, _awx_says("rrule parsing failed validation: %s" % exc))

    rule_lists = (ruleset._rrule, ruleset._exrule)  # private, as AWX reads them
    if any(each._dtstart.tzinfo is None for rule_list in rule_lists for each in rule_list):
        # dateutil left DTSTART naive: a TZID it did not take (DTSTART;TZID=UTC;VALUE=DATE-TIME reads as one zone
        # named 'UTC;VALUE=DATE-TIME')
        raise _rrule_refused(text, _awx_says("A valid TZID must be provided (e.g., America/New_York)"))
    moment = now or datetime.datetime.now(datetime.UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    try:
        # AWX's _fast_forward_rrule: an HOURLY or MINUTELY rule without COUNT starts again at its last
        # occurrence-aligned time before now (the same occurrences), so a DTSTART years back is not walked hour by hour
        for rule_list in rule_lists:
            for index, each in enumerate(rule_list):
                step = {du_rrule.HOURLY: 3600, du_rrule.MINUTELY: 60}.get(each._freq, 0) * (each._interval or 1)
                first = each._dtstart.astimezone(datetime.UTC)
                if step and not each._count and first < moment:
                    ahead = first + datetime.timedelta(seconds=(moment - first).total_seconds() // step * step)
                    rule_list[index] = each.replace(dtstart=ahead.astimezone(each._dtstart.tzinfo))
        upcoming = _next_occurrence(ruleset, moment, RRULE_SEARCH_SECONDS)
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise _rrule_refused(text, "its occurrences cannot be computed: %s" % exc)
    except TimeoutError:
        raise _rrule_refused(text, "its next occurrence was not found in %g s: its parts may never coincide (such as "
                                   "BYSETPOS on an HOURLY or MINUTELY rule, or an EXRULE that removes every "
                                   "occurrence); AWX computes it the same way when it saves the schedule"
                                   % RRULE_SEARCH_SECONDS) from None
    if upcoming is None:
        raise _rrule_refused(text, "no occurrence after %s UTC: the maintenance window would never open (AWX takes "
                                   "such a rule, but its schedule never runs) - move DTSTART or UNTIL on, or raise "
                                   "COUNT" % moment.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M"))


def _next_occurrence(ruleset: Any, moment: datetime.datetime, seconds: float) -> Optional[datetime.datetime]:
    """The first occurrence of ``ruleset`` after ``moment`` that exists (AWX skips a time a DST change removes), or
    None; TimeoutError when the search takes longer than ``seconds``. The search runs in a daemon thread, since
    nothing stops dateutil from outside: one that times out is left to end with the process (the module's, or the
    Ansible worker's)."""
    from dateutil import tz as du_tz
    found: Dict[str, Any] = {}

    def search() -> None:
        try:
            upcoming = ruleset.after(moment)
            while upcoming is not None and not du_tz.datetime_exists(upcoming):
                upcoming = ruleset.after(upcoming)
            found["next"] = upcoming
        except (ArithmeticError, ValueError, TypeError) as exc:
            found["error"] = exc

    worker = threading.Thread(target=search, name="gpufleet-rrule-search", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeoutError("no next occurrence within %g s" % seconds)
    if "error" in found:
        raise found["error"]
    return found.get("next")


def _playbook_dir(config: Mapping[str, Any]) -> str:
    """``playbook_dir``: where the project keeps the playbooks, relative to the project (default ``playbooks``)."""
    value = config.get("playbook_dir")
    if value in (None, ""):
        return "playbooks"
    text = value.strip("/") if isinstance(value, str) else ""
    if not PLAYBOOK_DIR.fullmatch(text) or ".." in text.split("/"):
        raise InputError("awx.playbook_dir: expected a relative directory of the project such as playbooks (ASCII "
                         "letters, digits, '.', '_', '-' and '/', no '..'), got %r" % (value,))
    return text


def template_name(cell: str, playbook: str) -> str:
    return "gpufleet %s %s" % (cell, playbook.replace("_", " "))


def _survey(cell: str, target: str, playbook: str, break_glass: bool) -> Dict[str, Any]:
    spec: List[Dict[str, Any]] = [
        {"question_name": "Cell", "variable": "gpufleet_expected_cell", "type": "text", "required": True,
         "default": cell, "min": 1, "max": 63,
         "question_description": "The cell this job is for; the run refuses an inventory of another cell."},
        {"question_name": "Target version", "variable": "gpufleet_target_version", "type": "text",
         "required": True, "default": target, "min": 6, "max": 20,
         "question_description": "The release to reach, vX.Y.Z (one minor above the control plane)."},
    ]
    if playbook == "maintenance":
        spec += [
            {"question_name": "GPU node", "variable": "gpufleet_node", "type": "text", "required": True,
             "default": "", "min": 1, "max": 253, "question_description": "The one GPU node to maintain."},
            {"question_name": "Action", "variable": "gpufleet_maintenance_action", "type": "multiplechoice",
             "required": True, "default": "upgrade", "choices": ["upgrade", "gpu_stack", "repair"],
             "question_description": "upgrade, gpu_stack (driver stack only) or repair (stops after the drain)."},
        ]
    if break_glass:
        for variable, question, phrase in BREAK_GLASS_SURVEY:
            if playbook == "validate" and variable != "gpufleet_break_glass_skip_nccl":
                continue
            spec.append({"question_name": question, "variable": variable, "type": "text", "required": False,
                         "default": "", "min": 0, "max": 200,
                         "question_description": "Leave empty. To break glass type exactly '%s'; the change record "
                                                 "names who did." % phrase.format(cell=cell, target="<target>")})
    return {"name": "gpufleet %s" % playbook.replace("_", " "), "description": "Inputs of this run", "spec": spec}


BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
ENDPOINT = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[!-~]*)?")  # printable ASCII in the path
REGION = re.compile(r"[a-z0-9-]{2,32}")


def snapshot_copies(copies: Any) -> Dict[str, str]:
    """The etcd_snapshot role's variables for the copies off the job's controller (see definitions)."""
    fix = ("give backup_host (an inventory host reached over SSH, off the cell) and/or s3 {bucket, prefix, "
           "endpoint_url, region}: an AWX job's controller is a container that ends with the job, so a snapshot "
           "kept only there is lost with it")
    if not isinstance(copies, Mapping) or not (copies.get("backup_host") or copies.get("s3")):
        raise InputError("awx.snapshot_copies: %s; got %r" % (fix, copies))
    unknown = sorted(set(copies) - {"backup_host", "backup_host_dir", "s3"})
    if unknown:
        raise InputError("awx.snapshot_copies: unknown field(s) %s; %s" % (", ".join(unknown), fix))
    no_templates(copies, "awx.snapshot_copies")
    out: Dict[str, str] = {}
    if copies.get("backup_host"):
        out["etcd_snapshot_backup_host"] = _name(copies, "backup_host", "awx.snapshot_copies")
        host_dir = copies.get("backup_host_dir")
        if host_dir is not None:
            if not isinstance(host_dir, str) or not host_dir.startswith("/") or ".." in host_dir.split("/"):
                raise InputError("awx.snapshot_copies.backup_host_dir: expected an absolute directory on the backup "
                                 "host, got %r" % (host_dir,))
            out["etcd_snapshot_backup_host_dir"] = host_dir
    s3 = copies.get("s3")
    if s3:
        if not isinstance(s3, Mapping):
            raise InputError("awx.snapshot_copies.s3: expected {bucket, prefix, endpoint_url, region}, got %r" % (s3,))
        unknown = sorted(set(s3) - {"bucket", "prefix", "endpoint_url", "region"})
        if unknown:
            raise InputError("awx.snapshot_copies.s3: unknown field(s) %s; expected bucket, prefix, endpoint_url, "
                             "region" % ", ".join(unknown))
        bucket = s3.get("bucket")
        if not isinstance(bucket, str) or not BUCKET.fullmatch(bucket):
            raise InputError("awx.snapshot_copies.s3.bucket: expected an S3 bucket name (3-63 of a-z, 0-9, '.', "
                             "'-'), got %r" % (bucket,))
        out["etcd_snapshot_s3_bucket"] = bucket
        for key, check, what in (("prefix", lambda v: not v.startswith("/"), "a key prefix not starting with '/'"),
                                 ("endpoint_url", ENDPOINT.fullmatch,
                                  "an http(s) URL of an S3-compatible endpoint"),
                                 ("region", REGION.fullmatch, "a region such as us-east-1")):
            value = s3.get(key)
            if value is None:
                continue
            if not isinstance(value, str) or not check(value):
                raise InputError("awx.snapshot_copies.s3.%s: expected %s, got %r" % (key, what, value))
            out["etcd_snapshot_s3_" + key] = value
    return out


def definitions(config: Mapping[str, Any]) -> Dict[str, Any]:
    """Every AWX object for one cell, from ``config`` (the ``gpufleet_awx`` variable): organization, project,
    inventory, execution_environment, cell, target, credentials {machine, kubernetes, aws (with s3)}, window
    {rrule}, backup_dir (where the job writes the encrypted snapshots), snapshot_copies {backup_host,
    backup_host_dir, s3 {bucket, prefix, endpoint_url, region}} (at least one: the job's controller is a container
    that ends with the job), and optionally playbook_dir (where the project keeps the playbooks; default
    ``playbooks``). No secret passes through here: the snapshot key is given to the credential by the playbook
    (gpufleet_awx_snapshot_key, under no_log); the S3 keys live in the AWX AWS credential named here."""
    if not isinstance(config, Mapping):
        raise InputError("gpufleet_awx: expected a mapping (organization, project, inventory, ...), got %r" % (
            type(config).__name__,))
    _known(config, CELL_FIELDS, "awx")
    org, project, inventory = _name(config, "organization"), _name(config, "project"), _name(config, "inventory")
    ee, cell = _name(config, "execution_environment"), _name(config, "cell")
    raw_target = config.get("target")
    if not isinstance(raw_target, str):
        raise InputError("awx.target: expected a release such as v1.36.3, got %s %r" % (
            type(raw_target).__name__, raw_target))
    target = str(parse_release(raw_target, "awx.target"))
    creds = config.get("credentials")
    if not isinstance(creds, Mapping):
        raise InputError("awx.credentials: expected {machine: NAME, kubernetes: NAME}")
    _known(creds, ("machine", "kubernetes", "aws"), "awx.credentials")
    machine = _name(creds, "machine", "awx.credentials")
    kubernetes = _name(creds, "kubernetes", "awx.credentials")
    snapshot = "gpufleet %s etcd snapshot key" % cell
    window = config.get("window") or {}
    if not isinstance(window, Mapping) or set(window) - {"rrule"}:
        raise InputError("awx.window: expected {rrule: ...} (the maintenance window), got %r" % (window,))
    rrule = window.get("rrule")
    check_rrule(rrule)
    playbook_dir = _playbook_dir(config)
    no_templates(config, "awx")  # what the checks above do not read as a name, a rule or a directory
    backup_dir = _absolute_dir(config, "backup_dir", "in the job (the encrypted etcd snapshots are written there "
                                                     "first)")
    snapshot_vars = dict(snapshot_copies(config.get("snapshot_copies")), etcd_snapshot_backup_dir=backup_dir)
    aws = []
    if snapshot_vars.get("etcd_snapshot_s3_bucket"):
        if not isinstance(creds.get("aws"), str):
            raise InputError("awx.credentials.aws: snapshot_copies.s3 needs the name of an AWX 'Amazon Web Services' "
                             "credential (it injects AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for the upload)")
        aws = [_name(creds, "aws", "awx.credentials")]
    elif creds.get("aws") is not None:
        _name(creds, "aws", "awx.credentials")

    templates = []
    for playbook, (description, break_glass, needs_key) in TEMPLATES.items():
        templates.append({
            "name": template_name(cell, playbook), "description": description, "organization": org,
            "project": project, "playbook": "%s/%s.yml" % (playbook_dir, playbook), "inventory": inventory,
            "execution_environment": ee, "job_type": "run",
            "credentials": [machine, kubernetes] + ([snapshot] + aws if needs_key else []),
            "survey_enabled": True, "survey_spec": _survey(cell, target, playbook, break_glass),
            "ask_limit_on_launch": playbook in ("validate",), "allow_simultaneous": False,
            "extra_vars": dict(snapshot_vars) if needs_key else {}, "state": "present",
        })
    nodes = []
    for index, step in enumerate(WORKFLOW):
        following = [{"identifier": WORKFLOW[index + 1]}] if index + 1 < len(WORKFLOW) else []
        if step == "approval":
            ujt: Dict[str, Any] = {"name": "gpufleet %s approve the node waves" % cell, "type": "workflow_approval",
                                   "description": "The canaries passed; approve the node waves.", "timeout": 14400}
        else:
            ujt = {"name": template_name(cell, step), "type": "job_template", "organization": {"name": org}}
        nodes.append({"identifier": step, "unified_job_template": ujt,
                      "related": {"success_nodes": following, "failure_nodes": [], "always_nodes": []}})
    workflow_name = "gpufleet %s upgrade" % cell
    return {
        "credential_type": {
            "name": SNAPSHOT_CREDENTIAL_TYPE, "kind": "cloud", "state": "present",
            "description": "The key that encrypts etcd snapshots (ansible-vault); injected as an extra variable the "
                           "etcd_snapshot role reads under no_log, never printed.",
            "inputs": {"fields": [{"id": "key", "type": "string", "label": "Snapshot encryption key",
                                   "secret": True, "help_text": "16 characters or more"}], "required": ["key"]},
            "injectors": {"extra_vars": {"etcd_snapshot_encryption_key": "{{ key }}"}},
        },
        "snapshot_credential": {"name": snapshot, "credential_type": SNAPSHOT_CREDENTIAL_TYPE, "organization": org,
                                "state": "present", "description": "The cell's etcd snapshot key (the playbook "
                                                                   "gives its input from gpufleet_awx_snapshot_key)."},
        "job_templates": templates,
        "workflow": {"name": workflow_name, "organization": org, "inventory": inventory, "state": "present",
                     "description": "Preflight -> etcd backup -> control plane -> addons -> canary -> approval -> "
                                    "node waves",
                     "survey_enabled": True, "survey_spec": _survey(cell, target, "workflow", True),
                     "allow_simultaneous": False, "extra_vars": dict(snapshot_vars),
                     "workflow_nodes": nodes, "destroy_current_nodes": True},
        "schedule": {"name": "gpufleet %s maintenance window" % cell, "unified_job_template": workflow_name,
                     "organization": org, "rrule": rrule, "state": "present", "enabled": False,
                     "description": "The cell's maintenance window; enable it once the workflow has run by hand."},
    }


def _default_applies(question: Mapping[str, Any]) -> bool:
    """Whether AWX puts a survey question's default into a job launched without an answer: only a default that
    passes the question's own checks - so a text default "" with min 0 is sent (as ""), a multiplechoice default
    that is not one of its choices is not."""
    value, kind = question.get("default"), question.get("type")
    if value is None:
        return False
    if kind in ("text", "textarea", "password"):
        return isinstance(value, str) and int(question.get("min", 0)) <= len(value) <= int(question.get("max", 1024))
    if kind == "multiplechoice":
        return value in (question.get("choices") or [])
    if kind in ("integer", "float"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return bool(value)


def launch(definition: Mapping[str, Any], answers: Mapping[str, Any]) -> Dict[str, Any]:
    """The extra vars AWX gives a job of this template: the template's extra vars, then the survey's defaults
    that AWX applies (:func:`_default_applies`), then the answers given at launch (only for questions the survey
    asks). The playbooks must read an empty default as unset."""
    spec = (definition.get("survey_spec") or {}).get("spec") or []
    asked = {q["variable"] for q in spec}
    unknown = sorted(set(answers) - asked)
    if unknown:
        raise InputError("%s: the survey does not ask %s" % (definition["name"], ", ".join(unknown)))
    out = dict(definition.get("extra_vars") or {})
    for question in spec:
        variable = question["variable"]
        if variable in answers:
            value = answers[variable]
        elif _default_applies(question):
            value = question["default"]
        else:
            value = None
        if question["required"] and value in (None, ""):
            raise InputError("%s: survey answer %s is required" % (definition["name"], variable))
        if value is not None:
            out[variable] = value
    return out


# -- a fleet (docs/fleet.md): one run template, one report template, a workflow with an approval between rings -------
FLEET_TEMPLATES = {
    "fleet": ("The fleet run: resumes from the fleet ledger and upgrades the rings up to the one named "
              "(gpufleet_fleet_until_ring; empty: every ring)."),
    "fleet_report": "The fleet report: every cell's versions read now, each cell's state from the ledger; fails "
                    "on an alert (a cell out of support, behind its patch SLO, failed, halted or not read).",
}


def fleet_template_name(fleet: str, playbook: str) -> str:
    return "gpufleet fleet %s %s" % (fleet, "run" if playbook == "fleet" else "report")


def fleet_definitions(config: Mapping[str, Any], fleet: Mapping[str, Any], plan: Mapping[str, Any]) -> Dict[str, Any]:
    """The AWX objects of a fleet run, from ``config`` (``gpufleet_awx_fleet``: organization, project, inventory - a
    localhost one, the fleet run starts there -, execution_environment, credentials {machine}, out_dir,
    latest_patches (for the report, as fleet_report takes them), and optionally playbook_dir and instance_groups -
    on a Kubernetes AWX a container group whose pod mounts out_dir's volume), the fleet
    (``gpufleet_fleet``) and its plan (fleet.py plan_fleet: the rings in order).

    The workflow runs the fleet template once per ring, each run holding after its ring (the ledger's ``held``),
    with an approval before each later ring, then the report. Every run resumes from the ledger, so ``out_dir``
    must be durable storage mounted into the job (an AWX job's container ends with it, and the ledger with it).
    No Kubernetes credential: a fleet job's cells each connect through their own inventory (one K8S_AUTH_* for
    every cell would point them all at one cluster, which each cell's identity check refuses)."""
    if not isinstance(config, Mapping):
        raise InputError("gpufleet_awx_fleet: expected a mapping (organization, project, inventory, ...), got %r" % (
            type(config).__name__,))
    _known(config, FLEET_FIELDS, "awx")
    org, project, inventory = _name(config, "organization"), _name(config, "project"), _name(config, "inventory")
    ee = _name(config, "execution_environment")
    creds = config.get("credentials")
    if not isinstance(creds, Mapping):
        raise InputError("awx.credentials: expected {machine: NAME} (the SSH credential of the cells' hosts)")
    _known(creds, ("machine", "kubernetes"), "awx.credentials")
    machine = _name(creds, "machine", "awx.credentials")
    if creds.get("kubernetes"):
        raise InputError("awx.credentials.kubernetes: a fleet job takes none - each cell connects through its own "
                         "inventory (gpufleet_kubeconfig); one K8S_AUTH_* for every cell would be one cluster's")
    out_dir = _absolute_dir(config, "out_dir", "on durable storage mounted into the job (the fleet ledger is read "
                                               "back there by every run)")
    groups = config.get("instance_groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) and NAME.fullmatch(g) for g in groups):
        raise InputError("awx.instance_groups: expected a list of instance or container group names (a container "
                         "group whose pod mounts out_dir's volume), got %r" % (groups,))
    raw_latest = config.get("latest_patches")
    if not isinstance(raw_latest, Mapping):
        raise InputError("awx.latest_patches: expected a mapping of minor to {version, released}, such as "
                         "{'1.36': {'version': 'v1.36.3', 'released': '2026-07-22'}}, got %s %r" % (
                             type(raw_latest).__name__, raw_latest))
    no_templates(raw_latest, "awx.latest_patches")
    parse_latest_patches(raw_latest)  # refused here, not in the report's job
    latest = dict(raw_latest)
    playbook_dir = _playbook_dir(config)
    no_templates(config, "awx")
    # the fleet reaches AWX whole, as the templates' extra_vars: its own checks (fleet.py) say what a valid fleet
    # is; here only that no value of it is a template AWX would run
    no_templates(fleet, "gpufleet_fleet", control=False)
    name = str(plan["fleet"])
    rings = [r["ring"] for r in plan["rings"]]
    base_vars = {"gpufleet_fleet": dict(fleet), "gpufleet_out_dir": out_dir}
    run_survey = {"name": "gpufleet fleet run", "description": "Inputs of this run", "spec": [
        {"question_name": "Until ring", "variable": "gpufleet_fleet_until_ring", "type": "multiplechoice",
         "required": False, "default": "", "choices": rings,
         "question_description": "Stop once every ring up to this one is done and soaked; empty: every ring."},
        {"question_name": "Retry a failed cell", "variable": "gpufleet_fleet_retry", "type": "text",
         "required": False, "default": "", "min": 0, "max": 200,
         "question_description": "Leave empty. To put a failed cell back, type exactly 'retry CELL in fleet %s'."
                                 % name},
        {"question_name": "Break a stale lock", "variable": "gpufleet_fleet_break_lock", "type": "text",
         "required": False, "default": "", "min": 0, "max": 200,
         "question_description": "Leave empty. Only when a run was killed and left its lock: type exactly 'break "
                                 "lock ID of fleet %s' with the ID the refusal named." % name}]}
    templates = []
    for playbook, description in FLEET_TEMPLATES.items():
        templates.append({
            "name": fleet_template_name(name, playbook), "description": description, "organization": org,
            "project": project, "playbook": "%s/%s.yml" % (playbook_dir, playbook), "inventory": inventory,
            "execution_environment": ee, "job_type": "run", "credentials": [machine],
            "instance_groups": list(groups),
            "survey_enabled": playbook == "fleet", "survey_spec": run_survey if playbook == "fleet" else {},
            "ask_limit_on_launch": False, "allow_simultaneous": False,
            "extra_vars": dict(base_vars, **({"gpufleet_fleet_latest_patches": latest}
                                             if playbook == "fleet_report" else {})),
            "state": "present",
        })
    steps: List[Dict[str, Any]] = []
    for index, ring in enumerate(rings):
        if index:
            steps.append({"identifier": "approve-%s" % ring, "unified_job_template": {
                "name": "gpufleet fleet %s approve %s" % (name, ring), "type": "workflow_approval",
                "description": "Ring %s is done and soaked clean; approve ring %s." % (rings[index - 1], ring),
                "timeout": 86400}})
        last = index == len(rings) - 1
        steps.append({"identifier": "ring-%s" % ring, "extra_data": {} if last else {
            "gpufleet_fleet_until_ring": ring}, "unified_job_template": {
                "name": fleet_template_name(name, "fleet"), "type": "job_template", "organization": {"name": org}}})
    steps.append({"identifier": "report", "unified_job_template": {
        "name": fleet_template_name(name, "fleet_report"), "type": "job_template", "organization": {"name": org}}})
    for index, step in enumerate(steps[:-1]):
        following = [{"identifier": steps[index + 1]["identifier"]}]
        last_run = index == len(steps) - 2
        # the report follows the last ring whatever its end: a report's alert must not fail a rollout that worked
        step["related"] = {"success_nodes": [] if last_run else following, "failure_nodes": [],
                           "always_nodes": following if last_run else []}
    steps[-1]["related"] = {"success_nodes": [], "failure_nodes": [], "always_nodes": []}
    return {
        "job_templates": templates,
        "workflow": {"name": "gpufleet fleet %s rollout" % name, "organization": org, "inventory": inventory,
                     "state": "present", "allow_simultaneous": False, "survey_enabled": False, "survey_spec": {},
                     "extra_vars": {},
                     "description": " -> ".join("ring %s" % r if not i else "approval -> ring %s" % r
                                                for i, r in enumerate(rings)) + " -> report",
                     "workflow_nodes": steps, "destroy_current_nodes": True},
    }
