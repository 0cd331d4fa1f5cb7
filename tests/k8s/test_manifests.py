"""Offline checks of the Kubernetes manifests under k8s/ (no cluster, no Docker).

Each rule is a `*_problems` function that returns what is wrong with the manifests as a list
of strings; the tests assert that list is empty for the real manifests, and a few tests feed
deliberately broken copies to the same functions to prove each rule can fail.

When `kubectl` is on PATH, the kind overlay is also rendered with its built-in kustomize.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from manifests_kit import (
    BASE,
    IMAGE,
    K8S,
    KIND_OVERLAY,
    NAMESPACE,
    VERSION,
    Doc,
    generated_names,
    kubectl,
    kustomization,
    load_docs,
    of_kind,
    pod_spec,
    render,
    strata_deployments,
    tree_docs,
    workloads,
    yaml_files,
)

# The four Strata services: module, HTTP port, gRPC port (the one all three probes ask).
SERVICES: dict[str, dict[str, Any]] = {
    "controlplane": {"args": ["controlplane"], "http": 4001, "grpc": 14001},
    "ai-gateway": {"args": ["gateways.ai"], "http": 4000, "grpc": 14000},
    "agent-gateway": {"args": ["gateways.agent"], "http": 5001, "grpc": 15001},
    "edge-proxy": {
        "args": ["gateways.edge", "--workers", "2"],
        "http": 9080,
        "grpc": 19080,
        "ports": {9080, 9180, 9091, 19080},
    },
}
SIDECARS: dict[str, dict[str, Any]] = {
    "mock-backend": {
        "args": ["sidecars.mock_backend", "--host", "0.0.0.0", "--port", "8081"],
        "ports": {8081},
    },
}

# The environment every Strata container gets from the ConfigMap strata-config.
EXPECTED_ENV: dict[str, str | None] = {
    "STORE_URL": "redis+cluster://valkey-0.valkey:6379,valkey-1.valkey:6379,valkey-2.valkey:6379",
    "CLICKHOUSE_URL": "http://default@clickhouse:8123/gateway",
    "MILVUS_URI": "http://milvus:19530",
    "IDP_JWKS_URL": "http://keycloak:8080/realms/strata/protocol/openid-connect/certs",
    "IDP_ISSUER": "http://keycloak:8080/realms/strata",
    "IDP_TOKEN_URL": "http://keycloak:8080/realms/strata/protocol/openid-connect/token",
    "CONTROLPLANE_GRPC": "controlplane:14001",
    "AI_GATEWAY_GRPC": "ai-gateway:14000",
    "AGENT_GATEWAY_GRPC": "agent-gateway:15001",
    "EDGE_GRPC": "edge-proxy:19080",
    "AI_GATEWAY_URL": "http://ai-gateway:4000",
    "AGENT_GATEWAY_URL": "http://agent-gateway:5001",
    "EDGE_URL": "http://edge-proxy:9080",
    "ENVIRONMENT": "production",
    "SVC_AGENT_IDENTITY": "off",
    "STS_ISSUER": "http://controlplane:4001/sts",
    "STS_TOKEN_TTL_SECS": "120",
    "STS_JWKS_URL": "http://controlplane:4001/sts/jwks",
    "ALLOWED_ORIGINS": None,  # any non-empty value
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector:4317",
    "OTEL_COLLECTOR_ADDRESS": "otel-collector:4317",
    "LOG_LEVEL": "info",
    "BIND_HOST": "0.0.0.0",
}
EXPECTED_SECRETS = {
    "ADMIN_API_KEY",
    "MASTER_KEY",
    "STS_SIGNING_KEY",
    "IDP_ADMIN_TOKEN",
    "CLICKHOUSE_PASSWORD",
    "STRATA_DATA_KEYS",
}


@pytest.fixture(scope="module")
def base_docs() -> list[Doc]:
    return tree_docs(BASE)


@pytest.fixture(scope="module")
def overlay_docs() -> list[Doc]:
    return tree_docs(KIND_OVERLAY)


# --- rules --------------------------------------------------------------------------------


def document_problems(path: Path, doc: Any, root: Path = K8S) -> list[str]:
    where = f"{path.relative_to(root)}"
    if not isinstance(doc, dict):
        return [f"{where}: document is not a mapping"]
    problems = [f"{where}: no {key}" for key in ("apiVersion", "kind") if not doc.get(key)]
    # kustomization.yaml and the kind Cluster config are not Kubernetes objects.
    is_object = doc.get("kind") not in {"Kustomization", "Cluster"}
    if is_object and not (doc.get("metadata") or {}).get("name"):
        problems.append(f"{where}: {doc.get('kind')} without metadata.name")
    return problems


def kustomization_problems(directory: Path, root: Path = K8S) -> list[str]:
    k = kustomization(directory)
    where = directory.relative_to(root)
    problems = []
    for entry in k.get("resources", []):
        target = directory / entry
        if target.is_dir():
            if not (target / "kustomization.yaml").is_file():
                problems.append(f"{where}: resource dir {entry} has no kustomization.yaml")
        elif not target.is_file():
            problems.append(f"{where}: resource {entry} does not exist")
    for key in ("configMapGenerator", "secretGenerator"):
        for gen in k.get(key, []):
            for item in gen.get("files", []):
                if not (directory / item.split("=", 1)[-1]).is_file():
                    problems.append(f"{where}: {key} {gen['name']} file {item} missing")
    for patch in k.get("patches", []):
        if "path" in patch and not (directory / patch["path"]).is_file():
            problems.append(f"{where}: patch file {patch['path']} missing")
    return problems


def container_problems(name: str, deployment: Doc) -> list[str]:
    """Rules for every container of the Strata image (services and sidecars)."""
    spec = pod_spec(deployment)
    problems = []
    if spec.get("enableServiceLinks") is not False:
        problems.append(f"{name}: enableServiceLinks must be false (FOO_PORT env collisions)")
    pod_sc = spec.get("securityContext") or {}
    tmp_volumes = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
    for c in spec["containers"]:
        where = f"{name}/{c['name']}"
        refs = {
            ("configMap", e["configMapRef"]["name"])
            if "configMapRef" in e
            else ("secret", e["secretRef"]["name"])
            for e in c.get("envFrom", [])
        }
        for ref in (("configMap", "strata-config"), ("secret", "strata-secrets")):
            if ref not in refs:
                problems.append(f"{where}: envFrom lacks {ref[0]} {ref[1]}")
        res = c.get("resources") or {}
        for level in ("requests", "limits"):
            for unit in ("cpu", "memory"):
                if unit not in (res.get(level) or {}):
                    problems.append(f"{where}: no resources.{level}.{unit}")
        for probe in ("readinessProbe", "livenessProbe"):
            if not c.get(probe):
                problems.append(f"{where}: no {probe}")
        sc = c.get("securityContext") or {}
        if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
            problems.append(f"{where}: runAsNonRoot not set")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{where}: readOnlyRootFilesystem not true")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation not false")
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        if mounts.get("/tmp") not in tmp_volumes:
            problems.append(f"{where}: /tmp is not an emptyDir")
    return problems


def service_problems(name: str, deployment: Doc) -> list[str]:
    """Extra rules for the four services: args, ports, and startup, readiness and liveness all
    on gRPC health (grpc.health.v1, SERVING once every port listens, NOT_SERVING in a drain)."""
    want = SERVICES[name]
    c = pod_spec(deployment)["containers"][0]
    problems = []
    if c.get("args") != want["args"]:
        problems.append(f"{name}: args {c.get('args')} != {want['args']}")
    ports = {p["containerPort"]: p.get("name") for p in c.get("ports", [])}
    for port in want.get("ports", {want["http"], want["grpc"]}):
        if port not in ports:
            problems.append(f"{name}: no containerPort {port}")
    if ports.get(want["grpc"]) != "grpc":
        problems.append(f"{name}: containerPort {want['grpc']} is not named grpc")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        grpc = (c.get(probe) or {}).get("grpc") or {}
        if grpc.get("port") != want["grpc"]:
            problems.append(f"{name}: {probe} is not a gRPC probe on port {want['grpc']}")
    return problems


def selector_problems(docs: list[Doc]) -> list[str]:
    deployments = workloads(docs)
    problems = []
    for name, svc in of_kind(docs, "Service").items():
        selector = svc["spec"].get("selector") or {}
        matches = [
            d
            for d in deployments.values()
            if selector and selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        if not matches:
            problems.append(f"Service {name}: selector {selector} matches no Deployment")
            continue
        named = {
            p.get("name"): p["containerPort"]
            for d in matches
            for c in pod_spec(d)["containers"]
            for p in c.get("ports", [])
        }
        for p in svc["spec"]["ports"]:
            if not p.get("name"):
                problems.append(f"Service {name}: port {p['port']} has no name")
            target = p.get("targetPort", p["port"])
            if target not in named and target not in named.values():
                problems.append(f"Service {name}: targetPort {target} not on the pods")
    for name, d in deployments.items():
        labels = d["spec"]["template"]["metadata"]["labels"]
        selector = d["spec"].get("selector", {}).get("matchLabels", {})  # a Job's is generated
        if not selector.items() <= labels.items():
            problems.append(f"{d['kind']} {name}: selector does not match its pod labels")
    return problems


def port_name_problems(docs: list[Doc]) -> list[str]:
    problems = []
    for name, d in workloads(docs).items():
        for c in pod_spec(d)["containers"]:
            for p in c.get("ports", []):
                port_name = p.get("name") or ""
                if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?", port_name):
                    problems.append(f"{name}/{c['name']}: port {p['containerPort']} badly named")
    return problems


def reference_problems(docs: list[Doc], generated: set[tuple[str, str]]) -> list[str]:
    """Every ConfigMap/Secret a pod reads must exist in the same tree."""
    have = {(d["kind"], d["metadata"]["name"]) for d in docs} | generated
    problems = []
    for name, d in workloads(docs).items():
        spec = pod_spec(d)
        wanted = set()
        for v in spec.get("volumes", []):
            if "configMap" in v:
                wanted.add(("ConfigMap", v["configMap"]["name"]))
            if "secret" in v:
                wanted.add(("Secret", v["secret"]["secretName"]))
            if "persistentVolumeClaim" in v:
                wanted.add(("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"]))
        for c in spec["containers"]:
            for e in c.get("envFrom", []):
                if "configMapRef" in e:
                    wanted.add(("ConfigMap", e["configMapRef"]["name"]))
                if "secretRef" in e:
                    wanted.add(("Secret", e["secretRef"]["name"]))
            for e in c.get("env", []):
                ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    wanted.add(("Secret", ref["name"]))
        problems += [f"{name}: references missing {k} {n}" for k, n in sorted(wanted - have)]
    return problems


def env_problems(docs: list[Doc]) -> list[str]:
    config = of_kind(docs, "ConfigMap").get("strata-config")
    secret = of_kind(docs, "Secret").get("strata-secrets")
    if config is None or secret is None:
        return ["strata-config or strata-secrets missing"]
    data = config.get("data") or {}
    problems = []
    for key, value in EXPECTED_ENV.items():
        if key not in data:
            problems.append(f"strata-config: {key} missing")
        elif value is None and not data[key]:
            problems.append(f"strata-config: {key} is empty")
        elif value is not None and data[key] != value:
            problems.append(f"strata-config: {key}={data[key]!r}, want {value!r}")
    secret_keys = set(secret.get("stringData") or {}) | set(secret.get("data") or {})
    problems += [f"strata-secrets: {k} missing" for k in sorted(EXPECTED_SECRETS - secret_keys)]
    problems += [f"{k} in both ConfigMap and Secret" for k in sorted(secret_keys & set(data))]
    if re.match(r"^\w+://[^/@]*:[^/@]*@", data.get("CLICKHOUSE_URL", "")):
        problems.append("strata-config: CLICKHOUSE_URL carries a password")
    return problems


def address_problems(docs: list[Doc]) -> list[str]:
    """host:port in each *_URL / *_GRPC / *_URI / *_ENDPOINT / *_ADDRESS value must be a Service
    port in the tree; a cluster URL's every seed too, where `pod.service` names a pod of the
    StatefulSet behind a headless Service."""
    services = {
        name: {p["port"] for p in svc["spec"]["ports"]}
        for name, svc in of_kind(docs, "Service").items()
    }
    pods = {
        f"{name}-{i}.{s['spec']['serviceName']}"
        for name, s in of_kind(docs, "StatefulSet").items()
        for i in range(s["spec"]["replicas"])
    }
    data = of_kind(docs, "ConfigMap")["strata-config"]["data"]
    problems = []
    for key, value in data.items():
        if not value or not re.search(r"_(URL|URI|GRPC|ENDPOINT|ADDRESS)$", key):
            continue
        m = re.match(r"^(?:[\w+]+://)?(?:[^@/]*@)?([^/?]+)", value)
        seeds = m[1].split(",") if m else []
        if not seeds:
            problems.append(f"{key}: cannot read host:port from {value!r}")
        for seed in seeds:
            host, _, port = seed.rpartition(":")
            service = host.split(".")[-1]
            if not re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)?", host) or not port.isdigit():
                problems.append(f"{key}: cannot read host:port from {value!r}")
            elif "." in host and host not in pods:
                problems.append(f"{key}: no pod {host} of a StatefulSet")
            elif int(port) not in services.get(service, set()):
                problems.append(f"{key}: no Service {service} with port {port}")
    return problems


def realm_problems(realm: Doc) -> list[str]:
    problems = []
    scopes = {s["name"]: s for s in realm.get("clientScopes", [])}
    clients = {c["clientId"]: c for c in realm.get("clients", [])}
    users = {u["username"]: u for u in realm.get("users", [])}
    if realm.get("realm") != "strata":
        problems.append("realm is not named strata")
    if "basic" not in scopes:
        problems.append("no `basic` client scope: access tokens would lack `sub`")

    def mappers(client: Doc) -> list[Doc]:
        found = list(client.get("protocolMappers", []))
        for s in client.get("defaultClientScopes", []):
            found += scopes.get(s, {}).get("protocolMappers", [])
        return found

    for cid, client in clients.items():
        for s in client.get("defaultClientScopes", []) + client.get("optionalClientScopes", []):
            if s not in scopes:
                problems.append(f"client {cid}: scope {s} is not defined in the realm")
        tenant = [
            m
            for m in mappers(client)
            if m["protocolMapper"] == "oidc-usermodel-attribute-mapper"
            and m["config"].get("user.attribute") == "tenant_id"
            and m["config"].get("claim.name") == "tenant_id"
            and m["config"].get("access.token.claim") == "true"
        ]
        if not tenant:
            problems.append(f"client {cid}: tenant_id is not mapped into the access token")
        audience = [
            m
            for m in mappers(client)
            if m["protocolMapper"] == "oidc-audience-mapper"
            and m["config"].get("included.custom.audience") == "strata"
            and m["config"].get("access.token.claim") == "true"
        ]
        if not audience:  # the services accept only tokens for their IDP_AUDIENCES
            problems.append(f"client {cid}: access tokens do not carry aud strata")
    portal = clients.get("strata-portal", {})
    if not (portal.get("publicClient") and portal.get("directAccessGrantsEnabled")):
        problems.append("strata-portal must be public with direct access grants")
    for agent in ("planner", "researcher"):
        client = clients.get(f"agent-{agent}", {})
        if not client.get("serviceAccountsEnabled") or client.get("publicClient"):
            problems.append(f"agent-{agent}: needs a confidential client with a service account")
        claims = {
            m["config"].get("claim.name"): m["config"].get("claim.value")
            for m in mappers(client)
            if m["protocolMapper"] == "oidc-hardcoded-claim-mapper"
        }
        if claims.get("agent_id") != f"agent:{agent}":
            problems.append(f"agent-{agent}: no hardcoded agent_id claim agent:{agent}")
    for username, tenant_id in {"admin": "platform", "alice": "acme", "bob": "globex"}.items():
        u = users.get(username, {})
        if u.get("attributes", {}).get("tenant_id") != [tenant_id]:
            problems.append(f"user {username}: tenant_id is not {tenant_id}")
    if "platform-admin" not in users.get("admin", {}).get("realmRoles", []):
        problems.append("user admin lacks role platform-admin")
    if "platform-admin" not in {r["name"] for r in realm.get("roles", {}).get("realm", [])}:
        problems.append("realm role platform-admin is not defined")
    profiles = realm.get("components", {}).get("org.keycloak.userprofile.UserProfileProvider", [])
    declared = {
        a["name"]
        for p in profiles
        for raw in p.get("config", {}).get("kc.user.profile.config", [])
        for a in json.loads(raw).get("attributes", [])
    }
    if "tenant_id" not in declared:
        problems.append("user profile does not declare tenant_id (Keycloak >= 24 drops it)")
    return problems


# --- tests --------------------------------------------------------------------------------


def test_every_document_parses_and_is_named() -> None:
    files = yaml_files()
    assert len(files) >= 10, files
    problems = [p for f in files for doc in load_docs(f) for p in document_problems(f, doc)]
    assert problems == []


def test_every_kustomization_reference_exists() -> None:
    dirs = sorted(p.parent for p in K8S.rglob("kustomization.yaml"))
    assert {BASE, KIND_OVERLAY} <= set(dirs)
    assert [p for d in dirs for p in kustomization_problems(d)] == []


def test_every_yaml_file_is_used() -> None:
    """A manifest no kustomization lists is never applied."""
    listed: set[Path] = set()
    for k in K8S.rglob("kustomization.yaml"):
        listed |= {(k.parent / e).resolve() for e in load_docs(k)[0].get("resources", [])}
    loose = {
        p for p in yaml_files() if p.name != "kustomization.yaml" and p != K8S / "kind-cluster.yaml"
    }
    assert sorted(str(p.relative_to(K8S)) for p in loose if p.resolve() not in listed) == []


def test_the_strata_image_runs_exactly_the_services_and_sidecars(base_docs: list[Doc]) -> None:
    assert set(strata_deployments(base_docs)) == set(SERVICES) | set(SIDECARS)


def test_strata_containers_have_probes_resources_env_and_lockdown(base_docs: list[Doc]) -> None:
    problems = [
        p for name, d in strata_deployments(base_docs).items() for p in container_problems(name, d)
    ]
    assert problems == []


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_service_args_ports_and_probes(base_docs: list[Doc], name: str) -> None:
    assert service_problems(name, of_kind(base_docs, "Deployment")[name]) == []


@pytest.mark.parametrize("name", sorted(SIDECARS))
def test_sidecar_args_and_ports(base_docs: list[Doc], name: str) -> None:
    c = pod_spec(of_kind(base_docs, "Deployment")[name])["containers"][0]
    assert c["args"] == SIDECARS[name]["args"]
    assert {p["containerPort"] for p in c["ports"]} == SIDECARS[name]["ports"]


def test_service_selectors_match_deployments(overlay_docs: list[Doc]) -> None:
    assert selector_problems(overlay_docs) == []


def test_container_ports_are_named(overlay_docs: list[Doc]) -> None:
    assert port_name_problems(overlay_docs) == []


def test_referenced_configmaps_secrets_and_claims_exist(base_docs: list[Doc]) -> None:
    assert reference_problems(base_docs, generated_names(BASE)) == []


def test_configmap_defines_the_environment(base_docs: list[Doc]) -> None:
    assert env_problems(base_docs) == []


def test_configured_addresses_are_service_ports(base_docs: list[Doc]) -> None:
    assert address_problems(base_docs) == []


def test_stores_and_identity_provider(base_docs: list[Doc]) -> None:
    deployments = of_kind(base_docs, "Deployment")
    images = {n: pod_spec(d)["containers"][0]["image"] for n, d in workloads(base_docs).items()}
    assert re.fullmatch(r"valkey/valkey:8\.\d+\.\d+-bookworm", images["valkey"])
    assert images["valkey-cluster-form"] == images["valkey"]
    valkey = of_kind(base_docs, "StatefulSet")["valkey"]
    assert valkey["spec"]["replicas"] == 6  # three masters, one replica each
    args = pod_spec(valkey)["containers"][0]["args"]
    assert args[args.index("--cluster-enabled") + 1] == "yes"
    assert (
        "--cluster-replicas 1"
        in pod_spec(of_kind(base_docs, "Job")["valkey-cluster-form"])["containers"][0]["args"][0]
    )
    assert images["clickhouse"] == "clickhouse/clickhouse-server:24.8"
    assert re.fullmatch(r"milvusdb/milvus:v2\.5\.\d+", images["milvus"])
    assert re.fullmatch(r"quay\.io/keycloak/keycloak:26\.\d+\.\d+", images["keycloak"])

    milvus = pod_spec(deployments["milvus"])["containers"][0]
    assert milvus["command"] == ["milvus", "run", "standalone"]
    env = {e["name"]: e.get("value") for e in milvus["env"]}
    assert env["ETCD_USE_EMBED"] == "true" and env["COMMON_STORAGETYPE"] == "local"

    keycloak = pod_spec(deployments["keycloak"])["containers"][0]
    assert keycloak["args"] == ["start-dev", "--import-realm"]
    hostname = {e["name"]: e.get("value") for e in keycloak["env"]}["KC_HOSTNAME"]
    issuer = of_kind(base_docs, "ConfigMap")["strata-config"]["data"]["IDP_ISSUER"]
    assert issuer == f"{hostname}/realms/strata", "issuer and KC_HOSTNAME disagree"

    ch_env = pod_spec(deployments["clickhouse"])["containers"][0]["env"]
    password = next(e for e in ch_env if e["name"] == "CLICKHOUSE_PASSWORD")
    assert password["valueFrom"]["secretKeyRef"] == {
        "name": "strata-secrets",
        "key": "CLICKHOUSE_PASSWORD",
    }
    claims = {d["metadata"]["name"] for d in base_docs if d["kind"] == "PersistentVolumeClaim"}
    assert {"clickhouse-data", "milvus-data"} <= claims
    assert [t["metadata"]["name"] for t in valkey["spec"]["volumeClaimTemplates"]] == ["data"]


def test_keycloak_realm_export() -> None:
    realm = json.loads((BASE / "keycloak" / "strata-realm.json").read_text(encoding="utf-8"))
    assert realm_problems(realm) == []


def test_kind_overlay_matches_the_cluster_config(overlay_docs: list[Doc]) -> None:
    cluster = load_docs(K8S / "kind-cluster.yaml")[0]
    mappings = {
        m["containerPort"]: m["hostPort"]
        for node in cluster["nodes"]
        for m in node.get("extraPortMappings", [])
    }
    assert mappings == {30080: 9080, 30401: 4001}

    overlay = kustomization(KIND_OVERLAY)
    assert {"name": IMAGE, "newName": IMAGE, "newTag": VERSION} in overlay["images"]
    patched_node_ports: dict[str, int] = {}
    pull_policy_patched = False
    for patch in overlay.get("patches", []):
        for op in yaml.safe_load(patch.get("patch", "[]")) or []:
            if op["path"].endswith("/imagePullPolicy") and op["value"] == "IfNotPresent":
                pull_policy_patched = True
            if op["path"].endswith("/nodePort"):
                patched_node_ports[patch["target"]["name"]] = op["value"]
    assert pull_policy_patched
    node_ports = dict(patched_node_ports)
    for name, svc in of_kind(overlay_docs, "Service").items():
        for p in svc["spec"]["ports"]:
            if "nodePort" in p:
                node_ports[name] = p["nodePort"]
    assert node_ports == {"edge-proxy-public": 30080, "controlplane-public": 30401}
    services = of_kind(overlay_docs, "Service")
    assert services["edge-proxy-public"]["spec"]["ports"] == [
        {"name": "proxy", "port": 9080, "targetPort": "proxy"}
    ], "only the proxy port may be public (never the admin API)"
    assert services["controlplane-public"]["spec"]["ports"][0]["port"] == 4001


def test_dockerfile() -> None:
    text = (K8S / "image" / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11\.\d+-slim-", text, re.M)
    assert "pip install ." in text
    assert re.search(r'^ENTRYPOINT \["python", "-m"\]$', text, re.M)
    user = re.findall(r"^USER (\S+)$", text, re.M)
    assert user and re.fullmatch(r"[1-9]\d*(:\d+)?", user[-1]), "USER must be a numeric non-root"


@pytest.mark.skipif(kubectl() is None, reason="kubectl not installed")
def test_kind_overlay_renders_with_kustomize() -> None:
    docs = render(KIND_OVERLAY)
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"].get("namespace") == NAMESPACE, d["metadata"]["name"]
    deployments = strata_deployments(docs)
    assert set(deployments) == set(SERVICES) | set(SIDECARS)
    for d in deployments.values():
        c = pod_spec(d)["containers"][0]
        assert (c["image"], c.get("imagePullPolicy")) == (f"{IMAGE}:{VERSION}", "IfNotPresent")
    # The realm ConfigMap gets a content hash; the Keycloak volume must follow it.
    keycloak = of_kind(docs, "Deployment")["keycloak"]
    volumes = {v["name"]: v for v in pod_spec(keycloak)["volumes"]}
    realm_cm = volumes["realm"]["configMap"]["name"]
    assert realm_cm in of_kind(docs, "ConfigMap") and realm_cm.startswith("keycloak-realm-")
    assert selector_problems(docs) == []


# --- the rules can fail -------------------------------------------------------------------


def _deployment(docs: list[Doc], name: str) -> Doc:
    return copy.deepcopy(of_kind(docs, "Deployment")[name])


def test_rules_catch_probes_that_are_not_grpc_health(base_docs: list[Doc]) -> None:
    d = _deployment(base_docs, "ai-gateway")
    pod_spec(d)["containers"][0]["livenessProbe"] = {"tcpSocket": {"port": 4000}}
    pod_spec(d)["containers"][0]["readinessProbe"] = {"httpGet": {"port": 4000, "path": "/health"}}
    assert service_problems("ai-gateway", d) == [
        "ai-gateway: readinessProbe is not a gRPC probe on port 14000",
        "ai-gateway: livenessProbe is not a gRPC probe on port 14000",
    ]


def test_rules_catch_missing_env_resources_and_tmp(base_docs: list[Doc]) -> None:
    d = _deployment(base_docs, "controlplane")
    c = pod_spec(d)["containers"][0]
    c["envFrom"] = [e for e in c["envFrom"] if "secretRef" not in e]
    del c["resources"]["limits"]
    c["volumeMounts"] = []
    problems = container_problems("controlplane", d)
    assert any("strata-secrets" in p for p in problems)
    assert any("resources.limits" in p for p in problems)
    assert any("/tmp" in p for p in problems)


def test_rules_catch_a_selector_that_matches_nothing(base_docs: list[Doc]) -> None:
    docs = copy.deepcopy(base_docs)
    of_kind(docs, "Service")["edge-proxy"]["spec"]["selector"] = {"app.kubernetes.io/name": "edge"}
    assert selector_problems(docs) == [
        "Service edge-proxy: selector {'app.kubernetes.io/name': 'edge'} matches no Deployment"
    ]


def test_rules_catch_unnamed_ports_and_missing_env(base_docs: list[Doc]) -> None:
    docs = copy.deepcopy(base_docs)
    del pod_spec(of_kind(docs, "StatefulSet")["valkey"])["containers"][0]["ports"][0]["name"]
    assert port_name_problems(docs) == ["valkey/valkey: port 6379 badly named"]
    del of_kind(docs, "ConfigMap")["strata-config"]["data"]["EDGE_GRPC"]
    data = of_kind(docs, "ConfigMap")["strata-config"]["data"]
    data["STORE_URL"] = "redis+cluster://valkey-0.valkey:6380,valkey-6.valkey:6379"
    assert env_problems(docs) == [
        "strata-config: STORE_URL='redis+cluster://valkey-0.valkey:6380,valkey-6.valkey:6379', "
        "want 'redis+cluster://valkey-0.valkey:6379,valkey-1.valkey:6379,valkey-2.valkey:6379'",
        "strata-config: EDGE_GRPC missing",
    ]
    assert address_problems(docs) == [
        "STORE_URL: no Service valkey with port 6380",
        "STORE_URL: no pod valkey-6.valkey of a StatefulSet",
    ]


def test_rules_catch_a_missing_kustomization_resource(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [present.yaml, absent.yaml]\n")
    (tmp_path / "present.yaml").write_text("kind: ConfigMap\n")
    assert kustomization_problems(tmp_path, root=tmp_path) == [
        ".: resource absent.yaml does not exist"
    ]
    doc = load_docs(tmp_path / "present.yaml")[0]
    assert document_problems(tmp_path / "present.yaml", doc, root=tmp_path) == [
        "present.yaml: no apiVersion",
        "present.yaml: ConfigMap without metadata.name",
    ]


def test_rules_catch_a_realm_without_tenant_mapping() -> None:
    realm = json.loads((BASE / "keycloak" / "strata-realm.json").read_text(encoding="utf-8"))
    for s in realm["clientScopes"]:
        s["protocolMappers"] = [
            m for m in s["protocolMappers"] if m["config"].get("claim.name") != "tenant_id"
        ]
    realm["users"][0]["realmRoles"] = []
    problems = realm_problems(realm)
    assert "client strata-portal: tenant_id is not mapped into the access token" in problems
    assert "user admin lacks role platform-admin" in problems


def test_rules_catch_a_realm_whose_tokens_lack_the_strata_audience() -> None:
    realm = json.loads((BASE / "keycloak" / "strata-realm.json").read_text(encoding="utf-8"))
    for s in realm["clientScopes"]:
        s["protocolMappers"] = [
            m for m in s["protocolMappers"] if m["protocolMapper"] != "oidc-audience-mapper"
        ]
    problems = realm_problems(realm)
    assert "client agent-planner: access tokens do not carry aud strata" in problems
