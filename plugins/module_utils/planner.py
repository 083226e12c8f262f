# Copyright: gpufleet contributors
# Apache License 2.0
"""Wave planner: order nodes into upgrade waves.

Rules, in order of precedence:
1. Control-plane nodes first, one per wave (the control plane goes one node at a time).
2. Then canaries: ``canaries_per_gpu_type`` nodes of each GPU type (or the nodes marked ``canary``), never a node
   that was unschedulable before (a canary must carry workload afterwards).
3. Then whole failure domains (rack set, rail group), ring by ring (ring 0 finishes before ring 1 starts), packed
   first-fit in (ring, domain) order into waves that never exceed the GPU cap (``max_gpu_fraction`` of all worker
   GPUs) or ``max_nodes_per_wave``, and never hold two failure domains that share a DR pair.
The result is deterministic for the same input (everything is sorted by name before packing).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, PlanError

CONTROL_PLANE = "control-plane"
WORKER = "worker"
ROLES = (CONTROL_PLANE, WORKER)


@dataclass(frozen=True)
class Node:
    name: str
    pool: str
    failure_domain: str
    gpus: int
    role: str = WORKER
    ring: int = 0
    dr_pair: str = ""
    unschedulable_before: bool = False
    gpu_type: str = ""
    canary: bool = False


@dataclass
class Caps:
    max_gpu_fraction: float = 0.25
    max_nodes_per_wave: int = 0  # 0: no node cap
    canaries_per_gpu_type: int = 1


@dataclass
class _Wave:
    kind: str
    ring: int
    nodes: List[Node] = field(default_factory=list)
    gpus: int = 0
    domains: List[str] = field(default_factory=list)
    dr_pairs: Set[str] = field(default_factory=set)


def parse_nodes(items: Sequence[Mapping[str, Any]]) -> List[Node]:
    if not isinstance(items, (list, tuple)):
        raise InputError("nodes: expected a list of node mappings")
    out: List[Node] = []
    seen: Set[str] = set()
    for i, item in enumerate(items):
        where = "nodes[%d]" % i
        if not isinstance(item, Mapping):
            raise InputError("%s: expected a mapping with at least name, pool, failure_domain, gpus" % where)
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise InputError("%s.name: required, a non-empty string" % where)
        where = "nodes[%d] (%s)" % (i, name)
        if name in seen:
            raise InputError("%s.name: duplicate node name; each node may appear once" % where)
        seen.add(name)
        role = item.get("role", WORKER)
        if role not in ROLES:
            raise InputError("%s.role: %r is not one of %s" % (where, role, ", ".join(ROLES)))
        gpus = item.get("gpus", 0)
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
            raise InputError("%s.gpus: expected a non-negative integer, got %r" % (where, gpus))
        domain = item.get("failure_domain") or ""
        if role == WORKER and not domain:
            raise InputError("%s.failure_domain: required for workers (rack set or rail group, e.g. the "
                             "gpufleet.io/rack-set label)" % where)
        ring = item.get("ring", 0)
        if not isinstance(ring, int) or isinstance(ring, bool) or ring < 0:
            raise InputError("%s.ring: expected a non-negative integer, got %r" % (where, ring))
        for flag in ("unschedulable_before", "canary"):
            if not isinstance(item.get(flag, False), bool):
                raise InputError("%s.%s: expected a boolean, got %r" % (where, flag, item.get(flag)))
        out.append(Node(name=name, pool=str(item.get("pool") or ""), failure_domain=str(domain), gpus=gpus,
                        role=role, ring=ring, dr_pair=str(item.get("dr_pair") or ""),
                        unschedulable_before=bool(item.get("unschedulable_before", False)),
                        gpu_type=str(item.get("gpu_type") or ""), canary=bool(item.get("canary", False))))
    return out


def parse_caps(raw: Optional[Mapping[str, Any]], what: str = "caps") -> Caps:
    """The wave caps; ``what`` names them in errors (``gpufleet_wave_caps`` for the cell)."""
    if raw in (None, ""):
        raw = {}
    if not isinstance(raw, Mapping):
        raise InputError("%s: expected a mapping such as {max_gpu_fraction: 0.25} (fields max_gpu_fraction, "
                         "max_nodes_per_wave, canaries_per_gpu_type), got %s %r" % (what, type(raw).__name__, raw))
    caps = dict(raw)
    unknown = set(caps) - {"max_gpu_fraction", "max_nodes_per_wave", "canaries_per_gpu_type"}
    if unknown:
        raise InputError("%s: unknown field(s) %s; allowed: max_gpu_fraction, max_nodes_per_wave, "
                         "canaries_per_gpu_type" % (what, ", ".join(sorted(str(k) for k in unknown))))
    frac = caps.get("max_gpu_fraction", 0.25)
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac <= 1:
        raise InputError("%s.max_gpu_fraction: expected a fraction in (0, 1] such as 0.25, got %r" % (what, frac))
    max_nodes = caps.get("max_nodes_per_wave", 0)
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 0:
        raise InputError("%s.max_nodes_per_wave: expected a non-negative integer (0 = no cap), got %r" % (
            what, max_nodes))
    canaries = caps.get("canaries_per_gpu_type", 1)
    if isinstance(canaries, bool) or not isinstance(canaries, int) or canaries < 0:
        raise InputError("%s.canaries_per_gpu_type: expected a non-negative integer, got %r" % (what, canaries))
    return Caps(float(frac), max_nodes, canaries)


def _fits(wave: _Wave, nodes: Sequence[Node], gpus: int, pairs: Set[str], cap_gpus: int, caps: Caps) -> bool:
    if wave.gpus + gpus > cap_gpus:
        return False
    if caps.max_nodes_per_wave and len(wave.nodes) + len(nodes) > caps.max_nodes_per_wave:
        return False
    return not (pairs & wave.dr_pairs)


def _pack(units: List[List[Node]], kind: str, cap_gpus: int, caps: Caps) -> List[_Wave]:
    """First-fit of units (a failure domain's nodes, or one canary) into waves, ring by ring, in order."""
    waves: List[_Wave] = []
    open_waves: List[_Wave] = []
    ring: Optional[int] = None
    for unit in units:
        unit_ring = unit[0].ring
        if unit_ring != ring:
            ring, open_waves = unit_ring, []
        gpus = sum(n.gpus for n in unit)
        pairs = {n.dr_pair for n in unit if n.dr_pair}
        domain = unit[0].failure_domain
        if gpus > cap_gpus:
            raise PlanError(
                "failure domain %s has %d GPUs, more than the cap of %d GPUs in flight (max_gpu_fraction %.2f); "
                "raise caps.max_gpu_fraction or split the domain" % (domain, gpus, cap_gpus, caps.max_gpu_fraction),
                failure_domain=domain)
        if caps.max_nodes_per_wave and len(unit) > caps.max_nodes_per_wave:
            raise PlanError("failure domain %s has %d nodes, more than max_nodes_per_wave %d; raise the cap or "
                            "split the domain" % (domain, len(unit), caps.max_nodes_per_wave), failure_domain=domain)
        target = next((w for w in open_waves if _fits(w, unit, gpus, pairs, cap_gpus, caps)), None)
        if target is None:
            target = _Wave(kind=kind, ring=unit_ring)
            waves.append(target)
            open_waves.append(target)
        target.nodes.extend(unit)
        target.gpus += gpus
        if domain not in target.domains:
            target.domains.append(domain)
        target.dr_pairs |= pairs
        if target.gpus >= cap_gpus or (caps.max_nodes_per_wave and len(target.nodes) >= caps.max_nodes_per_wave):
            open_waves.remove(target)
    return waves


def plan_waves(nodes: Sequence[Node], caps: Caps, holding_pools: Sequence[str] = ()) -> Dict[str, Any]:
    """The waves. Workers of ``holding_pools`` (skip-level pools staying behind in this run) are in no wave, but
    their GPUs still count in the capacity the GPU cap is a fraction of: they stay in service."""
    control = sorted((n for n in nodes if n.role == CONTROL_PLANE), key=lambda n: n.name)
    every_worker = [n for n in nodes if n.role == WORKER]
    workers = sorted((n for n in every_worker if n.pool not in holding_pools),
                     key=lambda n: (n.ring, n.failure_domain, n.name))
    total_gpus = sum(n.gpus for n in every_worker)
    cap_gpus = max(math.floor(total_gpus * caps.max_gpu_fraction + 1e-9), 0)
    if total_gpus and cap_gpus == 0:
        raise PlanError("caps.max_gpu_fraction %.3f of %d GPUs rounds down to 0 GPUs in flight; raise it" % (
            caps.max_gpu_fraction, total_gpus))
    by_domain: Dict[str, List[Node]] = {}
    for node in workers:
        by_domain.setdefault(node.failure_domain, []).append(node)
    pair_domains: Dict[str, Set[str]] = {}
    for node in workers:
        if node.dr_pair:
            pair_domains.setdefault(node.dr_pair, set()).add(node.failure_domain)
    # Canaries
    explicit = [n for n in workers if n.canary]
    canaries: List[Node] = []
    if explicit:
        canaries = explicit
    elif caps.canaries_per_gpu_type:
        per_type: Dict[str, int] = {}
        for node in workers:  # already sorted by (ring, domain, name)
            if node.unschedulable_before or node.gpus == 0:
                continue
            if per_type.get(node.gpu_type, 0) < caps.canaries_per_gpu_type:
                per_type[node.gpu_type] = per_type.get(node.gpu_type, 0) + 1
                canaries.append(node)
    bad = [n.name for n in canaries if n.unschedulable_before]
    if bad:
        raise PlanError("canary node(s) %s were unschedulable before the upgrade and stay cordoned, so they cannot "
                        "carry the canary workload; mark other nodes as canaries" % ", ".join(bad))
    canary_names = {n.name for n in canaries}
    waves: List[_Wave] = [_Wave(kind=CONTROL_PLANE, ring=0, nodes=[n], gpus=n.gpus, domains=[n.failure_domain]
                                if n.failure_domain else []) for n in control]
    canary_units = [[n] for n in sorted(canaries, key=lambda n: (n.ring, n.failure_domain, n.name))]
    waves.extend(_pack(canary_units, "canary", cap_gpus, caps))
    domain_units = []
    for domain in sorted(by_domain, key=lambda d: (by_domain[d][0].ring, d)):
        rest = [n for n in by_domain[domain] if n.name not in canary_names]
        if rest:
            rings = {n.ring for n in rest}
            if len(rings) > 1:
                raise InputError("failure domain %s spans rings %s; a failure domain belongs to one ring" % (
                    domain, sorted(rings)))
            domain_units.append(rest)
    waves.extend(_pack(domain_units, "domain", cap_gpus, caps))
    out_waves = []
    for index, wave in enumerate(waves, 1):
        out_waves.append({"index": index, "kind": wave.kind, "ring": wave.ring,
                          "nodes": [n.name for n in wave.nodes], "gpus": wave.gpus,
                          "failure_domains": sorted(set(wave.domains)),
                          "pools": sorted({n.pool for n in wave.nodes if n.pool})})
    shared_pairs = {p: sorted(d) for p, d in pair_domains.items() if len(d) > 1}
    return {
        "waves": out_waves,
        "cap_gpus": cap_gpus,
        "total_gpus": total_gpus,
        "canaries": sorted(canary_names),
        "keep_cordoned": sorted(n.name for n in nodes if n.unschedulable_before),
        "dr_pairs": shared_pairs,
        "summary": "%d waves: %d control-plane, %d canary, %d failure-domain; cap %d of %d GPUs in flight" % (
            len(out_waves), len(control), sum(1 for w in waves if w.kind == "canary"),
            sum(1 for w in waves if w.kind == "domain"), cap_gpus, total_gpus),
    }
