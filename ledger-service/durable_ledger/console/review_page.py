"""The old review page URLs (/review...): the review queue is now a page of the console
(console_review.py). Pages redirect there; the form posts are answered by the console's views,
so bookmarks, old tabs and scripts keep working."""

from flask import Blueprint, redirect, url_for

from . import review as console_review
from . import views as console

bp = Blueprint("review_page", __name__, url_prefix="/review")  # security headers: console_base.py


@bp.get("")
@bp.get("/")
def queue():
    return redirect(url_for("console.review_queue"))


@bp.get("/item/<path:key>")
def item(key):
    return redirect(url_for("console.review_item", key=key))


bp.add_url_rule("/login", "login", console.login, methods=["POST"])
bp.add_url_rule("/logout", "logout", console.logout, methods=["POST"])
bp.add_url_rule("/item/<path:key>/resolve", "resolve", console_review.resolve, methods=["POST"])
