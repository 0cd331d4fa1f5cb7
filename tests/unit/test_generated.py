"""The committed generated code is exactly what `make gen` produces now (no stale code)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("generate", ROOT / "proto" / "generate.py")
assert spec and spec.loader
generate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generate)


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    written = generate.generate(tmp_path)
    assert written, "nothing generated"
    stale = []
    for fresh in written:
        committed = ROOT / "proto" / fresh.relative_to(tmp_path)
        if not committed.exists() or committed.read_bytes() != fresh.read_bytes():
            stale.append(str(fresh.relative_to(tmp_path)))
    assert stale == [], f"stale generated code, run `make gen`: {stale}"


def test_no_orphan_generated_modules() -> None:
    protos = {p.with_suffix("") for p in (ROOT / "proto" / "strata").rglob("*.proto")}
    for module in (ROOT / "proto" / "strata").rglob("*_pb2*.py"):
        source = module.with_name(module.name.split("_pb2")[0])
        assert source in protos, f"{module} has no .proto"
