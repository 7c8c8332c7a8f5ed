"""Tables and queues: keys and indexes from tickwork.tables, TTL, PITR, encryption, redrive and visibility."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match
from tickwork import tables

from infra.storage import VISIBILITY_PER_WORKER_TIMEOUT
from tests.infra.conftest import Synthesized


def _key_schema(partition: tables.KeyAttribute, sort: tables.KeyAttribute | None) -> list[dict[str, str]]:
    schema = [{"AttributeName": partition.name, "KeyType": "HASH"}]
    if sort:
        schema.append({"AttributeName": sort.name, "KeyType": "RANGE"})
    return schema


@pytest.mark.parametrize("definition", tables.ALL_TABLES, ids=lambda d: d.logical_name)
def test_each_table_has_the_shared_keys_indexes_and_protection(
    default_stack: Synthesized, definition: tables.TableDefinition
) -> None:
    table = default_stack.stack.storage.tables[definition.logical_name]
    resource = default_stack.resources[default_stack.logical_id(table)]
    properties = resource["Properties"]

    assert properties["KeySchema"] == _key_schema(definition.partition_key, definition.sort_key)
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["SSESpecification"]["SSEEnabled"] is True
    declared = {item["AttributeName"]: item["AttributeType"] for item in properties["AttributeDefinitions"]}
    assert declared == {attribute.name: attribute.type for attribute in definition.key_attributes()}

    indexes = {index["IndexName"]: index for index in properties.get("GlobalSecondaryIndexes", [])}
    assert set(indexes) == {index.name for index in definition.indexes}
    for index in definition.indexes:
        assert indexes[index.name]["KeySchema"] == _key_schema(index.partition_key, index.sort_key)
        assert indexes[index.name]["Projection"]["ProjectionType"] == index.projection
        if index.non_key_attributes:
            assert indexes[index.name]["Projection"]["NonKeyAttributes"] == list(index.non_key_attributes)

    if definition.ttl_attribute:
        assert properties["TimeToLiveSpecification"] == {
            "AttributeName": definition.ttl_attribute,
            "Enabled": True,
        }
    else:
        assert "TimeToLiveSpecification" not in properties

    kept = definition in (tables.JOBS, tables.TENANTS)
    assert properties.get("DeletionProtectionEnabled", False) is kept
    assert resource["DeletionPolicy"] == ("Retain" if kept else "Delete")


def test_ttl_on_runs_and_idempotency_with_the_shared_attribute_names(default_stack: Synthesized) -> None:
    for name in (tables.RUNS_TTL, tables.IDEMPOTENCY_TTL):
        default_stack.template.has_resource_properties(
            "AWS::DynamoDB::Table",
            {"TimeToLiveSpecification": {"AttributeName": name, "Enabled": True}},
        )


def test_tenants_table_expires_idle_api_request_counters(default_stack: Synthesized) -> None:
    tenants = default_stack.stack.storage.tenants
    properties = default_stack.resources[default_stack.logical_id(tenants)]["Properties"]

    assert properties["TimeToLiveSpecification"] == {"AttributeName": tables.TENANTS_TTL, "Enabled": True}


def test_the_sparse_due_index_the_tenant_index_and_the_attention_index(default_stack: Synthesized) -> None:
    default_stack.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [
                    Match.object_like(
                        {
                            "IndexName": tables.DUE_INDEX,
                            "KeySchema": [
                                {"AttributeName": tables.DUE_SHARD, "KeyType": "HASH"},
                                {"AttributeName": tables.DUE_AT, "KeyType": "RANGE"},
                            ],
                        }
                    )
                ]
            )
        },
    )
    default_stack.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [
                    Match.object_like(
                        {
                            "IndexName": tables.ATTENTION_INDEX,
                            "KeySchema": [
                                {"AttributeName": tables.ATTENTION_SHARD, "KeyType": "HASH"},
                                {"AttributeName": tables.ATTENTION_AT, "KeyType": "RANGE"},
                            ],
                        }
                    )
                ]
            )
        },
    )


def test_a_tenants_jobs_are_listed_through_their_own_index(default_stack: Synthesized) -> None:
    default_stack.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [
                    Match.object_like(
                        {
                            "IndexName": tables.JOBS_BY_TENANT_INDEX,
                            "KeySchema": [
                                {"AttributeName": tables.JOB_TENANT, "KeyType": "HASH"},
                                {"AttributeName": tables.JOB_ID, "KeyType": "RANGE"},
                            ],
                            "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["status"]},
                        }
                    )
                ]
            )
        },
    )


def test_run_queue_redrives_to_the_dlq_after_the_configured_receives(synthesized: Synthesized) -> None:
    config = synthesized.stack.config
    storage = synthesized.stack.storage
    synthesized.template.has_resource_properties(
        "AWS::SQS::Queue",
        {
            "RedrivePolicy": {
                "deadLetterTargetArn": {"Fn::GetAtt": [synthesized.logical_id(storage.run_dlq), "Arn"]},
                "maxReceiveCount": config.max_receive_count,
            }
        },
    )


def test_run_queue_visibility_is_at_least_six_worker_timeouts(synthesized: Synthesized) -> None:
    storage, stack = synthesized.stack.storage, synthesized.stack
    queue = synthesized.resources[synthesized.logical_id(storage.run_queue)]["Properties"]
    worker = synthesized.resources[synthesized.logical_id(stack.worker_function.function)]["Properties"]
    assert VISIBILITY_PER_WORKER_TIMEOUT >= 6
    assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]
    assert worker["Timeout"] == stack.config.worker_timeout_seconds


def test_every_queue_is_encrypted_and_refuses_plain_http(default_stack: Synthesized) -> None:
    queues = default_stack.of_type("AWS::SQS::Queue")
    assert len(queues) == 5  # the three priorities' run queues, their dead-letter queue, the dead runs
    for queue in queues.values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
    policies = default_stack.of_type("AWS::SQS::QueuePolicy")
    secured = [
        statement
        for policy in policies.values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Effect"] == "Deny"
        and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    ]
    assert len(secured) == 5
