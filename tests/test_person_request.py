"""The "asked for a person" phrasings (app/nlp/person_request.py)."""

from __future__ import annotations

import pytest

from app.nlp.person_request import asks_for_human


@pytest.mark.parametrize(
    "text",
    [
        "talk to an agent",
        "Can I speak to a human?",
        "I want to talk to a real person",
        "human please",
        "Agent!",
        "a real person please",
        "connect me with an advisor",
        "transfer me to a live agent",
        "I need a human",
        "I'd like to speak with someone",
        "representative",
        "put me through to your staff",
    ],
)
def test_requests_for_a_person_are_recognised(text):
    assert asks_for_human(text)


@pytest.mark.parametrize(
    "text",
    [
        "How do I add a person to my account?",
        "my agent said the transfer was sent",
        "Is there a human verification step?",
        "What is a payment representative fee?",
        "Where is my card?",
        "Can someone else use my card?",
        "",
    ],
)
def test_ordinary_questions_are_not_requests_for_a_person(text):
    assert not asks_for_human(text)
