"""etcd in its own window, rehearsed on the lab's three real etcd members (each a control-plane host's static pod;
SIMULATION of the kubelets: lab/gpufleet_lab/controller.py StaticPods restarts a member from its manifest's image)
from the lab's etcd to its second build (lab/lab.yml `etcd`, `etcd_next`), with the real apiservers on top.

It leaves the cell's etcd on the newer release, which nothing goes back from by a rolling restart: `make
lab-tests-a` runs this file after the others on `lab` (on the cell the wave story leaves upgraded), and `bin/lab
reset` makes the cell fresh again."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.lab.conftest import etcd_flags, podman_exec

BIN = pathlib.Path(sys.executable).parent
KEY = "lab-etcd-upgrade-key-not-a-secret"


def playbook(lab, name, tmp_path, *extra):
    return subprocess.run([str(BIN / "ansible-playbook"), "playbooks/%s" % name, "-i", str(lab.inventory / "hosts.yml"),
                           "-e", "etcd_snapshot_backup_dir=%s" % (tmp_path / "backups"),
                           "-e", "etcd_snapshot_encryption_key=%s" % KEY, *extra],
                          capture_output=True, text=True, check=False, cwd=pathlib.Path(__file__).parents[2],
                          timeout=1200)  # a hung run fails here, not at CI's limit


def status(lab):
    """`etcdctl endpoint status --cluster` from cp-1: every member's status; None while one does not answer."""
    proc = podman_exec("cp-1", "etcdctl", *etcd_flags(lab), "endpoint", "status", "--cluster", "-w", "json")
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def members(lab):
    """Each member's client URL -> (its release, whether it leads), through consensus."""
    answered = status(lab)
    assert answered is not None, "a member did not answer"
    return {e["Endpoint"]: (e["Status"]["version"], e["Status"]["leader"] == e["Status"]["header"]["member_id"])
            for e in answered}


def releases(lab):
    """Each member's client URL -> its release; {} while one does not answer."""
    return {e["Endpoint"]: e["Status"]["version"] for e in status(lab) or []}


def test_etcd_moves_alone_one_member_at_a_time_after_a_snapshot(lab, tmp_path):
    old, new = lab.etcd_version.lstrip("v"), lab.etcd_next_version.lstrip("v")
    before = members(lab)
    assert len(before) == 3 and {v for v, _ in before.values()} == {old}, before
    (leader_url,) = [u for u, (_, leads) in before.items() if leads]
    leader = lab.control_plane[int(leader_url.rsplit(":", 1)[1]) - lab.ports["etcd"]]
    config.load_kube_config(str(lab.kubeconfig))
    core = client.CoreV1Api()
    marker = {"metadata": {"name": "gpufleet-etcd-upgrade-marker", "namespace": "default"}, "data": {"at": old}}
    try:
        core.delete_namespaced_config_map(marker["metadata"]["name"], "default")
    except ApiException as exc:
        assert exc.status == 404
    core.create_namespaced_config_map("default", marker)

    # a run that moves Kubernetes refuses an etcd target; a step of two minors and a missing target are refused
    both = playbook(lab, "plan.yml", tmp_path, "-e", "gpufleet_etcd_target_version=%s" % new)
    assert both.returncode != 0 and "etcd moves in a window of its own (playbooks/etcd_upgrade.yml)" in both.stdout
    major, minor = (int(x) for x in new.split(".")[:2])
    skip = playbook(lab, "etcd_upgrade.yml", tmp_path, "-e", "gpufleet_etcd_target_version=%d.%d.0" % (major,
                                                                                                     minor + 1))
    assert skip.returncode != 0 and "etcd moves one minor at a time" in skip.stdout, skip.stdout[-2000:]
    bare = playbook(lab, "etcd_upgrade.yml", tmp_path)
    assert bare.returncode != 0 and "Set gpufleet_etcd_target_version" in bare.stdout
    assert members(lab) == before and not (tmp_path / "backups").exists()  # nothing changed, no snapshot taken

    done = playbook(lab, "etcd_upgrade.yml", tmp_path, "-e", "gpufleet_etcd_target_version=%s" % new)
    assert done.returncode == 0, done.stdout[-4000:]
    assert KEY not in done.stdout
    # a fresh encrypted snapshot before the first member moved
    (snapshot,) = (tmp_path / "backups").glob("etcd-%s-*.db.vault" % lab.cell)
    assert snapshot.read_text().startswith("$ANSIBLE_VAULT;1.1;AES256")
    assert done.stdout.index("Took etcd snapshot") < done.stdout.index("Set the release in the static pod")
    # one member at a time, the leader last, each checked before the next
    moved = [line.split(": ")[-1].rstrip(" *").rstrip("]") for line in done.stdout.splitlines()
             if line.startswith("TASK [Set the release in the static pod's manifest: ")]
    assert sorted(moved) == sorted(lab.control_plane) and moved[-1] == leader, (moved, leader)
    for host in moved:
        assert "etcd member %s on %s: %s -> %s, healthy" % (host, host, old, new) in " ".join(done.stdout.split())
    after = members(lab)
    assert {v for v, _ in after.values()} == {new} and set(after) == set(before)
    for host in lab.control_plane:  # each manifest names the new image; the rest of it is as it was
        text = podman_exec(host, "cat", "/etc/kubernetes/manifests/etcd.yaml").stdout
        assert "image: registry.k8s.io/etcd:%s-0" % new in text and "--name=%s" % host in text
    # the apiservers on top serve what was there before
    assert core.read_namespaced_config_map(marker["metadata"]["name"], "default").data == {"at": old}

    # a rerun has nothing to move and takes no snapshot; going back is refused (the way back is the snapshot)
    again = playbook(lab, "etcd_upgrade.yml", tmp_path, "-e", "gpufleet_etcd_target_version=%s" % new)
    assert again.returncode == 0 and "nothing to move" in again.stdout
    assert len(list((tmp_path / "backups").glob("*.db.vault"))) == 1
    back = playbook(lab, "etcd_upgrade.yml", tmp_path, "-e", "gpufleet_etcd_target_version=%s" % old)
    assert back.returncode != 0 and "a rolling restart does not downgrade etcd" in " ".join(back.stdout.split())

    # a release whose image cannot run (no build here, as an image that does not pull): the first member stops,
    # does not come back in time, gets its image back and runs again; the upgrade stops there, the rest untouched
    major, minor, patch = (int(x) for x in new.split("."))
    missing = "%d.%d.%d" % (major, minor, patch + 1)
    failed = playbook(lab, "etcd_upgrade.yml", tmp_path, "-e", "gpufleet_etcd_target_version=%s" % missing,
                      "-e", "etcd_upgrade_wait_seconds=16")
    said = " ".join(failed.stdout.split())
    assert failed.returncode != 0 and "did not come back on %s" % missing in said, failed.stdout[-3000:]
    assert "Its image was put back to registry.k8s.io/etcd:%s-0" % new in said
    assert said.count("TASK [Set the release in the static pod's manifest:") == 1
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and releases(lab) != {u: new for u in after}:
        time.sleep(1)
    assert releases(lab) == {u: new for u in after}
    for host in lab.control_plane:
        assert "etcd:%s-0" % missing not in podman_exec(host, "cat", "/etc/kubernetes/manifests/etcd.yaml").stdout
    core.delete_namespaced_config_map(marker["metadata"]["name"], "default")
