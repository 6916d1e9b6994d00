"""The write queue's order: a pod that carries no cost yet goes ahead of re-costs."""

from __future__ import annotations

import asyncio
from typing import cast

from schedpolicy.shell.deletion_cost.cost_writer import CostWriter
from schedpolicy.shell.gpu.label_sync import LabelSync
from schedpolicy.shell.write_queue import WriteQueue


class Recorder:
    def __init__(self, expect: int) -> None:
        self.written: list[str] = []
        self.expect = expect
        self.done = asyncio.Event()

    async def write(self, uid: str) -> None:
        self.written.append(uid)
        if len(self.written) == self.expect:
            self.done.set()


async def _order(puts: list[tuple[str, bool]]) -> list[str]:
    costs = Recorder(len({uid for uid, _ in puts}))
    queue = WriteQueue(
        cast(CostWriter, costs), cast(LabelSync, None), lambda: [], lambda affected: None
    )
    for uid, first in puts:
        queue.pod(uid, first=first)
    worker = asyncio.create_task(queue.work())
    await asyncio.wait_for(costs.done.wait(), 5)
    worker.cancel()
    return costs.written


def test_new_pods_go_first_and_each_rank_keeps_its_order() -> None:
    puts = [("a", False), ("b", False), ("new1", True), ("c", False), ("new2", True)]
    assert asyncio.run(_order(puts)) == ["new1", "new2", "a", "b", "c"]


def test_a_pod_is_queued_once() -> None:
    assert asyncio.run(_order([("a", False), ("a", False), ("b", True)])) == ["b", "a"]
