"""Demo pages of the fictional Northwind Bank (with the chat widget embedded) and the public
knowledge-base pages: ``/``, ``/kb`` (search) and ``/kb/<slug>``."""

from __future__ import annotations

from flask import Blueprint, abort, render_template, request

from app.db import get_session
from app.web.search import (
    MAX_QUERY_CHARS,
    popular_articles,
    published_article,
    related_articles,
    search_articles,
)

bp = Blueprint(
    "web",
    __name__,
    template_folder="templates",
    static_folder="static",
    static_url_path="/web-static",
)

BANK_NAME = "Northwind Bank"


@bp.app_context_processor
def _bank() -> dict:
    return {"bank_name": BANK_NAME}


@bp.get("/")
def home():
    return render_template("web/home.html", popular=popular_articles(get_session()))


@bp.get("/kb")
def search():
    query = request.args.get("q", "", type=str)[:MAX_QUERY_CHARS].strip()
    results = search_articles(get_session(), query) if query else []
    return render_template("web/search.html", query=query, results=results)


@bp.get("/kb/<slug>")
def article(slug: str):
    session = get_session()
    found = published_article(session, slug)
    if found is None:
        abort(404)
    return render_template(
        "web/article.html", article=found, related=related_articles(session, found)
    )
