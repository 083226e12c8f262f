"""The lab's bare-metal hosts: podman containers from the offline-built Debian image, one per Node, with the lab's
apt repository, per-host simulator state, and (control-plane hosts) the etcd client certificates. Ansible reaches
them as it reaches real hosts: over SSH, each host's sshd on its own loopback port (host network), with a key the
lab generates - so a paused host is UNREACHABLE to Ansible, as a hung machine is (podman is only the runtime)."""
from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import time
from typing import Any, Dict, List, Tuple

import yaml

from gpufleet_lab import cluster, helm, kubelets, packages, pki
from gpufleet_lab.config import LAB_DIR, REPO, LabConfig
from gpufleet_lab.procs import LabError

PREFIX = "gpufleet-lab-"
APT_LIST = "deb [trusted=yes] file:/srv/gpufleet-apt ./\n"


def say(msg: str) -> None:
    print("lab: " + msg, flush=True)


def podman(*args: str, check: bool = True, capture: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["podman", *args], capture_output=capture, text=True, check=False)
    if check and proc.returncode != 0:
        raise LabError("podman %s failed (%d): %s" % (" ".join(args[:3]), proc.returncode,
                                                     (proc.stderr or proc.stdout).strip()[-1500:]))
    return proc


def base_image(cfg: LabConfig) -> str:
    script = LAB_DIR / "build" / "host-image.sh"
    proc = subprocess.run(["bash", str(script), cfg.image_tag], check=False,
                          env=dict(os.environ, GPUFLEET_LAB_CACHE=str(cfg.cache)))
    if proc.returncode != 0:
        raise LabError("building the host image failed; see the output above")
    return "localhost/gpufleet-lab-host:%s" % cfg.image_tag


def node_packages(cfg: LabConfig, role: str) -> List[str]:
    version = packages.k8s_deb_version(cfg.from_version)
    minor = ".".join(cfg.from_version.lstrip("v").split(".")[:2])
    pkgs = ["gpufleet-lab-sim", "kubeadm=%s" % version, "kubelet=%s" % version, "kubectl=%s" % version,
            "cri-tools=%s.0-1.1" % minor]
    if role == "cp":
        pkgs.append("gpufleet-etcd-client")
    else:
        driver = cfg.drivers["from"]
        branch = driver.split(".")[0]
        pkgs += ["nvidia-driver-%s-server=%s-0lab1" % (branch, driver),
                 "nvidia-fabricmanager-%s=%s-0lab1" % (branch, driver), "nvidia-container-toolkit=1.17.8-1",
                 "datacenter-gpu-manager-4-core=1:4.2.3-1", "nccl-tests"]
    return pkgs


def node_image(cfg: LabConfig, role: str, repo: pathlib.Path) -> str:
    """Commit (once per repository content and start version) an image with the start packages installed and
    held, so every `lab up` starts hosts in seconds."""
    tag = "localhost/gpufleet-lab-node:%s-%s-%s-%s" % (role, repo.name, cfg.from_version, cfg.image_tag)
    if podman("image", "exists", tag, check=False).returncode == 0:
        podman("tag", tag, "localhost/gpufleet-lab-node:%s" % role)  # the stable name Molecule platforms use
        return tag
    base = base_image(cfg)
    say("installing the %s packages (%s) into a new %s image" % (role, cfg.from_version, tag))
    name = PREFIX + "build-" + role
    podman("rm", "-f", name, check=False)
    podman("run", "-d", "--name", name, "-v", "%s:/srv/gpufleet-apt:ro" % repo, base, "sleep", "infinity")
    try:
        pkgs = node_packages(cfg, role)
        holds = [p.split("=")[0] for p in pkgs if p.startswith(("kube", "nvidia-driver", "nvidia-fabricmanager"))]
        script = ("set -e; rm -f /etc/apt/sources.list; rm -rf /etc/apt/sources.list.d/*; "
                  "echo '%s' > /etc/apt/sources.list.d/gpufleet-lab.list; "
                  "apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq %s >/dev/null; "
                  "apt-mark hold %s >/dev/null; mkdir -p /var/lib/gpufleet-lab /etc/kubernetes; "
                  "ssh-keygen -A >/dev/null; install -d -m 0700 /root/.ssh"
                  % (APT_LIST.strip(), " ".join(pkgs), " ".join(holds)))
        podman("exec", name, "sh", "-c", script)
        podman("commit", "-q", name, tag)
        podman("tag", tag, "localhost/gpufleet-lab-node:%s" % role)
    finally:
        podman("rm", "-f", name, check=False)
    return tag


def initial_host_state(cfg: LabConfig, host: str) -> Dict:
    gpu = host in cfg.gpu_hosts
    services = {"kubelet": "active", "containerd": "active"}
    if gpu:
        services.update({"nvidia-persistenced": "active", "nvidia-fabricmanager": "active"})
    return {"host": host, "gpus": cfg.gpus_per_node if gpu else 0, "persistence": True, "faults": {},
            "services": services, "boot_time": time.time()}


def container(cfg: LabConfig, host: str) -> str:
    """The podman container that is ``host`` of the lab's cell: gpufleet-lab-HOST in the first cell (lab.yml
    `cells`), gpufleet-CELL-HOST in its twins, so the cells' hosts of the same name live side by side."""
    return (PREFIX if cfg.cell_index == 0 else "gpufleet-%s-" % cfg.cell) + host


def container_state(name: str) -> Tuple[str, str]:
    """(status, image) of a container; ("absent", "") when there is none."""
    proc = podman("container", "inspect", "--format", "{{.State.Status}} {{.ImageName}}", name, check=False)
    if proc.returncode != 0:
        return "absent", ""
    status, _, image = proc.stdout.strip().partition(" ")
    return status, image


# What a host's mounts are; a host made with others is made again (2: the manifests are writable, for etcd_restore;
# 3: a GPU host's /var/lib/kubelet and its node credentials in /etc/kubernetes/kubelet.conf; 4: a control-plane
# host's too, which the real `kubeadm upgrade apply` and `node` rewrite; 5: a control-plane host's audit policy and
# the audit log its apiserver writes).
LAYOUT = "5"


def container_layout(name: str) -> str:
    proc = podman("container", "inspect", "--format", '{{index .Config.Labels "gpufleet-lab-layout"}}', name,
                  check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def ssh_port(cfg: LabConfig, host: str) -> int:
    return cfg.ports["ssh"] + cfg.machines.index(host)


def ssh_key(cfg: LabConfig) -> pathlib.Path:
    """The lab's SSH key (made once per lab run directory); its public half is every host's authorized key."""
    key = cfg.run / "ssh" / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        proc = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpufleet-lab", "-f", str(key)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise LabError("ssh-keygen failed: %s" % proc.stderr.strip())
    return key


def sshd_argv(port: int) -> List[str]:
    """A host container's command: sshd in the foreground on 127.0.0.1:``port``, keys only."""
    return ["sh", "-c", "mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e -p %d -o ListenAddress=127.0.0.1 "
            "-o PermitRootLogin=prohibit-password -o PasswordAuthentication=no -o UseDNS=no" % port]


def sshd_command(cfg: LabConfig, host: str) -> List[str]:
    return sshd_argv(ssh_port(cfg, host))


def ssh_banner(port: int, deadline: float) -> bool:
    """Whether an sshd on 127.0.0.1:``port`` sends its banner before ``deadline`` (a time.time())."""
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                if sock.recv(64).startswith(b"SSH-"):
                    return True
        except OSError:
            pass
        if time.time() > deadline:
            return False
        time.sleep(0.3)


def wait_sshd(cfg: LabConfig, host: str, timeout: float = 30) -> None:
    """Until the host's sshd sends its banner."""
    if not ssh_banner(ssh_port(cfg, host), time.time() + timeout):
        raise LabError("host %s: sshd on 127.0.0.1:%d did not answer within %ds; see `podman logs %s`" % (
            host, ssh_port(cfg, host), timeout, container(cfg, host)))


def ensure_hosts(cfg: LabConfig) -> None:
    repo, count = packages.ensure_repo(cfg)
    current = cfg.apt_current  # stable path for Molecule platforms (.config/molecule/config.yml)
    if not current.is_symlink() or current.resolve() != repo:
        current.unlink(missing_ok=True)
        current.symlink_to(repo.name)
    say("apt repository with %d packages at %s" % (count, repo))
    images = {role: node_image(cfg, role, repo) for role in ("cp", "gpu")}
    (cfg.run / "requests").mkdir(parents=True, exist_ok=True)
    public_key = ssh_key(cfg).with_suffix(".pub")
    for host in cfg.hosts:
        name = container(cfg, host)
        role = "cp" if host in cfg.control_plane else "gpu"
        node_kubeconfig(cfg, host)  # kept right in place (a running host mounts the file)
        status, image = container_state(name)
        if status != "absent" and image == images[role] and container_layout(name) != LAYOUT:
            say("host %s was made with other mounts; recreating it" % host)
            image = ""
        if status != "absent" and image == images[role]:
            if status == "paused":
                podman("unpause", name)
            if status in ("running", "paused"):
                continue
        elif status != "absent" and image:
            say("host %s runs %s; recreating it from %s (packages changed)" % (host, image, images[role]))
        podman("rm", "-f", "-t", "2", name, check=False)
        hostdir = cfg.run / "hosts" / host
        hostdir.mkdir(parents=True, exist_ok=True)
        statefile = hostdir / "state.json"
        if not statefile.exists():
            statefile.write_text(json.dumps(initial_host_state(cfg, host), indent=2))
        args = ["run", "-d", "--name", name, "--hostname", host, "--network", "host",
                "--label", "gpufleet-lab=" + cfg.cell, "--label", "gpufleet-lab-layout=" + LAYOUT,
                "-e", "GPUFLEET_SIM_HOST=%s" % host,
                "-v", "%s:/var/lib/gpufleet-lab" % hostdir,
                "-v", "%s:/var/lib/gpufleet-lab/cluster:ro" % (cfg.run / "cluster"),
                "-v", "%s:/var/lib/gpufleet-lab/requests" % (cfg.run / "requests"),
                "-v", "%s:/srv/gpufleet-apt:ro" % repo,
                "-v", "%s:/root/.ssh/authorized_keys:ro" % public_key]
        # the kubelet's directory (kubeadm writes its config.yaml) and its credentials
        (hostdir / "kubelet").mkdir(exist_ok=True)
        args += ["-v", "%s:%s" % (hostdir / "kubelet", kubelets.CONFIG_ON_HOST),
                 "-v", "%s:/etc/kubernetes/kubelet.conf:ro" % node_kubeconfig(cfg, host)]
        if role == "cp":
            args += ["-v", "%s:/etc/kubernetes/pki:ro" % cfg.pki,
                     "-v", "%s:/etc/kubernetes/admin.conf:ro" % (cfg.run / "kubeconfigs" / "admin.conf"),
                     # read and written (a restore moves etcd.yaml and kube-apiserver.yaml aside): kubeadm.py
                     "-v", "%s:/etc/kubernetes/manifests" % (hostdir / "manifests"),
                     "-v", "%s:%s:ro" % (cluster.audit_policy(cfg), cluster.AUDIT_POLICY_ON_HOST),
                     "-v", "%s:%s" % (cluster.audit_log_dir(cfg, host), cluster.AUDIT_LOG_ON_HOST.rstrip("/"))]
        say("starting host %s (%s, sshd on 127.0.0.1:%d)" % (host, images[role], ssh_port(cfg, host)))
        podman(*args, images[role], *sshd_command(cfg, host))
    for host in cfg.backup_hosts:
        ensure_backup_host(cfg, host, public_key)
    for host in cfg.machines:
        wait_sshd(cfg, host)
    for host in cfg.hosts:
        ensure_kubelet(cfg, host)
    prune_images(list(images.values()))


def node_kubeconfig(cfg: LabConfig, host: str) -> pathlib.Path:
    """The host's kubelet.conf: its node credentials (system:node:HOST); a worker's kubelet reaches the cell's
    apiservers through the load balancer, a control-plane host's its own apiserver, as kubeadm sets them up since
    its kubelet local mode (`upgrade apply` and `node` otherwise rewrite the file to that)."""
    path = cfg.run / "kubeconfigs" / ("kubelet-%s.conf" % host)
    server = (cfg.apiserver_url(host) if host in cfg.control_plane
              else "https://127.0.0.1:%d" % cfg.ports["apiserver_lb"])
    if not path.exists() or ("server: %s\n" % server) not in path.read_text():
        pki.kubeconfig(cfg.pki, server, "node-" + host, path)
    return path


def pool_kubelet_settings() -> Dict[str, Any]:
    """The lab GPU pool's own kubelet settings: its baseline's node.kubelet_config (inventories/lab/baselines)."""
    doc = yaml.safe_load((REPO / "inventories" / "lab" / "baselines" / "h100-train.yml").read_text())
    return dict((doc.get("node") or {}).get("kubelet_config") or {})


def ensure_kubelet(cfg: LabConfig, host: str) -> None:
    """A host's kubelet as it was when the host joined: its config file written by the real kubeadm's kubelet-config
    phase from the cluster's kubelet-config ConfigMap - on a GPU host with the pool's settings as a patch (what
    `kubeadm join --patches` writes), then started (kubelets.start: what its kubelet serves at /configz). A
    control-plane host's config file is what `kubeadm upgrade apply` and `node` back up and rewrite."""
    hostdir = cfg.run / "hosts" / host
    if not (hostdir / "kubelet" / "config.yaml").exists():
        from kubernetes import client

        from gpufleet_lab import kube, kubeadm
        kubelet = client.CoreV1Api(kube.api(cfg)).read_namespaced_config_map("kubelet-config", "kube-system")
        # what kubeadm join's kubelet-start phase leaves: the cluster's config and the kubelet's flags file
        (hostdir / "kubelet" / "config.yaml").write_text(kubelet.data["kubelet"])
        (hostdir / "kubelet" / "kubeadm-flags.env").write_text(
            'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=%s"\n' % kubeadm.CONTAINERD)
        patches = hostdir / "join-patches"
        patches.mkdir(exist_ok=True)
        (patches / "kubeletconfiguration+merge.json").write_text(
            json.dumps(pool_kubelet_settings() if host in cfg.gpu_hosts else {}))
        say("host %s: kubelet config from the kubelet-config ConfigMap%s (real kubeadm)" % (
            host, " and the pool's patch" if host in cfg.gpu_hosts else ""))
        podman("exec", container(cfg, host), "/usr/lib/gpufleet-sim/kubeadm-real", "upgrade", "node", "phase",
               "kubelet-config", "--kubeconfig", "/etc/kubernetes/kubelet.conf",
               "--patches", "/var/lib/gpufleet-lab/join-patches")
        (hostdir / "configz.json").unlink(missing_ok=True)
    if host in cfg.gpu_hosts and not (hostdir / "configz.json").exists():
        kubelets.start(cfg, host, cluster.load_state(cfg)["kubelet"][host])

def ensure_backup_host(cfg: LabConfig, host: str, public_key: pathlib.Path) -> None:
    """A machine off the cell that keeps copies of the encrypted etcd snapshots: the plain host image, sshd only."""
    name, image = container(cfg, host), "localhost/gpufleet-lab-host:%s" % cfg.image_tag
    if container_state(name) == ("running", image):
        return
    podman("rm", "-f", "-t", "2", name, check=False)
    say("starting backup host %s (%s, sshd on 127.0.0.1:%d)" % (host, image, ssh_port(cfg, host)))
    sshd = sshd_command(cfg, host)
    sshd[-1] = "ssh-keygen -A >/dev/null && " + sshd[-1]
    podman("run", "-d", "--name", name, "--hostname", host, "--network", "host", "--label", "gpufleet-lab=" + cfg.cell,
           "-v", "%s:/root/.ssh/authorized_keys:ro" % public_key, image, *sshd)


def prune_images(keep: List[str]) -> None:
    """Remove node images of earlier package sets (the ones hosts no longer use)."""
    listed = podman("images", "--format", "{{.Repository}}:{{.Tag}}", "localhost/gpufleet-lab-node",
                    check=False).stdout.split()
    wanted = set(keep) | {"localhost/gpufleet-lab-node:cp", "localhost/gpufleet-lab-node:gpu"}
    for image in listed:
        if image not in wanted:
            podman("rmi", image, check=False)


def stop_hosts(cfg: LabConfig) -> None:
    # this cell's hosts only (the label's value is the cell; hosts of earlier labs carry gpufleet-lab=1)
    mine = {container(cfg, h) for h in cfg.machines}
    listed = podman("ps", "-a", "--filter", "label=gpufleet-lab", "--format", "{{.Names}}", check=False).stdout.split()
    names = [n for n in listed if n in mine]
    if names:
        say("removing hosts %s" % ", ".join(names))
        podman("rm", "-f", "-t", "2", *names, check=False)


def host_status(cfg: LabConfig) -> Dict[str, str]:
    out = {}
    for host in cfg.machines:
        out[host] = container_state(container(cfg, host))[0]
    return out


def etcd_vars(cfg: LabConfig) -> Dict[str, Any]:
    """The etcd group's cell-specific settings: the cell's etcd member (for a restore too), and where the
    etcd_snapshot role ships its encrypted snapshots in the lab - the backup host and the lab's S3 server (its
    lab-only keys: a real cell's come from an AWX credential or the environment). The rest is in
    inventories/lab/group_vars/etcd.yml."""
    out: Dict[str, Any] = {"etcd_snapshot_endpoints": cluster.etcd_urls(cfg),
                           "etcd_snapshot_s3_bucket": cfg.s3["bucket"], "etcd_snapshot_s3_prefix": "lab/",
           "etcd_snapshot_s3_endpoint_url": "http://127.0.0.1:%d" % cfg.ports["s3"],
           "etcd_snapshot_s3_access_key": cfg.s3["access_key"], "etcd_snapshot_s3_secret_key": cfg.s3["secret_key"],
           # the members' data directory on their hosts (each member's name and peer URL: etcd_member_vars)
           "etcd_restore_data_dir": cluster.ETCD_DATA_ON_HOST}
    if cfg.backup_hosts:
        out["etcd_snapshot_backup_host"] = cfg.backup_hosts[0]
    return out


def etcd_member_vars(cfg: LabConfig, host: str) -> Dict[str, Any]:
    """A member as a restore must make it again: its name and peer URL (what its etcd.yaml runs with)."""
    return {"etcd_restore_member_name": host, "etcd_restore_peer_url": cluster.etcd_peer_url(cfg, host)}


def write_inventory(cfg: LabConfig, cluster_uid: str) -> pathlib.Path:
    gpu_children = {}
    for rack_set, hosts in cfg.rack_sets.items():
        group = "rack_set_" + rack_set.replace("-", "_")
        gpu_children[group] = {"vars": {"gpufleet_failure_domain": rack_set},
                               "hosts": {h: {"ansible_port": ssh_port(cfg, h)} for h in hosts}}
    inventory = {"all": {
        # SSH as to real hosts (ansible.cfg's [ssh_connection] settings apply); the lab's hosts share 127.0.0.1,
        # each on its own port, and get new host keys when their image is rebuilt: no known_hosts for them.
        "vars": {"ansible_host": "127.0.0.1", "ansible_user": "root",
                 "ansible_ssh_private_key_file": str(ssh_key(cfg)),
                 "ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no",
                 "ansible_python_interpreter": "/usr/bin/python3",
                 "gpufleet_lab": True,
                 # absolute paths: the controller (implicit localhost) has no inventory_dir to build them from
                 "gpufleet_kubeconfig": str(cfg.inventory / "kubeconfig"),
                 "gpufleet_baseline_dir": str(cfg.inventory / "baselines"),
                 "gpufleet_out_dir": str(cfg.out_dir),
                 # the cell's identity, as an operator records it (gpufleet.upgrade.cluster_identity checks it)
                 "gpufleet_cluster_uid": cluster_uid,
                 # the Helm CLI the addons stage runs, and where the lab's charts are packaged
                 **helm.inventory_vars(cfg)},
        "children": {
            "kube_control_plane": {"hosts": {
                h: {"ansible_port": ssh_port(cfg, h),
                    "gpufleet_apiserver_url": cfg.apiserver_url(h)}
                for h in cfg.control_plane}},
            # each control-plane host's static pod is an etcd member (cluster.etcd_members)
            "etcd": {"hosts": {h: etcd_member_vars(cfg, h) for h in cluster.etcd_members(cfg)},
                     "vars": etcd_vars(cfg)},
            "gpu_nodes": {"children": gpu_children},
            # off the cell: copies of the encrypted etcd snapshots (the etcd group's vars above name the host)
            "backup_hosts": {"hosts": {h: {"ansible_port": ssh_port(cfg, h)} for h in cfg.backup_hosts}},
        }}}
    cfg.inventory.mkdir(parents=True, exist_ok=True)
    shared = REPO / "inventories" / "lab"
    if cfg.inventory != shared:  # a twin cell: the committed settings and baselines are the lab cell's own
        _link(cfg, cfg.inventory / "baselines", shared / "baselines")
        _twin_group_vars(cfg, shared / "group_vars")
    path = cfg.inventory / "hosts.yml"
    header = "---\n# Written by `lab up` (lab/gpufleet_lab/hosts.py); regenerated on every up. Do not edit.\n"
    path.write_text(header + yaml.safe_dump(inventory, sort_keys=False))
    return path


def _link(cfg: LabConfig, link: pathlib.Path, target: pathlib.Path) -> None:
    """``link`` (re)pointed at ``target``, atomically."""
    if link.is_symlink() and os.readlink(link) == str(target):
        return
    if link.exists() and not link.is_symlink():
        raise LabError("%s is not a link to %s; remove it (bin/lab reset with GPUFLEET_LAB_CELL=%s)" % (
            link, target, cfg.cell))
    tmp = link.with_name(".%s.tmp" % link.name)
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    tmp.replace(link)


def _twin_group_vars(cfg: LabConfig, shared: pathlib.Path) -> None:
    """A twin cell's group_vars: a link to each of the lab cell's committed files, except that ``all`` is a
    directory holding a link to the committed all.yml and, loaded after it, the twin's own name (each cell of a
    fleet has its own ``gpufleet_cluster_name``, and typed confirmations name it)."""
    folder = cfg.inventory / "group_vars"
    if folder.is_symlink():  # the layout before twins had names of their own
        folder.unlink()
    folder.mkdir(exist_ok=True)
    for item in sorted(shared.glob("*.yml")):
        if item.name == "all.yml":
            (folder / "all").mkdir(exist_ok=True)
            _link(cfg, folder / "all" / "00-lab.yml", item)
            (folder / "all" / "50-cell.yml").write_text(
                "---\n# Written by `lab up` (lab/gpufleet_lab/hosts.py): this twin cell's own name.\n"
                "gpufleet_cluster_name: %s\n" % cfg.cell)
        else:
            _link(cfg, folder / item.name, item)
