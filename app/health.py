"""Liveness and readiness probes."""

from __future__ import annotations

from flask import Blueprint, Flask, current_app, jsonify
from sqlalchemy import text

from app.db import get_session
from app.services import get_engine, get_redis

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz():
    """200 when the database, Redis and the models are ready; 503 with the reasons otherwise."""
    checks: dict[str, str] = {}
    try:
        get_session().execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - report any failure as "not ready"
        checks["database"] = f"unavailable: {exc.__class__.__name__}"
    try:
        get_redis().ping()
        checks["redis"] = "ok"
    except Exception as exc:  # noqa: BLE001
        checks["redis"] = f"unavailable: {exc.__class__.__name__}"
    engine = get_engine()
    if current_app.config.get("LOAD_MODELS", True):
        engine.poll()  # a new KB or model revision starts a reload (rate-limited, background)
    checks["models"] = "ok" if engine.ready else f"not ready: {engine.not_ready_reason}"
    ok = all(v == "ok" for v in checks.values())
    # What this worker serves, so that an operator can see every instance on the same KB/models.
    status = engine.status()
    revisions = engine.revisions or (None, None)
    serving = {
        "active": engine.model_version,
        **{k: status[k] for k in ("canary", "shadow")},
        "kb_revision": revisions[0],
    }
    return jsonify(status="ready" if ok else "not ready", checks=checks, serving=serving), (
        200 if ok else 503
    )


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
