"""How big each benchmark runs."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Scale:
    name: str
    nodes: int  # B1/B2 fleet
    replicasets: int
    replicas: int
    write_concurrency: int
    webhook_seconds: int  # B3: seconds of 100 creates/s
    burst_replicas: int  # B3 burst: each of five Deployments scales from 0 to this
    gpu_nodes: int  # B4
    gpu_seed: int
    scale_nodes: int  # B5
    scale_replicas: int
    churn_nodes: int  # B4c: 8-GPU nodes per lane, and as many 4-GPU nodes
    churn_lifetime: int  # B4c: mean job lifetime, seconds
    churn_window: int  # B4c: seconds measured after the warm-up
    churn_seeds: tuple[int, ...]  # B4c: one run of every lane per seed
    repeats: int  # B1-B5: runs of each lane, in turn (bench.lanes); times B3's in-turn rounds

    @property
    def pods(self) -> int:
        return self.replicasets * self.replicas


FULL = Scale(
    "full",
    nodes=1000,
    replicasets=100,
    replicas=100,
    write_concurrency=16,
    webhook_seconds=30,
    burst_replicas=1000,
    gpu_nodes=64,
    gpu_seed=7,
    scale_nodes=50,
    scale_replicas=200,
    churn_nodes=16,
    churn_lifetime=60,
    churn_window=180,
    churn_seeds=(7, 11, 13),
    repeats=1,
)
SCALES = {
    "small": replace(
        FULL,
        name="small",
        nodes=200,
        replicasets=20,
        webhook_seconds=10,
        burst_replicas=200,
        churn_nodes=8,
        churn_lifetime=30,
        churn_window=90,
        churn_seeds=(7,),
    ),
    # B2's second point (30k pods on 3k nodes): `make bench SCALE=large ONLY=B2`.
    # It need not fit CI. Otherwise the full scale.
    "large": replace(FULL, name="large", nodes=3000, replicasets=300),
    "full": FULL,
}
