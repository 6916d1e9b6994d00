"""The deletion-cost signals' registry is the one place a signal is defined: a throwaway
signal added there alone is accepted by the API, scored, explained, and re-costs pods when
the fields it names change. Every registered signal is complete."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from pydantic import BaseModel

from schedpolicy.core.deletion_cost import api, costs
from schedpolicy.core.deletion_cost.api import DeletionCost
from schedpolicy.core.deletion_cost.signals import registry
from schedpolicy.core.deletion_cost.signals.base import (
    CostInputs,
    PodFacts,
    Ripple,
    Score,
    SignalKind,
)
from schedpolicy.core.policy.model import Model, Points
from schedpolicy.view.cluster import ClusterView
from schedpolicy.view.records import NodeRecord, PodRecord

NOW = datetime(2026, 12, 7, tzinfo=UTC)
WARM = "example.com/warm"


class WarmPeersSignal(Model):
    """Points while the pod's condition is True; its peers on the node care too."""

    points: Points


def warm_score(params: WarmPeersSignal, facts: PodFacts, now: datetime) -> Score:
    warm = facts.conditions.get(WARM) == "True"
    return Score(params.points if warm else 0, f"{WARM} is {'True' if warm else 'not True'}")


WARM_PEERS: SignalKind[WarmPeersSignal] = SignalKind(
    "WarmPeers",
    "warmPeers",
    WarmPeersSignal,
    warm_score,
    # A pod turning warm moves the cost of the other pods on its node.
    ripple=Ripple("node", when="active", fields=("node_name", "conditions")),
)


@pytest.fixture
def with_warm_peers(monkeypatch: pytest.MonkeyPatch) -> type[api.SignalBase]:
    """The registry with one more signal, and the Signal model built from it."""
    kinds = (*registry.SIGNALS, WARM_PEERS)
    monkeypatch.setattr(registry, "SIGNALS", kinds)
    return api.signal_model(kinds)


def pod(name: str, warm: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": "2026-12-07T00:00:00Z",
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "web", "uid": "rs-1", "controller": True}
            ],
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running", "conditions": [{"type": WARM, "status": warm}]},
    }


def node() -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "uid": "n-1", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": "4"}},
    }


def test_a_throwaway_signal_is_accepted_scored_and_explained(
    with_warm_peers: type[api.SignalBase],
) -> None:
    signal = with_warm_peers.model_validate({"type": "WarmPeers", "warmPeers": {"points": 300}})
    facts = CostInputs(node_name="n1", conditions={WARM: "True"})
    scored = costs.signal_points(signal, facts, NOW)
    assert scored == costs.SignalPoints("WarmPeers", 300, f"{WARM} is True")
    spec = DeletionCost.model_construct(
        signals=[signal], bucket=100, min=-1000, max=1000, karpenter_disruption_cost=None
    )
    decision = costs.decide(spec, facts, NOW)
    assert decision.final == 300
    assert decision.explain()[0] == f"WarmPeers: {WARM} is True -> +300"


def test_a_throwaway_signal_gets_its_member_rule_in_the_schema(
    with_warm_peers: type[api.SignalBase],
) -> None:
    schema = with_warm_peers.model_json_schema()
    assert "WarmPeers" in schema["properties"]["type"]["enum"]
    rules = [r["message"] for r in schema["x-kubernetes-validations"]]
    assert "warmPeers must be set when, and only when, type is WarmPeers" in rules
    with pytest.raises(ValueError, match="warmPeers must be set when, and only when"):
        with_warm_peers.model_validate({"type": "WarmPeers"})


def test_a_throwaway_signal_re_costs_pods_on_the_fields_it_names(
    with_warm_peers: type[api.SignalBase],
) -> None:
    def condition_change(view: ClusterView) -> set[str]:
        view.upsert_node(node())
        view.upsert_pod(pod("a", "False"))
        view.upsert_pod(pod("b", "False"))
        _, affected = view.upsert_pod(pod("a", "True"))
        return affected.nodes

    assert condition_change(ClusterView()) == {"n1"}


def test_without_it_a_condition_change_re_costs_no_peer() -> None:
    view = ClusterView()
    view.upsert_node(node())
    view.upsert_pod(pod("a", "False"))
    view.upsert_pod(pod("b", "False"))
    _, affected = view.upsert_pod(pod("a", "True"))
    assert affected.nodes == set()


# ---- every registered signal is complete ------------------------------------------------


def _attributes(record: type[msgspec.Struct]) -> set[str]:
    return set(record.__struct_fields__) | {
        name for name, value in vars(record).items() if isinstance(value, property)
    }


@pytest.mark.parametrize("kind", registry.SIGNALS, ids=lambda k: k.name)
def test_every_registered_signal_is_complete(kind: SignalKind[Any]) -> None:
    assert re.fullmatch(r"[A-Z][A-Za-z]+", kind.name)
    assert kind.member == kind.name[0].lower() + kind.name[1:]
    assert issubclass(kind.params, BaseModel)
    assert callable(kind.score)
    assert set(kind.node_fields) <= _attributes(NodeRecord), "node fields NodeRecord lacks"
    if kind.ripple is not None:
        wanted = {kind.ripple.when, *kind.ripple.fields}
        assert wanted <= _attributes(PodRecord), "ripple fields PodRecord lacks"
    if kind.optional:
        kind.params()  # every parameter has a default


def test_the_check_sees_an_incomplete_signal() -> None:
    broken = dataclasses.replace(WARM_PEERS, node_fields=("allocatble",))
    with pytest.raises(AssertionError, match="node fields NodeRecord lacks"):
        test_every_registered_signal_is_complete(broken)


def test_the_api_lists_exactly_the_registered_signals() -> None:
    schema = api.Signal.model_json_schema()
    assert schema["properties"]["type"]["enum"] == [k.name for k in registry.SIGNALS]
    members = {k.member for k in registry.SIGNALS}
    assert members == set(schema["properties"]) - {"type"}
