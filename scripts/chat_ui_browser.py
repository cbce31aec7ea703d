#!/usr/bin/env python
"""Drive Open WebUI (pointed at Continuum) in a headless Chromium: the browser half of scripts/chat_ui_e2e.sh.

Signs up as the first (admin) user, picks the Continuum model, states a fact in chat 1, waits until Continuum holds
it as a memory of the end user Open WebUI forwarded (X-User-Id = the Open WebUI user's id), opens a new chat with
"New Chat" and asks for the fact; passes when chat 2's answer names it. Screenshots of both chats; a JSON summary.

Runs in the Open WebUI virtual environment (playwright is installed there) against Debian's chromium; it never
downloads a browser. Only the standard library besides playwright.

    python scripts/chat_ui_browser.py --webui http://127.0.0.1:8012 --continuum http://127.0.0.1:8011 --api-key KEY
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FACT = "My sister Priya lives in Lisbon and I am visiting her in March."
FACT_WORD = "lisbon"
QUESTION = "Where does my sister live?"
NAME, EMAIL, PASSWORD = "Ada Tester", "ada@example.com", "continuum-e2e-password"
# What an assistant message in Open WebUI's chat view is (its answer text lives in #response-content-container).
ASSISTANT = "#response-content-container"


def log(text: str) -> None:
    print(f"[browser {time.strftime('%H:%M:%S')}] {text}", flush=True)


class Continuum:
    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base.rstrip("/"), key

    def get(self, path: str, **params) -> dict:
        url = f"{self.base}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.key}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def user_by_external_id(self, external_id: str) -> dict | None:
        page = self.get("/api/v1/users")
        for user in page.get("results", page.get("items", [])):
            if user.get("external_id") == external_id:
                return user
        return None

    def memories(self, user_id: str) -> list[dict]:
        page = self.get(f"/api/v1/users/{user_id}/memories")
        return page.get("results", page.get("items", []))

    def sessions(self, user_id: str) -> list[dict]:
        page = self.get(f"/api/v1/users/{user_id}/sessions")
        return page.get("results", page.get("items", []))


def usable(memory: dict) -> bool:
    """A memory drawn from the words (not only the words kept as they were) that a next chat may use: active, not
    held for review (scripts/run's tenants hold the model's inferences for a reviewer)."""
    return memory.get("kind") != "episodic" and memory.get("status") == "active"


def dismiss_popups(page: Page) -> None:
    """The "what's new" dialog a fresh Open WebUI shows after the first login."""
    for name in ("Okay, Let's Go!",):
        button = page.get_by_role("button", name=name)
        if button.count() and button.first.is_visible():
            button.first.click()
            page.wait_for_timeout(500)


def sign_up(page: Page, webui: str) -> None:
    page.goto(webui, wait_until="networkidle")
    started = page.get_by_role("button", name="Get started")
    if started.count() and started.first.is_visible():
        started.first.click()
    page.wait_for_selector("#email")
    if page.locator("#name").count():  # the first user signs up (and becomes the admin)
        page.fill("#name", NAME)
    page.fill("#email", EMAIL)
    page.fill("#password", PASSWORD)
    page.locator("button[type=submit]").click()
    page.wait_for_selector("#chat-input", timeout=60_000)
    page.wait_for_timeout(1500)
    dismiss_popups(page)


def webui_user(page: Page) -> dict:
    return page.evaluate("""async () => {
        const r = await fetch('/api/v1/auths/', {headers: {Authorization: 'Bearer ' + localStorage.token}});
        return await r.json();
    }""")


def ensure_model(page: Page, model: str) -> str:
    button = page.locator("#model-selector-model-button").first
    label = button.inner_text().strip()
    if model not in label.lower():
        button.click()
        page.get_by_role("option").filter(has_text=model).first.click()
        page.wait_for_timeout(500)
        label = page.locator("#model-selector-model-button").first.inner_text().strip()
    return label


def send(page: Page, text: str, timeout_s: float) -> str:
    """Type into the chat box, send, and wait until the new answer has stopped changing; return its text."""
    before = page.locator(ASSISTANT).count()
    box = page.locator("#chat-input")
    box.click()
    page.keyboard.type(text)
    page.keyboard.press("Enter")
    deadline = time.monotonic() + timeout_s
    page.wait_for_function(f"document.querySelectorAll('{ASSISTANT}').length > {before}",
                           timeout=timeout_s * 1000)
    # Open WebUI shows a Stop button while the answer streams, and the answer's action buttons once it is done.
    last, changed = None, time.monotonic()
    while time.monotonic() < deadline:
        answer = page.locator(ASSISTANT).last.inner_text().strip()
        streaming = page.locator("button[aria-label='Stop']:visible").count() > 0
        if answer != last:
            last, changed = answer, time.monotonic()
        elif not streaming and time.monotonic() - changed > 2:
            if answer:
                error = chat_error(page)
                if error:
                    raise RuntimeError(f"Open WebUI shows an error instead of an answer: {error}")
                return answer
            if time.monotonic() - changed > 15:  # done, and nothing written: an error box instead of an answer
                shown = page.locator("body").inner_text()[-500:]
                raise RuntimeError(f"no answer; the page ends with: {shown!r}")
        page.wait_for_timeout(1000)
    raise TimeoutError(f"no finished answer within {timeout_s:.0f}s (last text: {last!r})")


def chat_error(page: Page) -> str | None:
    """The error Open WebUI stored on the chat's last assistant message (a provider's error shows in the chat as a
    box, whose text is read like an answer otherwise)."""
    if "/c/" not in page.url:
        return None
    chat_id = page.url.rsplit("/c/", 1)[1].split("?")[0]
    return page.evaluate("""async (id) => {
        const r = await fetch('/api/v1/chats/' + id, {headers: {Authorization: 'Bearer ' + localStorage.token}});
        if (!r.ok) return null;
        const history = ((await r.json()).chat || {}).history || {};
        const msg = (history.messages || {})[history.currentId] || {};
        const e = msg.role === 'assistant' ? msg.error : null;
        return e ? (typeof e === 'string' ? e : (e.content || JSON.stringify(e))) : null;
    }""", chat_id)


def new_chat(page: Page) -> None:
    button = page.locator("#sidebar-new-chat-button")
    if not (button.count() and button.first.is_visible()):
        opener = page.get_by_role("button", name="Open Sidebar")
        if opener.count():
            opener.first.click()
            page.wait_for_timeout(500)
    if button.count() and button.first.is_visible():
        button.first.click()
    else:
        page.get_by_role("link", name="New Chat").first.click()
    page.wait_for_timeout(1500)
    page.wait_for_selector("#chat-input")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--webui", required=True)
    parser.add_argument("--continuum", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--model", default="continuum")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--screenshots", default="docs/screenshots")
    parser.add_argument("--result", default=None)
    parser.add_argument("--memory-wait", type=float, default=600)
    parser.add_argument("--answer-timeout", type=float, default=600)
    parser.add_argument("--headed", action="store_true")
    args = parser.parse_args()
    shots = Path(args.screenshots)
    shots.mkdir(parents=True, exist_ok=True)
    api = Continuum(args.continuum, args.api_key)
    result: dict = {"fact": FACT, "question": QUESTION, "passed": False}
    timings: dict = {}
    result["timings_s"] = timings

    def save() -> None:
        if args.result:
            Path(args.result).write_text(json.dumps(result, indent=2) + "\n")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, headless=not args.headed, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})

        def chat_turn(n: int, text: str) -> str:
            """Send one message in the open chat; its answer, timed and logged, and a screenshot of the chat."""
            t = time.monotonic()
            answer = send(page, text, args.answer_timeout)
            timings[f"chat{n}_answer"] = round(time.monotonic() - t, 1)
            result[f"chat{n}_answer"] = answer
            log(f"chat {n} answer after {timings[f'chat{n}_answer']}s: {answer!r}")
            page.screenshot(path=str(shots / f"open-webui-chat{n}.png"))
            return answer

        try:
            t = time.monotonic()
            sign_up(page, args.webui)
            timings["sign_up"] = round(time.monotonic() - t, 1)
            owui = webui_user(page)
            result["open_webui_user"] = {k: owui.get(k) for k in ("id", "name", "email", "role")}
            log(f"signed up as {owui.get('email')} ({owui.get('role')}), Open WebUI user id {owui.get('id')}")
            result["model_label"] = ensure_model(page, args.model)
            log(f"model: {result['model_label']!r}")

            chat_turn(1, FACT)

            # Continuum's end user is the one Open WebUI forwarded: its external id is Open WebUI's user id.
            t = time.monotonic()
            # The user's words are kept (an episodic memory); the model's remember tool or the extraction task after
            # the turn adds the fact drawn from them.
            user, naming = None, []
            while time.monotonic() - t < args.memory_wait:
                user = user or api.user_by_external_id(owui["id"])
                if user:
                    naming = [m for m in api.memories(user["id"]) if FACT_WORD in m.get("text", "").lower()]
                    if any(usable(m) for m in naming):
                        break
                time.sleep(3)
            timings["memory_extracted"] = round(time.monotonic() - t, 1)
            if not user:
                raise AssertionError(f"Continuum has no end user with external_id {owui['id']!r}: "
                                     "the user was not forwarded")
            result["continuum_user"] = {k: user.get(k) for k in ("id", "external_id", "display_name")}
            result["memories_naming_fact"] = [{k: m.get(k) for k in ("kind", "text", "status", "source_type")}
                                              for m in naming]
            log(f"after {timings['memory_extracted']}s, memories naming {FACT_WORD!r}: "
                f"{result['memories_naming_fact']}")
            if not any(usable(m) for m in naming):
                raise AssertionError(f"no active extracted memory naming {FACT_WORD!r} after {args.memory_wait:.0f}s")

            new_chat(page)
            ensure_model(page, args.model)
            answer2 = chat_turn(2, QUESTION)
            result["chat2_url"] = page.url
            keys = ("id", "state", "opened_at", "closed_at", "close_reason", "previous_id", "message_count")
            result["continuum_sessions"] = [{k: s.get(k) for k in keys} for s in api.sessions(user["id"])]
            result["passed"] = FACT_WORD in answer2.lower()
        except Exception as exc:  # noqa: BLE001 - recorded in the result, with a screenshot of where it stopped
            result["error"] = f"{type(exc).__name__}: {exc}"
            log(f"FAILED: {result['error']}")
            page.screenshot(path=str(shots / "open-webui-failure.png"))
        finally:
            browser.close()
            save()
    log("PASSED: chat 2 names the fact from chat 1" if result["passed"] else "FAILED")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
