"""Text helpers of the chat API: cleaning customer input. (Requests for a person are detected
by ``app.nlp.person_request``; an article's HTML as plain text is ``app.kb.plain_text``.)"""

from __future__ import annotations

import re
import unicodedata

MAX_MESSAGE_CHARS = 2000

# Control characters (C0, DEL, C1) except tab and newline, and lone surrogates, which JSON's
# \\uXXXX escapes can smuggle in and no database column can store. Format characters such as
# the zero-width joiner stay: emoji sequences and several scripts need them.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def clean_message(raw: str) -> str:
    """NFC-normalised text without control characters, trimmed (tabs become spaces)."""
    text = _CONTROL_RE.sub("", raw.replace("\r\n", "\n").replace("\r", "\n"))
    text = unicodedata.normalize("NFC", text.replace("\t", " "))
    return text.strip()
