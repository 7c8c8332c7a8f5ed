"""Calls before records: at a burst's fire, each run read ahead records its outcome once the runs due by then
have been called, and at most ``callers`` runs of the process claim and call at once.

A run read ahead (:mod:`tickwork.app.worker`) has only its claim and its call left at its fire; recording
its outcome is a write more, and the attempt's end may write again (a one-time job's completion). In one
process those writes share the interpreter with the calls of the same burst still to be made, so a record
made at once delays them. :class:`CallsFirst` holds a run's record back while a run due by now is still to be
called, for five seconds at most: the burst's calls go first, its records after.

A Lambda invocation handles ten runs; the local stack runs a hundred invocations in one process, and a
thousand threads waking at one fire spend their time handing the interpreter's lock round rather than
calling. So the runs at their fire take turns of ``callers`` at once, as a scheduler's pool of threads does
(more than an invocation's ten: on AWS the turns never wait).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from datetime import datetime, timedelta

from tickwork.app.ports import Clock

# The longest a record waits for the calls of its burst (the attempt holds its lease meanwhile): past it,
# it is written whatever is left.
MOST_WAIT = timedelta(seconds=5)
# Runs of one process claiming and calling at once.
CALLERS = 4


class CallsFirst:
    """The runs of this process read ahead and not yet called, by when they are due."""

    def __init__(self, clock: Clock, most_wait: timedelta = MOST_WAIT, callers: int = CALLERS):
        self.clock = clock
        self.most_wait = most_wait
        self.turns = threading.BoundedSemaphore(callers)
        """A run's turn to claim and call: taken at its fire, given back once its call returned."""
        self._changed = threading.Condition()
        self._due: list[tuple[datetime, int]] = []  # a heap; tickets no longer expected are dropped lazily
        self._expected: set[int] = set()
        self._tickets = itertools.count()

    def expect(self, due: datetime) -> int:
        """A run read ahead, to be called at ``due``: its ticket."""
        with self._changed:
            ticket = next(self._tickets)
            heapq.heappush(self._due, (due, ticket))
            self._expected.add(ticket)
            return ticket

    def forget(self, ticket: int) -> None:
        """The run was called, or will not be (it is decided again): records no longer wait for it. The
        records waiting are woken once no run due is left to call, not at every call: a burst's thousand
        waiting records would otherwise each wake a thousand times."""
        with self._changed:
            self._expected.discard(ticket)
            first = self._first_due()
            if first is None or first > self.clock():
                self._changed.notify_all()

    def wait_for_calls(self) -> None:
        """Return once no run due by now is still to be called, or after ``most_wait`` (of real time: it is a
        real wait, whatever the clock)."""
        deadline = time.monotonic() + self.most_wait.total_seconds()
        with self._changed:
            while True:
                first = self._first_due()
                left = deadline - time.monotonic()
                if first is None or first > self.clock() or left <= 0:
                    return
                self._changed.wait(left)

    def _first_due(self) -> datetime | None:
        while self._due and self._due[0][1] not in self._expected:
            heapq.heappop(self._due)
        return self._due[0][0] if self._due else None
