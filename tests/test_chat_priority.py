"""Who goes first for a BERT slot (app/chat/priority.py), on a real database."""

from __future__ import annotations

from app.chat.priority import chat_priority
from app.db import session_scope
from app.models import Conversation, Message
from app.nlp.admission import Priority
from app.vocab import ConversationState

CARD_QUESTION = "my card 4111 1111 1111 1111 was charged twice"


def _conversation(session, status: str, *texts: str) -> Conversation:
    conversation = Conversation(status=status)
    session.add(conversation)
    session.flush()
    for seq, text in enumerate(texts):
        session.add(Message(conversation_id=conversation.id, seq=seq, role="customer", text=text))
    session.flush()
    return conversation


def test_a_conversation_waiting_for_or_with_a_person_goes_first(app, db_url):
    with app.app_context(), session_scope(db_url) as session:
        for state in (ConversationState.PENDING, ConversationState.WITH_PERSON):
            waiting = _conversation(session, state, "where is my card")
            assert chat_priority(session, waiting, "hello?", "client-a") == Priority.HIGH
        with_bot = _conversation(session, ConversationState.BOT, "where is my card")
        assert chat_priority(session, with_bot, "how do I change my PIN", "client-a") == (
            Priority.NORMAL
        )


def test_asking_again_in_the_same_conversation_goes_first_even_with_pii(app, db_url):
    from app.privacy import mask

    with app.app_context(), session_scope(db_url) as session:
        # The stored text is masked, the new one arrives as typed.
        conversation = _conversation(session, ConversationState.BOT, mask(CARD_QUESTION))
        assert chat_priority(session, conversation, CARD_QUESTION, "client-b") == Priority.HIGH


def test_the_same_first_message_from_one_client_within_a_minute_is_low(app, db_url):
    with app.app_context(), session_scope(db_url) as session:
        first = chat_priority(session, None, "where is my card", "client-c")
        again = chat_priority(session, None, "Where is my  card", "client-c")
        other_client = chat_priority(session, None, "where is my card", "client-d")
    assert (first, again, other_client) == (Priority.NORMAL, Priority.LOW, Priority.NORMAL)
