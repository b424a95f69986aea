"""tierdesk: a customer-service chatbot with tiered NLP routing.

``create_app`` builds the Flask application: configuration, database, Redis, the NLP engine,
metrics and the blueprints (demo pages, chat API, reviewer console, health checks).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask
from werkzeug.routing import IntegerConverter

from app.config import Config
from app.db import ROW_ID_MAX
from app.logging_setup import configure_logging

log = logging.getLogger(__name__)


class RowIdConverter(IntegerConverter):
    """Werkzeug's ``int`` converter, bounded to a signed 64-bit integer."""

    def __init__(self, url_map, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max", ROW_ID_MAX)
        super().__init__(url_map, *args, **kwargs)


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(Config().as_dict())
    if test_config:
        app.config.from_mapping(test_config)
    configure_logging(app.config["LOG_JSON"], app.config["LOG_LEVEL"])

    from app import db, forking, health, metrics, privacy, security, services
    from app.nlp import admission

    security.init_app(app)  # a production server with unsafe settings stops here
    forking.register()  # a pre-forking server (gunicorn --preload) may fork this process
    # the first before_request hook: the request's start and the process load count from here
    admission.init_app(app)
    privacy.init_app(app)  # masking is on before anything logs or stores
    db.init_app(app)
    services.init_app(app)  # Redis client, NLP engine, review queue
    metrics.init_app(app)
    health.init_app(app)

    # An <int:...> in a route is a row id: beyond what SQLite and PostgreSQL store it is a 404,
    # not an OverflowError in the query.
    app.url_map.converters["int"] = RowIdConverter
    # "//" in a path is not a page's address: a 404 (JSON under /api) rather than an HTML 308
    app.url_map.merge_slashes = False

    from app.chat import bp as chat_bp
    from app.notify.followup import bp as followup_bp
    from app.review.console import bp as console_bp
    from app.web import bp as web_bp

    app.register_blueprint(web_bp)
    app.register_blueprint(chat_bp, url_prefix="/api/v1")
    app.register_blueprint(console_bp, url_prefix="/console")
    app.register_blueprint(followup_bp)
    return app
