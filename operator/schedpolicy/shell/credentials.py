"""Where the cluster is, and who we are in it: an explicit kubeconfig, $KUBECONFIG,
~/.kube/config, or the in-cluster service account, in that order. Kopf gets the same
credentials through `connection_info`, so the operator and our own writes always act as one
identity."""

from __future__ import annotations

import os
from dataclasses import dataclass

import kopf
from kubernetes_asyncio import client, config


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
