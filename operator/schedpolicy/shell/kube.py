"""The only module that talks to the Kubernetes API.

Credentials come from kubernetes_asyncio: an explicit kubeconfig, $KUBECONFIG,
~/.kube/config, or the in-cluster service account, in that order. Kopf gets the
same credentials through `connection_info`, so the operator and our own writes
always act as one identity.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf
from kubernetes_asyncio import client, config
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from schedpolicy import __version__
from schedpolicy.core import api, timestamps
from schedpolicy.core.wellknown import COST_ANNOTATION, FIELD_MANAGER


@dataclass(frozen=True)
class Credentials:
    """Where to find the cluster; both fields None means the kubeconfig defaults."""

    kubeconfig: str | None = None
    context: str | None = None


def _in_cluster(creds: Credentials) -> bool:
    explicit = creds.kubeconfig or os.environ.get("KUBECONFIG")
    return not explicit and "KUBERNETES_SERVICE_HOST" in os.environ


async def load_configuration(creds: Credentials) -> client.Configuration:
    cfg = client.Configuration()
    if _in_cluster(creds):
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(
            config_file=creds.kubeconfig,
            context=creds.context,
            client_configuration=cfg,
            persist_config=False,
        )
    return cfg


def connection_info(cfg: client.Configuration) -> kopf.ConnectionInfo:
    """Translate a kubernetes_asyncio configuration into kopf's connection info."""
    bearer = cfg.api_key.get("BearerToken") or cfg.api_key.get("authorization")
    token = bearer.split(" ", 1)[1] if bearer and bearer.startswith("Bearer ") else bearer
    return kopf.ConnectionInfo(
        server=cfg.host or "",
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        token=token,
        username=cfg.username or None,
        password=cfg.password or None,
    )


EVENT_NAMESPACE = "default"  # where Events about cluster-scoped objects live


@dataclass(frozen=True)
class ObjectRef:
    """Enough of an object to hang an Event on it."""

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str | None = None


def pointer(*parts: str) -> str:
    """A JSON Pointer (RFC 6901) from unescaped path segments."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def cost_patch(
    uid: str, value: str, *, has_annotations: bool, resource_version: str | None = None
) -> list[dict[str, Any]]:
    """Set the deletion cost, but only on the pod with this UID.

    The `test` makes the apiserver refuse the patch (422) if the name now belongs
    to a different pod, so a cost computed for one pod never lands on another.
    A JSON Patch `add` below /metadata/annotations fails when the map is absent,
    so then the whole map is added instead; that would replace any annotation
    added since we looked, so with a resourceVersion it also tests that the pod
    is still the version we saw (a 422 otherwise, and the watch brings the news).
    """
    guard = [{"op": "test", "path": "/metadata/uid", "value": uid}]
    if has_annotations:
        return [
            *guard,
            {
                "op": "add",
                "path": pointer("metadata", "annotations", COST_ANNOTATION),
                "value": value,
            },
        ]
    if resource_version:
        guard.append({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version})
    return [
        *guard,
        {"op": "add", "path": "/metadata/annotations", "value": {COST_ANNOTATION: value}},
    ]


def cost_removal_patch(uid: str, expected: str) -> list[dict[str, Any]]:
    """Remove our cost, only if the pod and the value are still the ones we know."""
    path = pointer("metadata", "annotations", COST_ANNOTATION)
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": path, "value": expected},
        {"op": "remove", "path": path},
    ]


class Kube:
    """Every write the operator makes goes through here.

    Requests go through `ApiClient.call_api` with explicit paths and content types:
    the generated per-resource methods guess the patch type from the body's Python
    type and deserialize every response into model objects, which costs time on
    the hot path and hides what is sent.
    """

    def __init__(self, api: client.ApiClient, instance: str) -> None:
        self.api = api
        self.instance = instance
        # The audit log records the user agent: it tells replicas apart, which all share
        # one ServiceAccount.
        api.user_agent = f"schedpolicy/{__version__} ({instance})"
        # kubernetes_asyncio's session trusts the environment, so aiohttp looks up ~/.netrc
        # in a worker thread on every request: a thread hop per pod patch. The apiserver
        # address and credentials come from the kubeconfig (and its proxy-url), never
        # from the environment, so turn that off.
        session = api.rest_client.pool_manager
        if hasattr(session, "_trust_env"):
            session._trust_env = False

    @classmethod
    async def connect(cls, creds: Credentials, instance: str) -> Kube:
        return cls(client.ApiClient(configuration=await load_configuration(creds)), instance)

    async def close(self) -> None:
        await self.api.close()

    def lease_lock(self, name: str, namespace: str, identity: str) -> LeaseLock:
        """The leader-election Lease (read and replaced with optimistic concurrency)."""
        return LeaseLock(name, namespace, identity, self.api)

    async def _send(
        self, method: str, path: str, body: Any, content_type: str = "application/json"
    ) -> dict[str, Any]:
        result = await self.api.call_api(
            path,
            method,
            query_params=[("fieldManager", FIELD_MANAGER)],
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            response_types_map={200: "object", 201: "object"},
            _return_http_data_only=True,
        )
        return dict(result or {})

    async def get(self, path: str, query: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        """A read, as plain JSON (for explain and simulate, and the sync barrier)."""
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
            result = await self.api.call_api(
                path,
                "GET",
                query_params=query,
                header_params={
                    "Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
                },
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

    async def patch_pod(
        self, namespace: str, name: str, patch: list[dict[str, Any]]
    ) -> dict[str, Any]:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        return await self._send("PATCH", path, patch, "application/json-patch+json")

    async def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._send(
            "PATCH", f"/api/v1/nodes/{name}", patch, "application/merge-patch+json"
        )

    async def patch_policy_status(self, name: str, status: dict[str, Any]) -> None:
        path = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}/{name}/status"
        await self._send("PATCH", path, {"status": status}, "application/merge-patch+json")

    async def emit_event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
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
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self._send("POST", f"/api/v1/namespaces/{namespace}/events", event)
