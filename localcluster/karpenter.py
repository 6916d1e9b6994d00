"""A real Karpenter in the local cluster: the KWOK cloud provider of sigs.k8s.io/karpenter,
built by `tools/build.sh karpenter`, with the CRDs of the same module.

It launches nodes as KWOK nodes (annotated so that the harness's KWOK runs them), from the
instance types in karpenter-instance-types.yaml, and consolidates them as it would in a
cloud. Everything it is given is checked first: a malformed instance-type table, a NodePool
that would set the operator's labels, or a Karpenter too old for the annotation the product
writes stops the start-up with the field's path, before anything is applied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from localcluster import binaries, crd_schema

INSTANCE_TYPES = Path(__file__).with_name("karpenter-instance-types.yaml")
NAMESPACE = "karpenter"
NODE_CLASS = "default"
CPU_POOL = "cpu"
GPU_POOL = "gpu"
GPU = "nvidia.com/gpu"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
CAPACITY_TYPES = ("on-demand", "spot")
# The first release that reads karpenter.sh/disruption-cost (and has the
# PodDeletionCostManagement gate): an older one would ignore what the product writes for it.
DISRUPTION_COST_SINCE = (1, 15, 0)
# Labels the operator writes on nodes: a NodePool that set them would have Karpenter stamp
# them on every node it launches, and two writers would disagree.
OPERATOR_LABEL_PREFIXES = ("schedpolicy.io",)

_QUANTITY = re.compile(r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|[KMGTPE]i?|[mkMGTPE])?$")
_ARCHITECTURES = ("amd64", "arm64")


class KarpenterConfigError(ValueError):
    """Input the harness refuses to give Karpenter; the message starts with the field path."""


@dataclass(frozen=True)
class InstanceType:
    name: str
    resources: Mapping[str, str]
    prices: Mapping[str, float]  # by capacity type, USD per hour

    @property
    def gpus(self) -> int:
        return int(self.resources.get(GPU, "0"))


@dataclass(frozen=True)
class Catalog:
    zones: tuple[str, ...]
    types: tuple[InstanceType, ...]

    def by_name(self) -> dict[str, InstanceType]:
        return {t.name: t for t in self.types}

    def price(self, instance_type: str, capacity_type: str) -> float:
        return self.by_name()[instance_type].prices[capacity_type]

    def provider_json(self) -> list[dict[str, Any]]:
        """The KWOK provider's instance-types file: one offering per zone and capacity type.

        The provider decodes it with encoding/json, which ignores a misspelt key and reads
        a missing one as zero; this output has every key it reads, spelt as it reads them.
        """
        return [
            {
                "name": t.name,
                "architecture": "amd64",
                "operatingSystems": ["linux"],
                "resources": dict(t.resources),
                "offerings": [
                    {
                        "price": t.prices[capacity],
                        "available": True,
                        "requirements": [
                            {"key": CAPACITY_TYPE, "operator": "In", "values": [capacity]},
                            {"key": ZONE, "operator": "In", "values": [zone]},
                        ],
                    }
                    for zone in self.zones
                    for capacity in CAPACITY_TYPES
                ],
            }
            for t in self.types
        ]


def _fail(where: str, why: str) -> KarpenterConfigError:
    return KarpenterConfigError(f"{where}: {why}")


def parse_catalog(doc: Any, source: str = str(INSTANCE_TYPES)) -> Catalog:
    """The instance-type table, checked field by field."""
    if not isinstance(doc, Mapping):
        raise _fail(source, "expected a mapping with zones and instanceTypes")
    zones = doc.get("zones")
    if not isinstance(zones, list) or not zones or not all(isinstance(z, str) for z in zones):
        raise _fail("zones", "a non-empty list of zone names is required")
    entries = doc.get("instanceTypes")
    if not isinstance(entries, list) or not entries:
        raise _fail("instanceTypes", "a non-empty list is required")
    types: list[InstanceType] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"instanceTypes[{i}]"
        if not isinstance(entry, Mapping):
            raise _fail(where, "expected a mapping")
        unknown = sorted(set(entry) - {"name", "resources", "price"})
        if unknown:
            raise _fail(f"{where}.{unknown[0]}", "unknown field")
        name = entry.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][-a-z0-9.]*", name):
            raise _fail(f"{where}.name", f"an instance-type name is required, got {name!r}")
        if name in seen:
            raise _fail(f"{where}.name", f"{name} is listed twice")
        seen.add(name)
        types.append(
            InstanceType(
                name,
                _resources(entry.get("resources"), f"{where}.resources"),
                _prices(entry.get("price"), f"{where}.price"),
            )
        )
    return Catalog(tuple(zones), tuple(types))


def _resources(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _fail(where, "a mapping of resource name to quantity is required")
    for required in ("cpu", "memory", "pods"):
        if required not in value:
            raise _fail(f"{where}.{required}", "required")
    found: dict[str, str] = {}
    for key, amount in value.items():
        text = str(amount)
        if isinstance(amount, bool) or not _QUANTITY.match(text):
            raise _fail(f"{where}.{key}", f"{amount!r} is not a quantity")
        found[str(key)] = text
    if GPU in found and not found[GPU].isdigit():
        raise _fail(f"{where}.{GPU}", f"GPUs come whole, got {found[GPU]!r}")
    return found


def _prices(value: Any, where: str) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise _fail(where, f"a price per capacity type ({', '.join(CAPACITY_TYPES)}) is required")
    prices: dict[str, float] = {}
    for capacity in CAPACITY_TYPES:
        price = value.get(capacity)
        if isinstance(price, bool) or not isinstance(price, int | float) or price <= 0:
            raise _fail(
                f"{where}.{capacity}", f"a positive USD-per-hour price is required, got {price!r}"
            )
        prices[capacity] = float(price)
    unknown = sorted(set(value) - set(CAPACITY_TYPES))
    if unknown:
        raise _fail(f"{where}.{unknown[0]}", f"not a capacity type ({', '.join(CAPACITY_TYPES)})")
    if prices["spot"] > prices["on-demand"]:
        raise _fail(f"{where}.spot", "spot costs more than on-demand")
    return prices


def load_catalog(path: Path = INSTANCE_TYPES) -> Catalog:
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise _fail(str(path), f"not YAML: {err}") from err
    return parse_catalog(doc, str(path))


# ---- NodePools -------------------------------------------------------------------------------


# What GPU node groups carry in most clusters (EKS's GPU AMIs, GKE, Karpenter's GPU
# examples), so that only pods that tolerate it, those asking for GPUs, land there.
GPU_TAINT = {"key": GPU, "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


def node_pools(
    catalog: Catalog,
    *,
    consolidate_after: str = "5s",
    gpu_labels: Mapping[str, str] | None = None,
    gpu_taint: bool = False,
    gpu_consolidation: str = "WhenEmptyOrUnderutilized",
) -> list[dict[str, Any]]:
    """A CPU pool and a GPU pool over the catalog's types, both spot and on-demand, both
    consolidating empty and underused nodes. The CPU pool weighs more, so Karpenter tries it
    first and launches a GPU node only for a pod that asks for a GPU; `gpu_taint` keeps every
    other pod off the GPU pool's nodes, and `gpu_consolidation` may keep Karpenter from moving
    GPU pods (WhenEmpty, as many GPU inference pools are set)."""
    cpu = [t.name for t in catalog.types if t.gpus == 0]
    gpu = [t.name for t in catalog.types if t.gpus > 0]
    return [
        _pool(CPU_POOL, cpu, weight=50, consolidate_after=consolidate_after),
        _pool(
            GPU_POOL,
            gpu,
            weight=10,
            consolidate_after=consolidate_after,
            labels=gpu_labels,
            taints=[GPU_TAINT] if gpu_taint else [],
            policy=gpu_consolidation,
        ),
    ]


def _pool(
    name: str,
    types: Sequence[str],
    *,
    weight: int,
    consolidate_after: str,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    policy: str = "WhenEmptyOrUnderutilized",
) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {
            "nodeClassRef": {
                "group": "karpenter.kwok.sh",
                "kind": "KWOKNodeClass",
                "name": NODE_CLASS,
            },
            "requirements": [
                {"key": INSTANCE_TYPE, "operator": "In", "values": list(types)},
                {"key": CAPACITY_TYPE, "operator": "In", "values": list(CAPACITY_TYPES)},
            ],
            "expireAfter": "Never",
        }
    }
    if labels:
        template["metadata"] = {"labels": dict(labels)}
    if taints:
        template["spec"]["taints"] = [dict(t) for t in taints]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "weight": weight,
            "template": template,
            "disruption": {
                "consolidationPolicy": policy,
                "consolidateAfter": consolidate_after,
                "budgets": [{"nodes": "100%"}],
            },
        },
    }


def check_node_pool(
    pool: Mapping[str, Any], prefixes: Iterable[str] = OPERATOR_LABEL_PREFIXES
) -> None:
    """Refuse a NodePool that would put the operator's labels on the nodes it launches."""
    name = pool.get("metadata", {}).get("name", "?")
    template = pool.get("spec", {}).get("template", {})
    labels = (template.get("metadata") or {}).get("labels") or {}
    owned = tuple(prefixes)
    for key in labels:
        if _under(key, owned):
            raise _fail(
                f"NodePool {name}: spec.template.metadata.labels[{key}]",
                "the schedpolicy operator writes this label from verified sources;"
                " a NodePool must not set it",
            )
    for i, req in enumerate((template.get("spec") or {}).get("requirements") or []):
        if _under(str(req.get("key", "")), owned):
            raise _fail(
                f"NodePool {name}: spec.template.spec.requirements[{i}].key",
                f"{req.get('key')} is written by the schedpolicy operator; a NodePool must not"
                " require it (Karpenter would label its nodes with it)",
            )


def _under(key: str, prefixes: Sequence[str]) -> bool:
    prefix = key.split("/", 1)[0] if "/" in key else ""
    return any(prefix == p or prefix.endswith("." + p) for p in prefixes)


# ---- the binary --------------------------------------------------------------------------------


def crd_dir() -> Path:
    return binaries.bin_dir() / "karpenter-crds"


def version() -> str:
    stamp = crd_dir() / "VERSION"
    if not stamp.exists():
        raise _fail(str(stamp), "missing; run `bash tools/build.sh karpenter`")
    return stamp.read_text().strip()


def check_version(found: str) -> None:
    """Refuse a Karpenter that would ignore karpenter.sh/disruption-cost."""
    parsed = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?", found)
    if parsed is None:
        raise _fail("tools/karpenter/go.mod", f"cannot read the Karpenter version {found!r}")
    have = tuple(int(g) for g in parsed.groups())
    if have < DISRUPTION_COST_SINCE:
        need = ".".join(map(str, DISRUPTION_COST_SINCE))
        raise _fail(
            "tools/karpenter/go.mod",
            f"Karpenter {found} does not read karpenter.sh/disruption-cost (first in v{need});"
            f" pin v{need} or later",
        )


# Karpenter's own defaults for the provisioner's batching window (BATCH_IDLE_DURATION,
# BATCH_MAX_DURATION), which a replay divides by its time scale.
BATCH_IDLE_SECONDS = 1.0
BATCH_MAX_SECONDS = 10.0
# The environment variable tools/karpenter/replay-timers.patch reads.
TIME_SCALE_ENV = "KARPENTER_REPLAY_TIME_SCALE"
# What that patch divides by it: (Karpenter's name for it, its package, real seconds, what it
# shapes). A unit test holds this list to the patch.
REPLAY_TIMERS = (
    ("pollingPeriod", "controllers/disruption", 10.0, "disruption pass when none found work"),
    (
        "commandValidationDelay",
        "controllers/disruption",
        15.0,
        "wait before a command is validated",
    ),
    ("nominationFloor", "controllers/state", 10.0, "a node stays nominated for a pending pod"),
    ("consolidationStateRefresh", "controllers/state", 300.0, "unchanged state forced to change"),
    ("reconcileInterval", "controllers/pod/deletioncost", 60.0, "the gate ranks and writes again"),
    ("dedupeTimeout", "controllers/nodeclaim/podevents", 10.0, "lastPodEventTime writes per node"),
)


@dataclass
class KarpenterOptions:
    """How a LocalCluster runs Karpenter. `feature_gates` go to its FEATURE_GATES, such as
    {"PodDeletionCostManagement": True}.

    `time_scale` > 1 runs Karpenter that many times faster, for a replay compressed as much:
    the fixed timers tools/karpenter/replay-timers.patch makes scalable, and its batching
    window from Karpenter's defaults. At 1, the tests' short batches (1 s and 3 s) apply.
    `registration_delay`: seconds between a launch and its Node appearing (a cloud's boot),
    through the KWOK node class."""

    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    consolidate_after: str = "5s"
    catalog: Path = INSTANCE_TYPES
    gpu_labels: Mapping[str, str] | None = None
    gpu_taint: bool = False  # the GPU pool's nodes taint nvidia.com/gpu (NoSchedule)
    gpu_consolidation: str = "WhenEmptyOrUnderutilized"  # the GPU pool's consolidationPolicy
    time_scale: float = 1.0
    registration_delay: float = 0.0


def manifests(options: KarpenterOptions) -> tuple[Catalog, list[dict[str, Any]]]:
    """Everything checked, and the objects to apply after the CRDs: the namespace, the node
    class and the NodePools."""
    check_version(version())
    catalog = load_catalog(options.catalog)
    pools = node_pools(
        catalog,
        consolidate_after=options.consolidate_after,
        gpu_labels=options.gpu_labels,
        gpu_taint=options.gpu_taint,
        gpu_consolidation=options.gpu_consolidation,
    )
    if options.time_scale < 1:
        raise _fail("time_scale", f"{options.time_scale} is below 1 (Karpenter cannot run slower)")
    if options.registration_delay < 0:
        raise _fail("registration_delay", f"{options.registration_delay} is negative")
    for pool in pools:
        check_node_pool(pool)
        check_against_crd(pool)
    node_class: dict[str, Any] = {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": NODE_CLASS},
        "spec": {},
    }
    if options.registration_delay:
        # The node class takes whole seconds only.
        node_class["spec"]["nodeRegistrationDelay"] = f"{round(options.registration_delay)}s"
    check_against_crd(node_class, "karpenter.kwok.sh_kwoknodeclasses.yaml", "v1alpha1")
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        node_class,
        *pools,
    ]
    return catalog, objects


def check_against_crd(
    obj: Mapping[str, Any], crd: str = "karpenter.sh_nodepools.yaml", version: str = "v1"
) -> None:
    """Refuse an object (a NodePool, the node class) Karpenter's own CRD would refuse, with
    the apiserver's message, before any cluster starts."""
    schema = crd_schema.version_schema(crd_dir() / crd, version)
    name = f"{obj.get('kind', '?')} {obj.get('metadata', {}).get('name', '?')}"
    try:
        crd_schema.check(obj, schema)
    except crd_schema.SchemaError as err:
        raise _fail(name, f"Karpenter's CRD refuses it: {err}") from None


def environment(
    options: KarpenterOptions, kubeconfig: Path, types_file: Path, metrics: int, health: int
) -> dict[str, str]:
    gates = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(options.feature_gates.items()))
    env = {
        "KUBECONFIG": str(kubeconfig),
        "SYSTEM_NAMESPACE": NAMESPACE,
        "DISABLE_LEADER_ELECTION": "true",
        "INSTANCE_TYPES_FILE_PATH": str(types_file),
        "METRICS_PORT": str(metrics),
        "HEALTH_PROBE_PORT": str(health),
        # Short batches: tests create a handful of pods and want their nodes soon.
        "BATCH_IDLE_DURATION": "1s",
        "BATCH_MAX_DURATION": "3s",
        "LOG_LEVEL": "debug",
    }
    if options.time_scale > 1:
        env[TIME_SCALE_ENV] = f"{options.time_scale:g}"
        idle, most = (BATCH_IDLE_SECONDS, BATCH_MAX_SECONDS)
        env["BATCH_IDLE_DURATION"] = f"{round(idle / options.time_scale * 1000)}ms"
        env["BATCH_MAX_DURATION"] = f"{round(most / options.time_scale * 1000)}ms"
    if gates:
        env["FEATURE_GATES"] = gates
    return env


def write_instance_types(catalog: Catalog, path: Path) -> Path:
    path.write_text(json.dumps(catalog.provider_json(), indent=1))
    return path
