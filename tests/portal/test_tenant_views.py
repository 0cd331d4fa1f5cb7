"""What a tenant's people see: their branding applied to the whole portal (and kept at the
next login); another tenant's pages refused by the API behind the portal; usage charts per
range; the audit log filtered and exported as CSV."""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import struct
import zlib
from pathlib import Path

import pytest
from playwright.async_api import expect

from portal.kit import log_in, open_page, person, shot, unique

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A one-colour PNG, built by hand (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


async def test_branding_changed_by_the_tenant_is_seen_across_the_portal(stack, browser, tmp_path):
    token = await stack.token("bob")
    branding = f"{stack.urls['CP_URL']}/api/tenants/globex/branding"
    status, before = await stack.api("GET", branding, token=token)
    assert status == 200, before
    logo = tmp_path / "logo.png"
    logo.write_bytes(png(24, 24, (200, 30, 40)))
    title = unique("Globex Portal")

    context = await person(browser)
    page = await log_in(context, stack, "bob")
    await open_page(page, "branding")
    await page.get_by_label("Portal title").fill(title)
    await page.get_by_label("Primary colour").fill("#0a7d32")
    await page.get_by_label("Logo (PNG").set_input_files(str(logo))
    await page.get_by_role("button", name="Save branding").click()
    await expect(page.locator("#brand-title")).to_have_text(title)
    await expect(page.locator("#brand-logo")).to_be_visible()
    colour = await page.evaluate(
        "getComputedStyle(document.querySelector('.topbar')).backgroundColor"
    )
    assert colour == "rgb(10, 125, 50)"
    await shot(page, "branding-desktop")
    status, after = await stack.api("GET", branding, token=token)
    assert after["portal_title"] == title and after["primary_color"] == "#0a7d32"
    assert base64.b64decode(after["logo_base64"]) == logo.read_bytes()

    # A fresh login of the same tenant sees it from the first page on.
    await context.close()
    context = await person(browser, phone=True)
    page = await log_in(context, stack, "bob")
    await expect(page.locator("#brand-title")).to_have_text(title)
    await expect(page).to_have_title(f"Usage · {title}")
    await shot(page, "branding-phone")
    await context.close()
    await stack.api(
        "POST", branding, token=token,
        body={k: before[k] for k in ("portal_title", "primary_color", "logo_base64")},
    )  # fmt: skip


async def test_a_tenant_user_is_refused_another_tenants_pages(stack, browser):
    context = await person(browser)
    page = await log_in(context, stack, "alice")
    await open_page(page, "tenants/globex")
    refusal = page.get_by_role("alert")
    await expect(refusal).to_contain_text("Not allowed (403)")
    await expect(page.locator("main")).not_to_contain_text("Globex Inc")
    await shot(page, "refused-other-tenant-desktop")
    await open_page(page, "providers")
    await expect(page.get_by_role("alert")).to_contain_text("403")

    # The same holds for any call the page's script could make: the BFF forwards alice's own
    # token, and the services refuse another tenant.
    answers = await page.evaluate(
        """async () => {
            const get = async (p) => (await fetch('/portal/api' + p)).status;
            return [await get('/cp/api/tenants/globex'),
                    await get('/cp/api/tenants/globex/branding'),
                    await get('/ai/v1/budget/globex'),
                    await get('/edge/apisix/admin/routes')];
        }"""
    )
    assert answers == [403, 403, 403, 403]
    csrf = await page.evaluate(
        """async () => (await fetch('/portal/api/cp/api/tenants/globex/branding', {
            method: 'POST', headers: {'Content-Type': 'application/json'},
            body: '{"portal_title": "pwned"}'})).status"""
    )
    assert csrf == 403  # no CSRF token: refused before it reaches the API
    _, body = await stack.api("GET", f"{stack.urls['CP_URL']}/api/tenants/globex/branding")
    assert body["portal_title"] != "pwned"
    await context.close()


async def test_usage_ranges_and_the_audit_log_with_filters_and_csv(stack, browser):
    token = await stack.token("alice")
    for n in range(3):
        status, body = await stack.api(
            "POST", f"{stack.urls['AI_URL']}/v1/chat/completions", token=token,
            body={"model": "echo-1", "messages": [{"role": "user", "content": f"portal {n}"}]},
        )  # fmt: skip
        assert status == 200, body
    context = await person(browser)
    page = await log_in(context, stack, "alice")
    tokens = page.get_by_role("img", name="LLM tokens by model")
    for _ in range(60):  # analytics rows arrive in batches: draw again until they are in
        await open_page(page, "usage")
        if "echo-1" in (await tokens.get_attribute("aria-label") or ""):
            break
        await asyncio.sleep(0.5)
    assert "echo-1" in (await tokens.get_attribute("aria-label") or "")
    for r in ("1h", "7d", "24h"):
        await page.get_by_role("button", name=r, exact=True).click()
        await expect(page.get_by_role("button", name=r, exact=True)).to_have_attribute(
            "aria-pressed", "true"
        )
        await expect(page.get_by_role("img", name="Requests and errors")).to_be_visible()
    await expect(page.locator("#budget-left")).not_to_be_empty()
    await shot(page, "usage-developer-desktop")

    await open_page(page, "audit")
    await page.get_by_label("Status").fill("no-such-status")
    await page.get_by_role("button", name="Apply filters").click()
    await expect(page.locator("main")).to_contain_text("No audit rows match.")
    await page.get_by_label("Status").fill("")
    await page.get_by_role("button", name="Apply filters").click()
    await shot(page, "audit-desktop")
    async with page.expect_download() as waiting:
        await page.get_by_role("link", name="Export CSV").click()
    download = await waiting.value
    assert download.suggested_filename == "audit_log.csv"
    text = Path(await download.path()).read_text(encoding="utf-8")  # noqa: ASYNC240
    header = next(csv.reader(io.StringIO(text)))
    assert "tool_name" in header and "tenant_id" in header
    assert all(row["tenant_id"] == "acme" for row in csv.DictReader(io.StringIO(text)))
    await context.close()
