"""Who calls a deprecated API, read from a real apiserver's audit log (tests/fixtures/audit/README.md)."""
from __future__ import annotations

import datetime
import gzip
import io
import json
import os
import pathlib

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import audit_callers
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.preflight_report import render_markdown
from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import scan_audit, target_version
from gpufleet_lab import cluster as lab_cluster
from tests.conftest import FIXTURES, fixture_text

EXCERPT = FIXTURES / "audit" / "real-1.35.4-cp-2-excerpt.log"
CP1 = FIXTURES / "audit" / "real-1.35.4-cp-1-excerpt.log"
MANIFEST = fixture_text("kubeadm", "real-1.35.4-kube-apiserver-audit.yaml")
KUBEADM_CONFIG = json.loads(fixture_text("kubeadm", "real-1.35.4-kubeadm-config-audit.json"))
LAB_POLICY = lab_cluster.AUDIT_POLICY
LEGACY = "system:serviceaccount:gpufleet-lab-soak:legacy-resizer"
AGENT = "csi-resizer/v1.11.2 (linux/amd64) kubernetes/0ad7fb3"
GROUPS = audit_callers.removal_groups([1, 35])


def lines(path=EXCERPT):
    return path.read_text().splitlines()


def events(path=EXCERPT):
    return [json.loads(line) for line in lines(path)]


def latest() -> datetime.datetime:
    return max(audit_callers.parse_time(e["stageTimestamp"]) for e in events())


def settings(path: pathlib.Path, **extra):
    return dict({"path": str(path / "audit.log"), "max_backup": 2, "max_age_days": 0, "compress": False}, **extra)


def log_dir(tmp_path: pathlib.Path, text=None) -> pathlib.Path:
    (tmp_path / "audit.log").write_bytes(EXCERPT.read_bytes() if text is None else text)
    return tmp_path


def joined(items) -> bytes:
    return ("\n".join(items) + "\n").encode()


def read(tmp_path, minutes=0, now=None, **extra):
    return audit_callers.read_host("cp-2", settings(tmp_path, **extra), minutes, now or latest())


def legacy_count(reading, verb="list"):
    return [r["count"] for r in reading["callers"] if r["user"] == LEGACY and r["verb"] == verb]


# -- the manifest and the policy -------------------------------------------------------------------------------------
def test_the_real_manifest_names_the_log_and_policy_on_the_host_through_its_hostpath_volumes():
    got = audit_callers.audit_settings(MANIFEST, "cp-2: kube-apiserver.yaml")
    assert got == {"path": "/var/log/kubernetes/audit/audit.log",
                   "container_path": "/var/log/kubernetes/audit/audit.log",
                   "policy": "/etc/kubernetes/audit-policy.yaml", "max_backup": 2, "max_age_days": 0, "compress": False,
                   "minor": [1, 35]}
    # the host directory is elsewhere than the container's: the log is read where the host keeps it
    moved = MANIFEST.replace("      path: /var/log/kubernetes/audit\n", "      path: /srv/audit/cp-2\n")
    assert moved != MANIFEST
    assert audit_callers.audit_settings(moved, "cp-2")["path"] == "/srv/audit/cp-2/audit.log"
    sub = moved.replace("    - mountPath: /var/log/kubernetes/audit\n      name: audit-log\n",
                        "    - mountPath: /var/log/kubernetes/audit\n      name: audit-log\n      subPath: k8s\n")
    assert sub != moved and audit_callers.audit_settings(sub, "cp-2")["path"] == "/srv/audit/cp-2/k8s/audit.log"
    dotted = MANIFEST.replace("--audit-log-path=/var/log/kubernetes/audit/audit.log",
                              "--audit-log-path=/var/log/kubernetes/audit/../../../../etc/audit.log")
    with pytest.raises(InputError, match="the audit log /etc/audit.log is on no hostPath volume"):
        audit_callers.audit_settings(dotted, "cp-2")
    # an emptyDir mounted over the log's directory hides the hostPath below it: the log is in the pod
    empty = MANIFEST.replace("    - mountPath: /var/log/kubernetes/audit\n      name: audit-log\n",
                             "    - mountPath: /var/log/kubernetes/audit\n      name: scratch\n"
                             "    - mountPath: /var/log\n      name: audit-log\n").replace(
        "  volumes:\n", "  volumes:\n  - emptyDir: {}\n    name: scratch\n")
    assert empty.count("scratch") == 2
    with pytest.raises(InputError, match="is on no hostPath volume of the pod: it is inside the apiserver's pod"):
        audit_callers.audit_settings(empty, "cp-2")


@pytest.mark.parametrize("edit, match", [
    (lambda t: t.replace("    - --audit-log-path=/var/log/kubernetes/audit/audit.log\n", ""),
     "has no --audit-log-path: auditing to a file is off.*ClusterConfiguration.*gpufleet_audit_callers: false"),
    (lambda t: t.replace("--audit-log-path=/var/log/kubernetes/audit/audit.log", "--audit-log-path=-"),
     "it logs to stdout"),
    (lambda t: t.replace("    - --audit-policy-file=/etc/kubernetes/audit-policy.yaml\n", ""),
     "has no --audit-policy-file: the apiserver audits nothing"),
    (lambda t: t.replace("    - --audit-log-maxbackup=2\n",
                         "    - --audit-log-maxbackup=2\n    - --audit-log-format=legacy\n"),
     "as 'legacy'.*json"),
    (lambda t: t.replace("--audit-log-maxbackup=2", "--audit-log-maxbackup=two"), "not a whole number"),
    (lambda t: t.replace("    - mountPath: /var/log/kubernetes/audit\n      name: audit-log\n", ""),
     "the audit log /var/log/kubernetes/audit/audit.log is on no hostPath volume of the pod: it is inside the "
     "apiserver's pod"),
    (lambda t: "<html>502 Bad Gateway</html>", "not a static pod manifest"),
])
def test_a_manifest_that_cannot_name_a_json_audit_log_on_the_host_is_refused(edit, match):
    text = edit(MANIFEST)
    assert text != MANIFEST
    with pytest.raises(InputError, match=match):
        audit_callers.audit_settings(text, "cp-2: kube-apiserver.yaml")


def test_a_policy_is_judged_against_every_group_removed_after_the_running_release():
    """A cell at 1.36 going to 1.38 in two hops: storage.k8s.io and networking.k8s.io (removals in 1.37) are guarded as
    well as resource.k8s.io (1.38) - the running apiserver's release decides, not the target."""
    assert {"storage.k8s.io", "networking.k8s.io", "resource.k8s.io"} <= audit_callers.removal_groups([1, 36])
    assert audit_callers.removal_groups([1, 37]) == {"resource.k8s.io"}
    hiding = ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n"
              "  resources: [{group: storage.k8s.io}]\n- level: Metadata\n")
    with pytest.raises(InputError, match="covers API group 'storage.k8s.io'"):
        audit_callers.check_policy(hiding, "p", audit_callers.removal_groups([1, 36]))
    audit_callers.check_policy(hiding, "p", audit_callers.removal_groups([1, 37]))  # nothing left to hide there
    with pytest.raises(GpufleetError):
        audit_callers.check_policy("rules: [unclosed", "p", GROUPS)


def test_the_labs_metadata_policy_passes_and_a_policy_that_can_hide_a_deprecated_call_is_refused():
    audit_callers.check_policy(LAB_POLICY, "cp-2: policy", GROUPS)
    assert {"storage.k8s.io", "networking.k8s.io", "resource.k8s.io"} <= GROUPS
    assert "apps" not in GROUPS and "apps" in audit_callers.removal_groups()  # apps/v1beta1: removed in 1.16
    head = "apiVersion: audit.k8s.io/v1\nkind: Policy\n"
    refused = {
        "omitStages: [ResponseComplete]\nrules:\n- level: Metadata\n": "omits the ResponseComplete stage",
        "rules:\n- level: Metadata\n  omitStages: [ResponseComplete]\n": "rule 1 omits the ResponseComplete stage",
        "rules:\n- level: None\n  users: [system:kube-proxy]\n- level: Metadata\n":
            "rule 1 \\(level None\\) matches every resource request of the users",
        "rules:\n- level: None\n  resources: [{group: storage.k8s.io}]\n- level: Metadata\n":
            "rule 1 \\(level None\\) covers API group 'storage.k8s.io'",
        "rules:\n- level: None\n  resources: [{group: '*'}]\n- level: Metadata\n":
            "rule 1 \\(level None\\) covers API group '\\*'",
        "rules:\n- level: Metadata\n  resources: [{group: ''}]\n": "has no rule that logs every resource request",
        "rules: []\n": "has no rules",
    }
    for body, match in refused.items():
        with pytest.raises(InputError, match="cp-2: policy %s" % match):
            audit_callers.check_policy(head + body, "cp-2: policy", GROUPS)
    with pytest.raises(InputError, match="not an audit.k8s.io/v1 Policy"):
        audit_callers.check_policy("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: []\n", "cp-2: policy",
                                   GROUPS)
    # what a real policy does and may: leave out events, health checks and kube-proxy's watches of core objects
    audit_callers.check_policy(head + "rules:\n- level: None\n  resources: [{group: '', resources: [events]}]\n"
                               "- level: None\n  users: [system:kube-proxy]\n  verbs: [watch]\n"
                               "  resources: [{group: '', resources: [endpoints, services]}]\n"
                               "- level: None\n  nonResourceURLs: ['/healthz*']\n- level: Request\n", "p", GROUPS)


# -- the log -----------------------------------------------------------------------------------------------------------
def test_the_legacy_client_is_named_by_service_account_and_user_agent(tmp_path):
    got = read(log_dir(tmp_path))
    assert [(r["user"], r["resource"]) for r in got["callers"]] == [(LEGACY, "volumeattributesclasses")]
    legacy = got["callers"][0]
    calls = {e["auditID"] for e in events() if e["user"]["username"] == LEGACY}
    assert legacy["count"] == len(calls) > 0
    assert legacy["api_version"] == "storage.k8s.io/v1beta1" and legacy["removed_release"] == "1.37"
    assert legacy["user_agent"] == AGENT and legacy["verb"] == "list" and legacy["namespace"] == ""
    assert legacy["last"] == max(e["requestReceivedTimestamp"] for e in events()
                                 if e["user"]["username"] == LEGACY)[:19] + "Z"
    assert got["files"] == ["audit.log"] and got["events_from"] == events()[0]["stageTimestamp"][:19] + "Z"
    assert got["lookback_minutes"] == 0 and got["since"] == ""


def test_an_api_with_no_removal_makes_no_row(tmp_path):
    """cp-1's capture: the endpoints controller writes core/v1 Endpoints, deprecated with no removal planned - read
    and left out, so a large cluster's Endpoints readers never fill the rows."""
    log_dir(tmp_path, CP1.read_bytes())
    assert [e for e in events(CP1) if e["objectRef"]["resource"] == "endpoints"
            and e["annotations"].get("k8s.io/deprecated") == "true"]
    got = audit_callers.read_host("cp-1", settings(tmp_path), 0, latest())
    assert got["callers"] == []


def test_a_request_counts_once_and_only_within_the_lookback(tmp_path):
    text = lines()
    legacy = [json.loads(line) for line in text if LEGACY in line]
    # a watch: ResponseStarted, then ResponseComplete with the same auditID; another still open at the end
    first = text.index(next(line for line in text if LEGACY in line))
    started = json.dumps(dict(legacy[0], stage="ResponseStarted", verb="watch"), separators=(",", ":"))
    complete = json.dumps(dict(legacy[0], verb="watch"), separators=(",", ":"))
    still_open = json.dumps(dict(legacy[1], stage="ResponseStarted", verb="watch", auditID="open-watch"),
                            separators=(",", ":"))
    log_dir(tmp_path, joined(text[:first] + [started] + text[first + 1:] + [complete, still_open]))
    count = {r["verb"]: r["count"] for r in read(tmp_path)["callers"] if r["user"] == LEGACY}
    assert count == {"list": len(legacy) - 1, "watch": 2}
    # the capture as it is: the first legacy call falls out of a lookback that begins just after it
    log_dir(tmp_path)
    first_call = audit_callers.parse_time(legacy[0]["stageTimestamp"])
    oldest = audit_callers.parse_time(events()[0]["stageTimestamp"])
    minutes = int((latest() - first_call).total_seconds() // 60)
    now = first_call + datetime.timedelta(minutes=minutes, seconds=1)
    if oldest > now - datetime.timedelta(minutes=minutes):
        pytest.fail("the capture's first event is not old enough for this lookback")
    assert legacy_count(read(tmp_path, minutes=minutes, now=now)) == [
        len([e for e in legacy if audit_callers.parse_time(e["stageTimestamp"]) >= now - datetime.timedelta(
            minutes=minutes)])]
    assert legacy_count(read(tmp_path, minutes=minutes, now=now))[0] < len(legacy)


def test_a_line_that_only_mentions_the_annotation_is_not_a_call(tmp_path):
    """The byte filter finds candidates; the annotation decides: a user agent that contains the words is no call."""
    plain = json.loads(lines()[0])
    plain.update(userAgent="k8s.io/deprecated-tool", annotations={},
                 objectRef={"resource": "flowschemas", "apiGroup": "flowcontrol.apiserver.k8s.io",
                            "apiVersion": "v1beta3"})
    log_dir(tmp_path, joined(lines() + [json.dumps(plain, separators=(",", ":"))]))
    assert [r["user"] for r in read(tmp_path)["callers"]] == [LEGACY]


def test_judged_against_the_target_a_removal_blocks_and_a_later_one_warns(tmp_path):
    reading = read(log_dir(tmp_path))
    warn = scan_audit([reading], ["cp-2"], target_version("v1.36.3"))
    assert [f["severity"] for f in warn] == ["warn"]
    assert warn[0]["service_account"] == "gpufleet-lab-soak/legacy-resizer" and warn[0]["user_agent"] == AGENT
    assert "ServiceAccount gpufleet-lab-soak/legacy-resizer (user agent '%s') calling list volumeattributesclasses" \
        % AGENT in warn[0]["message"] and "removed in v1.37" in warn[0]["message"]
    assert warn[0]["kind"] == "VolumeAttributesClass" and "migrate to storage.k8s.io/v1" in warn[0]["message"]
    block = scan_audit([reading], ["cp-2"], target_version("v1.37.2"))
    assert [f["severity"] for f in block] == ["block"] and block[0]["hosts"] == ["cp-2"]
    assert "blocks the upgrade to 1.37" in block[0]["message"]


def test_hosts_are_merged_and_a_host_without_a_whole_reading_blocks(tmp_path):
    reading = read(log_dir(tmp_path))
    other = dict(reading, host="cp-1")
    both = scan_audit([reading, other], ["cp-1", "cp-2"], target_version("v1.36.3"))
    assert len(both) == 1 and both[0]["hosts"] == ["cp-1", "cp-2"]
    assert both[0]["count"] == 2 * legacy_count(reading)[0]
    missing = scan_audit([reading], ["cp-1", "cp-2"], target_version("v1.36.3"))
    assert [(f["source"], f["severity"]) for f in missing if f.get("unreadable")] == [("audit:cp-1", "block")]
    for bad, why in (({"host": "cp-2", "error": "cp-2: no audit log at /x"}, "no audit log at /x"),
                     ({"host": "cp-2", "failed": True, "msg": "boom"}, "not an audit_callers reading (boom)"),
                     ({"host": "cp-2", "callers": "none"}, "not an audit_callers reading")):
        found = scan_audit([bad], ["cp-2"], target_version("v1.36.3"))
        assert [f["blocks_target"] for f in found] == [True] and why in found[0]["message"], found


def test_the_report_shows_who_calls_in_a_table_with_the_agent_escaped(tmp_path):
    reading = read(log_dir(tmp_path))
    reading["callers"][0]["user_agent"] = "evil | agent\nnext"
    findings = scan_audit([reading], ["cp-2"], target_version("v1.37.2"))
    text = render_markdown({"cluster": "lab-b", "target": "v1.37.2", "removed_apis": findings})
    rows = [line for line in text.splitlines() if line.startswith("| storage.k8s.io/v1beta1")]
    assert len(rows) == 1 and "evil \\| agent next" in rows[0] and rows[0].endswith("| block |")
    assert rows[0].count(" | ") == 8


def _backup(tmp_path, when: str, items, gz=False):
    name = "audit-%s.log%s" % (when, ".gz" if gz else "")
    (tmp_path / name).write_bytes(gzip.compress(joined(items)) if gz else joined(items))
    return name


def test_rotated_backups_are_read_oldest_first_compressed_or_not(tmp_path):
    text = lines()
    log_dir(tmp_path, joined(text[30:]))
    _backup(tmp_path, "2026-12-06T12-44-00.000", text[:15], gz=True)
    _backup(tmp_path, "2026-12-06T12-45-00.000", text[15:30])
    (tmp_path / "other.log").write_text("not ours\n")
    got = read(tmp_path, max_backup=5)
    assert got["files"] == ["audit-2026-12-06T12-44-00.000.log.gz", "audit-2026-12-06T12-45-00.000.log", "audit.log"]
    (tmp_path / "whole").mkdir()
    assert legacy_count(got) == legacy_count(read(log_dir(tmp_path / "whole")))


def test_a_log_that_does_not_reach_back_over_the_lookback_fails_closed(tmp_path):
    """Rotated away or only just turned on, the log cannot say who called before it: the lookback must be covered;
    0 reads whatever it holds."""
    text = lines()
    log_dir(tmp_path, joined(text[20:]))
    _backup(tmp_path, "2026-12-06T12-45-00.000", text[10:20])
    with pytest.raises(InputError, match=r"cp-2: the audit log reaches back only to 2026-12-06T12:4.*the check needs "
                                         r"the last 60 minutes .*1 backups kept; --audit-log-maxbackup 2"):
        read(tmp_path, minutes=60)
    assert legacy_count(read(tmp_path, minutes=0))
    covered = audit_callers.parse_time(events()[10]["stageTimestamp"])
    assert legacy_count(read(tmp_path, minutes=5, now=covered + datetime.timedelta(minutes=5)))


def test_a_stale_log_fails_closed(tmp_path):
    """A log whose newest event is old is not the one the apiserver writes (it writes elsewhere now)."""
    log_dir(tmp_path)
    with pytest.raises(InputError, match="newest event is from 2026-12-06T12:4.*over 15 minutes ago"):
        read(tmp_path, now=latest() + datetime.timedelta(minutes=16))
    assert read(tmp_path, now=latest() + datetime.timedelta(minutes=14))["callers"]


@pytest.mark.parametrize("content, match", [
    (b"", "holds no event"),
    (b"<html><body>502 Bad Gateway</body></html>\n", "line 1 is not an audit.k8s.io/v1 Event"),
    (b'{"kind":"Event","apiVersion":"audit.k8s.io/v1beta1"}\n', "line 1 is not an audit.k8s.io/v1 Event"),
])
def test_a_log_that_is_not_audit_events_fails_closed(tmp_path, content, match):
    log_dir(tmp_path, content)
    with pytest.raises(InputError, match="cp-2: .*%s" % match):
        read(tmp_path)


def test_any_line_that_is_not_an_event_is_named_and_a_call_must_be_whole(tmp_path):
    text = lines()
    log_dir(tmp_path, joined(text[:5] + ["<html>garbage</html>"] + text[5:]))
    with pytest.raises(InputError, match=r"audit.log line 6 is not an audit.k8s.io/v1 Event"):
        read(tmp_path)
    broken = [line if LEGACY not in line else line[:-3] for line in text]  # the annotations kept, the JSON cut
    log_dir(tmp_path, joined(broken))
    with pytest.raises(InputError, match=r"audit.log line \d+ is not an audit event \(JSON\)"):
        read(tmp_path)
    no_id = [line.replace('"auditID":"', '"auditId":"') if LEGACY in line else line for line in text]
    log_dir(tmp_path, joined(no_id))
    with pytest.raises(InputError, match=r"line \d+ has no auditID"):
        read(tmp_path)
    log_dir(tmp_path, joined(text) + text[-1][:50].encode())  # the apiserver is writing its last line
    assert read(tmp_path)["callers"]
    _backup(tmp_path, "2026-12-06T12-40-00.000", [text[0], text[1][:40]])
    path = tmp_path / "audit-2026-12-06T12-40-00.000.log"
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    with pytest.raises(InputError, match="line 2 is cut off"):
        read(tmp_path, max_backup=5)


def test_a_corrupt_compressed_backup_fails_closed(tmp_path):
    log_dir(tmp_path)
    (tmp_path / "audit-2026-12-06T12-40-00.000.log.gz").write_bytes(gzip.compress(joined(lines()))[:-30] + b"x" * 30)
    with pytest.raises(InputError, match="cp-2: the audit log .* cannot be read"):
        read(tmp_path, max_backup=5)


def test_the_oldest_event_is_when_it_was_logged_not_when_a_long_request_began(tmp_path):
    """A watch logged at its end carries the time it began; the log covers from the first line's stage time."""
    first = json.loads(lines()[0])
    first["requestReceivedTimestamp"] = "2026-11-20T00:00:00.000000Z"
    log_dir(tmp_path, joined([json.dumps(first, separators=(",", ":"))] + lines()[1:]))
    assert read(tmp_path)["events_from"] == first["stageTimestamp"][:19] + "Z"
    with pytest.raises(InputError, match="reaches back only to"):
        read(tmp_path, minutes=60)


def test_a_rotation_during_the_read_is_seen_and_the_listing_taken_again(tmp_path):
    """The apiserver renames audit.log to a backup between the listing and the opening: the renamed file's calls
    are still read (the current file is opened first, the backups listed again)."""
    log_dir(tmp_path)
    rotated = {"done": False}
    real_listdir = os.listdir

    def listdir(folder):
        names = real_listdir(folder)
        if not rotated["done"]:  # after this listing, before the opening
            rotated["done"] = True
            os.rename(tmp_path / "audit.log", tmp_path / "audit-2026-12-06T12-47-00.000.log")
            (tmp_path / "audit.log").write_bytes(joined(lines()[:1]))  # the next event, in a new file
        return names

    got = audit_callers.read_host("cp-2", settings(tmp_path, max_backup=5), 0, latest(), listdir=listdir)
    assert got["files"] == ["audit-2026-12-06T12-47-00.000.log", "audit.log"]
    assert legacy_count(got) == [len({e["auditID"] for e in events() if e["user"]["username"] == LEGACY})]
    always = {"n": 0}

    def racing(folder):
        always["n"] += 1
        return ["audit.log", "audit-2026-12-06T12-%02d-00.000.log" % always["n"]]

    with pytest.raises(InputError, match="rotated during each of 3 reads"):
        audit_callers.read_host("cp-2", settings(tmp_path), 0, latest(), listdir=racing,
                                opener=lambda p: io.BytesIO(EXCERPT.read_bytes()))


def test_a_backup_being_compressed_is_read_once_and_one_removed_meanwhile_is_a_rotation(tmp_path):
    backups, _current = audit_callers.log_files("/a/audit.log", [
        "audit.log", "audit-2026-12-06T12-45-00.000.log", "audit-2026-12-06T12-45-00.000.log.gz",
        "audit-2026-12-05T12-45-00.000.log.gz"])
    assert backups == ["audit-2026-12-05T12-45-00.000.log.gz", "audit-2026-12-06T12-45-00.000.log"]
    text = lines()
    log_dir(tmp_path, joined(text[20:]))
    _backup(tmp_path, "2026-12-06T12-44-00.000", text[:20])
    gone = {"done": False}

    def opener(path):
        if path.endswith("12-44-00.000.log") and not gone["done"]:  # compressed and removed after the listing
            gone["done"] = True
            raise FileNotFoundError(path)
        return open(path, "rb")

    got = audit_callers.read_host("cp-2", settings(tmp_path, max_backup=5), 0, latest(), opener=opener)
    assert gone["done"] and got["files"] == ["audit-2026-12-06T12-44-00.000.log", "audit.log"]
    assert legacy_count(got) == [len({e["auditID"] for e in events() if e["user"]["username"] == LEGACY})]


def test_callers_past_the_rows_kept_block_only_when_their_removal_does(tmp_path):
    reading = dict(read(log_dir(tmp_path)), truncated=12, truncated_removals=["1.38"])
    found = [f for f in scan_audit([reading], ["cp-2"], target_version("v1.37.2")) if "more callers" in f["message"]]
    assert [(f["severity"], f["blocks_target"]) for f in found] == [("warn", False)]
    assert "12 more callers of deprecated APIs than the report keeps (500), of APIs removed in v1.38" in \
        found[0]["message"]
    reading["truncated_removals"] = ["1.37", "1.38"]
    found = [f for f in scan_audit([reading], ["cp-2"], target_version("v1.37.2")) if "more callers" in f["message"]]
    assert [(f["severity"], f["blocks_target"]) for f in found] == [("block", True)]


def test_backup_names_are_lumberjacks():
    backups, current = audit_callers.log_files("/var/log/kubernetes/audit/audit.log", [
        "audit.log", "audit-2026-12-06T12-45-00.000.log", "audit-2026-12-05T01-00-00.000.log.gz",
        "audit-2026-12-06.log", "kube-audit-2026-12-06T12-45-00.000.log", "audit-2026-12-06T12-45-00.000.json"])
    assert backups == ["audit-2026-12-05T01-00-00.000.log.gz", "audit-2026-12-06T12-45-00.000.log"]
    assert current == ["audit.log"]
    assert audit_callers.service_account(LEGACY) == "gpufleet-lab-soak/legacy-resizer"
    assert audit_callers.service_account("system:node:gpu-a1") == ""


def test_the_excerpts_are_the_capture():
    """Every line is a whole audit event of the real apiserver, in the order it wrote them
    (tests/fixtures/audit/README.md)."""
    for path in (EXCERPT, CP1):
        got = events(path)
        assert all(e["apiVersion"] == "audit.k8s.io/v1" and e["kind"] == "Event" for e in got)
        assert all(line.startswith('{"kind":"Event","apiVersion":"audit.k8s.io/v1",') for line in lines(path))
        times = [e["stageTimestamp"] for e in got]
        assert times == sorted(times)


def test_kubeadms_cluster_configuration_must_keep_auditing_through_the_upgrade():
    """The lab's kubeadm-config as the real kubeadm uploaded it (v1beta4: extraArgs a list) audits; without the
    flag, or with the v1beta3 mapping form lacking it, the upgrade would drop auditing: a warning, not a block."""
    assert audit_callers.kubeadm_keeps_auditing(KUBEADM_CONFIG) is None
    assert audit_callers.kubeadm_keeps_auditing(None) is None  # no kubeadm-config: kubeadm rewrites nothing
    text = KUBEADM_CONFIG["data"]["ClusterConfiguration"]
    assert "audit-log-path" in text
    dropped = {"data": {"ClusterConfiguration": text.replace("name: audit-log-path", "name: audit-log-size")}}
    why = audit_callers.kubeadm_keeps_auditing(dropped)
    assert why and "has no apiServer.extraArgs audit-log-path: the manifests kubeadm upgrade writes will not audit" \
        in why
    v1beta3 = {"data": {"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\n"
                                                "apiServer:\n  extraArgs:\n    audit-log-path: /var/log/a.log\n"}}
    assert audit_callers.kubeadm_keeps_auditing(v1beta3) is None
    assert audit_callers.kubeadm_keeps_auditing({"data": {}}) == (
        "kube-system/kubeadm-config ClusterConfiguration is missing, so kubeadm upgrade's manifests cannot be told "
        "to audit")
    found = scan_audit([], [], target_version("v1.36.3"), dropped)
    assert [(f["source"], f["severity"], f["blocks_target"]) for f in found] == [("kubeadm-config", "warn", False)]
