"""Shared clients attached to the app: Redis, the NLP engine and the review queue.

Each is created once in the factory and reached through a small accessor, so that blueprints
and CLI commands never build their own.
"""

from __future__ import annotations

import logging

import redis
from flask import Flask, current_app

from app import redis_conn

log = logging.getLogger(__name__)

REDIS_KEY = "tierdesk.redis"
ENGINE_KEY = "tierdesk.engine"
QUEUE_KEY = "tierdesk.review_queue"


def init_app(app: Flask) -> None:
    client = app.config.get("REDIS_CLIENT")  # tests may hand in a client of their own
    if client is None:
        client = redis_conn.connect(app.config["REDIS_URL"], app.config["VAR_DIR"])
    app.extensions[REDIS_KEY] = client

    from app.nlp.engine import Engine

    engine = Engine(app.config, redis_client=client)  # Redis shares the answer cache
    app.extensions[ENGINE_KEY] = engine
    if app.config["LOAD_MODELS"]:
        engine.load()  # load and warm before taking traffic; failures leave it "not ready"

    from app.review.queue import ReviewQueue

    app.extensions[QUEUE_KEY] = ReviewQueue(
        client,
        prefix=app.config["REDIS_PREFIX"],
        db_url=app.config["SQLALCHEMY_DATABASE_URI"],
        lease_seconds=app.config["REVIEW_LEASE_SECONDS"],
        priority_step_seconds=app.config["REVIEW_PRIORITY_STEP_SECONDS"],
    )


def get_redis() -> redis.Redis:
    return current_app.extensions[REDIS_KEY]


def get_engine():
    """The app's ``app.nlp.engine.Engine``."""
    return current_app.extensions[ENGINE_KEY]


def get_review_queue():
    """The app's ``app.review.queue.ReviewQueue``."""
    return current_app.extensions[QUEUE_KEY]
