"""fake_rvc's live page in headless Chromium: posted events appear without a reload."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest

from fake_rvc import FakeRvcServer
from robot_mcp_kit.models import TaskEvent, new_event_id
from robot_mcp_kit.signing import signed_headers

CHROMIUM = Path("/usr/bin/chromium")
SECRET = "s3cret"

_NO_CHROMIUM = not CHROMIUM.exists() and shutil.which("chromium") is None

pytestmark = [
    pytest.mark.browser,
    # A developer without chromium may skip; CI (CI=true, where .ci/run installs it) may not:
    # a browser test that silently skipped there would be counted as coverage it is not.
    pytest.mark.skipif(
        _NO_CHROMIUM and os.environ.get("CI") != "true",
        reason="Debian's chromium is not installed (apt-get install chromium; .ci/run does)",
    ),
]

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def post(url: str, seq: int, secret: str = SECRET, task_id: str = "slee-1a2b3c") -> str:
    event = TaskEvent.model_validate(
        {
            "event_id": new_event_id(),
            "task_id": task_id,
            "server": "sleeper",
            "tool": "sleep",
            "type": "progress",
            "seq": seq,
            "ts": "2025-12-12T09:33:20.000Z",
            "payload": {"eta_s": 10 - seq},
        }
    )
    body = event.model_dump_json().encode()
    headers = signed_headers("sleeper", secret, body, int(time.time()))
    httpx.post(url, content=body, headers=headers, timeout=10)
    return event.event_id


@pytest.fixture
def rvc():
    with FakeRvcServer({"sleeper": SECRET}) as server:
        yield server


@pytest.fixture
def page(rvc):
    from playwright.sync_api import sync_playwright

    executable = str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(rvc.url + "/")
            page.wait_for_selector("#status.live", timeout=15_000)
            yield page
        finally:
            browser.close()


def test_posted_event_appears_live_grouped_by_task(rvc, page):
    """An event posted after the page loaded shows up under its task, without a reload."""
    event_id = post(rvc.events_url, seq=1)
    row = page.wait_for_selector(f'tr[data-event-id="{event_id}"]', timeout=10_000)
    assert row is not None
    assert row.get_attribute("data-outcome") == "accepted"
    section = page.locator('div.task[data-task-id="slee-1a2b3c"]')
    assert section.locator("h2").inner_text().startswith("slee-1a2b3c")
    assert '"eta_s":9' in row.inner_text()


def test_bad_signature_and_gap_are_highlighted(rvc, page):
    """A bad-signature post lands in the rejected table; a gap row is marked as a gap."""
    post(rvc.events_url, seq=1)
    post(rvc.events_url, seq=2, secret="wrong")
    gap_id = post(rvc.events_url, seq=3)
    rejected = page.wait_for_selector('tr.rejected[data-reason="bad_signature"]', timeout=10_000)
    assert rejected is not None
    assert "401" in rejected.inner_text()
    gap = page.wait_for_selector(f'tr.gap[data-event-id="{gap_id}"]', timeout=10_000)
    assert gap is not None
    assert "gap: expected #2, got #3" in gap.inner_text()
    # The rejected row's background differs from a plain accepted row's.
    colors = page.evaluate(
        """() => [
            getComputedStyle(document.querySelector('tr.rejected')).backgroundColor,
            getComputedStyle(document.querySelector('tr.accepted:not(.gap)')).backgroundColor,
        ]"""
    )
    assert colors[0] != colors[1]
    page.wait_for_function(
        "document.getElementById('counters').textContent.includes('rejected 1')",
        timeout=10_000,
    )


def test_reset_clears_the_page(rvc, page):
    """POST /api/fake/reset empties the page live."""
    event_id = post(rvc.events_url, seq=1)
    page.wait_for_selector(f'tr[data-event-id="{event_id}"]', timeout=10_000)
    httpx.post(rvc.url + "/api/fake/reset", timeout=10)
    page.wait_for_selector(f'tr[data-event-id="{event_id}"]', state="detached", timeout=10_000)
    assert page.locator("#no-tasks").is_visible()
