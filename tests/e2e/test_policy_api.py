"""The SchedulingPolicy API as an admin meets it, against the real apiserver."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from localcluster import ClusterError, LocalCluster
from localcluster.binaries import REPO
from localcluster.operator_process import OperatorProcess
from schedpolicy.shell.kube import EVENT_NAMESPACE
from tests.e2e.kubeobjects import wait_until
from tests.e2e.policies import MalformedCase, malformed

pytestmark = pytest.mark.e2e
EXAMPLES = sorted(
    [
        *(REPO / "examples").glob("*.yaml"),
        *(REPO / "examples").glob("karpenter/*.yaml"),
        *(REPO / "examples").glob("dra/*.yaml"),
    ]
)


def _apply(cluster: LocalCluster, doc: dict[str, Any], *flags: str) -> str:
    return cluster.kubectl("apply", *flags, "-f", "-", objects=[doc])


def _policy(cluster: LocalCluster, name: str) -> dict[str, Any]:
    return dict(json.loads(cluster.kubectl("get", "schedulingpolicy", name, "-o", "json")))


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return dict(cond)
    return None


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_is_accepted(cluster: LocalCluster, crd: str, path: Any) -> None:
    """Every policy in examples/ is accepted by the apiserver as it is (a server-side dry
    run)."""
    out = cluster.kubectl("apply", "--dry-run=server", "-f", str(path))
    assert "created (server dry run)" in out


def test_there_are_enough_examples_and_malformed_cases() -> None:
    """There are at least 5 examples and 30 malformed policies to try."""
    assert len(EXAMPLES) >= 5
    assert len(malformed()) >= 30


@pytest.mark.parametrize("case", malformed(), ids=lambda c: c.name)
def test_malformed_policy_is_rejected_naming_the_field(
    cluster: LocalCluster, crd: str, case: MalformedCase
) -> None:
    """A malformed policy is refused by `kubectl apply`, and the message names the field."""
    with pytest.raises(ClusterError) as err:
        _apply(cluster, case.manifest(), "--dry-run=server")
    message = str(err.value)
    assert f"{case.expect}:" in message or f'"{case.expect}"' in message, message


def test_explain_shows_descriptions(cluster: LocalCluster, crd: str) -> None:
    """`kubectl explain` shows each field's description, down to a signal's."""
    out = cluster.kubectl("explain", "schedulingpolicy.spec.deletionCost")
    assert "pod-deletion-cost" in out
    assert "bucket" in out
    assert "rounded down to a multiple" in out
    signal = cluster.kubectl("explain", "schedulingpolicy.spec.deletionCost.signals.zoneBalance")
    assert "least-filled eligible zone" in signal


def test_printer_columns_and_ready(
    cluster: LocalCluster, operator: OperatorProcess, policies: list[str]
) -> None:
    """`kubectl get spol` shows NAME, PRIORITY, MATCHED, COSTED, NODES, READY and AGE, and
    an example policy turns Ready=True."""
    doc = yaml.safe_load((REPO / "examples" / "zone-balanced.yaml").read_text())
    doc["metadata"]["name"] = "columns-zone-balanced"
    policies.append("columns-zone-balanced")
    _apply(cluster, doc)

    def ready() -> str | None:
        out = cluster.kubectl("get", "spol", "columns-zone-balanced")
        _header, row = out.splitlines()[:2]
        return row if row.split()[-2] == "True" else None

    row = wait_until(ready, what="Ready=True in kubectl get spol")
    header = cluster.kubectl("get", "spol", "columns-zone-balanced").splitlines()[0].split()
    assert header == ["NAME", "PRIORITY", "MATCHED", "COSTED", "NODES", "READY", "AGE"]
    assert row.split()[1] == "100"


def _events(cluster: LocalCluster, policy: str, kind: str, reason: str) -> list[dict[str, Any]]:
    """Events the operator posted about a (cluster-scoped) policy; they live in `default`."""
    events = json.loads(
        cluster.kubectl(
            "get",
            "events",
            "-n",
            EVENT_NAMESPACE,
            "--field-selector",
            f"involvedObject.kind=SchedulingPolicy,involvedObject.name={policy}",
            "-o",
            "json",
        )
    )["items"]
    return [
        e
        for e in events
        if e["type"] == kind and e["reason"] == reason and e["reportingComponent"] == "schedpolicy"
    ]


def test_status_tracks_generation_and_conflicts(
    cluster: LocalCluster, operator: OperatorProcess, policies: list[str]
) -> None:
    """Two overlapping policies of equal priority both say Conflicting
    (EqualPriorityOverlap), naming each other, with a Warning Event on each for `kubectl
    describe spol`; the conditions follow each new generation, and raising one priority
    resolves both."""

    def policy(name: str, priority: int) -> dict[str, Any]:
        return {
            "apiVersion": "schedpolicy.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": name},
            "spec": {
                "priority": priority,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "nowhere"}},
                "podSelector": {"matchLabels": {"app": "overlap"}},
                "deletionCost": {"signals": [{"type": "NodeConsolidation"}]},
            },
        }

    policies.extend(["overlap-a", "overlap-b"])
    _apply(cluster, policy("overlap-a", 7))
    _apply(cluster, policy("overlap-b", 8))

    def settled(name: str, generation: int, conflicting: str) -> dict[str, Any] | None:
        obj = _policy(cluster, name)
        cond = _condition(obj, "Conflicting")
        if obj.get("status", {}).get("observedGeneration") != generation or cond is None:
            return None
        return obj if cond["status"] == conflicting else None

    wait_until(lambda: settled("overlap-a", 1, "False"), what="overlap-a reconciled")

    # Equal priority: both conflict, and both messages name both policies.
    _apply(cluster, policy("overlap-a", 8))
    a = wait_until(lambda: settled("overlap-a", 2, "True"), what="overlap-a Conflicting")
    b = wait_until(lambda: settled("overlap-b", 1, "True"), what="overlap-b Conflicting")
    for obj in (a, b):
        cond = _condition(obj, "Conflicting")
        assert cond is not None
        assert "overlap-a" in cond["message"]
        assert "overlap-b" in cond["message"]
        assert cond["reason"] == "EqualPriorityOverlap"
    assert a["metadata"]["generation"] == a["status"]["observedGeneration"] == 2
    assert all(c["observedGeneration"] == 2 for c in a["status"]["conditions"])
    # An admin running `kubectl describe spol` sees why, as a Warning Event on each.
    wait_until(
        lambda: all(
            _events(cluster, name, "Warning", "EqualPriorityOverlap")
            for name in ("overlap-a", "overlap-b")
        ),
        what="a Warning EqualPriorityOverlap Event on each policy",
    )

    # Raising one priority resolves it for both.
    _apply(cluster, policy("overlap-b", 9))
    wait_until(lambda: settled("overlap-a", 2, "False"), what="overlap-a resolved")
    wait_until(lambda: settled("overlap-b", 2, "False"), what="overlap-b resolved")
