"""Reviewer accounts, CSRF tokens and login rate limiting for the console.

- Passwords are stored as werkzeug.security hashes (scrypt by default); a login for an unknown
  e-mail still checks a dummy hash, so response time does not reveal which accounts exist.
- CSRF: one random token per session, sent in a hidden field of every POST form and compared
  in constant time (``hmac.compare_digest``); a missing or wrong token is a 400.
- Login failures are counted per client IP and e-mail in Redis (``INCR`` with a window
  ``EXPIRE``); past the limit further attempts are refused with 429 until the window ends. When
  Redis is unreachable an in-process counter takes over, so an outage does not lift the limit.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time

import redis
from flask import abort, request, session
from sqlalchemy import select
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from app.models import Reviewer, utcnow
from app.vocab import Role

log = logging.getLogger(__name__)

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
SESSION_REVIEWER = "reviewer_id"
SESSION_CSRF = "csrf_token"
MIN_PASSWORD_LENGTH = 8
_DUMMY_HASH = generate_password_hash(secrets.token_hex(16))


class AccountError(ValueError):
    """A reviewer account cannot be created as asked (shown to the operator as is)."""


def normalize_email(email: str) -> str:
    return (email or "").strip().lower()


def validate_email(email: str) -> str:
    email = normalize_email(email)
    local, _, domain = email.partition("@")
    if not local or "." not in domain or any(ch.isspace() for ch in email) or len(email) > 320:
        raise AccountError(f"not an e-mail address: {email!r}")
    return email


def validate_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"the password needs at least {MIN_PASSWORD_LENGTH} characters")
    if len(password) > 1024:
        raise AccountError("the password is longer than 1024 characters")
    return password


def validate_role(role: str) -> str:
    role = (role or "").strip().lower()
    if role not in set(Role):
        raise AccountError(f"unknown role {role!r}: choose {' or '.join(Role)}")
    return role


def add_reviewer(
    session: Session,
    email: str,
    password: str,
    *,
    reset: bool = False,
    role: str | None = None,
) -> Reviewer:
    """Create a reviewer (or, with ``reset``, set an existing one's password and reactivate);
    ``role`` is ``reviewer`` for a new account unless given, unchanged on a reset."""
    email = validate_email(email)
    validate_password(password)
    role = validate_role(role) if role is not None else None
    reviewer = session.scalar(select(Reviewer).where(Reviewer.email == email))
    if reviewer is not None and not reset:
        raise AccountError(
            f"a reviewer with the e-mail {email} exists (use --reset to set a new password)"
        )
    if reviewer is None:
        reviewer = Reviewer(email=email, password_hash="", role=role or Role.REVIEWER)
        session.add(reviewer)
    elif role is not None:
        reviewer.role = role
    reviewer.password_hash = generate_password_hash(password)
    reviewer.active = True
    session.flush()
    return reviewer


def authenticate(session: Session, email: str, password: str) -> Reviewer | None:
    reviewer = session.scalar(select(Reviewer).where(Reviewer.email == normalize_email(email)))
    if reviewer is None or not reviewer.active:
        check_password_hash(_DUMMY_HASH, password)  # same cost as a real check
        return None
    if not check_password_hash(reviewer.password_hash, password):
        return None
    reviewer.last_login_at = utcnow()
    return reviewer


# -- CSRF ----------------------------------------------------------------------------------------


def csrf_token() -> str:
    """This session's token (created on first use)."""
    token = session.get(SESSION_CSRF)
    if not token:
        token = session[SESSION_CSRF] = secrets.token_urlsafe(32)
    return token


def check_csrf() -> None:
    """Abort with 400 unless the request carries this session's token."""
    expected = session.get(SESSION_CSRF)
    sent = request.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER) or ""
    if not expected or not hmac.compare_digest(expected.encode(), sent.encode()):
        abort(
            400,
            description="The form was missing its security token or it expired. "
            "Reload the page and try again.",
        )


# -- login rate limiting -------------------------------------------------------------------------


class LoginLimiter:
    """Counts failed logins per (client IP, e-mail) within a sliding-from-first-failure window."""

    def __init__(
        self, client: redis.Redis, prefix: str, max_failures: int, window_seconds: int
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.max_failures = max_failures
        self.window_seconds = window_seconds
        self._local: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    def _key(self, ip: str, email: str) -> str:
        digest = hashlib.sha256(f"{ip}\0{normalize_email(email)}".encode()).hexdigest()[:32]
        return f"{self.prefix}console:login_failures:{digest}"

    def retry_after(self, ip: str, email: str) -> int:
        """Seconds until this client may try again; 0 when it may try now."""
        key = self._key(ip, email)
        try:
            pipe = self.client.pipeline()
            pipe.get(key)
            pipe.ttl(key)
            count, ttl = pipe.execute()
            count = int(count or 0)
        except redis.RedisError:
            count, ttl = self._local_state(key)
        if count >= self.max_failures:
            return max(int(ttl), 1)
        return 0

    def record_failure(self, ip: str, email: str) -> None:
        key = self._key(ip, email)
        try:
            pipe = self.client.pipeline()
            pipe.set(key, 0, ex=self.window_seconds, nx=True)  # the window starts once
            pipe.incr(key)
            pipe.execute()
        except redis.RedisError:
            log.warning("login limiter: Redis unavailable, counting failures in this process")
            with self._lock:
                count, until = self._local_state(key)
                expires = time.monotonic() + (until if count else self.window_seconds)
                self._local[key] = (count + 1, expires)

    def reset(self, ip: str, email: str) -> None:
        key = self._key(ip, email)
        self._local.pop(key, None)
        try:
            self.client.delete(key)
        except redis.RedisError:
            pass

    def _local_state(self, key: str) -> tuple[int, float]:
        count, expires = self._local.get(key, (0, 0.0))
        remaining = expires - time.monotonic()
        return (count, remaining) if remaining > 0 else (0, 0.0)
