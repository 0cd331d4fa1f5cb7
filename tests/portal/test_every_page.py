"""Every page of each person's navigation, drawn at 1280x800 and on a 390-px phone: no script
error, no refusal, nothing wider than the phone's screen, and a screenshot of each
(tests/portal/screenshots/<page>-<who>-<desktop|phone>.png)."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from portal.kit import log_in, open_page, person, shot

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]


@pytest.mark.parametrize("who", ["admin", "alice"])
@pytest.mark.parametrize("phone", [False, True], ids=["desktop", "phone"])
async def test_every_page_draws_without_an_error(stack, browser, who, phone):
    context = await person(browser, phone=phone)
    page = await log_in(context, stack, who)
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    pages = await page.eval_on_selector_all(
        "nav a[data-page]", "links => links.map(a => a.dataset.page)"
    )
    assert len(pages) >= (14 if who == "admin" else 8)
    for name in pages:
        await open_page(page, name)
        await expect(page.get_by_role("alert")).to_have_count(0)
        if phone:
            assert await page.evaluate("document.documentElement.scrollWidth") <= 390, name
        await shot(page, f"{name}-{'operator' if who == 'admin' else 'developer'}-"
                   f"{'phone' if phone else 'desktop'}")  # fmt: skip
    assert errors == []
    await context.close()
