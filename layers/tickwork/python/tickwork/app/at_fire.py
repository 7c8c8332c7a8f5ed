"""Calls before records: at a burst's fire, each run read ahead records its outcome once the runs due by then
have been called, and at most ``callers`` runs of the process claim and call at once. The claims taken ahead
of a fire are checked at it together: one read of every lane the process's claims due by then hold.

A run read ahead (:mod:`tickwork.app.worker`) has only its claim and its call left at its fire; recording
its outcome is a write more, and the attempt's end may write again (a one-time job's completion). In one
process those writes share the interpreter with the calls of the same burst still to be made, so a record
made at once delays them. :class:`CallsFirst` holds a run's record back while a run due by now is still to be
called, for five seconds at most: the burst's calls go first, its records after.

A Lambda invocation handles ten runs; the local stack runs hundreds of invocations in one process, and a
thousand threads waking at one fire spend their time handing the interpreter's lock round rather than
calling. So the runs at their fire take :class:`Turns` of ``callers`` at once for their claim (or its check)
and their call. A call keeps its turn, and the burst's records waiting, for ``hold`` at most: a slow target
waits for its answer without holding back the rest of the burst. Deployed, ``hold`` is 0 (an invocation's
ten runs have a process to themselves): the turn is given back, and the records stop waiting for a run, as
its call starts. Where turns are held through calls, the runs also stop sleeping ``LINE_EARLY`` before their
fire and wait in line for their turns, woken one by one, rather than all wake at the fire.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from tickwork.app.ports import Clock
from tickwork.domain.lanes import Lane

LaneKey = tuple[str, str]  # (tenant id, job id)
ReadLanes = Callable[[Sequence[LaneKey]], dict[LaneKey, Lane]]

# The longest a record waits for the calls of its burst (the attempt holds its lease meanwhile): past it,
# it is written whatever is left.
MOST_WAIT = timedelta(seconds=5)
# Runs of one process claiming (or checking a claim) and calling at once.
CALLERS = 4
# How long before their fire the runs of a process that holds turns through calls stop sleeping and wait in
# line (:class:`Turns`): a burst's thousand threads woken at once would hold its first calls back, and woken
# this early they are all in line by the fire.
LINE_EARLY = timedelta(milliseconds=100)
# Lanes of claims taken ahead read in one request at their fire: few enough that the first calls of a burst
# do not wait long for them.
LANES_AT_ONCE = 30


class Turns:
    """Turns of at most ``callers`` runs of the process at once: for its claim (or its check), then its call
    for ``hold`` at most. A turn is given back when the call returns, or counts no longer once the call has
    gone on for ``hold``.

    The runs waiting take their turns in line, by their fire: only the first in line waits on a timer (for
    its fire, or for a turn to lapse), and each run given a turn wakes the next. So a burst's thousand runs
    do not all wake at its fire to contend for four turns; with ``early`` above 0 they stop sleeping that
    long before it and wait in line (:meth:`take`'s ``at``)."""

    def __init__(
        self, callers: int = CALLERS, hold: timedelta = timedelta(0), early: timedelta = timedelta(0)
    ):
        self.callers = callers
        self.hold = hold.total_seconds()
        self.early = early
        self._lock = threading.Lock()
        self._held: dict[int, float] = {}  # ticket -> until when it counts (monotonic; inf before its call)
        self._line: list[tuple[float, int, threading.Condition]] = []  # a heap of (at, ticket, its waker)
        self._tickets = itertools.count()

    def take(self, at: float = -math.inf) -> int:
        """Wait for a turn, not given before ``at`` (``time.monotonic()``); returns its ticket."""
        with self._lock:
            ticket = next(self._tickets)
            waker = threading.Condition(self._lock)
            heapq.heappush(self._line, (at, ticket, waker))
            try:
                while True:
                    now = time.monotonic()
                    if self._line[0][1] != ticket:
                        waker.wait()  # not first in line: the run before it wakes it
                        continue
                    for lapsed in [held for held, until in self._held.items() if until <= now]:
                        del self._held[lapsed]
                    free = len(self._held) < self.callers
                    if free and at <= now:
                        self._held[ticket] = math.inf
                        return ticket
                    until = max(at, min(self._held.values())) if not free else at
                    waker.wait(None if until == math.inf else until - now)
            finally:
                # Out of line (with its turn, or on an exception): the next in line looks for itself.
                if self._line[0][1] == ticket:
                    heapq.heappop(self._line)
                else:
                    self._line = [entry for entry in self._line if entry[1] != ticket]
                    heapq.heapify(self._line)
                self._wake_first()

    def calling(self, ticket: int) -> None:
        """The turn's call starts: the turn counts for ``hold`` more at most."""
        with self._lock:
            if ticket in self._held:
                if self.hold > 0:
                    self._held[ticket] = time.monotonic() + self.hold
                else:
                    del self._held[ticket]
                self._wake_first()

    def give_back(self, ticket: int) -> None:
        with self._lock:
            if self._held.pop(ticket, None) is not None:
                self._wake_first()

    def _wake_first(self) -> None:
        if self._line:
            self._line[0][2].notify()


class CallsFirst:
    """The runs of this process read ahead and not yet called (or called less than ``hold`` ago and not
    returned), by when they are due; and the process's :class:`Turns`."""

    def __init__(
        self,
        clock: Clock,
        most_wait: timedelta = MOST_WAIT,
        hold: timedelta = timedelta(0),
        callers: int = CALLERS,
        early: timedelta = timedelta(0),
    ):
        self.clock = clock
        self.most_wait = most_wait
        self.hold = hold.total_seconds()
        self.turns = Turns(callers, hold, early)
        """A run's turn at its fire, for its claim (or its check) and its call."""
        self._changed = threading.Condition()
        self._due: list[tuple[datetime, int]] = []  # a heap; tickets no longer expected are dropped lazily
        self._expected: set[int] = set()  # due at some time, not called yet
        self._calling: dict[int, float] = {}  # called, not returned: until when records wait for it
        self._tickets = itertools.count()

    def expect(self, due: datetime) -> int:
        """A run read ahead, to be called at ``due``: its ticket."""
        with self._changed:
            ticket = next(self._tickets)
            heapq.heappush(self._due, (due, ticket))
            self._expected.add(ticket)
            return ticket

    def calling(self, ticket: int) -> None:
        """The run's call starts: records wait for it ``hold`` more at most (or until it returns)."""
        with self._changed:
            self._expected.discard(ticket)
            if self.hold > 0:
                self._calling[ticket] = time.monotonic() + self.hold
            self._wake_when_called(calls_too=False)

    def forget(self, ticket: int) -> None:
        """The run's call returned, or it will not be called (it is decided again): records no longer wait
        for it."""
        with self._changed:
            self._expected.discard(ticket)
            self._calling.pop(ticket, None)
            self._wake_when_called(calls_too=True)

    def _wake_when_called(self, *, calls_too: bool) -> None:
        # The records waiting are woken once no run due is left to call, not at every call: a burst's
        # thousand waiting records would otherwise each wake a thousand times. They then wait for the calls
        # under way (``hold`` at most), and are woken again once none is left.
        first = self._first_due()
        if first is not None and first <= self.clock():
            return
        if calls_too and self._live_calls(time.monotonic()):
            return
        self._changed.notify_all()

    def _live_calls(self, now: float) -> bool:
        for ticket in [ticket for ticket, until in self._calling.items() if until <= now]:
            del self._calling[ticket]
        return bool(self._calling)

    def wait_for_calls(self) -> None:
        """Return once no run due by now is still to be called or in its call's first ``hold``, or after
        ``most_wait`` (of real time: it is a real wait, whatever the clock)."""
        deadline = time.monotonic() + self.most_wait.total_seconds()
        with self._changed:
            while True:
                now = time.monotonic()
                left = deadline - now
                if left <= 0:
                    return
                first = self._first_due()
                if first is not None and first <= self.clock():
                    self._changed.wait(left)
                    continue
                if not self._live_calls(now):
                    return
                self._changed.wait(min(left, max(self._calling.values()) - now))

    def _first_due(self) -> datetime | None:
        while self._due and self._due[0][1] not in self._expected:
            heapq.heappop(self._due)
        return self._due[0][0] if self._due else None


class LanesAtFire:
    """The lanes of this process's claims taken ahead of their fires, read at the fires together: a claim at
    its fire whose lane has not been read yet reads it with those of the other claims due by then (the
    soonest first, a request's worth), and those find theirs read when their turn comes."""

    def __init__(self, clock: Clock, batch: int = LANES_AT_ONCE):
        self.clock = clock
        self.batch = batch
        self._lock = threading.Lock()
        self._due: dict[int, tuple[LaneKey, datetime]] = {}
        self._read: dict[int, Lane] = {}
        self._reading: dict[int, threading.Event] = {}  # tickets in a read under way, set once it ended
        self._tickets = itertools.count()

    def expect(self, key: LaneKey, due: datetime) -> int:
        """A claim taken ahead, to be checked at ``due``: its ticket."""
        with self._lock:
            ticket = next(self._tickets)
            self._due[ticket] = (key, due)
            return ticket

    def forget(self, ticket: int) -> None:
        with self._lock:
            self._due.pop(ticket, None)
            self._read.pop(ticket, None)

    def lane(self, ticket: int, read: ReadLanes) -> Lane:
        """The lane of ``ticket``'s claim, as read at (or after) its fire."""
        while True:
            with self._lock:
                if ticket in self._read:
                    self._due.pop(ticket, None)
                    return self._read.pop(ticket)
                under_way = self._reading.get(ticket)
                if under_way is None:
                    now = self.clock()
                    others = sorted(
                        (due, t)
                        for t, (_, due) in self._due.items()
                        if due <= now and t != ticket and t not in self._read and t not in self._reading
                    )
                    chosen = [ticket, *(t for _, t in others)][: self.batch]
                    batch = {t: self._due[t][0] if t in self._due else None for t in chosen}
                    ended = threading.Event()
                    for t in chosen:
                        self._reading[t] = ended
            if under_way is not None:
                under_way.wait()  # another claim reads this one's lane with its own
                continue
            keys = sorted({key for key in batch.values() if key is not None})
            lanes: dict[LaneKey, Lane] = {}
            try:
                lanes = read(keys)
            finally:
                with self._lock:
                    for t, key in batch.items():
                        self._reading.pop(t, None)
                        if key in lanes and t in self._due:
                            self._read[t] = lanes[key]
                    ended.set()
