"""Property-based fuzzing of fake_rvc: schemathesis over its OpenAPI schema, hypothesis on bodies.

Whatever arrives, the app answers with a 2xx or a precise 4xx, never a 5xx, and keeps
serving. The long-poll wait (slow by design) and fault injection (which would make later
calls answer 5xx on purpose) are left out of the schema run; their own tests cover them.

The schema comes from ``app.openapi()``; the calls go over real HTTP to a FakeRvcServer
(starlette's TestClient warns about httpx, and warnings are errors here).
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_rvc import FakeRvcServer, create_app
from robot_mcp_kit.signing import signed_headers

SECRET = "s3cret"
SCHEMA = (
    schemathesis.openapi.from_dict(create_app({"sleeper": SECRET}).openapi())
    .exclude(path="/api/fake/wait")
    .exclude(method="POST", path="/api/fake/faults")
)
FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)
near_events = st.fixed_dictionaries(
    {
        "schema_version": st.sampled_from([1, 1, 1, 2, "1", True]),
        "event_id": st.text(max_size=8),
        "task_id": st.text(max_size=8),
        "server": st.sampled_from(["sleeper", "sleeper", "nav", ""]),
        "tool": st.text(max_size=5),
        "type": st.sampled_from(["progress", "task_done", "task_failed", "bogus"]),
        "seq": st.integers(min_value=-2, max_value=5) | st.text(max_size=2),
        "ts": st.sampled_from(["2025-12-12T09:33:20.000Z", "2025-12-12T09:33:20", "x", 3]),
        "payload": st.dictionaries(st.text(max_size=5), json_values, max_size=3) | json_values,
    },
    optional={"extra": json_values},
)


@pytest.fixture(scope="module")
def rvc():
    with FakeRvcServer({"sleeper": SECRET}) as server:
        yield server


@pytest.fixture(scope="module")
def client(rvc):
    with httpx.Client(base_url=rvc.url, timeout=10) as c:
        yield c


@SCHEMA.parametrize()
@FUZZ
def test_no_operation_answers_5xx(case, rvc):
    """Every documented operation, fed schema-shaped and unsigned data, answers below 500."""
    response = case.call(base_url=rvc.url)
    assert response.status_code < 500, (case.method, case.path, response.text)


def _post_signed(client: httpx.Client, body: bytes) -> httpx.Response:
    headers = signed_headers("sleeper", SECRET, body, int(time.time()))
    return client.post("/api/agent/events", content=body, headers=headers)


@given(body=st.binary(max_size=300))
@FUZZ
def test_signed_random_bytes_never_5xx(client, body):
    """Arbitrary bytes, correctly signed, get 200 or 422 with a reason — never a server error."""
    response = _post_signed(client, body)
    assert response.status_code in (200, 422), response.text
    assert "error" in response.json() or response.status_code == 200


@given(event=near_events)
@FUZZ
def test_signed_near_events_get_200_or_422(client, event):
    """Almost-TaskEvents, correctly signed, are accepted or refused with 422 and a reason."""
    response = _post_signed(client, json.dumps(event).encode())
    assert response.status_code in (200, 422), response.text
    if response.status_code == 422:
        assert response.json()["error"] in {
            "bad_schema_version",
            "invalid_event",
            "server_mismatch",
            "invalid_json",
        }
