"""The etcd_snapshot role against the lab's real etcd, through the etcd_backup playbook, as an operator runs it."""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import signal
import stat
import subprocess
import sys

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import judge_snapshot, parse_snapshot_status
from tests.lab.conftest import (ROOT, apiserver_version, etcd_flags, lab_cli, podman_exec, s3_client,
                               wait_control_plane)

from gpufleet_lab.cluster import ETCD_DATA_ON_HOST  # lab/, on sys.path through tests.lab.conftest

pytestmark = pytest.mark.lab
BIN = pathlib.Path(sys.executable).parent
KEY = "lab-test-key-0123456789abcdef"
DATA = ETCD_DATA_ON_HOST  # the lab's etcd member's data directory, as its host sees it


def lab_api_client(lab, host=None):
    """A client of the cell (through its load balancer), or of one host's apiserver."""
    api = config.new_client_from_config(str(lab.kubeconfig))
    if host:
        api.configuration.host = lab.apiserver_url(host)
    return api


def core_api(lab):
    return client.CoreV1Api(lab_api_client(lab))


def backup(lab, backup_dir, *extra, key=KEY):
    args = [str(BIN / "ansible-playbook"), "playbooks/etcd_backup.yml", "-i", str(lab.inventory / "hosts.yml"),
            "-e", "etcd_snapshot_backup_dir=%s" % backup_dir, *extra]
    # None: an empty key on the command line (the lab inventory carries a lab-only key of its own)
    args += ["-e", "etcd_snapshot_encryption_key=%s" % (key or "")]
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH="%s:%s" % (BIN, os.environ["PATH"]))
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)


def decrypt_and_verify(lab, vault_file, tmp_path):
    plain = tmp_path / "snapshot.db"
    subprocess.run([str(BIN / "ansible-vault"), "decrypt", "--vault-password-file=/dev/stdin",
                    "--output=%s" % plain, str(vault_file)], input=KEY, text=True, check=True, capture_output=True)
    etcdutl = lab.bin_dir("etcd", lab.etcd_version) / "etcdutl"
    out = subprocess.run([str(etcdutl), "snapshot", "status", str(plain), "-w", "json"], capture_output=True,
                         text=True, check=True).stdout
    return judge_snapshot(parse_snapshot_status(out), {"min_keys": 50})


def test_failed_snapshot_stops_and_leaves_etcd_healthy(lab, tmp_path):
    backups = tmp_path / "backups"
    lab_cli("fault", "cp-1", "snapshot-fail")
    try:
        proc = backup(lab, backups, "-e", "etcd_snapshot_reuse_minutes=0")
    finally:
        lab_cli("clear", "cp-1")
    assert proc.returncode != 0
    assert "etcd snapshot on cp-1 failed" in proc.stdout and "no space left on device" in proc.stdout
    assert "etcd is still running and healthy" in proc.stdout
    assert not list(backups.glob("*.db.vault"))
    assert podman_exec("cp-1", "sh", "-c", "ls /var/lib/etcd-backup").stdout.strip() == ""


def test_a_run_killed_mid_way_leaves_no_plaintext_snapshot_past_the_next_run(lab, tmp_path):
    """SIGKILL (nothing of Ansible's own runs after it) while the plaintext snapshot sits on the node and on the
    controller, before encryption: the next run removes both first, and no plaintext outlives it."""
    backups = tmp_path / "backups"
    args = [str(BIN / "ansible-playbook"), "playbooks/etcd_backup.yml", "-i", str(lab.inventory / "hosts.yml"),
            "-e", "etcd_snapshot_backup_dir=%s" % backups, "-e", "etcd_snapshot_encryption_key=%s" % KEY,
            "-e", "etcd_snapshot_reuse_minutes=0"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH="%s:%s" % (BIN, os.environ["PATH"]))
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if "TASK [gpufleet.upgrade.etcd_snapshot : Encrypt it with ansible-vault" in line:
                os.killpg(proc.pid, signal.SIGKILL)  # the fetch has run: plaintext on the node and here
                break
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "".join(seen[-40:])
    assert list(backups.glob("etcd-%s-*.db.part" % lab.cell)), "the kill came too late to test anything"
    assert podman_exec("cp-1", "sh", "-c", "ls /var/lib/etcd-backup").stdout.strip().endswith(".db")
    after = backup(lab, backups, "-e", "etcd_snapshot_reuse_minutes=0")
    assert after.returncode == 0, after.stdout[-3000:]
    # no plaintext left; one encrypted snapshot from the second run, plus the first run's when the kill landed after
    # ansible-vault had written it (a loaded machine) - the plaintext was still there then, which is the point
    assert not list(backups.glob("*.part")) and len(list(backups.glob("*.db.vault"))) in (1, 2)
    assert podman_exec("cp-1", "sh", "-c", "ls /var/lib/etcd-backup").stdout.strip() == ""


def test_refuses_without_key_before_touching_anything(lab, tmp_path):
    proc = backup(lab, tmp_path / "b", key=None)
    assert proc.returncode != 0 and "etcd_snapshot_encryption_key" in proc.stdout
    assert not (tmp_path / "b").exists()
    short = backup(lab, tmp_path / "b", key="short")
    assert short.returncode != 0 and "16 characters or more" in short.stdout


def restore(lab, *extra, records=None):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH="%s:%s" % (BIN, os.environ["PATH"]))
    if records:
        env["GPUFLEET_CHANGE_RECORD_DIR"] = str(records)
    return subprocess.run([str(BIN / "ansible-playbook"), "playbooks/etcd_restore.yml", "-i",
                           str(lab.inventory / "hosts.yml"), "-e", "etcd_snapshot_encryption_key=%s" % KEY, *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)


def test_etcd_restore_is_break_glass_and_brings_the_cell_back_to_the_snapshot(lab, tmp_path):
    """The whole restore on the lab's three real etcd members (static pods of the control-plane hosts, SIMULATION
    of the kubelet: lab/gpufleet_lab/controller.py StaticPods) and its three real apiservers: every apiserver
    stopped, each member stopped, its data directory swapped for the one restored from the same snapshot, and all
    started again - after which each apiserver serves the snapshot's data, not what was written after it."""
    api = core_api(lab)
    marker = {"metadata": {"name": "gpufleet-restore-marker", "namespace": "default"}, "data": {"at": "snapshot"}}
    later = {"metadata": {"name": "gpufleet-restore-later", "namespace": "default"}, "data": {"at": "after"}}
    for cm in (marker, later):
        try:
            api.delete_namespaced_config_map(cm["metadata"]["name"], "default")
        except ApiException as exc:
            assert exc.status == 404
    api.create_namespaced_config_map("default", marker)
    backups = tmp_path / "backups"
    assert backup(lab, backups, "-e", "etcd_snapshot_reuse_minutes=0").returncode == 0
    (vault_file,) = backups.glob("etcd-%s-*.db.vault" % lab.cell)
    api.create_namespaced_config_map("default", later)  # after the snapshot: the restore takes both of these away
    api.patch_namespaced_config_map(marker["metadata"]["name"], "default", {"data": {"at": "after"}})
    member = lab.control_plane[0]  # the etcd group: one member on each control-plane host
    for host in lab.control_plane:
        podman_exec(host, "sh", "-c", "rm -rf %s.restored-* %s.before-*" % (DATA, DATA))
    # without the exact confirmation: refused, nothing changed
    for confirm in ([], ["-e", "gpufleet_break_glass_etcd_restore=yes"]):
        refused = restore(lab, "-e", "etcd_restore_snapshot=%s" % vault_file, *confirm)
        assert refused.returncode != 0
        assert "restore %s from %s" % (lab.cell, vault_file.name) in refused.stdout
        assert "Nothing was changed" in refused.stdout
    assert podman_exec(member, "sh", "-c", "ls -d %s.* 2>/dev/null" % DATA).stdout.strip() == ""
    assert api.read_namespaced_config_map(later["metadata"]["name"], "default").data == {"at": "after"}
    confirmed = json.dumps({"gpufleet_break_glass_etcd_restore": "restore %s from %s" % (lab.cell, vault_file.name)})
    # confirmed, but the inventory names the member otherwise than its etcd runs: refused before anything changes
    wrong = restore(lab, "-e", "etcd_restore_snapshot=%s" % vault_file, "-e", confirmed,
                    "-e", "etcd_restore_member_name=lab")
    assert wrong.returncode != 0
    assert ("%s's etcd runs as --name=%s --initial-advertise-peer-urls=http://127.0.0.1:%d, but the restore would "
            "make it lab" % (member, member, lab.ports["etcd_peer"])) in wrong.stdout, wrong.stdout[-3000:]
    assert podman_exec(member, "sh", "-c", "ls -d %s.* /root/*.yaml.gpufleet-etcd-restore 2>/dev/null" % DATA
                       ).stdout.strip() == ""
    # confirmed: the member restored from the verified snapshot and swapped in under stopped static pods
    done = restore(lab, "-e", "etcd_restore_snapshot=%s" % vault_file,
                   "-e", json.dumps({"gpufleet_break_glass_etcd_restore":
                                     "restore %s from %s" % (lab.cell, vault_file.name)}),
                   records=tmp_path / "records")
    assert done.returncode == 0, done.stdout[-4000:]
    assert KEY not in done.stdout and "BREAK GLASS: restore %s from" % lab.cell in done.stdout
    for stage in ("Check every host the restore touches", "Stop every kube-apiserver", "Swap etcd's data directory",
                  "Start every kube-apiserver again"):
        assert done.stdout.count("PLAY [%s" % stage) == 1, stage  # each stage once: nothing stopped or swapped twice
    (record,) = (tmp_path / "records").glob("*-etcd_restore.yml.json")
    (used,) = json.loads(record.read_text())["break_glass"]
    # the record names every host it touched: the member, and each control-plane host whose apiserver it stopped
    assert used["action"] == "etcd_restore" and used["nodes"] == sorted(lab.control_plane)
    assert vault_file.name in used["detail"]
    # every apiserver serves the snapshot's data: the marker as it was, the later object gone
    for host in lab.control_plane:
        direct = client.CoreV1Api(lab_api_client(lab, host))
        assert direct.read_namespaced_config_map(marker["metadata"]["name"], "default").data == {"at": "snapshot"}
        with pytest.raises(ApiException) as gone:
            direct.read_namespaced_config_map(later["metadata"]["name"], "default")
        assert gone.value.status == 404, host
    # every host's apiserver, controller manager and scheduler runs again (the last two exit when their apiserver
    # goes; the lab's kubelet stand-in starts them again, as a kubelet does)
    wait_control_plane(lab, {h: apiserver_version(lab, h) for h in lab.control_plane})
    # the member's revision was bumped past everything a watch cache held, and the old data is kept beside it
    status = json.loads(podman_exec(member, "etcdctl", *etcd_flags(lab), "endpoint", "status", "--cluster",
                                    "-w", "json").stdout)
    assert status[0]["Status"]["header"]["revision"] > 1000000000
    assert len(status) == len(lab.control_plane)  # the three members, one cluster again
    for host in lab.control_plane:
        kept = podman_exec(host, "sh", "-c", "ls -d %s.before-*/member %s.restored-* 2>/dev/null" % (DATA, DATA))
        assert len(kept.stdout.split()) == 1 and ".before-" in kept.stdout, (host, kept.stdout)
    # no decrypted copy outlives the run, not on the controller, not on the member; no manifest left aside
    assert not list(pathlib.Path(os.environ.get("TMPDIR", "/tmp")).glob("gpufleet-etcd-restore-*"))
    for host in lab.control_plane:
        left = podman_exec(host, "sh", "-c", "ls /root/etcd-restore-* /root/*.yaml.gpufleet-etcd-restore "
                                             "2>/dev/null").stdout.split()
        assert left == [], (host, left)
    for host in lab.control_plane:
        podman_exec(host, "sh", "-c", "rm -rf %s.before-*" % DATA)
    api.delete_namespaced_config_map(marker["metadata"]["name"], "default")


def copies(lab):
    """{backup host: {name: (mode, sha256)}, s3: {key: sha256}} of this lab's etcd snapshots off the controller."""
    listing = podman_exec("backup-1", "sh", "-c", ("cd /var/backups/gpufleet/etcd 2>/dev/null && for f in etcd-%s-*; "
                                                   "do stat -c '%%n %%a' $f; sha256sum $f; done") % lab.cell)
    host = {}
    for stat_line, sum_line in zip(*[iter(listing.stdout.splitlines())] * 2):
        name, mode = stat_line.split()
        host[name] = (mode, sum_line.split()[0])
    s3 = s3_client(lab)
    objects = s3.list_objects_v2(Bucket=lab.s3["bucket"], Prefix="lab/etcd-%s-" % lab.cell).get("Contents", [])
    bucket = {o["Key"]: hashlib.sha256(s3.get_object(Bucket=lab.s3["bucket"], Key=o["Key"])["Body"].read())
              .hexdigest() for o in objects}
    return host, bucket


def test_snapshot_encrypted_copied_off_reused_kept_to_retention_and_restored_from_each(lab, tmp_path):
    """One snapshot run, encrypted at 0600 off the node, shipped to backup-1 over SSH and to the lab's S3 server
    (versitygw, a real S3 API); a rerun reuses it; retention keeps one everywhere; each copy restores. (One test,
    so CI pays for three etcd_backup runs, not five.)"""
    podman_exec("backup-1", "sh", "-c", "rm -rf /var/backups/gpufleet/etcd")
    s3 = s3_client(lab)
    for old in s3.list_objects_v2(Bucket=lab.s3["bucket"], Prefix="lab/").get("Contents", []):
        s3.delete_object(Bucket=lab.s3["bucket"], Key=old["Key"])
    backups = tmp_path / "backups"
    proc = backup(lab, backups, "-e", "etcd_snapshot_reuse_minutes=0")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert lab.s3["secret_key"] not in proc.stdout and KEY not in proc.stdout and KEY not in proc.stderr
    (vault_file,) = backups.glob("etcd-%s-*.db.vault" % lab.cell)
    assert stat.S_IMODE(vault_file.stat().st_mode) == 0o600
    assert vault_file.read_text().startswith("$ANSIBLE_VAULT;1.1;AES256")
    assert not list(backups.glob("*.part"))
    assert decrypt_and_verify(lab, vault_file, tmp_path)["passed"]
    meta = json.loads(vault_file.with_name(vault_file.name.replace(".db.vault", ".json")).read_text())
    assert meta["node"] == "cp-1" and meta["snapshot"]["revision"] > 0 and len(meta["sha256_plaintext"]) == 64
    # nothing left on the node
    assert podman_exec("cp-1", "sh", "-c", "ls /var/lib/etcd-backup").stdout.strip() == ""
    local = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in backups.glob("etcd-%s-*" % lab.cell)}
    assert len(local) == 2  # the snapshot and its record
    host, bucket = copies(lab)
    assert {n: s for n, (_, s) in host.items()} == local and {m for m, _ in host.values()} == {"600"}
    assert {k[len("lab/"):]: s for k, s in bucket.items()} == local
    # a rerun reuses the fresh snapshot: no change anywhere
    again = backup(lab, backups)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-3000:]
    assert len(list(backups.glob("*.db.vault"))) == 1
    # retention: one kept, the newer one, everywhere
    proc = backup(lab, backups, "-e", "etcd_snapshot_reuse_minutes=0", "-e", "etcd_snapshot_keep_count=1")
    assert proc.returncode == 0, proc.stdout[-4000:]
    (newest,) = [p.name for p in backups.glob("*.db.vault")]
    assert newest not in local
    host, bucket = copies(lab)
    assert sorted(host) == sorted([newest, newest.replace(".db.vault", ".json")])
    assert sorted(bucket) == sorted("lab/" + n for n in host)
    # restore from each copy, with the controller's copy gone (a new AWX job has none)
    for p in backups.iterdir():
        p.unlink()
    for source in ("s3", "backup_host"):
        podman_exec("cp-1", "sh", "-c", "rm -rf %s.restored-*" % DATA)
        done = restore(lab, "-e", "etcd_restore_source=%s" % source, "-e", "etcd_restore_snapshot=%s" % newest,
                       "-e", "etcd_restore_swap=false",
                       "-e", json.dumps({"gpufleet_break_glass_etcd_restore":
                                         "restore %s from %s" % (lab.cell, newest)}))
        assert done.returncode == 0, (source, done.stdout[-4000:])
        restored = podman_exec("cp-1", "sh", "-c", "ls %s.restored-*/member/snap/db" % DATA).stdout.split()
        assert len(restored) == 1, (source, restored)
    podman_exec("cp-1", "sh", "-c", "rm -rf %s.restored-*" % DATA)
    assert not list(pathlib.Path(os.environ.get("TMPDIR", "/tmp")).glob("gpufleet-etcd-restore-*"))


def test_a_copy_that_cannot_be_made_fails_the_snapshot(lab, tmp_path):
    # a backup host the inventory does not have: refused before anything is taken
    proc = backup(lab, tmp_path / "b", "-e", "etcd_snapshot_backup_host=backup-9")
    assert proc.returncode != 0 and "must be a host of the inventory" in proc.stdout, proc.stdout[-3000:]
    assert not (tmp_path / "b").exists()
    # the bucket does not answer: the role fails (a snapshot only on the controller is not a backup)
    proc = backup(lab, tmp_path / "c", "-e", "etcd_snapshot_reuse_minutes=0",
                  "-e", "etcd_snapshot_s3_endpoint_url=http://127.0.0.1:9")
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "Upload the encrypted snapshot" in proc.stdout and "failed=1" in proc.stdout
    assert "Upload its record" not in proc.stdout  # the record never goes without its snapshot
