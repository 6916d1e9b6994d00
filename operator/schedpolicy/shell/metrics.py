"""Prometheus metrics the operator exports on /metrics."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import get_args

from prometheus_client import Counter, Gauge, Histogram

from schedpolicy.core.deletion_cost.samples import RejectReason
from schedpolicy.core.gpu.label_rules import Unlabelled

STATUS_WRITES = Counter(
    "schedpolicy_status_writes_total",
    "SchedulingPolicy status writes, by result.",
    ["result"],
)
COST_WRITES = Counter(
    "schedpolicy_cost_writes_total",
    "pod-deletion-cost patches sent, by result: ok, removed, conflict (the UID or value test"
    " failed: the pod was replaced or changed), not-found, error.",
    ["result"],
)
COST_SKIPPED = Counter(
    "schedpolicy_cost_skipped_total",
    "Cost writes not made, by reason: foreign-cost (set by someone else, no takeOver),"
    " rate-limited, held-<sample problem>, karpenter-gate (a pod of a Karpenter node, whose"
    " pod-deletion-cost is left to Karpenter's PodDeletionCostManagement gate).",
    ["reason"],
)
SAMPLES_REJECTED = Counter(
    "schedpolicy_metric_samples_rejected_total",
    "Metric-signal samples that were not trusted, by reason (stale, future, not-finite,"
    " negative, wrong-uid, malformed, timeout, ...).",
    ["reason"],
)
NODE_LABEL_WRITES = Counter(
    "schedpolicy_node_label_writes_total",
    "GPU label patches sent to nodes, by result: ok, conflict (the node was replaced),"
    " not-found, error.",
    ["result"],
)
GPU_LABEL_REFUSALS = Counter(
    "schedpolicy_gpu_label_refusals_total",
    "GPU nodes left without labels because a source's input would make them lie, counted once"
    " per node each time it starts, by reason: memory-implausible, unknown-model, mig-invalid,"
    " mig-devices, more-devices-than-cards, sharing-unknown.",
    ["reason"],
)

ADMISSION_WRITES = Counter(
    "schedpolicy_admission_policy_writes_total",
    "MutatingAdmissionPolicy writes (with their bindings) and webhook match-condition"
    " updates, by kind (apply, delete, match-condition) and result (ok, refused, error).",
    ["kind", "result"],
)
ADMISSION_ROUTES = Gauge(
    "schedpolicy_admission_policies",
    "Placement policies by the admission path that serves them: MutatingAdmissionPolicy"
    " or Webhook, and why (reason).",
    ["path", "reason"],
)


def set_admission_routes(counts: Mapping[tuple[str, str], int]) -> None:
    ADMISSION_ROUTES.clear()
    for (path, reason), n in counts.items():
        ADMISSION_ROUTES.labels(path=path, reason=reason).set(n)


def with_zeros(counter: Counter, label: str, values: Iterable[str]) -> None:
    """Create the series of every known label value at 0. A series that appears only on
    its first increment makes `rate()` miss that increment, and leaves a dashboard panel
    empty ("No data") exactly when all is well."""
    for value in values:
        counter.labels(**{label: value})


def zero_controller_series() -> None:
    """At the controller's start only: the webhook process imports this module too, and
    should not export the controller's counters."""
    with_zeros(COST_WRITES, "result", ("ok", "removed", "conflict", "not-found", "error"))
    with_zeros(COST_SKIPPED, "reason", ("foreign-cost", "rate-limited", "karpenter-gate"))
    with_zeros(SAMPLES_REJECTED, "reason", get_args(RejectReason))
    with_zeros(NODE_LABEL_WRITES, "result", ("ok", "conflict", "not-found", "error"))
    set_leader(False)


RECONCILE_SECONDS = Histogram(
    "schedpolicy_reconcile_duration_seconds",
    "Time to recompute the costs of the pods a batch of changes affected.",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
COST_BAND_PODS = Gauge(
    "schedpolicy_cost_band_pods",
    "Pods carrying a pod-deletion-cost written by schedpolicy, by value.",
    ["band"],
)


def set_cost_bands(bands: Mapping[str, int]) -> None:
    COST_BAND_PODS.clear()
    for band, count in bands.items():
        COST_BAND_PODS.labels(band=band).set(count)


PENDING_PODS = Gauge(
    "schedpolicy_pending_pods",
    "Pods waiting longer than the threshold on a scheduler that a policy hands pods to.",
    ["scheduler"],
)


def set_pending(waiting: Mapping[str, int], schedulers: Iterable[str]) -> None:
    PENDING_PODS.clear()
    for scheduler in schedulers:
        PENDING_PODS.labels(scheduler=scheduler).set(waiting.get(scheduler, 0))


GPU_NODES_UNLABELLED = Gauge(
    "schedpolicy_gpu_nodes_unlabelled",
    "Nodes a nodeLabels policy selects that carry none of its labels, by reason:"
    " no-allocatable-gpus, unknown-gpu (no source knows it), refused (a source refused its"
    " input, or the label prefix is reserved).",
    ["reason"],
)


UNLABELLED_REASONS: tuple[Unlabelled, ...] = get_args(Unlabelled)


def set_unlabelled(reasons: Mapping[Unlabelled, int]) -> None:
    GPU_NODES_UNLABELLED.clear()
    for reason in UNLABELLED_REASONS:
        GPU_NODES_UNLABELLED.labels(reason=reason).set(reasons.get(reason, 0))


DRA_UNLISTED = Gauge(
    "schedpolicy_dra_unlisted_allocations",
    "Devices that allocated ResourceClaims name and no node's ResourceSlices list (a driver"
    " that withdrew them, or a claim written by hand). They count toward no node's GPU fill.",
)


def set_unlisted(count: int) -> None:
    DRA_UNLISTED.set(count)


GPU_NODES_LABELLED = Gauge(
    "schedpolicy_gpu_nodes_labelled",
    "Nodes carrying exactly the labels their nodeLabels policy decided, by policy.",
    ["policy"],
)


def set_labelled(policies: Iterable[str], labelled: Mapping[str, int]) -> None:
    GPU_NODES_LABELLED.clear()
    for policy in policies:
        GPU_NODES_LABELLED.labels(policy=policy).set(labelled.get(policy, 0))


WATCH_DECODE_ERRORS = Counter(
    "schedpolicy_watch_decode_errors_total",
    "Watch lines or listed objects skipped because they did not decode, or lacked a field"
    " the operator needs, by kind.",
    ["kind"],
)
WATCH_RESTARTS = Counter(
    "schedpolicy_watch_restarts_total",
    "Watch streams reopened, by kind and reason: expired (410 Gone: a full relist),"
    " closed (the server ended the stream), error.",
    ["kind", "reason"],
)
WATCH_EVENTS = Counter(
    "schedpolicy_watch_events_total",
    "Watch events applied to the view (the initial state's included), by kind and type.",
    ["kind", "type"],
)

WRITE_QUEUE_DEPTH = Gauge(
    "schedpolicy_write_queue_depth",
    "Pods and nodes waiting for a writer, not counting the writes on the wire. A depth that"
    " stays up says the writers do not keep up with the cluster's churn.",
)

LEADER = Gauge(
    "schedpolicy_leader",
    "1 while this replica holds the leader Lease and runs the writers (or runs with no Lease"
    " at all), else 0. At most one replica of an install should report 1.",
)
POLICY_CONDITION = Gauge(
    "schedpolicy_policy_condition",
    "1 when a SchedulingPolicy's condition of this type is True, 0 when it is False; exported"
    " by the leader only, from the status it last decided.",
    ["policy", "type"],
)


def set_policy_conditions(conditions: Mapping[str, Mapping[str, str]]) -> None:
    """Replace every policy's series, so a deleted policy's series disappear with it."""
    POLICY_CONDITION.clear()
    for policy, by_type in conditions.items():
        for kind, status in by_type.items():
            POLICY_CONDITION.labels(policy=policy, type=kind).set(1 if status == "True" else 0)


def set_leader(leading: bool) -> None:
    LEADER.set(1 if leading else 0)
    if not leading:
        # A follower's copy of the conditions would go stale and double-count in sums.
        POLICY_CONDITION.clear()


MEMORY_LIMIT = Gauge(
    "schedpolicy_memory_limit_bytes",
    "The cgroup memory limit of this process (its container's limits.memory), read from the"
    " cgroup; 0 when there is none. Compare with process_resident_memory_bytes.",
)
MEMORY_NEAR_LIMIT = Gauge(
    "schedpolicy_memory_near_limit",
    "1 while resident memory is at or above --memory-near-ratio (0.85 by default) of the"
    " cgroup limit, else 0.",
)


def set_memory(limit: int | None, near: bool) -> None:
    MEMORY_LIMIT.set(limit or 0)
    MEMORY_NEAR_LIMIT.set(1 if near else 0)
