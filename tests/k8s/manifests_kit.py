"""What the offline checks of k8s/ share: where the manifests are, and reading them the way
kustomize assembles them (without kustomize's transformers), or rendered by `kubectl kustomize`
when kubectl is installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
BASE = K8S / "base"
KIND_OVERLAY = K8S / "overlays" / "kind"
NAMESPACE = "strata"
IMAGE = "strata"
VERSION = "0.1.0"

Doc = dict[str, Any]

# --- loading ------------------------------------------------------------------------------


def load_docs(path: Path) -> list[Doc]:
    with path.open(encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


OBSERVABILITY = K8S / "observability"  # Prometheus rules and Grafana dashboards: not objects


def yaml_files() -> list[Path]:
    """Every Kubernetes manifest (and kustomization) under k8s/."""
    return sorted(
        p
        for p in K8S.rglob("*")
        if p.suffix in {".yaml", ".yml"} and OBSERVABILITY not in p.parents
    )


def kustomization(directory: Path) -> Doc:
    return load_docs(directory / "kustomization.yaml")[0]


def tree_docs(directory: Path) -> list[Doc]:
    """Every resource document a kustomization pulls in, recursively (no transformers)."""
    docs: list[Doc] = []
    for entry in kustomization(directory).get("resources", []):
        target = directory / entry
        docs.extend(tree_docs(target) if target.is_dir() else load_docs(target))
    return docs


def generated_names(directory: Path) -> set[tuple[str, str]]:
    """(kind, name) of the ConfigMaps and Secrets made by generators, recursively."""
    names: set[tuple[str, str]] = set()
    k = kustomization(directory)
    for key, kind in (("configMapGenerator", "ConfigMap"), ("secretGenerator", "Secret")):
        names |= {(kind, g["name"]) for g in k.get(key, [])}
    for entry in k.get("resources", []):
        if (directory / entry).is_dir():
            names |= generated_names(directory / entry)
    return names


def of_kind(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d.get("kind") == kind}


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")


def workloads(docs: list[Doc]) -> dict[str, Doc]:
    """Every object that runs pods (Deployments, StatefulSets, Jobs), by name."""
    return {d["metadata"]["name"]: d for d in docs if d.get("kind") in WORKLOAD_KINDS}


def pod_spec(deployment: Doc) -> Doc:
    return deployment["spec"]["template"]["spec"]


def strata_deployments(docs: list[Doc]) -> dict[str, Doc]:
    return {
        name: d
        for name, d in of_kind(docs, "Deployment").items()
        if any(c["image"].split(":")[0] == IMAGE for c in pod_spec(d)["containers"])
    }


def kubectl() -> str | None:
    return shutil.which("kubectl")


def render(directory: Path) -> list[Doc]:
    """`kubectl kustomize DIRECTORY`: the objects an apply would send (kubectl must exist)."""
    out = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    if out.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory} failed:\n{out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


# A series selector in PromQL: a name followed by its label matchers or its range.
SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[{\[]")


def queried_metrics() -> dict[str, set[str]]:
    """The metric names each Grafana dashboard (by layer) and the Prometheus rules query."""
    queried = {
        path.stem: {
            name
            for panel in json.loads(path.read_text(encoding="utf-8")).get("panels") or []
            for target in panel.get("targets") or []
            for name in SELECTOR.findall(target.get("expr", ""))
        }
        for path in (OBSERVABILITY / "dashboards").glob("*.json")
    }
    rules = yaml.safe_load((OBSERVABILITY / "prometheus-rules.yaml").read_text(encoding="utf-8"))
    queried["rules"] = {
        name
        for group in rules["groups"]
        for rule in group["rules"]
        for name in SELECTOR.findall(rule["expr"])
    }
    return queried


def scraped_series(exposition: str) -> set[str]:
    """The series names a scrape offers: every sample's name, and for each declared family
    (`# TYPE`, present before its first sample) the names its type gives it."""
    suffixes = {"counter": ("", "_total", "_created"), "histogram": ("_bucket", "_sum", "_count")}
    names = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(maxsplit=3)
            names |= {family + suffix for suffix in suffixes.get(kind, ("",))}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names
