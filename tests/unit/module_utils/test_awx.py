"""AWX configuration as code: every object gpufleet defines is checked against the awx.awx module that applies it
(the argument spec its main() builds, and its documented suboptions for workflow nodes), the playbook passes every
field, surveys are well-formed, and launch() gives the extra vars AWX would."""
from __future__ import annotations

import datetime
import importlib
import pathlib
import re

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.upgrade.plugins.module_utils import awx
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

ROOT = pathlib.Path(__file__).resolve().parents[3]
CONFIG = {"organization": "Default", "project": "gpufleet", "inventory": "cell1", "execution_environment": "gpufleet",
          "cell": "cell1", "target": "1.36.3",
          "credentials": {"machine": "cell1 ssh", "kubernetes": "cell1 api", "aws": "backups s3"},
          "window": {"rrule": "DTSTART;TZID=UTC:20261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA"},
          "backup_dir": "/runner/etcd-backups",
          "snapshot_copies": {"backup_host": "backup-1", "s3": {"bucket": "etcd-backups", "prefix": "cell1/",
                                                                "endpoint_url": "https://s3.example.net"}}}
SURVEY_TYPES = {"text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect"}


class Captured(Exception):
    pass


def awx_argspec(module_name):
    """The argument spec an awx.awx module's main() builds (it hands it to ControllerAPIModule)."""
    mod = importlib.import_module("ansible_collections.awx.awx.plugins.modules.%s" % module_name)

    class Capture:
        def __init__(self, argument_spec, **kwargs):
            raise Captured(argument_spec)

    original = mod.ControllerAPIModule
    mod.ControllerAPIModule = Capture
    try:
        mod.main()
    except Captured as got:
        return got.args[0]
    finally:
        mod.ControllerAPIModule = original
    raise AssertionError("%s did not build an argument spec" % module_name)


def doc_to_spec(options):
    """Documented options -> an argument spec (type, elements, choices, required, suboptions)."""
    spec = {}
    for name, doc in options.items():
        entry = {k: doc[k] for k in ("type", "elements", "choices", "required") if k in doc}
        if "suboptions" in doc:
            entry["options"] = doc_to_spec(doc["suboptions"])
        spec[name] = entry
    return spec


def validate(spec, params, where):
    result = ArgumentSpecValidator(spec).validate(params)
    assert not result.error_messages, (where, result.error_messages)


@pytest.fixture(scope="module")
def defs():
    return awx.definitions(CONFIG)


def validate_templates_and_workflow(found):
    """Every job template, the workflow and each of its nodes against the awx.awx modules' specs."""
    for template in found["job_templates"]:
        validate(awx_argspec("job_template"), template, template["name"])
        assert (ROOT / template["playbook"]).is_file(), template["playbook"]
    validate(awx_argspec("workflow_job_template"), found["workflow"], "workflow")
    docs = yaml.safe_load(importlib.import_module(
        "ansible_collections.awx.awx.plugins.modules.workflow_job_template").DOCUMENTATION)
    node_spec = doc_to_spec(docs["options"]["workflow_nodes"]["suboptions"])
    for node in found["workflow"]["workflow_nodes"]:
        validate(node_spec, node, node["identifier"])


def test_every_definition_passes_its_awx_module_argument_spec(defs):
    validate(awx_argspec("credential_type"), defs["credential_type"], "credential_type")
    validate(awx_argspec("credential"), dict(defs["snapshot_credential"], inputs={"key": "k" * 16}), "credential")
    validate(awx_argspec("schedule"), defs["schedule"], "schedule")
    validate_templates_and_workflow(defs)


def test_workflow_order_templates_and_approval(defs):
    nodes = {n["identifier"]: n for n in defs["workflow"]["workflow_nodes"]}
    order, step = [], "preflight"
    while step:
        order.append(step)
        following = nodes[step]["related"]["success_nodes"]
        step = following[0]["identifier"] if following else None
    assert order == ["preflight", "etcd_backup", "control_plane", "addons", "canary", "approval", "node_pool"]
    assert nodes["approval"]["unified_job_template"]["type"] == "workflow_approval"
    names = {t["name"] for t in defs["job_templates"]}
    for step in order:
        if step != "approval":
            assert nodes[step]["unified_job_template"]["name"] in names
    assert {t["playbook"] for t in defs["job_templates"]} == {
        "playbooks/%s.yml" % p for p in ("preflight", "etcd_backup", "control_plane", "addons", "canary", "node_pool",
                                         "upgrade_wave", "validate", "maintenance")}
    for template in defs["job_templates"]:
        assert (ROOT / template["playbook"]).is_file(), template["playbook"]
        key = awx.SNAPSHOT_CREDENTIAL_TYPE.replace("gpufleet", "gpufleet cell1")
        assert (key in template["credentials"]) == template["playbook"].endswith(("etcd_backup.yml",
                                                                                  "upgrade_wave.yml"))


def test_playbook_passes_every_field_of_every_definition(defs):
    plays = yaml.safe_load((ROOT / "playbooks" / "awx_configure.yml").read_text())
    tasks = {next(k for k in t if k.startswith("awx.awx.")): t for t in plays[0]["tasks"]
             if any(k.startswith("awx.awx.") for k in t)}
    sources = {"awx.awx.credential_type": defs["credential_type"], "awx.awx.credential": defs["snapshot_credential"],
               "awx.awx.job_template": defs["job_templates"][0], "awx.awx.workflow_job_template": defs["workflow"],
               "awx.awx.schedule": defs["schedule"]}
    assert set(tasks) == set(sources)
    for module, task in tasks.items():
        args = dict(task[module])
        assert set(args) <= set(awx_argspec(module.split(".")[-1])), (module, sorted(args))
        if module == "awx.awx.credential":  # the secret comes from the vault, under no_log, not from the definitions
            assert args.pop("inputs") == {"key": "{{ gpufleet_awx_snapshot_key }}"} and task["no_log"] is True
        passed = {re.search(r"\.(\w+) }}$", str(v)).group(1) for v in args.values()}
        assert passed == set(sources[module]), (module, sorted(set(sources[module]) ^ passed))
        assert set(args) == passed  # each field under its own name


def test_surveys_are_well_formed_and_break_glass_is_empty_by_default(defs):
    for survey in [t["survey_spec"] for t in defs["job_templates"]] + [defs["workflow"]["survey_spec"]]:
        variables = [q["variable"] for q in survey["spec"]]
        assert len(variables) == len(set(variables))
        for q in survey["spec"]:
            assert q["type"] in SURVEY_TYPES and isinstance(q["required"], bool)
            assert q["question_name"] and q["question_description"]
            if q["type"] == "text" and q["default"]:  # a required answer may start empty
                assert q["min"] <= len(q["default"]) <= q["max"], q
            if q["variable"].startswith("gpufleet_break_glass_"):
                assert q["default"] == "" and not q["required"]
    wave = next(t for t in defs["job_templates"] if t["playbook"].endswith("upgrade_wave.yml"))
    assert awx.launch(wave, {}) == {"gpufleet_expected_cell": "cell1", "gpufleet_target_version": "v1.36.3",
                                    "etcd_snapshot_backup_dir": "/runner/etcd-backups",
                                    "etcd_snapshot_backup_host": "backup-1", "etcd_snapshot_s3_bucket": "etcd-backups",
                                    "etcd_snapshot_s3_prefix": "cell1/",
                                    "etcd_snapshot_s3_endpoint_url": "https://s3.example.net",
                                    # AWX sends an empty default that passes its checks (min 0): read as unset
                                    "gpufleet_break_glass_disable_eviction": "",
                                    "gpufleet_break_glass_force_drain": "", "gpufleet_break_glass_skip_checkpoint": "",
                                    "gpufleet_break_glass_skip_nccl": ""}
    assert wave["credentials"] == ["cell1 ssh", "cell1 api", "gpufleet cell1 etcd snapshot key", "backups s3"]
    preflight = next(t for t in defs["job_templates"] if t["playbook"].endswith("preflight.yml"))
    assert preflight["credentials"] == ["cell1 ssh", "cell1 api"] and preflight["extra_vars"] == {}
    answered = awx.launch(wave, {"gpufleet_break_glass_skip_nccl": "skip nccl on cell1 for v1.36.3"})
    assert answered["gpufleet_break_glass_skip_nccl"] == "skip nccl on cell1 for v1.36.3"
    with pytest.raises(InputError, match="does not ask gpufleet_node"):
        awx.launch(wave, {"gpufleet_node": "gpu-a1"})
    maintenance = next(t for t in defs["job_templates"] if t["playbook"].endswith("maintenance.yml"))
    with pytest.raises(InputError, match="gpufleet_node is required"):
        awx.launch(maintenance, {})


@pytest.mark.parametrize("change, message", [
    ({"cell": "cell 1;drop"}, "awx.cell: expected a name"),
    ({"target": "1.36"}, "is not a full release"),
    ({"credentials": None}, "awx.credentials: expected"),
    ({"window": {"rrule": "every saturday"}}, "awx.window.rrule: 'every' is not a part AWX takes"),
    ({"backup_dir": "out/etcd"}, "awx.backup_dir: expected an absolute directory in the job"),
    ({"snapshot_copies": None}, "awx.snapshot_copies: give backup_host .* a container that ends with the job"),
    ({"snapshot_copies": {"backup_dir": "/x"}}, "awx.snapshot_copies: give backup_host"),
    ({"snapshot_copies": {"backup_host": "b1", "rsync": "x"}}, "awx.snapshot_copies: unknown field.s. rsync"),
    ({"snapshot_copies": {"backup_host": "b1", "backup_host_dir": "var/b"}},
     "awx.snapshot_copies.backup_host_dir: expected an absolute directory"),
    ({"snapshot_copies": {"s3": {"bucket": "Etcd_Backups"}}}, "awx.snapshot_copies.s3.bucket: expected an S3 bucket"),
    ({"snapshot_copies": {"s3": {"bucket": "etcd", "prefix": "/cell1"}}}, "awx.snapshot_copies.s3.prefix"),
    ({"snapshot_copies": {"s3": {"bucket": "etcd", "endpoint_url": "s3.example.net"}}},
     "awx.snapshot_copies.s3.endpoint_url: expected an http.s. URL"),
    ({"snapshot_copies": {"s3": {"bucket": "etcd", "acl": "public-read"}}}, "awx.snapshot_copies.s3: unknown field"),
    ({"credentials": {"machine": "m", "kubernetes": "k"}}, "awx.credentials.aws: snapshot_copies.s3 needs"),
])
def test_bad_configuration_is_refused_naming_the_field(change, message):
    with pytest.raises(InputError, match=message):
        awx.definitions(dict(CONFIG, **change))


# -- the maintenance window's rule, refused where AWX refuses it --------------------------------------------------
# AWX's own checks and words: SchedulePreviewSerializer.validate_rrule in awx/api/serializers.py and Schedule.rrulestr
# (with coerce_naive_until and _fast_forward_rrule) in awx/main/models/schedules.py, in the ansible/awx repository;
# the rule is expected in AWX's functional tests of schedules (awx/main/tests/functional/api/test_schedules.py there).
# Multiple BYMONTHDAYs or BYMONTHs, BYYEARDAY and BYWEEKNO: refused by AWX's validate_rrule before rule sets.
NOW = datetime.datetime(2026, 12, 5, 12, 0, tzinfo=datetime.UTC)
START = "DTSTART;TZID=UTC:20261205T020000 "


@pytest.mark.parametrize("rule, words", [
    ("RRULE:FREQ=DAILY;INTERVAL=1", "'Valid DTSTART required in rrule'"),
    ("DTSTART:NONSENSE RRULE:FREQ=DAILY;INTERVAL=1", "'Valid DTSTART required in rrule'"),
    ("DTSTART:20300308T050000Z DTSTART:20310308T050000Z RRULE:FREQ=DAILY;INTERVAL=1",
     "'Multiple DTSTART is not supported'"),
    ("DTSTART:20300308T050000 RRULE:FREQ=DAILY;INTERVAL=1", "'DTSTART cannot be a naive datetime'"),
    ("DTSTART:20300308T050000Z", "'One or more rule required in rrule'"),
    (START + "RRULE:FREQ=WEEKLY;BYDAY=SA", "'INTERVAL required in rrule' (RRULE:FREQ=WEEKLY;BYDAY=SA)"),
    ("DTSTART:20300308T050000Z RRULE:NONSENSE", "'INTERVAL required in rrule'"),
    ("DTSTART:20300308T050000Z RRULE:INTERVAL=1", "'rrule parsing failed validation' (FREQ is required"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=SECONDLY;INTERVAL=5;COUNT=6", "'SECONDLY is not supported'"),
    # AWX looks for SECONDLY anywhere in the rule; dateutil would take the last FREQ
    ("DTSTART:20300308T050000Z RRULE:FREQ=SECONDLY;FREQ=WEEKLY;INTERVAL=5", "'SECONDLY is not supported'"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=MONTHLY;INTERVAL=1;BYMONTHDAY=3,4", "'Multiple BYMONTHDAYs not supported'"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=YEARLY;INTERVAL=1;BYMONTH=1,2", "'Multiple BYMONTHs not supported'"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=5MO", "'BYDAY with numeric prefix not supported'"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=YEARLY;INTERVAL=1;BYYEARDAY=100", "'BYYEARDAY not supported'"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=YEARLY;INTERVAL=1;BYWEEKNO=20", "'BYWEEKNO not supported'"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=DAILY;INTERVAL=10;COUNT=500;UNTIL=20400925T104941Z",
     "'RRULE may not contain both COUNT and UNTIL'"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=DAILY;INTERVAL=1;COUNT=2000", "'COUNT > 999 is unsupported'"),
    ("DTSTART;TZID=US-Eastern:20300308T050000 RRULE:FREQ=MINUTELY;INTERVAL=10;COUNT=5",
     "'A valid TZID must be provided (e.g., America/New_York)' (no time zone 'US-Eastern'"),
    ("DTSTART;TZID=Not-A-Real-Timezone:20300308T050000 RRULE:FREQ=DAILY;INTERVAL=1", "'A valid TZID must be provided"),
    ("DTSTART;TZID=UTC;VALUE=DATE-TIME:20300308T050000 RRULE:FREQ=DAILY;INTERVAL=1", "'A valid TZID must be provided"),
    ("DTSTART;TZID=/usr/share/zoneinfo/UTC:20300308T050000 RRULE:FREQ=DAILY;INTERVAL=1",
     "'A valid TZID must be provided"),
    ("DTSTART;TZID=../../zoneinfo/UTC:20300308T050000 RRULE:FREQ=DAILY;INTERVAL=1", "'A valid TZID must be provided"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=REGULARLY;INTERVAL=1",
     "rrule parsing failed validation: invalid 'FREQ': REGULARLY"),
    ("DTSTART;TZID=America/New_York:20300308T050000Z RRULE:FREQ=DAILY;INTERVAL=1", "'rrule parsing failed validation"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=DAILY;INTERVAL=1;UNTIL=20301399T000000",
     "'rrule parsing failed validation: time data"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=DAILY;INTERVAL=1 EXDATE:20300309T050000Z", "'EXDATE not allowed in rrule'"),
    ("DTSTART:20300308T050000Z RRULE:FREQ=DAILY;INTERVAL=1 RDATE:20300309T050000Z", "'RDATE not allowed in rrule'"),
])
def test_a_rule_awx_refuses_is_refused_in_awx_words_with_an_example(rule, words):
    with pytest.raises(InputError) as refused:
        awx.check_rrule(rule, now=NOW)
    message = str(refused.value)
    assert message.startswith("awx.window.rrule: AWX refuses it: "), message
    assert words in message, message
    assert "such as %r" % awx.RRULE_EXAMPLE in message and message.endswith("got %r" % rule)


@pytest.mark.parametrize("rule, message", [
    (5, "expected a string"),
    (awx.RRULE_EXAMPLE + "\n", "expected ASCII on one line"),
    ("DTSTART;TZID=UTC:\uff12\uff10261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1", "expected ASCII"),
    ("every saturday", "'every' is not a part AWX takes"),
    ("dtstart;tzid=UTC:20261205T020000 rrule:freq=weekly;interval=1",
     "'dtstart;tzid=UTC:20261205T020000' is not a part"),
    # RFC 5545 wants a positive INTERVAL; with 0, dateutil repeats the same period without end
    (START + "RRULE:FREQ=DAILY;INTERVAL=0", "INTERVAL must be a positive integer"),
    # AWX finds COUNT and UNTIL in upper case only: its naive-UNTIL coercion fails on a lower-case until=
    (START + "RRULE:FREQ=WEEKLY;INTERVAL=1;until=20991231T000000Z", "write the rule in upper case"),
    (START + "RRULE:FREQ=WEEKLY;INTERVAL=1;INTERVAL=2", "INTERVAL given more than once (RFC 5545"),
])
def test_a_rule_that_is_not_one_is_refused_with_an_example(rule, message):
    with pytest.raises(InputError, match="^awx.window.rrule: %s.*such as '%s'" % (re.escape(message),
                                                                                   re.escape(awx.RRULE_EXAMPLE))):
        awx.check_rrule(rule, now=NOW)


@pytest.mark.parametrize("rule", [
    awx.RRULE_EXAMPLE,
    "DTSTART;TZID=Etc/GMT+5:20261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA",  # the old pattern refused it
    "DTSTART;TZID=America/New_York:20261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA",
    "DTSTART:20261205T020000Z RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA",
    "DTSTART;TZID=America/Argentina/Buenos_Aires:20261205T020000 RRULE:FREQ=DAILY;INTERVAL=2",
    START + "RRULE:FREQ=MONTHLY;INTERVAL=1;BYDAY=-1SU",  # the last Sunday: AWX's pattern takes a signed prefix
    START + "RRULE:FREQ=MONTHLY;INTERVAL=1;BYDAY=SU;BYSETPOS=-1",
    START + "RRULE:FREQ=YEARLY;INTERVAL=1;BYMONTH=3;BYMONTHDAY=1",
    "DTSTART;TZID=UTC:21000101T020000 RRULE:FREQ=DAILY;INTERVAL=1;COUNT=999",  # COUNT at its limit
    START + "RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA RRULE:FREQ=DAILY;INTERVAL=1;COUNT=3 EXRULE:FREQ=MONTHLY;INTERVAL=1",
    "DTSTART:20000101T000000Z RRULE:FREQ=MINUTELY;INTERVAL=7",  # fast-forwarded as AWX does, not walked from 2000
    "DTSTART;VALUE=DATE-TIME;TZID=UTC:20261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1",
])
def test_a_rule_awx_accepts_passes(rule):
    awx.check_rrule(rule, now=NOW)
    awx.definitions(dict(CONFIG, window={"rrule": rule}))


def test_a_rule_that_never_fires_again_is_refused():
    ended = START + "RRULE:FREQ=WEEKLY;INTERVAL=1;UNTIL=20261128T020000Z"
    with pytest.raises(InputError, match=r"^awx.window.rrule: no occurrence after 2026-12-05 12:00 UTC: the "
                                         r"maintenance window would never open .* such as '%s'" % re.escape(
                                             awx.RRULE_EXAMPLE)):
        awx.check_rrule("DTSTART;TZID=UTC:20261107T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;UNTIL=20261128T020000Z",
                        now=NOW)
    with pytest.raises(InputError, match="no occurrence after"):
        awx.check_rrule(ended, now=NOW)
    with pytest.raises(InputError, match="no occurrence after"):  # COUNT used up
        awx.check_rrule("DTSTART;TZID=UTC:20261101T020000 RRULE:FREQ=DAILY;INTERVAL=1;COUNT=3", now=NOW)
    with pytest.raises(InputError, match="no occurrence after"):  # the current time by default
        awx.definitions(dict(CONFIG, window={"rrule": "DTSTART:20250104T020000Z RRULE:FREQ=WEEKLY;INTERVAL=1;"
                                                      "UNTIL=20250301T020000Z"}))
    awx.check_rrule("DTSTART;TZID=UTC:20261107T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;UNTIL=20261128T020000Z",
                    now=datetime.datetime(2026, 11, 20, tzinfo=datetime.UTC))  # before its end it passes


def test_the_search_for_the_next_occurrence_is_bounded(monkeypatch):
    """dateutil walks a rule whose parts never coincide period by period to the year 9999 (for BYSETPOS=2 on a
    MINUTELY rule, hours): the search gives up after RRULE_SEARCH_SECONDS. This rule ends in about a second (no
    occurrence), well past the 0.05 s allowed here."""
    monkeypatch.setattr(awx, "RRULE_SEARCH_SECONDS", 0.05)
    rule = START + "RRULE:FREQ=MONTHLY;INTERVAL=1;BYSETPOS=2"
    with pytest.raises(InputError, match=r"^awx.window.rrule: its next occurrence was not found in 0.05 s: its "
                                         r"parts may never coincide .* such as '%s'" % re.escape(awx.RRULE_EXAMPLE)):
        awx.check_rrule(rule, now=NOW)


def test_a_naive_until_is_read_in_the_zone_of_dtstart_as_awx_reads_it():
    rule = "DTSTART;TZID=America/New_York:20261201T020000 RRULE:FREQ=DAILY;INTERVAL=1;UNTIL=20261205T020000"
    # the last occurrence is 02:00 in New York on 2026-12-05, 07:00 UTC: read as UTC, it would be over by 06:30
    awx.check_rrule(rule, now=datetime.datetime(2026, 12, 5, 6, 30, tzinfo=datetime.UTC))
    with pytest.raises(InputError, match="no occurrence after 2026-12-05 07:30 UTC"):
        awx.check_rrule(rule, now=datetime.datetime(2026, 12, 5, 7, 30, tzinfo=datetime.UTC))


# -- a fleet: the run and report templates, and the rollout workflow with an approval between rings -----------------
FLEET_CONFIG = {"organization": "Default", "project": "gpufleet", "inventory": "controller",
                "execution_environment": "gpufleet", "credentials": {"machine": "fleet ssh"},
                "out_dir": "/runner/durable/gpufleet", "instance_groups": ["fleet-pvc"],
                "latest_patches": {"1.36": {"version": "v1.36.3", "released": "2026-07-22"}}}


def example_fleet():
    return yaml.safe_load((ROOT / "docs" / "fleet-example.yml").read_text())["gpufleet_fleet"]


@pytest.fixture(scope="module")
def fleet_defs():
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet
    fleet = example_fleet()
    return awx.fleet_definitions(FLEET_CONFIG, fleet, plan_fleet(fleet))


def test_fleet_definitions_pass_their_awx_module_argument_specs(fleet_defs):
    validate_templates_and_workflow(fleet_defs)


def test_the_rollout_runs_each_ring_held_after_it_with_an_approval_before_each_later_ring(fleet_defs):
    nodes = {n["identifier"]: n for n in fleet_defs["workflow"]["workflow_nodes"]}
    order, step = [], "ring-ring0"
    while step:
        order.append(step)
        related = nodes[step]["related"]
        following = related["success_nodes"] or related["always_nodes"]
        step = following[0]["identifier"] if following else None
    assert nodes["ring-ring2"]["related"]["always_nodes"] == [{"identifier": "report"}]  # also after a failure
    assert nodes["ring-ring2"]["related"]["success_nodes"] == []
    assert order == ["ring-ring0", "approve-ring1", "ring-ring1", "approve-ring2", "ring-ring2", "report"]
    assert set(order) == set(nodes)  # no node off the chain
    assert [nodes[n].get("extra_data") for n in order if n.startswith("ring-")] == [
        {"gpufleet_fleet_until_ring": "ring0"}, {"gpufleet_fleet_until_ring": "ring1"}, {}]
    assert nodes["approve-ring1"]["unified_job_template"]["type"] == "workflow_approval"
    run, report = fleet_defs["job_templates"]
    assert (run["playbook"], report["playbook"]) == ("playbooks/fleet.yml", "playbooks/fleet_report.yml")
    assert {nodes[n]["unified_job_template"]["name"] for n in order if n.startswith("ring-")} == {run["name"]}
    assert nodes["report"]["unified_job_template"]["name"] == report["name"]
    # every run reads the ledger back from durable storage; the fleet travels as data
    for template in (run, report):
        assert template["extra_vars"]["gpufleet_out_dir"] == "/runner/durable/gpufleet"
        assert template["extra_vars"]["gpufleet_fleet"] == example_fleet()
        assert template["credentials"] == ["fleet ssh"] and template["instance_groups"] == ["fleet-pvc"]
    assert report["extra_vars"]["gpufleet_fleet_latest_patches"] == FLEET_CONFIG["latest_patches"]
    # a workflow node's until_ring is a survey answer AWX accepts, as a launch with it gives the playbook
    assert awx.launch(run, {"gpufleet_fleet_until_ring": "ring0"})["gpufleet_fleet_until_ring"] == "ring0"
    # launched with no answer (the workflow's last ring node): AWX sends the retry's empty default, not the
    # multiplechoice's "" (not one of its choices) - and fleet.yml must take "" as no retry
    bare = awx.launch(run, {})
    assert bare["gpufleet_fleet_retry"] == "" and "gpufleet_fleet_until_ring" not in bare
    assert bare["gpufleet_fleet_break_lock"] == ""  # likewise: "" breaks nothing

    def tasks(block):
        for task in block:
            yield task
            for key in ("block", "rescue", "always"):
                yield from tasks(task.get(key) or [])
    plays = yaml.safe_load((ROOT / "playbooks" / "fleet.yml").read_text())
    retry = next(t for t in tasks(plays[0]["tasks"]) if "gpufleet_fleet_retry" in str(t.get("when", "")))
    assert retry["when"] == "gpufleet_fleet_retry | default('') | length > 0"
    lock = next(t for t in tasks(plays[0]["tasks"]) if (t.get("gpufleet.upgrade.fleet_ledger") or {}).get(
        "action") == "lock")
    assert lock["gpufleet.upgrade.fleet_ledger"]["confirmation"] == \
        "{{ gpufleet_fleet_break_lock | default(omit, true) }}"  # true: an empty answer is omitted
    choices = next(q for q in run["survey_spec"]["spec"] if q["variable"] == "gpufleet_fleet_until_ring")["choices"]
    assert choices == ["ring0", "ring1", "ring2"]


def test_the_fleet_playbook_passes_every_field_of_every_definition(fleet_defs):
    plays = yaml.safe_load((ROOT / "playbooks" / "awx_configure_fleet.yml").read_text())
    tasks = {next(k for k in t if k.startswith("awx.awx.")): t for t in plays[0]["tasks"]
             if any(k.startswith("awx.awx.") for k in t)}
    sources = {"awx.awx.job_template": fleet_defs["job_templates"][0],
               "awx.awx.workflow_job_template": fleet_defs["workflow"]}
    assert set(tasks) == set(sources)
    for module, task in tasks.items():
        args = dict(task[module])
        passed = {re.search(r"\.(\w+) }}$", str(v)).group(1) for v in args.values()}
        assert passed == set(sources[module]) and set(args) == passed, (module, sorted(set(sources[module]) ^ passed))


@pytest.mark.parametrize("change, message", [
    ({"credentials": {"machine": "ssh", "kubernetes": "api"}}, "awx.credentials.kubernetes: a fleet job takes none"),
    ({"out_dir": "out"}, "awx.out_dir: expected an absolute directory on durable storage"),
    ({"out_dir": None}, "awx.out_dir"),
    ({"latest_patches": None}, "latest_patches"),
    ({"inventory": ""}, "awx.inventory"),
    ({"instance_groups": "fleet-pvc"}, "awx.instance_groups: expected a list"),
])
def test_bad_fleet_configuration_is_refused_naming_the_field(change, message):
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet
    fleet = example_fleet()
    with pytest.raises(InputError, match=message):
        awx.fleet_definitions(dict(FLEET_CONFIG, **change), fleet, plan_fleet(fleet))


# -- hostile values (issue 33): wrong types, Jinja, a trailing newline, full-width letters ------------------------
S3 = CONFIG["snapshot_copies"]["s3"]


@pytest.mark.parametrize("change, message", [
    ({"organization": 5}, "awx.organization: expected a name"),
    ({"target": 136}, "awx.target: expected a release such as v1.36.3, got int"),
    ({"target": ["1.36.3"]}, "awx.target: expected a release"),
    ({"credentials": {"machine": ["m"], "kubernetes": "k"}}, "awx.credentials.machine: expected a name"),
    ({"credentials": dict(CONFIG["credentials"], aws=7)}, "awx.credentials.aws"),
    ({"credentials": dict(CONFIG["credentials"], vault="v")}, r"awx.credentials: unknown field\(s\) vault"),
    ({"window": "weekly"}, "awx.window: expected {rrule: ...}"),
    ({"window": {"rrule": 5}}, "awx.window.rrule: expected a string"),
    ({"backup_dir": 5}, "awx.backup_dir: expected an absolute directory"),
    ({"playbook_dir": ["playbooks"]}, "awx.playbook_dir: expected a relative directory"),
    ({"playbook_dir": "../elsewhere"}, "awx.playbook_dir: expected a relative directory"),
    ({"playbook_dir": "playbooks/{{ x }}"}, "awx.playbook_dir: expected a relative directory"),
    ({"target": "1.36.3\n"}, "awx.target: .*control character"),
    ({"snapshot_copies": {"backup_host": 5}}, "awx.snapshot_copies.backup_host: expected a name"),
    ({"snapshot_copies": {"s3": "etcd"}}, "awx.snapshot_copies.s3: expected {bucket"),
    ({"snapshot_copies": {"s3": dict(S3, bucket=5)}}, "awx.snapshot_copies.s3.bucket: expected an S3 bucket"),
    ({"snapshot_copies": {"s3": dict(S3, prefix=5)}}, "awx.snapshot_copies.s3.prefix: expected a key prefix"),
    ({"playbook_dirr": "playbooks"}, r"awx: unknown field\(s\) playbook_dirr"),
    # a trailing newline: `$` matches before it, fullmatch does not
    ({"organization": "Default\n"}, "awx.organization: expected a name"),
    ({"inventory": "cell1\n"}, "awx.inventory: expected a name"),
    ({"snapshot_copies": {"s3": dict(S3, bucket="etcd-backups\n")}}, "awx.snapshot_copies.s3.bucket"),
    ({"snapshot_copies": {"s3": dict(S3, endpoint_url="https://s3.example.net\n")}},
     "awx.snapshot_copies.s3.endpoint_url"),
    ({"snapshot_copies": {"s3": dict(S3, region="us-east-1\n")}}, "awx.snapshot_copies.s3.region"),
    ({"window": {"rrule": CONFIG["window"]["rrule"] + "\n"}}, "awx.window.rrule: expected ASCII on one line"),
    ({"backup_dir": "/runner/etcd-backups\n"}, "awx.backup_dir: .*control character"),
    ({"snapshot_copies": {"s3": dict(S3, prefix="cell1/\n")}}, "awx.snapshot_copies.s3.prefix: .*control character"),
    # full-width letters and digits (\d and str.isalnum() take them)
    ({"cell": "\uff43\uff45\uff4c\uff4c1"}, "awx.cell: expected a name"),
    ({"snapshot_copies": {"s3": dict(S3, endpoint_url="https://s3.example.net:\uff14\uff14\uff13")}},
     "awx.snapshot_copies.s3.endpoint_url"),
    ({"window": {"rrule": "DTSTART;TZID=UTC:\uff12\uff10261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA"}},
     "awx.window.rrule: expected ASCII"),
])
def test_hostile_values_are_refused_naming_the_field(change, message):
    with pytest.raises(InputError, match=message):
        awx.definitions(dict(CONFIG, **change))


JINJA = ["{{ lookup('pipe', 'id') }}", "{% for x in range(9) %}x{% endfor %}", "{# comment #}"]


@pytest.mark.parametrize("jinja", JINJA)
@pytest.mark.parametrize("change, field", [
    (lambda j: {"backup_dir": "/runner/" + j}, "awx.backup_dir"),
    (lambda j: {"snapshot_copies": {"s3": dict(S3, prefix="cell1/" + j)}}, "awx.snapshot_copies.s3.prefix"),
    (lambda j: {"snapshot_copies": {"backup_host": "b1", "backup_host_dir": "/srv/" + j}},
     "awx.snapshot_copies.backup_host_dir"),
    (lambda j: {"snapshot_copies": {j: "b1"}}, "awx.snapshot_copies"),
])
def test_jinja_that_would_reach_awx_is_refused_naming_the_field(change, field, jinja):
    """AWX templates a job template's extra_vars: a value holding Jinja would run on the AWX side."""
    with pytest.raises(InputError, match=re.escape(field) + ".*Jinja"):
        awx.definitions(dict(CONFIG, **change(jinja)))


def test_every_value_the_definitions_emit_is_free_of_jinja_but_the_credential_injector(defs):
    def strings(node, path=""):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from strings(k, path + ".<key>")
                yield from strings(v, "%s.%s" % (path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from strings(v, "%s[%d]" % (path, i))
        elif isinstance(node, str):
            yield path, node
    templated = [(p, v) for p, v in strings(defs) if re.search(r"\{[{%#]", v)]
    assert templated == [(".credential_type.injectors.extra_vars.etcd_snapshot_encryption_key", "{{ key }}")]


@pytest.mark.parametrize("change, message", [
    ({"latest_patches": [1]}, "latest_patches: expected a mapping"),
    ({"latest_patches": "1.36"}, "latest_patches: expected a mapping"),
    ({"latest_patches": {"1.36": {"version": "v1.36.3", "released": "{{ now() }}"}}}, "latest_patches"),
    ({"instance_groups": ["fleet-pvc\n"]}, "awx.instance_groups: expected a list"),
    ({"instance_groups": [["fleet-pvc"]]}, "awx.instance_groups: expected a list"),
    ({"playbook_dir": 5}, "awx.playbook_dir: expected a relative directory"),
    ({"out_dir": "/runner/{{ x }}"}, "awx.out_dir.*Jinja"),
    ({"out_dir": 7}, "awx.out_dir: expected an absolute directory"),
    ({"organization": "Default\n"}, "awx.organization: expected a name"),
    ({"ring": "ring0"}, r"awx: unknown field\(s\) ring"),
])
def test_hostile_fleet_configuration_is_refused_naming_the_field(change, message):
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet
    fleet = example_fleet()
    with pytest.raises(InputError, match=message):
        awx.fleet_definitions(dict(FLEET_CONFIG, **change), fleet, plan_fleet(fleet))


@pytest.mark.parametrize("jinja", JINJA)
def test_jinja_in_the_fleet_that_would_reach_awx_is_refused(jinja):
    """The fleet travels to AWX as the templates' extra_vars (gpufleet_fleet): Jinja in any of its values is refused
    naming where it is, whatever the fleet's own checks let through."""
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet
    fleet = example_fleet()
    plan = plan_fleet(fleet)
    fleet["cells"][0]["inventory"] = "inventories/" + jinja
    with pytest.raises(InputError, match=re.escape("gpufleet_fleet.cells[0].inventory") + ".*Jinja"):
        awx.fleet_definitions(FLEET_CONFIG, fleet, plan)


def test_jinja_nested_thousands_deep_is_refused_not_a_recursion_error():
    deep = cur = []
    for _ in range(3000):
        cur.append([])
        cur = cur[0]
    cur.append("{{ lookup('pipe', 'id') }}")
    with pytest.raises(InputError, match="holds Jinja"):
        awx.no_templates(deep, "gpufleet_awx")
