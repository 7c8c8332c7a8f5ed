"""At a burst's fire (``tickwork.app.at_fire``): the claims taken ahead checked with one read of their lanes,
the runs taking turns for their claim and their call, and the records of the runs called held back until the
runs due have been called (and their calls returned, or gone on for the hold)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest
from tickwork.app.at_fire import CallsFirst, LaneKey, LanesAtFire, Turns
from tickwork.domain.lanes import Lane
from tickwork.testing.fakes import FakeClock
from tickwork.testing.world import START

FIRE = START + timedelta(minutes=1)
WAIT = 5.0  # seconds: the longest a test waits for a thread that must finish


class Reads:
    """A lane reader that records each request's keys; each lane's version tells its job."""

    def __init__(self, fail: int = 0) -> None:
        self.requests: list[list[LaneKey]] = []
        self.fail = fail

    def __call__(self, keys: Sequence[LaneKey]) -> dict[LaneKey, Lane]:
        self.requests.append(list(keys))
        if self.fail:
            self.fail -= 1
            raise RuntimeError("throttled")
        return {key: Lane(version=int(key[1].removeprefix("job-"))) for key in keys}


def key(index: int) -> LaneKey:
    return ("acme", f"job-{index}")


def test_the_claims_due_by_the_fire_are_checked_with_one_read() -> None:
    clock = FakeClock(FIRE)
    checks = LanesAtFire(clock)
    tickets = [checks.expect(key(index), FIRE) for index in range(1, 6)]
    later = checks.expect(key(9), FIRE + timedelta(seconds=1))
    reads = Reads()

    lanes = [checks.lane(ticket, reads) for ticket in tickets]

    assert reads.requests == [[key(index) for index in range(1, 6)]]  # one request, the later one not in it
    assert [lane.version for lane in lanes] == [1, 2, 3, 4, 5]  # each claim its own job's lane
    clock.advance(seconds=1)
    assert checks.lane(later, reads).version == 9
    assert reads.requests[1:] == [[key(9)]]


def test_a_forgotten_claim_is_not_read() -> None:
    clock = FakeClock(FIRE)
    checks = LanesAtFire(clock)
    kept, forgotten = checks.expect(key(1), FIRE), checks.expect(key(2), FIRE)
    checks.forget(forgotten)
    reads = Reads()

    checks.lane(kept, reads)

    assert reads.requests == [[key(1)]]


def test_a_failed_read_is_raised_and_the_next_claim_reads_again() -> None:
    clock = FakeClock(FIRE)
    checks = LanesAtFire(clock)
    first, second = checks.expect(key(1), FIRE), checks.expect(key(2), FIRE)
    reads = Reads(fail=1)

    with pytest.raises(RuntimeError):
        checks.lane(first, reads)
    assert checks.lane(second, reads).version == 2

    assert len(reads.requests) == 2


def test_claims_reaching_the_fire_together_share_the_read() -> None:
    clock = FakeClock(FIRE)
    checks = LanesAtFire(clock)
    tickets = [checks.expect(key(index), FIRE) for index in range(1, 11)]
    release = threading.Event()
    reads = Reads()

    def slow_read(keys: Sequence[LaneKey]) -> dict[LaneKey, Lane]:
        release.wait(WAIT)  # the first read is under way while the others arrive
        return reads(keys)

    got: dict[int, int] = {}

    def check(ticket: int) -> None:
        got[ticket] = checks.lane(ticket, slow_read).version

    threads = [threading.Thread(target=check, args=(ticket,)) for ticket in tickets]
    for thread in threads:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(WAIT)

    assert len(reads.requests) == 1 and len(reads.requests[0]) == 10
    assert [got[ticket] for ticket in tickets] == list(range(1, 11))


def waits_then_sets(gate: CallsFirst, done: threading.Event) -> None:
    gate.wait_for_calls()
    done.set()


def test_a_record_waits_while_a_run_due_is_still_to_be_called() -> None:
    clock = FakeClock(FIRE)
    gate = CallsFirst(clock)
    called, other = gate.expect(FIRE), gate.expect(FIRE)
    gate.forget(called)
    done = threading.Event()
    waiter = threading.Thread(target=waits_then_sets, args=(gate, done))
    waiter.start()

    assert not done.wait(0.05)  # the other run due has not been called
    gate.forget(other)
    assert done.wait(WAIT)
    waiter.join(WAIT)


def test_a_record_does_not_wait_for_runs_due_later_nor_longer_than_its_limit() -> None:
    clock = FakeClock(FIRE)
    gate = CallsFirst(clock, most_wait=timedelta(milliseconds=50))
    gate.expect(FIRE + timedelta(seconds=1))
    gate.wait_for_calls()  # returns at once: nothing due is left to call

    gate.expect(FIRE)  # due, and never called
    finished = threading.Event()
    waiter = threading.Thread(target=waits_then_sets, args=(gate, finished))
    waiter.start()
    assert finished.wait(WAIT)  # after its 50 ms
    waiter.join(WAIT)


def takes_then_sets(turns: Turns, taken: threading.Event) -> None:
    turns.take()
    taken.set()


def started(
    target: Callable[[Any, threading.Event], None], on: Any
) -> tuple[threading.Thread, threading.Event]:
    """``target(on, done)`` in a thread of its own (a daemon: a regression fails the test, not the run)."""
    done = threading.Event()
    thread = threading.Thread(target=target, args=(on, done), daemon=True)
    thread.start()
    return thread, done


def test_no_more_runs_than_the_callers_hold_a_turn_at_once() -> None:
    turns = Turns(callers=2, hold=timedelta(seconds=60))
    first, second = turns.take(), turns.take()
    turns.calling(second)  # its call has begun, and goes on for less than the hold
    waiter, taken = started(takes_then_sets, turns)

    assert not taken.wait(0.05)  # both turns are held
    turns.give_back(first)
    assert taken.wait(WAIT)
    waiter.join(WAIT)


def test_a_call_longer_than_the_hold_gives_its_turn_up_without_returning() -> None:
    turns = Turns(callers=1, hold=timedelta(milliseconds=50))
    slow = turns.take()
    waiter, taken = started(takes_then_sets, turns)
    assert not taken.wait(0.1)  # claiming, not calling yet: the turn holds however long

    turns.calling(slow)  # a slow target: its call never returns within the test
    assert taken.wait(WAIT)  # the turn lapsed 50 ms into the call
    waiter.join(WAIT)


def test_without_a_hold_a_turn_is_given_up_as_its_call_starts() -> None:
    turns = Turns(callers=1)
    turns.calling(turns.take())
    taken = threading.Event()
    takes_then_sets(turns, taken)  # at once, in this thread
    assert taken.is_set()


def test_a_record_waits_for_a_call_under_way_until_it_returns() -> None:
    clock = FakeClock(FIRE)
    gate = CallsFirst(clock, hold=timedelta(seconds=60))
    ticket = gate.expect(FIRE)
    gate.calling(ticket)
    waiter, done = started(waits_then_sets, gate)

    assert not done.wait(0.05)  # called, not returned
    gate.forget(ticket)  # returned
    assert done.wait(WAIT)
    waiter.join(WAIT)


def test_a_record_stops_waiting_for_a_call_once_it_went_on_for_the_hold() -> None:
    clock = FakeClock(FIRE)
    gate = CallsFirst(clock, most_wait=timedelta(seconds=60), hold=timedelta(milliseconds=100))
    slow = gate.expect(FIRE)
    waiter, done = started(waits_then_sets, gate)
    assert not done.wait(0.05)  # not called yet

    gate.calling(slow)  # and it never returns
    assert done.wait(WAIT)  # 100 ms later, long before its most wait
    waiter.join(WAIT)


def test_without_a_hold_a_record_waits_only_until_the_calls_start() -> None:
    clock = FakeClock(FIRE)
    gate = CallsFirst(clock, most_wait=timedelta(seconds=60))
    ticket = gate.expect(FIRE)
    waiter, done = started(waits_then_sets, gate)
    assert not done.wait(0.05)

    gate.calling(ticket)  # started, never returns
    assert done.wait(WAIT)
    waiter.join(WAIT)


def test_runs_in_line_get_their_turns_in_the_order_of_their_fires_and_never_before() -> None:
    turns = Turns(callers=1, hold=timedelta(seconds=60))
    holder = turns.take()
    start = time.monotonic()
    order: list[tuple[str, float]] = []

    def waits(name: str, at: float) -> None:
        ticket = turns.take(at=at)
        order.append((name, time.monotonic()))
        turns.give_back(ticket)

    later = threading.Thread(target=waits, args=("later", start + 0.2), daemon=True)
    later.start()
    sooner = threading.Thread(target=waits, args=("sooner", start + 0.1), daemon=True)
    sooner.start()  # came second, due first
    turns.give_back(holder)
    for thread in (later, sooner):
        thread.join(WAIT)

    assert [name for name, _ in order] == ["sooner", "later"]
    assert order[0][1] >= start + 0.1 and order[1][1] >= start + 0.2  # neither before its time


def test_a_run_first_in_line_waits_for_a_turn_to_lapse() -> None:
    turns = Turns(callers=1, hold=timedelta(milliseconds=50))
    turns.calling(turns.take())  # a slow call: its turn lapses 50 ms in
    waiter, taken = started(takes_then_sets, turns)

    assert taken.wait(WAIT)  # woken by the lapse, with nothing given back
    waiter.join(WAIT)
