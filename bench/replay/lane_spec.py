"""The replay lanes as data: bench/replay/lanes.yaml, read and checked before any cluster
starts. Every refusal names the file and the field (`lanes.yaml: lanes.product.colour: ...`).

A lane says what differs between runs of the same load: which scheduler the pods name, whether
the operator runs and under which policy, Karpenter's feature gates, the GPU NodePool's
consolidation policy, and annotations on the GPU replicas. Everything else is the benchmark's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

LANES_FILE = Path(__file__).with_name("lanes.yaml")
CONSOLIDATION_POLICIES = ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")
_FIELDS = {
    "label",
    "colour",
    "scheduler",
    "policy",
    "karpenter_gates",
    "gpu_consolidation",
    "gpu_pod_annotations",
    "headroom",
}


class LaneError(ValueError):
    """A refused lane file or lane choice; the message starts with the file and field."""


@dataclass(frozen=True)
class LaneSpec:
    name: str
    colour: str
    label: str = ""
    scheduler: str | None = None
    # None: no operator. A mapping (maybe empty): merged into the benchmark policy's spec.
    policy: Mapping[str, Any] | None = None
    karpenter_gates: Mapping[str, bool] = field(default_factory=dict)
    gpu_consolidation: str = "WhenEmptyOrUnderutilized"
    gpu_pod_annotations: Mapping[str, str] = field(default_factory=dict)
    # The chart's GPU headroom: `replicas` placeholder pods of `gpus` GPUs each (0: none).
    headroom: int = 0
    headroom_gpus: int = 1

    @property
    def product(self) -> bool:
        return self.policy is not None

    @property
    def title(self) -> str:
        return self.label or self.name

    def policy_for(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """The benchmark's policy with this lane's changes merged into its spec."""
        if self.policy is None:
            raise LaneError(f"lane {self.name} runs no policy")
        merged = dict(base)
        merged["spec"] = _merge(base.get("spec") or {}, self.policy)
        return merged


@dataclass(frozen=True)
class Benchmark:
    """The lanes one benchmark runs (the first is the baseline) and the pairs it compares."""

    name: str
    lanes: tuple[LaneSpec, ...]
    pairs: tuple[tuple[str, str], ...]

    @property
    def baseline(self) -> str:
        return self.lanes[0].name

    def comparisons(self) -> list[tuple[str, str]]:
        """(lane, against): every lane against the baseline, then the extra pairs."""
        found = [(lane.name, self.baseline) for lane in self.lanes[1:]]
        return found + [p for p in self.pairs if p not in found]


def _merge(base: Mapping[str, Any], change: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in change.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _fail(path: Path, where: str, why: str) -> LaneError:
    return LaneError(f"{path}: {where}: {why}")


def _lane(path: Path, name: str, doc: Any) -> LaneSpec:
    where = f"lanes.{name}"
    if not isinstance(doc, Mapping):
        raise _fail(path, where, "a mapping of lane fields is required")
    unknown = sorted(set(doc) - _FIELDS)
    if unknown:
        raise _fail(
            path, f"{where}.{unknown[0]}", f"unknown field (known: {', '.join(sorted(_FIELDS))})"
        )
    colour = doc.get("colour")
    if not isinstance(colour, str) or not colour:
        raise _fail(path, f"{where}.colour", "a matplotlib colour is required")
    policy = doc.get("policy")
    if policy is not None and not isinstance(policy, Mapping):
        raise _fail(
            path, f"{where}.policy", "a mapping merged into the policy's spec ({} for as is)"
        )
    gates = doc.get("karpenter_gates") or {}
    if not isinstance(gates, Mapping) or not all(isinstance(v, bool) for v in gates.values()):
        raise _fail(path, f"{where}.karpenter_gates", "a mapping of gate name to true or false")
    consolidation = doc.get("gpu_consolidation", "WhenEmptyOrUnderutilized")
    if consolidation not in CONSOLIDATION_POLICIES:
        raise _fail(
            path,
            f"{where}.gpu_consolidation",
            f"{consolidation!r} is not a consolidationPolicy ({', '.join(CONSOLIDATION_POLICIES)})",
        )
    annotations = doc.get("gpu_pod_annotations") or {}
    if not isinstance(annotations, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
    ):
        raise _fail(path, f"{where}.gpu_pod_annotations", "a mapping of strings to strings")
    headroom, headroom_gpus = _headroom(path, f"{where}.headroom", doc.get("headroom"))
    scheduler = doc.get("scheduler")
    if scheduler is not None and not isinstance(scheduler, str):
        raise _fail(path, f"{where}.scheduler", "a schedulerName is required")
    return LaneSpec(
        name,
        colour,
        str(doc.get("label") or ""),
        scheduler,
        dict(policy) if policy is not None else None,
        dict(gates),
        consolidation,
        dict(annotations),
        headroom,
        headroom_gpus,
    )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _headroom(path: Path, where: str, doc: Any) -> tuple[int, int]:
    """(placeholders, GPUs each) from `{replicas: N, gpus: G}`; absent: none."""
    if doc is None:
        return 0, 1
    if not isinstance(doc, Mapping) or set(doc) - {"replicas", "gpus"}:
        raise _fail(path, where, "a mapping {replicas: N, gpus: G} is required")
    replicas, gpus = doc.get("replicas", 0), doc.get("gpus", 1)
    if not _whole(replicas):
        raise _fail(path, f"{where}.replicas", "a whole number of placeholder pods, 0 or more")
    if not _whole(gpus) or gpus < 1:
        raise _fail(path, f"{where}.gpus", "a whole number of GPUs a placeholder holds, 1 or more")
    return replicas, gpus


def read(path: Path = LANES_FILE) -> tuple[dict[str, LaneSpec], dict[str, Benchmark]]:
    """Every lane, and every benchmark's choice of them."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise LaneError(f"{path}: {err}") from None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("lanes"), Mapping):
        raise _fail(path, "lanes", "a mapping of lane name to lane is required")
    lanes = {str(n): _lane(path, str(n), d) for n, d in doc["lanes"].items()}
    benches = doc.get("benchmarks")
    if not isinstance(benches, Mapping):
        raise _fail(path, "benchmarks", "a mapping of benchmark name to its lanes is required")
    return lanes, {str(b): _benchmark(path, str(b), d, lanes) for b, d in benches.items()}


def _benchmark(path: Path, name: str, doc: Any, lanes: Mapping[str, LaneSpec]) -> Benchmark:
    where = f"benchmarks.{name}"
    if not isinstance(doc, Mapping) or not isinstance(doc.get("lanes"), list) or not doc["lanes"]:
        raise _fail(path, f"{where}.lanes", "a non-empty list of lane names is required")
    chosen = pick(doc["lanes"], lanes, path, f"{where}.lanes")
    pairs: list[tuple[str, str]] = []
    names = {lane.name for lane in chosen}
    for i, text in enumerate(doc.get("pairs") or []):
        parts = [p.strip() for p in str(text).split("/")]
        if len(parts) != 2 or not all(p in names for p in parts):
            raise _fail(
                path,
                f"{where}.pairs[{i}]",
                f"{text!r} is not 'lane / against' with both among {sorted(names)}",
            )
        pairs.append((parts[0], parts[1]))
    return Benchmark(name, tuple(chosen), tuple(pairs))


def pick(
    wanted: Sequence[Any], lanes: Mapping[str, LaneSpec], path: Path, where: str
) -> list[LaneSpec]:
    """The named lanes, in order; an unknown or repeated name is refused at `where`."""
    chosen: list[LaneSpec] = []
    for i, name in enumerate(wanted):
        if name not in lanes:
            raise _fail(path, f"{where}[{i}]", f"unknown lane {name!r} (known: {', '.join(lanes)})")
        if lanes[name] in chosen:
            raise _fail(path, f"{where}[{i}]", f"lane {name!r} is listed twice")
        chosen.append(lanes[name])
    return chosen


def benchmark(name: str, only: Sequence[str] | None = None, path: Path = LANES_FILE) -> Benchmark:
    """Benchmark `name` as the lane file says, or with the lanes `only` (the command line's
    --lanes), checked the same way."""
    lanes, benches = read(path)
    if name not in benches:
        raise _fail(path, "benchmarks", f"no benchmark {name!r} (known: {', '.join(benches)})")
    bench = benches[name]
    if not only:
        return bench
    chosen = pick(only, lanes, path, "--lanes")
    names = {lane.name for lane in chosen}
    return Benchmark(name, tuple(chosen), tuple(p for p in bench.pairs if set(p) <= names))
