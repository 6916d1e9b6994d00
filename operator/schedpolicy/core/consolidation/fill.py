"""How full a node is: the dominant share of what its pods request over what it has,
over the resources a policy lists, with a DRA device counted as one unit of its resource.
Pods on the emptiest nodes get the fewest NodeConsolidation points. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from schedpolicy.core.consolidation.api import NodeConsolidationSignal
from schedpolicy.core.gpu.dra import DeviceShare


@dataclass(frozen=True)
class ResourceShare:
    """One resource's part in a node's fill: requested over allocatable, in milli-units."""

    resource: str
    requested: int
    allocatable: int  # 0 when the node does not advertise the resource

    @property
    def advertised(self) -> bool:
        return self.allocatable > 0

    # Cached: the dominant share, its ties, the fill and the words each read it again, and a
    # Fraction is costly to build (the cost of every pod on a node reads its fill).
    @cached_property
    def share(self) -> Fraction:
        if not self.advertised:
            return Fraction(0)
        return Fraction(min(self.requested, self.allocatable), self.allocatable)

    def describe(self) -> str:
        if not self.advertised:
            return f"{self.resource} not advertised (skipped)"
        return (
            f"{self.resource} {amount(self.resource, self.requested)} of"
            f" {amount(self.resource, self.allocatable)} ({float(self.share):.2f})"
        )


@dataclass(frozen=True)
class NodeFill:
    """A node's dominant share over the listed resources."""

    shares: tuple[ResourceShare, ...]
    dominant: str | None  # None when the node advertises none of the resources
    tied: tuple[str, ...] = ()  # other resources whose share equals the dominant one

    @property
    def fill(self) -> Fraction:
        return max((s.share for s in self.shares), default=Fraction(0))


def node_fill(
    resources: Sequence[str], allocatable: Mapping[str, int], requested: Mapping[str, int]
) -> NodeFill:
    shares = tuple(
        ResourceShare(r, requested.get(r, 0), max(0, allocatable.get(r, 0))) for r in resources
    )
    advertised = [s for s in shares if s.advertised]
    if not advertised:
        return NodeFill(shares, None)
    # On a tie the first listed wins, so the answer never depends on dict order.
    top = max(advertised, key=lambda s: s.share)
    tied = tuple(s.resource for s in advertised if s.share == top.share and s is not top)
    return NodeFill(shares, top.resource, tied)


_BYTE_RESOURCES = ("memory", "ephemeral-storage")
_BINARY = ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki"))


def amount(resource: str, milli: int) -> str:
    """A milli-unit amount as kubectl would show it: 1500m of CPU, 8Gi of memory, 3 GPUs."""
    if resource == "cpu" or milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        for size, suffix in _BINARY:
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
    return str(whole)


def with_devices(
    resource: str,
    allocatable: Mapping[str, int],
    requested: Mapping[str, int],
    share: DeviceShare | None,
) -> tuple[Mapping[str, int], Mapping[str, int]]:
    """The node's amounts with its DRA devices joined to `resource`, one device as one unit:
    a claim's device is as much of a GPU as a device plugin's."""
    if share is None or not share.published:
        return allocatable, requested
    plus_allocatable = dict(allocatable)
    plus_requested = dict(requested)
    plus_allocatable[resource] = allocatable.get(resource, 0) + 1000 * len(share.published)
    plus_requested[resource] = requested.get(resource, 0) + 1000 * len(share.allocated)
    return plus_allocatable, plus_requested


def points(
    params: NodeConsolidationSignal,
    node: str | None,
    allocatable: Mapping[str, int],
    requested: Mapping[str, int],
    share: DeviceShare | None,
) -> tuple[int, str, NodeFill | None]:
    """NodeConsolidation's points for a pod on `node`, in words, and the shares they came
    from; `share`: the node's devices of the signal's deviceClasses, if it lists any."""
    if node is None:
        return 0, "the pod is not on a node yet", None
    allocatable, requested = with_devices(params.device_resource, allocatable, requested, share)
    found = node_fill(params.resources, allocatable, requested)
    device_words = f"; {share.describe()}" if share is not None else ""
    if found.dominant is None:
        listed = ", ".join(params.resources)
        return 0, f"node {node} advertises none of {listed}; treated as empty{device_words}", found
    fill = found.fill
    # Integer arithmetic: float `points * fill` can land a hair below a whole number
    # (700 x 0.7 = 489.99...) and floor would then take a point away.
    earned = params.points * fill.numerator // fill.denominator
    share_words = ", ".join(s.describe() for s in found.shares)
    fill_words = f"fill {float(fill):.2f}"
    if len(found.shares) > 1:
        tied = f", tied with {', '.join(found.tied)}" if found.tied else ""
        fill_words += f" ({found.dominant} dominates{tied})"
    return (
        earned,
        f"node {node}: {share_words}{device_words}; {fill_words};"
        f" {params.points} x {float(fill):.2f}",
        found,
    )
