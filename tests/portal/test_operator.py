"""The operator's pages in the browser: tenants (create, change plan, suspend, delete),
providers (add with a key source, test: valid with the discovered models, or the error;
no secret shown), settings (the API's refusal shown), service health."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from portal.kit import log_in, open_page, person, shot, unique

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]


async def test_a_tenant_is_created_replanned_suspended_and_deleted(stack, browser):
    context = await person(browser)
    page = await log_in(context, stack, "admin")
    tenant = unique("portal-t")
    await open_page(page, "tenants")
    await page.get_by_label("Name").fill(f"Portal {tenant}")
    await page.get_by_label("ID (optional)").fill(tenant)
    await page.get_by_role("button", name="Create tenant").click()
    listing = page.get_by_role("region", name="Tenants")
    await expect(listing).to_contain_text(tenant)
    await shot(page, "tenants-desktop")

    await page.get_by_role("link", name=f"Portal {tenant}").click()
    await expect(page.locator("main[data-ready='tenants']")).to_have_count(1)
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Tenant {tenant}")
    await page.get_by_label("Plan", exact=True).select_option("pro")
    await page.get_by_role("button", name="Change plan").click()
    await expect(page.locator(".kv")).to_contain_text("2,500 requests per minute")
    await page.get_by_role("button", name="Suspend").click()
    await expect(page.locator(".kv")).to_contain_text("suspended")
    await shot(page, "tenant-detail-desktop")
    status, body = await stack.api("GET", f"{stack.urls['CP_URL']}/api/tenants/{tenant}")
    assert (status, body["plan"], body["status"]) == (200, "pro", "suspended")

    await page.get_by_role("button", name="Delete tenant").click()
    await page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    await expect(page.locator("main[data-ready='tenants']")).to_have_count(1)
    await expect(page.get_by_role("region", name="Tenants")).not_to_contain_text(tenant)
    status, _ = await stack.api("GET", f"{stack.urls['CP_URL']}/api/tenants/{tenant}")
    assert status == 404
    await context.close()


async def test_a_provider_is_added_and_tested_and_no_secret_is_shown(stack, browser):
    _, body = await stack.api("GET", f"{stack.urls['CP_URL']}/api/providers")
    echo = next(p for p in body["providers"] if p["id"] == "echo")
    context = await person(browser)
    page = await log_in(context, stack, "admin")
    await open_page(page, "providers")

    good, secret = unique("echo-copy"), "sk-portal-never-shown-1234"
    form = page.get_by_role("form", name="Add a provider")
    await form.get_by_label("ID", exact=True).fill(good)
    await form.get_by_label("Display name").fill("Echo, again")
    await form.get_by_label("Base URL").fill(echo["base_url"])
    await form.get_by_label("Model patterns").fill("echo-*")
    await form.get_by_label("Source").select_option("env_var")
    await form.get_by_label("Environment variable").fill(echo["key_source"]["var_name"])
    await form.get_by_role("button", name="Save provider").click()
    await expect(page.get_by_role("region", name="LLM providers")).to_contain_text(good)
    await page.get_by_role("button", name=f"Test {good}").click()
    result = page.locator(f".provider-status[data-provider='{good}'] .test-result")
    await expect(result).to_contain_text("Valid: 2 models")
    await expect(result).to_contain_text("echo-1")

    # A key typed in (development only) is stored, never shown again; an unreachable
    # provider's test shows its error.
    broken = unique("nowhere")
    await form.get_by_label("ID", exact=True).fill(broken)
    await form.get_by_label("Display name").fill("Nowhere")
    await form.get_by_label("Base URL").fill("http://127.0.0.1:9/v1")
    await form.get_by_label("Source").select_option("manual")
    await form.get_by_label("API key").fill(secret)
    await form.get_by_role("button", name="Save provider").click()
    await expect(page.get_by_role("region", name="LLM providers")).to_contain_text(broken)
    await page.get_by_role("button", name=f"Test {broken}").click()
    failed = page.locator(f".provider-status[data-provider='{broken}'] .test-result")
    await expect(failed).to_contain_text("Error:")
    assert secret not in await page.content()
    await expect(page.get_by_role("region", name="LLM providers")).to_contain_text("1234")
    await shot(page, "providers-desktop")
    for provider in (good, broken):
        await page.get_by_role("button", name=f"Delete {provider}").click()
        await page.get_by_role("dialog").get_by_role("button", name="Delete").click()
        await expect(page.get_by_role("region", name="LLM providers")).not_to_contain_text(provider)
    await context.close()


async def test_settings_show_the_apis_refusal_and_health_shows_every_layer(stack, browser):
    context = await person(browser)
    page = await log_in(context, stack, "admin")
    await open_page(page, "settings")
    await page.get_by_label("Audit log").fill("sometimes")
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.get_by_role("alert")).to_contain_text("audit_log_ttl")
    await page.get_by_label("Audit log").fill("forever")
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.get_by_role("alert")).to_have_count(0)
    await shot(page, "settings-desktop")

    await open_page(page, "health")
    health = page.get_by_role("region", name="Service health")
    for service in ("edge-proxy", "ai-gateway", "agent-gateway"):
        await expect(health.get_by_role("row", name=service)).to_contain_text("healthy")
    await context.close()
