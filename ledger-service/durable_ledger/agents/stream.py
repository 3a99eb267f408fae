"""Reconnect rebuild, in the order of the Events guide:

    1. open a new event stream and buffer it (bounded)      reader thread -> buffer
    2. retrieve the session, page all items                 (events keep arriving in 1)
    3. rebuild the view by item id                          sync.store_items
    4. merge the buffer, keeping terminal items             same upsert: terminal rows win
    5. continue live                                        apply events as they come

If the buffer fills while 2-3 run, events would be lost: the view is marked stale (stored on
the binding, reported by sync) and rebuilt from step 2 with a fresh stream. Nothing is dropped
while the view claims to be current.
"""

import threading
from collections import deque

from ..store import sessions as session_store
from ..store.db import db
from .openai_client import sessions
from .sync import full_sync, store_items

ITEM_EVENTS = ("agent.session.turn.item.added", "agent.session.turn.item.done")


class BoundedBuffer:
    def __init__(self, capacity):
        self.capacity = capacity
        self._items = deque()
        self._lock = threading.Lock()
        self.overflowed = False

    def put(self, event):
        with self._lock:
            if len(self._items) >= self.capacity:
                self.overflowed = True
                return False
            self._items.append(event)
            return True

    def drain(self):
        with self._lock:
            items, self._items = list(self._items), deque()
            return items


class _Reader(threading.Thread):
    """Reads the SSE stream into the buffer until the stream ends or ``live`` takes over."""

    def __init__(self, stream, buffer):
        super().__init__(daemon=True)
        self.stream, self.buffer = stream, buffer
        self.live = None  # set to a callable to apply events directly after the merge
        self.lock = threading.Lock()
        self.error = None

    def run(self):
        try:
            for event in self.stream:
                with self.lock:
                    if self.live is not None:
                        self.live(event)
                        continue
                if not self.buffer.put(event):
                    return  # overflow: stop reading; the caller rebuilds with a new stream
        except Exception as exc:  # noqa: BLE001 - a dropped stream ends this reader
            self.error = exc
        finally:
            self.stream.close()
            if not db.is_closed():
                db.close()


def _apply(binding_pk, events):
    items = [e.item for e in events if getattr(e, "type", None) in ITEM_EVENTS]
    if items:
        store_items(binding_pk, items)
    return len(items)


def _mark_stale(binding_pk):
    session_store.mark_binding_stale(binding_pk)


def rebuild(client, binding, buffer_size=1000, max_rebuilds=3, live_timeout_s=5.0):
    """Rebuild the view and follow the stream until it ends (or ``live_timeout_s``).

    Returns ``{"rebuilds", "merged", "live", "stale"}``.
    """
    stats = {"rebuilds": 0, "merged": 0, "live": 0, "stale": False}
    for _ in range(max_rebuilds):
        stats["rebuilds"] += 1
        buffer = BoundedBuffer(buffer_size)
        reader = _Reader(sessions(client).events.stream(binding.session_id), buffer)
        reader.start()
        binding, _ = full_sync(client, binding)
        with reader.lock:
            if buffer.overflowed:
                _mark_stale(binding.id)
                stats["stale"] = True
                reader.stream.close()
                reader.join(5)
                continue
            stats["merged"] += _apply(binding.id, buffer.drain())

            def live(event, _pk=binding.id):
                # The reader thread has its own connection (peewee connections are per thread).
                db.connect(reuse_if_open=True)
                stats["live"] += _apply(_pk, [event])

            reader.live = live
        reader.join(live_timeout_s)
        if reader.is_alive():
            reader.stream.close()
            reader.join(2)
        stats["stale"] = False
        session_store.clear_binding_stale(binding.id)
        return stats
    return stats
