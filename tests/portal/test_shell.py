"""The shell: logging in through the IdP's login page, navigation by role, signing out, the
keyboard (skip link, focus on the page heading), and the two layouts (1280x800, a 390-px phone
with its menu button)."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from portal.kit import log_in, open_page, person, shot

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]

OPERATOR_ONLY = ["Service health", "Tenants", "LLM providers", "Edge routes", "Key requests"]


async def test_a_developer_logs_in_through_the_idp_and_gets_the_developer_navigation(
    stack, browser
):
    context = await person(browser)
    page = await context.new_page()
    await page.goto(stack.portal)
    await expect(page.get_by_role("heading", name="Sign in to the Strata portal")).to_be_visible()
    await shot(page, "login-desktop")
    await page.close()

    page = await log_in(context, stack, "alice")
    await expect(page.locator("main[data-ready='usage']")).to_have_count(1)
    nav = page.get_by_role("navigation", name="Main")
    for title in ["Usage", "API keys", "Approvals", "Notifications", "Audit log", "Branding"]:
        await expect(nav.get_by_role("link", name=title, exact=True)).to_be_visible()
    for title in OPERATOR_ONLY:
        await expect(nav.get_by_role("link", name=title, exact=True)).to_have_count(0)
    await expect(page.locator("#user-box")).to_contain_text("Tenant acme")
    await shot(page, "usage-developer-desktop")

    # The session cookie is HttpOnly: no script of the page can read it.
    assert "strata_session" not in await page.evaluate("document.cookie")
    cookies = {c["name"]: c for c in await context.cookies()}
    assert cookies["strata_session"]["httpOnly"] is True

    # Signing out ends the session: a reload asks to sign in again.
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("heading", name="Sign in to the Strata portal")).to_be_visible()
    await page.reload()
    await expect(page.get_by_role("link", name="Sign in")).to_be_visible()
    await context.close()


async def test_an_operator_gets_the_operator_navigation(stack, browser):
    context = await person(browser)
    page = await log_in(context, stack, "admin")
    await expect(page.locator("main[data-ready='health']")).to_have_count(1)
    nav = page.get_by_role("navigation", name="Main")
    for title in OPERATOR_ONLY:
        await expect(nav.get_by_role("link", name=title, exact=True)).to_be_visible()
    await expect(nav.get_by_role("link", name="Branding", exact=True)).to_have_count(0)
    await expect(page.locator("#user-box")).to_contain_text("Platform operator")
    await context.close()


async def test_the_keyboard_reaches_the_content_and_each_page_announces_its_heading(stack, browser):
    context = await person(browser)
    page = await log_in(context, stack, "alice")
    await page.keyboard.press("Tab")  # the first stop on the page is the skip link
    skip = page.get_by_role("link", name="Skip to content")
    await expect(skip).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(page.locator("main")).to_be_focused()

    # Following a navigation link with the keyboard moves the focus to the new page's heading.
    link = page.get_by_role("navigation", name="Main").get_by_role("link", name="API keys")
    await link.focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("main[data-ready='keys']")).to_have_count(1)
    await expect(page.get_by_role("heading", level=1, name="API keys")).to_be_focused()
    await expect(link).to_have_attribute("aria-current", "page")

    # Every form control of the page has a label a screen reader announces.
    unlabeled = await page.evaluate(
        """() => [...document.querySelectorAll('main input, main select, main textarea')]
            .filter(el => !el.labels?.length && !el.getAttribute('aria-label'))
            .map(el => el.name)"""
    )
    assert unlabeled == []
    await context.close()


async def test_the_phone_layout_has_a_menu_and_nothing_wider_than_the_screen(stack, browser):
    context = await person(browser, phone=True)
    page = await log_in(context, stack, "alice")
    menu = page.get_by_role("button", name="Menu")
    nav = page.get_by_role("navigation", name="Main")
    await expect(menu).to_be_visible()
    await expect(menu).to_have_attribute("aria-expanded", "false")
    await expect(nav).to_be_hidden()
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await shot(page, "usage-developer-phone")

    await menu.click()
    await expect(menu).to_have_attribute("aria-expanded", "true")
    await expect(nav).to_be_visible()
    await shot(page, "menu-developer-phone")
    await nav.get_by_role("link", name="API keys").click()
    await expect(page.locator("main[data-ready='keys']")).to_have_count(1)
    await expect(nav).to_be_hidden()  # following a link closes the menu
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await shot(page, "keys-developer-phone")
    await open_page(page, "audit")
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await context.close()
