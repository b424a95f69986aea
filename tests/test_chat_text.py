"""Input cleaning, the "asked for a person" phrasings (app/chat/text.py) and an article's HTML as
plain text (app/kb/plain_text.py)."""

from __future__ import annotations

import pytest

from app.chat.text import asks_for_human, clean_message
from app.kb.plain_text import html_to_text


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


def test_clean_message_strips_controls_but_keeps_emoji_sequences_and_lines():
    family = "👩\u200d👩\u200d👧"
    assert clean_message(f"\x00 hi\x1b\r\nthere\t{family} \x7f\x9f ") == f"hi\nthere {family}"
    assert clean_message("e\u0301") == "é"  # NFC
    assert clean_message("\ud800abc") == "abc"  # lone surrogate from a JSON escape
    assert clean_message(" \x00\x01 ") == ""


def test_html_to_text_keeps_paragraphs_and_list_items_and_drops_scripts():
    html = (
        "<p>Cards arrive in <strong>5&nbsp;days</strong>.</p><ul><li>Freeze it</li>"
        "<li>Order &amp; wait</li></ul><script>alert(1)</script>"
    )
    assert html_to_text(html) == "Cards arrive in 5 days.\n\n- Freeze it\n\n- Order & wait"
