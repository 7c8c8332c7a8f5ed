"""The run index table (``tickwork.tables.RUN_INDEX``): chunks of run summaries by tenant and hour, and the
list of hours each tenant has; and the reading of a runs-table change (a stream record's new image) into a
summary. The order and the merge are ``tickwork.domain.run_index``'s."""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tickwork import tables
from tickwork.adapters.dynamo import to_item
from tickwork.domain.models import RunStatus
from tickwork.domain.run_index import IndexChunk, IndexEntry

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# BatchWriteItem's limit; a chunk is far under 400 kB, so 25 of them are far under the request's 16 MB.
WRITE_BATCH = 25
# Chunks a query asks for at first; each further query of the same hour asks for more, up to DynamoDB's 1 MB.
FIRST_QUERY_CHUNKS = 4
MAX_QUERY_CHUNKS = 256
HOURS_PER_QUERY = 24
# The (tenant, hour) pairs this process has listed; a restart lists them again (an idempotent put).
REMEMBERED_HOURS = 50_000
UNPROCESSED_TRIES = 8
_KEEP_AFTER_RETENTION = timedelta(days=1)


def entry_from_image(image: Mapping[str, Any], version: int) -> tuple[str, IndexEntry] | None:
    """A run item's new image (typed attributes) as the tenant and its summary; None for the items of the
    runs table that are not runs (a manual run's pointer) or that lack what a summary needs."""
    try:
        sort_key = image[tables.RUNS_SK]["S"]
        if sort_key.startswith(tables.MANUAL_POINTER_PREFIX):
            return None
        lag = image.get("lag_ms", {}).get("N")
        entry = IndexEntry(
            run_id=image["run_id"]["S"],
            scheduled_ms=int(sort_key[:13]),
            status=RunStatus(image["status"]["S"]),
            lag_ms=int(lag) if lag is not None else None,
            version=version,
        )
        return image["tenant_id"]["S"], entry
    except (KeyError, TypeError, ValueError):
        return None


def encode_entries(entries: Sequence[IndexEntry]) -> bytes:
    lines = "\n".join(
        f"{e.run_id}\t{e.scheduled_ms}\t{e.status.value}\t{'' if e.lag_ms is None else e.lag_ms}\t{e.version}"
        for e in entries
    )
    return zlib.compress(lines.encode(), 6)


def decode_entries(data: bytes) -> tuple[IndexEntry, ...]:
    entries = []
    for line in zlib.decompress(data).decode().split("\n"):
        run_id, scheduled, status, lag, version = line.split("\t")
        entries.append(
            IndexEntry(run_id, int(scheduled), RunStatus(status), int(lag) if lag else None, int(version))
        )
    return tuple(entries)


class DynamoRunIndex:
    def __init__(self, client: DynamoDBClient, *, table: str, retention: timedelta):
        self.client = client
        self.table = table
        self.retention = retention
        self._hours_listed: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    # --- writes -------------------------------------------------------------------------------------------
    def write(self, chunks: Sequence[IndexChunk]) -> None:
        """Each chunk as one item (a chunk written again replaces itself), and each new hour listed."""
        keep = int((self.retention + _KEEP_AFTER_RETENTION).total_seconds())
        items = [
            {
                tables.INDEX_PK: tables.index_partition(chunk.tenant_id, chunk.newest_ms // tables.HOUR_MS),
                tables.INDEX_SK: tables.index_chunk_sort_key(chunk.newest_ms, chunk.chunk_id),
                tables.INDEX_ENTRIES: encode_entries(chunk.entries),
                tables.INDEX_TTL: chunk.newest_ms // 1000 + keep,
            }
            for chunk in chunks
        ]
        hours = {(chunk.tenant_id, chunk.newest_ms // tables.HOUR_MS) for chunk in chunks}
        with self._lock:
            new_hours = sorted(hours - self._hours_listed)
        items += [
            {
                tables.INDEX_PK: tables.index_hours_key(tenant_id),
                tables.INDEX_SK: tables.index_hour_sort_key(hour),
                tables.INDEX_TTL: (hour + 1) * tables.HOUR_MS // 1000 + keep,
            }
            for tenant_id, hour in new_hours
        ]
        for start in range(0, len(items), WRITE_BATCH):
            self._write_batch(items[start : start + WRITE_BATCH])
        with self._lock:
            if len(self._hours_listed) > REMEMBERED_HOURS:
                self._hours_listed.clear()
            self._hours_listed.update(new_hours)

    def _write_batch(self, items: list[dict[str, Any]]) -> None:
        requests: list[Any] = [{"PutRequest": {"Item": to_item(item)}} for item in items]
        for attempt in range(UNPROCESSED_TRIES):
            response = self.client.batch_write_item(RequestItems={self.table: requests})
            requests = list(response.get("UnprocessedItems", {}).get(self.table, []))
            if not requests:
                return
            time.sleep(min(1.0, 0.05 * 2**attempt))
        raise RuntimeError(f"{len(requests)} run index items were not written")

    # --- reads --------------------------------------------------------------------------------------------
    def chunks(self, tenant_id: str, *, below_ms: int | None, since_ms: int | None) -> Iterator[IndexChunk]:
        """The tenant's chunks whose newest run is scheduled before ``below_ms``, newest first, read lazily;
        chunks older than ``since_ms`` are not read."""
        top_hour = (below_ms - 1) // tables.HOUR_MS if below_ms is not None else None
        bottom_hour = since_ms // tables.HOUR_MS if since_ms is not None else None
        for hour in self._hours(tenant_id, top_hour, bottom_hour):
            bound = tables.index_chunk_sort_key(below_ms, "") if hour == top_hour and below_ms else None
            yield from self._hour_chunks(tenant_id, hour, bound)

    def _hours(self, tenant_id: str, top: int | None, bottom: int | None) -> Iterator[int]:
        sort_range = None
        if top is not None or bottom is not None:
            low = tables.index_hour_sort_key(bottom if bottom is not None else 0)
            high = tables.index_hour_sort_key(top if top is not None else 10**10 - 1)
            sort_range = ("#sk BETWEEN :low AND :high", {":low": low, ":high": high})
        for item in self._newest_first(
            tables.index_hours_key(tenant_id), sort_range, HOURS_PER_QUERY, grow=1
        ):
            yield int(item[tables.INDEX_SK]["S"])

    def _hour_chunks(self, tenant_id: str, hour: int, below: str | None) -> Iterator[IndexChunk]:
        sort_range = ("#sk < :below", {":below": below}) if below is not None else None
        partition = tables.index_partition(tenant_id, hour)
        for item in self._newest_first(partition, sort_range, FIRST_QUERY_CHUNKS, grow=4):
            chunk_id = item[tables.INDEX_SK]["S"].partition("#")[2]
            yield IndexChunk(tenant_id, chunk_id, decode_entries(item[tables.INDEX_ENTRIES]["B"]))

    def _newest_first(
        self, partition: str, sort_range: tuple[str, dict[str, str]] | None, limit: int, *, grow: int
    ) -> Iterator[dict[str, Any]]:
        """A partition's items newest first, within ``sort_range`` (a condition on ``#sk`` and its values),
        a query at a time as they are asked for: each query ``grow`` times as many items as the one before."""
        condition, names, values = "#pk = :pk", {"#pk": tables.INDEX_PK}, {":pk": partition}
        if sort_range is not None:
            condition += f" AND {sort_range[0]}"
            names["#sk"] = tables.INDEX_SK
            values.update(sort_range[1])
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_item(values),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        while True:
            response = self.client.query(**request)
            yield from response["Items"]
            if "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
            request["Limit"] = min(MAX_QUERY_CHUNKS, request["Limit"] * grow)


__all__ = ["DynamoRunIndex", "decode_entries", "encode_entries", "entry_from_image"]
