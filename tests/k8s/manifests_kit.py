"""What the offline checks of k8s/ share: where the manifests are, and reading them the way
kustomize assembles them (without kustomize's transformers), or rendered by `kubectl kustomize`
when kubectl is installed."""

from __future__ import annotations

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
