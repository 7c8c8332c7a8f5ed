"""The tenant-wide run list: its filter, its order and its cursor, and the merge of several sources.

Runs are ordered newest first by their position: the scheduled time (epoch ms), then the run id. Within one
job that is the order of the job's history, and in the failure index it is the order of its sort key, so
every source can be read newest first and merged. A page ends at a position; the cursor names it, and the
next page takes the runs strictly below it.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from tickwork.domain.models import Run, RunStatus
from tickwork.domain.timeutil import to_epoch_ms
from tickwork.errors import InvalidInput

MAX_EPOCH_MS = 10**13 - 1  # 13 digits, as the history keys have
MAX_CURSOR_RUN_ID = 200


class Position(NamedTuple):
    scheduled_ms: int
    run_id: str


def position_of(run: Run) -> Position:
    return Position(to_epoch_ms(run.scheduled_for), run.run_id)


@dataclass(frozen=True)
class RunFilter:
    """Which runs a list shows: statuses (None: any), one job (None: every job), ``since <= scheduled_for <
    until`` (None: unbounded)."""

    statuses: frozenset[RunStatus] | None = None
    job_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise InvalidInput("since must be before until", field="since")

    def matches(self, run: Run) -> bool:
        return (
            (self.statuses is None or run.status in self.statuses)
            and (self.job_id is None or run.job_id == self.job_id)
            and (self.since is None or run.scheduled_for >= self.since)
            and (self.until is None or run.scheduled_for < self.until)
        )


@dataclass(frozen=True)
class Slice:
    """What one source gave for a page: matching runs below the page's start, newest first, and where it
    stopped reading (None: it has nothing more). Every run it did not read is below ``stopped_at``."""

    runs: list[Run]
    stopped_at: Position | None = None


def merge(slices: list[Slice], *, before: Position | None, limit: int) -> tuple[list[Run], Position | None]:
    """The newest ``limit`` runs below ``before`` across the slices, and the position the next page starts
    below (None: none left). A source that stopped early may still hold runs below where it stopped, so only
    runs at or above the highest such stop are certain to be in order: the page ends there at the latest."""
    stops = [piece.stopped_at for piece in slices if piece.stopped_at is not None]
    cutoff = max(stops) if stops else None
    seen: dict[str, Run] = {}
    for piece in slices:
        for run in piece.runs:
            position = position_of(run)
            if (before is None or position < before) and (cutoff is None or position >= cutoff):
                seen.setdefault(run.run_id, run)
    ordered = sorted(seen.values(), key=position_of, reverse=True)
    page = ordered[:limit]
    if len(ordered) > limit:
        return page, position_of(page[-1])
    return page, cutoff


def encode_cursor(position: Position) -> str:
    raw = json.dumps({"before": [position.scheduled_ms, position.run_id]}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Position:
    """The position a cursor names; InvalidInput (field ``cursor``) for anything this module did not make."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError) as error:
        raise InvalidInput("cursor is not valid", field="cursor", code="invalid_cursor") from error
    before = decoded.get("before") if isinstance(decoded, dict) and set(decoded) == {"before"} else None
    if (
        not isinstance(before, list)
        or len(before) != 2
        or type(before[0]) is not int
        or not 0 <= before[0] <= MAX_EPOCH_MS
        or not isinstance(before[1], str)
        or len(before[1]) > MAX_CURSOR_RUN_ID
    ):
        raise InvalidInput("cursor is not valid", field="cursor", code="invalid_cursor")
    return Position(before[0], before[1])


__all__ = ["Position", "RunFilter", "Slice", "decode_cursor", "encode_cursor", "merge", "position_of"]
