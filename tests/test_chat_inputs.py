"""Input rules of the chat API (app/chat/inputs.py): JSON objects only, documented field types,
messages of 1 to 2,000 characters after control characters are stripped; every refusal is a
JSON 4xx that stores nothing."""

from __future__ import annotations

import pytest
from fixtures_chat import api_error, chat, rows

from app.models import Conversation, Message


def test_control_characters_are_stripped_and_any_script_or_emoji_is_kept(client, db_url):
    text = "Carte bloquée 💳 卡被冻结 البطاقة 👩‍👩‍👧"
    body = chat(client, f"\x00\x1b[31m{text}\x07\u0085").get_json()
    assert body["status"] == "pending_review"
    [customer] = rows(db_url, Message, role="customer")
    assert customer.text == f"[31m{text}"


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"message": ""}, "message_empty"),
        ({"message": " \n\t "}, "message_empty"),
        ({"message": "\x00\x01\x02"}, "message_empty"),
        ({"message": "x" * 2001}, "message_too_long"),
        ({}, "missing_field"),
        ({"message": None}, "missing_field"),
        ({"message": 42}, "invalid_field"),
        ({"message": ["hi"]}, "invalid_field"),
        ({"message": "hi", "conversation_id": 7}, "invalid_field"),
        ({"message": "hi", "handoff": "yes"}, "invalid_field"),
    ],
)
def test_invalid_messages_get_400_and_store_nothing(client, db_url, payload, code):
    api_error(client.post("/api/v1/chat", json=payload), 400, code)
    assert rows(db_url, Message) == [] and rows(db_url, Conversation) == []


def test_message_limits_count_characters_after_trimming(client, db_url):
    assert chat(client, "   " + "é" * 2000 + "   ").status_code == 200
    assert chat(client, "a").status_code == 200
    api_error(chat(client, "🙂" * 2001), 400, "message_too_long")


@pytest.mark.parametrize(
    ("data", "content_type", "status", "code"),
    [
        ("{", "application/json", 400, "invalid_json"),
        ('"just a string"', "application/json", 400, "invalid_json"),
        ("[1, 2]", "application/json", 400, "invalid_json"),
        (b'{"message": "\xff\xfe"}', "application/json", 400, "invalid_json"),
        ("[" * 5000 + "]" * 5000, "application/json", 400, "invalid_json"),
        ('{"message": "hi"}', "text/plain", 415, "unsupported_media_type"),
        ("message=hi", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
        ('{"message": "hi"}', None, 415, "unsupported_media_type"),
    ],
)
def test_bodies_that_are_not_a_json_object_are_refused(
    client, db_url, data, content_type, status, code
):
    headers = {"Content-Type": content_type} if content_type else {}
    api_error(client.post("/api/v1/chat", data=data, headers=headers), status, code)
    assert rows(db_url, Message) == []


def test_bodies_over_64_kib_get_413_json(client, db_url):
    resp = client.post(
        "/api/v1/chat", data='{"message": "' + "a" * 70_000 + '"}', content_type="application/json"
    )
    api_error(resp, 413, "payload_too_large")
    assert rows(db_url, Message) == []
