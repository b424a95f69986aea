"""The app skeleton: health probes, metrics, migrations on both databases."""

import json
from datetime import datetime

from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import inspect, text

from app import migrate
from app.db import get_engine
from app.models import Base


def test_healthz_is_alive(client):
    resp = client.get("/healthz")
    assert resp.status_code == 200
    assert resp.get_json() == {"status": "ok"}


def test_readyz_reports_missing_models_with_503(client):
    resp = client.get("/readyz")
    body = resp.get_json()
    assert resp.status_code == 503
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["redis"] == "ok"
    assert body["checks"]["models"].startswith("not ready")


def test_metrics_exposes_request_counts(client):
    client.get("/healthz")
    response = client.get("/metrics")
    # The exposition format's own content type, its charset stated once
    assert response.headers["Content-Type"] == CONTENT_TYPE_LATEST
    text = response.get_data(as_text=True)
    assert (
        'tierdesk_http_requests_total{endpoint="health.healthz",method="GET",status="200"}' in text
    )


def test_migrations_create_every_table_and_downgrade_cleanly(any_db_url):
    tables = set(inspect(get_engine(any_db_url)).get_table_names())
    assert {
        "articles",
        "intents",
        "training_examples",
        "conversations",
        "messages",
        "review_items",
        "reviewers",
        "feedback",
        "system_state",
    } <= tables
    assert migrate.current(any_db_url) == migrate.head_revision(any_db_url)
    migrate.downgrade(any_db_url, "base")
    assert set(inspect(get_engine(any_db_url)).get_table_names()) <= {"alembic_version"}


def test_the_migrations_give_every_column_the_models_declare(any_db_url):
    """A model column no migration adds would fail only when a query first touches it."""
    inspector = inspect(get_engine(any_db_url))
    for table in Base.metadata.sorted_tables:
        columns = {column["name"] for column in inspector.get_columns(table.name)}
        assert set(table.columns.keys()) <= columns, table.name


def test_articles_stored_before_taught_questions_were_kept_apart_have_none(any_db_url):
    """Migration 0006 on a database holding an article: the article reads as having been
    taught nothing, and going back drops the column only."""
    migrate.downgrade(any_db_url, "0005")
    engine = get_engine(any_db_url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO articles (slug, title, body, body_html, tags, questions, version, "
                "published, content_hash, created_at, updated_at) VALUES ('pay', 'How do I pay?', "
                "'By card.', '', '[]', '[\"payment\"]', 1, true, '', :now, :now)"
            ),
            {"now": datetime(2026, 12, 1)},
        )
    migrate.upgrade(any_db_url)
    with engine.connect() as connection:
        row = connection.execute(text("SELECT questions, taught_questions FROM articles")).one()
    assert [json.loads(v) if isinstance(v, str) else v for v in row] == [["payment"], []]
    migrate.downgrade(any_db_url, "0005")
    columns = {c["name"] for c in inspect(engine).get_columns("articles")}
    assert "taught_questions" not in columns and "questions" in columns
