"""The chat JSON API under /api/v1: ask, read a conversation, rate an answer, OpenAPI document.

``bp`` is registered by ``app.create_app`` at ``/api/v1``; registering it also installs the JSON
error handlers for every /api/v1 path (``app.chat.errors``) and checks the rate-limit setting,
so that a typo in ``TIERDESK_RATE_LIMIT`` stops the server at start-up rather than on a request.
"""

from flask.blueprints import BlueprintSetupState

from app.chat import errors
from app.chat.api import bp
from app.ratelimit import parse_limit


def _on_register(state: BlueprintSetupState) -> None:
    parse_limit(state.app.config["RATE_LIMIT"])
    errors.init_app(state.app)


bp.record_once(_on_register)

__all__ = ["bp"]
