"""What `strata up` prints once the stack is up, and `strata status` again: where everything
is, and copy-paste lines (the `openai` SDK, curl, grpcurl) with credentials that last the whole
session: the dev API key, the master key and the edge admin key, all kept in secrets.json."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from cli.launcher.secrets_file import secrets_path
from cli.launcher.state import Stack

# Reads the access token out of the IdP's JSON answer, with nothing but Python.
TOKEN = "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"access_token\"])'"
DEFAULT_DATA_DIR = "data"


def strata(verb: str, data_dir: Path, offset: int) -> str:
    """How to run `strata <verb>` for this stack, from the current directory."""
    command = f"{_relative(Path(sys.executable).parent / 'strata')} {verb}"
    if data_dir != Path(DEFAULT_DATA_DIR).resolve():
        command += f" --data-dir {shlex.quote(_relative(data_dir))}"
    if offset:
        command += f" --port-offset {offset}"
    return command


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def session_help(stack: Stack, secrets: dict[str, str]) -> str:
    """The copy-paste part of the banner."""
    data_dir = Path(stack.data_dir)
    u = stack.urls
    master, admin = secrets.get("MASTER_KEY", ""), secrets.get("ADMIN_API_KEY", "")
    dev_key = secrets.get("DEV_API_KEY")
    offset = stack.port_offset
    key_line = (
        f"dev API key       {dev_key}   (tenant acme; OPENAI_API_KEY in `strata env`)"
        if dev_key
        else "dev API key       none yet (development only; see the bootstrap lines above)"
    )
    api_key = dev_key or "$TOKEN"
    ai = u["AI_URL"]
    chat = '{"model": "echo-1", "messages": [{"role": "user", "content": "Hello"}]}'
    store = u.get("STORE_URL", "")  # a stack.json from before has none
    return f"""
Portal            {u["CP_URL"]}/portal/   (sign in as admin/admin, alice/alice or bob/bob)
Key-value store   {store}

Credentials for the whole session (all secrets: {secrets_path(data_dir)}):
{key_line}
master key        {master}
edge admin key    {admin}

Set them in your shell (also a fresh user token $TOKEN and $ADMIN_TOKEN):
eval "$({strata("env", data_dir, offset)})"

Chat with the openai SDK (model echo-1 is the bundled echo LLM):
{_python()} - <<'EOF'
from openai import OpenAI
client = OpenAI(base_url="{ai}/v1", api_key="{api_key}")
messages = [{{"role": "user", "content": "Hello"}}]
print(client.chat.completions.create(model="echo-1", messages=messages).choices[0].message.content)
for chunk in client.chat.completions.create(model="echo-1", messages=messages, stream=True):
    print(chunk.choices[0].delta.content or "", end="", flush=True)
print()
EOF

curl -s {ai}/v1/models -H 'Authorization: Bearer {api_key}'
curl -s {ai}/v1/chat/completions -H 'Authorization: Bearer {api_key}' \\
  -H 'Content-Type: application/json' -d '{chat}'
curl -s {u["CP_URL"]}/api/providers -H 'Authorization: Bearer {master}'
curl -s {u["ADMIN_URL"]}/apisix/admin/routes -H 'X-API-KEY: {admin}'
curl -s {u["PROXY_URL"]}/smoke/hello -H 'X-Tenant-ID: acme'
user token (5 min)  curl -s {u["IDP_TOKEN_URL"]} -d grant_type=password \\
  -d client_id=strata-portal -d username=alice -d password=alice -d 'scope=openid tenant' | {TOKEN}
grpcurl -plaintext {u["CP_GRPC"]} list
edge metrics      {u["METRICS_URL"]}
{strata("status", data_dir, offset)}
{strata("logs", data_dir, offset)} [service] [-f]
{strata("stop", data_dir, offset)}
"""


def _python() -> str:
    """The interpreter that has the openai SDK: this one (the project's venv)."""
    return _relative(Path(sys.executable)) if os.path.exists(sys.executable) else "python3"
