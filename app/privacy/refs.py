"""Keyed digests that find a customer's data without storing who they are.

An e-mail address typed in a chat is stored masked; its HMAC-SHA256 under ``SECRET_KEY`` goes
into ``pii_refs`` so that ``tierdesk privacy export --email`` finds the conversation. A verified
widget identity is stored the same way (``conversations.customer_ref``). The digests cannot be
reversed without the key; rotating ``SECRET_KEY`` makes the old ones unfindable (they are still
removed by retention and by erasing the conversation).
"""

from __future__ import annotations

import hashlib
import hmac

from sqlalchemy.orm import Session

from app.models import PiiRef


def digest(secret: str, kind: str, value: str) -> str:
    normalised = value.strip().lower() if kind == "email" else value.strip()
    return hmac.new(secret.encode(), f"{kind}\0{normalised}".encode(), hashlib.sha256).hexdigest()


def email_refs(secret: str, conversation_id: str, emails: list[str]) -> list[PiiRef]:
    """One ``PiiRef`` per distinct address in ``emails``."""
    return [
        PiiRef(conversation_id=conversation_id, kind="email", digest=digest(secret, "email", e))
        for e in dict.fromkeys(emails)
    ]


def add_email_refs(session: Session, secret: str, conversation_id: str, text: str) -> None:
    """Record the addresses in ``text`` (the customer's original message) for lookups."""
    from app.privacy import get_masker

    emails = get_masker().emails(text)
    if emails:
        session.add_all(email_refs(secret, conversation_id, emails))
