# Copyright: gpufleet contributors
# Apache License 2.0
"""Kubernetes versions and the version-skew policy (docs/reference.md section 1, policy for 1.28 and later).

Kubernetes versions are semantic versions (``v1.34.2``, ``v1.35.0-rc.1``, ``v1.34.2-eks-113cf36``,
``v1.34.2+k3s1``), not PEP 440 versions: ``packaging.version`` rejects several of them, so they are parsed here
with the semver grammar. Module utils also run on managed nodes, which need nothing beyond the Python standard
library.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, PolicyError

# ASCII digits only (``\d`` takes Arabic-Indic and other Unicode digits, and int() reads them). Surrounding
# whitespace is accepted and dropped: every caller keeps the canonical form (str of the parsed version), never the
# raw text.
_VERSION_RE = re.compile(
    r"\s*v?(?P<major>0|[1-9][0-9]*)\.(?P<minor>0|[1-9][0-9]*)(?:\.(?P<patch>0|[1-9][0-9]*))?"
    r"(?:-(?P<pre>[0-9A-Za-z.-]+))?(?:\+(?P<build>[0-9A-Za-z.-]+))?\s*", re.ASCII
)
_PRE_ORDER = {"alpha": 0, "beta": 1, "rc": 2}
# Bounds on each number: Kubernetes is at v1.3x; a version far outside them is a typo or hostile input (a minor of
# 10^11 would make the path planner walk 10^11 hops).
VERSION_BOUNDS = {"major": 9, "minor": 999, "patch": 99999}
MAX_VERSION_CHARS = 128


@dataclass(frozen=True)
class KubeVersion:
    """A parsed Kubernetes version. ``patch`` is None for a bare minor such as ``1.34``."""

    major: int
    minor: int
    patch: Optional[int] = None
    pre: str = ""
    raw: str = field(default="", compare=False)

    @property
    def minor_str(self) -> str:
        return "%d.%d" % (self.major, self.minor)

    @property
    def is_prerelease(self) -> bool:
        return _pre_kind(self.pre) is not None

    def sort_key(self) -> Tuple[int, int, int, int, Tuple[Any, ...]]:
        kind = _pre_kind(self.pre)
        if kind is None:
            pre_key: Tuple[Any, ...] = (3,)  # a release sorts after its pre-releases
        else:
            nums = tuple(int(p) for p in re.findall(r"\d+", self.pre))
            pre_key = (_PRE_ORDER[kind],) + nums
        return (self.major, self.minor, self.patch if self.patch is not None else -1, 0, pre_key)

    def __lt__(self, other: KubeVersion) -> bool:
        return self.sort_key() < other.sort_key()

    def __le__(self, other: KubeVersion) -> bool:
        return self.sort_key() <= other.sort_key()

    def __gt__(self, other: KubeVersion) -> bool:
        return self.sort_key() > other.sort_key()

    def __ge__(self, other: KubeVersion) -> bool:
        return self.sort_key() >= other.sort_key()

    def minors_above(self, other: KubeVersion) -> int:
        """How many minors this version is above ``other`` (negative when below). Same major only."""
        if self.major != other.major:
            raise PolicyError(
                "cannot compare Kubernetes versions across major versions (%s and %s)" % (self, other))
        return self.minor - other.minor

    def __str__(self) -> str:
        text = "v%d.%d" % (self.major, self.minor)
        if self.patch is not None:
            text += ".%d" % self.patch
        if self.pre:
            text += "-" + self.pre
        return text


def _pre_kind(pre: str) -> Optional[str]:
    head = pre.split(".", 1)[0].lower()
    return head if head in _PRE_ORDER else None


def parse_version(value: Any, what: str = "version") -> KubeVersion:
    """Parse ``v1.34.2``, ``1.34``, ``v1.35.0-alpha.1``, ``v1.34.2-eks-1`` (vendor suffixes are kept but do not
    order), or a Debian package version such as ``1.34.2-1.1``. ``what`` names the field in errors."""
    if isinstance(value, KubeVersion):
        return value
    if not isinstance(value, str) or not value.strip():
        raise InputError("%s: expected a Kubernetes version such as v1.34.2, got %r" % (what, value))
    match = _VERSION_RE.fullmatch(value) if len(value) <= MAX_VERSION_CHARS else None
    if not match:
        raise InputError(
            "%s: %r is not a Kubernetes version; use the form v1.34.2 (or 1.34 for a whole minor)" % (
                what, value[:MAX_VERSION_CHARS]))
    numbers = {part: int(match.group(part)) for part in ("major", "minor", "patch") if match.group(part) is not None}
    for part, number in numbers.items():
        if number > VERSION_BOUNDS[part]:
            raise InputError("%s: %r is not a plausible Kubernetes version (%s %d is above %d); use the form "
                             "v1.34.2" % (what, value, part, number, VERSION_BOUNDS[part]))
    return KubeVersion(
        major=numbers["major"],
        minor=numbers["minor"],
        patch=numbers.get("patch"),
        pre=match.group("pre") or "",
        raw=value.strip(),
    )


def parse_release(value: Any, what: str = "target version") -> KubeVersion:
    """A full release ``vX.Y.Z`` (a leading ``v`` optional), nothing else: packages are pinned to it and the ledger,
    run id and records carry its canonical form ``str(parse_release(x))``."""
    version = parse_version(value, what)
    if version.patch is None or version.pre or "+" in version.raw:
        raise InputError("%s: %r is not a full release; give one such as v%s.0 (packages are pinned to an exact "
                         "version)" % (what, value, version.minor_str))
    return version


def version_at_minor(minor: int, major: int, hop_versions: Mapping[str, str]) -> KubeVersion:
    """The version to use for an intermediate hop: ``hop_versions['1.33']`` when given, else the bare minor."""
    key = "%d.%d" % (major, minor)
    if key in hop_versions:
        return parse_version(hop_versions[key], "hop_versions[%s]" % key)
    return KubeVersion(major, minor)


# --------------------------------------------------------------------------------------------------------------
# Observed component versions and the skew rules
# --------------------------------------------------------------------------------------------------------------
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
CLOUD_CONTROLLER_MANAGER = "cloud-controller-manager"
KUBELET = "kubelet"
KUBE_PROXY = "kube-proxy"
KUBECTL = "kubectl"
COMPONENTS = (APISERVER, CONTROLLER_MANAGER, SCHEDULER, CLOUD_CONTROLLER_MANAGER, KUBELET, KUBE_PROXY, KUBECTL)


@dataclass(frozen=True)
class Observed:
    component: str
    node: str
    version: KubeVersion
    pool: str = ""


def parse_observed(items: Sequence[Mapping[str, Any]]) -> List[Observed]:
    """Validate ``[{component, node, version, pool?}]`` as gathered by the preflight inventory."""
    if not isinstance(items, (list, tuple)):
        raise InputError("components: expected a list of {component, node, version}, got %s" % type(items).__name__)
    out = []
    for index, item in enumerate(items):
        where = "components[%d]" % index
        if not isinstance(item, Mapping):
            raise InputError("%s: expected a mapping with component, node and version" % where)
        component = item.get("component")
        if component not in COMPONENTS:
            raise InputError("%s.component: %r is not one of %s" % (where, component, ", ".join(COMPONENTS)))
        node = item.get("node") or ""
        if component != KUBECTL and not node:
            raise InputError("%s.node: required for %s (the node the component runs on)" % (where, component))
        version = parse_version(item.get("version"), "%s.version (%s on %s)" % (where, component, node or "?"))
        out.append(Observed(str(component), str(node), version, str(item.get("pool") or "")))
    return out


@dataclass
class Violation:
    component: str
    node: str
    version: str
    reference: str
    rule: str
    fix: str

    def as_dict(self) -> Dict[str, str]:
        return dict(self.__dict__)

    def message(self) -> str:
        return "%s on %s is %s: %s (%s). %s" % (
            self.component, self.node or "client", self.version, self.rule, self.reference, self.fix)


def _kubelet_allowed_lag(kubelet: KubeVersion) -> int:
    """Kubelets may be 3 minors older than the apiserver, 2 when the kubelet is older than 1.25."""
    return 3 if (kubelet.major, kubelet.minor) >= (1, 25) else 2


def _local_apiservers(observed: Sequence[Observed]) -> Dict[str, Observed]:
    """The apiserver on each control-plane node (the oldest, should a node be listed twice): the instance kubeadm
    points that node's controller manager and scheduler at (their kubeconfigs name the local endpoint since kubeadm
    1.19), and, with ControlPlaneKubeletLocalMode (kubeadm 1.33 and later by default), its kubelet."""
    out: Dict[str, Observed] = {}
    for o in observed:
        if o.component == APISERVER and o.node and (o.node not in out or o.version < out[o.node].version):
            out[o.node] = o
    return out


def _own_reference(obs: Observed, local: Mapping[str, Observed], oldest: Observed, newest: Observed) -> bool:
    """Whether ``obs`` is held to its own host's apiserver rather than the oldest: a controller manager or
    scheduler on a control-plane node; a kubelet there only in the one state kubeadm's host-by-host procedure makes
    - at its own apiserver's minor, one minor above the oldest, the control plane within one minor. A
    cloud-controller-manager (in-cluster config: any apiserver) and every other component: the oldest."""
    own = local.get(obs.node)
    if own is None:
        return False
    if obs.component in (CONTROLLER_MANAGER, SCHEDULER):
        return True
    return (obs.component == KUBELET and obs.version.minor == own.version.minor
            and obs.version.minors_above(oldest.version) <= 1 and newest.version.minors_above(oldest.version) <= 1)


def skew_violations(observed: Sequence[Observed]) -> List[Violation]:
    """Every current breach of the version-skew policy, oldest rule first. The controller manager and scheduler of a
    control-plane node, and its kubelet in the state kubeadm's host-by-host procedure leaves it (_own_reference),
    are held to that node's own apiserver, so a control plane halted after some hosts moved can resume; every other
    component is held to the oldest apiserver."""
    apiservers = [o for o in observed if o.component == APISERVER]
    if not apiservers:
        raise InputError("components: no kube-apiserver listed; the skew policy is relative to the apiservers")
    oldest = min(apiservers, key=lambda o: o.version.sort_key())
    newest = max(apiservers, key=lambda o: o.version.sort_key())
    out: List[Violation] = []
    if newest.version.minors_above(oldest.version) > 1:
        out.append(Violation(
            APISERVER, newest.node, str(newest.version), "oldest apiserver %s on %s" % (oldest.version, oldest.node),
            "HA apiservers must be within 1 minor of each other",
            "finish upgrading the control plane: bring %s to at least v%s" % (oldest.node, _minor(newest.version, -1))))
    oldest_ref = "oldest apiserver %s on %s" % (oldest.version, oldest.node)
    newest_ref = "newest apiserver %s on %s" % (newest.version, newest.node)
    kubelets = {o.node: o for o in observed if o.component == KUBELET}
    local = _local_apiservers(observed)

    def reference(obs: Observed) -> Tuple[KubeVersion, str]:
        if _own_reference(obs, local, oldest, newest):
            own = local[obs.node]
            return own.version, "its own apiserver %s on %s" % (own.version, obs.node)
        return oldest.version, oldest_ref

    for obs in observed:
        v = obs.version
        if obs.component in (CONTROLLER_MANAGER, SCHEDULER, CLOUD_CONTROLLER_MANAGER):
            ref, ref_text = reference(obs)
            if v.minors_above(ref) > 0:
                out.append(Violation(obs.component, obs.node, str(v), ref_text,
                                     "must not be newer than any apiserver it talks to",
                                     "upgrade every apiserver first, or roll %s back to %s" % (
                                         obs.component, ref.minor_str)))
            elif newest.version.minors_above(v) > 1:
                out.append(Violation(obs.component, obs.node, str(v), newest_ref,
                                     "may be at most 1 minor older than the apiservers",
                                     "upgrade %s on %s to v%s" % (obs.component, obs.node,
                                                                  newest.version.minor_str)))
        elif obs.component == KUBELET:
            ref, ref_text = reference(obs)
            if v.minors_above(ref) > 0:
                out.append(Violation(KUBELET, obs.node, str(v), ref_text,
                                     "kubelet must never be newer than the apiserver",
                                     "upgrade the control plane to v%s first, or reinstall kubelet v%s on %s" % (
                                         v.minor_str, ref.minor_str, obs.node)))
            elif newest.version.minors_above(v) > _kubelet_allowed_lag(v):
                out.append(Violation(KUBELET, obs.node, str(v), newest_ref,
                                     "kubelet may be at most %d minors older than the apiserver"
                                     % _kubelet_allowed_lag(v),
                                     "drain %s and upgrade its kubelet to at least v%s" % (
                                         obs.node, _minor(newest.version, -_kubelet_allowed_lag(v)))))
        elif obs.component == KUBE_PROXY:
            if v.minors_above(oldest.version) > 0:
                out.append(Violation(KUBE_PROXY, obs.node, str(v), oldest_ref,
                                     "kube-proxy must never be newer than the apiserver",
                                     "upgrade the control plane first"))
            elif newest.version.minors_above(v) > 3:
                out.append(Violation(KUBE_PROXY, obs.node, str(v), newest_ref,
                                     "kube-proxy may be at most 3 minors older than the apiserver",
                                     "upgrade kube-proxy to at least v%s" % _minor(newest.version, -3)))
            kubelet = kubelets.get(obs.node)
            if kubelet is not None and abs(kubelet.version.minors_above(v)) > 3:
                out.append(Violation(KUBE_PROXY, obs.node, str(v), "kubelet %s on the same node" % kubelet.version,
                                     "kube-proxy must be within 3 minors of its kubelet",
                                     "upgrade kube-proxy and the kubelet on %s together" % obs.node))
        elif obs.component == KUBECTL:
            if abs(v.minors_above(oldest.version)) > 1 or abs(v.minors_above(newest.version)) > 1:
                out.append(Violation(KUBECTL, obs.node, str(v), "apiservers %s..%s" % (
                    oldest.version, newest.version),
                    "kubectl must be within 1 minor of the apiserver, either way",
                    "install kubectl v%s" % newest.version.minor_str))
    return out


def _minor(version: KubeVersion, delta: int) -> str:
    return "%d.%d" % (version.major, version.minor + delta)


# --------------------------------------------------------------------------------------------------------------
# Upgrade planning
# --------------------------------------------------------------------------------------------------------------
@dataclass
class PoolPolicy:
    """``skip_level``: the pool may stay behind and jump several minors in one drain (training pools); without
    it the pool follows the control plane one minor at a time (one drain per hop)."""

    skip_level: bool = True


def parse_pool_policies(pools: Optional[Mapping[str, Any]], what: str = "pools") -> Dict[str, PoolPolicy]:
    """Per pool, its policy; ``what`` names them in errors (``gpufleet_pool_policies`` for the cell)."""
    if pools in (None, ""):
        pools = {}
    if not isinstance(pools, Mapping):
        raise InputError("%s: expected a mapping of pool to {skip_level: bool}, such as {h100-train: {skip_level: "
                         "true}}, got %s %r" % (what, type(pools).__name__, pools))
    out: Dict[str, PoolPolicy] = {}
    for name, spec in pools.items():
        if not isinstance(spec, Mapping):
            raise InputError("%s.%s: expected a mapping such as {skip_level: true}" % (what, name))
        unknown = set(spec) - {"skip_level"}
        if unknown:
            raise InputError("%s.%s: unknown field(s) %s; allowed: skip_level" % (
                what, name, ", ".join(sorted(str(k) for k in unknown))))
        skip = spec.get("skip_level", True)
        if not isinstance(skip, bool):
            raise InputError("%s.%s.skip_level: expected a boolean, got %r" % (what, name, skip))
        out[str(name)] = PoolPolicy(skip_level=skip)
    return out


def plan_upgrade(observed: Sequence[Observed], target: KubeVersion, *, allow_multi_hop: bool = False,
                 hop_versions: Optional[Mapping[str, str]] = None,
                 pools: Optional[Mapping[str, PoolPolicy]] = None) -> Dict[str, Any]:
    """Plan the control-plane path and every node pool's kubelet upgrades to ``target``.

    Raises :class:`PolicyError` for a downgrade, a target that skips a control-plane minor (unless
    ``allow_multi_hop``), a pre-release without opting in, or a kubelet newer than the apiserver.
    """
    hop_versions = hop_versions or {}
    pools = pools or {}
    apiservers = [o for o in observed if o.component == APISERVER]
    if not apiservers:
        raise InputError("components: no kube-apiserver listed; cannot plan without the control plane version")
    oldest = min(apiservers, key=lambda o: o.version.sort_key())
    newest = max(apiservers, key=lambda o: o.version.sort_key())
    if target.major != oldest.version.major:
        raise PolicyError("target %s changes the major version of the control plane (%s); not supported" % (
            target, oldest.version))
    if target.patch is None:
        raise InputError("target: %s names a minor, not a release; give the exact version such as v%s.0" % (
            target, target.minor_str))
    if newest.version > target:
        raise PolicyError(
            "target %s is older than the running apiserver %s on %s: downgrades are refused. Choose a target at or "
            "above %s; to roll back, restore the etcd snapshot with playbooks/etcd_restore.yml (break-glass)" % (
                target, newest.version, newest.node, newest.version))
    local = _local_apiservers(observed)
    newer_kubelets = [o for o in observed if o.component == KUBELET and o.version.minors_above(
        local[o.node].version if _own_reference(o, local, oldest, newest) else oldest.version) > 0]
    if newer_kubelets:
        worst = max(newer_kubelets, key=lambda o: o.version.sort_key())
        raise PolicyError(
            "kubelet %s on %s is newer than the apiserver %s on %s; the skew policy never allows that and kubeadm "
            "fails its KubeletVersion preflight. Reinstall kubelet v%s on %s (and %d other node(s)) before "
            "upgrading" % (worst.version, worst.node, oldest.version, oldest.node, oldest.version.minor_str,
                           worst.node, len(newer_kubelets) - 1))
    distance = target.minors_above(oldest.version)
    if distance > 1 and not allow_multi_hop:
        path = " -> ".join("v%d.%d" % (target.major, m) for m in range(oldest.version.minor + 1, target.minor + 1))
        raise PolicyError(
            "target %s is %d minors above the control plane (%s on %s): the control plane never skips a minor and "
            "kubeadm can upgrade only 1 minor version at a time. Upgrade to v%s first, or set allow_multi_hop=true "
            "to plan the whole path %s" % (
                target, distance, oldest.version, oldest.node, _minor(oldest.version, 1), path))
    hops: List[KubeVersion] = []
    for minor in range(oldest.version.minor + 1, target.minor):
        hops.append(version_at_minor(minor, target.major, hop_versions))
    if distance >= 1:
        hops.append(target)
    elif target > oldest.version:
        hops.append(target)  # a patch upgrade within the same minor
    cp_minors = [oldest.version.minor] + [h.minor for h in hops]

    pool_plans = []
    by_pool: Dict[str, List[Observed]] = {}
    for obs in observed:
        if obs.component == KUBELET:
            by_pool.setdefault(obs.pool or "default", []).append(obs)
    for pool_name in sorted(by_pool):
        members = by_pool[pool_name]
        policy = pools.get(pool_name, PoolPolicy())
        pool_plans.append(_plan_pool(pool_name, members, policy, cp_minors, hops, target))
    return {
        "current": str(oldest.version),
        "target": str(target),
        "control_plane_mixed": oldest.version != newest.version,
        "control_plane_path": [str(h) for h in hops],
        "pools": pool_plans,
        "node_drains": sum(len(p["steps"]) for p in pool_plans),
    }


def _plan_pool(name: str, members: List[Observed], policy: PoolPolicy, cp_minors: List[int],
               hops: List[KubeVersion], target: KubeVersion) -> Dict[str, Any]:
    """Greedy: keep the pool's kubelets as long as the policy allows, then jump as far as the control plane.

    Hop ``h`` (1-based) raises the control plane to ``cp_minors[h]``. A pool at kubelet minor ``k`` must be
    upgraded before hop ``h`` when ``cp_minors[h] - k`` exceeds its allowed lag: the policy's 3 minors (2 for
    kubelets older than 1.25) for skip-level pools, 1 for pools that follow the control plane.
    """
    major = target.major
    oldest = min(members, key=lambda o: o.version.sort_key())
    start = current = oldest.version.minor

    def max_lag(minor: int) -> int:
        return _kubelet_allowed_lag(KubeVersion(major, minor)) if policy.skip_level else 1

    steps: List[Dict[str, Any]] = []
    for h in range(1, len(cp_minors)):
        if cp_minors[h] - current > max_lag(current):
            steps.append(_step(h - 1, current, cp_minors[h - 1], hops, major,
                               "required before control-plane hop %d (%s) to stay within %d minor(s) of the "
                               "apiserver" % (h, hops[h - 1], max_lag(current))))
            current = cp_minors[h - 1]
    if oldest.version < target:
        steps.append(_step(len(hops), current, target.minor, hops, major,
                           "after the control plane reaches %s" % target))
    # The hop by which the pool, left alone, would fall out of its policy (hops past the plan count on): the skew
    # policy's lag for skip-level pools, one minor for pools that follow the control plane.
    allowed = max_lag(start)
    deadline = allowed - (cp_minors[0] - start) + 1
    return {
        "pool": name,
        "nodes": sorted(o.node for o in members),
        "current": str(oldest.version),
        "skip_level": policy.skip_level,
        "must_upgrade_before_hop": max(deadline, 1),
        "last_safe_control_plane": "v%d.%d" % (major, start + allowed),
        "steps": steps,
        "drains": len(steps),
    }


def _step(after_hop: int, from_minor: int, to_minor: int, hops: List[KubeVersion], major: int,
          why: str) -> Dict[str, Any]:
    to_version = next((str(h) for h in hops if h.minor == to_minor), "v%d.%d" % (major, to_minor))
    return {"after_hop": after_hop, "from": "v%d.%d" % (major, from_minor), "to": to_version,
            "minors": to_minor - from_minor, "why": why}


def next_hop_breaches(observed: Sequence[Observed], plan: Mapping[str, Any],
                      hop: Optional[KubeVersion] = None) -> None:
    """Refuse (:class:`PolicyError`) a plan whose next control-plane hop (``hop``, default the first of its path)
    would leave a kubelet out of the skew policy before it can move: its nodes are upgraded after the hop, so until
    then they run that far behind."""
    path = plan.get("control_plane_path") or []
    if hop is None and not path:
        return
    hop = hop or parse_version(path[0])
    behind = sorted((o for o in observed if o.component == KUBELET
                     and hop.minor - o.version.minor > _kubelet_allowed_lag(o.version)),
                    key=lambda o: (o.version.sort_key(), o.node))
    if behind:
        worst = behind[0]
        raise PolicyError(
            "the control plane's next hop to %s would leave %d kubelet(s) out of the skew policy until their nodes "
            "move: %s (at most %d minors behind the apiserver). Upgrade them to the control plane's minor %s first "
            "(playbooks/node_pool.yml with gpufleet_target_version set to the version the control plane runs), "
            "then run this hop" % (
                hop, len(behind), ", ".join("%s %s" % (o.node, o.version) for o in behind[:5]) + (
                    " ..." if len(behind) > 5 else ""), _kubelet_allowed_lag(worst.version), plan["current"]))


def plan_cycle_hop(observed: Sequence[Observed], target: KubeVersion, cycle: KubeVersion,
                   holding: Sequence[str], pools: Optional[Mapping[str, PoolPolicy]] = None) -> Dict[str, Any]:
    """Plan one run of a skip-level cycle: the whole cycle's plan to ``cycle`` (the control plane one minor per
    run, each pool's drains), checked against this run, which takes the control plane to ``target`` while the
    ``holding`` pools stay at their kubelet.

    Refuses (:class:`PolicyError`) a run whose target is not the cycle's next control-plane hop, and a holding
    pool the cycle needs to move before its last hop (its kubelets would fall out of the skew policy). Returns the
    cycle's plan with ``hop`` (1-based, of ``hops``), ``moving`` and ``holding`` pools added, and ``resumed`` true
    when the control plane already runs this run's target (a rerun of the hop after its control plane finished:
    the node waves go on)."""
    plan = plan_upgrade(observed, cycle, allow_multi_hop=True, pools=pools,
                        hop_versions={target.minor_str: str(target)})
    path = plan["control_plane_path"]
    current = parse_version(plan["current"])
    resumed = (current.major, current.minor) == (target.major, target.minor) and not current < target
    if not resumed and (not path or parse_version(path[0]).minor != target.minor):
        raise PolicyError(
            "this run's target %s is not the next control-plane hop of the cycle to %s: the control plane is at %s, "
            "so the next hop is %s. Run the hops in order, one per run (the cycle's target stays %s)" % (
                target, cycle, plan["current"], path[0] if path else "none (the control plane is there)", cycle))
    late = []
    for pool in plan["pools"]:
        if pool["pool"] not in holding:
            continue
        early = [s for s in pool["steps"] if s["after_hop"] < len(path)]
        if early:
            late.append("%s (kubelet %s) must move %s, not wait for the last hop" % (
                pool["pool"], pool["current"], "before this hop" if early[0]["after_hop"] == 0 else
                "after hop %d (%s)" % (early[0]["after_hop"], early[0]["to"])))
    if late:
        raise PolicyError(
            "skip-level pool(s) cannot stay behind through the cycle to %s: %s. Upgrade them in this run by giving "
            "them skip_level: false in gpufleet_pool_policies, or end the cycle earlier "
            "(gpufleet_cycle_target_version)" % (cycle, "; ".join(late)))
    plan["hop"] = 1
    plan["hops"] = len(path) + (1 if resumed else 0)
    plan["resumed"] = resumed
    plan["holding"] = sorted(holding)
    plan["moving"] = sorted(p["pool"] for p in plan["pools"] if p["pool"] not in holding)
    return plan


def versions_of(observed: Iterable[Observed], component: str) -> List[str]:
    return sorted({str(o.version) for o in observed if o.component == component})
