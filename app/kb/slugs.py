"""Slugs: the stable, ASCII, kebab-case keys articles are upserted by."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Container

from sqlalchemy import select
from sqlalchemy.orm import Session

SLUG_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_DERIVED_LENGTH = 80
_APOSTROPHES = re.compile(r"['\u2019\u2018`]")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(title: str) -> str:
    """The slug a title gives: the same title always gives the same slug.

    Accents are folded to ASCII, apostrophes dropped ("don't" -> "dont"), every other run of
    non-alphanumerics becomes one hyphen, and long titles are cut at a word boundary. A title with
    no ASCII letters at all (for example Japanese) gets ``article-<hash of the title>``.
    """
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    text = _APOSTROPHES.sub("", text.lower().replace("&", " and "))
    slug = _NOT_ALNUM.sub("-", text).strip("-")
    if len(slug) > MAX_DERIVED_LENGTH:
        slug = slug[:MAX_DERIVED_LENGTH]
        slug = slug.rsplit("-", 1)[0] if "-" in slug else slug
    if not slug:
        digest = hashlib.sha1(title.strip().encode("utf-8")).hexdigest()[:10]
        slug = f"article-{digest}"
    return slug


def is_valid_slug(slug: str) -> bool:
    return bool(SLUG_PATTERN.match(slug))


def unique_slug(base: str, taken: Container[str]) -> str:
    """``base``, or ``base-2``, ``base-3``... whichever is not in ``taken``."""
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def free_slug(session: Session, title: str) -> str:
    """A slug for a *new* article titled ``title`` that no existing article uses.

    Imports upsert by the derived slug (same title, same article); callers that want to create
    an article without ever overwriting one (the reviewer console) use this instead.
    """
    from app.models import Article

    base = slugify(title)
    taken = set(
        session.scalars(
            select(Article.slug).where((Article.slug == base) | Article.slug.like(f"{base}-%"))
        )
    )
    return unique_slug(base, taken)
