"""Response headers, the reverse-proxy fix and the settings production refuses to run without.

Headers on every response: ``X-Content-Type-Options: nosniff``, ``Referrer-Policy:
strict-origin-when-cross-origin``, and ``Strict-Transport-Security`` when
``TIERDESK_SECURE_COOKIES`` is on (the deployment is behind HTTPS). HTML pages (demo, articles,
console) get a Content-Security-Policy without inline script or style: everything they run
comes from ``/static`` (``CSP_PAGES``); JSON and other responses get ``CSP_API``, which allows
nothing. ``frame-ancestors 'none'`` (and ``X-Frame-Options: DENY`` for old browsers) keep the
console and the pages out of other sites' frames. The widget runs on host pages under their
CSP: docs/privacy.md lists what a host page must allow.

``TIERDESK_TRUSTED_PROXIES`` (N > 0) wraps the app in Werkzeug's ``ProxyFix`` trusting N hops of
``X-Forwarded-For``/``-Proto``/``-Host``/``-Port``, so client addresses, the login limiter and
generated URLs see the client, not the proxy.

``TIERDESK_ENV=production`` (ops/gunicorn.conf.py sets it) refuses to start without a
``SECRET_KEY`` (hosts that generate their own sign console sessions differently and hash
customer references differently) and with a SQLite database under more than one gunicorn
worker; the error names the setting to change.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response
from werkzeug.middleware.proxy_fix import ProxyFix

CSP_PAGES = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
CSP_API = "default-src 'none'; frame-ancestors 'none'"


class UnsafeSettings(RuntimeError):
    """A production server with settings it must not run with (the message says which)."""


def check_production(config: Mapping[str, Any], workers: int | None = None) -> None:
    """Raise ``UnsafeSettings`` when ``TIERDESK_ENV=production`` and a setting is unsafe.
    ``workers``: the gunicorn workers serving the app (default: read from this process)."""
    if str(config.get("ENVIRONMENT", "development")).lower() != "production":
        return
    problems = []
    if not config.get("SECRET_KEY"):
        problems.append(
            "SECRET_KEY is not set: set it to the same long random value on every host "
            "(python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    url = str(config.get("SQLALCHEMY_DATABASE_URI", ""))
    workers = _gunicorn_workers(os.environ) if workers is None else workers
    if url.startswith("sqlite") and workers > 1:
        problems.append(
            f"DATABASE_URL is SQLite but gunicorn runs {workers} workers (TIERDESK_WORKERS): "
            "use PostgreSQL (DATABASE_URL=postgresql+psycopg://...) or TIERDESK_WORKERS=1"
        )
    if problems:
        raise UnsafeSettings(
            "TIERDESK_ENV=production refuses to start: " + "; ".join(problems) + "."
        )


def _gunicorn_workers(environ: Mapping[str, str]) -> int:
    """Workers of the gunicorn serving this process (ops/gunicorn.conf.py reads
    TIERDESK_WORKERS, default 2); 0 when this is not a gunicorn process (the CLI)."""
    if "gunicorn" not in sys.modules:
        return 0
    try:
        return int(environ.get("TIERDESK_WORKERS") or environ.get("WEB_CONCURRENCY") or 2)
    except ValueError:
        return 2


def _headers(secure: bool):
    def add(response: Response) -> Response:
        headers = response.headers
        headers.setdefault("X-Content-Type-Options", "nosniff")
        headers.setdefault("Referrer-Policy", "strict-origin-when-cross-origin")
        headers.setdefault("X-Frame-Options", "DENY")
        html = (response.mimetype or "") == "text/html"
        headers.setdefault("Content-Security-Policy", CSP_PAGES if html else CSP_API)
        if secure:
            headers.setdefault("Strict-Transport-Security", "max-age=31536000; includeSubDomains")
        return response

    return add


def init_app(app: Flask) -> None:
    check_production(app.config)
    proxies = int(app.config.get("TRUSTED_PROXIES") or 0)
    if proxies > 0:
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies, x_port=proxies
        )
    app.after_request(_headers(bool(app.config.get("SESSION_COOKIE_SECURE"))))
