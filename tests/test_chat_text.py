"""Input cleaning (app/chat/text.py) and an article's HTML as plain text (app/kb/plain_text.py)."""

from __future__ import annotations

from app.chat.text import clean_message
from app.kb.plain_text import html_to_text


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


def test_html_to_text_says_where_a_link_goes_unless_its_text_does():
    html = (
        '<p>Fill in the <a href="https://example.com/refund">refund form</a> or '
        '<a href="mailto:help@example.com">write to us</a>.</p>'
        '<p><a href="https://example.com/status">https://example.com/status</a>, '
        '<a href="mailto:help@example.com">help@example.com</a>, <a href="/contact">contact</a>, '
        '<a href="javascript:x()">x</a></p>'
    )
    assert html_to_text(html) == (
        "Fill in the refund form (https://example.com/refund) or write to us "
        "(help@example.com).\n\n"
        "https://example.com/status, help@example.com, contact, x"
    )
