"""fake_rvc's events endpoint and inspection API, driven in process through ASGITransport."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

import fake_rvc
from fake_rvc import ConnectionDropped, Recorder, create_app, get_clock
from robot_mcp_kit.models import TaskEvent
from robot_mcp_kit.signing import signed_headers

NOW = 1_765_532_000
SECRET = "s3cret"
URL = "/api/agent/events"


def signed(body: bytes, server: str = "sleeper", secret: str = SECRET, ts: int = NOW):
    return signed_headers(server, secret, body, ts)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def client(recorder: Recorder):
    app = create_app({"sleeper": SECRET, "nav": "n4v"}, clock=lambda: NOW, state=recorder)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fake") as c:
        yield c


async def post_event(client: httpx.AsyncClient, event: TaskEvent, **kw: Any) -> httpx.Response:
    body = event.model_dump_json().encode()
    return await client.post(URL, content=body, headers=signed(body, **kw))


async def post_raw(client: httpx.AsyncClient, body: bytes, **kw: Any) -> httpx.Response:
    return await client.post(URL, content=body, headers=signed(body, **kw))


class TestAccepting:
    async def test_signed_event_is_accepted_and_stored(self, client, recorder, make_event):
        """A correctly signed TaskEvent gets 200 and is listed once."""
        event = make_event()
        response = await post_event(client, event)
        assert response.status_code == 200
        assert response.json() == {
            "accepted": True,
            "duplicate": False,
            "event_id": event.event_id,
            "anomalies": [],
        }
        assert [e.event for e in recorder.events()] == [event]

    async def test_duplicate_event_id_is_acknowledged_and_stored_once(
        self, client, recorder, make_event
    ):
        """A second post of the same event_id gets 200 {"duplicate": true} and is not stored."""
        event = make_event()
        await post_event(client, event)
        response = await post_event(client, event, ts=NOW + 5)
        assert response.status_code == 200
        assert response.json()["duplicate"] is True
        assert len(recorder.events()) == 1
        timeline = recorder.timeline(event.task_id)
        assert timeline is not None
        assert [a["kind"] for a in timeline.anomalies] == ["duplicate"]
        assert recorder.counters()["duplicates"] == 1

    async def test_flood_of_duplicates_is_stored_once_and_others_survive(
        self, client, recorder, make_event
    ):
        """Two hundred concurrent copies of one event store it once; a later event still lands."""
        event = make_event()
        responses = await asyncio.gather(*(post_event(client, event) for _ in range(200)))
        assert all(r.status_code == 200 for r in responses)
        assert sum(1 for r in responses if r.json().get("accepted")) == 1
        second = make_event(seq=2)
        assert (await post_event(client, second)).json()["accepted"] is True
        assert [e.seq for e in recorder.events()] == [1, 2]
        assert recorder.counters()["duplicates"] == 199

    async def test_extra_fields_in_a_valid_event_are_ignored(self, client, recorder, make_event):
        """Unknown top-level keys do not make a TaskEvent invalid (forward compatibility)."""
        data = json.loads(make_event().model_dump_json()) | {"future": 1}
        response = await post_raw(client, json.dumps(data).encode())
        assert response.status_code == 200


class TestAuthentication:
    @pytest.mark.parametrize(
        ("mutate", "reason"),
        [
            (lambda h: h.update({"X-RVC-Server": "ghost"}), "unknown_server"),
            (lambda h: h.pop("X-RVC-Server"), "unknown_server"),
            (lambda h: h.pop("X-RVC-Timestamp"), "missing_timestamp"),
            (lambda h: h.update({"X-RVC-Timestamp": "yesterday"}), "malformed_timestamp"),
            (lambda h: h.update({"X-RVC-Timestamp": str(NOW - 301)}), "stale_timestamp"),
            (lambda h: h.update({"X-RVC-Timestamp": str(NOW + 301)}), "future_timestamp"),
            (lambda h: h.pop("X-RVC-Signature"), "missing_signature"),
            (lambda h: h.update({"X-RVC-Signature": "md5=abc"}), "malformed_signature"),
            (lambda h: h.update({"X-RVC-Signature": "sha256=" + "0" * 64}), "bad_signature"),
        ],
    )
    async def test_bad_credentials_get_401_with_reason(
        self, client, recorder, mutate, reason, make_event
    ):
        """Each authentication failure is a 401 naming its reason, recorded as rejected."""
        body = make_event().model_dump_json().encode()
        headers = signed(body)
        mutate(headers)
        response = await client.post(URL, content=body, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"] == reason
        assert response.json()["detail"]
        assert recorder.events() == []
        assert recorder.counters()["rejections"] == {reason: 1}
        [attempt] = recorder.attempts()
        assert (attempt.status, attempt.outcome, attempt.reason) == (401, "rejected", reason)

    async def test_stale_timestamp_check_follows_the_overridden_clock(self, recorder, make_event):
        """The clock dependency decides staleness, so a test can move time."""
        app = create_app({"sleeper": SECRET}, state=recorder)
        app.dependency_overrides[get_clock] = lambda: lambda: NOW + 1000
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://fake"
        ) as c:
            response = await post_event(c, make_event())
        assert response.json()["error"] == "stale_timestamp"

    async def test_timestamp_within_skew_is_accepted(self, client, make_event):
        """A timestamp 300 s off either way is still accepted."""
        assert (await post_event(client, make_event(), ts=NOW - 300)).status_code == 200
        assert (await post_event(client, make_event(), ts=NOW + 300)).status_code == 200

    async def test_body_signed_for_another_server_is_rejected(self, client, make_event):
        """An event signed with another server's secret fails the signature check."""
        response = await post_event(client, make_event(), secret="n4v")
        assert response.json()["error"] == "bad_signature"

    async def test_tampered_body_is_rejected(self, client, make_event):
        """Changing the body after signing breaks the signature."""
        body = make_event().model_dump_json().encode()
        headers = signed(body)
        response = await client.post(URL, content=body.replace(b"eta_s", b"eta_x"), headers=headers)
        assert response.json()["error"] == "bad_signature"


class TestBadInput:
    @pytest.mark.parametrize(
        ("body", "code"),
        [
            (b"\xff\xfe{}", "invalid_encoding"),
            (b"{not json", "invalid_json"),
            (b'{"a": NaN}', "invalid_json"),
            (b"[1, 2]", "not_an_object"),
            (b"[" * 40 + b"]" * 40, "too_deep"),
            (b'{"p": ' + b'{"a": ' * 100 + b"1" + b"}" * 100 + b"}", "too_deep"),
            (b"{}", "bad_schema_version"),
        ],
    )
    async def test_signed_garbage_gets_422_with_reason(self, client, recorder, body, code):
        """A correctly signed body that is not a TaskEvent is a 422 naming what is wrong."""
        response = await post_raw(client, body)
        assert response.status_code == 422
        assert response.json()["error"] == code
        assert recorder.events() == []

    @pytest.mark.parametrize(
        ("change", "code", "mentions"),
        [
            ({"schema_version": 2}, "bad_schema_version", "schema_version"),
            ({"schema_version": True}, "bad_schema_version", "schema_version"),
            ({"type": 7}, "invalid_event", "type"),
            ({"type": ""}, "invalid_event", "type"),
            ({"seq": 0}, "invalid_event", "seq"),
            ({"seq": "3"}, "invalid_event", "seq"),
            ({"payload": []}, "invalid_event", "payload"),
            ({"ts": "yesterday"}, "invalid_event", "ts"),
            ({"event_id": None}, "invalid_event", "event_id"),
            ({"server": "nav"}, "server_mismatch", "nav"),
        ],
    )
    async def test_not_a_task_event_gets_422(self, client, change, code, mentions, make_event):
        """Wrong schema_version, a type that is no string, bad fields, a server mismatch: 422s."""
        data = json.loads(make_event().model_dump_json()) | change
        response = await post_raw(client, json.dumps(data).encode())
        assert response.status_code == 422
        assert response.json()["error"] == code
        assert mentions in response.json()["detail"]

    async def test_an_unknown_type_is_acknowledged_and_its_seq_counts(
        self, client, recorder, make_event, capture_logs
    ):
        """§4.4: seq 2 of a type the kit does not know is acknowledged, recorded, no gap."""
        first = make_event(seq=1)
        unknown = json.loads(make_event(seq=2).model_dump_json()) | {"type": "zone_left"}
        last = make_event(seq=3)
        with capture_logs() as logs:
            assert (await post_event(client, first)).status_code == 200
            response = await post_raw(client, json.dumps(unknown).encode())
            assert (await post_event(client, last)).status_code == 200
        assert response.status_code == 200
        assert response.json() == {
            "accepted": True,
            "duplicate": False,
            "event_id": unknown["event_id"],
            "anomalies": [],
            "unknown_type": True,
        }
        timeline = recorder.timeline(first.task_id)
        assert timeline is not None
        assert timeline.seqs == [1, 2, 3]
        assert timeline.anomalies == []
        assert [e.type for e in timeline.events] == ["progress", "zone_left", "progress"]
        warned = [e for e in logs if e["event"] == "post_unknown_type"]
        assert [(e["type"], e["task_id"]) for e in warned] == [("zone_left", first.task_id)]
        again = await post_raw(client, json.dumps(unknown).encode(), ts=NOW + 1)
        assert again.json() == {
            "duplicate": True,
            "event_id": unknown["event_id"],
            "unknown_type": True,
        }

    async def test_an_unknown_type_after_the_terminal_event_is_no_anomaly(
        self, client, recorder, make_event
    ):
        """§4.4: acknowledged and ignored, also after task_done; its seq still counts (a
        known type there is still after_terminal, a seq skipped still a gap)."""
        done = make_event(seq=1, type="task_done", payload={"result": {}})
        later = json.loads(make_event(seq=2).model_dump_json()) | {"type": "later_kind"}
        late = make_event(seq=4)
        assert (await post_event(client, done)).status_code == 200
        response = await post_raw(client, json.dumps(later).encode())
        assert response.status_code == 200
        assert (response.json()["anomalies"], response.json()["unknown_type"]) == ([], True)
        assert (await post_event(client, late)).status_code == 200
        timeline = recorder.timeline(done.task_id)
        assert timeline is not None
        assert timeline.seqs == [1, 2, 4]
        assert [a["kind"] for a in timeline.anomalies] == ["after_terminal", "gap"]
        assert timeline.anomalies[1]["missing"] == [3]

    async def test_stored_events_filter_by_an_unknown_type(self, client, make_event):
        """The inspection API filters by any type a post may carry, known or not."""
        unknown = json.loads(make_event(seq=2).model_dump_json()) | {"type": "later_kind"}
        await post_event(client, make_event(seq=1))
        await post_raw(client, json.dumps(unknown).encode())
        for path in ("/api/fake/events", "/api/fake/events.jsonl"):
            response = await client.get(path, params={"type": "later_kind"})
            assert response.status_code == 200, response.text
            assert unknown["event_id"] in response.text
            assert '"seq":1,' not in response.text.replace(" ", "")
        listed = (await client.get("/api/fake/events", params={"type": "later_kind"})).json()
        assert [e["event"]["seq"] for e in listed["events"]] == [2]
        waited = await client.get(
            "/api/fake/wait",
            params={"task_id": unknown["task_id"], "type": "later_kind", "timeout_s": 1},
        )
        assert waited.status_code == 200, waited.text
        assert waited.json()["event"]["event_id"] == unknown["event_id"]
        empty = await client.get("/api/fake/events", params={"type": ""})
        assert empty.status_code == 422

    async def test_missing_field_is_named(self, client, make_event):
        """A body missing task_id says so."""
        data = json.loads(make_event().model_dump_json())
        del data["task_id"]
        response = await post_raw(client, json.dumps(data).encode())
        assert response.json()["error"] == "invalid_event"
        assert "task_id" in response.json()["detail"]

    async def test_oversized_body_gets_413_by_content_length(self, recorder):
        """A Content-Length over the cap is refused before the body is read."""
        app = create_app({"sleeper": SECRET}, clock=lambda: NOW, state=recorder, max_body_bytes=100)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://fake"
        ) as c:
            response = await post_raw(c, b"x" * 101)
        assert response.status_code == 413
        assert response.json()["error"] == "too_large"

    async def test_oversized_streamed_body_gets_413(self, recorder):
        """A chunked body with no Content-Length is cut off after cap + 1 bytes."""
        app = create_app({"sleeper": SECRET}, clock=lambda: NOW, state=recorder, max_body_bytes=100)
        sent: list[int] = []

        async def chunks():
            for _ in range(50):
                sent.append(1)
                yield b"x" * 10

        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://fake"
        ) as c:
            response = await c.post(URL, content=chunks(), headers=signed(b""))
        assert response.status_code == 413
        assert len(sent) < 50  # stopped reading after the cap
        assert recorder.counters()["rejections"] == {"too_large": 1}

    async def test_default_cap_is_one_mebibyte(self, client):
        """The default cap refuses 1 MiB + 1 bytes."""
        response = await post_raw(client, b" " * (1_048_576 + 1))
        assert response.status_code == 413

    @pytest.mark.parametrize(
        ("header", "value"),
        [
            ("X-RVC-Server", "sleeper\u00e9"),
            ("X-RVC-Timestamp", "1765532000\u00a0"),
            ("X-RVC-Server", "sleeper\x01"),
        ],
    )
    async def test_header_injection_gets_400(self, client, recorder, header, value, make_event):
        """X-RVC-* values with control or non-ASCII characters are refused with 400."""
        body = make_event().model_dump_json().encode()
        headers = {k: v.encode("latin-1") for k, v in signed(body).items()}
        headers[header] = value.encode("latin-1")
        response = await client.post(URL, content=body, headers=headers)
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_header"
        assert recorder.counters()["rejected"] == 1

    async def test_repeated_server_header_gets_400(self, client, make_event):
        """Two X-RVC-Server headers are ambiguous and refused."""
        body = make_event().model_dump_json().encode()
        headers = [*signed(body).items(), ("X-RVC-Server", "nav")]
        response = await client.post(URL, content=body, headers=headers)
        assert response.status_code == 400
        assert response.json()["error"] == "duplicate_header"

    async def test_app_keeps_serving_after_bad_input(self, client, recorder, make_event):
        """After a burst of bad posts, a good event is still accepted and nothing was lost."""
        first = make_event(seq=1)
        await post_event(client, first)
        for body in (b"\xff", b"[" * 5000, b"{}", b"x" * 2_000_000):
            await post_raw(client, body)
        await post_event(client, make_event(seq=2))
        assert [e.seq for e in recorder.events()] == [1, 2]


class TestLogging:
    async def test_each_outcome_logs_one_line(self, client, caplog, make_event):
        """An accepted, a duplicate and a rejected post log one key-value event each on fake_rvc."""
        caplog.set_level("INFO", logger="fake_rvc")
        event = make_event()
        await post_event(client, event)
        await post_event(client, event)
        await post_event(client, make_event(seq=2), secret="wrong")
        records = [r for r in caplog.records if r.name == "fake_rvc"]
        messages = [r.getMessage() for r in records]
        assert len(messages) == 3
        assert messages[0].startswith("post_accepted server='sleeper' task_id='slee-1a2b3c' seq=1")
        assert messages[1].startswith("post_duplicate ")
        assert messages[2].startswith("post_rejected status=401 reason='bad_signature'")
        assert records[2].reason == "bad_signature"


class TestTimeline:
    async def test_gap_is_recorded_with_evidence(self, client, recorder, make_event):
        """seq 1 then 3 records a gap expecting 2."""
        await post_event(client, make_event(seq=1))
        response = await post_event(client, make_event(seq=3))
        anomaly = response.json()["anomalies"][0]
        assert anomaly["kind"] == "gap"
        assert (anomaly["expected"], anomaly["got"], anomaly["missing"]) == (2, 3, [2])
        timeline = recorder.timeline("slee-1a2b3c")
        assert timeline is not None
        assert timeline.missing_seqs == [2]

    async def test_first_event_above_one_is_a_gap(self, client, recorder, make_event):
        """A task whose first event is seq 2 has lost seq 1."""
        await post_event(client, make_event(seq=2))
        assert recorder.counters()["anomalies"]["gap"] == 1

    async def test_late_event_is_a_reorder_and_fills_the_gap(self, client, recorder, make_event):
        """seq 1, 3, 2: the 2 is a reorder, and nothing is missing afterwards."""
        for seq in (1, 3, 2):
            await post_event(client, make_event(seq=seq))
        timeline = recorder.timeline("slee-1a2b3c")
        assert timeline is not None
        assert [a["kind"] for a in timeline.anomalies] == ["gap", "reorder"]
        assert timeline.anomalies[1]["expected"] == 4
        assert timeline.missing_seqs == []
        assert timeline.expected_seq == 4

    async def test_event_after_terminal_is_flagged(self, client, recorder, make_event):
        """Anything after task_done is an after_terminal anomaly."""
        await post_event(client, make_event(seq=1, type="task_done", payload={"result": {}}))
        response = await post_event(client, make_event(seq=2))
        kinds = [a["kind"] for a in response.json()["anomalies"]]
        assert kinds == ["after_terminal"]
        assert recorder.counters()["anomalies"]["after_terminal"] == 1

    async def test_in_order_events_have_no_anomalies(self, client, recorder, make_event):
        """1, 2, 3 then task_failed: a clean timeline ending in the terminal event."""
        for seq in (1, 2, 3):
            await post_event(client, make_event(seq=seq))
        await post_event(
            client,
            make_event(seq=4, type="task_failed", payload={"error_code": "X", "message": "m"}),
        )
        response = await client.get("/api/fake/tasks/slee-1a2b3c")
        data = response.json()
        assert data["seqs"] == [1, 2, 3, 4]
        assert data["anomalies"] == []
        assert data["terminal"] == "task_failed"

    async def test_unknown_task_is_404(self, client):
        """The timeline of a task never seen is a 404."""
        response = await client.get("/api/fake/tasks/nope-000000")
        assert response.status_code == 404
        assert response.json()["error"] == "not_found"


class TestInspection:
    async def test_events_filter_by_server_task_and_type(self, client, make_event):
        """GET /api/fake/events filters on server, task_id and type."""
        await post_event(client, make_event(seq=1, task_id="slee-aaaaaa"))
        await post_event(client, make_event(seq=2, task_id="slee-aaaaaa", type="task_done"))
        await post_event(client, make_event(seq=1, task_id="slee-bbbbbb"))
        nav = make_event(seq=1, task_id="nav-cccccc", server="nav")
        await post_event(client, nav, server="nav", secret="n4v")

        async def ids(**params):
            data = (await client.get("/api/fake/events", params=params)).json()
            return [(e["event"]["task_id"], e["event"]["seq"]) for e in data["events"]]

        assert len(await ids()) == 4
        assert await ids(server="nav") == [("nav-cccccc", 1)]
        assert await ids(task_id="slee-aaaaaa") == [("slee-aaaaaa", 1), ("slee-aaaaaa", 2)]
        assert await ids(type="task_done") == [("slee-aaaaaa", 2)]
        assert await ids(task_id="slee-aaaaaa", type="progress") == [("slee-aaaaaa", 1)]
        tasks = (await client.get("/api/fake/tasks")).json()["tasks"]
        assert [t["task_id"] for t in tasks] == ["slee-aaaaaa", "slee-bbbbbb", "nav-cccccc"]

    async def test_counters_and_attempts_cover_every_outcome(self, client, make_event):
        """Counters add up accepted, duplicate and rejected posts; attempts list them all."""
        event = make_event()
        await post_event(client, event)
        await post_event(client, event)
        await post_event(client, make_event(seq=2), secret="wrong")
        counters = (await client.get("/api/fake/counters")).json()
        assert counters["attempts"] == 3
        assert counters["accepted"] == 1
        assert counters["duplicates"] == 1
        assert counters["rejected"] == 1
        assert counters["rejections"] == {"bad_signature": 1}
        attempts = (await client.get("/api/fake/attempts")).json()["attempts"]
        assert [(a["n"], a["outcome"], a["status"]) for a in attempts] == [
            (1, "accepted", 200),
            (2, "duplicate", 200),
            (3, "rejected", 401),
        ]
        assert attempts[2]["seq"] == 2  # parsed best effort, even when rejected
        assert all(a["received_mono"] > 0 for a in attempts)
        assert attempts[0]["received_wall"] == NOW

    async def test_reset_forgets_everything(self, client, recorder, make_event):
        """POST /api/fake/reset empties events, attempts, counters and faults."""
        await post_event(client, make_event())
        recorder.inject_fault("sleeper", status=500)
        assert (await client.post("/api/fake/reset")).json() == {"reset": True}
        assert recorder.events() == []
        assert recorder.attempts() == []
        assert recorder.faults() == []
        assert recorder.counters()["attempts"] == 0
        # The same event_id is new again after a reset.
        assert (await post_event(client, make_event())).json()["accepted"] is True


class TestInspectionHook:
    async def test_the_hook_lists_each_processed_event_once_and_the_gaps(self, client, make_event):
        """GET /api/fake/inspect: the contract's §5.5 shape; a duplicate is listed once, and
        the gap stays reported after the late event fills it."""
        first, third, second = make_event(seq=1), make_event(seq=3), make_event(seq=2)
        for event in (first, first, third, second):
            assert (await post_event(client, event, ts=NOW)).status_code == 200
        answer = await client.get(
            "/api/fake/inspect", params={"server": "sleeper", "task_id": first.task_id}
        )
        assert answer.status_code == 200
        body = answer.json()
        assert [e["event_id"] for e in body["events"]] == [
            first.event_id,
            third.event_id,
            second.event_id,
        ]
        assert [e["seq"] for e in body["events"]] == [1, 3, 2]
        assert body["gaps"] == [2]

    async def test_a_task_the_hook_never_saw_is_empty(self, client):
        """An unknown task (or another server's) answers empty lists, not an error."""
        answer = await client.get(
            "/api/fake/inspect", params={"server": "nav", "task_id": "slee-1a2b3c"}
        )
        assert answer.json() == {
            "server": "nav",
            "task_id": "slee-1a2b3c",
            "events": [],
            "gaps": [],
        }

    async def test_the_hook_needs_server_and_task_id(self, client):
        """Without its query it answers 422 invalid_request naming the field."""
        answer = await client.get("/api/fake/inspect", params={"server": "sleeper"})
        assert answer.status_code == 422
        assert "task_id" in answer.json()["detail"]

    async def test_events_export_as_json_lines(self, client, make_event):
        """GET /api/fake/events.jsonl: one received event per line, filters as /events."""
        one, other = make_event(), make_event(task_id="slee-ffffff")
        for event in (one, other):
            await post_event(client, event)
        answer = await client.get("/api/fake/events.jsonl")
        assert answer.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in answer.text.splitlines()]
        assert [line["event"]["event_id"] for line in lines] == [one.event_id, other.event_id]
        assert lines[0]["server"] == "sleeper"
        assert "received_wall" in lines[0]
        only = await client.get("/api/fake/events.jsonl", params={"task_id": "slee-ffffff"})
        assert len(only.text.splitlines()) == 1


class TestWaiting:
    async def test_long_poll_returns_when_the_event_arrives(self, client, make_event):
        """GET /api/fake/wait blocks until the awaited event is posted, then returns it."""
        done = make_event(seq=1, type="task_done", payload={"result": {"ok": True}})
        waiter = asyncio.create_task(
            client.get(
                "/api/fake/wait",
                params={"task_id": done.task_id, "type": "task_done", "timeout_s": 10},
            )
        )
        await asyncio.sleep(0)
        assert not waiter.done()
        await post_event(client, done)
        response = await asyncio.wait_for(waiter, 10)
        assert response.status_code == 200
        assert response.json()["event"]["event_id"] == done.event_id

    async def test_long_poll_returns_an_event_already_there(self, client, make_event):
        """Waiting for an event that already arrived returns at once."""
        event = make_event()
        await post_event(client, event)
        response = await client.get("/api/fake/wait", params={"task_id": event.task_id})
        assert response.json()["event"]["event_id"] == event.event_id

    async def test_long_poll_times_out_with_408(self, client, make_event):
        """No matching event within timeout_s is a 408 saying what was seen."""
        await post_event(client, make_event())
        response = await client.get(
            "/api/fake/wait",
            params={"task_id": "slee-1a2b3c", "type": "task_done", "timeout_s": 0.05},
        )
        assert response.status_code == 408
        assert "#1 progress" in response.json()["detail"]

    async def test_async_wait_on_the_python_api(self, client, recorder, make_event):
        """Recorder.wait_for_event_async wakes when the event is recorded."""
        event = make_event(type="trigger_fired")
        waiter = asyncio.create_task(
            recorder.wait_for_event_async(event.task_id, "trigger_fired", 10)
        )
        await asyncio.sleep(0)
        await post_event(client, event)
        assert (await asyncio.wait_for(waiter, 10)).event_id == event.event_id


class TestFaults:
    async def test_injected_status_answers_the_next_n_posts(self, client, recorder, make_event):
        """Two injected 503s answer two posts without storing; the third is processed."""
        response = await client.post(
            "/api/fake/faults", json={"server": "sleeper", "status": 503, "count": 2}
        )
        assert response.status_code == 201
        event = make_event()
        statuses = [(await post_event(client, event)).status_code for _ in range(3)]
        assert statuses == [503, 503, 200]
        assert len(recorder.events()) == 1
        assert [a.outcome for a in recorder.attempts()] == ["fault", "fault", "accepted"]
        assert recorder.counters()["faults"] == 2

    async def test_faults_are_per_server(self, client, make_event):
        """A fault for nav leaves sleeper's posts alone."""
        await client.post("/api/fake/faults", json={"server": "nav", "status": 500})
        assert (await post_event(client, make_event())).status_code == 200
        nav = make_event(server="nav", task_id="nav-000001")
        assert (await post_event(client, nav, server="nav", secret="n4v")).status_code == 500

    async def test_wildcard_fault_matches_any_server(self, client, make_event):
        """A fault for "*" answers the next post from whichever server."""
        await client.post("/api/fake/faults", json={"server": "*", "status": 429})
        assert (await post_event(client, make_event())).status_code == 429

    async def test_a_task_fault_acts_only_on_that_tasks_posts(self, client, make_event):
        """A fault naming a task lets other tasks' posts by, and still acts on its own."""
        response = await client.post(
            "/api/fake/faults",
            json={"server": "sleeper", "status": 413, "count": 2, "task_id": "slee-00000a"},
        )
        assert response.status_code == 201
        other = make_event(task_id="slee-00000b")
        assert (await post_event(client, other)).status_code == 200
        mine = make_event(task_id="slee-00000a")
        assert (await post_event(client, mine)).status_code == 413
        assert (await post_event(client, mine)).status_code == 413
        assert (await post_event(client, mine)).status_code == 200  # count used up
        assert (await client.get("/api/fake/faults")).json()["faults"] == []

    async def test_an_empty_task_id_in_a_fault_is_refused(self, client):
        response = await client.post(
            "/api/fake/faults", json={"server": "sleeper", "status": 413, "task_id": ""}
        )
        assert response.status_code == 422

    async def test_fault_injection_through_python_api_and_clear(self, client, recorder, make_event):
        """inject_fault and clear_faults on the recorder; GET and DELETE over HTTP agree."""
        recorder.inject_fault("sleeper", status=500, count=3)
        listed = (await client.get("/api/fake/faults")).json()["faults"]
        assert listed == [
            {
                "server": "sleeper",
                "status": 500,
                "delay_s": None,
                "drop": False,
                "remaining": 3,
                "task_id": None,
                "retry_after_s": None,
            }
        ]
        assert (await client.delete("/api/fake/faults")).json() == {"faults": []}
        assert (await post_event(client, make_event())).status_code == 200

    async def test_delay_fault_delays_then_processes(self, client, recorder, make_event):
        """A delay-only fault answers late, but answers normally."""
        recorder.inject_fault("sleeper", delay_s=0.2)
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await post_event(client, make_event())
        assert response.status_code == 200
        assert loop.time() - started >= 0.2
        assert len(recorder.events()) == 1

    async def test_drop_in_process_raises_connection_dropped(self, client, recorder, make_event):
        """Without a socket to close, a drop raises ConnectionDropped and stores nothing."""
        recorder.inject_fault("sleeper", drop=True)
        with pytest.raises(ConnectionDropped):
            await post_event(client, make_event())
        assert recorder.events() == []
        assert [a.outcome for a in recorder.attempts()] == ["dropped"]

    @pytest.mark.parametrize(
        "spec",
        [
            {"server": "sleeper"},
            {"server": "sleeper", "status": 500, "drop": True},
            {"server": "sleeper", "status": 99},
            {"server": "sleeper", "status": 500, "count": 0},
            {"server": "", "status": 500},
        ],
    )
    async def test_invalid_fault_is_422(self, client, spec):
        """A fault with nothing to do, conflicting or out-of-range fields is refused."""
        assert (await client.post("/api/fake/faults", json=spec)).status_code == 422

    async def test_a_429_fault_tells_when_to_come_back(self, client, recorder, make_event):
        """retry_after_s adds Retry-After to the injected answer; the next post is processed."""
        response = await client.post(
            "/api/fake/faults", json={"server": "*", "status": 429, "retry_after_s": 2}
        )
        assert response.status_code == 201
        assert response.json()["fault"]["retry_after_s"] == 2
        event = make_event()
        refused = await post_event(client, event)
        assert (refused.status_code, refused.headers["retry-after"]) == (429, "2")
        assert (await post_event(client, event)).status_code == 200
        assert "retry-after" not in (await post_event(client, make_event())).headers

    async def test_a_fault_script_answers_in_its_order(self, client, recorder, make_event):
        """Recorder.add_faults(parse_faults(...)): 500, 429, then a normal answer."""
        script = fake_rvc.parse_faults(
            {"faults": [{"status": 500}, {"status": 429, "retry_after_s": 1}]}
        )
        recorder.add_faults(script)
        event = make_event()
        answers = [await post_event(client, event) for _ in range(3)]
        assert [a.status_code for a in answers] == [500, 429, 200]
        assert answers[1].headers["retry-after"] == "1"

    async def test_empty_status_fault_sends_no_body(self, client, make_event):
        """A 204 fault answers with an empty body (HTTP forbids one)."""
        await client.post("/api/fake/faults", json={"server": "sleeper", "status": 204})
        response = await post_event(client, make_event())
        assert (response.status_code, response.content) == (204, b"")


class TestPage:
    async def test_page_is_served_with_its_script(self, client):
        """GET / serves the live page, which listens to the SSE stream."""
        response = await client.get("/")
        assert response.status_code == 200
        assert "EventSource" in response.text
        assert "default-src 'none'" in response.headers["content-security-policy"]

    def test_secrets_must_be_non_empty(self):
        """create_app refuses an empty secret."""
        with pytest.raises(ValueError, match="non-empty"):
            create_app({"sleeper": ""})


class TestReconcile:
    async def test_reconcile_without_a_server_url_is_409_not_configured(self, client):
        """POST /api/fake/reconcile needs repair mode: one sentence says how to turn it on."""
        response = await client.post("/api/fake/reconcile")
        assert response.status_code == 409
        assert response.json()["error"] == "not_configured"
        assert "--repair" in response.json()["detail"]

    async def test_an_unreachable_server_is_reported_without_the_exception_text(self, recorder):
        """A server that cannot be asked: {"error": "failed"}, the reason only in the log."""
        app = create_app(
            {"sleeper": SECRET}, state=recorder, repair_urls={"sleeper": "http://127.0.0.1:9/sse"}
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://fake") as c:
            response = await c.post("/api/fake/reconcile")
            states = await c.get("/api/fake/task-states")
        assert response.status_code == 200
        answer = response.json()["servers"]["sleeper"]
        assert answer["error"] == "failed"
        assert "Error" not in answer["detail"]
        assert states.json() == {"states": []}

    async def test_task_states_lists_what_the_recorder_holds(self, client, recorder):
        """GET /api/fake/task-states: each reconciled task, filtered by server."""
        recorder.record_task_states("sleeper", [{"task_id": "slee-000002", "state": "cancelled"}])
        listed = (await client.get("/api/fake/task-states", params={"server": "sleeper"})).json()
        assert [s["state"] for s in listed["states"]] == ["cancelled"]
        assert (await client.get("/api/fake/task-states", params={"server": "nav"})).json() == {
            "states": []
        }

    def test_a_non_positive_interval_is_refused(self):
        """reconcile_every_s must be a positive number of seconds."""
        with pytest.raises(fake_rvc.ConfigError, match="reconcile_every_s"):
            create_app({"sleeper": SECRET}, reconcile_every_s=0)


class TestTraceHeaders:
    TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    async def test_the_trace_headers_of_each_post_are_kept_and_shown(
        self, client, recorder, make_event
    ):
        """traceparent/tracestate ride on the attempt, the stored event and the events API."""
        event = make_event()
        body = event.model_dump_json().encode()
        headers = {**signed(body), "traceparent": self.TRACEPARENT, "tracestate": "planner=3"}
        assert (await client.post(URL, content=body, headers=headers)).status_code == 200
        again = {**signed(body), "traceparent": self.TRACEPARENT.replace("b7-01", "b8-01")}
        assert (await client.post(URL, content=body, headers=again)).status_code == 200
        first, duplicate = recorder.attempts()
        assert (first.traceparent, first.tracestate) == (self.TRACEPARENT, "planner=3")
        assert duplicate.outcome == "duplicate"
        assert duplicate.traceparent == again["traceparent"]
        assert duplicate.tracestate is None
        (stored,) = recorder.events()
        assert stored.traceparent == self.TRACEPARENT  # the POST that delivered it first
        listed = (await client.get("/api/fake/events")).json()["events"]
        assert listed[0]["traceparent"] == self.TRACEPARENT

    async def test_a_post_without_trace_headers_keeps_none_and_a_long_one_is_cut(
        self, client, recorder, make_event
    ):
        """No header: None; an oversized one is kept to MAX_TRACE_HEADER_CHARS characters."""
        await post_event(client, make_event(seq=1))
        event = make_event(seq=2)
        body = event.model_dump_json().encode()
        await client.post(
            URL, content=body, headers={**signed(body), "tracestate": "k=" + "v" * 900}
        )
        plain, long = recorder.attempts()
        assert (plain.traceparent, plain.tracestate) == (None, None)
        assert long.tracestate is not None
        assert len(long.tracestate) == fake_rvc.MAX_TRACE_HEADER_CHARS
