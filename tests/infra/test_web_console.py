"""The web console's stack: a private, encrypted bucket read by CloudFront through origin access control,
the API under /v1/ on the same distribution (never cached, Authorization forwarded), the console's
security headers, its routes rewritten as the local gateway does, and the build deployed in order."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]
from tickwork_local.console import Console, load_security_headers

from infra.app import BuildMissing, console_dist_dir
from infra.web import API_PATH_PATTERN, IMMUTABLE, REVALIDATE, ROUTES_FUNCTION, SECURITY_HEADERS_FILE
from tests.infra.conftest import Synthesized

# CloudFront's managed policies (docs: "Use managed cache policies", "Use managed origin request policies").
CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
CACHING_OPTIMIZED = "658327ea-f89d-4fab-a63d-7e88639e58f6"
# Every header, cookie and query string of the viewer's request but Host (API Gateway routes by its own);
# with caching disabled that includes Authorization.
ALL_VIEWER_EXCEPT_HOST_HEADER = "b689b0a8-53d0-40ab-baf2-68738e2966ac"
EVERY_METHOD = {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"}


def _one(synthesized: Synthesized, kind: str) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (name, resource)
        for name, resource in synthesized.console_document["Resources"].items()
        if resource["Type"] == kind
    ]
    return found


def _distribution(synthesized: Synthesized) -> dict[str, Any]:
    config: dict[str, Any] = _one(synthesized, "AWS::CloudFront::Distribution")[1]["Properties"][
        "DistributionConfig"
    ]
    return config


def _origin(config: dict[str, Any], origin_id: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [origin for origin in config["Origins"] if origin["Id"] == origin_id]
    (origin,) = found
    return origin


def test_the_console_has_a_stack_of_its_own_and_the_schedulers_is_unchanged(synthesized: Synthesized) -> None:
    assert synthesized.console.stack_name == f"{synthesized.stack.stack_name}-console"
    scheduler_kinds = {resource["Type"] for resource in synthesized.resources.values()}
    assert not {kind for kind in scheduler_kinds if kind.startswith("AWS::CloudFront::")}
    assert "AWS::S3::Bucket" not in scheduler_kinds
    assert "ConsoleUrl" in synthesized.console_document["Outputs"]


def test_the_bucket_is_private_encrypted_and_refuses_plain_http(synthesized: Synthesized) -> None:
    synthesized.console_template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            },
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        },
    )
    statements = _one(synthesized, "AWS::S3::BucketPolicy")[1]["Properties"]["PolicyDocument"]["Statement"]
    denied = [statement["Condition"] for statement in statements if statement["Effect"] == "Deny"]
    assert {"Bool": {"aws:SecureTransport": "false"}} in denied
    assert {"NumericLessThan": {"s3:TlsVersion": 1.2}} in denied
    # The only reader is this distribution, as CloudFront's service principal.
    (allowed,) = [statement for statement in statements if statement["Effect"] == "Allow"]
    assert allowed["Principal"] == {"Service": "cloudfront.amazonaws.com"}
    assert allowed["Action"] == "s3:GetObject"
    distribution_id = _one(synthesized, "AWS::CloudFront::Distribution")[0]
    assert {"Ref": distribution_id} in json.loads(json.dumps(allowed["Condition"]))["StringEquals"][
        "AWS:SourceArn"
    ]["Fn::Join"][1]


def test_cloudfront_reads_the_bucket_through_origin_access_control(synthesized: Synthesized) -> None:
    oac_id, oac = _one(synthesized, "AWS::CloudFront::OriginAccessControl")
    signing = oac["Properties"]["OriginAccessControlConfig"]
    assert (
        signing["OriginAccessControlOriginType"],
        signing["SigningBehavior"],
        signing["SigningProtocol"],
    ) == (
        "s3",
        "always",
        "sigv4",
    )
    config = _distribution(synthesized)
    default = config["DefaultCacheBehavior"]
    origin = _origin(config, default["TargetOriginId"])
    assert origin["OriginAccessControlId"] == {"Fn::GetAtt": [oac_id, "Id"]}
    assert origin["S3OriginConfig"]["OriginAccessIdentity"] == ""  # no legacy origin access identity
    assert default["ViewerProtocolPolicy"] == "redirect-to-https"
    assert set(default["AllowedMethods"]) == {"GET", "HEAD"}
    assert default["CachePolicyId"] == CACHING_OPTIMIZED
    assert config["DefaultRootObject"] == "index.html"


def test_the_api_behaviour_is_never_cached_and_forwards_authorization(synthesized: Synthesized) -> None:
    config = _distribution(synthesized)
    (api,) = config["CacheBehaviors"]
    assert api["PathPattern"] == API_PATH_PATTERN == "/v1/*"
    assert api["CachePolicyId"] == CACHING_DISABLED
    assert api["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST_HEADER
    assert set(api["AllowedMethods"]) == EVERY_METHOD
    assert api["ViewerProtocolPolicy"] == "https-only"
    assert "FunctionAssociations" not in api and "ResponseHeadersPolicyId" not in api
    origin = _origin(config, api["TargetOriginId"])
    assert origin["CustomOriginConfig"] == {
        "OriginProtocolPolicy": "https-only",
        "OriginSSLProtocols": ["TLSv1.2"],
    }
    # The API Gateway stage of the scheduler's stack, imported: its domain, and its stage as the path.
    text = json.dumps(origin)
    assert "execute-api" in text or "Fn::ImportValue" in text
    assert "OriginPath" in origin
    # API Gateway's own 403 and 404 reach the client: no custom error response rewrites them.
    assert "CustomErrorResponses" not in config


def test_the_console_sends_the_same_security_headers_as_the_local_gateway(synthesized: Synthesized) -> None:
    headers = load_security_headers(SECURITY_HEADERS_FILE)
    policy = _one(synthesized, "AWS::CloudFront::ResponseHeadersPolicy")[1]["Properties"]
    security = policy["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    assert security["ContentSecurityPolicy"] == {
        "ContentSecurityPolicy": headers["Content-Security-Policy"],
        "Override": True,
    }
    assert security["FrameOptions"]["FrameOption"] == headers["X-Frame-Options"]
    assert security["ReferrerPolicy"]["ReferrerPolicy"] == headers["Referrer-Policy"]
    assert security["ContentTypeOptions"] == {"Override": True}
    assert security["StrictTransportSecurity"]["AccessControlMaxAgeSec"] >= 31_536_000
    default = _distribution(synthesized)["DefaultCacheBehavior"]
    assert default["ResponseHeadersPolicyId"] == {
        "Ref": _one(synthesized, "AWS::CloudFront::ResponseHeadersPolicy")[0]
    }


def test_the_routes_function_runs_on_viewer_requests_of_the_console(synthesized: Synthesized) -> None:
    function_id, function = _one(synthesized, "AWS::CloudFront::Function")
    assert function["Properties"]["FunctionCode"] == ROUTES_FUNCTION
    assert function["Properties"]["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    (association,) = _distribution(synthesized)["DefaultCacheBehavior"]["FunctionAssociations"]
    assert association == {
        "EventType": "viewer-request",
        "FunctionARN": {"Fn::GetAtt": [function_id, "FunctionARN"]},
    }


def test_the_routes_function_picks_the_index_page_as_the_local_gateway_does(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node, "Node.js runs the CDK's synthesis; it is needed here too"
    uris = [
        "/",
        "/jobs",
        "/jobs/new",
        "/jobs/01JABCDEFGHJKMNPQRSTVWXYZ0",
        "/runs/01JABC%3A1767225600000",
        "/health",
        "/sign-in",
        "/assets/main-AB12.js",
        "/favicon.svg",
        "/missing.js",
    ]
    script = (
        ROUTES_FUNCTION
        + "\nconsole.log(JSON.stringify(JSON.parse(process.argv[1]).map("
        + "(uri) => handler({request: {uri: uri}}).uri)));"
    )
    done = subprocess.run([node, "-e", script, json.dumps(uris)], capture_output=True, text=True, check=True)
    rewritten = dict(zip(uris, json.loads(done.stdout), strict=True))
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("index")
    (dist / "assets" / "main-AB12.js").write_text("script")
    (dist / "favicon.svg").write_text("<svg/>")
    local = Console(dist, {})
    for uri in uris:
        gets_index = local.answer(uri).body == b"index"
        assert (rewritten[uri] == "/index.html") == gets_index, uri
        if not gets_index:
            assert rewritten[uri] == uri


def test_the_build_is_deployed_assets_first_then_the_page_with_an_invalidation(
    synthesized: Synthesized,
) -> None:
    deployments = {
        name: resource
        for name, resource in synthesized.console_document["Resources"].items()
        if resource["Type"] == "Custom::CDKBucketDeployment"
    }
    assert len(deployments) == 2
    (assets_id,) = [
        name for name, r in deployments.items() if r["Properties"].get("DestinationBucketKeyPrefix")
    ]
    (pages_id,) = [name for name in deployments if name != assets_id]
    assets, pages = deployments[assets_id]["Properties"], deployments[pages_id]["Properties"]
    assert assets["DestinationBucketKeyPrefix"] == "assets/"
    assert assets["SystemMetadata"] == {"cache-control": IMMUTABLE}
    assert pages["SystemMetadata"] == {"cache-control": REVALIDATE}
    # Files of earlier builds stay (an open console still loads its own); everything goes with the stack.
    assert assets["Prune"] is False and pages["Prune"] is False
    assert assets_id in deployments[pages_id]["DependsOn"]
    assert pages["DistributionPaths"] == ["/*"]
    assert pages["DistributionId"] == {"Ref": _one(synthesized, "AWS::CloudFront::Distribution")[0]}
    assert "DistributionId" not in assets


def test_the_deployment_function_logs_to_an_encrypted_group_with_retention(synthesized: Synthesized) -> None:
    synthesized.console_template.has_resource_properties(
        "AWS::Logs::LogGroup", {"KmsKeyId": Match.any_value(), "RetentionInDays": Match.any_value()}
    )
    role = _one(synthesized, "AWS::IAM::Role")[1]["Properties"]
    assert "ManagedPolicyArns" not in role  # its own log group, not AWSLambdaBasicExecutionRole


def test_cfn_lint_finds_no_error_in_the_console_stack(synthesized: Synthesized) -> None:
    template = (synthesized.outdir / f"{synthesized.console.stack_name}.template.json").read_text()
    matches = lint(template, config=ManualArgs(regions=["us-east-1", "eu-west-1"], ignore_checks=["W3005"]))
    assert [str(match) for match in matches] == []


def test_synthesis_without_the_console_build_says_to_run_make_console(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("infra.app.CONSOLE_DIST", tmp_path / "missing")
    with pytest.raises(BuildMissing, match="make console"):
        console_dist_dir(cdk.App())
