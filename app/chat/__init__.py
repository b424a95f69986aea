"""The chat JSON API under /api/v1 (filled in by the chat issue)."""

from flask import Blueprint

bp = Blueprint("chat", __name__)
