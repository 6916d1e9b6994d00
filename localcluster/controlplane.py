"""A real Kubernetes control plane on loopback: etcd, kube-apiserver (RBAC on),
kube-controller-manager, kube-scheduler and a KWOK controller for fake nodes.

Every component is the upstream binary built by `make tools`; nothing is mocked.
State lives in a work directory: pki/, etcd/, logs/ (one log per process, plus
the apiserver audit log), pids/, kubeconfig and state.json.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from localcluster import binaries, chart, hostnet, karpenter, topology
from localcluster.node import NAME as NODE_NAME
from localcluster.node import RealNode
from localcluster.operator_process import controller_argv
from localcluster.pki import Authority, KeyPair, service_account_keys
from localcluster.ports import free_port
from localcluster.supervisor import Supervisor
from localcluster.webhook import LoopbackWebhook

STAGES_DIR = Path(__file__).with_name("stages")
DEFAULT_WORKDIR = binaries.REPO / ".cluster" / "local"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "127.66.0.0/16"
STOP_ORDER = [
    "schedpolicy-operator",
    "kube-proxy",
    "kubelet",
    "containerd",
    "karpenter",
    "kwok",
    "schedpolicy-scheduler",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "apiserver-forwarder",
    "etcd",
]

CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "daemonset-controller",
    "job-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "pod-garbage-collector-controller",
    "disruption-controller",
    # Makes a pod's ResourceClaims from its ResourceClaimTemplates (DRA), and deletes them
    # with the pod.
    "resourceclaim-controller",
    # Removes the node.kubernetes.io/not-ready taint that every new node starts with,
    # once KWOK reports it Ready (and would taint it again if KWOK stopped renewing
    # its Lease, as for a dead kubelet).
    "node-lifecycle-controller",
)
# Only with a real node: Services need endpoints there (kube-proxy, and the apiserver's own
# routing to webhooks), and nowhere else would they do anything but watch every pod.
NODE_CONTROLLERS = ("endpoints-controller", "endpointslice-controller")

# Writes are logged (with the request body for pod and node patches, so tests can
# see exactly what was sent); reads and the fake nodes' lease renewals are not.
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "None", "namespaces": ["kube-node-lease"]},
        {"level": "None", "users": ["system:apiserver"]},
        {
            "level": "Request",
            "verbs": ["patch", "update"],
            "resources": [{"group": "", "resources": ["pods", "nodes"]}],
        },
        {"level": "Metadata"},
    ],
}


def kubectl_input(objects: Iterable[Mapping[str, Any]]) -> str:
    """Objects as a stream of JSON documents. Not YAML: PyYAML leaves a string such as
    `1234e5` (a random hex tag) unquoted, and kubectl's YAML reader takes it for a number.
    Not one `List` either: kubectl validates a List's items on the client, with messages
    that no longer name the field the way the apiserver does."""
    return "\n".join(json.dumps(o) for o in objects) + "\n"


class ClusterError(RuntimeError):
    pass


@dataclass
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    secondary_scheduler: int

    @classmethod
    def allocate(cls) -> Ports:
        ports: set[int] = set()
        while len(ports) < 7:
            ports.add(free_port())
        return cls(*sorted(ports))


def _kubeconfig(server: str, ca: Path, client: KeyPair, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
            }
        ],
        "contexts": [{"name": "schedpolicy-local", "context": {"cluster": "local", "user": user}}],
        "current-context": "schedpolicy-local",
    }


class LocalCluster:
    def __init__(self, workdir: Path = DEFAULT_WORKDIR) -> None:
        self.workdir = workdir.resolve()
        self.pki = self.workdir / "pki"
        self.kubeconfig = self.workdir / "kubeconfig"
        self.operator_kubeconfig = self.workdir / "schedpolicy-operator.kubeconfig"
        self.webhook_kubeconfig = self.workdir / "schedpolicy-webhook.kubeconfig"
        self.audit_log = self.workdir / "logs" / "audit.log"
        self.state_file = self.workdir / "state.json"
        self.supervisor = Supervisor(self.workdir)
        self.node = RealNode(self.workdir, self.supervisor)

    # ---- queries -------------------------------------------------------------------------

    @property
    def ports(self) -> Ports:
        return Ports(**json.loads(self.state_file.read_text())["ports"])

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def healthy(self) -> bool:
        if not self.state_file.exists():
            return False
        if any(not r.alive() for r in self.supervisor.records()):
            return False
        return self._http_ok(f"{self.server}/readyz", self.ssl_context())

    def serves_admission_policies(self) -> bool:
        """Whether this apiserver serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
        (on by default from Kubernetes 1.36)."""
        resources = self.kubectl("api-resources", "--api-group=admissionregistration.k8s.io")
        return any(
            line.split()[0] == "mutatingadmissionpolicies" and "/v1 " in f"{line} "
            for line in resources.splitlines()[1:]
            if line.split()
        )

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        objects: Iterable[Mapping[str, Any]] | None = None,
        check: bool = True,
        timeout: float = 120,
    ) -> str:
        """Run kubectl against this cluster; `objects` are sent as its `-f -` input."""
        if objects is not None:
            input = kubectl_input(objects)
        proc = subprocess.run(
            [str(binaries.path("kubectl")), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def logs(self) -> list[Path]:
        return sorted((self.workdir / "logs").glob("*.log"))

    # ---- lifecycle ----------------------------------------------------------------------

    @property
    def real_node(self) -> bool:
        return bool(
            self.state_file.exists() and json.loads(self.state_file.read_text()).get("real_node")
        )

    def up(
        self,
        nodes: Iterable[topology.FakeNode] | None = None,
        timeout: float = 120,
        *,
        real_node: bool = False,
        karpenter_options: karpenter.KarpenterOptions | None = None,
    ) -> None:
        """Start the control plane. With `real_node`, also a kubelet node (containerd,
        kube-proxy, CNI bridge) that runs the images `make image` built; the chart is then
        installed with helm instead of this harness running its parts as local processes.
        With `karpenter_options`, also Karpenter's KWOK provider and its NodePools."""
        lacking = binaries.missing()
        checked = None
        if karpenter_options is not None:
            # Refused before anything starts: nothing is written for bad input.
            checked = karpenter.manifests(karpenter_options)
        if lacking:
            raise ClusterError(
                f"missing binaries in {binaries.bin_dir()}: {', '.join(lacking)}; run `make tools`"
            )
        self.down()
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self.workdir.mkdir(parents=True)
        self.supervisor = Supervisor(self.workdir)
        self.node = RealNode(self.workdir, self.supervisor)
        ports = Ports.allocate()
        state = {"ports": asdict(ports), "real_node": real_node}
        self.state_file.write_text(json.dumps(state, indent=2))
        try:
            self._write_pki_and_configs(f"https://127.0.0.1:{ports.apiserver}")
            self._start_etcd(ports)
            self._start_apiserver(ports)
            self._start_controller_manager(ports)
            self._start_scheduler(ports)
            self._start_kwok(ports)
            self._wait_for_default_service_account(timeout)
            self.create_nodes(topology.load() if nodes is None else nodes)
            if karpenter_options is not None:
                self.start_karpenter(karpenter_options, checked)
            if real_node:
                self.node.start(self._node_ready)
                return
            self.kubectl("create", "namespace", chart.NAMESPACE)
            self._operator_identity()
            self._start_secondary_scheduler(ports)
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        if self.real_node or self.supervisor.get("containerd") is not None:
            self.node.teardown()
        self.supervisor.stop_all(STOP_ORDER)

    def stop_component(self, name: str) -> None:
        """Stop one component; `start_component` brings it back with the same command line."""
        record = self.supervisor.get(name)
        if record is None:
            raise ClusterError(f"{name} is not running")
        (self.workdir / f"stopped-{name}.json").write_text(json.dumps(list(record.argv)))
        self.supervisor.stop(name)

    def start_component(self, name: str, timeout: float = 90) -> None:
        saved = self.workdir / f"stopped-{name}.json"
        self.supervisor.start(name, json.loads(saved.read_text()))
        saved.unlink()
        if name == "kube-apiserver":
            self._wait_http(f"{self.server}/readyz", self.ssl_context(), name, timeout)

    def restart_component(self, name: str, timeout: float = 60) -> None:
        """Stop one component and start it again with the same command line."""
        record = self.supervisor.get(name)
        if record is None:
            raise ClusterError(f"{name} is not running")
        self.supervisor.stop(name)
        self.supervisor.start(name, list(record.argv))
        if name == "kube-apiserver":
            self._wait_http(f"{self.server}/readyz", self.ssl_context(), name, timeout)

    def start_extra_apiserver(self, name: str, extra_args: list[str], timeout: float = 90) -> str:
        """A second kube-apiserver on the same etcd (as in an HA control plane), with its own
        port, no audit log and `extra_args` (feature gates, say). Returns its URL; stop it
        with `supervisor.stop(name)`, and `down()` stops it too."""
        record = self.supervisor.get("kube-apiserver")
        if record is None:
            raise ClusterError("kube-apiserver is not running")
        port = free_port()
        argv = [a for a in record.argv if not a.startswith(("--secure-port=", "--audit-"))]
        self.supervisor.start(name, [*argv, f"--secure-port={port}", *extra_args])
        server = f"https://127.0.0.1:{port}"
        self._wait_http(f"{server}/readyz", self.ssl_context(), name, timeout)
        return server

    # ---- nodes ---------------------------------------------------------------------------

    def create_nodes(self, nodes: Iterable[topology.FakeNode], timeout: float = 60) -> None:
        manifests = [n.manifest() for n in nodes]
        if not manifests:
            return
        # Thousands of nodes (the large benchmark) take minutes to create and to list.
        self.kubectl("create", "-f", "-", objects=manifests, timeout=max(120, timeout))
        names = {m["metadata"]["name"] for m in manifests}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = self.kubectl("get", "nodes", "-o", "json", timeout=max(120, timeout))
            items = json.loads(listed)["items"]
            schedulable = {n["metadata"]["name"] for n in items if _schedulable(n)}
            if names <= schedulable:
                return
            time.sleep(0.5)
        raise ClusterError(
            f"fake nodes did not become Ready and untainted within {timeout}s;"
            f" see {self.workdir}/logs/kwok.log"
        )

    # ---- internals -----------------------------------------------------------------------

    def _write_pki_and_configs(self, server: str) -> None:
        ca = Authority(self.pki)
        hosts = (
            "127.0.0.1",
            "localhost",
            "10.96.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            # The address pods reach the apiserver at, through the forwarder.
            hostnet.GATEWAY,
        )
        ca.issue("apiserver", common_name="kube-apiserver", hosts=hosts)
        if self.real_node:
            self.node.prepare(ca, server)
        identities = {
            # The admin, and the components that in a real cluster get broad rights.
            "admin": ("schedpolicy-admin", ("system:masters",)),
            "kube-controller-manager": ("system:kube-controller-manager", ("system:masters",)),
            "kwok": ("kwok-controller", ("system:masters",)),
            # Karpenter's chart grants it nodes, nodeclaims, pods/eviction and more; the
            # harness does not re-create that RBAC, which is not what is under test.
            "karpenter": ("karpenter", ("system:masters",)),
            # The scheduler gets only what upstream's bootstrap RBAC grants it.
            "kube-scheduler": ("system:kube-scheduler", ()),
        }
        for name, (cn, groups) in identities.items():
            pair = ca.issue(name, common_name=cn, groups=groups)
            target = self.kubeconfig if name == "admin" else self.workdir / f"{name}.kubeconfig"
            target.write_text(yaml.safe_dump(_kubeconfig(server, ca.cert_path, pair, cn)))
            target.chmod(0o600)
        service_account_keys(self.pki)
        (self.workdir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))

    def _start_etcd(self, p: Ports) -> None:
        client = f"http://127.0.0.1:{p.etcd_client}"
        peer = f"http://127.0.0.1:{p.etcd_peer}"
        self.supervisor.start(
            "etcd",
            [
                str(binaries.path("etcd")),
                "--name=local",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=local={peer}",
                # A throwaway test store: durability across power loss buys nothing here.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait_http(f"{client}/health", None, "etcd", 30)

    def _start_apiserver(self, p: Ports) -> None:
        self.supervisor.start(
            "kube-apiserver",
            [
                str(binaries.path("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{p.etcd_client}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.apiserver}",
                f"--tls-cert-file={self.pki / 'apiserver.crt'}",
                f"--tls-private-key-file={self.pki / 'apiserver.key'}",
                f"--client-ca-file={self.pki / 'ca.crt'}",
                # Published to kube-system/extension-apiserver-authentication, which the
                # controller-manager and scheduler read for delegated authentication.
                f"--requestheader-client-ca-file={self.pki / 'ca.crt'}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self.pki / 'sa.pub'}",
                f"--service-account-signing-key-file={self.pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                f"--audit-policy-file={self.workdir / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=500",
                "--audit-log-maxbackup=2",
                "--max-requests-inflight=800",
                "--max-mutating-requests-inflight=400",
                *self._apiserver_node_args(p),
            ],
        )
        self._wait_http(
            f"https://127.0.0.1:{p.apiserver}/readyz", self.ssl_context(), "kube-apiserver", 90
        )
        if self.real_node:
            self.supervisor.start(
                "apiserver-forwarder",
                [
                    sys.executable,
                    "-m",
                    "localcluster.forwarder",
                    hostnet.GATEWAY,
                    str(p.apiserver),
                    str(p.apiserver),
                ],
            )

    def _apiserver_node_args(self, p: Ports) -> list[str]:
        """Pods reach the apiserver at the bridge's address, through the forwarder: the
        `kubernetes` Service's endpoint is that address. Webhooks are called at their pods'
        endpoints rather than through kube-proxy."""
        if not self.real_node:
            # A loopback address cannot back the `kubernetes` Service's endpoints.
            return ["--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none"]
        return [
            f"--advertise-address={hostnet.GATEWAY}",
            "--endpoint-reconciler-type=lease",
            "--enable-aggregator-routing=true",
            *self.node.apiserver_args(),
        ]

    def _start_controller_manager(self, p: Ports) -> None:
        kubeconfig = self.workdir / "kube-controller-manager.kubeconfig"
        controllers = CONTROLLERS + (NODE_CONTROLLERS if self.real_node else ())
        self.supervisor.start(
            "kube-controller-manager",
            [
                str(binaries.path("kube-controller-manager")),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.controller_manager}",
                "--leader-elect=false",
                f"--controllers={','.join(controllers)}",
                f"--service-account-private-key-file={self.pki / 'sa.key'}",
                f"--root-ca-file={self.pki / 'ca.crt'}",
                "--use-service-account-credentials=false",
                # Client-side throttling would make scale-downs of many replicas crawl.
                "--node-monitor-period=1s",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
            ],
        )
        self._wait_http(
            f"https://127.0.0.1:{p.controller_manager}/healthz",
            _insecure(),
            "kube-controller-manager",
            60,
        )

    def _start_scheduler(self, p: Ports) -> None:
        kubeconfig = self.workdir / "kube-scheduler.kubeconfig"
        self.supervisor.start(
            "kube-scheduler",
            [
                str(binaries.path("kube-scheduler")),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.scheduler}",
                "--leader-elect=false",
            ],
        )
        self._wait_http(
            f"https://127.0.0.1:{p.scheduler}/healthz", _insecure(), "kube-scheduler", 60
        )

    def _start_kwok(self, p: Ports) -> None:
        stages = sorted(STAGES_DIR.glob("*.yaml"))
        self.supervisor.start(
            "kwok",
            [
                str(binaries.path("kwok")),
                f"--kubeconfig={self.workdir / 'kwok.kubeconfig'}",
                *(f"--config={s}" for s in stages),
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={topology.FAKE_NODE_ANNOTATION}=fake",
                f"--cidr={POD_CIDR}",
                "--node-ip=10.0.0.1",
                f"--server-address=127.0.0.1:{p.kwok}",
                "--node-lease-duration-seconds=40",
            ],
        )
        self._wait_http(f"http://127.0.0.1:{p.kwok}/healthz", None, "kwok", 60)

    def start_karpenter(
        self,
        options: karpenter.KarpenterOptions,
        checked: tuple[karpenter.Catalog, list[dict[str, Any]]] | None = None,
    ) -> karpenter.Catalog:
        """Karpenter's CRDs, node class and NodePools, then Karpenter itself; a running one is
        replaced (to change its feature gates, say). Everything is checked before anything
        is applied (`checked`: already, by `karpenter.manifests`)."""
        catalog, objects = checked or karpenter.manifests(options)
        if self.supervisor.get("karpenter") is not None:
            self.supervisor.stop("karpenter")
        crds = sorted(karpenter.crd_dir().glob("*.yaml"))
        # Server-side: the CRDs are too big for client-side apply's last-applied annotation.
        self.kubectl("apply", "--server-side", *(f"--filename={c}" for c in crds))
        self.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            *(f"crd/{c.stem.split('_', 1)[1]}.{c.stem.split('_', 1)[0]}" for c in crds),
        )
        self.kubectl("apply", "-f", "-", objects=objects)
        types_file = karpenter.write_instance_types(
            catalog, self.workdir / "karpenter-instance-types.json"
        )
        metrics, health = free_port(), free_port()
        env = karpenter.environment(
            options, self.workdir / "karpenter.kubeconfig", types_file, metrics, health
        )
        self.supervisor.start("karpenter", [str(binaries.path("karpenter"))], env=env)
        self._wait_http(f"http://127.0.0.1:{health}/readyz", None, "karpenter", 90)
        state = json.loads(self.state_file.read_text())
        state["karpenter"] = {"metrics": metrics, "health": health}
        self.state_file.write_text(json.dumps(state, indent=2))
        return catalog

    def _start_secondary_scheduler(self, p: Ports) -> None:
        """The chart's scheduler: its RBAC, its ServiceAccount's token, its profile."""
        docs = chart.rendered("templates/scheduler/rbac.yaml", "templates/scheduler/configmap.yaml")
        rbac = [d for d in docs if d["kind"] != "ConfigMap"]
        self.kubectl("apply", "-f", "-", objects=rbac)
        config = chart.scheduler_config(docs)
        name = config["profiles"][0]["schedulerName"]
        kubeconfig = self.service_account_kubeconfig(name, "schedpolicy-scheduler")
        # The one change to the chart's configuration: how to reach the apiserver.
        config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
        config_path = self.workdir / "schedpolicy-scheduler.yaml"
        config_path.write_text(yaml.safe_dump(config))
        self.supervisor.start(
            "schedpolicy-scheduler",
            [
                # A leader-elected kube-scheduler exits when it loses its Lease (say, while
                # the apiserver restarts) and relies on the kubelet to start it again.
                "/bin/sh",
                "-c",
                'while true; do "$0" "$@"; sleep 1; done',
                str(binaries.path("kube-scheduler")),
                f"--config={config_path}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                # kube-scheduler's own default; /metrics stays behind authorization, as in
                # the chart, so a scrape needs the chart's metrics-reader ClusterRole.
                "--authorization-always-allow-paths=/healthz,/readyz,/livez",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.secondary_scheduler}",
            ],
        )
        self._wait_http(
            f"https://127.0.0.1:{p.secondary_scheduler}/healthz",
            _insecure(),
            "schedpolicy-scheduler",
            60,
        )

    def start_operator(self, *extra: str) -> None:
        """The controller and the webhook from this checkout as supervised components
        (stopped by `down`), the webhook on loopback behind the chart's configuration."""
        webhook = LoopbackWebhook(self, self.workdir / "webhook-pki", "schedpolicy-local")
        self.supervisor.start("schedpolicy-operator", controller_argv(self, *extra))
        self.supervisor.start("schedpolicy-webhook", webhook.argv())
        webhook.register()

    def _operator_identity(self) -> None:
        """The controller and the webhook run as the chart's ServiceAccounts, with exactly
        the chart's RBAC."""
        rbac = self.apply_operator_rbac()
        for file_stem, component in (
            ("schedpolicy-operator", "operator"),
            ("schedpolicy-webhook", "webhook"),
        ):
            (account,) = [
                d["metadata"]["name"]
                for d in rbac
                if d["kind"] == "ServiceAccount"
                and d["metadata"]["labels"]["app.kubernetes.io/component"] == component
            ]
            self.service_account_kubeconfig(account, file_stem)

    def apply_operator_rbac(self) -> list[dict[str, Any]]:
        """The chart's controller and webhook RBAC and the controller's admission guard,
        applied as `helm template | kubectl apply` would."""
        rbac = chart.rendered(
            "templates/operator/rbac.yaml",
            "templates/webhook/rbac.yaml",
            "templates/operator/admission-guard.yaml",
        )
        self.kubectl("apply", "-f", "-", objects=rbac)
        return rbac

    def remove_operator_singleton(self) -> None:
        """Deletes the cluster-scoped RBAC `apply_operator_rbac` made, so that a real `helm
        install` can hold the product's fixed names (the chart refuses a second holder)."""
        for kind in ("clusterrolebinding", "clusterrole"):
            for name in ("schedpolicy", "schedpolicy-webhook"):
                self.kubectl("delete", kind, name, "--ignore-not-found")
        for kind in ("validatingadmissionpolicybinding", "validatingadmissionpolicy"):
            self.kubectl("delete", kind, "schedpolicy-controller-guard", "--ignore-not-found")

    def service_account_kubeconfig(
        self, account: str, file_stem: str, namespace: str = chart.NAMESPACE
    ) -> Path:
        """A kubeconfig that authenticates with a token of this ServiceAccount."""
        token = self.kubectl("create", "token", account, "-n", namespace, "--duration=48h").strip()
        kubeconfig = self.workdir / f"{file_stem}.kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(chart.token_kubeconfig(self.server, self.pki / "ca.crt", token, account))
        )
        kubeconfig.chmod(0o600)
        return kubeconfig

    def _node_ready(self) -> bool:
        listed = self.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
        return bool(listed) and _ready(json.loads(listed))

    def _wait_for_default_service_account(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False):
                return
            time.sleep(0.5)
        raise ClusterError("the serviceaccount controller never created default/default")

    def _http_ok(self, url: str, ctx: ssl.SSLContext | None) -> bool:
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=3) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _wait_http(self, url: str, ctx: ssl.SSLContext | None, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        record = self.supervisor.get(name)
        while time.monotonic() < deadline:
            if self._http_ok(url, ctx):
                return
            if record is not None and not record.alive():
                tail = "\n".join(record.log.read_text(errors="replace").splitlines()[-25:])
                status = self.supervisor.exit_status(name)
                raise ClusterError(
                    f"{name} exited (status {status}) during start-up;"
                    f" last lines of {record.log}:\n{tail}"
                )
            time.sleep(0.25)
        raise ClusterError(
            f"{name} was not healthy at {url} within {timeout}s; see {self.workdir}/logs/{name}.log"
        )


def _ready(obj: dict[str, Any]) -> bool:
    conditions = obj.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _schedulable(node: dict[str, Any]) -> bool:
    ready = _ready(node)
    tainted = any(
        t["key"] == "node.kubernetes.io/not-ready" for t in node["spec"].get("taints", [])
    )
    return ready and not tainted


def _insecure() -> ssl.SSLContext:
    # The components serve self-signed certs on their health ports; only liveness is read.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx
