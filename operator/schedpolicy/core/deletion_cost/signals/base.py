"""What every deletion-cost signal is made of, and what it may read about a pod. Pure.

A signal is one `SignalKind`: its name and parameters (the CRD's `type` and member), its
scorer, and what must re-cost a pod when it changes. `registry.py` lists them; the API, the
scorer dispatch and the view's ripple all derive from that list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar

from schedpolicy.core.consolidation.fill import NodeFill
from schedpolicy.core.deletion_cost.samples import Rejection, Sample
from schedpolicy.core.gpu.dra import DeviceShare
from schedpolicy.core.policy.model import Model

if TYPE_CHECKING:
    from schedpolicy.core.deletion_cost.signals.metric import MetricSignal


@dataclass(frozen=True)
class ZoneCounts:
    """A ReplicaSet's active pods per zone (every eligible zone present, maybe 0), and each
    pod's position in its zone, oldest first."""

    counts: Mapping[str, int]
    ranks: Mapping[str, int]  # pod UID -> 0-based position in its zone


# Of a ReplicaSet's pods (the last argument), those whose cost may differ between any of the
# spreads their costs were last planned against and the ReplicaSet's spread now, given the
# eligible zones.
Narrow = Callable[[Sequence[ZoneCounts], ZoneCounts, frozenset[str], Set[str]], Set[str]]


@dataclass(frozen=True)
class ZoneSpread:
    """The pod's ReplicaSet over the eligible zones (a zone of Ready, schedulable nodes)."""

    counts: Mapping[str, int] = field(default_factory=dict)  # every eligible zone, maybe 0
    eligible: frozenset[str] = frozenset()
    rank: int | None = None  # 0-based position of the pod in its zone, oldest first


class PodFacts(Protocol):
    """What a signal may read about one pod. The view answers from the live cluster
    (view/deletion_cost/decisions.py), lazily: a signal pays only for what it reads."""

    @property
    def pod_uid(self) -> str: ...
    @property
    def node_name(self) -> str | None: ...  # None until bound to a node the view knows
    @property
    def node_labels(self) -> Mapping[str, str]: ...
    @property
    def conditions(self) -> Mapping[str, str]: ...  # pod condition type -> status

    # Milli-units per resource name (millicores for cpu, thousandths of a byte for memory),
    # so that any two amounts of one resource divide exactly.
    def node_allocatable(self) -> Mapping[str, int]: ...
    def node_requested(self) -> Mapping[str, int]: ...
    def device_share(self, classes: tuple[str, ...]) -> DeviceShare | None: ...
    def zone_spread(self) -> ZoneSpread: ...
    def sample(self, metric: MetricSignal) -> Sample | Rejection | None: ...


@dataclass(frozen=True)
class Score:
    points: int
    detail: str  # how the points were reached, in words, for `explain`
    fill: NodeFill | None = None  # NodeConsolidation's per-resource shares
    devices: DeviceShare | None = None  # and the DRA devices that joined them


@dataclass(frozen=True)
class Ripple:
    """Which other pods a pod's change re-costs: those on the same node, or of the same
    ReplicaSet, when the pod's `fields` change while `when` holds (PodRecord attributes)."""

    scope: Literal["node", "replicaset"]
    when: str
    fields: tuple[str, ...]
    # For the ReplicaSet scope: which of its pods a change of its zone spread re-costs.
    # None: all of them. One create in a ReplicaSet of 1,000 re-planned all 1,000 (B8's
    # churn at 150k pods, bench/profiles/b8-churn-controller.txt) to move the cost of a few.
    narrow: Narrow | None = None


P = TypeVar("P", bound=Model)


@dataclass(frozen=True)
class SignalKind(Generic[P]):
    name: str  # the CRD's `type`
    member: str  # the CRD member holding the parameters (camelCase)
    params: type[P]
    score: Callable[[P, PodFacts, datetime], Score | Rejection]
    # Every parameter has a default, so the member may be left out.
    optional: bool = False
    # NodeRecord attributes whose change re-costs every pod on the node.
    node_fields: tuple[str, ...] = ()
    ripple: Ripple | None = None


@dataclass(frozen=True)
class CostInputs:
    """Facts about one pod given outright: for tests, and wherever no view is at hand.
    Samples are keyed by their metric's source, device shares by their device classes:
    by what the signal reads, never by its place in the policy."""

    node_name: str | None = None
    node_labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    requested: Mapping[str, int] = field(default_factory=dict)
    spread: ZoneSpread = field(default_factory=ZoneSpread)
    conditions: Mapping[str, str] = field(default_factory=dict)
    samples: Mapping[str, Sample | Rejection] = field(default_factory=dict)
    pod_uid: str = ""
    device_shares: Mapping[tuple[str, ...], DeviceShare] = field(default_factory=dict)

    def node_allocatable(self) -> Mapping[str, int]:
        return self.allocatable

    def node_requested(self) -> Mapping[str, int]:
        return self.requested

    def device_share(self, classes: tuple[str, ...]) -> DeviceShare | None:
        return self.device_shares.get(classes)

    def zone_spread(self) -> ZoneSpread:
        return self.spread

    def sample(self, metric: MetricSignal) -> Sample | Rejection | None:
        return self.samples.get(metric.source_key())
