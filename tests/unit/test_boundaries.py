"""The layers' contracts, read from every import with `ast` (deferred ones inside functions too):
runtime imports nothing above it and nothing imports cli (the composition root); a service
imports another only through its declared surfaces (the edge's configuration model, a store
layout's `keys` module, the generated protos under strata.*); no module imports another
package's private (`_name`) module."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cli", "runtime", "controlplane", "gateways", "sidecars")
SERVICES = ("gateways.edge", "gateways.ai", "gateways.agent")  # else: the top-level package
# The edge's configuration model, and (contract 2) the AI gateway's pure-data built-in table.
SURFACES = ("gateways.edge.model", "gateways.ai.providers.builtin")


def owner(module: str) -> str:
    return next((s for s in SERVICES if f"{module}.".startswith(f"{s}.")), module.split(".")[0])


def problem(importer: str, target: str) -> str | None:
    parts = target.split(".")
    private = next((i for i, p in enumerate(parts) if p[:1] == "_" and p[:2] != "__"), None)
    if parts[0] not in PACKAGES:  # a library's private modules are judged case by case
        return None
    if private is not None and not importer.startswith(".".join(parts[:private]) + "."):
        return "a private module of another package"
    source, dest = owner(importer), owner(target)
    if dest not in PACKAGES + SERVICES or source in (dest, "cli") or dest == "runtime" != source:
        return None
    if dest == "cli" or source == "runtime":
        return f"{source} imports {dest}, above it"
    if target.startswith(SURFACES) or "keys" in parts:
        return None
    return f"{dest} is not a declared surface of {source}"


def violations() -> list[str]:
    found: dict[str, None] = {}  # one line per import statement and problem, in order
    for path in sorted(p for top in PACKAGES for p in (ROOT / top).rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        source = path.read_text()
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                package = module.split(".")[: -node.level] if node.level else []
                base = ".".join([*package, *([node.module] if node.module else [])])
                targets = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                if (why := problem(module, target)) is not None:
                    code = (ast.get_source_segment(source, node) or target).split("\n")[0]
                    found[f"{path.relative_to(ROOT)}:{node.lineno}: {code}: {why}"] = None
    return list(found)


def test_every_import_keeps_to_the_layers_contracts() -> None:
    found = violations()
    assert not found, "imports that cross a contract:\n" + "\n".join(found)
