"""The web console on AWS: its built files in a private S3 bucket, and one CloudFront distribution in front
of both the console and the API, so that they share an origin (no CORS, and the token goes to no one else).

They make a stack of their own, ``tickwork-<stage>-console``, beside the scheduler's: at its largest
settings (``infra.config.planner_groups_max``) the scheduler's stack holds CloudFormation's 500 resources,
and the console needs 14 more. It imports the API's address and the log key from the scheduler's stack, so
`cdk deploy --all` (or naming the console stack) deploys the scheduler first.

- The default behaviour reads the bucket through origin access control (the bucket blocks all public
  access, encrypts at rest and refuses plain HTTP), sends the console's security headers
  (``infra/console/security-headers.json``, the same ones ``tickwork local`` sends), and hands console
  routes (``/jobs/...``: a last segment without a dot) ``/index.html`` with a CloudFront Function, as
  ``tickwork_local.console`` does. Custom error responses would do that too, but they apply to every
  behaviour, so they would turn the API's own 403 and 404 into the console's page.
- ``/v1/*`` goes to the API Gateway stage, never cached, with every header of the request but Host
  (``Authorization`` included, which CloudFront forwards only when caching is off), every method, the
  query string and the body.
- Two deployments copy the build: the hashed ``assets/`` with a year's immutable caching first, then the
  other files (``index.html``) to be revalidated, which invalidates the distribution's copies. Old assets
  stay, so a console still open in a browser keeps loading the files its page names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from infra.config import LOG_RETENTION_DAYS, StageConfig
from infra.functions import REPO_ROOT

CONSOLE_SOURCE = REPO_ROOT / "infra" / "console"
CONSOLE_DIST = CONSOLE_SOURCE / "dist"
SECURITY_HEADERS_FILE = CONSOLE_SOURCE / "security-headers.json"
ASSETS = "assets"
API_PATH_PATTERN = "/v1/*"
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
HSTS_SECONDS = 365 * 24 * 3600
# Console routes get index.html; files (a dot in the last segment) are looked up as they are.
ROUTES_FUNCTION = """\
function handler(event) {
  var request = event.request;
  var last = request.uri.substring(request.uri.lastIndexOf("/") + 1);
  if (last.indexOf(".") === -1) {
    request.uri = "/index.html";
  }
  return request;
}
"""
FRAME_OPTIONS = {
    "DENY": cloudfront.HeadersFrameOption.DENY,
    "SAMEORIGIN": cloudfront.HeadersFrameOption.SAMEORIGIN,
}
# "no-referrer" -> NO_REFERRER, and so on.
REFERRER_POLICIES = {
    policy.name.lower().replace("_", "-"): policy for policy in cloudfront.HeadersReferrerPolicy
}


def security_headers(path: Path = SECURITY_HEADERS_FILE) -> cloudfront.ResponseSecurityHeadersBehavior:
    """The headers of ``security-headers.json`` as CloudFront's security headers, with HSTS besides (which
    only means something over HTTPS). A header this does not know is an error, not a header left out."""
    headers: Mapping[str, str] = json.loads(path.read_text())
    known = {"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"}
    if set(headers) != known or headers["X-Content-Type-Options"] != "nosniff":
        raise ValueError(f"{path}: expected exactly {sorted(known)}, with X-Content-Type-Options nosniff")
    return cloudfront.ResponseSecurityHeadersBehavior(
        content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
            content_security_policy=headers["Content-Security-Policy"], override=True
        ),
        content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
        frame_options=cloudfront.ResponseHeadersFrameOptions(
            frame_option=FRAME_OPTIONS[headers["X-Frame-Options"]], override=True
        ),
        referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
            referrer_policy=REFERRER_POLICIES[headers["Referrer-Policy"]], override=True
        ),
        strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
            access_control_max_age=Duration.seconds(HSTS_SECONDS), include_subdomains=True, override=True
        ),
    )


class WebConsole(Construct):
    """The console's bucket, the distribution that serves it with the API under ``/v1/``, and the
    deployment of ``dist_dir`` (``make console`` builds it)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        rest_api: apigateway.RestApi,
        dist_dir: Path,
        log_key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            # S3-managed keys: CloudFront's origin access control reads them with no key policy to keep.
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            # Only the build lives here: the deployments delete their files with the stack (retain_on_delete
            # off), then the bucket goes.
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.routes = cloudfront.Function(
            self,
            "Routes",
            comment="tickwork console routes get /index.html",
            code=cloudfront.FunctionCode.from_inline(ROUTES_FUNCTION),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
        )
        self.headers = cloudfront.ResponseHeadersPolicy(
            self,
            "Headers",
            comment="tickwork console: Content-Security-Policy and security headers",
            security_headers_behavior=security_headers(),
        )
        self.api_behavior = cloudfront.BehaviorOptions(
            origin=origins.RestApiOrigin(rest_api),
            viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
            allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
            cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
            origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
            compress=False,
        )
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment=f"tickwork {config.stage}: web console, and the API under /v1/",
            default_root_object="index.html",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.headers,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=self.routes, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST
                    )
                ],
                compress=True,
            ),
            additional_behaviors={API_PATH_PATTERN: self.api_behavior},
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
        )
        self.url = f"https://{self.distribution.distribution_domain_name}"

        # The deployments' function: an own role writing to an own encrypted log group, as every function of
        # the stack has, instead of AWSLambdaBasicExecutionRole.
        self.deployment_logs = logs.LogGroup(
            self,
            "DeploymentLogs",
            retention=logs.RetentionDays[LOG_RETENTION_DAYS[config.log_retention_days]],
            encryption_key=log_key,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.deployment_role = iam.Role(
            self,
            "DeploymentRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="tickwork console deployment: copies the build into the console bucket",
        )
        self.deployment_logs.grant_write(self.deployment_role)
        self.assets = s3deploy.BucketDeployment(
            self,
            "Assets",
            sources=[s3deploy.Source.asset(str(dist_dir / ASSETS))],
            destination_bucket=self.bucket,
            destination_key_prefix=f"{ASSETS}/",
            cache_control=[s3deploy.CacheControl.from_string(IMMUTABLE)],
            prune=False,
            retain_on_delete=False,
            role=self.deployment_role,
            log_group=self.deployment_logs,
        )
        self.pages = s3deploy.BucketDeployment(
            self,
            "Pages",
            sources=[s3deploy.Source.asset(str(dist_dir), exclude=[ASSETS, f"{ASSETS}/**", ".built"])],
            destination_bucket=self.bucket,
            cache_control=[s3deploy.CacheControl.from_string(REVALIDATE)],
            prune=False,
            retain_on_delete=False,
            distribution=self.distribution,
            distribution_paths=["/*"],
            role=self.deployment_role,
            log_group=self.deployment_logs,
        )
        # index.html names the assets: they are in place before it is.
        self.pages.node.add_dependency(self.assets)


class ConsoleStack(Stack):
    """``tickwork-<stage>-console``: the web console in front of the scheduler stack's API."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        rest_api: apigateway.RestApi,
        dist_dir: Path,
        log_key: kms.IKey,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.console = WebConsole(
            self, "Console", config=config, rest_api=rest_api, dist_dir=dist_dir, log_key=log_key
        )
        CfnOutput(
            self,
            "ConsoleUrl",
            value=self.console.url,
            description="The web console; its /v1/ is the API as well (the same origin)",
        )
