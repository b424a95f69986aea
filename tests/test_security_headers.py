"""Security headers, ProxyFix from TIERDESK_TRUSTED_PROXIES, and what production refuses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures_review import csrf_from

from app.security import CSP_API, CSP_PAGES, UnsafeSettings, check_production

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("path", ["/", "/kb?q=card", "/console/login"])
def test_pages_send_a_csp_without_inline_script(client, sample_articles, path):
    response = client.get(path)
    assert response.status_code == 200
    csp = response.headers["Content-Security-Policy"]
    assert csp == CSP_PAGES
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "strict-origin-when-cross-origin"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert "Strict-Transport-Security" not in response.headers
    assert "<script>" not in response.get_data(as_text=True)  # every script is a file


def test_api_and_errors_allow_nothing(client):
    for response in (
        client.post("/api/v1/chat", json={"message": ""}),
        client.get("/api/v1/openapi.json"),
        client.get("/no/such/page"),
    ):
        assert response.headers["Content-Security-Policy"] in (CSP_API, CSP_PAGES)
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert client.get("/api/v1/openapi.json").headers["Content-Security-Policy"] == CSP_API


def test_hsts_only_with_secure_cookies(make_app):
    app = make_app(SESSION_COOKIE_SECURE=True)
    response = app.test_client().get("/console/login")
    assert response.headers["Strict-Transport-Security"].startswith("max-age=31536000")


def _fail_logins(client, forwarded_for: str, times: int) -> int:
    status = 0
    for _ in range(times):
        page = client.get("/console/login", headers={"X-Forwarded-For": forwarded_for})
        status = client.post(
            "/console/login",
            data={
                "csrf_token": csrf_from(page.get_data(as_text=True)),
                "email": "ana@example.com",
                "password": "wrong password",
            },
            headers={"X-Forwarded-For": forwarded_for},
        ).status_code
    return status


@pytest.mark.parametrize(("proxies", "other_client_locked"), [(0, True), (1, False)])
def test_trusted_proxies_decide_whose_address_the_login_limiter_counts(
    make_app, reviewer, proxies, other_client_locked
):
    app = make_app(TRUSTED_PROXIES=proxies, LOGIN_MAX_FAILURES=3)
    client = app.test_client()
    assert _fail_logins(client, "203.0.113.7", 3) == 401
    assert _fail_logins(client, "203.0.113.7", 1) == 429
    # Another customer behind the same proxy: locked out only when the proxy is not trusted
    # (then every client is the proxy's address).
    assert (_fail_logins(client, "198.51.100.9", 1) == 429) is other_client_locked


def test_production_needs_a_secret_key_and_no_sqlite_under_several_workers():
    base = {"ENVIRONMENT": "production", "SQLALCHEMY_DATABASE_URI": "sqlite:///x.db"}
    with pytest.raises(UnsafeSettings, match="SECRET_KEY is not set"):
        check_production({**base, "SECRET_KEY": None}, workers=1)
    with pytest.raises(UnsafeSettings, match="DATABASE_URL is SQLite.*TIERDESK_WORKERS"):
        check_production({**base, "SECRET_KEY": "k"}, workers=2)
    check_production({**base, "SECRET_KEY": "k"}, workers=1)
    check_production(
        {**base, "SECRET_KEY": "k", "SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://db/x"},
        workers=4,
    )
    check_production({"ENVIRONMENT": "development", "SQLALCHEMY_DATABASE_URI": "sqlite://"})


def test_production_config_never_generates_a_secret_key(tmp_path, monkeypatch):
    from app.config import Config

    monkeypatch.setenv("TIERDESK_ENV", "production")
    monkeypatch.setenv("TIERDESK_VAR_DIR", str(tmp_path))
    monkeypatch.delenv("SECRET_KEY", raising=False)
    assert Config().SECRET_KEY is None
    assert not (tmp_path / "secret_key").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gunicorn_with_the_ops_config_refuses_unsafe_settings(tmp_path):
    """Real gunicorn, ops/gunicorn.conf.py (which sets TIERDESK_ENV=production), no SECRET_KEY
    and SQLite under 2 workers: it exits and the log names both settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SECRET_KEY", "TIERDESK_ENV", "DATABASE_URL", "TIERDESK_WORKERS")
    }
    env.update(
        {
            "TIERDESK_VAR_DIR": str(tmp_path / "var"),
            "TIERDESK_MODELS_DIR": str(tmp_path / "models"),
            "TIERDESK_LOAD_MODELS": "false",
            "TIERDESK_BIND": f"127.0.0.1:{_free_port()}",
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
            "PYTHONPATH": str(ROOT),
        }
    )
    gunicorn = Path(sys.executable).with_name("gunicorn")
    started = time.monotonic()
    proc = subprocess.run(
        [str(gunicorn), "-c", str(ROOT / "ops" / "gunicorn.conf.py"), "app:create_app()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert time.monotonic() - started < 120
    assert "TIERDESK_ENV=production refuses to start" in proc.stderr
    assert "SECRET_KEY is not set" in proc.stderr
    assert "DATABASE_URL is SQLite but gunicorn runs 2 workers" in proc.stderr
    assert not (tmp_path / "var" / "secret_key").exists()


def test_cli_names_the_setting_in_production(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(
        {"TIERDESK_ENV": "production", "TIERDESK_VAR_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    )
    proc = subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "db", "current"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "Error: TIERDESK_ENV=production refuses to start: SECRET_KEY is not set" in proc.stderr
    assert "Traceback" not in proc.stderr
