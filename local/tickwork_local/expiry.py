"""DynamoDB's time to live, for the local stack: items whose TTL attribute has passed are deleted.

DynamoDB deletes an item some time after the epoch second in its table's TTL attribute has passed (within
days, not at once); an item whose attribute is missing or not a number is kept, and so is one whose time is
more than five years past. moto records a table's TTL setting but deletes nothing, so a local stack kept
every run forever (90 days' retention), and each job's partition grew with it.

Each pass of the loop looks at a bounded number of items, resuming where the last pass stopped (a table at a
time, the tables whose TTL is enabled), under the lock that makes DynamoDB calls atomic and a slice at a
time, so no call waits on it for long. It deletes the expired ones it found, a bounded number per pass, each
with a DeleteItem conditional on its time having passed, through the process's DynamoDB client: the delete
takes the lock and is journaled like every other write, and an item written again meanwhile with a later
time stays.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

LOOK_PER_PASS = 2_000  # items looked at in one pass
LOOK_PER_HOLD = 250  # items looked at while the lock is held
DELETE_PER_PASS = 100
PASS_SECONDS = 1.0
OLDEST_SECONDS = 5 * 365 * 86_400  # DynamoDB leaves items whose time is more than five years past


def is_expired(value: dict[str, Any] | None, now: int) -> bool:
    """A TTL attribute's value (wire form) has passed at ``now`` (epoch seconds), as DynamoDB reads it."""
    if not value or "N" not in value:
        return False
    try:
        seconds = float(value["N"])
    except ValueError:
        return False
    return now - OLDEST_SECONDS <= seconds < now


class Expiry:
    """Passes of the local TTL: ``run_pass`` looks at up to ``look_per_pass`` items and deletes up to
    ``delete_per_pass`` of them."""

    def __init__(
        self,
        client: Any = None,
        *,
        clock: Callable[[], float] = time.time,
        look_per_pass: int = LOOK_PER_PASS,
        look_per_hold: int = LOOK_PER_HOLD,
        delete_per_pass: int = DELETE_PER_PASS,
    ):
        self._client = client
        self.clock = clock
        self.look_per_pass = look_per_pass
        self.look_per_hold = look_per_hold
        self.delete_per_pass = delete_per_pass
        self.tables: list[tuple[str, str]] = []  # (table, TTL attribute) still to walk in this round
        self.walk: Any = None
        self.attribute = ""
        self.deleted = 0

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("dynamodb")
        return self._client

    def tables_with_ttl(self) -> list[tuple[str, str]]:
        """(table, TTL attribute) of every table whose TTL is enabled, as DescribeTimeToLive says."""
        found = []
        for page in self.client.get_paginator("list_tables").paginate():
            for name in page["TableNames"]:
                described = self.client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
                if described.get("TimeToLiveStatus") == "ENABLED" and described.get("AttributeName"):
                    found.append((name, described["AttributeName"]))
        return found

    def run_pass(self) -> int:
        """Look at the next items, delete the expired ones among them; returns how many were deleted."""
        from tickwork_local.atomic import holding_writes
        from tickwork_local.moto_dynamodb import ItemWalk, walk_items

        now = int(self.clock())
        expired: list[tuple[str, str, dict[str, Any]]] = []
        looked = 0
        started_round = False
        while looked < self.look_per_pass and len(expired) < self.delete_per_pass:
            if self.walk is None:
                if not self.tables:
                    if started_round:
                        break  # every table walked in this pass already
                    self.tables = self.tables_with_ttl()
                    started_round = True
                    if not self.tables:
                        break
                name, self.attribute = self.tables.pop(0)
                self.walk = ItemWalk(name)
            count = min(self.look_per_hold, self.look_per_pass - looked)
            try:
                with holding_writes():
                    found = walk_items(self.walk, count, self.attribute)
            except Exception:  # the table is gone: on to the next
                logging.getLogger("tickwork").exception("expiry could not read %s", self.walk.table_name)
                self.walk = None
                continue
            looked += count
            expired += [
                (self.walk.table_name, self.attribute, key) for key, value in found if is_expired(value, now)
            ]
            if self.walk.done:
                self.walk = None
        deleted = sum(self.delete(name, attribute, key, now) for name, attribute, key in expired)
        self.deleted += deleted
        return deleted

    def delete(self, table: str, attribute: str, key: dict[str, Any], now: int) -> bool:
        """Delete the item if its time has still passed at ``now``; False if it was written again (or is
        gone)."""
        from botocore.exceptions import ClientError

        try:
            self.client.delete_item(
                TableName=table,
                Key=key,
                ConditionExpression="#ttl < :now AND #ttl >= :oldest",
                ExpressionAttributeNames={"#ttl": attribute},
                ExpressionAttributeValues={
                    ":now": {"N": str(now)},
                    ":oldest": {"N": str(now - OLDEST_SECONDS)},
                },
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True


def expiry_loop(stop: threading.Event, seconds: float = PASS_SECONDS, expiry: Expiry | None = None) -> None:
    """A pass every ``seconds`` until ``stop`` is set (the local stack runs it in a thread of its own)."""
    expiry = expiry or Expiry()
    while not stop.wait(seconds):
        try:
            expiry.run_pass()
        except Exception:
            logging.getLogger("tickwork").exception("expiring items failed")
