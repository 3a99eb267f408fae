"""HTTP routes of the agents module (session sync, follow-up, webhooks, artifacts)."""

from flask import Blueprint

bp = Blueprint("agents", __name__)
