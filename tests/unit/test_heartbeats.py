"""The process's heartbeat thread (``tickwork.app.attempt.Heartbeats``): every attempt's beats, on one thread.

The beats here come every 10 ms of real time; the tests wait on events the beats set, never on a clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tickwork.app.attempt import Heartbeats

EVERY = 0.01
WAIT = 5.0  # seconds: the longest a test waits for a beat that must come


def counting(until: int, done: threading.Event) -> tuple[list[str], Callable[[], bool]]:
    beats: list[str] = []

    def beat() -> bool:
        beats.append(threading.current_thread().name)
        if len(beats) >= until:
            done.set()
            return False
        return True

    return beats, beat


def test_an_attempt_beats_until_its_beat_says_the_lease_is_lost() -> None:
    heartbeats = Heartbeats()
    done = threading.Event()
    beats, beat = counting(3, done)

    ticket = heartbeats.start(EVERY, beat)

    assert done.wait(WAIT)
    heartbeats.stop(ticket)
    assert len(beats) == 3  # the third said False: no fourth
    assert set(beats) == {"heartbeats"}  # on the shared thread, not one of the attempt's


def test_attempts_beat_side_by_side_on_one_thread_and_a_stopped_one_beats_no_more() -> None:
    heartbeats = Heartbeats()
    first_done, second_done = threading.Event(), threading.Event()
    first, first_beat = counting(2, first_done)
    second, second_beat = counting(1_000_000, second_done)

    heartbeats.start(EVERY, first_beat)
    ticket = heartbeats.start(EVERY, second_beat)
    assert first_done.wait(WAIT)
    heartbeats.stop(ticket)
    stopped_at = len(second)
    # a later attempt's beats still come; the stopped one's do not
    later_done = threading.Event()
    later, later_beat = counting(3, later_done)
    heartbeats.start(EVERY, later_beat)
    assert later_done.wait(WAIT)

    assert len(first) == 2
    assert len(later) == 3
    assert stopped_at >= 1 and len(second) == stopped_at


def test_stop_waits_for_a_beat_under_way() -> None:
    heartbeats = Heartbeats()
    in_beat, release = threading.Event(), threading.Event()
    ended: list[str] = []

    def beat() -> bool:
        in_beat.set()
        release.wait(WAIT)
        ended.append("beat")
        return True

    ticket = heartbeats.start(EVERY, beat)
    assert in_beat.wait(WAIT)

    def stop() -> None:
        heartbeats.stop(ticket)
        ended.append("stop")

    stopper = threading.Thread(target=stop)
    stopper.start()
    stopper.join(0.05)
    assert stopper.is_alive() and ended == []  # the beat under way holds stop back
    release.set()
    stopper.join(WAIT)
    assert ended == ["beat", "stop"]


def test_a_beat_that_raises_does_not_stop_the_thread() -> None:
    heartbeats = Heartbeats()
    done = threading.Event()
    calls: list[int] = []

    def beat() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a throttled write")
        done.set()
        return False

    heartbeats.start(EVERY, beat)
    assert done.wait(WAIT)
    assert len(calls) == 2
