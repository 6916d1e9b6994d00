"""Keeps GPU labels on nodes in line with the governing policy (the shell around gpu.py).

The reconciler tells it which nodes to look at and runs its writes; this module
plans one node at a time, writes one merge patch per node that needs one, and
remembers what it wrote so that nothing is written twice before the watch
shows the result.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from schedpolicy.core.gpu import label_rules as gpu
from schedpolicy.core.policy import matching
from schedpolicy.shell import metrics
from schedpolicy.shell.echoes import Echoes
from schedpolicy.shell.events import Events
from schedpolicy.shell.kube import Kube, ObjectRef
from schedpolicy.shell.kube_errors import Gone, KubeError, PreconditionFailed, Transient
from schedpolicy.view.cluster import ClusterView, NodeRecord
from schedpolicy.view.gpu import node_labels as gpu_labels

log = logging.getLogger("schedpolicy.labels")


@dataclass(frozen=True)
class NodeOutcome:
    policy: str | None
    decision: gpu.LabelDecision | None
    plan: gpu.LabelPlan


class LabelSync:
    def __init__(
        self,
        kube: Kube,
        view: ClusterView,
        events: Events,
        failures_changed: Callable[[], None] = lambda: None,
        admitted: frozenset[str] | None = None,
    ) -> None:
        self.kube = kube
        # The admission guard's label prefixes, when the chart says them: a policy outside
        # them is refused here rather than by the apiserver, one denied write per node.
        self.admitted = admitted
        self.view = view
        self.events = events
        # node -> (policy, why its last write was refused), for the policy's status: a
        # denial (by RBAC or the admission guard) must show where the admin looks.
        self.failures: dict[str, tuple[str, str]] = {}
        self.failures_changed = failures_changed
        self.outcomes: dict[str, NodeOutcome] = {}
        self.echoes: Echoes[str] = Echoes()  # by node name
        self._reported: dict[str, set[str]] = defaultdict(set)  # messages already posted as Events

    def forget_writes(self) -> None:
        self.echoes.clear()

    def node_seen(self, node: NodeRecord) -> None:
        self.echoes.seen(node.name, node.resource_version)

    def node_gone(self, name: str) -> None:
        self._settled(name)
        self.outcomes.pop(name, None)
        self.echoes.forget(name)
        self._reported.pop(name, None)

    def plan_node(self, node: NodeRecord, policies: list[matching.Policy]) -> NodeOutcome:
        result = gpu_labels.node_labels(self.view, node.name, policies, self.admitted)
        policy = result.match.policy
        return NodeOutcome(policy.name if policy else None, result.decision, result.plan)

    def refresh(self, name: str, policies: list[matching.Policy]) -> bool:
        """Re-plan one node; True when it needs a write."""
        node = self.view.nodes.get(name)
        if node is None:
            self.node_gone(name)
            return False
        outcome = self.plan_node(node, policies)
        self.outcomes[name] = outcome
        failed = self.failures.get(name)
        if failed is not None and failed[0] != outcome.policy:
            self._settled(name)  # another policy governs the node now, or none
        return not outcome.plan.empty and self.echoes.pending(name) is None

    async def report(self, name: str) -> None:
        """Post each conflict, source disagreement or refusal on the node once while it
        lasts; one that goes away and comes back is new again, and counted again."""
        node, outcome = self.view.nodes.get(name), self.outcomes.get(name)
        if node is None or outcome is None:
            return
        decision = outcome.decision
        # (Event reason, message, refusal reason for the counter)
        messages: list[tuple[str, str, str | None]] = [
            ("LabelConflict", m, None) for m in outcome.plan.conflicts
        ]
        if decision is not None:
            messages += [("GPUSourcesDisagree", m, None) for m in decision.disagreements]
            if decision.error:
                messages.append(("LabelPrefixRefused", decision.error, None))
            messages += [
                (
                    "GPULabelRefused",
                    f"no GPU labels: {r.source} refused ({r.reason}): {r.message}",
                    r.reason,
                )
                for r in decision.refusals
            ]
        posted = self._reported[name]
        self._reported[name] = {message for _, message, _ in messages}
        for reason, message, refusal in messages:
            if message not in posted:
                if refusal is not None:
                    metrics.GPU_LABEL_REFUSALS.labels(reason=refusal).inc()
                await self.events.warn(
                    ObjectRef("v1", "Node", node.name, node.uid), reason, message
                )

    async def write(self, name: str, policies: list[matching.Policy]) -> None:
        if not self.refresh(name, policies):
            return
        node, plan = self.view.nodes[name], self.outcomes[name].plan
        try:
            version = await self.kube.apply_node_labels(name, node.uid, plan)
        except (Gone, PreconditionFailed) as err:
            # Gone, or replaced by a node of the same name (the UID precondition failed).
            result = "not-found" if isinstance(err, Gone) else "conflict"
            metrics.NODE_LABEL_WRITES.labels(result=result).inc()
            return
        except KubeError as err:
            metrics.NODE_LABEL_WRITES.labels(result="error").inc()
            if isinstance(err, Transient):
                raise  # throttled or unavailable: the writer tries this node again shortly
            await self.events.warn(
                ObjectRef("v1", "Node", node.name, node.uid),
                "LabelWriteFailed",
                f"writing GPU labels failed: {err}",
            )
            policy = self.outcomes[name].policy
            if policy is not None and self.failures.get(name) != (policy, str(err)):
                self.failures[name] = (policy, str(err))
                self.failures_changed()
            return
        metrics.NODE_LABEL_WRITES.labels(result="ok").inc()
        self._settled(name)
        log.info("node %s: set %s, removed %s", name, dict(plan.set), list(plan.remove))
        seen = self.view.nodes.get(name)
        self.echoes.wrote(name, version, None, seen.resource_version if seen else None)

    def _settled(self, name: str) -> None:
        if self.failures.pop(name, None) is not None:
            self.failures_changed()

    def counts(self) -> tuple[Counter[str], dict[str, list[str]]]:
        """Per policy: nodes carrying exactly its labels, and label conflicts."""
        labeled: Counter[str] = Counter()
        unlabelled: Counter[gpu.Unlabelled] = Counter()
        conflicts: dict[str, list[str]] = defaultdict(list)
        for name, outcome in self.outcomes.items():
            node = self.view.nodes.get(name)
            if node is None or outcome.policy is None or outcome.decision is None:
                continue
            desired = outcome.decision.labels
            if outcome.decision.unlabelled is not None:
                unlabelled[outcome.decision.unlabelled] += 1
            if desired and all(node.labels.get(k) == v for k, v in desired.items()):
                labeled[outcome.policy] += 1
            conflicts[outcome.policy] += [f"node {name}: {c}" for c in outcome.plan.conflicts]
        metrics.set_unlabelled(unlabelled)
        metrics.set_unlisted(len(self.view.devices.unlisted()))
        labellers = [p.name for p in self.view.policies() if p.has("nodeLabels")]
        metrics.set_labelled(labellers, labeled)
        return labeled, conflicts
