"""The portal's browser tests: one `strata up` on this package's port offset (started once,
stopped after the last test), Debian's Chromium driven by Playwright (never Playwright's own
browser download), one fresh browser context per person, screenshots written as PNG."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, async_playwright

from portal.kit import CHROMIUM, CHROMIUM_FLAGS, Stack


@pytest.fixture(scope="package")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    attached = os.environ.get("PORTAL_STACK")
    if attached:  # a stack started by hand: `strata up --data-dir D --port-offset 5400`
        yield Stack.attach(attached)
        return
    running = Stack(tmp_path_factory.mktemp("portal"))
    await running.start()
    try:
        yield running
    finally:
        assert await running.stop() == 0


@pytest.fixture(scope="package")
async def browser() -> AsyncIterator[Browser]:
    if not os.path.exists(CHROMIUM):  # noqa: ASYNC240 (one stat, before anything runs)
        pytest.fail(f"{CHROMIUM} is missing: `make install` installs Debian's chromium")
    async with async_playwright() as playwright:
        # launch() gives Chromium a fresh temporary --user-data-dir of its own each time.
        chromium = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield chromium
        finally:
            await chromium.close()
