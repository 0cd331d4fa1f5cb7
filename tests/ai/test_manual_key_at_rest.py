"""A manual provider key (issue 19, defect 5): saved through the control plane, it is sealed
in the store with the platform keyring; the AI gateway opens it and the provider receives the
key itself, through the official OpenAI SDK; after a rotation (a new data key first) the key
sealed under the old one still works, and the control plane's next start re-seals it."""

from __future__ import annotations

import aiohttp
from ai_kit import Scripted, client, tenant
from shared_kit import MASTER_KEY, running

from controlplane.app import build as build_controlplane
from controlplane.config import ControlPlaneConfig
from gateways.ai.providers import keys as providers_keys
from runtime.keyring import Keyring, kid_of, new_key, parse_keys
from runtime.testing import serving

MANUAL = "sk-manual-provider-key-0123456789"
K1, K2 = new_key("k1"), new_key("k2")
MASTER = {"Authorization": f"Bearer {MASTER_KEY}"}


async def save_manual_provider(cp_url: str, base_url: str) -> None:
    body = {
        "id": "manual-llm",
        "type": "openai_compatible",
        "base_url": base_url,
        "key_source": {"type": "manual", "value": MANUAL},
        "default_models": ["m-manual"],
    }
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{cp_url}/api/providers", json=body, headers=MASTER) as resp,
    ):
        assert resp.status == 200, await resp.text()


async def test_a_sealed_manual_key_reaches_the_provider_across_a_rotation(
    kv, gateway, config_for, stores_for
) -> None:
    upstream = Scripted()
    await kv.delete(providers_keys.PROVIDERS, providers_keys.SECRETS)
    async with running(upstream.app()) as url:
        cp_config = config_for(ControlPlaneConfig, STRATA_DATA_KEYS=K1)
        async with serving(build_controlplane(cp_config, stores_for(cp_config))) as cp:
            await save_manual_provider(cp.http_url, f"{url}/v1")
        stored = await kv.hget(providers_keys.SECRETS, "manual-llm")
        assert MANUAL not in stored and kid_of(stored) == "k1"
        assert Keyring(parse_keys(K1), MASTER_KEY).open(
            stored, providers_keys.secret_context("manual-llm")
        ) == (MANUAL)

        # The AI gateway runs with the rotated keyring: k2 seals, k1 still opens.
        async with gateway(STRATA_DATA_KEYS=f"{K2},{K1}") as ai:
            async with client(ai.http_url, tenant()) as sdk:
                answer = await sdk.chat.completions.create(
                    model="m-manual", messages=[{"role": "user", "content": "hi"}]
                )
            assert answer.choices[0].message.content
            assert upstream.attempts[-1].headers["Authorization"] == f"Bearer {MANUAL}"

            cp_config = config_for(ControlPlaneConfig, STRATA_DATA_KEYS=f"{K2},{K1}")
            async with serving(build_controlplane(cp_config, stores_for(cp_config))):
                resealed = await kv.hget(providers_keys.SECRETS, "manual-llm")
            assert kid_of(resealed) == "k2" and MANUAL not in resealed

        # Re-sealed under k2: a gateway holding only k2 opens it.
        async with gateway(STRATA_DATA_KEYS=K2) as ai, client(ai.http_url, tenant()) as sdk:
            await sdk.chat.completions.create(
                model="m-manual", messages=[{"role": "user", "content": "again"}]
            )
        assert upstream.attempts[-1].headers["Authorization"] == f"Bearer {MANUAL}"
