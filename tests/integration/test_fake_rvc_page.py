"""fake_rvc's live page in headless Chromium: posted events appear without a reload.

Each task shows its state in its own colour: succeeded and failed from the terminal
event, waiting for input (with its question) from an unanswered ``input_required``,
cancelled (which no event reports) from the server's ``list_tasks`` when fake_rvc
reconciles (repair mode), so even a task cancelled before its first event appears. The
tasks come first; rejected posts are folded below them, with their count.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import httpx
import pytest

from fake_rvc import FakeRvcServer
from robot_mcp_conformance import McpClient
from robot_mcp_kit.models import TaskEvent, new_event_id
from robot_mcp_kit.signing import signed_headers
from robot_mcp_kit.testing import ServiceProcess, free_port

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


REPO = Path(__file__).resolve().parents[2]

_PAYLOADS: dict[str, dict[str, object]] = {
    "task_done": {"result": {"slept_s": 1}},
    "task_failed": {"error_code": "FAKE_FAILURE", "message": "asked to fail", "suggestions": []},
    "input_required": {
        "request_id": "input-1",
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "Move the arm to the shelf?",
            "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}},
        },
    },
    "input_answered": {"request_id": "input-1", "action": "accept"},
}


def post(
    url: str,
    seq: int,
    secret: str = SECRET,
    task_id: str = "slee-1a2b3c",
    type_: str = "progress",
) -> str:
    event = TaskEvent.model_validate(
        {
            "event_id": new_event_id(),
            "task_id": task_id,
            "server": "sleeper",
            "tool": "sleep",
            "type": type_,
            "seq": seq,
            "ts": "2025-12-12T09:33:20.000Z",
            "payload": _PAYLOADS.get(type_, {"eta_s": 10 - seq}),
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


def _open_page(url: str):
    from playwright.sync_api import sync_playwright

    executable = str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(url + "/")
            page.wait_for_selector("#status.live", timeout=15_000)
            yield page
        finally:
            browser.close()


@pytest.fixture
def page(rvc):
    yield from _open_page(rvc.url)


def _badge_colour(page, task_id: str) -> str:
    return page.evaluate(
        "(id) => getComputedStyle(document.querySelector("
        '`div.task[data-task-id="${id}"] .state`)).backgroundColor',
        task_id,
    )


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
    page.wait_for_selector(
        'tr.rejected[data-reason="bad_signature"]', state="attached", timeout=10_000
    )
    page.click("#rejected-section > summary")  # folded until opened
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


def test_failed_and_succeeded_tasks_have_their_own_colours(rvc, page):
    """task_done marks its task succeeded, task_failed failed: two labels, two colours."""
    post(rvc.events_url, seq=1, task_id="slee-00d0e0", type_="task_done")
    post(rvc.events_url, seq=1, task_id="slee-00fa11", type_="task_failed")
    done = page.wait_for_selector('div.task[data-task-id="slee-00d0e0"][data-state="succeeded"]')
    failed = page.wait_for_selector('div.task[data-task-id="slee-00fa11"][data-state="failed"]')
    assert done is not None
    assert failed is not None
    assert page.locator('div.task[data-task-id="slee-00d0e0"] .state').inner_text() == "succeeded"
    assert page.locator('div.task[data-task-id="slee-00fa11"] .state').inner_text() == "failed"
    assert _badge_colour(page, "slee-00d0e0") != _badge_colour(page, "slee-00fa11")


@pytest.fixture
def reconciling():
    """The sleeper (SSE, child process) and fake_rvc asking it list_tasks every 0.3 s."""
    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/sse"
    with FakeRvcServer(
        {"sleeper": SECRET}, repair_urls={"sleeper": mcp_url}, reconcile_every_s=0.3
    ) as server:
        sleeper = ServiceProcess(
            "sleeper",
            [sys.executable, str(REPO / "examples" / "sleeper.py")],
            port,
            env={
                "MCP_TRANSPORT": "sse",
                "MCP_HOST": "127.0.0.1",
                "MCP_PORT": str(port),
                "RVC_CALLBACK_URL": server.events_url,
                "RVC_EVENT_SECRET": SECRET,
                "RVC_OUTBOX": "",
            },
        ).start(ready_timeout_s=60)
        client = McpClient(mcp_url, "sse").open()
        try:
            yield server, client
        finally:
            client.close()
            sleeper.close()


@pytest.fixture
def reconciling_page(reconciling):
    yield from _open_page(reconciling[0].url)


def test_a_task_cancelled_before_its_first_event_appears_as_cancelled(
    reconciling, reconciling_page
):
    """No event ever names it, yet the page shows it cancelled, in its own colour.

    The sleeper's first progress is due after tick_s = 30 s; the cancel comes at once, and
    a cancel posts nothing (contract §7). fake_rvc learns of the task from list_tasks.
    """
    rvc, client = reconciling
    page = reconciling_page
    started = client.call("sleep_task", {"duration_s": 60, "tick_s": 30})
    task_id = started.data["task_id"]
    cancelled = client.call("cancel_task", {"task_id": task_id})
    assert cancelled.data["state"] == "cancelled", cancelled.evidence()
    section = f'div.task[data-task-id="{task_id}"]'
    page.wait_for_selector(f'{section}[data-state="cancelled"]', timeout=15_000)
    assert page.locator(f"{section} .state").inner_text() == "cancelled (list_tasks)"
    assert page.locator(f"{section} tr.no-events").is_visible()
    assert rvc.state.events(task_id=task_id) == []  # only reconciliation could show it
    legend = page.evaluate(
        """() => ["succeeded", "failed", "cancelled"].map((s) => getComputedStyle(
            document.querySelector(`.legend .state.${s}`)).backgroundColor)"""
    )
    assert _badge_colour(page, task_id) == legend[2]
    assert len(set(legend)) == 3


def test_tasks_come_first_and_rejected_posts_are_folded_with_their_count(rvc, page):
    """After a receiver-suite run's worth of rejected posts (113 there), the tasks are
    still on the first screen: rejected posts sit below them, folded, counted."""
    for seq in range(1, 121):
        post(rvc.events_url, seq=seq, secret="wrong", task_id="slee-bad000")
    event_id = post(rvc.events_url, seq=1)
    page.wait_for_selector(f'tr[data-event-id="{event_id}"]', timeout=10_000)
    page.wait_for_function(
        "document.getElementById('rejected-count').textContent === '120'", timeout=20_000
    )
    assert page.locator("#rejected-section").get_attribute("open") is None
    assert page.locator("#rejected-section > summary").inner_text() == (
        "Rejected posts and injected faults: 120"
    )
    boxes = page.evaluate(
        """() => ({
            task: document.querySelector('div.task[data-task-id="slee-1a2b3c"]')
                .getBoundingClientRect().top,
            rejected: document.getElementById('rejected-section').getBoundingClientRect().top,
            screen: window.innerHeight,
        })"""
    )
    assert boxes["task"] < boxes["rejected"]
    assert boxes["task"] < boxes["screen"], boxes
    assert not page.locator("tr.rejected").first.is_visible()
    page.click("#rejected-section > summary")
    assert page.locator("tr.rejected").count() == 120
    assert page.locator("tr.rejected").first.is_visible()
    httpx.post(rvc.url + "/api/fake/reset", timeout=10)
    page.wait_for_function(
        "document.getElementById('rejected-count').textContent === 'none'", timeout=10_000
    )


def test_a_task_waiting_for_input_shows_its_question(rvc, page):
    """An unanswered input_required makes the task "waiting for input" with the question
    shown; its input_answered takes the question away; task_done ends it."""
    task = "slee-a5k1n9"
    post(rvc.events_url, seq=1, task_id=task)
    post(rvc.events_url, seq=2, task_id=task, type_="input_required")
    section = f'div.task[data-task-id="{task}"]'
    page.wait_for_selector(f'{section}[data-state="waiting"]', timeout=10_000)
    assert page.locator(f"{section} .state").inner_text() == "waiting for input"
    asked = page.locator(f'{section} .question[data-request-id="input-1"]')
    assert asked.inner_text() == "input-1 asks: Move the arm to the shelf?"
    assert asked.is_visible()
    legend = page.evaluate(
        """() => getComputedStyle(document.querySelector('.legend .state.waiting'))
            .backgroundColor"""
    )
    assert _badge_colour(page, task) == legend
    post(rvc.events_url, seq=3, task_id=task, type_="input_answered")
    page.wait_for_selector(f"{section} .question", state="detached", timeout=10_000)
    assert page.locator(section).get_attribute("data-state") != "waiting"
    post(rvc.events_url, seq=4, task_id=task, type_="task_done")
    page.wait_for_selector(f'{section}[data-state="succeeded"]', timeout=10_000)
