"""The leader's admission pass, against a recording stand-in for the apiserver: the order of
its writes, and what a refusal leaves behind. What the apiserver does with them is in
tests/e2e/placement/."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from schedpolicy.core.placement.compiler import Compiled
from schedpolicy.core.placement.routing import MATCH_CONDITION, Route, Stored
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.kube_errors import Refused
from schedpolicy.shell.placement.admission_sync import AdmissionSettings, AdmissionSync
from schedpolicy.view.cluster import ClusterView


class Apiserver:
    """Holds our compiled objects and one webhook entry; records every write in order."""

    def __init__(self, stored: dict[str, str], refuse: str | None = None) -> None:
        self.stored = stored  # name -> digest (policy and binding alike)
        self.refuse = refuse
        self.conditions: list[dict[str, str]] = []
        self.writes: list[str] = []

    async def stored_admission_policies(self) -> Stored:
        return Stored(dict(self.stored), dict(self.stored))

    async def apply_admission_policy(self, compiled: Compiled) -> None:
        if compiled.name == self.refuse:
            raise Refused(422, "Invalid: spec.variables[3]: compilation failed")
        self.writes.append(f"apply {compiled.name}")
        self.stored[compiled.name] = compiled.digest

    async def delete_admission_policy(self, name: str) -> None:
        self.writes.append(f"delete {name}")
        self.stored.pop(name, None)

    async def webhook_match_conditions(
        self, configuration: str, webhook: str
    ) -> tuple[int, list[dict[str, str]], str]:
        return 0, list(self.conditions), "uid-config"

    async def set_webhook_match_conditions(
        self, configuration: str, webhook: str, index: int, conditions: list[dict[str, str]]
    ) -> None:
        ours = [c["expression"] for c in conditions if c["name"] == MATCH_CONDITION]
        self.writes.append(f"narrow {ours[0] if ours else '(every pod)'}")
        self.conditions = conditions


def view_with(*names: str, selector: dict[str, Any] | None = None) -> ClusterView:
    view = ClusterView()
    for i, name in enumerate(names):
        spec: dict[str, Any] = {"placement": {"avoidGPUNodes": True}}
        if selector is not None:
            spec["podSelector"] = selector
        view.upsert_policy(
            {
                "apiVersion": "schedpolicy.io/v1alpha1",
                "kind": "SchedulingPolicy",
                "metadata": {"name": name, "uid": f"u{i}", "generation": 1},
                "spec": spec,
            }
        )
    return view


def sync(view: ClusterView, server: Apiserver) -> tuple[AdmissionSync, list[Mapping[str, Route]]]:
    seen: list[Mapping[str, Route]] = []
    settings = AdmissionSettings(mode="policy", webhook_configuration="schedpolicy", settle=0)
    made = AdmissionSync(cast(Kube, None), view, settings, seen.append)
    made.kube = cast(Any, server)
    return made, seen


async def test_written_before_narrowed_and_widened_before_deleted() -> None:
    server = Apiserver({"schedpolicy-hints-gone": "old"})
    admission, seen = sync(view_with("a"), server)
    await admission.sync_once()
    assert server.writes == [
        "apply schedpolicy-hints-a",
        "narrow false",
        "delete schedpolicy-hints-gone",
    ]
    assert seen[-1]["a"].compiled
    # Nothing changed: nothing is written again.
    server.writes.clear()
    await admission.sync_once()
    assert server.writes == []


async def test_a_refusal_serves_the_policy_by_webhook_and_keeps_the_message() -> None:
    # An older version of the refused policy is there: it must not go on serving.
    server = Apiserver({"schedpolicy-hints-a": "older"}, refuse="schedpolicy-hints-a")
    admission, seen = sync(view_with("a"), server)
    await admission.sync_once()
    assert server.writes == ["delete schedpolicy-hints-a"]
    route = seen[-1]["a"]
    assert (route.path, route.reason) == ("Webhook", "Rejected")
    assert "spec.variables[3]: compilation failed" in route.message
    assert server.conditions == []  # the webhook sees every pod


async def test_the_webhook_is_narrowed_to_the_pods_its_policies_select() -> None:
    server = Apiserver({}, refuse="schedpolicy-hints-b")
    view = view_with("a", "b", selector={"matchLabels": {"app": "web"}})
    admission, _ = sync(view, server)
    await admission.sync_once()
    assert (
        server.writes[-1]
        == "narrow (object.metadata.?labels.orValue({})[?'app'] == optional.of('web'))"
    )
