"""The playground in a real browser: Debian's Chromium, headless, driven by Playwright against the live server (a
thread of this process, so respx answers its model calls too). A staff user logs in through the admin's login form,
chats as an end user twice and reads the answer, the context's sections, the receipt's link and the memory the first
message wrote; a user who is not staff gets the login page.

Chromium is the system's (`apt-get install chromium`; ./scripts/test installs it where apt-get exists), never a
browser Playwright downloads. Without it the test fails under CI and is skipped elsewhere, saying why."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.assistant.scripted_llm import answer
from tests.browser import chromium_page

from .conftest import SISTER, URL

# PLAYGROUND_SCREENSHOT=docs/screenshots/playground.png keeps a picture of the page after the first turn.
SCREENSHOT = os.environ.get("PLAYGROUND_SCREENSHOT", "")


@pytest.fixture
def page():
    with chromium_page() as tab:
        yield tab


def log_in(page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/admin/login/?next={URL}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_load_state()


def send(page, tenant, external_id: str, text: str) -> None:
    page.select_option("#id_tenant", str(tenant.pk))
    page.fill("#id_external_id", external_id)
    page.fill("#id_message", text)
    with page.expect_navigation():
        page.click("#send")


def test_staff_chat_as_an_end_user_and_see_the_turn(live_server, llm, eager, staff, alice, page):
    llm.add(answer("How lovely: Priya in Lisbon."), answer("Your sister Priya lives in Lisbon."))
    log_in(page, live_server.url, "carol", "carol-pass-1")
    assert page.url.endswith(URL)
    assert page.locator("h1").inner_text() == "Playground"

    send(page, alice, "priya-sibling", SISTER)
    assert page.locator("#answer").inner_text() == "How lovely: Priya in Lisbon."
    sections = page.locator("#context-sections").inner_text()
    for label in ("System prompt", "Tool definitions", "Retrieved memories", "Recent turns", "The new message"):
        assert label in sections
    assert page.locator("#context-shown").inner_text().count(SISTER) == 1  # the input, as the model read it
    assert "/admin/orchestration/contextreceipt/" in page.locator("#receipt-link").get_attribute("href")
    changed = page.locator("#memories-changed").inner_text()
    assert "Priya lives in Lisbon" in changed and "created" in changed
    if SCREENSHOT:
        Path(SCREENSHOT).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOT, full_page=True)

    send(page, alice, "priya-sibling", "Where does my sister live?")
    assert page.locator("#answer").inner_text() == "Your sister Priya lives in Lisbon."
    assert SISTER in page.locator("#context-shown").inner_text()  # the first turn, in the second's context
    assert "Where does my sister live?" in page.locator("#recent-messages").inner_text()
    assert [m["messages"][-1]["content"] for m in llm.requests] == [SISTER, "Where does my sister live?"]

    with page.expect_navigation():
        page.click("#new-session")
    assert "Closed session" in page.locator("#closed").inner_text()


@pytest.fixture
def dave(django_user_model):
    return django_user_model.objects.create_user("dave", password="dave-pass-1")


# The database is set up by fixtures that come before `page`: Playwright's sync API runs an event loop in this thread,
# and Django refuses database calls from a thread with a running loop (the live server's own thread has none).
def test_a_user_who_is_not_staff_is_sent_to_the_login_page(live_server, dave, page):
    log_in(page, live_server.url, "dave", "dave-pass-1")
    assert "/admin/login/" in page.url
    assert "staff account" in page.locator(".errornote").inner_text()
    page.goto(f"{live_server.url}{URL}")
    assert page.url.endswith(f"/admin/login/?next={URL}")
    assert page.locator("#id_username").is_visible()
