"""What thousands of pod records repeat is held once: the empty set of Karpenter-cost
managers, a bucketed cost value, a creation second. Memory per pod is benchmark B2's; this
only keeps the sharing from silently coming undone."""

from __future__ import annotations

import copy
from typing import Any

from schedpolicy.view.records import pod_record

COST = "controller.kubernetes.io/pod-deletion-cost"


def body(name: str) -> dict[str, Any]:
    # Values built at run time, as decoding makes them: equal, never the same object.
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": "".join(["2026-12-07T", "10:00:00Z"]),
            "annotations": {COST: str(int("400")), "note": "".join(["kept", " as is"])},
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


def test_records_share_what_pods_repeat() -> None:
    a, b = pod_record(body("a")), pod_record(copy.deepcopy(body("b")))
    assert a.karpenter_cost_managers is b.karpenter_cost_managers
    assert a.annotations[COST] is b.annotations[COST]
    assert a.created is b.created
    assert (a.annotations[COST], a.created) == ("400", "2026-12-07T10:00:00Z")
    # An annotation nobody reads the value of is kept as it came.
    assert a.annotations["note"] == "kept as is"


def with_containers(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    pod = body(name)
    pod["spec"] = {"nodeName": "n1", **spec}
    return pod


def test_pods_that_ask_alike_share_their_requests_and_only_they_do() -> None:
    init = {"name": "i", "resources": {"requests": {"cpu": "1"}}}
    app = {"name": "c", "resources": {"requests": {"cpu": "500m"}}}
    plain = {"initContainers": [init], "containers": [app]}
    sidecar = {"initContainers": [{**init, "restartPolicy": "Always"}], "containers": [app]}
    a, b = pod_record(with_containers("a", plain)), pod_record(with_containers("b", plain))
    assert a.requests is b.requests
    assert a.requests == {"cpu": 1_000}  # the init container's peak
    # The same containers, but the init container a sidecar: it runs beside the app.
    assert pod_record(with_containers("c", sidecar)).requests == {"cpu": 1_500}
    overhead = {**plain, "overhead": {"cpu": "250m"}}
    assert pod_record(with_containers("d", overhead)).requests == {"cpu": 1_250}
