"""Each sidecar as a real process: `python -m sidecars.<name> --port 0`, JSON logs, SIGTERM."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path

import pytest

from sidecars.jsonlog import JsonFormatter

REPO = Path(__file__).resolve().parents[2]


async def _start(module: str, *args: str, env: dict[str, str] | None = None):
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        "--port",
        "0",
        *args,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    while True:
        raw = await asyncio.wait_for(proc.stderr.readline(), timeout=30)
        assert raw, f"{module} exited early: {lines}"
        lines.append(raw.decode())
        entry = json.loads(lines[-1])
        if entry["msg"] == "listening":
            assert entry["host"] == "127.0.0.1"
            return proc, entry["port"], lines


async def _stop(proc, lines: list[str]) -> list[dict]:
    proc.send_signal(signal.SIGTERM)
    _, rest = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 0
    lines += rest.decode().splitlines()
    return [json.loads(line) for line in lines if line.strip()]  # every line is one JSON object


@pytest.mark.parametrize(
    ("module", "service"),
    [("sidecars.mock_backend", "mock-backend"), ("sidecars.echo_llm", "echo-llm")],
)
async def test_process_serves_health_and_logs_json(http, module, service):
    proc, port, lines = await _start(module)
    try:
        async with http.get(f"http://127.0.0.1:{port}/health") as resp:
            assert (await resp.json()) == {"status": "ok", "service": service}
    finally:
        entries = await _stop(proc, lines)
    access = [e for e in entries if e["msg"] == "request"]
    assert [(e["method"], e["path"], e["status"]) for e in access] == [("GET", "/health", 200)]


async def test_a_header_field_too_long_is_431_without_an_echo():
    """aiohttp's own answer would quote the start of the header (a bearer token) in its body
    and its error log; a sidecar answers 431 in JSON and logs neither."""
    canary = "canary-0c44b1"
    head = (
        "GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + (canary * 700)[:9000]
        + "\r\n\r\n"
    ).encode()
    proc, port, lines = await _start("sidecars.mock_backend")
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head)
        reply = await reader.read()
        writer.close()
    finally:
        entries = await _stop(proc, lines)
    assert int(reply.split()[1]) == 431
    body = json.loads(reply.partition(b"\r\n\r\n")[2])
    assert body["error"] == "request_header_fields_too_large"
    assert canary.encode() not in reply
    assert canary not in json.dumps(entries)


async def test_idp_process_reads_env_and_args(http, tmp_path):
    proc, port, lines = await _start(
        "sidecars.idp",
        "--data-dir",
        str(tmp_path),
        "--issuer",
        "http://127.0.0.1:1/realms/strata",
        env={"IDP_ADMIN_TOKEN": "from-env-token"},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with http.get(f"{base}/realms/strata/.well-known/openid-configuration") as resp:
            assert (await resp.json())["issuer"] == "http://127.0.0.1:1/realms/strata"
        async with http.get(
            f"{base}/admin/realms/strata/organizations",
            headers={"Authorization": "Bearer from-env-token"},
        ) as resp:
            assert resp.status == 200
        async with http.post(
            f"{base}/realms/strata/protocol/openid-connect/token",
            data={
                "grant_type": "password",
                "client_id": "strata-portal",
                "username": "alice",
                "password": "alice",
            },
        ) as resp:
            assert resp.status == 200
    finally:
        entries = await _stop(proc, lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "public-keys.json",
        "signing-es256.pem",
        "signing-rs256.pem",
    ]
    assert "from-env-token" not in json.dumps(entries)
    assert any(e.get("msg") == "token issued" for e in entries)


def test_formatter_masks_credential_fields():
    record = logging.makeLogRecord(
        {
            "msg": "x",
            "levelname": "INFO",
            "name": "t",
            "password": "p",
            "client_secret": "s",
            "Authorization": "Bearer t",
            "access_token": "a",
            "prompt_tokens": 5,
        }
    )
    entry = json.loads(JsonFormatter().format(record))
    assert {
        k: entry[k] for k in ("password", "client_secret", "Authorization", "access_token")
    } == dict.fromkeys(("password", "client_secret", "Authorization", "access_token"), "[redacted]")
    assert entry["prompt_tokens"] == 5
    assert (entry["msg"], entry["level"], entry["logger"]) == ("x", "info", "t")
