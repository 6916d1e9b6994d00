"""The two admission paths side by side, for the differential tests.

The webhook path: the apiserver defaults the pod (a dry-run create where no compiled
policy applies), `admission.review` answers it as the webhook would, and the patched pod
goes through a second dry-run create, so that the apiserver stores it as it stores
anything a webhook returns. The policy path: one dry-run create where the compiled
MutatingAdmissionPolicies apply. Both answers are the apiserver's stored object.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
from kubernetes_asyncio import client

from schedpolicy.core.api import SchedulingPolicySpec
from schedpolicy.core.policy.matching import Policy
from schedpolicy.core.wellknown import INSTANCE_TYPE_LABEL
from schedpolicy.view.placement import review as admission
from tests.e2e.kubeobjects import PAUSE_IMAGE

# Fields the apiserver sets per request, or that name the namespace the pod was sent to.
VOLATILE = ("uid", "creationTimestamp", "resourceVersion", "managedFields", "namespace")
INSTANCE_TYPES = ("p4d.24xlarge", "p5.48xlarge", "g5.12xlarge", "g5.48xlarge", "c5.xlarge")


@dataclass
class StaticInputs:
    """What admission reads, fixed for a run (admission.AdmissionInputs)."""

    namespaces: dict[str, Mapping[str, str]]
    parsed: list[Policy]
    types: frozenset[str] = frozenset(INSTANCE_TYPES)

    def policies(self) -> list[Policy]:
        return self.parsed

    def instance_types(self) -> frozenset[str]:
        return self.types


def stored(pod: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(pod))
    meta = out.get("metadata") or {}
    for key in VOLATILE:
        meta.pop(key, None)
    out.pop("status", None)
    return out


TOKEN_VOLUME = "kube-api-access-"


def as_created(pod: Mapping[str, Any]) -> dict[str, Any]:
    """`stored`, without what differs between two creates of one body in two namespaces:
    the service account token's volume, whose name ends in a random suffix."""
    out = stored(pod)
    spec = out["spec"]
    spec["volumes"] = [
        v for v in spec.get("volumes") or [] if not v["name"].startswith(TOKEN_VOLUME)
    ]
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        container["volumeMounts"] = [
            m for m in container.get("volumeMounts") or [] if not m["name"].startswith(TOKEN_VOLUME)
        ]
    return out


def cluster_inputs(cluster: Any, namespace: str) -> StaticInputs:
    """What the webhook reads, taken from the cluster now: the SchedulingPolicies as stored
    (their generations go into the hints record), the namespace's labels, and the instance
    types of the nodes."""
    policies = json.loads(cluster.kubectl("get", "spol", "-o", "json"))["items"]
    parsed = [
        Policy(
            p["metadata"]["name"],
            SchedulingPolicySpec.model_validate(p["spec"]),
            generation=p["metadata"].get("generation", 1),
            uid=p["metadata"]["uid"],
        )
        for p in policies
    ]
    ns = json.loads(cluster.kubectl("get", "namespace", namespace, "-o", "json"))
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json"))["items"]
    types = frozenset(
        n["metadata"]["labels"][INSTANCE_TYPE_LABEL]
        for n in nodes
        if INSTANCE_TYPE_LABEL in n["metadata"].get("labels", {})
    )
    return StaticInputs({namespace: ns["metadata"].get("labels", {})}, parsed, types)


@dataclass
class Lanes:
    """A namespace where no compiled policy applies (`plain`), beside the namespaces
    the generated policies select (`served`, name -> labels)."""

    api: client.ApiClient
    plain: str
    served: dict[str, dict[str, str]]
    inputs: StaticInputs
    calls: int = 0
    _limit: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(16))

    async def dry_run(self, namespace: str, pod: Mapping[str, Any]) -> dict[str, Any]:
        core = client.CoreV1Api(self.api)
        async with self._limit:
            self.calls += 1
            resp: Any = await core.create_namespaced_pod(
                namespace, dict(pod), dry_run="All", _preload_content=False
            )
            return dict(json.loads(await resp.read()))

    async def webhook_path(self, pod: Mapping[str, Any], namespace: str) -> dict[str, Any]:
        defaulted = await self.dry_run(self.plain, pod)
        defaulted["metadata"]["namespace"] = namespace
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "diff",
                "namespace": namespace,
                "operation": "CREATE",
                "object": defaulted,
            },
        }
        answer = admission.review(json.dumps(review).encode(), self.inputs, ())
        response = json.loads(answer.body)["response"]
        patched = copy.deepcopy(defaulted)
        if "patch" in response:
            ops = json.loads(base64.b64decode(response["patch"]))
            patched = jsonpatch.apply_patch(patched, ops)
        for key in VOLATILE:
            patched["metadata"].pop(key, None)
        patched.pop("status", None)
        return stored(await self.dry_run(self.plain, patched))

    async def policy_path(self, pod: Mapping[str, Any], namespace: str) -> dict[str, Any]:
        return stored(await self.dry_run(namespace, pod))

    async def pair(self, pod: Mapping[str, Any], namespace: str) -> tuple[Any, Any]:
        a, b = await asyncio.gather(
            self.webhook_path(pod, namespace), self.policy_path(pod, namespace)
        )
        return a, b

    async def mismatch(self, pod: Mapping[str, Any], namespace: str) -> tuple[Any, Any] | None:
        a, b = await self.pair(pod, namespace)
        return None if a == b else (a, b)


# ---- generators --------------------------------------------------------------------------

APPS = ("web", "gpu", "batch", "train", "infer", "etl", "api", "cache", "notebook", "eval")
TEAMS = ("ml", "search", "ads")


def namespace_labels(rng: random.Random, run: str) -> dict[str, str]:
    labels = {"schedpolicy.io/diff-run": run, "team": rng.choice(TEAMS)}
    if rng.random() < 0.5:
        labels["tier"] = rng.choice(("prod", "dev"))
    return labels


def _selector(rng: random.Random, keys: Mapping[str, tuple[str, ...]]) -> dict[str, Any] | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    # Mostly the first key (app, team): policies then split the pods between them.
    key = next(iter(keys)) if rng.random() < 0.8 else rng.choice(sorted(keys))
    if roll < 0.6:
        return {"matchLabels": {key: rng.choice(keys[key])}}
    op = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
    expr: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        expr["values"] = rng.sample(keys[key], rng.randint(1, min(3, len(keys[key]))))
    return {"matchExpressions": [expr]}


def policy_spec(rng: random.Random, run: str) -> dict[str, Any]:
    """A SchedulingPolicy spec with a random placement. Its namespace selector also
    requires the run's label, so that no other test's pod is touched."""
    placement: dict[str, Any] = {}
    if rng.random() < 0.6:
        placement["gpu"] = {
            "models": rng.sample(["A100", "H100", "A10G", "L4"], rng.randint(1, 3)),
            "minMemoryMiB": rng.choice((16384, 40960, 81920)),
        }
    if rng.random() < 0.7:
        placement["capacityType"] = {
            "prefer": rng.choice(("spot", "on-demand")),
            "weight": rng.choice((50, 50, 100, rng.randint(1, 100))),
        }
    if rng.random() < 0.5:
        placement["instanceTypes"] = [
            {
                "prefix": rng.choice(("p4d", "p5", "g5", "m7", "c5.xlarge")),
                "weight": rng.randint(1, 100),
            }
            for _ in range(rng.randint(1, 3))
        ]
    if rng.random() < 0.4:
        placement["avoidGPUNodes"] = True
    if rng.random() < 0.5:
        placement["zoneSpread"] = {
            "maxSkew": rng.randint(1, 3),
            "whenUnsatisfiable": rng.choice(("DoNotSchedule", "ScheduleAnyway")),
        }
    if rng.random() < 0.2:
        placement["schedulerName"] = "other-profile"
    ns = _selector(rng, {"team": TEAMS, "tier": ("prod", "dev")}) or {}
    ns.setdefault("matchExpressions", []).append(
        {"key": "schedpolicy.io/diff-run", "operator": "In", "values": [run]}
    )
    spec: dict[str, Any] = {
        # Ties too: the name breaks them, on both paths.
        "priority": rng.choice((0, 0, 10, 20, 50, 100, *range(1, 100, 7))),
        "namespaceSelector": ns,
        "placement": placement,
    }
    pods = _selector(rng, {"app": APPS, "track": ("stable", "canary")})
    if pods is not None:
        spec["podSelector"] = pods
    if rng.random() < 0.2:
        spec["nodeLabels"] = {"gpu": {"labelPrefix": "gpu.example.com"}}
    return spec


def parse(name: str, spec: Mapping[str, Any], generation: int = 1) -> Policy:
    # No uid: a compiled policy with an owner that does not exist would be collected.
    return Policy(name, SchedulingPolicySpec.model_validate(spec), generation=generation)


def generated_pod(rng: random.Random, name: str) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if rng.random() < 0.9:
        labels["app"] = rng.choice(APPS)
    if rng.random() < 0.4:
        labels["track"] = rng.choice(("stable", "canary"))
    if rng.random() < 0.5:
        labels["pod-template-hash"] = uuid.UUID(int=rng.getrandbits(128)).hex[:10]
    if rng.random() < 0.05:
        labels["schedpolicy.io/ignore"] = "true"
    if rng.random() < 0.05:
        labels.update(
            {"app.kubernetes.io/name": "schedpolicy", "app.kubernetes.io/component": "webhook"}
        )
    resources: dict[str, Any] = {"requests": {"cpu": "10m"}}
    if rng.random() < 0.45:
        resources["limits"] = {"nvidia.com/gpu": str(rng.choice((1, 2, 8)))}
    container = {"name": "c", "image": PAUSE_IMAGE, "resources": resources}
    spec: dict[str, Any] = {"containers": [container], "automountServiceAccountToken": False}
    if rng.random() < 0.15:
        spec["initContainers"] = [
            {
                "name": "init",
                "image": PAUSE_IMAGE,
                "resources": {"limits": {"nvidia.com/gpu": "1"}} if rng.random() < 0.5 else {},
            }
        ]
    roll = rng.random()
    if roll < 0.1:
        spec["schedulerName"] = "someone-elses"
    elif roll < 0.2:
        spec["schedulerName"] = "default-scheduler"
    affinity = _affinity(rng)
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.2:
        spec["nodeSelector"] = dict(rng.choice(NODE_SELECTORS))
    if rng.random() < 0.15:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": rng.choice(
                    ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
                ),
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "x"}},
            }
        ]
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if rng.random() < 0.3:
        meta["annotations"] = {"note": "kept"}
    roll = rng.random()
    if roll < 0.5:
        kind = "DaemonSet" if roll < 0.08 else rng.choice(("ReplicaSet", "StatefulSet", "Job"))
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "name": "owner",
                "uid": str(uuid.UUID(int=rng.getrandbits(128))),
                "controller": True,
            }
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


# Keys a pod's own terms name, with the values they pick from: the instance types and
# karpenter.sh/nodepool meet the launch term's, so some products can match no node (the
# In lists share nothing, NotIn covers them, DoesNotExist against Exists), and a numeric
# key tries Gt and Lt, a value that is not an integer among them.
TERM_VALUES = {
    INSTANCE_TYPE_LABEL: (
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.48xlarge",
        "p5.4xlarge",
        "g5.12xlarge",
        "c5.xlarge",
    ),
    "karpenter.sh/nodepool": ("default", "gpu"),
    "zone-x": ("a", "b"),
    "schedpolicy.io/gpu-model": ("A100", "L4"),
    "disk": ("a",),
    "example.com/generation": ("1", "2", "3", "007", "abc"),
}


def _expression(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(sorted(TERM_VALUES))
    numeric = key == "example.com/generation"
    ops = ("Gt", "Lt", "In", "Exists") if numeric else ("In", "In", "NotIn", "Exists")
    op = rng.choice((*ops, "DoesNotExist"))
    if op in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": op}
    if op in ("Gt", "Lt"):
        return {"key": key, "operator": op, "values": [rng.choice(TERM_VALUES[key])]}
    values = rng.sample(TERM_VALUES[key], rng.randint(1, min(3, len(TERM_VALUES[key]))))
    return {"key": key, "operator": op, "values": values}


# A pod's nodeSelector: none mostly; else one that pins a GPU model (accepted or not), an
# instance type, too little memory, or a key no hint names.
NODE_SELECTORS: tuple[dict[str, str], ...] = (
    {"schedpolicy.io/gpu-model": "A100"},
    {"schedpolicy.io/gpu-model": "L4"},
    {INSTANCE_TYPE_LABEL: "p4d.24xlarge"},
    {"schedpolicy.io/gpu-memory-mib": "24576"},
    {"disk": "ssd"},
)


def _affinity(rng: random.Random) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.35:
        terms = []
        for _ in range(rng.randint(1, 2)):
            term: dict[str, Any] = {}
            if rng.random() < 0.8:
                term["matchExpressions"] = [
                    _expression(rng) for _ in range(1 if rng.random() < 0.6 else 2)
                ]
            if (not term and rng.random() < 0.8) or rng.random() < 0.3:
                name = rng.choice(("n1", "n2"))
                op = "In" if rng.random() < 0.7 else "NotIn"
                term["matchFields"] = [{"key": "metadata.name", "operator": op, "values": [name]}]
            terms.append(term)  # sometimes empty: it matches no node
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    if rng.random() < 0.4:
        node_affinity = affinity.setdefault("nodeAffinity", {})
        # Close to what a policy prefers, so that the check for "already there" is tested.
        preference: dict[str, Any] = {
            "matchExpressions": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
            ]
        }
        if rng.random() < 0.4:
            preference["matchFields"] = [
                {"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}
            ]
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.choice((50, 100)), "preference": preference}
        ]
    if rng.random() < 0.1:
        affinity["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                    },
                }
            ]
        }
    return affinity


# ---- shrinking ---------------------------------------------------------------------------


def _pod_candidates(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Pods one step simpler than `pod`: a label, an annotation, a field or a term gone."""
    out: list[dict[str, Any]] = []
    meta, spec = pod["metadata"], pod["spec"]
    for section in ("labels", "annotations"):
        for key in list(meta.get(section) or {}):
            smaller = copy.deepcopy(dict(pod))
            del smaller["metadata"][section][key]
            out.append(smaller)
    for key in ("ownerReferences",):
        if key in meta:
            smaller = copy.deepcopy(dict(pod))
            del smaller["metadata"][key]
            out.append(smaller)
    for key in (
        "initContainers",
        "affinity",
        "topologySpreadConstraints",
        "schedulerName",
        "nodeSelector",
    ):
        if key in spec:
            smaller = copy.deepcopy(dict(pod))
            del smaller["spec"][key]
            out.append(smaller)
    if (spec["containers"][0].get("resources") or {}).get("limits"):
        smaller = copy.deepcopy(dict(pod))
        del smaller["spec"]["containers"][0]["resources"]["limits"]
        out.append(smaller)
    return out


def _spec_candidates(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in list(spec.get("placement") or {}):
        smaller = copy.deepcopy(dict(spec))
        del smaller["placement"][key]
        out.append(smaller)
    for key in ("podSelector", "nodeLabels"):
        if key in spec:
            smaller = copy.deepcopy(dict(spec))
            del smaller[key]
            out.append(smaller)
    return out


async def shrink(
    pod: dict[str, Any],
    specs: dict[str, dict[str, Any]],
    still_fails: Callable[[dict[str, Any], dict[str, dict[str, Any]]], Any],
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Greedy: drop policies, then simplify the policies and the pod, while it fails.
    `still_fails(pod, specs)` is awaited and says whether the mismatch remains.

    Each try reinstalls the compiled policies, so policies go by halves first (a mismatch
    usually needs one or two of them), and one at a time only after that."""
    while len(specs) > 1:
        names = sorted(specs)
        halves = (names[: len(names) // 2], names[len(names) // 2 :])
        for half in halves:
            trial = {n: specs[n] for n in half}
            if await still_fails(pod, trial):
                specs = trial
                break
        else:
            break
    changed = True
    while changed:
        changed = False
        for name in list(specs):
            fewer = {k: v for k, v in specs.items() if k != name}
            if fewer and await still_fails(pod, fewer):
                specs, changed = fewer, True
                break
        if changed:
            continue
        for name, spec in specs.items():
            for candidate in _spec_candidates(spec):
                trial = {**specs, name: candidate}
                try:
                    SchedulingPolicySpec.model_validate(candidate)
                except ValueError:
                    continue
                if await still_fails(pod, trial):
                    specs, changed = trial, True
                    break
            if changed:
                break
        if changed:
            continue
        for candidate in _pod_candidates(pod):
            if await still_fails(candidate, specs):
                pod, changed = candidate, True
                break
    return pod, specs
