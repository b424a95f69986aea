"""Detecting a customer who asks to talk to a person ("talk to a human", "agent please").

Used by the chat service (such a message goes straight to review, without a draft) and by
distillation (such a message is not a question to learn an intent from)."""

from __future__ import annotations

import re

# A customer asking for a human. Deliberately narrow: a short list of phrasings that clearly
# mean "let me talk to a person", so that questions merely mentioning staff still get answered.
#   talk/speak/chat to/with (a|an|the|some|real|live|actual) (human|person|agent|...)
#   (human|real person|live agent|operator|representative) please / now
#   I want/need/would like (a|an|to talk to a) human / person / agent
#   connect/transfer me to (a|an) agent / human / person
#   "agent", "human", "operator", "representative" on their own
_PERSON = r"(?:human(?: being)?|person|agent|operator|representative|rep|advisor|adviser|someone|somebody|staff|support team)"
_ARTICLE = r"(?:(?:a|an|the|some|one of your|your)\s+)?(?:(?:real|live|actual|human)\s+)?"
_ASKED_FOR_HUMAN_RE = re.compile(
    r"""
    \b(?:talk|speak|chat)\s+(?:to|with)\s+"""
    + _ARTICLE
    + _PERSON
    + r"""\b
    | \b(?:connect|transfer|put)\s+me\s+(?:through\s+)?(?:to|with)\s+"""
    + _ARTICLE
    + _PERSON
    + r"""\b
    | \b(?:i\s+)?(?:want|need|would\s+like|'d\s+like)\s+(?:to\s+(?:talk|speak)\s+to\s+)?"""
    + _ARTICLE
    + r"""(?:human|person|agent|operator|representative)\b
    | ^\W*(?:a\s+)?(?:real\s+|live\s+)?(?:human|person|agent|operator|representative)
      (?:\s+(?:please|pls|now))?\W*$
    | \b(?:human|real\s+person|live\s+agent|operator|representative)\s+(?:please|pls)\b
    """,
    re.IGNORECASE | re.VERBOSE,
)


def asks_for_human(text: str) -> bool:
    """True when the message is a request to talk to a person (see the phrasings above)."""
    return bool(_ASKED_FOR_HUMAN_RE.search(text))
