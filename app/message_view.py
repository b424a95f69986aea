"""A message as the customer may see it: the conversation API's message object, also pushed
live to the widget by the review console. Drafts waiting for a reviewer show a notice instead
of their text; articles are linked by their public URL."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import url_for
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import Article, Message

PENDING_NOTICE = "Thanks for your patience: a person from our team will answer here shortly."


def iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="milliseconds") + "Z" if value else None


def article_ref(slug: str, title: str) -> dict[str, str]:
    return {"slug": slug, "title": title, "url": url_for("web.article", slug=slug)}


def public_message(session: Session, message: Message) -> dict[str, Any]:
    """One message as the customer may see it (the conversation API's message object)."""
    articles = {}
    if message.article_slug:
        article = session.scalar(select(Article).where(Article.slug == message.article_slug))
        if article is not None:
            articles[article.slug] = article
    return message_payload(message, articles)


def message_payload(
    message: Message, articles: dict[str, Article], votes: dict[str, bool] | None = None
) -> dict[str, Any]:
    """``votes``: the customer's vote on each answer that has one (message id -> helpful)."""
    text, html, article = message.text, None, None
    linked = articles.get(message.article_slug or "")
    if message.role == "bot" and message.status != "answered":
        text = PENDING_NOTICE  # the draft is for the reviewer, not the customer
    elif message.role == "bot":
        html = message.html
        if linked is not None:
            article = article_ref(linked.slug, linked.title)
    elif message.role == "agent" and linked is not None:
        # A reviewer's reply by article: its HTML is the KB's sanitised HTML, never free text.
        html = linked.body_html
        article = article_ref(linked.slug, linked.title)
    return {
        "id": message.id,
        "role": message.role,
        "seq": message.seq,
        "text": text,
        "html": html,
        "article": article,
        "status": message.status if message.role == "bot" else None,
        "in_reply_to": message.in_reply_to,
        "created_at": iso(message.created_at),
        "feedback": (votes or {}).get(message.id),
    }
