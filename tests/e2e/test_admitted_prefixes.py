"""The controller told the admission guard's label prefixes, as the chart tells it: a policy
outside them is reported Degraded and its nodes are never written, while a policy inside
them labels as usual. The guard itself is on for the whole suite (see localcluster)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from localcluster import LocalCluster, audit
from localcluster.operator_process import OperatorProcess, running
from tests.e2e.kubeobjects import wait_until
from tests.e2e.pools import Pool, gpu_label_policy

pytestmark = pytest.mark.e2e

ADMITTED = "schedpolicy.io"
UNLISTED = "gpus.example.com"


@pytest.fixture(scope="module")
def told(cluster: LocalCluster, crd: str) -> Iterator[OperatorProcess]:
    # Its own process, not the shared `operator` fixture: the flag is what is under test.
    with running(cluster, "--verbose", f"--admitted-label-prefixes={ADMITTED}") as proc:
        yield proc


def _get(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    return dict(json.loads(cluster.kubectl("get", *args, "-o", "json")))


def _degraded(cluster: LocalCluster, name: str) -> dict[str, Any] | None:
    status = _get(cluster, "schedulingpolicy", name).get("status", {})
    for cond in status.get("conditions", []):
        if cond["type"] == "Degraded":
            return dict(cond)
    return None


def test_a_prefix_outside_the_guard_is_refused_before_any_write(
    cluster: LocalCluster, namespace: str, told: OperatorProcess, policies: list[str]
) -> None:
    """A controller told the guard's prefixes refuses a policy whose labelPrefix is outside
    them: the policy says Degraded (LabelPrefixNotAdmitted) and names the chart value to
    change, the node gets a LabelPrefixRefused Event and no write, while a policy inside the
    prefixes labels its node."""
    outside, inside = Pool(cluster, namespace), Pool(cluster, namespace)
    (refused,) = outside.create(outside.node("p4d", instance_type="p4d.24xlarge", gpus="8"))
    (labelled,) = inside.create(inside.node("g5", instance_type="g5.xlarge", gpus="1"))
    since = audit.now()
    unlisted, listed = f"unlisted-{outside.tag}", f"listed-{inside.tag}"
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        objects=[
            gpu_label_policy(unlisted, UNLISTED, outside.selector),
            gpu_label_policy(listed, ADMITTED, inside.selector),
        ],
    )
    policies += [unlisted, listed]
    try:
        cond = wait_until(
            lambda: c if (c := _degraded(cluster, unlisted)) and c["status"] == "True" else None,
            within=60,
            what="the unlisted prefix to be reported",
        )
        assert cond["reason"] == "LabelPrefixNotAdmitted", cond
        assert f"label prefix {UNLISTED} is not one the admission guard" in cond["message"]
        assert "security.admissionGuard.nodeLabelPrefixes" in cond["message"]
        # The admitted policy labels its node, so the flag does not just stop all writes.
        wait_until(
            lambda: _get(cluster, "node", labelled.name)["metadata"]["labels"].get(
                f"{ADMITTED}/gpu-model"
            ),
            within=60,
            what="the admitted prefix's labels",
        )
        wait_until(
            lambda: (c := _degraded(cluster, listed)) and c["status"] == "False",
            within=30,
            what="the admitted policy's status",
        )
        labels = _get(cluster, "node", refused.name)["metadata"]["labels"]
        assert not [k for k in labels if k.startswith(f"{UNLISTED}/")], labels
        # Not tried and denied: never sent. The admitted node's write shows the log is read.
        written = {e.name for e in audit.writes_by(cluster.audit_log, since=since)}
        assert labelled.name in written
        assert refused.name not in written
        events = _get(
            cluster, "events", "-A", "--field-selector", f"involvedObject.name={refused.name}"
        )
        assert "LabelPrefixRefused" in {e["reason"] for e in events["items"]}
    finally:
        outside.cleanup()
        inside.cleanup()
