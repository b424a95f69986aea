"""The reviewer console blueprint (filled in by the review issue)."""

from flask import Blueprint

bp = Blueprint("console", __name__, template_folder="templates")
