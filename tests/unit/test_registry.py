"""Pods and Nodes may only be watched by handlers that never write back to them.

Kopf adds finalizers and annotations for change, timer and daemon handlers; event
and index handlers are read-only. This reads kopf's registry, which is internal,
so it is checked here rather than at run time, and the check is itself tested
against a registry that breaks the rule."""

from __future__ import annotations

from typing import Any

import kopf

from schedpolicy.app.handlers import registry

READ_ONLY = {"pods", "nodes"}


def writing_handlers_on_read_only_kinds(reg: kopf.OperatorRegistry) -> list[Any]:
    found = []
    # Admission webhooks are fine: they answer the apiserver and persist nothing on objects.
    for attr in ("_changing", "_spawning"):
        for handler in getattr(reg, attr).get_all_handlers():
            selector = handler.selector
            names = {selector.plural, selector.any_name} if selector is not None else set()
            if {str(n).lower() for n in names if n} & READ_ONLY:
                found.append(handler)
    return found


def test_the_check_catches_timers_daemons_and_change_handlers() -> None:
    bad = kopf.OperatorRegistry()

    @kopf.timer("pods", interval=1, registry=bad)
    def tick(**_: Any) -> None: ...

    @kopf.daemon("v1", "nodes", registry=bad)
    def watch(**_: Any) -> None: ...

    @kopf.on.update("pods", registry=bad)
    def changed(**_: Any) -> None: ...

    @kopf.on.event("pods", registry=bad)
    def seen(**_: Any) -> None: ...

    @kopf.on.mutate("pods", registry=bad)
    def mutate(**_: Any) -> None: ...

    assert len(writing_handlers_on_read_only_kinds(bad)) == 3


def test_operator_registers_no_writing_handlers_on_pods_or_nodes() -> None:
    assert writing_handlers_on_read_only_kinds(registry) == []


def kinds_kopf_watches(reg: kopf.OperatorRegistry) -> set[str]:
    kinds = set()
    for attr in ("_watching", "_changing", "_spawning", "_webhooks"):
        for handler in getattr(reg, attr).get_all_handlers():
            selector = handler.selector
            if selector is not None:
                kinds |= {str(n).lower() for n in (selector.plural, selector.any_name) if n}
    return kinds


def test_kopf_watches_only_the_policies_and_serves_no_webhook() -> None:
    """Pods, nodes, ReplicaSets and namespaces come through our own informers, and
    admission is its own process: kopf's per-object path handles none of them."""
    assert kinds_kopf_watches(registry) == {"schedulingpolicies"}
    assert registry._webhooks.get_all_handlers() == []
