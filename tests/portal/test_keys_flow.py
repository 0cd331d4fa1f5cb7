"""The key workflow in the browser: an operator creates an edge route as JSON (the Admin
API's refusal shown under the editor first), a developer requests a key for it, the operator
approves and copies the key (shown once), the key works through the edge, the developer sees
it masked, reads the approval notification and revokes the key."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from playwright.async_api import expect

from portal.kit import log_in, open_page, person, shot, unique

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]


async def edge_status(url: str, key: str | None, wanted: int) -> int:
    """The edge's answer, asked again while the route or consumer is still on its way to the
    workers (xDS) and the answer is not yet `wanted`; the last status seen."""
    status = 0
    async with aiohttp.ClientSession() as http:
        for _ in range(100):
            async with http.get(url, headers={"apikey": key} if key else {}) as resp:
                status = resp.status
            if status == wanted:
                break
            await asyncio.sleep(0.1)
    return status


async def test_a_key_is_requested_approved_copied_once_used_and_revoked(stack, browser):
    route_id = unique("portal-hello")
    name = unique("alice-app")
    operator = await person(browser)
    admin = await log_in(operator, stack, "admin")

    # The operator writes the route as JSON; a plugin setting its schema refuses comes back
    # from the Admin API and is shown next to the editor.
    await open_page(admin, "routes")
    await admin.get_by_label("Route ID").fill(route_id)
    editor = admin.get_by_label("Route (JSON)")
    bad = {
        "uri": f"/{route_id}/*",
        "plugins": {"key-auth": {"header": 5}},
        "upstream_id": "mock-backend",
    }
    await editor.fill(json.dumps(bad))
    await admin.get_by_role("button", name="Save route").click()
    error = admin.locator("#route-error [role=alert]")
    await expect(error).to_contain_text("The edge refused the route (HTTP 400)")
    await expect(error).to_contain_text("key-auth")
    await expect(editor).to_have_attribute("aria-invalid", "true")
    await shot(admin, "routes-admin-api-error-desktop")
    good = {"uri": f"/{route_id}/*", "plugins": {"key-auth": {}}, "upstream_id": "mock-backend"}
    await editor.fill(json.dumps(good))
    await admin.get_by_role("button", name="Save route").click()
    await expect(admin.get_by_role("region", name="Edge routes")).to_contain_text(route_id)
    await expect(editor).not_to_have_attribute("aria-invalid", "true")

    # The developer asks for a key to it.
    developer = await person(browser)
    alice = await log_in(developer, stack, "alice")
    await open_page(alice, "keys")
    await alice.get_by_label("Key name").fill(name)
    await alice.get_by_label("Routes").fill(route_id)
    await alice.get_by_label("Reason").fill("the hello service for our app")
    await alice.get_by_role("button", name="Request key").click()
    await expect(alice.get_by_role("region", name="Pending key requests")).to_contain_text(name)
    await shot(alice, "keys-developer-desktop")

    # The operator approves it: the full key is shown once, and copied.
    await open_page(admin, "key-requests")
    await shot(admin, "key-requests-desktop")
    await admin.get_by_role("button", name=f"Approve {name}").click()
    dialog = admin.get_by_role("dialog")
    await expect(dialog).to_contain_text(f"Key {name} approved")
    key = await dialog.get_by_label("Full key").input_value()
    assert len(key) > 20
    await shot(admin, "key-approved-once-desktop")
    await dialog.get_by_role("button", name="Copy").click()
    await expect(dialog.get_by_role("button", name="Copied")).to_be_visible()
    assert await admin.evaluate("navigator.clipboard.readText()") == key
    await dialog.get_by_role("button", name="Done").click()
    await expect(admin.get_by_role("dialog")).to_have_count(0)
    assert key not in await admin.content()  # shown once: gone with the dialog
    await expect(admin.get_by_role("region", name="Pending key requests")).to_have_count(0)

    # The key opens the route at the edge; no key, no entry.
    url = f"{stack.urls['PROXY_URL']}/{route_id}/hello"
    assert await edge_status(url, key, 200) == 200
    assert await edge_status(url, None, 401) == 401

    # The developer sees the key masked, never whole, and the approval notification.
    await open_page(alice, "keys")
    keys = alice.get_by_role("region", name="API keys")
    await expect(keys).to_contain_text(name)
    assert key not in await alice.content()
    await open_page(alice, "notifications")
    unread = alice.locator("li.unread", has_text="key_approved").first
    await expect(unread).to_be_visible()
    await shot(alice, "notifications-developer-desktop")
    await unread.get_by_role("button", name="Mark").click()
    await expect(alice.locator("main[data-ready='notifications']")).to_have_count(1)

    # Revoked: the edge refuses the key again.
    await open_page(alice, "keys")
    await alice.get_by_role("button", name=f"Revoke key {name}").click()
    await alice.get_by_role("dialog").get_by_role("button", name="Revoke").click()
    row = alice.get_by_role("row", name=name)
    await expect(row).to_contain_text("revoked")
    assert await edge_status(url, key, 401) == 401
    await operator.close()
    await developer.close()
