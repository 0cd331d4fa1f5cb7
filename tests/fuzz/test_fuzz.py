"""The bounded fuzz run of `make test`: Schemathesis drives every operation each service's
`/openapi.json` documents, as a platform administrator and as a tenant user, on a stack of its
own (`strata up`, port offset 4200), with a fixed seed. It fails on any response >= 500, any
status, content type, header or body (errors included) the document does not describe, and any
request that got no answer (a reset connection); the failures are printed with schemathesis'
own report, each with a curl command that reproduces it. tests/fuzz/README.md has the long run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from shared_kit import launch_stack, stop_stack

from fuzz.harness import (
    PROTECTED_TENANTS,
    ROLES,
    SERVICES,
    STACK_ENV,
    fuzz_all,
    problems,
    stack_env,
    summary,
)

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]

OFFSET = 4200  # no port of it overlaps another stack test's or the default stack's
SEED = 20
MAX_EXAMPLES = 8  # per operation and phase: about 2,600 cases over the 8 runs
PHASES = "examples,fuzzing,stateful"  # the long run adds `coverage` (about 18,000 cases)
MIN_CASES = 2000


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, str]]:
    data = tmp_path_factory.mktemp("fuzz-stack")
    proc, output = await launch_stack(data, OFFSET, env={**os.environ, **STACK_ENV})
    assert "Strata is up" in output, output
    yield await asyncio.to_thread(stack_env, data, OFFSET)
    assert await stop_stack(proc) == 0


async def test_every_documented_operation_fuzzed_as_admin_and_tenant(
    stack: dict[str, str], tmp_path: Path
) -> None:
    runs = await asyncio.to_thread(
        fuzz_all, stack, tmp_path, max_examples=MAX_EXAMPLES, seed=SEED, phases=PHASES
    )
    print(summary(runs))
    assert all(r.ok for r in runs), problems(runs) + "\n" + summary(runs)
    assert {(r.service, r.role) for r in runs} == {(s, r) for s in SERVICES for r in ROLES}
    assert all(r.operations > 0 for r in runs), summary(runs)
    assert sum(r.cases for r in runs) >= MIN_CASES, summary(runs)
    # the harness's own credentials survived the administrator's deletions
    async with aiohttp.ClientSession() as http:
        for tenant in PROTECTED_TENANTS:
            async with http.get(
                f"{stack['CP_URL']}/api/tenants/{tenant}",
                headers={"Authorization": f"Bearer {stack['MASTER_KEY']}"},
            ) as resp:
                assert resp.status == 200, (tenant, await resp.text())
