"""Routes of the HTTP API (v1) on the Powertools REST resolver, with request validation turned on.

Each route reads the tenant from the authorizer's context (never from the body), calls one method of
``JobService`` and maps the result. Errors become the design's error shape in one place.

API Gateway keeps the authorizer's answer for each token for minutes (``authorizer_cache_seconds``), so the
authorizer only says whose token it is. What can change meanwhile is read on every request, before anything
else (:func:`build_app`'s principal check): a token revoked since is a 401, a disabled tenant a 403
``tenant_disabled``, and the API rate limit is the tenant's current one. A 403 is never the authorizer's
answer, so no cache can keep a re-enabled tenant out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import cached_property
from http import HTTPStatus
from typing import Annotated, Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from tickwork.api.errors import body_of, describe_validation_errors, error_body, status_of
from tickwork.api.protocol import ResourceTable, refuse_method, with_text_body
from tickwork.api.schemas import (
    ClaimedRunOut,
    ClaimOut,
    ErrorBody,
    HealthOut,
    HeartbeatOut,
    JobOut,
    JobPage,
    PauseRequest,
    PreviewRequest,
    PreviewResponse,
    RunDetailOut,
    RunOut,
    RunPage,
    StatsOut,
)
from tickwork.domain.describe import describe_schedule
from tickwork.domain.models import Instant, JobPatch, JobSpec, JobStatus, RunStatus
from tickwork.domain.pools import (
    POOL_NAME,
    ClaimRequest,
    CompleteRequest,
    FailRequest,
    HeartbeatRequest,
)
from tickwork.domain.run_listing import RunFilter
from tickwork.domain.tenants import Principal
from tickwork.errors import (
    IdempotencyKeyReused,
    InvalidInput,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    TickworkError,
    Unauthorized,
)
from tickwork.observability import logger
from tickwork.runtime import Runtime, runtime

JSON = "application/json"
ID = r"^[A-Za-z0-9._:-]{1,200}$"
JobId = Annotated[str, Path(pattern=ID, description="The job's id")]
# A workflow task's run id holds a "/" (<run_id>/<task_id>), sent percent-encoded (%2F) in a path.
RUN_ID = r"^[A-Za-z0-9._:/-]{1,300}$"
RunId = Annotated[str, Path(pattern=RUN_ID, description="The run's id (a workflow task's: its / as %2F)")]
PoolPath = Annotated[str, Path(pattern=POOL_NAME, description="The pool's name")]
IdempotencyKey = Annotated[
    str | None, Header(alias="idempotency-key", min_length=1, max_length=255, description="Retry-safe key")
]
Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(min_length=1, max_length=2048)]
HEALTH_PATH = "/v1/health"
TENANT_RUNS_DESCRIPTION = (
    "The tenant's stored runs, newest first by scheduled_for, for a tenant of any size. Fires waiting in the"
    " queue that have no run item yet are not listed here (a job's own history shows them). With job_id, the"
    " job's history; when every status asked for is FAILED, DEAD or ABANDONED, a sparse index of those runs;"
    " otherwise the tenant's run index, written from the runs' changes a few seconds after them. A page reads"
    " at most about 2,000 runs: it may then hold fewer than limit runs and still have a next_cursor. since is"
    " inclusive, until exclusive."
)
IF_MATCH = r'^(W/)?"?[0-9]{1,18}"?$'


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _responses(
    success: type[BaseModel], *statuses: int, status: int = HTTPStatus.OK, public: bool = False
) -> dict[int, OpenAPIResponse]:
    """OpenAPI responses: the route's success and the error statuses it can answer. Every route can answer
    400 (a request body that is not JSON in UTF-8 is refused on any route); every authenticated one 401, 403
    (``tenant_disabled``: an operator disabled the tenant) and 429 (the tenant's API rate limit, with
    ``Retry-After``)."""
    errors = {*statuses, 400} if public else {*statuses, 400, 401, 403, 429}
    responses: dict[int, OpenAPIResponse] = {
        code: {"description": HTTPStatus(code).phrase, "content": {JSON: {"model": ErrorBody}}}
        for code in sorted(errors)
    }
    responses[status] = {"description": HTTPStatus(status).phrase, "content": {JSON: {"model": success}}}
    return responses


def parse_json_object(body: str) -> dict[str, Any]:
    """Request bodies are JSON objects of standard JSON: an array would otherwise be unwrapped by the
    validator, and NaN or Infinity would be stored and sent on as invalid JSON."""

    def refuse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        parsed = json.loads(body, parse_constant=refuse_constant)
    except RecursionError as error:
        raise json.JSONDecodeError("the JSON is nested too deeply", body, 0) from error
    except json.JSONDecodeError as error:
        # The message says where the JSON breaks: the error's own text ends before its position.
        where = f"{error.msg} at line {error.lineno} column {error.colno}"
        raise json.JSONDecodeError(where, body, error.pos) from error
    except ValueError as error:  # NaN or Infinity, or an integer longer than the interpreter converts
        raise json.JSONDecodeError(str(error), body, 0) from error
    if not isinstance(parsed, dict):
        raise json.JSONDecodeError("the request body must be a JSON object", body, 0)
    return parsed


class OwnRequestResolver(APIGatewayRestResolver):
    """Keeps the request it is resolving (``current_event``, ``lambda_context``) on the instance.

    Powertools keeps them on a class that every resolver of the process shares. On Lambda one environment
    resolves one event at a time, so that is safe; where resolvers run side by side on threads (the local
    gateway, tests), each would read the others' requests. Routing context and middleware frames are already
    the instance's own, so an instance serving one request at a time shares nothing with the others.
    """

    _own_event: BaseProxyEvent
    _own_context: LambdaContext
    _own_principal: Principal | None = None
    admit: Callable[[], Principal] | None = None
    """The principal check (``build_app`` sets it): who asks, as stored now, or an error to answer. It runs
    before anything else on every route but health, before HTTP's rules and before validation."""

    @property
    def principal(self) -> Principal | None:
        """Who the request being resolved comes from, once admitted."""
        return self._own_principal

    @property  # type: ignore[override]
    def current_event(self) -> BaseProxyEvent:
        return self._own_event

    @current_event.setter
    def current_event(self, event: BaseProxyEvent) -> None:
        self._own_event = event

    @property
    def lambda_context(self) -> LambdaContext:
        return self._own_context

    @lambda_context.setter
    def lambda_context(self, context: LambdaContext) -> None:
        self._own_context = context

    @cached_property
    def resources(self) -> ResourceTable:
        """The paths of the registered routes with their methods, read once every route is registered.
        Powertools keeps its routes in these two lists and matches them in this order; a test checks the
        table against docs/openapi.json."""
        routes = (*self._static_routes, *self._dynamic_routes)
        return ResourceTable((route.openapi_path, route.rule, route.method) for route in routes)

    def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
        """HTTP's rules first (``tickwork.api.protocol``): a method the path does not have, ``OPTIONS`` and
        ``HEAD``, and a request body that is not JSON in UTF-8. Then the route. An unknown path goes
        straight to the resolver's not-found answer."""
        request = dict(event)
        self._own_event = self._to_proxy_event(request)
        self._own_context = context
        self._own_principal = None
        resource = self.resources.find(self._remove_prefix(self._own_event.path))
        if resource is None:
            return self._dispatch(request, context)
        method = str(request.get("httpMethod") or "").upper()
        head = method == "HEAD" and "GET" in resource.methods
        try:
            if resource.path != HEALTH_PATH and self.admit is not None:
                self._own_principal = self.admit()
            if method == "OPTIONS" and method not in resource.methods:
                return self._answer(Response(HTTPStatus.NO_CONTENT, headers={"Allow": resource.allow_header}))
            if method not in resource.methods and not head:
                raise refuse_method(resource, method)
            request = with_text_body(request)
        except TickworkError as error:
            log_refusal(status_of(error), body_of(error))
            headers = {"Allow": ", ".join(error.allowed)} if isinstance(error, MethodNotAllowed) else None
            return self._answer(
                Response(status_of(error), content_type=JSON, body=body_of(error), headers=headers)
            )
        if not head:
            return self._dispatch(request, context)
        # HEAD is GET without the body: same status, same headers.
        context_of_get = {**(request.get("requestContext") or {}), "httpMethod": "GET"}
        answer = self._dispatch({**request, "httpMethod": "GET", "requestContext": context_of_get}, context)
        return {**answer, "body": "", "isBase64Encoded": False}

    def _dispatch(self, request: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        self._own_event = self._to_proxy_event(request)
        return super().resolve(request, context)

    def _answer(self, response: Response[Any]) -> dict[str, Any]:
        return ResponseBuilder[BaseProxyEvent](response=response).build(self.current_event)

    def _convert_matches_into_route_keys(self, match: re.Match[str]) -> dict[str, str]:
        """Path parameters, percent-decoded: API Gateway (REST) passes the path as the client sent it, and a
        client may well encode the ``:`` of a run id (``%3A``)."""
        return {name: unquote(value) for name, value in match.groupdict().items()}


def log_refusal(status: int, body: dict[str, Any]) -> None:
    """A client error is an outcome, not a fault: one DEBUG line with its code, never a traceback."""
    logger.debug("request refused", extra={"status_code": int(status), "error_code": body["error"]["code"]})


def build_app(
    get_runtime: Callable[[], Runtime] = runtime, clock: Callable[[], datetime] = _utcnow
) -> APIGatewayRestResolver:
    """The API's resolver. It serves one request at a time: run one per concurrent request."""
    app = OwnRequestResolver(enable_validation=True, json_body_deserializer=parse_json_object)

    def authorizer_context() -> dict[str, Any]:
        context: dict[str, Any] = (
            app.current_event.raw_event.get("requestContext", {}).get("authorizer") or {}
        )
        return context

    def tenant() -> str:
        tenant_id = authorizer_context().get("tenant_id")
        if not tenant_id:
            raise Unauthorized("missing or invalid bearer token")
        return str(tenant_id)

    def actor() -> str:
        authorizer = authorizer_context()
        return str(authorizer.get("actor") or authorizer.get("principalId") or tenant())

    def now() -> datetime:
        return clock()

    def admit() -> Principal:
        """The principal check: the tenant and the token's item as stored now (one consistent read of
        both), whatever the authorizer's cached answer says. A token revoked since (``tickwork tenants
        rotate-token``) or a tenant gone is a 401; a disabled tenant a 403 ``tenant_disabled``."""
        token_hash = authorizer_context().get("token_hash")
        principal = get_runtime().tenants.admitted(tenant(), str(token_hash) if token_hash else None)
        if principal is None:
            raise Unauthorized("missing or invalid bearer token")
        principal.tenant.check_enabled()
        return principal

    app.admit = admit

    def admitted() -> Principal:
        """The request's principal: admitted before its route was found, or now (a path with no route,
        which the resolver answers 404 after the middlewares)."""
        return app.principal or admit()

    def rate_limit(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
        """Count the request against the tenant's current limit before the route runs; a refused one
        changes nothing. Runs after request validation, so malformed requests cost no write."""
        if app.current_event.resource != HEALTH_PATH:
            tenant_now = admitted().tenant
            get_runtime().api_rate_limiter.take(
                tenant_now.tenant_id, limit=tenant_now.api_requests_per_second, now=now()
            )
        return next_middleware(app)

    def tenant_in_logs(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
        """Every log line of the request names its tenant; the keys are the thread's, so the next request
        on this thread starts without them."""
        logger.append_keys(tenant_id=authorizer_context().get("tenant_id"))
        try:
            return next_middleware(app)
        finally:
            logger.remove_keys(["tenant_id"])

    app.use(middlewares=[tenant_in_logs, rate_limit])

    def json_response(status: int, model: Any, headers: dict[str, str] | None = None) -> Response[Any]:
        body = model if isinstance(model, dict) else model.model_dump(mode="json")
        return Response(status_code=status, content_type=JSON, body=body, headers=headers)

    def refused(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response[Any]:
        log_refusal(status, body)
        return json_response(status, body, headers)

    def audit(message: str, **fields: Any) -> None:
        """An INFO line for a change a person made: what, to which job or run, and by which token."""
        logger.info(message, extra={"actor": actor(), **fields}, stacklevel=3)  # the route's location

    def idempotent(name: str, operation: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        config = IdempotencyConfig(
            event_key_jmespath="[tenant_id, key]",
            payload_validation_jmespath="request",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=get_runtime().settings.idempotency_ttl_seconds,
        )
        if app.lambda_context is not None:
            config.register_lambda_context(app.lambda_context)
        wrapped: Callable[..., dict[str, Any]] = idempotent_function(
            data_keyword_argument="request",
            persistence_store=get_runtime().idempotency_store(),
            config=config,
            key_prefix=f"tickwork.{name}",
        )(operation)
        return wrapped

    # --- errors -------------------------------------------------------------------------------------------
    @app.exception_handler(TickworkError)
    def _tickwork_error(error: TickworkError) -> Response[Any]:
        return refused(status_of(error), body_of(error))

    @app.exception_handler(RateLimited)
    def _rate_limited(error: RateLimited) -> Response[Any]:
        return refused(status_of(error), body_of(error), {"Retry-After": str(error.retry_after)})

    @app.exception_handler(RequestValidationError)
    def _request_invalid(error: RequestValidationError) -> Response[Any]:
        status, body = describe_validation_errors(error.errors())
        return refused(status, body)

    @app.exception_handler(RequestUnsupportedContentType)
    def _unsupported_content(error: RequestUnsupportedContentType) -> Response[Any]:
        return refused(
            HTTPStatus.BAD_REQUEST,
            error_body(
                "unsupported_content_type", "send the request body as application/json", "Content-Type"
            ),
        )

    @app.exception_handler(ValidationError)
    def _model_invalid(error: ValidationError) -> Response[Any]:
        status, body = describe_validation_errors(error.errors())
        return refused(status, body)

    @app.exception_handler(IdempotencyValidationError)
    def _key_reused(error: IdempotencyValidationError) -> Response[Any]:
        reused = IdempotencyKeyReused(
            "this Idempotency-Key was used with a different request", field="Idempotency-Key"
        )
        return refused(status_of(reused), body_of(reused))

    @app.exception_handler(IdempotencyAlreadyInProgressError)
    def _in_progress(error: IdempotencyAlreadyInProgressError) -> Response[Any]:
        return refused(
            HTTPStatus.CONFLICT,
            error_body("request_in_progress", "a request with this Idempotency-Key is still in progress"),
        )

    @app.not_found
    def _no_route(error: Exception) -> Response[Any]:
        return refused(HTTPStatus.NOT_FOUND, error_body("not_found", "no such route"))

    # --- jobs ---------------------------------------------------------------------------------------------
    @app.post(
        "/v1/jobs",
        summary="Create a job",
        responses=_responses(JobOut, 409, 413, 422, status=HTTPStatus.CREATED),
    )
    def create_job(
        job: Annotated[JobSpec, Body()], idempotency_key: IdempotencyKey = None
    ) -> Response[JobOut]:
        tenant_id = tenant()
        service = get_runtime().service

        def create(request: dict[str, Any]) -> dict[str, Any]:
            details = service.create_job(tenant_id, JobSpec.model_validate(request["request"]), now())
            audit("job created", job_id=details.job.job_id)
            return JobOut.of(details).model_dump(mode="json")

        request = {"tenant_id": tenant_id, "key": idempotency_key, "request": job.model_dump(mode="json")}
        body = idempotent("create_job", create)(request=request) if idempotency_key else create(request)
        return json_response(HTTPStatus.CREATED, body)

    @app.get(
        "/v1/jobs",
        summary="List jobs, newest first",
        description=(
            "Each job as `GET /v1/jobs/{job_id}` shows it, with `next_fire_at` and `last_run` (a summary of"
            " its latest run). Cancelled jobs are listed only with `status=CANCELLED`."
        ),
        responses=_responses(JobPage),
    )
    def list_jobs(
        status: Annotated[JobStatus | None, Query()] = None, limit: Limit = 50, cursor: Cursor = None
    ) -> JobPage:
        page = get_runtime().service.list_jobs(tenant(), status=status, limit=limit, cursor=cursor, now=now())
        return JobPage(items=[JobOut.of(details) for details in page.items], next_cursor=page.next_cursor)

    @app.get("/v1/jobs/<job_id>", summary="Get a job", responses=_responses(JobOut, 404))
    def get_job(job_id: JobId) -> Response[JobOut]:
        details = get_runtime().service.get_job(tenant(), job_id, now())
        return json_response(HTTPStatus.OK, JobOut.of(details), {"ETag": f'"{details.job.version}"'})

    @app.patch(
        "/v1/jobs/<job_id>",
        summary="Update the given fields of a job",
        description=(
            "A merge patch: the fields given and nothing else; the next fire is recomputed. A COMPLETED job"
            " takes a change only with a schedule that fires again (a new `at`, a later `end_at`), and is"
            " then ACTIVE again, counted against the tenant's job limit (429 `quota_exceeded` past it). A"
            " CANCELLED job cannot be changed (409)."
        ),
        responses=_responses(JobOut, 404, 409, 413),
    )
    def update_job(
        job_id: JobId,
        patch: Annotated[JobPatch, Body()],
        if_match: Annotated[
            str | None,
            Header(
                alias="if-match",
                max_length=64,
                # Checked by _version_of, which says what is wrong in words rather than as a pattern.
                json_schema_extra={"pattern": IF_MATCH},
                description='The version the change expects, as the job\'s ETag: "3"',
            ),
        ] = None,
    ) -> Response[JobOut]:
        details = get_runtime().service.update_job(
            tenant(), job_id, patch, now(), if_match=_version_of(if_match)
        )
        audit("job updated", job_id=job_id, version=details.job.version)
        return json_response(HTTPStatus.OK, JobOut.of(details), {"ETag": f'"{details.job.version}"'})

    @app.post("/v1/jobs/<job_id>/pause", summary="Pause a job", responses=_responses(JobOut, 404, 409))
    def pause_job(job_id: JobId, request: Annotated[PauseRequest | None, Body()] = None) -> JobOut:
        reason = request.reason if request else None
        details = get_runtime().service.pause_job(tenant(), job_id, reason=reason, actor=actor(), now=now())
        audit("job paused", job_id=job_id)
        return JobOut.of(details)

    @app.post("/v1/jobs/<job_id>/resume", summary="Resume a job", responses=_responses(JobOut, 404, 409))
    def resume_job(job_id: JobId) -> JobOut:
        details = get_runtime().service.resume_job(tenant(), job_id, now())
        audit("job resumed", job_id=job_id)
        return JobOut.of(details)

    @app.delete("/v1/jobs/<job_id>", summary="Cancel a job", responses=_responses(JobOut, 404))
    def cancel_job(job_id: JobId) -> JobOut:
        details = get_runtime().service.cancel_job(tenant(), job_id, now())
        audit("job cancelled", job_id=job_id)
        return JobOut.of(details)

    @app.post(
        "/v1/jobs/<job_id>/trigger",
        summary="Run a job now",
        responses=_responses(RunOut, 404, 409, 422, status=HTTPStatus.ACCEPTED),
    )
    def trigger_job(job_id: JobId, idempotency_key: IdempotencyKey = None) -> Response[RunOut]:
        tenant_id = tenant()
        service = get_runtime().service

        def trigger(request: dict[str, Any]) -> dict[str, Any]:
            run = service.trigger_job(tenant_id, job_id, idempotency_key=idempotency_key, now=now())
            audit("job triggered", job_id=job_id, run_id=run.run_id)
            return RunOut.of(run).model_dump(mode="json")

        request = {"tenant_id": tenant_id, "key": idempotency_key, "request": {"job_id": job_id}}
        body = idempotent("trigger_job", trigger)(request=request) if idempotency_key else trigger(request)
        return json_response(HTTPStatus.ACCEPTED, body)

    @app.get(
        "/v1/jobs/<job_id>/runs",
        summary="Run history of a job, newest first",
        responses=_responses(RunPage, 404),
    )
    def list_runs(job_id: JobId, limit: Limit = 50, cursor: Cursor = None) -> RunPage:
        page = get_runtime().service.list_runs(tenant(), job_id, limit=limit, cursor=cursor, now=now())
        return RunPage(items=[RunOut.of(run) for run in page.items], next_cursor=page.next_cursor)

    # --- runs ---------------------------------------------------------------------------------------------
    @app.get(
        "/v1/runs",
        summary="Runs across the tenant, newest first",
        description=TENANT_RUNS_DESCRIPTION,
        responses=_responses(RunPage, 404),
    )
    def list_tenant_runs(
        status: Annotated[
            list[RunStatus] | None, Query(description="Repeatable; status=DEAD is the dead-letter view")
        ] = None,
        job_id: Annotated[str | None, Query(pattern=ID, description="Only this job's runs")] = None,
        since: Annotated[Instant | None, Query(description="scheduled_for at or after (RFC 3339)")] = None,
        until: Annotated[Instant | None, Query(description="scheduled_for before (RFC 3339)")] = None,
        limit: Limit = 50,
        cursor: Cursor = None,
    ) -> RunPage:
        only = RunFilter(
            statuses=frozenset(status) if status else None, job_id=job_id, since=since, until=until
        )
        page = get_runtime().service.list_tenant_runs(tenant(), only, limit=limit, cursor=cursor)
        return RunPage(items=[RunOut.of(run) for run in page.items], next_cursor=page.next_cursor)

    @app.get(
        "/v1/runs/<run_id>",
        summary="A run with all its attempts (and a pool run's last checkpoint)",
        responses=_responses(RunDetailOut, 404),
    )
    def get_run(run_id: RunId) -> RunDetailOut:
        return RunDetailOut.of_detail(get_runtime().service.run_detail(tenant(), run_id, now()))

    @app.post(
        "/v1/runs/<run_id>/retry",
        summary="Re-run a FAILED, DEAD or ABANDONED run",
        responses=_responses(RunOut, 404, 409, status=HTTPStatus.ACCEPTED),
    )
    def retry_run(run_id: RunId) -> Response[RunOut]:
        run = get_runtime().service.retry_run(tenant(), run_id, now())
        audit("run retried", job_id=run.job_id, run_id=run.run_id, attempt=run.attempt)
        return json_response(HTTPStatus.ACCEPTED, RunOut.of(run))

    # --- pools: the tenant's own workers ------------------------------------------------------------------
    @app.post(
        "/v1/runs/<run_id>/cancel",
        summary="Cancel a run: at once if it has not started, else asked through its heartbeat",
        responses=_responses(RunOut, 404, 409),
    )
    def cancel_run(run_id: RunId) -> RunOut:
        try:
            run = get_runtime().pools.cancel(tenant(), run_id)
        except NotFound:
            # A fire still in the queue has no item yet: it is recorded CANCELLED before it arrives.
            run = get_runtime().service.cancel_unrecorded(tenant(), run_id, now())
        audit("run cancelled", job_id=run.job_id, run_id=run.run_id, status=run.status.value)
        return RunOut.of(run)

    @app.post(
        "/v1/pools/<pool>/claim",
        summary="Claim runs of a pool (long poll, up to 20 s)",
        responses=_responses(ClaimOut),
    )
    def claim_runs(pool: PoolPath, request: Annotated[ClaimRequest, Body()]) -> ClaimOut:
        claimed = get_runtime().pools.claim(tenant(), pool, request)
        return ClaimOut(runs=[ClaimedRunOut.of(c.run, c.payload, c.checkpoint) for c in claimed])

    @app.post(
        "/v1/runs/<run_id>/heartbeat",
        summary="A claimed run's heartbeat: the lease renewed, progress and a checkpoint kept",
        responses=_responses(HeartbeatOut, 404, 409),
    )
    def heartbeat(run_id: RunId, request: Annotated[HeartbeatRequest, Body()]) -> HeartbeatOut:
        beat = get_runtime().pools.heartbeat(tenant(), run_id, request)
        return HeartbeatOut(lease_expires_at=beat.lease_expires_at, cancel_requested=beat.cancel_requested)

    @app.post(
        "/v1/runs/<run_id>/complete",
        summary="A claimed run's attempt succeeded",
        responses=_responses(RunOut, 404, 409),
    )
    def complete_run(run_id: RunId, request: Annotated[CompleteRequest, Body()]) -> RunOut:
        return RunOut.of(get_runtime().pools.complete(tenant(), run_id, request))

    @app.post(
        "/v1/runs/<run_id>/fail",
        summary="A claimed run's attempt failed: the retry policy decides what follows",
        responses=_responses(RunOut, 404, 409),
    )
    def fail_run(run_id: RunId, request: Annotated[FailRequest, Body()]) -> RunOut:
        return RunOut.of(get_runtime().pools.fail(tenant(), run_id, request))

    # --- read-only ----------------------------------------------------------------------------------------
    @app.post(
        "/v1/schedule-preview", summary="Next fire times of a schedule", responses=_responses(PreviewResponse)
    )
    def schedule_preview(request: Annotated[PreviewRequest, Body()]) -> PreviewResponse:
        tenant()
        after = request.after or now()
        preview = get_runtime().service.preview(
            request.schedule, after=after, count=request.count, jitter_seconds=request.jitter_seconds
        )
        return PreviewResponse.of(preview, describe_schedule(request.schedule))

    @app.get("/v1/stats", summary="The tenant's health", responses=_responses(StatsOut))
    def stats() -> StatsOut:
        at = now()
        return StatsOut.of(get_runtime().service.stats(tenant(), at), at)

    @app.get(
        HEALTH_PATH, summary="Liveness (no authentication)", responses=_responses(HealthOut, public=True)
    )
    def health() -> HealthOut:
        return HealthOut(status="ok")

    return app


def _version_of(if_match: str | None) -> int | None:
    """The job version an ``If-Match`` header names (an ETag such as ``"3"``)."""
    if if_match is None:
        return None
    text = if_match.strip()
    if not re.fullmatch(IF_MATCH, text):
        raise InvalidInput('If-Match must be a job version such as "3"', field="If-Match")
    return int(text.removeprefix("W/").strip('"'))


__all__ = ["build_app", "logger"]
