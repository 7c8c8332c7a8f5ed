"""Every pair of run statuses (and "no item yet") against the lifecycle the contract describes."""

from __future__ import annotations

import itertools

import pytest
from tickwork.domain.lifecycle import TERMINAL, IllegalTransition, can_move, ensure_move, sources_of
from tickwork.domain.models import RunStatus

P, E, R, W = RunStatus.PLANNED, RunStatus.ENQUEUED, RunStatus.RUNNING, RunStatus.RETRY_WAIT
OK, FAILED, DEAD, ABANDONED = RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.DEAD, RunStatus.ABANDONED
MISSED, SKIPPED, CANCELLED = RunStatus.MISSED, RunStatus.SKIPPED, RunStatus.CANCELLED

# Written out by hand from the design: each row is where a run may go next.
EXPECTED: dict[RunStatus | None, set[RunStatus]] = {
    None: {P, E, R, MISSED, SKIPPED, CANCELLED},
    P: {E, R, MISSED, SKIPPED, CANCELLED},
    E: {P, R, MISSED, SKIPPED, CANCELLED},
    R: {R, OK, W, FAILED, DEAD, ABANDONED, CANCELLED},
    W: {E, R, CANCELLED, DEAD},
    FAILED: {P},
    DEAD: {P},
    ABANDONED: {P},
    OK: set(),
    MISSED: set(),
    SKIPPED: set(),
    CANCELLED: set(),
}
EVERY_PAIR = list(itertools.product([None, *RunStatus], RunStatus))


@pytest.mark.parametrize(("old", "new"), EVERY_PAIR, ids=lambda s: s.value if s else "none")
def test_each_move_is_allowed_exactly_when_the_design_allows_it(
    old: RunStatus | None, new: RunStatus
) -> None:
    allowed = new in EXPECTED[old]
    assert can_move(old, new) is allowed
    if allowed:
        ensure_move(old, new)
    else:
        with pytest.raises(IllegalTransition):
            ensure_move(old, new)


def test_every_status_is_covered() -> None:
    assert set(EXPECTED) == {None, *RunStatus}


def test_terminal_statuses_go_nowhere_but_a_rerun_by_hand() -> None:
    for status in TERMINAL:
        assert {new for new in RunStatus if can_move(status, new)} <= {P}


@pytest.mark.parametrize("new", list(RunStatus), ids=lambda s: s.value)
def test_sources_are_the_inverse_of_the_table(new: RunStatus) -> None:
    assert sources_of(new) == {old for old, targets in EXPECTED.items() if new in targets}
