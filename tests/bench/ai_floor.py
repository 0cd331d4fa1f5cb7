"""The floor of a proxied chat: what the AI gateway's parts cost with none of its features.

    .venv/bin/python tests/bench/ai_floor.py PORT STORE_URL UPSTREAM_URL

An aiohttp app on uvloop (the gateway's front door and loop) with one route,
`POST /v1/chat/completions`: it parses the JSON body with the gateway's codec, makes the two
store round trips every gateway chat makes through the same batcher (one before the call, as
the budget's reservation; one after it, as the settlement and log row), forwards the body to
UPSTREAM_URL through the gateway's HTTP client, and answers the upstream's JSON re-encoded;
a `"stream": true` body gets the upstream's server-sent events relayed as they come, bytes
as read (no event parsed or re-framed). No authentication, validation, routing, metrics, log
line or budget arithmetic.

`ai_gateway.py` measures it beside the gateway in the same run: the gateway's CPU per request
minus the floor's is what its features cost, and the floor is what no change to them can
remove (short of another front door or fewer store round trips).
"""

from __future__ import annotations

import sys
from pathlib import Path

import uvloop
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from runtime import json_codec
from runtime.http1.client import HttpClient
from runtime.stores.kv import connect_kv
from runtime.stores.kv_pipeline import hot_command

HEADERS = {"content-type": "application/json", "authorization": "Bearer floor"}


def build(store_url: str, upstream: str) -> web.Application:
    kv = connect_kv(store_url)
    http = HttpClient()
    target = upstream.rstrip("/") + "/v1/chat/completions"

    async def chat(request: web.Request) -> web.StreamResponse:
        body = json_codec.loads(await request.read())
        await hot_command(kv, "INCRBY", "bench:floor:reserved", 1)
        answer = await http.request("POST", target, HEADERS, json_codec.dumps(body), idle_secs=30)
        row = json_codec.dumps({"model": body.get("model"), "tokens": 1})
        log_row = ("XADD", "bench:floor:rows", "MAXLEN", "~", "1000", "*", "r", row)
        if body.get("stream") is True:
            events = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            try:
                await events.prepare(request)
                while chunk := await answer.next_chunk():
                    await events.write(chunk)
                await hot_command(kv, *log_row)
                await events.write_eof()
            except ConnectionResetError:
                pass  # the client went (wrk closes its connections as its run ends)
            finally:
                answer.close()
            return events
        try:
            completion = json_codec.loads(await answer.read())
        finally:
            answer.close()
        await hot_command(kv, *log_row)
        return web.Response(body=json_codec.dumps(completion), content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def main() -> None:
    port, store_url, upstream = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    uvloop.install()
    web.run_app(
        build(store_url, upstream), host="127.0.0.1", port=port, access_log=None, print=None
    )


if __name__ == "__main__":
    main()
