"""The only module that talks to the Kubernetes API, and the one writer.

Every write is an intent (`set_pod_cost`, `apply_node_labels`, ...) that sends the guarded
patch its capability builds (core/deletion_cost/patches.py, core/gpu/patches.py) with
`fieldManager=schedpolicy`. A refusal comes back as one of the typed errors of
kube_errors.py, mapped from the HTTP status here and nowhere else. Credentials are
credentials.py's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from schedpolicy import __version__
from schedpolicy.core import api, timestamps
from schedpolicy.core.deletion_cost.patches import cost_patch, cost_removal_patch
from schedpolicy.core.gpu import label_rules as gpu
from schedpolicy.core.gpu.patches import node_label_patch
from schedpolicy.core.placement import routing as admission_routing
from schedpolicy.core.placement.compiler import DIGEST_ANNOTATION, MANAGED_BY, Compiled
from schedpolicy.core.wellknown import FIELD_MANAGER
from schedpolicy.shell.credentials import Credentials, load_configuration
from schedpolicy.shell.kube_errors import (
    Gone,
    Transient,
    classify,
)

# A JSON Patch's `test` operations fail with 422; so does an invalid patch of any kind,
# but ours are built here and hold nothing a user wrote.
_JSON_PATCH_PRECONDITIONS = frozenset({409, 422})


def _why(err: ApiException) -> str:
    """The reason, with the Status message when the body has one: that is where the
    apiserver says which rule refused (RBAC, an admission policy and its message)."""
    reason = str(err.reason)
    try:
        message = json.loads(err.body or "{}").get("message")
    except (ValueError, AttributeError, TypeError):
        message = None
    return f"{reason}: {message}" if message else reason


@contextmanager
def _typed_errors(preconditions: frozenset[int] = frozenset({409})) -> Iterator[None]:
    try:
        yield
    except ApiException as err:
        raise classify(int(err.status or 0), _why(err), preconditions) from err
    except (aiohttp.ClientError, OSError, TimeoutError) as err:
        raise Transient(0, type(err).__name__) from err


EVENT_NAMESPACE = "default"  # where Events about cluster-scoped objects live


@dataclass(frozen=True)
class ObjectRef:
    """Enough of an object to hang an Event on it."""

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str | None = None


def _version(stored: dict[str, Any]) -> str:
    return str((stored.get("metadata") or {}).get("resourceVersion", ""))


_ADMISSION = "/apis/admissionregistration.k8s.io/v1"
_ADMISSION_POLICIES = f"{_ADMISSION}/mutatingadmissionpolicies"
_ADMISSION_BINDINGS = f"{_ADMISSION}/mutatingadmissionpolicybindings"
_WEBHOOK_CONFIGURATIONS = f"{_ADMISSION}/mutatingwebhookconfigurations"
OWNED_SELECTOR = "=".join(MANAGED_BY)
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


class _FieldManaged:
    """kubernetes_asyncio's Lease client, with our field manager on its two writes."""

    def __init__(self, inner: client.CoordinationV1Api) -> None:
        self._inner = inner

    async def read_namespaced_lease(self, name: str, namespace: str) -> client.V1Lease:
        return await self._inner.read_namespaced_lease(name, namespace)

    async def create_namespaced_lease(self, namespace: str, body: Any, **kw: Any) -> Any:
        return await self._inner.create_namespaced_lease(
            namespace, body, field_manager=FIELD_MANAGER, **kw
        )

    async def replace_namespaced_lease(self, name: str, namespace: str, body: Any) -> Any:
        return await self._inner.replace_namespaced_lease(
            name=name, namespace=namespace, body=body, field_manager=FIELD_MANAGER
        )


class Kube:
    """Every write the operator makes goes through here.

    Requests go through `ApiClient.call_api` with explicit paths and content types:
    the generated per-resource methods guess the patch type from the body's Python
    type and deserialize every response into model objects, which costs time on
    the hot path and hides what is sent.
    """

    def __init__(self, api: client.ApiClient, identity: str) -> None:
        self.api = api
        self.identity = identity
        # The audit log records the user agent: it tells replicas apart, which all share
        # one ServiceAccount.
        api.user_agent = f"schedpolicy/{__version__} ({identity})"
        # kubernetes_asyncio's session trusts the environment, so aiohttp looks up ~/.netrc
        # in a worker thread on every request: a thread hop per pod patch. The apiserver
        # address and credentials come from the kubeconfig (and its proxy-url), never
        # from the environment, so turn that off.
        session = api.rest_client.pool_manager
        if hasattr(session, "_trust_env"):
            session._trust_env = False

    @classmethod
    async def connect(cls, creds: Credentials, identity: str) -> Kube:
        return cls(client.ApiClient(configuration=await load_configuration(creds)), identity)

    async def close(self) -> None:
        await self.api.close()

    def lease_lock(self, name: str, namespace: str, identity: str) -> LeaseLock:
        """The leader-election Lease (read and replaced with optimistic concurrency), written
        with our field manager like every other write."""
        lock = LeaseLock(name, namespace, identity, self.api)
        lock.api_instance = _FieldManaged(lock.api_instance)  # type: ignore[assignment]
        return lock

    async def release_lease(self, name: str, namespace: str, identity: str) -> bool:
        """Hands the Lease back on shutdown, as client-go's ReleaseOnCancel does: with no
        holder, the next candidate takes it at its next retry instead of waiting out the
        lease. Only if this identity still holds it; the replace carries the resourceVersion
        it read, so a concurrent takeover wins."""
        leases = client.CoordinationV1Api(self.api)
        with _typed_errors():
            lease = await leases.read_namespaced_lease(name, namespace)
            if lease.spec is None or lease.spec.holder_identity != identity:
                return False
            lease.spec.holder_identity = ""
            lease.spec.lease_duration_seconds = 1
            await leases.replace_namespaced_lease(
                name=name, namespace=namespace, body=lease, field_manager=FIELD_MANAGER
            )
        return True

    async def _send(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str = "application/json",
        preconditions: frozenset[int] = frozenset({409}),
        query: tuple[tuple[str, str], ...] = (),
    ) -> dict[str, Any]:
        with _typed_errors(preconditions):
            result = await self.api.call_api(
                path,
                method,
                query_params=[("fieldManager", FIELD_MANAGER), *query],
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                response_types_map={200: "object", 201: "object"},
                _return_http_data_only=True,
            )
        return dict(result or {})

    async def review(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        """Creates a TokenReview or a SubjectAccessReview: the apiserver answers in the
        returned status and stores nothing."""
        group = "authentication.k8s.io" if kind == "tokenreviews" else "authorization.k8s.io"
        return await self._send("POST", f"/apis/{group}/v1/{kind}", body)

    async def get(self, path: str, query: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        """A read, as plain JSON (for explain and simulate, and the sync barrier)."""
        with _typed_errors():
            result = await self.api.call_api(
                path,
                "GET",
                query_params=query or [],
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                response_types_map={200: "object"},
                _return_http_data_only=True,
            )
        return dict(result or {})

    async def items(self, path: str, **query: str) -> list[dict[str, Any]]:
        return list((await self.get(path, list(query.items()))).get("items") or [])

    async def list_uids(self, path: str, page: int = 500) -> set[str]:
        """UIDs of every object at a collection path, read as metadata only, page by page,
        so that even a large cluster costs little memory."""
        uids: set[str] = set()
        token = ""
        while True:
            query = [("limit", str(page))] + ([("continue", token)] if token else [])
            with _typed_errors():
                result = await self.api.call_api(
                    path,
                    "GET",
                    query_params=query,
                    header_params={"Accept": _METADATA_LIST},
                    auth_settings=["BearerToken"],
                    response_types_map={200: "object"},
                    _return_http_data_only=True,
                )
            uids.update(str(item["metadata"]["uid"]) for item in result.get("items") or [])
            token = (result.get("metadata") or {}).get("continue") or ""
            if not token:
                return uids

    async def open_stream(
        self, path: str, query: list[tuple[str, str]], accept: str, read_timeout: float
    ) -> aiohttp.ClientResponse:
        """A GET whose body is read by the caller as it arrives (a watch, or a list page
        decoded straight from bytes). The caller checks the status and releases it."""
        response = await self.api.call_api(
            path,
            "GET",
            query_params=query,
            header_params={"Accept": accept},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(sock_connect=30, sock_read=read_timeout),
        )
        return response  # type: ignore[no-any-return]

    async def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> str:
        """Send a JSON Patch to a pod; the resourceVersion it produced. The intents below
        build the patches; the benchmarks' baselines send the same ones through here."""
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        return _version(
            await self._send(
                "PATCH", path, patch, "application/json-patch+json", _JSON_PATCH_PRECONDITIONS
            )
        )

    async def set_pod_cost(
        self,
        namespace: str,
        name: str,
        uid: str,
        value: str | None,
        *,
        has_annotations: bool,
        resource_version: str | None = None,
        karpenter: str | None = None,
    ) -> str:
        """Our cost on this very pod (see `cost_patch`); the resourceVersion it produced."""
        patch = cost_patch(
            uid,
            value,
            has_annotations=has_annotations,
            resource_version=resource_version,
            karpenter=karpenter,
        )
        return await self.patch_pod(namespace, name, patch)

    async def remove_pod_cost(
        self, namespace: str, name: str, uid: str, expected: str, karpenter: str | None = None
    ) -> str:
        """Remove our cost, only while the pod still carries the value we wrote."""
        return await self.patch_pod(namespace, name, cost_removal_patch(uid, expected, karpenter))

    async def apply_node_labels(self, name: str, uid: str, plan: gpu.LabelPlan) -> str:
        """Set and remove labels on this very node (see `node_label_patch`)."""
        path = f"/api/v1/nodes/{name}"
        patch = node_label_patch(uid, plan)
        return _version(await self._send("PATCH", path, patch, "application/merge-patch+json"))

    async def patch_policy_status(self, name: str, status: dict[str, Any]) -> None:
        path = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}/{name}/status"
        await self._send("PATCH", path, {"status": status}, "application/merge-patch+json")

    async def post_event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        now = timestamps.render(datetime.now(UTC))
        namespace = ref.namespace or EVENT_NAMESPACE
        involved = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "name": ref.name,
            "uid": ref.uid,
        }
        if ref.namespace:
            involved["namespace"] = ref.namespace
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{ref.name}.", "namespace": namespace},
            "involvedObject": involved,
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "reportingInstance": self.identity,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self._send("POST", f"/api/v1/namespaces/{namespace}/events", event)


class AdmissionObjects:
    """Our MutatingAdmissionPolicies, their bindings, and the webhook's match condition
    (core/admission_routing.py decides what they should be)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def stored_admission_policies(self) -> admission_routing.Stored:
        """Our MutatingAdmissionPolicies and bindings, with the digest each was compiled to.
        Gone (404) when the apiserver does not serve the API."""

        async def digests(path: str) -> dict[str, str]:
            listed = await self.kube.items(path, labelSelector=OWNED_SELECTOR)
            return {
                str(o["metadata"]["name"]): str(
                    (o["metadata"].get("annotations") or {}).get(DIGEST_ANNOTATION, "")
                )
                for o in listed
            }

        return admission_routing.Stored(
            await digests(_ADMISSION_POLICIES), await digests(_ADMISSION_BINDINGS)
        )

    async def apply_admission_policy(self, compiled: Compiled) -> None:
        """Server-side apply of the policy, then of its binding: a binding is written only
        for a policy the apiserver took. Refused carries the apiserver's message."""
        for path, body in (
            (_ADMISSION_POLICIES, compiled.body),
            (_ADMISSION_BINDINGS, compiled.binding),
        ):
            await self.kube._send(
                "PATCH",
                f"{path}/{compiled.name}",
                dict(body),
                "application/apply-patch+yaml",
                query=(("force", "true"),),
            )

    async def delete_admission_policy(self, name: str) -> None:
        """The binding first, so that no binding points at a missing policy."""
        for path in (_ADMISSION_BINDINGS, _ADMISSION_POLICIES):
            with suppress(Gone):
                await self.kube._send("DELETE", f"{path}/{name}", None)

    async def webhook_match_conditions(
        self, configuration: str, webhook: str
    ) -> tuple[int, list[dict[str, str]], str] | None:
        """Where our webhook sits in its configuration, its matchConditions, and the
        configuration's UID; None when the configuration or the webhook is not there."""
        try:
            stored = await self.kube.get(f"{_WEBHOOK_CONFIGURATIONS}/{configuration}")
        except Gone:
            return None
        for index, entry in enumerate(stored.get("webhooks") or []):
            if entry.get("name") == webhook:
                uid = str(stored["metadata"]["uid"])
                return index, list(entry.get("matchConditions") or []), uid
        return None

    async def set_webhook_match_conditions(
        self, configuration: str, webhook: str, index: int, conditions: list[dict[str, str]]
    ) -> None:
        """Only the matchConditions of the webhook at `index`, tested to still be that one."""
        at = f"/webhooks/{index}"
        patch = [
            {"op": "test", "path": f"{at}/name", "value": webhook},
            {"op": "add", "path": f"{at}/matchConditions", "value": conditions},
        ]
        await self.kube._send(
            "PATCH",
            f"{_WEBHOOK_CONFIGURATIONS}/{configuration}",
            patch,
            "application/json-patch+json",
            _JSON_PATCH_PRECONDITIONS,
        )
