# Copyright: gpufleet contributors
# Apache License 2.0
"""etcd in its own window: a member's static pod manifest read and its image moved to a release, the plan of a
rolling upgrade (which members, in what order, refused when the step is not one etcd allows), and the etcd release
the target's kubeadm would install.

etcd's rules (etcd's upgrade guides, docs/stages.md "etcd in its own window"): one minor at a time (3.5 -> 3.6 ->
3.7), every member on the old minor before the first moves, one member at a time with the cluster healthy in
between; the cluster's version becomes the new minor once every member runs it. A rolling restart never
downgrades: going back is the snapshot taken first (playbooks/etcd_restore.yml).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check
from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_releases import KUBEADM_ETCD
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import _url
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_yaml, mapping

MANIFEST = "/etc/kubernetes/manifests/etcd.yaml"
_VERSION = re.compile(r"^v?(\d{1,3})\.(\d{1,3})\.(\d{1,4})(?:-(\d{1,3}))?$")

Version = Tuple[int, int, int]

# The patch release every member must run before the next minor (etcd's upgrade guide to 3.6: 3.5 members older
# than 3.5.20 can come back from the upgrade as learners that never finish joining, etcd issue 19557).
MIN_BEFORE_MINOR = {(3, 6): (3, 5, 20)}


def parse_version(value: Any, what: str) -> Version:
    """An etcd release: 3.6.16, v3.6.16, or kubeadm's image tag 3.6.16-0."""
    match = _VERSION.match(str(value or "").strip())
    if not isinstance(value, str) or not match:
        raise InputError("%s: %r is not an etcd release (X.Y.Z, vX.Y.Z or kubeadm's image tag X.Y.Z-0)" % (
            what, value))
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def text(version: Version) -> str:
    return "%d.%d.%d" % version


def _flag(command: Sequence[Any], name: str) -> Optional[str]:
    values = [str(c).split("=", 1)[1] for c in command if str(c).startswith("--%s=" % name)]
    return values[-1] if values else None


# The annotation kubeadm writes on its own (stacked, `kubeadm init phase etcd local`) etcd static pod.
KUBEADM_LOCAL_ANNOTATION = "kubeadm.kubernetes.io/etcd.advertise-client-urls"


def _pod(manifest_text: str, where: str) -> Mapping[str, Any]:
    return mapping(load_yaml(manifest_text, where), where)


def _container(pod: Mapping[str, Any], where: str) -> Dict[str, Any]:
    containers = mapping(pod.get("spec"), where + ": spec").get("containers")
    if not isinstance(containers, list):
        containers = []
    etcd = [c for c in containers or [] if isinstance(c, dict) and c.get("name") == "etcd"]
    if len(etcd) != 1:
        raise InputError("%s: no container named etcd (found %s): not an etcd static pod" % (
            where, ", ".join(str(c.get("name")) for c in containers or [] if isinstance(c, dict)) or "none"))
    return etcd[0]


def read_member(manifest_text: str, where: str = MANIFEST) -> Dict[str, Any]:
    """What a member's static pod runs: its name, client and peer URLs, data directory, image and release."""
    pod = _pod(manifest_text, where)
    etcd = _container(pod, where)
    image = str(etcd.get("image") or "")
    repository, tag = image.rpartition(":")[0], image.rpartition(":")[2]
    if not repository or "/" in tag:
        raise InputError("%s: image %r has no tag; etcd_upgrade.yml moves a member by its image's tag" % (
            where, image))
    command = [str(c) for c in (etcd.get("command") or [])]
    name = _flag(command, "name")
    if not command or not name:
        raise InputError("%s: the etcd container's command has no --name (kubeadm's manifest names the member): "
                         "the member cannot be told apart" % where)
    return {"name": name, "image": image, "repository": repository, "tag": tag,
            "version": text(parse_version(tag, "%s: image %s" % (where, image))),
            "client_urls": [u for u in (_flag(command, "advertise-client-urls") or "").split(",") if u],
            "peer_urls": [u for u in (_flag(command, "initial-advertise-peer-urls") or "").split(",") if u],
            "data_dir": _flag(command, "data-dir") or "",
            # kubeadm's own local etcd (stacked): kubeadm writes this annotation on the manifest it makes
            "stacked": KUBEADM_LOCAL_ANNOTATION in (mapping(pod.get("metadata"), where).get("annotations") or {})}


def image_for(member: Mapping[str, Any], version: str, image: Optional[str] = None) -> str:
    """The image a member moves to: ``image`` as given, else its repository and its tag's form (kubeadm's X.Y.Z-0,
    or X.Y.Z / vX.Y.Z as other registries tag etcd)."""
    wanted = parse_version(version, "gpufleet_etcd_target_version")
    if image:
        repository, tag = image.rpartition(":")[0], image.rpartition(":")[2]
        if not repository or "/" in tag or parse_version(tag, "etcd_upgrade_image's tag") != wanted:
            raise InputError("etcd_upgrade_image: %r must be REPOSITORY:TAG with the tag of etcd %s (X.Y.Z-0 as "
                             "kubeadm's, or X.Y.Z)" % (image, text(wanted)))
        return image
    tag = str(member.get("tag") or "")
    suffix = "-0" if re.search(r"-\d+$", tag) else ""  # kubeadm's X.Y.Z-0; a plain X.Y.Z or vX.Y.Z stays plain
    return "%s:%s%s%s" % (member["repository"], "v" if tag.startswith("v") else "", text(wanted), suffix)


def set_image(manifest_text: str, new_image: str, where: str = MANIFEST) -> Tuple[str, str]:
    """``manifest_text`` with the etcd container's image set to ``new_image``, everything else byte for byte (the
    one line that names the old image is rewritten; the kubelet restarts the member when the file changes).
    Returns (the new text, the old image)."""
    old = str(_container(_pod(manifest_text, where), where).get("image") or "")
    if old == new_image:
        return manifest_text, old
    line = re.compile(r"^(\s*(?:-\s+)?image:\s*)([\"']?)%s\2(\s*)$" % re.escape(old), re.M)
    found = line.findall(manifest_text)
    if len(found) != 1:
        raise InputError("%s: %d lines name the image %s (expected one plain `image:` line): set the image by "
                         "hand or write the manifest as kubeadm does" % (where, len(found), old))
    new_text = line.sub(lambda m: m.group(1) + m.group(2) + new_image + m.group(2) + m.group(3), manifest_text)
    if str(_container(_pod(new_text, where), where).get("image")) != new_image:
        raise InputError("%s: the rewritten manifest does not name %s as etcd's image; nothing was written" % (
            where, new_image))
    return new_text, old


def apiserver_versions(pods: Sequence[Mapping[str, Any]]) -> List[str]:
    """The kube-apiserver releases the control plane's mirror pods run (their images' tags)."""
    out = set()
    for pod in pods:
        for c in (pod.get("spec") or {}).get("containers") or []:
            if isinstance(c, dict) and c.get("name") == "kube-apiserver":
                out.add(str(c.get("image") or "").rpartition(":")[2])
    return sorted(out)


def members_of(readings: Sequence[Mapping[str, Any]]) -> Dict[str, Mapping[str, Any]]:
    """Host -> member from the etcd_member results a loop registered (each with ``host`` and ``member``)."""
    out: Dict[str, Mapping[str, Any]] = {}
    for i, reading in enumerate(readings):
        host, member = reading.get("host"), reading.get("member")
        if not isinstance(host, str) or not isinstance(member, Mapping) or reading.get("failed"):
            raise InputError("members[%d]: not a reading of gpufleet.upgrade.etcd_member (host and member): %s" % (
                i, str(reading.get("msg") or sorted(reading))[:300]))
        if host in out:
            raise InputError("members: host %s read twice" % host)
        out[host] = member
    return out


def plan(target: str, members: Mapping[str, Mapping[str, Any]], endpoints: Sequence[Mapping[str, Any]],
         apiserver_pods: Optional[Sequence[Mapping[str, Any]]] = None) -> Dict[str, Any]:
    """Which members move to ``target`` and in what order, or InputError naming why not.

    ``members``: inventory host -> :func:`read_member` of its manifest; ``endpoints``: etcd_status's endpoints
    (``etcdctl endpoint status --cluster``, what runs). Each host's member is found among the endpoints by its
    client URLs; every endpoint must be an inventory member. Refused: a member newer than the target (a downgrade),
    a step of more than one minor or across majors, a learner, a control plane whose apiservers run different
    releases (a Kubernetes upgrade in flight: etcd moves in a window of its own). Followers move first, the leader
    last (one election, not one per member); members that already run the target, from a manifest that names it,
    are left out (a rerun goes on where a failed run stopped)."""
    wanted = parse_version(target, "gpufleet_etcd_target_version")
    if not members:
        raise InputError("the inventory's etcd group has no host: etcd_upgrade.yml moves the members listed there")
    versions = apiserver_versions(apiserver_pods or [])
    if len(versions) > 1:
        raise InputError("the control plane is mid-upgrade (kube-apiserver runs %s): etcd moves in a window of its "
                         "own; finish or roll back that run first" % ", ".join(versions))
    by_url: Dict[str, Mapping[str, Any]] = {}
    for ep in endpoints:
        by_url[_url(str(ep.get("endpoint") or ""))] = ep
    matched: Dict[str, Mapping[str, Any]] = {}
    claimed: Dict[str, str] = {}
    for host, member in sorted(members.items()):
        for url in member.get("client_urls") or []:
            if claimed.setdefault(_url(url), host) != host:
                raise InputError("%s and %s both advertise %s: a member is told apart by a client URL of its own" % (
                    claimed[_url(url)], host, url))
        urls = [_url(u) for u in member.get("client_urls") or []]
        found = [by_url[u] for u in urls if u in by_url]
        if not found:
            raise InputError("%s: its member %s (client URLs %s, from its etcd.yaml) did not answer etcdctl endpoint "
                             "status --cluster: every member must be up and healthy before one moves" % (
                                 host, member.get("name"), ", ".join(urls) or "none"))
        matched[host] = found[0]
    known = {_url(u) for m in members.values() for u in m.get("client_urls") or []}
    strangers = sorted(u for u in by_url if u not in known)
    if strangers:
        raise InputError("etcd member(s) at %s are not in the inventory's etcd group: put every member's host in "
                         "the group (each is moved through its own manifest)" % ", ".join(strangers))
    running: Dict[str, Version] = {}
    for host, ep in matched.items():
        running[host] = parse_version(str(ep.get("version") or ""), "%s: the version its member reports" % host)
        if ep.get("is_learner"):
            raise InputError("%s: its member is a learner; promote it (etcdctl member promote) before an upgrade"
                             % host)
        if running[host] > wanted:
            raise InputError("%s runs etcd %s, newer than gpufleet_etcd_target_version %s: a rolling restart does not "
                             "downgrade etcd; go back by restoring the snapshot taken before the upgrade "
                             "(playbooks/etcd_restore.yml)" % (host, text(running[host]), text(wanted)))
        if running[host][0] != wanted[0] or wanted[1] - running[host][1] > 1:
            raise InputError("%s runs etcd %s: etcd moves one minor at a time (%s -> %d.%d -> ...), not to %s "
                             "at once" % (host, text(running[host]), text(running[host]), running[host][0],
                                          running[host][1] + 1, text(wanted)))
    floor = MIN_BEFORE_MINOR.get(wanted[:2])
    for host in sorted(running):
        if floor and running[host][:2] == floor[:2] and running[host] < floor:
            raise InputError("%s runs etcd %s: before etcd %d.%d every member must run %s or later (etcd's upgrade "
                             "guide); move to the latest %d.%d patch first" % (
                                 host, text(running[host]), wanted[0], wanted[1], text(floor), floor[0], floor[1]))
        if running[host] == wanted and parse_version(str(members[host].get("version")), host) != wanted:
            raise InputError("%s runs etcd %s but its manifest names %s: the kubelet does not run its manifest; "
                             "make the two agree by hand before the upgrade" % (
                                 host, text(running[host]), members[host].get("image")))
    if any(ep.get("downgrade_enabled") for ep in matched.values()):
        raise InputError("an etcd downgrade is in progress (etcdctl downgrade enable): finish or cancel it "
                         "(etcdctl downgrade cancel) before an upgrade")
    ids: Dict[str, str] = {}
    for host, ep in matched.items():
        other = ids.setdefault(str(ep.get("member_id")), host)
        if other != host:
            raise InputError("%s and %s answer as the same etcd member (id %s; a client URL both advertise): each "
                             "host's member must advertise a URL of its own" % (other, host, ep.get("member_id")))
    leader = [h for h, ep in matched.items() if ep.get("is_leader")]
    todo = [h for h in sorted(members) if running[h] != wanted
            or parse_version(str(members[h].get("version")), "%s: its manifest's image" % h) != wanted]
    order = sorted(todo, key=lambda h: (h in leader, h))
    minors = sorted({"%d.%d" % v[:2] for v in running.values()})
    return {"target": text(wanted), "order": order, "leader": leader[0] if leader else None,
            "done": sorted(set(members) - set(todo)),
            "stacked": sorted(h for h in members if members[h].get("stacked")),
            "running": {h: text(v) for h, v in sorted(running.items())},
            "members": {h: str(members[h].get("name")) for h in sorted(members)},
            "endpoints": {h: str(matched[h].get("endpoint")) for h in sorted(matched)},
            "minor_step": minors != ["%d.%d" % wanted[:2]],
            "wait_for": {h: {str(matched[h].get("endpoint")): text(wanted)} for h in order},
            "all_at_target": {str(ep.get("endpoint")): text(wanted) for ep in matched.values()},
            # etcd 3.6 on reports the storage version, which follows the cluster's minor once every member runs it
            "storage_version": "%d.%d.0" % wanted[:2] if wanted >= (3, 6, 0) else "",
            "revision": max(int(ep.get("revision") or 0) for ep in matched.values())}


def kubeadm_etcd(target: str, endpoints: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The etcd release the ``target`` Kubernetes release's kubeadm installs (for a stacked member; an external
    etcd is the operator's), and whether the cell runs it. ``status``: runs-it, newer, older, mixed (members run
    different releases: an etcd window not finished), unknown (kubeadm's release for that minor is not in the
    table, or a member reported none)."""
    match = re.match(r"^v?(\d+)\.(\d+)\.", str(target or ""))
    minor = "%s.%s" % match.groups() if match else str(target)
    row = KUBEADM_ETCD.get(minor)
    reported = sorted({str(ep.get("version") or "") for ep in endpoints})
    out: Dict[str, Any] = {"target": target, "kubeadm": row[0] if row else None,
                           "source": "kubeadm %s (config images list)" % row[1] if row else None,
                           "running": reported}
    if row is None:
        out.update(status="unknown", message="etcd: the etcd release kubeadm %s installs is not in gpufleet's table "
                   "(data_releases.KUBEADM_ETCD); check `kubeadm config images list --kubernetes-version %s`" % (
                       minor, target))
        return out
    try:
        have = [parse_version(v, "etcd version") for v in reported]
    except InputError:
        have = []
    want = parse_version(row[0], "kubeadm's etcd")
    if not have:
        out.update(status="unknown", message="etcd: no member reported its release; kubeadm %s installs %s" % (
            target, row[0]))
    elif len({v[:2] for v in have}) > 1:
        out.update(status="mixed", message="etcd: members run %s - an etcd upgrade is not finished; finish it "
                   "(playbooks/etcd_upgrade.yml) before the control plane moves" % ", ".join(reported))
    elif min(have) < want:
        out.update(status="older", message="etcd: the cell runs %s, older than the %s kubeadm %s installs; move "
                   "etcd first, in its own window (playbooks/etcd_upgrade.yml, one minor at a time)" % (
                       text(min(have)), row[0], target))
    else:
        out.update(status="runs-it" if min(have)[:2] == want[:2] else "newer",
                   message="etcd: the cell runs %s; kubeadm %s installs %s" % (", ".join(reported), target, row[0]))
    return out


def member_checks(endpoints: Sequence[Mapping[str, Any]], versions: Mapping[str, str],
                  min_revision: Optional[int] = None, storage_version: str = "") -> List[Check]:
    """After a member moved: each endpoint in ``versions`` answers and runs its release, (``min_revision``) every
    endpoint's revision is at least the one before the upgrade - the member came back with the data - and
    (``storage_version``, after the last member) every member stores data as that release: the cluster moved."""
    checks = []
    for ep in endpoints if storage_version else []:
        got = str(ep.get("storage_version") or "none")
        checks.append(Check("etcd_storage_version", str(ep.get("endpoint")), got == storage_version, got,
                            storage_version, "" if got == storage_version else "the cluster has not moved to the "
                            "new minor (yet): etcd does once every member runs it"))
    answered = {_url(str(ep.get("endpoint") or "")): ep for ep in endpoints}
    for url, version in sorted(versions.items()):
        want = text(parse_version(version, "versions[%s]" % url))
        found = answered.get(_url(url))
        got = str(found.get("version") or "none") if found else "no answer"
        checks.append(Check("etcd_version", url, got == want, got, want,
                            "" if got == want else "the member has not come back on %s (yet)" % want))
    if min_revision is not None:
        for ep in endpoints:
            revision = int(ep.get("revision") or 0)
            checks.append(Check("etcd_revision", str(ep.get("endpoint")), revision >= min_revision, str(revision),
                                ">= %d (before the upgrade)" % min_revision,
                                "" if revision >= min_revision else "the member's revision went back: it answers "
                                "from older data"))
    return checks
