"""Verified customer identities for the widget (the Intercom/Chatwoot "identity hash" pattern).

The host site's server computes ``hex(HMAC-SHA256(TIERDESK_IDENTITY_SECRET, customer_id))`` for
a logged-in customer and puts both on the widget's script tag; the widget sends them with every
API call (``X-Tierdesk-Customer-Id``, ``X-Tierdesk-Customer-Hash``). Here:

- no identity sent (or no secret configured): the visitor is anonymous; the conversation id
  (122 random bits, ``uuid4``) is the bearer secret that reads and continues a conversation;
- a valid identity: new conversations belong to it (``conversations.customer_ref``, a keyed
  digest, never the id itself), ``GET /api/v1/customer/conversations`` lists them on any
  device, and an anonymous conversation it continues becomes its own;
- a wrong hash: 403 ``identity_invalid``; nothing is read or written.

A conversation that belongs to a verified customer answers only to that identity: with another
identity, or with none, it is 404 like an unknown id, so a guessed, leaked or forged request
never reveals it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass

from flask import Request

from app.privacy.refs import digest

log = logging.getLogger(__name__)

ID_HEADER = "X-Tierdesk-Customer-Id"
HASH_HEADER = "X-Tierdesk-Customer-Hash"
MAX_ID_LENGTH = 200


class InvalidIdentity(ValueError):
    """An identity was sent with a hash that does not verify."""


@dataclass(frozen=True)
class Identity:
    ref: str | None  # customer_ref of a verified customer; None: anonymous

    @property
    def verified(self) -> bool:
        return self.ref is not None

    def may_access(self, customer_ref: str | None) -> bool:
        """Whether a conversation owned by ``customer_ref`` (None: anonymous) is visible."""
        return customer_ref is None or customer_ref == self.ref


ANONYMOUS = Identity(None)


def sign(identity_secret: str, customer_id: str) -> str:
    """The hash a host server puts next to ``customer_id`` (hex HMAC-SHA256)."""
    return hmac.new(identity_secret.encode(), customer_id.encode(), hashlib.sha256).hexdigest()


def from_request(request: Request, identity_secret: str | None, secret_key: str) -> Identity:
    customer_id = (request.headers.get(ID_HEADER) or "").strip()
    sent_hash = (request.headers.get(HASH_HEADER) or "").strip().lower()
    if not customer_id and not sent_hash:
        return ANONYMOUS
    if not identity_secret:
        log.warning("a widget sent a customer identity but TIERDESK_IDENTITY_SECRET is not set")
        return ANONYMOUS
    if not customer_id or len(customer_id) > MAX_ID_LENGTH or not sent_hash:
        raise InvalidIdentity("The customer identity is incomplete or too long.")
    if not hmac.compare_digest(sign(identity_secret, customer_id), sent_hash):
        raise InvalidIdentity("The customer identity's signature does not verify.")
    return Identity(digest(secret_key, "customer", customer_id))
