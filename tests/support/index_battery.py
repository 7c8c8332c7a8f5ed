"""A battery of Query requests over global secondary indexes (the runs table's ``failures`` and ``attention``
indexes, the jobs table's ``due`` index), with writes and deletes between its rounds that move items in and
out of the sparse indexes; prints each answer (or error) as JSON lines.

Run as a script it uses moto as released; imported, ``run`` uses whatever moto the caller set up. The local
stack's changes to moto must give the same lines (``tests/unit/test_moto_dynamodb.py``): the same Items,
Count, ScannedCount and LastEvaluatedKey for every sort key condition, direction, Limit, exclusive start
key, filter and projection, and for every page of a paginated query. Index sort keys have ties (several
items with one ``attention_at`` or ``next_fire_at``, even one ``failure_at``), so pages end and start
inside a run of equal sort values."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from typing import Any

from tickwork import tables

RUNS = tables.RUNS.default_name
JOBS = tables.JOBS.default_name
BASE = 1_700_000_000_000
BIG = "x" * 200_000  # five such items fill a 1 MB page


def _failure_at(number: int, run: str) -> str:
    return f"{BASE + number * 1_000:013d}#{run}"


def _run(job: int, number: int, status: str, **extra: Any) -> dict[str, Any]:
    run_id = f"r{job:02d}{number:03d}"
    item: dict[str, Any] = {
        tables.RUNS_PK: {"S": f"acme#job-{job:02d}"},
        tables.RUNS_SK: {"S": f"{BASE + number * 1_000:013d}"},
        "run_id": {"S": run_id},
        "tenant_id": {"S": "acme"},
        "status": {"S": status},
        "n": {"N": str(number)},
    }
    if status in ("FAILED", "DEAD", "ABANDONED"):
        item[tables.FAILURE_TENANT] = {"S": "acme"}
        item[tables.FAILURE_AT] = {"S": _failure_at(number, run_id)}
    if number % 4 == 0:  # a far retry: the sweeper's attention, ties on purpose
        item[tables.ATTENTION_SHARD] = {"N": str(number % 3)}
        item[tables.ATTENTION_AT] = {"N": str(BASE + (number // 8) * 1_000)}
    item.update(extra)
    return item


def _job(number: int, **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        tables.JOBS_PK: {"S": f"acme#job-{number:03d}"},
        tables.JOBS_SK: {"S": tables.JOB_SK},
        tables.JOB_TENANT: {"S": "acme"},
        tables.JOB_ID: {"S": f"job-{number:03d}"},
        "status": {"S": "ACTIVE" if number % 5 else "PAUSED"},
    }
    if number % 7:  # sparse: some jobs have no fire left
        item[tables.DUE_SHARD] = {"N": str(number % 2)}
        item[tables.DUE_AT] = {"N": str(BASE + (number // 3) * 1_000)}  # three jobs a moment
    item.update(extra)
    return item


STATUSES = ["SUCCEEDED", "FAILED", "DEAD", "FAILED", "ABANDONED", "DEAD"]


def _seed(client: Any) -> None:
    client.create_table(**tables.RUNS.create_table_kwargs(stream=False))
    client.create_table(**tables.JOBS.create_table_kwargs(stream=False))
    for job in range(3):
        for number in range(job, 40, 3):
            client.put_item(TableName=RUNS, Item=_run(job, number, STATUSES[(number + job) % len(STATUSES)]))
    # Ties in the failure index: two runs of other jobs share failure_at values with stored ones.
    for job, number in ((7, 9), (8, 9), (7, 21)):
        item = _run(job, number, "DEAD")
        item[tables.FAILURE_AT] = {"S": _failure_at(number, "r00009")}
        client.put_item(TableName=RUNS, Item=item)
    # Another tenant's failures, and large failures: pages end at 1 MB, inside and beyond a range.
    for number in range(5):
        client.put_item(
            TableName=RUNS, Item=_run(4, number, "FAILED", **{tables.FAILURE_TENANT: {"S": "other"}})
        )
    for number in range(9):
        item = _run(5, number, "DEAD", blob={"S": BIG}, **{tables.FAILURE_TENANT: {"S": "big"}})
        client.put_item(TableName=RUNS, Item=item)
    for number in range(45):
        client.put_item(TableName=JOBS, Item=_job(number))


def _outcome(call: Any) -> Any:
    try:
        answer = call()
    except Exception as error:
        response = getattr(error, "response", {}).get("Error", {})
        return {"error": [type(error).__name__, response.get("Code"), response.get("Message")]}
    answer.pop("ResponseMetadata", None)
    return answer


def _line(request: dict[str, Any], outcome: Any) -> str:
    return json.dumps({"request": request, "answer": outcome}, sort_keys=True, default=str)


def _pages(client: Any, request: dict[str, Any], lines: list[str], most: int = 200) -> None:
    """Every page of a query, each answer a line, following LastEvaluatedKey."""
    request = dict(request)
    for _ in range(most):
        outcome = _outcome(lambda: client.query(**request))
        lines.append(_line(request, outcome))
        start = outcome.get("LastEvaluatedKey") if isinstance(outcome, dict) else None
        if not start:
            return
        request["ExclusiveStartKey"] = start


# (table, index, partition attribute, partition value, sort attribute, kind, bounds)
FAILURE_BOUNDS = [
    f"{BASE - 5:013d}",  # below every key
    f"{BASE:013d}",  # a prefix of the first key
    _failure_at(9, "r00009"),  # a key three items share
    _failure_at(9, "r00009") + "~",
    f"{BASE + 20_000:013d}#",
    f"{BASE + 20_000:013d}~",
    f"{BASE + 39_000:013d}",
    f"{BASE + 39_000:013d}~",  # above every key
    "~",
]
NUMBER_BOUNDS = [str(BASE - 1), str(BASE), str(BASE + 1_000), str(BASE + 2_500), str(BASE + 4_000)]
NUMBER_BOUNDS += [str(BASE + 14_000), str(BASE + 99_000)]
PREFIXES = [
    f"{BASE:011d}"[:11],
    f"{BASE + 9_000:013d}",
    _failure_at(9, "r00009"),
    f"{BASE + 9_000:013d}#r01",
    "~",
]
INDEXES = [
    (
        RUNS,
        tables.FAILURES_INDEX,
        tables.FAILURE_TENANT,
        {"S": "acme"},
        tables.FAILURE_AT,
        "S",
        FAILURE_BOUNDS,
    ),
    (
        RUNS,
        tables.ATTENTION_INDEX,
        tables.ATTENTION_SHARD,
        {"N": "0"},
        tables.ATTENTION_AT,
        "N",
        NUMBER_BOUNDS,
    ),
    (
        RUNS,
        tables.ATTENTION_INDEX,
        tables.ATTENTION_SHARD,
        {"N": "1"},
        tables.ATTENTION_AT,
        "N",
        NUMBER_BOUNDS,
    ),
    (JOBS, tables.DUE_INDEX, tables.DUE_SHARD, {"N": "1"}, tables.DUE_AT, "N", NUMBER_BOUNDS),
    (JOBS, tables.DUE_INDEX, tables.DUE_SHARD, {"N": "0"}, tables.DUE_AT, "N", NUMBER_BOUNDS),
]


def _conditions(bounds: list[str], kind: str) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = [("", {})]
    for operator in ("=", "<", "<=", ">", ">="):
        for bound in bounds:
            found.append((f" AND #sk {operator} :a", {":a": {kind: bound}}))
    for low in bounds[::2]:
        for high in bounds[1::2]:
            found.append((" AND #sk BETWEEN :a AND :b", {":a": {kind: low}, ":b": {kind: high}}))
    if kind == "S":
        for prefix in PREFIXES:
            found.append((" AND begins_with(#sk, :a)", {":a": {"S": prefix}}))
    return found


def _query(
    table: str,
    index: str,
    hash_name: str,
    hash_value: Any,
    sort_name: str,
    condition: str,
    values: Any,
    **more: Any,
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "TableName": table,
        "IndexName": index,
        "KeyConditionExpression": "#pk = :pk" + condition,
        "ExpressionAttributeNames": {"#pk": hash_name, **({"#sk": sort_name} if "#sk" in condition else {})},
        "ExpressionAttributeValues": {":pk": hash_value, **values},
    }
    request.update(more)
    if "FilterExpression" in more:
        request["ExpressionAttributeNames"]["#st"] = "status"
    return request


def _starts(table: str, hash_name: str, hash_value: Any, sort_name: str, kind: str) -> list[dict[str, Any]]:
    """Exclusive start keys made by hand: stored and not, ties, out of range, another partition's, partial,
    of the wrong type."""
    table_keys = (tables.RUNS_PK, tables.RUNS_SK) if table == RUNS else (tables.JOBS_PK, tables.JOBS_SK)
    if table == RUNS:
        owners = [("acme#job-00", f"{BASE + 9_000:013d}"), ("acme#job-07", f"{BASE + 9_000:013d}")]
        owners += [("acme#job-05", "0"), ("zzz", "")]
    else:
        owners = [("acme#job-004", "job"), ("acme#job-005", "job"), ("acme#job-0045", "job"), ("a", "z")]
    sorts = [NUMBER_BOUNDS[2], NUMBER_BOUNDS[3]] if kind == "N" else [FAILURE_BOUNDS[2], FAILURE_BOUNDS[4]]
    found = []
    for sort in sorts:
        for owner, owner_sort in owners:
            found.append(
                {
                    hash_name: hash_value,
                    sort_name: {kind: sort},
                    table_keys[0]: {"S": owner},
                    table_keys[1]: {"S": owner_sort},
                }
            )
    base = found[0]
    found.append({**base, hash_name: {"N": "7"} if kind == "N" else {"S": "zzz"}})  # another partition
    found.append({**base, sort_name: {"S" if kind == "N" else "N": "5"}})  # a sort value of the wrong type
    found.append({k: v for k, v in base.items() if k != table_keys[1]})  # without the table's sort key
    found.append({k: v for k, v in base.items() if k != sort_name})  # without the index's sort key
    found.append({k: v for k, v in base.items() if k != hash_name})  # without the index's partition key
    return found


def _round(client: Any, lines: list[str], full: bool) -> None:
    for table, index, hash_name, hash_value, sort_name, kind, bounds in INDEXES:
        query = functools.partial(_query, table, index, hash_name, hash_value, sort_name)
        conditions = _conditions(bounds, kind)
        for number, (condition, values) in enumerate(conditions):
            for forward in (True, False):
                # every Limit on some conditions, a few on the others
                limits = list(range(1, 20)) if full and number % 8 == 0 else [2, 7]
                for limit in [None, *limits]:
                    more: dict[str, Any] = {"ScanIndexForward": forward}
                    if limit is not None:
                        more["Limit"] = limit
                    _pages(client, query(condition, values, **more), lines)
        # Filters (applied after the Limit), counts, projections
        for condition, values in conditions[::5]:
            for forward in (True, False):
                filtered = {**values, ":st": {"S": "DEAD" if table == RUNS else "ACTIVE"}}
                for limit in (None, 1, 2, 5):
                    more = {"ScanIndexForward": forward, "FilterExpression": "#st = :st"}
                    if limit is not None:
                        more["Limit"] = limit
                    _pages(client, query(condition, filtered, **more), lines)
                _pages(
                    client, query(condition, values, ScanIndexForward=forward, Select="COUNT", Limit=3), lines
                )
                more = {"ScanIndexForward": forward, "Limit": 4}
                _pages(client, query(condition, values, ProjectionExpression="#pk, run_id", **more), lines)
                _pages(client, query(condition, values, Select="ALL_PROJECTED_ATTRIBUTES", **more), lines)
        for start in _starts(table, hash_name, hash_value, sort_name, kind):
            for condition, values in conditions[::7]:
                for forward in (True, False):
                    for limit in (None, 1, 2):
                        more = {"ScanIndexForward": forward, "ExclusiveStartKey": start}
                        if limit is not None:
                            more["Limit"] = limit
                        # the page after the start key, and the next (the pages after it are walked above)
                        _pages(client, query(condition, values, **more), lines, most=2)
        # the legacy interface, and a QueryFilter
        for operator, legacy in (("BETWEEN", bounds[1:3]), ("GE", bounds[2:3]), ("LT", bounds[3:4])):
            for forward in (True, False):
                request = {
                    "TableName": table,
                    "IndexName": index,
                    "KeyConditions": {
                        hash_name: {"ComparisonOperator": "EQ", "AttributeValueList": [hash_value]},
                        sort_name: {
                            "ComparisonOperator": operator,
                            "AttributeValueList": [{kind: b} for b in legacy],
                        },
                    },
                    "ScanIndexForward": forward,
                    "Limit": 3,
                }
                _pages(client, request, lines)
                request["QueryFilter"] = {
                    "status": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "DEAD"}]}
                }
                _pages(client, request, lines)
    # Pages that end at 1 MB, with the condition's range ending before the partition does
    big = {"S": "big"}
    for condition, values in (
        ("", {}),
        (" AND #sk < :a", {":a": {"S": f"{BASE + 4_000:013d}"}}),
        (" AND #sk > :a", {":a": {"S": f"{BASE + 4_000:013d}"}}),
        (
            " AND #sk BETWEEN :a AND :b",
            {":a": {"S": f"{BASE + 1_000:013d}"}, ":b": {"S": f"{BASE + 4_500:013d}"}},
        ),
        (
            " AND #sk BETWEEN :a AND :b",
            {":a": {"S": f"{BASE + 2_000:013d}"}, ":b": {"S": f"{BASE + 6_000:013d}"}},
        ),
    ):
        for forward in (True, False):
            for limit in (None, 4, 5, 6):
                more = {"ScanIndexForward": forward, "ProjectionExpression": "#pk, run_id"}
                if limit is not None:
                    more["Limit"] = limit
                request = _query(
                    RUNS,
                    tables.FAILURES_INDEX,
                    tables.FAILURE_TENANT,
                    big,
                    tables.FAILURE_AT,
                    condition,
                    values,
                    **more,
                )
                _pages(client, request, lines)
    # A partition with nothing in it
    nobody = _query(
        RUNS, tables.FAILURES_INDEX, tables.FAILURE_TENANT, {"S": "nobody"}, tables.FAILURE_AT, "", {}
    )
    _pages(client, nobody, lines)


def _change(client: Any, step: int) -> None:
    """Writes and deletes between rounds, through every write call: items enter, leave and move inside the
    sparse indexes."""
    failure = {"#t": tables.FAILURE_TENANT, "#a": tables.FAILURE_AT}
    for number in range(step, 40, 5):  # runs deleted
        job = number % 3
        client.delete_item(
            TableName=RUNS,
            Key={
                tables.RUNS_PK: {"S": f"acme#job-{job:02d}"},
                tables.RUNS_SK: {"S": f"{BASE + number * 1_000:013d}"},
            },
        )
    for number in range(40 + step * 3, 43 + step * 3):  # new failures, at the top of the range
        client.put_item(TableName=RUNS, Item=_run(1, number, "DEAD"))
    for number in range(1 + step, 40, 6):  # runs that succeed on retry leave the failure index
        key = {
            tables.RUNS_PK: {"S": f"acme#job-{number % 3:02d}"},
            tables.RUNS_SK: {"S": f"{BASE + number * 1_000:013d}"},
        }
        client.update_item(
            TableName=RUNS,
            Key=key,
            UpdateExpression="SET #st = :st REMOVE #t, #a",
            ExpressionAttributeNames={"#st": "status", **failure},
            ExpressionAttributeValues={":st": {"S": "SUCCEEDED"}},
        )
    for number in range(2 + step, 40, 6):  # runs that fail enter it, some tied with a stored key
        key = {
            tables.RUNS_PK: {"S": f"acme#job-{number % 3:02d}"},
            tables.RUNS_SK: {"S": f"{BASE + number * 1_000:013d}"},
        }
        client.update_item(
            TableName=RUNS,
            Key=key,
            UpdateExpression="SET #st = :st, #t = :t, #a = :a, attention_shard = :s, attention_at = :at",
            ExpressionAttributeNames={"#st": "status", **failure},
            ExpressionAttributeValues={
                ":st": {"S": "DEAD"},
                ":t": {"S": "acme"},
                ":a": {"S": _failure_at(number if number % 4 else 9, "r00009" if number % 4 == 0 else "x")},
                ":s": {"N": str(number % 2)},
                ":at": {"N": str(BASE + 1_000 * (number % 5))},
            },
        )
    client.batch_write_item(
        RequestItems={
            RUNS: [
                {
                    "PutRequest": {
                        "Item": _run(
                            2, 50 + step, "FAILED", **{tables.FAILURE_AT: {"S": _failure_at(20, "tie")}}
                        )
                    }
                },
                {
                    "DeleteRequest": {
                        "Key": {
                            tables.RUNS_PK: {"S": "acme#job-07"},
                            tables.RUNS_SK: {"S": f"{BASE + 9_000:013d}"},
                        }
                    }
                },
            ],
            JOBS: [
                {
                    "PutRequest": {
                        "Item": _job(
                            60 + step,
                            **{tables.DUE_AT: {"N": str(BASE + 2_000)}, tables.DUE_SHARD: {"N": "1"}},
                        )
                    }
                },
                {
                    "DeleteRequest": {
                        "Key": {
                            tables.JOBS_PK: {"S": f"acme#job-{4 + step:03d}"},
                            tables.JOBS_SK: {"S": "job"},
                        }
                    }
                },
            ],
        }
    )
    for number in range(step, 45, 4):  # jobs fire: they move inside the due index, or leave it
        key = {tables.JOBS_PK: {"S": f"acme#job-{number:03d}"}, tables.JOBS_SK: {"S": "job"}}
        with contextlib.suppress(Exception):
            if number % 3:
                client.update_item(
                    TableName=JOBS,
                    Key=key,
                    UpdateExpression="SET next_fire_at = next_fire_at + :d",
                    ConditionExpression="attribute_exists(next_fire_at)",
                    ExpressionAttributeValues={":d": {"N": "3000"}},
                )
            else:
                client.update_item(TableName=JOBS, Key=key, UpdateExpression="REMOVE next_fire_at, due_shard")
    client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": RUNS, "Item": _run(0, 60 + step, "ABANDONED")}},
            {
                "Put": {
                    "TableName": JOBS,
                    "Item": _job(
                        7, **{tables.DUE_SHARD: {"N": "1"}, tables.DUE_AT: {"N": str(BASE + 1_000)}}
                    ),
                }
            },
            {
                "Delete": {
                    "TableName": RUNS,
                    "Key": {
                        tables.RUNS_PK: {"S": "acme#job-08"},
                        tables.RUNS_SK: {"S": f"{BASE + 9_000:013d}"},
                    },
                }
            },
        ]
    )
    with contextlib.suppress(Exception):  # a transaction that fails puts back what it touched
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": RUNS, "Item": _run(1, 70 + step, "DEAD")}},
                {
                    "Delete": {
                        "TableName": JOBS,
                        "Key": {tables.JOBS_PK: {"S": "acme#job-010"}, tables.JOBS_SK: {"S": "job"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    client.delete_item(
        TableName=RUNS,
        Key={
            tables.RUNS_PK: {"S": "acme#job-05"},
            tables.RUNS_SK: {"S": f"{BASE + (4 + step) * 1_000:013d}"},
        },
    )


def run(client: Any) -> list[str]:
    _seed(client)
    lines: list[str] = []
    for step in range(2):
        lines.append(json.dumps({"round": step}))
        _round(client, lines, full=step == 0)
        _change(client, step)
    lines.append(json.dumps({"round": "last"}))
    _round(client, lines, full=True)
    return lines


if __name__ == "__main__":
    import boto3
    from moto import mock_aws

    with mock_aws():
        for line in run(boto3.client("dynamodb", region_name="us-east-1")):
            sys.stdout.write(line + "\n")
