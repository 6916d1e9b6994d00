"""The `schedpolicy` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
import uuid
from collections.abc import Sequence
from typing import Any

import kopf
import yaml
from kubernetes_asyncio.config import ConfigException

from schedpolicy import __version__
from schedpolicy.app.settings import RunConfig
from schedpolicy.core.gpu import label_rules as gpu
from schedpolicy.core.memory_pressure import NEAR
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.leadership import LeaseSettings
from schedpolicy.shell.placement.admission_sync import AdmissionSettings
from schedpolicy.shell.secure_metrics import MetricsServing


def _add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        help="path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    parser.add_argument("--context", help="kubeconfig context to use")


def _add_metrics_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port", type=int, default=8443, help="port of /metrics (0 disables it)"
    )
    parser.add_argument("--metrics-address", default="0.0.0.0", help="address /metrics listens on")
    parser.add_argument(
        "--metrics-cert",
        help="PEM certificate of /metrics (default: a self-signed one made at start)",
    )
    parser.add_argument("--metrics-key", help="PEM private key of --metrics-cert")
    parser.add_argument(
        "--metrics-insecure",
        action="store_true",
        help="serve /metrics as plain HTTP to anyone, instead of HTTPS to callers the"
        " apiserver allows GET on /metrics (TokenReview, SubjectAccessReview)",
    )


def _metrics(args: argparse.Namespace) -> MetricsServing:
    if bool(args.metrics_cert) != bool(args.metrics_key):
        raise SystemExit("schedpolicy: --metrics-cert and --metrics-key go together")
    return MetricsServing(
        port=args.metrics_port,
        address=args.metrics_address,
        secure=not args.metrics_insecure,
        cert=args.metrics_cert,
        key=args.metrics_key,
    )


def _admitted(raw: str) -> frozenset[str]:
    try:
        return gpu.parse_admitted(raw)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="schedpolicy",
        description="Keeps pod-deletion-cost, GPU node labels and placement hints"
        " in line with SchedulingPolicy objects.",
    )
    parser.add_argument("--version", action="version", version=f"schedpolicy {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run the operator")
    _add_cluster_flags(run)
    run.add_argument(
        "--heartbeat-seconds", type=float, default=60.0, help="interval of the heartbeat log line"
    )
    _add_metrics_flags(run)
    run.add_argument(
        "--write-concurrency",
        type=int,
        default=16,
        help="pod patches in flight at once",
    )
    run.add_argument(
        "--pending-threshold-seconds",
        type=float,
        default=60.0,
        help="a pod unscheduled on a policy's scheduler this long is reported",
    )
    run.add_argument(
        "--memory-near-ratio",
        type=_ratio,
        default=NEAR,
        help="warn when resident memory reaches this share of the cgroup's memory limit",
    )
    run.add_argument(
        "--admitted-label-prefixes",
        type=_admitted,
        metavar="PREFIX[,PREFIX...]",
        help="the node label prefixes the admission guard lets this controller write; a"
        " policy with another labelPrefix is reported Degraded and its labels are not"
        " written (default: write, and let the apiserver judge)",
    )
    run.add_argument(
        "--admission-mode",
        choices=["webhook", "policy"],
        default="webhook",
        help="policy: compile each placement policy to a MutatingAdmissionPolicy where the"
        " apiserver serves admissionregistration.k8s.io/v1, and call the webhook only for the"
        " rest; webhook: the webhook serves every policy",
    )
    run.add_argument(
        "--webhook-configuration",
        metavar="NAME",
        help="the MutatingWebhookConfiguration whose match condition policy mode narrows",
    )
    run.add_argument(
        "--exclude-namespace",
        action="append",
        default=[],
        help="compiled policies never hint pods here (repeatable; as the webhook's flag)",
    )
    run.add_argument(
        "--leader-elect",
        action="store_true",
        help="write only while holding a Lease (run several replicas for HA)",
    )
    run.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", "default"),
        help="namespace of the Lease (default: $POD_NAMESPACE)",
    )
    run.add_argument("--leader-election-id", default="schedpolicy", help="name of the Lease")
    run.add_argument("--lease-duration", type=float, default=15.0, help="seconds")
    run.add_argument("--renew-deadline", type=float, default=10.0, help="seconds")
    run.add_argument("--retry-period", type=float, default=2.0, help="seconds")
    run.add_argument(
        "--liveness-port",
        type=int,
        default=0,
        help="serve /healthz and /readyz on this port (0: off)",
    )
    run.add_argument("--log-format", choices=["text", "json"], default="text")
    run.add_argument("-v", "--verbose", action="store_true", help="log at debug level")

    hook = sub.add_parser("webhook", help="serve the admission webhook (placement hints)")
    _add_cluster_flags(hook)
    hook.add_argument("--port", type=int, default=8443, help="HTTPS port of /hints")
    hook.add_argument("--address", default="0.0.0.0", help="address /hints listens on")
    hook.add_argument("--cert", help="PEM certificate to serve (without it: plain HTTP)")
    hook.add_argument("--key", help="PEM private key of --cert")
    hook.add_argument(
        "--exclude-namespace",
        action="append",
        default=[],
        help="never hint pods in this namespace (repeatable; kube-system, $POD_NAMESPACE always)",
    )
    _add_metrics_flags(hook)
    hook.add_argument(
        "--health-port", type=int, default=0, help="serve /healthz and /readyz here (0: off)"
    )
    hook.add_argument(
        "--shutdown-delay",
        type=float,
        default=0.0,
        help="seconds to keep serving after SIGTERM, unready, while the endpoint is removed",
    )
    hook.add_argument("--log-format", choices=["text", "json"], default="text")
    hook.add_argument("-v", "--verbose", action="store_true", help="log at debug level")

    sub.add_parser("crd", help="print the SchedulingPolicy CustomResourceDefinition (YAML)")

    explain = sub.add_parser("explain", help="why a pod has its cost, or a node its GPU labels")
    explain_kind = explain.add_subparsers(dest="kind", metavar="KIND", required=True)
    pod = explain_kind.add_parser("pod", help="explain a pod's deletion cost and hints")
    pod.add_argument("ref", metavar="NAMESPACE/NAME")
    node = explain_kind.add_parser("node", help="explain a node's GPU labels")
    node.add_argument("ref", metavar="NAME")
    for p in (pod, node):
        _add_cluster_flags(p)
        _add_output_flag(p)

    simulate = sub.add_parser("simulate", help="predict what the ReplicaSet controller would do")
    what = simulate.add_subparsers(dest="what", metavar="WHAT", required=True)
    scale = what.add_parser("scale-down", help="which replicas a scale-down removes, in order")
    scale.add_argument("kind", choices=["deployment"])
    scale.add_argument("ref", metavar="NAMESPACE/NAME")
    scale.add_argument("--replicas", type=int, required=True, help="the replica count to scale to")
    _add_cluster_flags(scale)
    _add_output_flag(scale)
    return parser


def _add_output_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")


def _inspect(args: argparse.Namespace) -> int:
    from schedpolicy.app import explain

    async def fetch() -> dict[str, Any]:
        kube = await Kube.connect(
            Credentials(kubeconfig=args.kubeconfig, context=args.context), "cli"
        )
        try:
            if args.command == "simulate":
                return await explain.simulate_scale_down(kube, args.ref, args.replicas)
            if args.kind == "pod":
                return await explain.explain_pod(kube, args.ref)
            return await explain.explain_node(kube, args.ref)
        finally:
            await kube.close()

    try:
        out = asyncio.run(fetch())
    except explain.ExplainError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except (OSError, ConfigException) as err:
        print(f"error: cannot reach the cluster: {err}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(out, indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(out, sort_keys=False), end="")
    elif args.command == "simulate":
        print(explain.render_simulation(out))
    elif args.kind == "pod":
        print(explain.render_pod(out))
    else:
        print(explain.render_node(out))
    return 0


def _excluded(extra: list[str]) -> tuple[str, ...]:
    own = os.environ.get("POD_NAMESPACE")
    return tuple(sorted({"kube-system", *extra, *([own] if own else [])}))


def _lease(args: argparse.Namespace, identity: str) -> LeaseSettings | None:
    if not args.leader_elect:
        return None
    return LeaseSettings(
        name=args.leader_election_id,
        namespace=args.leader_election_namespace,
        identity=identity,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )


def _ratio(raw: str) -> float:
    value = float(raw)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{raw} is not a share in (0, 1]")
    return value


def _identity() -> str:
    """Unique per process, so the Lease and the audit log tell replicas apart."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _configure_logging(args: argparse.Namespace) -> None:
    log_format = kopf.LogFormat.JSON if args.log_format == "json" else kopf.LogFormat.FULL
    kopf.configure(verbose=args.verbose, log_format=log_format)
    logging.getLogger("schedpolicy").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    # The API client logs every response body at debug level; never wanted, even with -v.
    logging.getLogger("kubernetes_asyncio").setLevel(logging.INFO)


def _run(args: argparse.Namespace) -> int:
    _configure_logging(args)
    # Kopf logs every successful handler call; with an event per pod change that is
    # the bulk of all output and a measurable cost on large clusters.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    identity = _identity()
    cfg = RunConfig(
        credentials=Credentials(kubeconfig=args.kubeconfig, context=args.context),
        heartbeat_seconds=args.heartbeat_seconds,
        metrics=_metrics(args),
        write_concurrency=args.write_concurrency,
        pending_threshold_seconds=args.pending_threshold_seconds,
        memory_near_ratio=args.memory_near_ratio,
        lease=_lease(args, identity),
        identity=identity,
        liveness_port=args.liveness_port,
        admitted_label_prefixes=args.admitted_label_prefixes,
        admission=AdmissionSettings(
            mode=args.admission_mode,
            excluded_namespaces=_excluded(args.exclude_namespace),
            webhook_configuration=args.webhook_configuration,
        ),
    )
    from schedpolicy.app.runtime import run

    asyncio.run(run(cfg))
    return 0


def _webhook(args: argparse.Namespace) -> int:
    from schedpolicy.app.webhook import WebhookConfig, serve

    _configure_logging(args)
    cfg = WebhookConfig(
        credentials=Credentials(kubeconfig=args.kubeconfig, context=args.context),
        port=args.port,
        address=args.address,
        cert=args.cert,
        key=args.key,
        exclude_namespaces=_excluded(args.exclude_namespace),
        metrics=_metrics(args),
        health_port=args.health_port,
        shutdown_delay=args.shutdown_delay,
        identity=_identity(),
    )

    async def until_signalled() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(cfg, stop)

    asyncio.run(until_signalled())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(args)
    if args.command == "webhook":
        return _webhook(args)
    if args.command in ("explain", "simulate"):
        return _inspect(args)
    if args.command == "crd":
        from schedpolicy.core.policy.crd import render

        sys.stdout.write(render())
        return 0
    parser.print_help(sys.stderr)
    return 2
