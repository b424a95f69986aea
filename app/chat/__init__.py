"""The chat JSON API under /api/v1: ask, read a conversation, rate an answer, OpenAPI document.

``bp`` is registered by ``app.create_app`` at ``/api/v1``; registering it also installs the JSON
error handlers for every /api/v1 path (``app.chat.errors``).
"""

from app.chat import errors
from app.chat.api import bp

bp.record_once(lambda state: errors.init_app(state.app))

__all__ = ["bp"]
