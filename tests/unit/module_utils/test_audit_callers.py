"""Who calls a deprecated API, read from a real apiserver's audit log (tests/fixtures/audit/README.md)."""
from __future__ import annotations

import datetime
import gzip
import json
import pathlib

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import audit_callers
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.preflight_report import render_markdown
from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import scan_audit, target_version
from tests.conftest import FIXTURES, fixture_text

EXCERPT = FIXTURES / "audit" / "real-1.35.4-cp-2-excerpt.log"
MANIFEST = fixture_text("kubeadm", "real-1.35.4-kube-apiserver-audit.yaml")
LEGACY = "system:serviceaccount:gpufleet-lab-soak:legacy-resizer"
AGENT = "csi-resizer/v1.11.2 (linux/amd64) kubernetes/0ad7fb3"


def events():
    return [json.loads(line) for line in EXCERPT.read_text().splitlines()]


def latest() -> datetime.datetime:
    return max(audit_callers.parse_time(e["requestReceivedTimestamp"]) for e in events())


def flags(path: pathlib.Path, **extra):
    return dict({"path": str(path / "audit.log"), "max_backup": 2, "max_age_days": 0, "compress": False}, **extra)


def log_dir(tmp_path: pathlib.Path, text: bytes = b"") -> pathlib.Path:
    (tmp_path / "audit.log").write_bytes(text or EXCERPT.read_bytes())
    return tmp_path


def read(tmp_path, hours=24, now=None, **extra):
    return audit_callers.read_host("cp-2", flags(tmp_path, **extra), hours, now or latest())


def test_the_real_manifest_names_the_log_kubeadm_wrote_from_the_cluster_configuration():
    got = audit_callers.audit_flags(MANIFEST, "cp-2: kube-apiserver.yaml")
    assert got == {"path": "/var/log/kubernetes/audit/audit.log", "max_backup": 2, "max_age_days": 0,
                   "compress": False}


@pytest.mark.parametrize("edit, match", [
    (lambda t: t.replace("    - --audit-log-path=/var/log/kubernetes/audit/audit.log\n", ""),
     "has no --audit-log-path: auditing to a file is off.*ClusterConfiguration.*gpufleet_audit_callers: false"),
    (lambda t: t.replace("--audit-log-path=/var/log/kubernetes/audit/audit.log", "--audit-log-path=-"),
     "it logs to stdout"),
    (lambda t: t.replace("    - --audit-log-maxbackup=2\n",
                         "    - --audit-log-maxbackup=2\n    - --audit-log-format=legacy\n"),
     "as 'legacy'.*json"),
    (lambda t: t.replace("--audit-log-maxbackup=2", "--audit-log-maxbackup=two"), "not a whole number"),
    (lambda t: "<html>502 Bad Gateway</html>", "not a static pod manifest"),
])
def test_a_manifest_that_cannot_name_a_json_audit_log_is_refused(edit, match):
    text = edit(MANIFEST)
    assert text != MANIFEST
    with pytest.raises(InputError, match=match):
        audit_callers.audit_flags(text, "cp-2: kube-apiserver.yaml")


def test_the_legacy_client_is_named_by_service_account_and_user_agent(tmp_path):
    got = read(log_dir(tmp_path))
    rows = {(r["user"], r["resource"]): r for r in got["callers"]}
    legacy = rows[(LEGACY, "volumeattributesclasses")]
    calls = {e["auditID"] for e in events() if e["user"]["username"] == LEGACY}
    assert legacy["count"] == len(calls) > 0
    assert legacy["api_version"] == "storage.k8s.io/v1beta1" and legacy["removed_release"] == "1.37"
    assert legacy["user_agent"] == AGENT and legacy["verb"] == "list" and legacy["namespace"] == ""
    assert legacy["last"] == max(e["requestReceivedTimestamp"] for e in events()
                                 if e["user"]["username"] == LEGACY)[:19] + "Z"
    assert got["files"] == ["audit.log"] and got["events_from"] == events()[0]["requestReceivedTimestamp"][:19] + "Z"


def test_a_deprecated_api_with_no_removal_is_read_with_no_release_and_judged_as_none(tmp_path):
    """cp-1's capture: the endpoints controller writes core/v1 Endpoints, deprecated with no removal planned."""
    log_dir(tmp_path, (FIXTURES / "audit" / "real-1.35.4-cp-1-excerpt.log").read_bytes())
    got = audit_callers.read_host("cp-1", flags(tmp_path), 24, latest())
    endpoints = [r for r in got["callers"] if r["resource"] == "endpoints"]
    assert endpoints and all(r["removed_release"] == "" and r["api_version"] == "v1" for r in endpoints)
    assert {r["user"] for r in endpoints} == {"system:serviceaccount:kube-system:endpoint-controller"}
    assert scan_audit([got], ["cp-1"], target_version("v1.37.2")) == []


def test_a_request_counts_once_and_only_within_the_lookback(tmp_path):
    lines = EXCERPT.read_text().splitlines()
    legacy = [json.loads(line) for line in lines if LEGACY in line]
    again = dict(legacy[0], stage="ResponseStarted")  # a watch has two events with one auditID
    log_dir(tmp_path, ("\n".join(lines + [json.dumps(again)]) + "\n").encode())
    count = read(tmp_path)["callers"]
    assert {r["count"] for r in count if r["user"] == LEGACY} == {len(legacy)}
    first = audit_callers.parse_time(legacy[0]["requestReceivedTimestamp"])
    later = read(tmp_path, hours=1, now=first + datetime.timedelta(hours=1, seconds=1))
    assert {r["count"] for r in later["callers"] if r["user"] == LEGACY} == {len(legacy) - 1}


def test_judged_against_the_target_a_removal_blocks_and_a_later_one_warns(tmp_path):
    reading = read(log_dir(tmp_path))
    warn = scan_audit([reading], ["cp-2"], target_version("v1.36.3"))
    assert [f["severity"] for f in warn] == ["warn"]  # Endpoints has no removal: no finding
    assert warn[0]["service_account"] == "gpufleet-lab-soak/legacy-resizer" and warn[0]["user_agent"] == AGENT
    assert "ServiceAccount gpufleet-lab-soak/legacy-resizer (user agent '%s') calling list volumeattributesclasses" \
        % AGENT in warn[0]["message"] and "removed in v1.37" in warn[0]["message"]
    block = scan_audit([reading], ["cp-2"], target_version("v1.37.2"))
    assert [f["severity"] for f in block] == ["block"] and block[0]["hosts"] == ["cp-2"]
    assert "blocks the upgrade to 1.37" in block[0]["message"]


def test_hosts_are_merged_and_a_host_without_a_reading_blocks(tmp_path):
    reading = read(log_dir(tmp_path))
    other = dict(reading, host="cp-1")
    both = scan_audit([reading, other], ["cp-1", "cp-2"], target_version("v1.36.3"))
    assert len(both) == 1 and both[0]["hosts"] == ["cp-1", "cp-2"]
    assert both[0]["count"] == 2 * next(r["count"] for r in reading["callers"] if r["user"] == LEGACY)
    missing = scan_audit([reading], ["cp-1", "cp-2"], target_version("v1.36.3"))
    assert [(f["source"], f["severity"]) for f in missing if f.get("unreadable")] == [("audit:cp-1", "block")]
    broken = scan_audit([{"host": "cp-2", "error": "cp-2: no audit log at /x"}], ["cp-2"], target_version("v1.36.3"))
    assert broken[0]["blocks_target"] and "no audit log at /x" in broken[0]["message"]


def test_the_report_shows_who_calls_in_a_table_with_the_agent_escaped(tmp_path):
    reading = read(log_dir(tmp_path))
    reading["callers"][0]["user_agent"] = "evil | agent\nnext"
    findings = scan_audit([reading], ["cp-2"], target_version("v1.37.2"))
    text = render_markdown({"cluster": "lab-b", "target": "v1.37.2", "removed_apis": findings})
    rows = [line for line in text.splitlines() if line.startswith("| storage.k8s.io/v1beta1")]
    assert len(rows) == 1 and "evil \\| agent next" in rows[0] and rows[0].endswith("| block |")
    assert rows[0].count(" | ") == 8


def _backup(tmp_path, when: str, lines, gz=False):
    name = "audit-%s.log%s" % (when, ".gz" if gz else "")
    data = ("\n".join(lines) + "\n").encode()
    (tmp_path / name).write_bytes(gzip.compress(data) if gz else data)
    return name


def test_rotated_backups_are_read_oldest_first_compressed_or_not(tmp_path):
    lines = EXCERPT.read_text().splitlines()
    log_dir(tmp_path, ("\n".join(lines[30:]) + "\n").encode())
    _backup(tmp_path, "2026-12-06T12-44-00.000", lines[:15], gz=True)
    _backup(tmp_path, "2026-12-06T12-45-00.000", lines[15:30])
    (tmp_path / "other.log").write_text("not ours\n")
    got = read(tmp_path, max_backup=5)
    assert got["files"] == ["audit-2026-12-06T12-44-00.000.log.gz", "audit-2026-12-06T12-45-00.000.log", "audit.log"]
    (tmp_path / "whole").mkdir()
    whole = read(log_dir(tmp_path / "whole"))
    assert sorted((r["user"], r["count"]) for r in got["callers"]) == sorted(
        (r["user"], r["count"]) for r in whole["callers"])


def test_a_log_rotated_past_the_lookback_fails_closed(tmp_path):
    lines = EXCERPT.read_text().splitlines()
    log_dir(tmp_path, ("\n".join(lines[20:]) + "\n").encode())
    _backup(tmp_path, "2026-12-06T12-45-00.000", lines[10:20])
    _backup(tmp_path, "2026-12-06T12-44-00.000", lines[:10])
    # as many backups as --audit-log-maxbackup keeps: older ones may be gone, and the oldest kept is minutes old
    with pytest.raises(InputError, match=r"cp-2: the audit log reaches back only to 2026-12-06T12:4.*rotated older "
                                         r"events away \(2 backups kept.*needs the last 24 hours"):
        read(tmp_path, max_backup=2)
    assert read(tmp_path, max_backup=3)["callers"]  # fewer than it keeps: nothing was deleted
    assert read(tmp_path, max_backup=0)["callers"]  # 0: every backup kept
    with pytest.raises(InputError, match="rotated older events away"):
        read(tmp_path, max_backup=0, max_age_days=1, now=latest() + datetime.timedelta(days=2), hours=72)


@pytest.mark.parametrize("content, match", [
    (b"", "holds no event"),
    (b"<html><body>502 Bad Gateway</body></html>\n", "line 1 is not an audit event"),
    (b'{"kind":"Event","apiVersion":"audit.k8s.io/v1beta1"}\n', "line 1 is not an audit.k8s.io/v1 Event"),
])
def test_a_log_that_is_not_audit_events_fails_closed(tmp_path, content, match):
    log_dir(tmp_path, content or b"\n")
    if not content:
        (tmp_path / "audit.log").write_bytes(b"")
    with pytest.raises(InputError, match="cp-2: .*%s" % match):
        read(tmp_path)


def test_a_bad_event_or_cut_line_is_named_but_the_line_being_written_is_not(tmp_path):
    lines = EXCERPT.read_text().splitlines()
    broken = [line if LEGACY not in line else line[:-3] for line in lines]  # the annotations kept
    log_dir(tmp_path, ("\n".join(broken) + "\n").encode())
    with pytest.raises(InputError, match=r"audit.log line \d+ is not an audit event \(JSON\)"):
        read(tmp_path)
    log_dir(tmp_path, ("\n".join(lines) + "\n" + lines[-1][:50]).encode())  # the apiserver is writing it
    assert read(tmp_path)["callers"]
    _backup(tmp_path, "2026-12-06T12-40-00.000", [lines[0], lines[1][:40]])
    (tmp_path / "audit-2026-12-06T12-40-00.000.log").write_bytes(
        (tmp_path / "audit-2026-12-06T12-40-00.000.log").read_bytes().rstrip(b"\n"))
    with pytest.raises(InputError, match="line 2 is cut off"):
        read(tmp_path, max_backup=5)


def test_no_log_or_an_unreadable_directory_fails_closed(tmp_path):
    with pytest.raises(InputError, match="cp-2: no audit log at .*audit.log"):
        read(tmp_path)
    with pytest.raises(InputError, match="directory .* cannot be read"):
        read(tmp_path / "missing")


def test_backup_names_are_lumberjacks():
    backups, current = audit_callers.log_files("/var/log/kubernetes/audit/audit.log", [
        "audit.log", "audit-2026-12-06T12-45-00.000.log", "audit-2026-12-05T01-00-00.000.log.gz",
        "audit-2026-12-06.log", "kube-audit-2026-12-06T12-45-00.000.log", "audit-2026-12-06T12-45-00.000.json"])
    assert backups == ["audit-2026-12-05T01-00-00.000.log.gz", "audit-2026-12-06T12-45-00.000.log"]
    assert current == ["audit.log"]
    assert audit_callers.service_account(LEGACY) == "gpufleet-lab-soak/legacy-resizer"
    assert audit_callers.service_account("system:node:gpu-a1") == ""


def test_the_excerpt_is_the_capture():
    """Every line is a whole audit event of the real apiserver, in the order it wrote them
    (tests/fixtures/audit/README.md)."""
    got = events()
    assert all(e["apiVersion"] == "audit.k8s.io/v1" and e["kind"] == "Event" for e in got)
    times = [e["stageTimestamp"] for e in got]
    assert times == sorted(times)
