"""Hostile and malformed input never causes a 5xx and never leaves garbage in the database.

Three sources of requests (well over 200 in total):
- a hand-written list: empty, huge, binary, wrong types, wrong content types, invalid UTF-8,
  SQL and script injection, path tricks, odd methods and headers;
- Hypothesis: arbitrary JSON values, arbitrary text and arbitrary bytes as bodies;
- Schemathesis: requests generated from the OpenAPI document (valid and invalid by schema),
  checked for server errors and for responses that do not match the document.

"No garbage stored" means: the number of stored customer messages equals the number of chat
requests answered with 200, and every stored message is clean (trimmed, no control
characters, 1 to 2,000 characters).
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest
import schemathesis
from fixtures_chat import api_error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import select

from app.db import session_scope
from app.models import Conversation, Message

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

INJECTIONS = [
    "'; DROP TABLE messages; --",
    '" OR 1=1 --',
    "1); DELETE FROM conversations WHERE (1=1",
    "<script>window.__pwned = 1</script>",
    "<img src=x onerror=alert(1)>",
    "javascript:alert(document.cookie)",
    "{{7*7}} ${7*7} <%= 7*7 %>",
    "../../../../etc/passwd",
    "%00%0d%0aSet-Cookie: x=y",
    "\u202eevil\u202c",
    "A" * 2000,
    "💥" * 2000,
    "\ud83d",  # a lone surrogate once JSON-decoded
    "NULL",
    "\\x00\\u0000",
]


def _hand_written_requests(conversation_id: str) -> list[dict]:
    """(method, path, data, content type, headers) of hostile requests."""
    reqs: list[dict] = []

    def add(method="POST", path="/api/v1/chat", data=None, ctype="application/json", **headers):
        reqs.append(
            {"method": method, "path": path, "data": data, "ctype": ctype, "headers": headers}
        )

    for text in INJECTIONS:
        add(data=json.dumps({"message": text}))
        add(data=json.dumps({"message": text, "conversation_id": conversation_id}))
        add(data=json.dumps({"message": "hi", "conversation_id": text}))
        in_path = quote(text.encode("utf-8", "surrogatepass"), safe="")  # may be invalid UTF-8
        add(method="GET", path="/api/v1/conversations/" + in_path[:300])
        add(
            data=json.dumps({"helpful": False, "comment": text}),
            path=f"/api/v1/messages/{in_path[:60]}/feedback",
        )
    bodies = [
        "",
        " ",
        "null",
        "true",
        "0",
        "-1",
        "1e999",
        "NaN",
        "[]",
        "{}",
        '""',
        '"message"',
        '{"message": ""}',
        '{"message": null}',
        '{"message": {}}',
        '{"message": []}',
        '{"message": 1.5}',
        '{"message": true}',
        '{"message": "hi", "message": ""}',
        '{"message": "hi",}',
        "{'message': 'hi'}",
        '{"message": "hi"',
        '{"message": "\\ud800"}',
        '{"message": "\\u0000\\u0001"}',
        '{"message": "' + "\\n" * 3000 + '"}',
        '{"message": "' + "x" * 2001 + '"}',
        '{"message": "' + "x" * 60_000 + '"}',
        '{"message": "' + "x" * 70_000 + '"}',
        "[" * 100_000,
        '{"a":' * 10_000,
        '{"message": "hi", "handoff": null}',
        '{"message": "hi", "handoff": "true"}',
        '{"message": "hi", "conversation_id": ["x"]}',
        '{"message": "hi", "extra": {"deep": 1}}',
        '{"message": ' + "1" * 5000 + "}",
    ]
    for body in bodies:
        add(data=body)
    for raw in [
        b"\xff\xfe\xfd",
        b'{"message": "\xc3\x28"}',
        b"\x00" * 100,
        bytes(range(256)),
        b'\xef\xbb\xbf{"message": "bom"}',
    ]:
        add(data=raw)
    for ctype in [
        "text/plain",
        "application/xml",
        "multipart/form-data; boundary=x",
        "application/x-www-form-urlencoded",
        "",
        "application/jsonx",
        "application/json; charset=latin-1",
    ]:
        add(data='{"message": "hi"}', ctype=ctype)
    add(data=None, ctype=None)
    for method in ["PUT", "PATCH", "DELETE", "GET", "HEAD", "TRACE"]:
        add(method=method, data='{"message": "hi"}')
    for path in [
        "/api/v1/",
        "/api/v1",
        "/api/v2/chat",
        "/api/v1/chat/",
        "/api/v1/chat/x",
        "/api/v1/conversations/",
        "/api/v1/messages//feedback",
        "/api/v1/conversations/" + "a" * 5000,
        "/api/v1/%ff%fe",
        "/api/v1/conversations/%00",
        "/api/v1/openapi.json/x",
    ]:
        add(method="GET", path=path)
    add(data='{"message": "hi"}', Origin="https://evil.example")
    add(data='{"message": "hi"}', Origin="null")
    add(data='{"message": "hi"}', Origin="http://[::1")  # not a URL at all
    add(path=f"/api/v1/conversations/{conversation_id}%0A", method="GET")  # id, then a newline
    add(method="OPTIONS", Origin="https://evil.example")
    add(data='{"message": "hi"}', **{"X-Forwarded-For": "not-an-ip, ::1, 999.1.1.1"})
    add(data='{"message": "hi"}', **{"Content-Length": "5"})
    return reqs


def _send(client, req):
    headers = dict(req["headers"])
    if req["ctype"] is not None:
        headers["Content-Type"] = req["ctype"]
    return client.open(req["path"], method=req["method"], data=req["data"], headers=headers)


def _assert_clean_storage(db_url: str, chat_successes: int) -> None:
    with session_scope(db_url) as session:
        customers = session.scalars(select(Message).where(Message.role == "customer")).all()
        bots = session.scalars(select(Message).where(Message.role == "bot")).all()
        conversation_ids = set(session.scalars(select(Conversation.id)).all())
    assert len(customers) == chat_successes
    assert len(bots) == chat_successes
    for message in customers:
        assert 1 <= len(message.text) <= 2000
        assert message.text == message.text.strip()
        assert not _CONTROL.search(message.text.replace("\n", "").replace("\t", ""))
        assert message.conversation_id in conversation_ids


def _assert_good_error(resp) -> None:
    assert resp.status_code < 500, resp.get_data(as_text=True)[:300]
    if resp.status_code >= 400 and resp.request.path.startswith("/api/v1"):
        body = resp.get_json(silent=True)
        if resp.request.method != "HEAD":
            assert body is not None and set(body["error"]) == {"code", "message"}


def test_hand_written_hostile_requests(client, db_url):
    first = client.post("/api/v1/chat", json={"message": "hello"})
    assert first.status_code == 200
    successes = 1
    requests = _hand_written_requests(first.get_json()["conversation_id"])
    assert len(requests) >= 140  # plus 150 from Hypothesis and the Schemathesis cases
    for req in requests:
        resp = _send(client, req)
        _assert_good_error(resp)
        if req["path"] == "/api/v1/chat" and req["method"] == "POST" and resp.status_code == 200:
            successes += 1
    assert successes > 10  # the injection strings themselves are fine messages
    _assert_clean_storage(db_url, successes)


_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_containers = st.lists(_scalars, max_size=4) | st.dictionaries(
    st.text(max_size=10), _scalars, max_size=4
)
_json_values = _scalars | _containers | st.lists(_containers, max_size=3)
_chat_bodies = st.one_of(
    st.fixed_dictionaries(
        {"message": st.text(max_size=2100)},
        optional={
            "handoff": st.booleans() | st.text(max_size=3),
            "conversation_id": st.none() | st.text(max_size=40),
        },
    ),
    st.dictionaries(
        st.sampled_from(["message", "conversation_id", "handoff", "x"]), _json_values, max_size=4
    ),
    _json_values,
)


def test_hypothesis_generated_bodies(client, db_url):
    counts = {"requests": 0, "successes": 0}

    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=_chat_bodies | st.binary(max_size=300).map(lambda b: ("raw", b)))
    def probe(body):
        if isinstance(body, tuple):
            resp = client.post("/api/v1/chat", data=body[1], content_type="application/json")
        else:
            resp = client.post(
                "/api/v1/chat", data=json.dumps(body), content_type="application/json"
            )
        counts["requests"] += 1
        _assert_good_error(resp)
        if resp.status_code == 200:
            counts["successes"] += 1
            stored = resp.get_json()
            assert stored["status"] == "pending_review"

    probe()
    assert counts["requests"] >= 100 and counts["successes"] > 0
    _assert_clean_storage(db_url, counts["successes"])


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_requests_generated_from_the_openapi_document(app, db_url, mode):
    """No server errors, and every response matches the document (status codes and schemas).

    Schemathesis generates the cases (valid by the schema, or deliberately invalid); they run
    through its WSGI transport against the real app.
    """
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.label for op in operations} >= {
        "POST /chat",
        "POST /messages/{message_id}/feedback",
        "GET /conversations/{conversation_id}",
    }
    checks = [not_a_server_error, status_code_conformance, response_schema_conformance]
    sent = []
    if mode == "negative":  # a free-form string path parameter has no invalid values
        operations = [op for op in operations if op.method.upper() == "POST"]
    for operation in operations:

        @settings(
            max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(case=operation.as_strategy(generation_mode=schemathesis.GenerationMode(mode)))
        def run(case):
            response = case.call()
            case.validate_response(response, checks=checks)
            sent.append((case.operation.label, response.status_code))

        run()
    assert len(sent) >= 40
    chats = sum(1 for label, status in sent if label == "POST /chat" and status == 200)
    _assert_clean_storage(db_url, chats)


def test_an_id_followed_by_a_line_break_is_no_id(client):
    cid = client.post("/api/v1/chat", json={"message": "hello"}).get_json()["conversation_id"]
    assert client.get(f"/api/v1/conversations/{cid}").status_code == 200
    api_error(client.get(f"/api/v1/conversations/{cid}%0A"), 404, "conversation_not_found")


def test_a_json_body_after_a_byte_order_mark_is_read(client):
    response = client.post(
        "/api/v1/chat",
        data=b"\xef\xbb\xbf" + json.dumps({"message": "hello"}).encode(),
        content_type="application/json",
    )
    assert response.status_code == 200
    assert response.get_json()["conversation_id"]


def test_a_doubled_slash_in_an_api_path_is_a_json_404_not_an_html_redirect(client):
    cid = client.post("/api/v1/chat", json={"message": "hello"}).get_json()["conversation_id"]
    response = client.get(f"/api/v1/conversations/{cid}//events")
    assert response.status_code == 404
    assert set(response.get_json()["error"]) == {"code", "message"}
