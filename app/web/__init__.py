"""Demo pages and public article pages (filled in by the chat issue)."""

from flask import Blueprint

bp = Blueprint("web", __name__, template_folder="templates")
