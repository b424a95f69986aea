"""Events fanned out across workers and hosts through Redis pub/sub.

Publishers (the chat service, the handoff state machine, the console) call ``publish`` after
their transaction committed. Every serving process keeps ONE pub/sub connection (a pattern
subscription to ``{prefix}live:*``) read by one background thread, which hands each event to
the local streams that asked for its channel; 200 open streams cost one Redis connection per
process, not 200.

Channels::

    {prefix}live:conversation:<id>   the customer's widget: replies, typing, state changes
    {prefix}live:console             every reviewer: queue changes, messages in held items

Pub/sub is fire-and-forget: an event published while a stream is reconnecting is not replayed.
Clients therefore re-read the conversation (or the queue) whenever their stream (re)connects,
and the hub sends its streams a ``resync`` event after it lost and regained Redis.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import weakref
from typing import Any

import redis

log = logging.getLogger(__name__)

# A stream that falls this far behind (a stuck client) loses its backlog and gets a resync.
SUBSCRIPTION_BUFFER = 256

_hubs: weakref.WeakSet[LiveHub] = weakref.WeakSet()  # every hub of this process (stop_hubs)


def conversation_channel(prefix: str, conversation_id: str) -> str:
    return f"{prefix}live:conversation:{conversation_id}"


def console_channel(prefix: str) -> str:
    return f"{prefix}live:console"


class Subscription:
    """The events of some channels for one stream, in arrival order."""

    def __init__(self, hub: LiveHub, channels: set[str]) -> None:
        self.hub = hub
        self.channels = channels
        self._events: queue.Queue[dict] = queue.Queue(SUBSCRIPTION_BUFFER)

    def deliver(self, event: dict) -> None:
        try:
            self._events.put_nowait(event)
        except queue.Full:
            # A stuck client: what it missed is replaced by one resync (it re-reads its state).
            while True:
                try:
                    self._events.get_nowait()
                except queue.Empty:
                    break
            self._events.put_nowait({"type": "resync"})
            self._events.put_nowait(event)

    def get(self, timeout: float) -> dict | None:
        """The next event, or None after ``timeout`` seconds without one."""
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.hub.unsubscribe(self)


class LiveHub:
    """Publishes events and fans the pattern subscription out to local subscriptions."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.pattern = f"{prefix}live:*"
        self._subs: dict[str, set[Subscription]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.connected = threading.Event()
        _hubs.add(self)

    # -- publishing ------------------------------------------------------------------------------

    def publish(self, channel: str, event: dict[str, Any]) -> bool:
        """Send ``event`` to every stream of ``channel`` on every host; False if Redis failed
        (logged: live push is best effort, polling and the next resync catch up)."""
        try:
            self.client.publish(channel, json.dumps(event, separators=(",", ":")))
            return True
        except redis.RedisError as exc:
            log.warning("live event on %s not published: %s", channel, exc)
            return False

    def to_conversation(self, conversation_id: str, event: dict[str, Any]) -> bool:
        return self.publish(conversation_channel(self.prefix, conversation_id), event)

    def to_console(self, event: dict[str, Any]) -> bool:
        return self.publish(console_channel(self.prefix), event)

    # -- subscribing -----------------------------------------------------------------------------

    def subscribe(self, channels: list[str]) -> Subscription:
        self._ensure_listener()
        sub = Subscription(self, set(channels))
        with self._lock:
            for channel in channels:
                self._subs.setdefault(channel, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            for channel in sub.channels:
                subs = self._subs.get(channel)
                if subs is not None:
                    subs.discard(sub)
                    if not subs:
                        del self._subs[channel]

    def open_streams(self) -> int:
        with self._lock:
            return len({s for subs in self._subs.values() for s in subs})

    def _ensure_listener(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._listen, name="live-hub", daemon=True)
                self._thread.start()
        self.connected.wait(2.0)  # the first events of a new stream must not be missed

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> None:
        """Wait for the listener to notice ``stop`` (it reads with a 1-second timeout)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _fan_out(self, channel: str, event: dict) -> None:
        with self._lock:
            targets = list(self._subs.get(channel, ()))
        for sub in targets:
            sub.deliver(event)

    def _broadcast(self, event: dict) -> None:
        with self._lock:
            targets = {s for subs in self._subs.values() for s in subs}
        for sub in targets:
            sub.deliver(event)

    def _listen(self) -> None:
        lost = False
        while not self._stop.is_set():
            pubsub = None
            try:
                pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                pubsub.psubscribe(self.pattern)
                self.connected.set()
                if lost:
                    self._broadcast({"type": "resync"})
                    lost = False
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is None or message.get("type") != "pmessage":
                        continue
                    try:
                        event = json.loads(message["data"])
                    except (TypeError, ValueError):
                        continue
                    channel = message["channel"]
                    if isinstance(channel, bytes):
                        channel = channel.decode()
                    self._fan_out(channel, event)
            except Exception as exc:  # noqa: BLE001 - reconnect whatever broke
                self.connected.clear()
                lost = True
                log.warning("live hub lost Redis (%s); reconnecting", exc)
                time.sleep(1.0)
            finally:
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:  # noqa: BLE001
                        pass


def stop_hubs(timeout: float = 3.0) -> None:
    """Stop the listener of every hub of this process and wait for them, before the Redis
    they listen to goes away on purpose (the test suite's own server)."""
    hubs = list(_hubs)
    for hub in hubs:
        hub.stop()
    for hub in hubs:
        hub.join(timeout)


def on_commit(session, callback) -> None:
    """Run ``callback()`` after ``session``'s current transaction commits (dropped if it rolls
    back): live events must never announce a change that did not happen."""
    session.info.setdefault("tierdesk_after_commit", []).append(callback)


def _run_after_commit(session) -> None:
    callbacks = session.info.pop("tierdesk_after_commit", [])
    for callback in callbacks:
        try:
            callback()
        except Exception:  # noqa: BLE001 - the transaction is committed; never fail it now
            log.exception("after-commit callback failed")


def _drop_after_commit(session, *_args) -> None:
    session.info.pop("tierdesk_after_commit", None)


def _install_session_hooks() -> None:
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    if not event.contains(Session, "after_commit", _run_after_commit):
        event.listen(Session, "after_commit", _run_after_commit)
        event.listen(Session, "after_soft_rollback", _drop_after_commit)


_install_session_hooks()
