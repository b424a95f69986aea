"""The app skeleton: health probes, metrics, migrations on both databases."""

from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import inspect

from app import migrate
from app.db import get_engine


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
