"""The AI gateway while its key-value store is out (issue 19, defect 6), against a Valkey of
its own: paused with SIGSTOP (a hang), then killed (an outage), then started again on the same
port from its append-only file.

- A tenant known to have no budget keeps chatting through the official openai SDK, with a JWT
  (no store needed) and with an issued API key looked up before (held through the outage),
  the response cache off.
- A tenant with a budget gets 503 after one store attempt, which timed out (the client's one
  short timeout, no retry); the next ones get it without any store attempt.
- A key the gateway never looked up is 503: it cannot be checked.
- The store back, everything recovers without a restart: the budget is debited again.
- What the gateway knows is dropped when a budget is set elsewhere, and gets too old.
- Breakers count and open in the replica's memory while the store is out.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import aiohttp
import hiredis
import openai
import pytest
from ai_kit import ECHO_KEY, Scripted, client, pipeline_of, provider, set_providers
from openai.types.chat import ChatCompletionMessageParam
from redis.asyncio import Redis
from redis.exceptions import TimeoutError
from shared_kit import MASTER_KEY, issued_keys_of, running, user_token, valkey_server

from gateways.ai import no_budget, prompt_config
from gateways.ai.pipeline import ChatPipeline
from gateways.ai.providers.keys import CHANGED as PROVIDERS_CHANGED
from gateways.ai.tenants.keys import budget_key, limit_key
from runtime.issued_keys import CHANNEL as KEYS_CHANGED
from runtime.issued_keys import DIGESTS, VERSION, digest
from runtime.stores.kv import HOT_PATH_SECS, connect_kv
from runtime.testing import Serving
from sidecars.echo_llm.provider import echo_provider

pytestmark = pytest.mark.timeout(180)

KEY = "sk-" + "o" * 43  # an issued key of tenant acme (its projection written below)
DURABLE = ("--appendonly", "yes", "--appendfsync", "always")  # as `strata up` runs Valkey


@contextmanager
def own_store(data: Path, port: int | None = None) -> Iterator[tuple[int, Redis]]:
    """A Valkey of this test (durable, so it can be killed and started again) and a client."""
    with valkey_server(data, *DURABLE, port=port) as bound:
        yield bound, connect_kv(f"redis://127.0.0.1:{bound}/0")


class CountingProxy:
    """A TCP proxy in front of the store that records every command sent through it (parsed
    with hiredis, as the store would): what the gateway tried, seen from outside it. A store
    that hangs or is gone is seen through the proxy as the gateway would see it directly."""

    def __init__(self, store_port: int) -> None:
        self.store_port = store_port
        self.commands: list[tuple[str, ...]] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"redis://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/0"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    def tried(self, since: int, word: str) -> list[tuple[str, ...]]:
        """The commands sent since `since` naming `word` in a key or an argument."""
        return [c for c in self.commands[since:] if any(word in part for part in c)]

    async def _serve(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        try:
            store, to_store = await asyncio.open_connection("127.0.0.1", self.store_port)
        except OSError:
            to_client.close()
            return
        parser = hiredis.Reader()

        async def upstream() -> None:
            while data := await client.read(1 << 16):
                parser.feed(data)
                while (command := parser.gets()) is not False:
                    self.commands.append(tuple(p.decode(errors="replace") for p in command))
                to_store.write(data)

        async def downstream() -> None:
            while data := await store.read(1 << 16):
                to_client.write(data)

        # Either side gone (the store killed, the gateway giving up): both are closed.
        pipes = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        for pipe in pipes:
            pipe.cancel()
        to_client.close()
        to_store.close()


async def pid_of(kv: Redis) -> int:
    return int((await kv.info("server"))["process_id"])


def never_left_stopped(stack: ExitStack, pid: int) -> None:
    def kill() -> None:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    stack.callback(kill)


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        assert loop.time() < deadline, f"not within {within}s"
        await asyncio.sleep(0.05)


async def holds(value: bool) -> bool:
    return value


async def answer(sdk: openai.AsyncOpenAI, text: str) -> tuple[str, str]:
    """(content, x-cache) of one chat completion."""
    raw = await sdk.chat.completions.with_raw_response.create(
        model="echo-1", messages=[{"role": "user", "content": text}]
    )
    return raw.parse().choices[0].message.content or "", raw.headers["x-cache"]


async def refused(sdk: openai.AsyncOpenAI, text: str = "hi") -> int:
    with pytest.raises(openai.APIStatusError) as info:
        await sdk.chat.completions.create(
            model="echo-1", messages=[{"role": "user", "content": text}]
        )
    return info.value.status_code


async def budget_call(ai: Serving, method: str, tenant: str, tokens: int | None = None) -> Any:
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method,
            f"{ai.http_url}/v1/budget/{tenant}",
            json=None if tokens is None else {"tokens": tokens},
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
        ) as resp,
    ):
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def ready(ai: Serving) -> ChatPipeline:
    """The gateway's pipeline once both its change feeds are confirmed (what it reads from
    then on may be kept)."""
    pipeline = pipeline_of(ai)
    keys = issued_keys_of(ai)
    await eventually(lambda: holds(keys.watch.trusted and pipeline.budgets.no_budget.watch.trusted))
    return pipeline


async def test_an_outage_serves_tenants_without_a_budget_and_refuses_budgets_at_once(
    gateway: Any, echo: str, idp: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_LLM_API_KEY", ECHO_KEY)
    # Every request reads its tenant's chat configuration while the store answers (none is
    # kept): through the outage, none may try.
    monkeypatch.setattr(prompt_config, "TTL_SECS", 0.0)
    with ExitStack() as stack:
        port, kv = stack.enter_context(own_store(tmp_path))
        pid = await pid_of(kv)
        never_left_stopped(stack, pid)
        await set_providers(kv, echo_provider(echo))
        entry = {"id": "key-outage", "tenant_id": "acme", "name": "outage", "status": "active"}
        await kv.hset(DIGESTS, digest(KEY), json.dumps(entry))  # the control plane's projection
        await kv.incr(VERSION)
        alice, bob = await user_token(idp, "alice", "alice"), await user_token(idp, "bob", "bob")
        proxy = CountingProxy(port)
        async with proxy as through_proxy, gateway(REDIS_URL=through_proxy) as ai:
            pipeline = await ready(ai)
            gate = pipeline.reachability
            # One attempt per command; a request's own calls bounded by the short timeout.
            settings = pipeline.kv.connection_pool.connection_kwargs
            assert settings["retry"].get_retries() == 0 and HOT_PATH_SECS == 0.25
            await budget_call(ai, "POST", "globex", 1_000_000)
            acme_jwt = client(ai.http_url, key=alice, cache=True)
            acme_key = client(ai.http_url, key=KEY, cache=True)
            globex = client(ai.http_url, key=bob)
            assert await answer(acme_jwt, "hi") == ("echo: hi", "MISS")
            assert await answer(acme_key, "hello") == ("echo: hello", "MISS")
            assert (await answer(globex, "hi"))[0] == "echo: hi"

            async def cached() -> bool:
                return (await answer(acme_jwt, "hi"))[1] == "HIT"

            await eventually(cached)  # the cache works while the store does
            assert (await answer(client(ai.http_url, key=KEY), "last"))[0] == "echo: last"
            assert pipeline.budgets.no_budget.known("acme")
            assert not pipeline.budgets.no_budget.known("globex")
            assert proxy.tried(0, budget_key("globex"))  # the budget goes through the proxy

            os.kill(pid, signal.SIGSTOP)  # the store hangs
            mark = len(proxy.commands)
            assert await refused(globex) == 503
            # One store command for that request, given up after the short timeout: nothing
            # was sent again.
            assert len(proxy.tried(mark, "globex")) == 1, proxy.tried(mark, "globex")
            assert gate.down and isinstance(gate.last_failure, TimeoutError)
            assert str(gate.last_failure) == f"the store did not answer within {HOT_PATH_SECS}s"
            mark = len(proxy.commands)
            for n in range(3):
                assert await refused(globex, f"again {n}") == 503
            assert await refused(client(ai.http_url, key="sk-" + "n" * 43)) == 503
            for n in range(3):
                assert await answer(acme_jwt, "hi") == ("echo: hi", "MISS")  # the cache is off
                assert await answer(acme_key, f"hang {n}") == (f"echo: hang {n}", "MISS")
            # Refused and served without trying the store.
            assert proxy.tried(mark, "globex") == proxy.tried(mark, "acme") == []
            assert proxy.tried(mark, digest(KEY)) == proxy.tried(mark, "n" * 43) == []

            os.kill(pid, signal.SIGKILL)  # the store is gone
            await eventually(lambda: holds(pipeline.budgets.no_budget.watch.lost_since is not None))
            for n in range(3):
                assert await answer(acme_jwt, f"gone {n}") == (f"echo: gone {n}", "MISS")
                assert await answer(acme_key, f"gone {n}") == (f"echo: gone {n}", "MISS")
                assert await refused(globex, f"gone {n}") == 503

            stack.enter_context(own_store(tmp_path, port))  # back, from its append-only file

            async def globex_served() -> bool:
                try:
                    return (await answer(globex, "back"))[0] == "echo: back"
                except openai.APIStatusError as exc:
                    assert exc.status_code == 503
                    return False

            await eventually(globex_served)

            async def followed_again() -> bool:  # every follower subscribed to the new store
                channels = (PROVIDERS_CHANGED, no_budget.CHANNEL, KEYS_CHANGED)
                return all(n >= 1 for _, n in await kv.pubsub_numsub(*channels))

            await eventually(followed_again)
            before = (await budget_call(ai, "GET", "globex"))["remaining_tokens"]
            assert (await answer(globex, "once more"))[0] == "echo: once more"
            after = (await budget_call(ai, "GET", "globex"))["remaining_tokens"]
            assert 0 < after < before < 1_000_000  # debited through the store again
            assert await answer(acme_key, "back") == ("echo: back", "MISS")
            assert await refused(client(ai.http_url, key="sk-" + "n" * 43)) == 401
            await eventually(cached)


async def test_what_is_known_is_dropped_on_a_budget_set_elsewhere_and_when_too_old(
    gateway: Any, echo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_LLM_API_KEY", ECHO_KEY)
    with ExitStack() as stack:
        port, kv = stack.enter_context(own_store(tmp_path))
        pid = await pid_of(kv)
        never_left_stopped(stack, pid)
        await set_providers(kv, echo_provider(echo))
        async with gateway(REDIS_URL=f"redis://127.0.0.1:{port}/0") as ai:
            pipeline = await ready(ai)
            known = pipeline.budgets.no_budget
            acme, globex = client(ai.http_url, "acme"), client(ai.http_url, "globex")
            assert (await answer(acme, "hi"))[0] == "echo: hi"
            # Another replica sets acme's budget: the write and its announcement, in the store.
            async with kv.pipeline(transaction=True) as pipe:
                pipe.set(budget_key("acme"), 1000)
                pipe.set(limit_key("acme"), 1000)
                pipe.incr(no_budget.VERSION)
                pipe.publish(no_budget.CHANNEL, "acme")
                await pipe.execute()
            await eventually(lambda: holds(not known.known("acme")))
            assert (await answer(globex, "hi"))[0] == "echo: hi"

            os.kill(pid, signal.SIGSTOP)
            assert await refused(acme) == 503  # its budget fails closed
            assert (await answer(globex, "still"))[0] == "echo: still"
            monkeypatch.setattr(no_budget, "MAX_AGE_SECS", 0.0)
            assert await refused(globex) == 503  # what it knew is too old to count
            os.kill(pid, signal.SIGCONT)


async def test_breakers_count_and_open_in_memory_while_the_store_is_out(
    gateway: Any, tmp_path: Path
) -> None:
    upstream = Scripted()
    with ExitStack() as stack:
        port, kv = stack.enter_context(own_store(tmp_path))
        pid = await pid_of(kv)
        never_left_stopped(stack, pid)
        async with running(upstream.app()) as url:
            await set_providers(kv, provider("flaky", url, models=["m-1"]))
            env = {"AI_BREAKER_FAILURES": "2", "AI_BREAKER_OPEN_SECS": "0.5", "AI_RETRY_MAX": "0"}
            async with gateway(REDIS_URL=f"redis://127.0.0.1:{port}/0", **env) as ai:
                await ready(ai)
                sdk = client(ai.http_url, "acme")
                hi: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
                await sdk.chat.completions.create(model="m-1", messages=hi)
                os.kill(pid, signal.SIGKILL)
                upstream.script = [503, 503]
                for status in (502, 502, 503):  # two failures open it: the third never leaves
                    with pytest.raises(openai.APIStatusError) as info:
                        await sdk.chat.completions.create(model="m-1", messages=hi)
                    assert info.value.status_code == status
                assert info.value.body["type"] == "all_providers_unavailable"  # type: ignore[index]
                assert len(upstream.attempts) == 3

                async def served() -> bool:
                    try:
                        await sdk.chat.completions.create(model="m-1", messages=hi)
                    except openai.APIStatusError as exc:
                        assert exc.status_code == 503
                        return False
                    return True

                await eventually(served)  # open for 0.5 s, then tried again
                assert len(upstream.attempts) == 4


async def test_what_is_known_outlives_a_restart_of_the_store_not_a_budget_written_meanwhile(
    gateway: Any, echo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store started again with its data changes no budget: what the gateway knew still
    serves in the next outage. A budget written while the gateway could not hear it (the
    counter moved, no message came) drops it all once the gateway polls the counter again."""
    monkeypatch.setenv("ECHO_LLM_API_KEY", ECHO_KEY)
    with ExitStack() as stack:
        port, kv = stack.enter_context(own_store(tmp_path))
        never_left_stopped(stack, await pid_of(kv))
        await set_providers(kv, echo_provider(echo))
        async with gateway(REDIS_URL=f"redis://127.0.0.1:{port}/0") as ai:
            pipeline = await ready(ai)
            known, gate = pipeline.budgets.no_budget, pipeline.reachability
            acme = client(ai.http_url, "acme")
            assert (await answer(acme, "hi"))[0] == "echo: hi"

            os.kill(await pid_of(kv), signal.SIGKILL)
            await eventually(lambda: holds(known.watch.lost_since is not None))
            stack.enter_context(own_store(tmp_path, port))  # back, from its append-only file
            await eventually(lambda: holds(known.watch.trusted and not gate.down))
            pid = await pid_of(kv)
            never_left_stopped(stack, pid)
            os.kill(pid, signal.SIGSTOP)  # the next outage, no chat in between
            assert (await answer(acme, "still"))[0] == "echo: still"
            os.kill(pid, signal.SIGCONT)

            await eventually(lambda: holds(not gate.down))
            assert (await answer(acme, "again"))[0] == "echo: again"
            async with kv.pipeline(transaction=True) as pipe:  # written, its message missed
                pipe.set(budget_key("acme"), 1000)
                pipe.incr(no_budget.VERSION)
                await pipe.execute()
            await eventually(lambda: holds(not known.known("acme")))  # the poll: it moved
            os.kill(pid, signal.SIGSTOP)
            assert await refused(acme) == 503
            os.kill(pid, signal.SIGCONT)
