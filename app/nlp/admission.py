"""Admission control for the BERT tier: a bounded number of concurrent inferences per process,
a per-request time budget, and a priority that decides who gets a BERT slot when the process
is saturated.

BERT is the expensive step of a request (a few milliseconds of CPU against well under one for
the fast tier). Under overload, requests that all wait for BERT queue behind each other and
every customer waits; with admission control the process degrades instead: a request that
gets no slot is answered by the fast tier when that is sure, else it escalates with reason
``degraded`` (app/nlp/router.py). It never waits without bound and never fails.

Per request, before the BERT call (``Admission.ask``):

1. **Budget.** A request has ``budget_ms`` from its start in this process. If what is left is
   less than BERT's recent cost (an exponential average of its inference times), the call is
   refused (``budget``): the answer would come too late anyway.
2. **Pressure.** Two signals, the larger wins:

   - the queue in front of the workers (``Backlog``): connections accepted by the kernel that
     no worker has taken yet, read from the listening sockets the process inherited (Linux
     ``TCP_INFO``; a pre-forking server such as gunicorn shares one queue among its workers).
     Times the mean request time (``Load``) over the cores, that is the wait a new request
     has ahead of it: from ``wait_low_ms`` to ``wait_high_ms`` the pressure rises from 0 to 1.
     That wait also counts against the request's budget (it was spent before the request
     reached the application);
   - for threaded workers, the share of the last ``window_s`` seconds during which the
     process was serving a request (``Load``, fed by the hooks that ``init_app`` registers):
     from ``busy_low`` up to ``busy_high`` the pressure rises from 0 to 1.

   A sync worker busy all the time is not by itself overloaded (it may just keep up); a
   queue that grows is.
3. **Value.** A request's claim on BERT is its QoE value in [0, 1], a weighted sum
   (``QOE_WEIGHTS``: latency, confidence, memory, priority) of how much of its budget is left,
   how unsure the fast tier was (BERT helps most there), how short the text is (memory and time
   of one inference grow with it) and its priority class. A request is refused (``shed``) when
   its value is under the pressure, so that as load rises low-value traffic goes first and
   high-value traffic last; ``Priority.HIGH`` (a customer who asked twice, or whose conversation
   is already with a person) is never shed for pressure, only for the budget.
4. **Slots.** At most ``slots`` BERT inferences run at once in the process (threaded workers
   would otherwise run many at once on the same cores). A request waits for a free slot no
   longer than its remaining budget allows; waiters are served by value, highest first; a
   request whose wait runs out is refused (``busy``).

With 2 gunicorn sync workers on 2 cores, a worker serving requests back to back showed a busy
share of only 0.6-0.7 while its queue held hundreds of milliseconds of work (the rest is
gunicorn's own work per request, outside the application); hence the queue is the main signal.

Every refusal is counted in ``tierdesk_bert_admission_total{outcome="refused", reason}``;
admitted calls in ``outcome="admitted"``. What the router then did (fast answer or a
``degraded`` escalation) is counted in ``tierdesk_degraded_total{reason, result}``.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from app.metrics import BERT_ADMISSION, BUSY_SHARE, QUEUE_WAIT


class Priority(IntEnum):
    """How much a request's customer needs BERT's careful answer, lowest first."""

    LOW = 0  # repeat traffic: the same new-conversation text again from the same client
    NORMAL = 1
    HIGH = 2  # asked the same question twice, or the conversation is with a person


# The QoE weights: what a BERT slot is worth to a request (they sum to 1).
QOE_WEIGHTS = {"latency": 0.2, "confidence": 0.3, "memory": 0.1, "priority": 0.4}
MEMORY_WORDS = 64  # texts of this many words or more count as the most expensive

REFUSAL_REASONS = ("budget", "shed", "busy")


@dataclass
class Verdict:
    """The answer to one request's ask for a BERT slot."""

    granted: bool
    reason: str | None = None  # why not: "budget" | "shed" | "busy"
    value: float = 0.0
    pressure: float = 0.0
    _admission: Admission | None = None

    def release(self, bert_ms: float | None = None) -> None:
        if self.granted and self._admission is not None:
            self._admission._release(bert_ms)
            self._admission = None

    def trace(self) -> dict:
        return {
            "granted": self.granted,
            "reason": self.reason,
            "value": round(self.value, 4),
            "pressure": round(self.pressure, 4),
        }


class Load:
    """How busy this process has been: the share of the last ``window_s`` seconds during which
    at least one request was being served (with threads, overlapping requests count once)."""

    def __init__(self, window_s: float = 2.0) -> None:
        self.window_s = window_s
        self._mean_ms = 5.0  # exponential average of request times
        self._started: dict[int, float] = {}  # thread -> its request's start
        self._spans: deque[tuple[float, float]] = deque()  # (start, end) of busy periods
        self._busy_since: float | None = None
        self._active = 0
        self._lock = threading.Lock()

    def begin(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._active == 0:
                self._busy_since = now
            self._active += 1
            self._started[threading.get_ident()] = now

    def end(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            self._active = max(0, self._active - 1)
            began = self._started.pop(threading.get_ident(), None)
            if began is not None:
                self._mean_ms = 0.95 * self._mean_ms + 0.05 * (now - began) * 1000
            if self._active == 0 and self._busy_since is not None:
                self._spans.append((self._busy_since, now))
                self._busy_since = None
            self._trim(now)

    def _trim(self, now: float) -> None:
        horizon = now - self.window_s
        while self._spans and self._spans[0][1] < horizon:
            self._spans.popleft()

    def mean_ms(self) -> float:
        return self._mean_ms

    def busy_share(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        horizon = now - self.window_s
        with self._lock:
            self._trim(now)
            busy = sum(end - max(start, horizon) for start, end in self._spans)
            if self._busy_since is not None:
                busy += now - max(self._busy_since, horizon)
        return min(1.0, max(0.0, busy / self.window_s))


_TCP_LISTEN = 10
_TCP_INFO_SIZE = 104
_RESCAN_SECONDS = 10.0


class Backlog:
    """Connections waiting in the accept queues of the listening TCP sockets this process holds
    (for a listening socket, Linux reports the queue length in ``tcpi_unacked``)."""

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._pid: int | None = None
        self._next_scan = 0.0
        self._lock = threading.Lock()

    def _scan(self) -> list[int]:
        fds = []
        try:
            names = os.listdir("/proc/self/fd")
        except OSError:
            return fds
        for name in names:
            fd = int(name)
            try:
                if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                    continue
                if self._state(fd) == _TCP_LISTEN:
                    fds.append(fd)
            except (OSError, ValueError):
                continue
        return fds

    @staticmethod
    def _info(fd: int) -> bytes:
        sock = socket.socket(fileno=fd)
        try:
            return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
        finally:
            sock.detach()  # the descriptor stays the server's

    def _state(self, fd: int) -> int | None:
        try:
            return self._info(fd)[0]
        except OSError:
            return None

    def waiting(self) -> int:
        now = time.monotonic()
        with self._lock:
            if self._pid != os.getpid() or now >= self._next_scan:
                self._fds, self._pid = self._scan(), os.getpid()
                self._next_scan = now + _RESCAN_SECONDS
            fds = list(self._fds)
        total = 0
        for fd in fds:
            try:
                info = self._info(fd)
            except OSError:
                continue
            if info[0] == _TCP_LISTEN:
                total += struct.unpack_from("I", info, 24)[0]
        return total


class Admission:
    def __init__(
        self,
        *,
        slots: int = 1,
        budget_ms: float = 200.0,
        busy_low: float = 0.75,
        busy_high: float = 0.95,
        wait_low_ms: float = 20.0,
        wait_high_ms: float = 100.0,
        load: Load | None = None,
        backlog: Backlog | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError("BERT slots must be at least 1")
        if not 0.0 <= busy_low < busy_high <= 1.0:
            raise ValueError("need 0 <= busy_low < busy_high <= 1")
        self.slots = slots
        self.budget_ms = budget_ms
        self.busy_low = busy_low
        self.busy_high = busy_high
        if not 0.0 <= wait_low_ms < wait_high_ms:
            raise ValueError("need 0 <= wait_low_ms < wait_high_ms")
        self.wait_low_ms, self.wait_high_ms = wait_low_ms, wait_high_ms
        self.load = load or Load()
        self.backlog = backlog
        self.cores = max(1, os.cpu_count() or 1)
        self.weights = dict(weights or QOE_WEIGHTS)
        self.bert_ms = 8.0  # recent cost of one inference (exponential average)
        self._in_use = 0
        self._waiters: list[tuple[float, int]] = []  # (-value, ticket): a heap, best first
        self._tickets = itertools.count()
        self._cond = threading.Condition()

    @classmethod
    def from_config(cls, config: Mapping[str, Any], load: Load | None = None) -> Admission:
        return cls(
            slots=int(config.get("BERT_SLOTS", 1)),
            budget_ms=float(config.get("BERT_BUDGET_MS", 200)),
            busy_low=float(config.get("BERT_SHED_BUSY_LOW", 0.75)),
            busy_high=float(config.get("BERT_SHED_BUSY_HIGH", 0.95)),
            wait_low_ms=float(config.get("BERT_SHED_WAIT_LOW_MS", 20)),
            wait_high_ms=float(config.get("BERT_SHED_WAIT_HIGH_MS", 100)),
            load=load,
            backlog=PROCESS_BACKLOG,
        )

    # -- the decision ------------------------------------------------------------------

    def queue_wait_ms(self) -> float:
        """The wait ahead of a request that has just arrived: the connections no worker has
        taken yet, each for a mean request time, spread over the cores."""
        if self.backlog is None:
            return 0.0
        waiting = self.backlog.waiting()
        return waiting * self.load.mean_ms() / self.cores if waiting else 0.0

    def pressure(self, wait_ms: float = 0.0) -> float:
        busy = self.load.busy_share()
        BUSY_SHARE.set(busy)
        by_busy = (busy - self.busy_low) / (self.busy_high - self.busy_low)
        by_wait = (wait_ms - self.wait_low_ms) / (self.wait_high_ms - self.wait_low_ms)
        return min(1.0, max(0.0, by_busy, by_wait))

    def value(
        self, priority: Priority, fast_confidence: float | None, words: int, left_ms: float
    ) -> float:
        """The request's QoE claim on a BERT slot, in [0, 1]."""
        w = self.weights
        latency = max(0.0, min(1.0, left_ms / self.budget_ms)) if self.budget_ms > 0 else 0.0
        unsure = 1.0 - (fast_confidence if fast_confidence is not None else 0.0)
        memory = 1.0 - min(1.0, words / MEMORY_WORDS)
        prio = int(priority) / int(Priority.HIGH)
        return (
            w["latency"] * latency
            + w["confidence"] * unsure
            + w["memory"] * memory
            + w["priority"] * prio
        )

    def ask(
        self,
        *,
        started: float,
        priority: Priority = Priority.NORMAL,
        fast_confidence: float | None = None,
        words: int = 0,
    ) -> Verdict:
        """May this request run BERT now? ``started`` is its start (``time.monotonic()``)."""
        now = time.monotonic()
        wait_ms = self.queue_wait_ms()
        QUEUE_WAIT.set(wait_ms / 1000)
        left_ms = self.budget_ms - (now - started) * 1000 - wait_ms
        value = self.value(priority, fast_confidence, words, left_ms)
        if left_ms < self.bert_ms:
            return self._refuse("budget", value, 0.0)
        pressure = self.pressure(wait_ms)
        if priority < Priority.HIGH and pressure > 0 and value < pressure:
            return self._refuse("shed", value, pressure)
        deadline = now + (left_ms - self.bert_ms) / 1000
        if not self._acquire(value, deadline):
            return self._refuse("busy", value, pressure)
        BERT_ADMISSION.labels("admitted", "").inc()
        return Verdict(True, None, value, pressure, self)

    def _refuse(self, reason: str, value: float, pressure: float) -> Verdict:
        BERT_ADMISSION.labels("refused", reason).inc()
        return Verdict(False, reason, value, pressure)

    # -- slots -------------------------------------------------------------------------

    def _acquire(self, value: float, deadline: float) -> bool:
        with self._cond:
            if self._in_use < self.slots and not self._waiters:
                self._in_use += 1
                return True
            entry = (-value, next(self._tickets))
            heapq.heappush(self._waiters, entry)
            try:
                while True:
                    if self._in_use < self.slots and self._waiters[0] == entry:
                        heapq.heappop(self._waiters)
                        self._in_use += 1
                        self._cond.notify_all()  # the next best may fit a further free slot
                        return True
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._waiters.remove(entry)
                        heapq.heapify(self._waiters)
                        self._cond.notify_all()
                        return False
                    self._cond.wait(left)
            except BaseException:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                    heapq.heapify(self._waiters)
                raise

    def _release(self, bert_ms: float | None) -> None:
        with self._cond:
            self._in_use -= 1
            if bert_ms is not None and bert_ms > 0:
                self.bert_ms = 0.9 * self.bert_ms + 0.1 * bert_ms
            self._cond.notify_all()

    @property
    def in_use(self) -> int:
        return self._in_use


# -- one Load per process, fed by every request -----------------------------------------

PROCESS_LOAD = Load()
PROCESS_BACKLOG = Backlog()


def init_app(app) -> None:
    """Count every request of ``app`` in this process's load, and note when it started."""
    from flask import g

    def _begin() -> None:
        g.request_started = time.monotonic()  # the time budget of BERT admission counts from here
        PROCESS_LOAD.begin()

    def _end(_exc: BaseException | None) -> None:
        PROCESS_LOAD.end()

    app.before_request(_begin)
    app.teardown_request(_end)
