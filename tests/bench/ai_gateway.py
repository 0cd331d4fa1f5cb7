"""AI gateway benchmark: the echo LLM provider directly, and through the gateway; then the
cost of PII redaction and the latency of the two cache tiers.

    .venv/bin/python tests/bench/ai_gateway.py [--runs 3] [--seconds 5] [--concurrency 1 32]
        [--port-offset 600]

Needs `wrk` (Debian: `apt-get install -y wrk`). Starts `strata up` on ports +600 (or
`--port-offset`: two people's runs on one machine need not share the stack lock) with a fresh
data directory, registers the echo LLM sidecar as an `openai_compatible` provider through
the control plane (`POST /api/providers`, a `manual` key: development), creates three tenants
through the control plane, each with its chat configuration (`PUT .../prompt-config`) and a
token budget (as tenant creation provisions one, so every request reserves and settles it):

- `bench` (redaction off, cache off): the proxy path. Non-stream and stream (`stream: true`,
  read to `data: [DONE]`) at each concurrency, the echo provider directly and through the
  gateway's `/v1/chat/completions`, and through the floor (`ai_floor.py`: the gateway's
  front door, HTTP client and two store round trips with none of its features; a stream's
  events relayed as read);
- `bench-pii` (redaction on, cache off): every request a new text with an e-mail, a name and a
  phone number (so no redaction is remembered): the added CPU of redaction is this row's CPU
  per request minus the proxy row's;
- `bench-cache` (redaction off, cache on): the same question every time (after the first:
  exact hits, `x-cache: HIT`), and a paraphrase of it padded with a different run of spaces
  and tabs every time, in every run (no exact key matches, no embedding is remembered: each
  is computed; semantic hits, `x-cache: SEMANTIC_HIT`).

For each row: requests/s, p50 and p99 latency, and for the gateway its CPU time per request
(utime+stime of its processes, from /proc/<pid>/stat, divided by the requests wrk completed),
and the echo provider's: on its own in the direct rows, and in the same window beside the
gateway's in the proxied rows. Medians of `--runs` runs. Everything listens on 127.0.0.1; the
2 shared cores are shared by wrk, the gateway, the echo provider and the stores, so absolute
req/s are low: CPU per request is the figure that travels, and on a machine whose speed drifts
between runs, the gateway's ÷ the provider's in the same window.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_kit import call, free_port, measure, post, script, start_stack, wait_for, wrk

OFFSET = 600
BODY = {"model": "echo-1", "messages": [{"role": "user", "content": "Say hello to the bench."}]}
PII_TEXT = (
    "Please email jordan.{n}@example.com and call Priya Raghunathan on (212) 555-0147 "
    "about order {n}."
)
ASKED = "How many days are in a leap year?"
PARAPHRASE = "How many days does a leap year have?{spaces}"
TENANTS = {
    "bench": {"pii_redaction": False, "cache_enabled": False},
    "bench-pii": {"pii_redaction": True, "cache_enabled": False},
    "bench-cache": {"pii_redaction": False, "cache_enabled": True},
}


def x_cache(url: str, body: str, headers: dict[str, str]) -> str:
    """One request as wrk would send it (padded as wrk pads request 13); its `x-cache`."""
    body = body.replace("{n}", "13").replace("{spaces}", "\\t  \\t\\t")
    request = urllib.request.Request(
        url, data=body.encode(), headers={**headers, "Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return resp.headers["x-cache"]  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--port-offset", type=int, default=OFFSET)
    args = parser.parse_args()
    offset = args.port_offset
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        stack, master, pids = start_stack(tmp / "data", offset)
        try:
            gateway_pid, echo_pid = pids["ai-gateway"], pids["echo-llm"]
            echo = f"http://127.0.0.1:{8082 + offset}"
            gateway = f"http://127.0.0.1:{4000 + offset}"
            provider = {
                "id": "echo", "display_name": "Echo LLM", "type": "openai_compatible",
                "base_url": echo, "auth_type": "bearer",
                "key_source": {"type": "manual", "value": "bench-provider-key"},
                "model_patterns": ["echo-*"], "default_models": ["echo-1"], "enabled": True,
            }  # fmt: skip
            controlplane = f"http://127.0.0.1:{4001 + offset}"
            print(post(f"{controlplane}/api/providers", provider, master))
            for t, switches in TENANTS.items():
                post(f"{controlplane}/api/tenants", {"id": t, "name": t, "plan": "enterprise"},
                     master)  # fmt: skip
                call("PUT", f"{controlplane}/api/tenants/{t}/prompt-config", switches, master)
                post(f"{gateway}/v1/budget/{t}", {"tokens": 10**12}, master)
            time.sleep(2)  # every gateway replica picks the changes up within a second
            url = "/v1/chat/completions"
            direct_headers = {"Authorization": "Bearer x"}

            def through(t: str) -> dict[str, str]:
                return {"Authorization": f"Bearer {master}", "x-tenant-id": t}

            floor, floor_url = _floor(tmp / "data", echo)
            rows = []
            try:
                for stream in (False, True):
                    body = json.dumps({**BODY, "stream": stream})
                    direct = script(tmp / f"direct-{stream}.lua", body, direct_headers)
                    proxied = script(tmp / f"gateway-{stream}.lua", body, through("bench"))
                    kind = "stream" if stream else "non-stream"
                    for c in args.concurrency:
                        rows.append(measure(f"echo direct, {kind}, c={c}", echo + url, echo_pid, c,
                                            args, script=direct))  # fmt: skip
                        rows.append(measure(f"through the gateway, {kind}, c={c}", gateway + url,
                                            gateway_pid, c, args, script=proxied,
                                            upstream=echo_pid))  # fmt: skip
                        rows.append(measure(f"the floor, {kind}, c={c}", floor_url + url,
                                            floor.pid, c, args, script=direct,
                                            upstream=echo_pid))  # fmt: skip
            finally:
                floor.terminate()
                floor.wait(timeout=10)
            pii = json.dumps({**BODY, "messages": [{"role": "user", "content": PII_TEXT}]})
            redacting = script(tmp / "pii.lua", pii, through("bench-pii"), varying=True)
            for c in args.concurrency:
                rows.append(measure(f"redaction on, new PII text, c={c}", gateway + url,
                                    gateway_pid, c, args, script=redacting))  # fmt: skip
            asked = json.dumps({**BODY, "messages": [{"role": "user", "content": ASKED}]})
            exact = script(tmp / "exact.lua", asked, through("bench-cache"))
            wrk(gateway + url, 1, 1, script=exact)  # the first answer is stored
            time.sleep(1)
            reworded = json.dumps({**BODY, "messages": [{"role": "user", "content": PARAPHRASE}]})
            semantic = script(tmp / "semantic.lua", reworded, through("bench-cache"), varying=True)
            # Measured only once each row is shown to be what it says.
            assert x_cache(gateway + url, asked, through("bench-cache")) == "HIT"
            assert x_cache(gateway + url, reworded, through("bench-cache")) == "SEMANTIC_HIT"
            assert x_cache(gateway + url, pii, through("bench")) == "MISS"
            for c in args.concurrency:
                rows.append(measure(f"cache: exact hit, c={c}", gateway + url, gateway_pid, c,
                                    args, script=exact))  # fmt: skip
                rows.append(measure(f"cache: semantic hit, c={c}", gateway + url, gateway_pid, c,
                                    args, script=semantic))  # fmt: skip
            print(json.dumps(rows))
        finally:
            stack.send_signal(signal.SIGINT)
            stack.wait(timeout=60)


def _floor(data_dir: Path, echo: str) -> tuple[subprocess.Popen[bytes], str]:
    """`ai_floor.py` on a free port, on the stack's store (as the gateway reaches it) and in
    front of the same echo provider: the process, and its URL once it answers a chat."""
    store = json.loads((data_dir / "stack.json").read_text())["urls"]["STORE_URL"]
    port = free_port()
    floor = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("ai_floor.py")), str(port), store, echo]
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/v1/chat/completions", BODY)
        answer = post(f"{url}/v1/chat/completions", BODY, "x")
        assert answer["object"] == "chat.completion", answer
    except BaseException:
        floor.kill()
        raise
    return floor, url


if __name__ == "__main__":
    main()
