"""Inspect saved work: retrieve the session, page through every item and turn, store by id.

Memory stays bounded by one page: each page is written to the ledger (one upsert statement)
and dropped before the next is fetched; nothing accumulates the history in Python.

A terminal item (completed / failed / incomplete, or a type that has no status) is never
overwritten. A sync that started before the item finished can page past it late:

    sync A: GET page 3 (item X in_progress) ........................ upsert X(in_progress)
    sync B:            GET page 3 (item X completed)  upsert X(completed)

so the upsert's conflict branch only updates rows that are not terminal yet.
"""

import hashlib
import time

from ..store import sessions as session_store
from .openai_client import sessions
from .sessions import agents_api, config_hash, environment_of

PAGE_LIMIT = 100
TERMINAL_ITEM_STATUSES = ("completed", "failed", "incomplete", "cancelled")
TERMINAL_TURN_STATUSES = ("completed", "failed", "cancelled")
OPEN_TURN_STATUSES = ("queued", "in_progress", "waiting")


def _item_row(binding_pk, item, now):
    body = item.to_dict(mode="json")
    item_id = body.get("id")
    if not item_id:  # legacy user messages carry no id: key them by turn and content
        item_id = "anon:%s:%s" % (body.get("turn_id"), hashlib.sha256(repr(sorted(body.items())).encode()).hexdigest()[:24])
    status = body.get("status")
    return {
        "binding": binding_pk, "item_id": item_id, "item_type": body.get("type") or "unknown",
        "status": status, "terminal": status is None or status in TERMINAL_ITEM_STATUSES,
        "turn_id": body.get("turn_id"), "call_id": body.get("call_id"), "body": body, "updated_at": now,
    }


def store_items(binding_pk, items, now=None):
    """Upsert items by id; a stored terminal item wins over any later non-terminal copy."""
    now = now or time.time()
    rows = {}
    for item in items:
        row = _item_row(binding_pk, item, now)
        rows[row["item_id"]] = row  # within one batch the last copy wins
    if not rows:
        return 0
    session_store.upsert_items(list(rows.values()))
    return len(rows)


def _store_turns(binding_pk, turns, now):
    rows = {}
    for turn in turns:
        rows[turn.id] = {
            "binding": binding_pk, "turn_id": turn.id, "status": turn.status,
            "error": turn.error.to_dict(mode="json") if turn.error else None,
            "created_at": turn.created_at, "completed_at": turn.completed_at, "updated_at": now,
        }
    if not rows:
        return
    session_store.upsert_turns(list(rows.values()), TERMINAL_TURN_STATUSES)


def _page_through(first_page, store):
    """Follow has_next_page(); only the current page is alive at any time."""
    page, pages = first_page, 0
    while True:
        store(page.data)
        pages += 1
        if not page.has_next_page():
            return pages
        page = page.get_next_page()


def sync_items(client, binding):
    api = sessions(client)
    with agents_api("items.list"):
        first = api.items.list(binding.session_id, order="asc", limit=PAGE_LIMIT)
        return _page_through(first, lambda data: store_items(binding.id, data))


def sync_turns(client, binding):
    api = sessions(client)
    with agents_api("turns.list"):
        first = api.turns.list(binding.session_id, order="asc", limit=PAGE_LIMIT)
        return _page_through(first, lambda data: _store_turns(binding.id, data, time.time()))


def record_session_state(binding, session, clear_stale=False):
    """Store what retrieve() said: status, required actions, environment, config drift."""
    now = time.time()
    fields = dict(status=session.status, required_actions=[a.to_dict(mode="json") for a in session.required_actions],
                  environment={**(binding.environment or {}), **environment_of(session)},
                  config_changed=config_hash(session) != binding.config_hash, updated_at=now)
    if clear_stale:
        fields.update(stale=False, last_synced_at=now, item_count=session_store.item_count(binding.id))
    return session_store.save_session_state(binding.id, binding.job_id, fields, now)


def retrieve_session(client, binding):
    with agents_api("sessions.retrieve"):
        return sessions(client).retrieve(binding.session_id)


def full_sync(client, binding):
    """Retrieve + all items + all turns. Returns (binding, session) with the stored view current."""
    session = retrieve_session(client, binding)
    sync_items(client, binding)
    sync_turns(client, binding)
    return record_session_state(binding, session, clear_stale=True), session


def turn_summary(binding):
    return [{"turn_id": t.turn_id, "status": t.status, "error": t.error}
            for t in session_store.turns_of(binding.id)]
