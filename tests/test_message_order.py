"""Messages added to one conversation at the same time (a customer typing twice, a reviewer
replying while the customer writes) each get their own position: ``next_seq`` makes the
writers take turns. On SQLite and on PostgreSQL, with real concurrent sessions."""

from __future__ import annotations

import threading
import time

from sqlalchemy import select

from app.db import session_scope
from app.models import Conversation, Message, new_id, next_seq


def _message(conversation_id: str, seq: int) -> Message:
    return Message(id=new_id(), conversation_id=conversation_id, seq=seq, role="customer", text="x")


def test_two_writers_of_one_conversation_take_turns_for_a_position(any_db_url):
    with session_scope(any_db_url) as session:
        conversation = Conversation()
        session.add(conversation)
        session.flush()
        cid = conversation.id
        session.add(_message(cid, 0))
        session.commit()

    second: dict = {}

    def other_writer() -> None:
        with session_scope(any_db_url) as session:
            started = time.monotonic()
            seq = next_seq(session, cid)
            second["waited"] = time.monotonic() - started
            session.add(_message(cid, seq))
            session.commit()
            second["seq"] = seq

    with session_scope(any_db_url) as first:
        seq = next_seq(first, cid)
        first.add(_message(cid, seq))
        first.flush()
        thread = threading.Thread(target=other_writer)
        thread.start()
        time.sleep(0.5)  # the other writer is waiting for this one's turn to end
        assert "seq" not in second
        first.commit()
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert (seq, second["seq"]) == (1, 2)
    assert second["waited"] >= 0.4
    with session_scope(any_db_url) as session:
        seqs = session.scalars(select(Message.seq).where(Message.conversation_id == cid)).all()
    assert sorted(seqs) == [0, 1, 2]
