"""The models load off the start-up path: the gateway answers `/health` (features `loading`)
before they are loaded, a request that needs the PII model waits for it within
`AI_MODEL_WAIT_SECS` and is then refused with 503 `model_loading` (never sent unredacted),
and once the model is there the same request is redacted and answered."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import aiohttp
import openai
import pytest
from ai_kit import MASTER_KEY, client, tenant

import gateways.ai.pii.redactor as redactor_module
from gateways.ai.pii.redactor import Redactor

PROMPT = [{"role": "user", "content": "Please call Priya Raghunathan about SSN 123-45-6789."}]


@pytest.fixture
def held_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The PII model's load blocks until the returned event is set."""
    release = threading.Event()
    real = redactor_module.default_redactor

    def slow() -> Redactor:
        release.wait(30)
        return real()

    monkeypatch.setattr(redactor_module, "default_redactor", slow)
    yield release
    release.set()


async def test_health_answers_while_the_pii_model_loads(gateway, scripted, held_model) -> None:
    # The old gateway loaded the models inside its start-up: it did not answer at all here.
    async with asyncio.timeout(20):
        async with gateway(AI_MODEL_WAIT_SECS="0.5") as ai, aiohttp.ClientSession() as http:
            async with http.get(f"{ai.http_url}/health") as resp:
                health = await resp.json()
            assert resp.status == 200 and health["status"] == "healthy"
            assert health["features"]["pii_redaction"] == "loading"

            chat = {"model": "m-1", "messages": PROMPT}
            headers = {"Authorization": f"Bearer {MASTER_KEY}", "x-tenant-id": tenant()}
            async with http.post(
                f"{ai.http_url}/v1/chat/completions", json=chat, headers=headers
            ) as resp:
                refused = await resp.json()
            assert resp.status == 503
            assert refused["error"]["type"] == "model_loading"
            assert "loading" in refused["error"]["message"]
            assert scripted.attempts == []  # nothing reached the provider, redacted or not

            held_model.set()
            for _ in range(100):
                async with http.get(f"{ai.http_url}/health") as resp:
                    health = await resp.json()
                if set(health["features"].values()) == {"ready"}:
                    break
                await asyncio.sleep(0.1)
            assert health["features"] == {"pii_redaction": "ready", "semantic_cache": "ready"}
            async with client(ai.http_url, tenant()) as sdk:
                await sdk.chat.completions.create(model="m-1", messages=PROMPT)  # type: ignore[arg-type]
    sent = scripted.attempts[0].body["messages"][0]["content"]
    assert sent == "Please call <PERSON> about SSN <SSN>."


async def test_a_request_waits_for_a_model_loading_within_the_bound(
    gateway, scripted, held_model
) -> None:
    async with gateway(AI_MODEL_WAIT_SECS="20") as ai, client(ai.http_url, tenant()) as sdk:
        asyncio.get_running_loop().call_later(0.5, held_model.set)
        await sdk.chat.completions.create(model="m-1", messages=PROMPT)  # type: ignore[arg-type]
    assert scripted.attempts[0].body["messages"][0]["content"] == (
        "Please call <PERSON> about SSN <SSN>."
    )


async def test_a_model_that_failed_to_load_is_a_clear_503(gateway, scripted, monkeypatch) -> None:
    def broken() -> Redactor:
        raise OSError("model files missing")

    monkeypatch.setattr(redactor_module, "default_redactor", broken)
    async with gateway() as ai, client(ai.http_url, tenant()) as sdk:
        with pytest.raises(openai.APIStatusError) as refused:
            await sdk.chat.completions.create(model="m-1", messages=PROMPT)  # type: ignore[arg-type]
        async with aiohttp.ClientSession() as http, http.get(f"{ai.http_url}/health") as resp:
            health = await resp.json()
    assert refused.value.status_code == 503
    assert refused.value.body["type"] == "model_unavailable"  # type: ignore[index]
    assert health["features"]["pii_redaction"] == "failed"
    assert scripted.attempts == []


async def test_models_load_on_a_nicer_thread_than_the_one_serving(monkeypatch) -> None:
    """Loading is background work: its thread is LOADER_NICENESS nicer (so the processes
    starting beside it come first on a small machine); the serving thread keeps its priority."""
    import os

    from gateways.ai import model_loading

    seen: dict[str, int] = {}

    def load() -> Redactor:
        tid = threading.get_native_id()
        seen["loader"] = os.getpriority(os.PRIO_PROCESS, tid)
        raise RuntimeError("not a real load")

    monkeypatch.setattr(redactor_module, "default_redactor", load)
    serving = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    models = model_loading.Models(wait_secs=1.0)
    models.start()
    with pytest.raises(model_loading.ModelNotReady):
        await models.redactor.get()
    await models.close()
    assert seen["loader"] == min(19, serving + model_loading.LOADER_NICENESS)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == serving


async def test_an_embedding_model_that_strays_on_this_cpu_leaves_the_semantic_cache_off(
    gateway, scripted, monkeypatch
) -> None:
    """The int8 build's self-check at load (`Embedder.check`): vectors that stray from the
    fp32 ones it carries, as another CPU's kernels might give, mark the semantic cache
    `failed` in /health; chats are still answered (the exact tier and the provider)."""
    from gateways.ai.cache import embedding
    from gateways.ai.cache.minilm_onnx import OnnxMiniLM

    carried = OnnxMiniLM.reference.fget  # type: ignore[attr-defined]

    def strayed(self: OnnxMiniLM) -> dict[str, list[float]]:
        reference = carried(self)
        texts = list(reference)
        return {t: reference[texts[(i + 1) % len(texts)]] for i, t in enumerate(texts)}

    monkeypatch.setattr(OnnxMiniLM, "reference", property(strayed))
    monkeypatch.setattr(embedding, "_default", None)  # loaded (and checked) afresh
    async with gateway() as ai, aiohttp.ClientSession() as http:
        for _ in range(200):
            async with http.get(f"{ai.http_url}/health") as resp:
                health = await resp.json()
            if health["features"]["semantic_cache"] != "loading":
                break
            await asyncio.sleep(0.1)
        assert health["features"]["semantic_cache"] == "failed"
        async with client(ai.http_url, tenant()) as sdk:
            answer = await sdk.chat.completions.create(
                model="m-1", messages=[{"role": "user", "content": "What is a light-year?"}]
            )
    assert answer.choices[0].message.content and len(scripted.attempts) == 1
