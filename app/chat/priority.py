"""Who goes first for a BERT slot when the server is saturated (app/nlp/admission.py).

- ``HIGH``: the conversation is already with a person (awaiting a reviewer), or the customer
  asks, in the same conversation, a question they already asked (the first answer did not help).
- ``LOW``: repeat traffic: a new conversation whose text is the one the same client opened a
  conversation with less than ``REPEAT_SECONDS`` ago (double submits, retry loops, scripts).
- ``NORMAL``: everything else.

The repeat memory is per process and small (``REPEAT_CLIENTS`` clients): it only has to catch
bursts, and a miss only means normal priority.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import Conversation, Message
from app.nlp.admission import Priority
from app.nlp.normalize import normalize
from app.privacy import mask
from app.vocab import HANDED_OVER_STATES

REPEAT_SECONDS = 60.0
REPEAT_CLIENTS = 4096
RECENT_MESSAGES = 10

_opened: OrderedDict[str, tuple[str, float]] = OrderedDict()  # client -> (text, when)
_lock = threading.Lock()


def chat_priority(
    session: Session, conversation: Conversation | None, text: str, client_key: str
) -> Priority:
    normalized = normalize(text)
    if conversation is not None:
        if conversation.status in HANDED_OVER_STATES:
            return Priority.HIGH
        # Stored texts are masked (app/privacy): compare the masked form of this one.
        masked = normalize(mask(text))
        earlier = session.scalars(
            select(Message.text)
            .where(Message.conversation_id == conversation.id, Message.role == "customer")
            .order_by(Message.seq.desc())
            .limit(RECENT_MESSAGES)
        )
        if any(normalize(t) == masked for t in earlier):
            return Priority.HIGH
        return Priority.NORMAL
    now = time.monotonic()
    with _lock:
        previous = _opened.get(client_key)
        _opened[client_key] = (normalized, now)
        _opened.move_to_end(client_key)
        while len(_opened) > REPEAT_CLIENTS:
            _opened.popitem(last=False)
    if previous is not None and previous[0] == normalized and now - previous[1] < REPEAT_SECONDS:
        return Priority.LOW
    return Priority.NORMAL
