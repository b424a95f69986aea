"""CORS for the widget: only the origins listed in ``CORS_ORIGINS`` may call the API from a
browser on another site (an entry ``*`` allows any origin).

Preflight requests are answered here. A cross-origin request from an origin that is not listed
is refused with 403 before it does anything, so that other sites cannot post into
conversations through their visitors' browsers. Requests without an ``Origin`` header (curl,
server-to-server) and same-origin requests (the demo pages) are not affected.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Response, current_app, request

from app.chat.errors import error_response

_ALLOWED_METHODS = "GET, POST, OPTIONS"
_ALLOWED_HEADERS = "Content-Type, X-Tierdesk-Customer-Id, X-Tierdesk-Customer-Hash"
_EXPOSED_HEADERS = "Retry-After"
_PREFLIGHT_MAX_AGE = "600"


def _same_origin(origin: str) -> bool:
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:  # "http://[::1": no origin a browser sends; a foreign one
        return False
    return netloc.lower() == request.host.lower()


def origin_allowed(origin: str) -> bool:
    allowed = current_app.config.get("CORS_ORIGINS") or []
    return "*" in allowed or origin.rstrip("/") in {o.rstrip("/") for o in allowed}


def handle_preflight() -> Response | None:
    """Answer preflights; refuse requests from origins that are not allowed."""
    origin = request.headers.get("Origin")
    if not origin or _same_origin(origin):
        return None
    if not origin_allowed(origin):
        return error_response(
            403, "origin_not_allowed", "This site is not allowed to use the chat API."
        )
    if request.method == "OPTIONS":
        response = current_app.response_class(status=204)
        response.headers["Access-Control-Allow-Methods"] = _ALLOWED_METHODS
        response.headers["Access-Control-Allow-Headers"] = _ALLOWED_HEADERS
        response.headers["Access-Control-Max-Age"] = _PREFLIGHT_MAX_AGE
        return response
    return None


def add_headers(response: Response) -> Response:
    origin = request.headers.get("Origin")
    if origin and not _same_origin(origin) and origin_allowed(origin):
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Expose-Headers"] = _EXPOSED_HEADERS
    response.vary.add("Origin")
    return response
