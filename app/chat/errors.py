"""JSON errors for everything under /api/v1: ``{"error": {"code", "message"}}``.

Flask's own errors (unknown URL, wrong method, body too large) are turned into the same shape
for API paths; other paths keep Flask's HTML error pages.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"

# Stable machine-readable codes for Flask's HTTP errors.
_HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


class ApiError(Exception):
    """An error the API reports to the client as-is."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    response = jsonify(error={"code": code, "message": message})
    response.status_code = status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def _is_api_request() -> bool:
    return request.path == API_PREFIX or request.path.startswith(API_PREFIX + "/")


def _api_error(exc: ApiError) -> Response:
    return error_response(exc.status, exc.code, exc.message, exc.headers)


def _http_error(exc: HTTPException):
    if not _is_api_request():
        return exc  # Flask renders its usual page
    status = exc.code or 500
    response = error_response(
        status, _HTTP_CODES.get(status, "http_error"), exc.description or exc.name
    )
    if status == 405 and exc.response is None:
        allowed = getattr(exc, "valid_methods", None)
        if allowed:
            response.headers["Allow"] = ", ".join(sorted(allowed))
    return response


def _unexpected_error(exc: Exception):
    if isinstance(exc, HTTPException):
        return _http_error(exc)
    if not _is_api_request():
        raise exc
    log.exception("unhandled error on %s %s", request.method, request.path)
    return error_response(500, "internal_error", "Something went wrong on our side.")


def init_app(app: Flask) -> None:
    app.register_error_handler(ApiError, _api_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected_error)
