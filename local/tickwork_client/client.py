"""A typed client of the tickwork HTTP API (v1), on the standard library's HTTP.

Answers are the API's own response models (``tickwork.api.schemas``), so the client and the API read the same
fields the same way.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.message import Message
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python
from tickwork.api.schemas import (
    ClaimOut,
    HealthOut,
    HeartbeatOut,
    JobOut,
    JobPage,
    PreviewResponse,
    RunDetailOut,
    RunOut,
    RunPage,
    StatsOut,
)
from tickwork.domain.models import STORED, JobPatch, JobSpec, JobStatus, RunStatus
from tickwork.domain.pools import MAX_CLAIM_WAIT_SECONDS

from tickwork_client.errors import ClientError, UnexpectedResponse, Unreachable, api_error
from tickwork_client.retry import RetryPolicy, parse_retry_after, retryable_status

DEFAULT_TIMEOUT_SECONDS = 30.0
JSON = "application/json"
# Every way a request can fail without an HTTP answer.
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)

Model = TypeVar("Model", bound=BaseModel)
Body = BaseModel | Mapping[str, Any]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Message
    body: bytes


@dataclass(frozen=True)
class Failure:
    """One send that did not succeed: the error, whether to send again, and the wait the server asked."""

    error: ClientError
    retry: bool
    wait: float | None = None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Never follow redirects: urllib would send the Authorization header wherever they point."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


def _user_agent() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"tickwork-client/{version('tickwork')}"
    except PackageNotFoundError:
        return "tickwork-client"


class Client:
    """The tickwork API of one tenant.

    ``base_url`` is where the API's routes start, a stage path included (``https://…/prod``); a ``/v1`` on
    its end is dropped, as every route adds it.

    Requests refused for now (429, 5xx) or left without an answer are sent again under ``retries`` (see
    :class:`RetryPolicy` and :func:`tickwork_client.retry.retryable_status`). ``create_job`` and
    ``trigger_job`` carry an ``Idempotency-Key``, the same on every retry, so a retry never makes a second
    job or run. ``sleep``, ``clock`` (epoch seconds) and ``draw`` (uniform in [0, 1), for the jitter) are the
    retry loop's, for tests to replace.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retries: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, so one shared default is safe
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        draw: Callable[[], float] = random.random,
    ):
        if urllib.parse.urlsplit(base_url).scheme not in ("http", "https"):
            raise ValueError(f"base_url must be an http:// or https:// URL, not {base_url!r}")
        # Every path starts with the API's /v1: a base URL copied with it (``http://127.0.0.1:8000/v1``) is
        # read without it, rather than sending /v1/v1/... to no route.
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self._token = token
        self.timeout = timeout
        self.retries = retries
        self._sleep = sleep
        self._clock = clock
        self._draw = draw
        self._opener = urllib.request.build_opener(_NoRedirects())
        self._user_agent = _user_agent()

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"  # never the token

    # --- jobs -----------------------------------------------------------------------------------------------
    def create_job(self, job: JobSpec | Mapping[str, Any], *, idempotency_key: str | None = None) -> JobOut:
        """Create a job. Without ``idempotency_key`` the call makes one, so its own retries are safe; pass
        yours to make retries of the whole call (after a crash, say) safe too."""
        key = idempotency_key or str(uuid.uuid4())
        answer = self._request("POST", _path("jobs"), body=job, headers={"Idempotency-Key": key})
        return _read(JobOut, answer)

    def get_job(self, job_id: str) -> JobOut:
        return _read(JobOut, self._request("GET", _path("jobs", job_id)))

    def update_job(
        self, job_id: str, patch: JobPatch | Mapping[str, Any], *, version: int | None = None
    ) -> JobOut:
        """Change the fields ``patch`` gives (a JSON merge patch: ``None`` resets a field to its default).
        With ``version``, the change applies only if the job is still at that version (``Conflict`` if not).
        """
        headers = {"If-Match": f'"{version}"'} if version is not None else {}
        # A patch repeated after it applied leaves the job as it was, unless it expects a version: the
        # version has moved on, and the repeat would answer a misleading Conflict.
        expects_version = version is not None or _given(patch, "version")
        answer = self._request(
            "PATCH", _path("jobs", job_id), body=patch, headers=headers, repeatable=not expects_version
        )
        return _read(JobOut, answer)

    def list_jobs(
        self, *, status: JobStatus | str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> JobPage:
        """One page of the tenant's jobs, newest first; pass its ``next_cursor`` back for the next."""
        query = {"status": status, "limit": limit, "cursor": cursor}
        return _read(JobPage, self._request("GET", _path("jobs"), query=query))

    def iter_jobs(
        self, *, status: JobStatus | str | None = None, page_size: int | None = None
    ) -> Iterator[JobOut]:
        """Every job, newest first, one page at a time."""
        cursor: str | None = None
        while True:
            page = self.list_jobs(status=status, limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def pause_job(self, job_id: str, *, reason: str | None = None) -> JobOut:
        body = {"reason": reason} if reason is not None else None
        return _read(JobOut, self._request("POST", _path("jobs", job_id, "pause"), body=body))

    def resume_job(self, job_id: str) -> JobOut:
        return _read(JobOut, self._request("POST", _path("jobs", job_id, "resume")))

    def cancel_job(self, job_id: str) -> JobOut:
        return _read(JobOut, self._request("DELETE", _path("jobs", job_id)))

    def trigger_job(self, job_id: str, *, idempotency_key: str | None = None) -> RunOut:
        """Run the job now. The same ``idempotency_key`` always gives the same run; without one, the call
        makes one for its own retries."""
        key = idempotency_key or str(uuid.uuid4())
        answer = self._request("POST", _path("jobs", job_id, "trigger"), headers={"Idempotency-Key": key})
        return _read(RunOut, answer)

    # --- runs -----------------------------------------------------------------------------------------------
    def list_runs(self, job_id: str, *, limit: int | None = None, cursor: str | None = None) -> RunPage:
        """One page of the job's runs, newest first."""
        query = {"limit": limit, "cursor": cursor}
        return _read(RunPage, self._request("GET", _path("jobs", job_id, "runs"), query=query))

    def iter_runs(self, job_id: str, *, page_size: int | None = None) -> Iterator[RunOut]:
        """Every run of the job, newest first, one page at a time."""
        cursor: str | None = None
        while True:
            page = self.list_runs(job_id, limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def list_all_runs(
        self,
        *,
        status: RunStatus | str | Sequence[RunStatus | str] | None = None,
        job_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RunPage:
        """One page of the tenant's stored runs, newest first (``status="DEAD"``: the dead letters). A page
        may hold fewer than ``limit`` runs and still have a ``next_cursor``."""
        statuses = [status] if isinstance(status, str) else list(status or [])
        query = {
            "status": statuses or None,
            "job_id": job_id,
            "since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None,
            "limit": limit,
            "cursor": cursor,
        }
        return _read(RunPage, self._request("GET", "/v1/runs", query=query))

    def iter_all_runs(
        self,
        *,
        status: RunStatus | str | Sequence[RunStatus | str] | None = None,
        job_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        page_size: int | None = None,
    ) -> Iterator[RunOut]:
        """Every stored run of the tenant that matches, newest first, one page at a time."""
        cursor: str | None = None
        while True:
            page = self.list_all_runs(
                status=status, job_id=job_id, since=since, until=until, limit=page_size, cursor=cursor
            )
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def get_run(self, run_id: str) -> RunDetailOut:
        """The run with all its attempts, and a pool run's last checkpoint."""
        return _read(RunDetailOut, self._request("GET", _path("runs", run_id)))

    def retry_run(self, run_id: str) -> RunOut:
        """A new attempt of a FAILED, DEAD or ABANDONED run. Not repeated after a 5xx or a lost answer: the
        first may have started an attempt, and a second would start another."""
        return _read(RunOut, self._request("POST", _path("runs", run_id, "retry"), repeatable=False))

    def cancel_run(self, run_id: str) -> RunOut:
        """Ask the run to stop. A queued run is cancelled at once; a running one ends CANCELLED once its
        worker sees ``cancel_requested`` at its next heartbeat and stops. It is not retried."""
        return _read(RunOut, self._request("POST", _path("runs", run_id, "cancel")))

    # --- pools: the routes of a pool's worker (``tickwork_client.worker.PoolWorker`` drives them) -----------
    def claim(
        self, pool: str, *, worker_id: str, max_runs: int = 1, wait_seconds: int = MAX_CLAIM_WAIT_SECONDS
    ) -> ClaimOut:
        """Up to ``max_runs`` runs of ``pool`` for this worker, each with its lease token. A long poll: the
        API answers when a run comes or after ``wait_seconds``, with no runs then. Its timeout is the wait
        plus the client's ``timeout``, so a wait that ends empty is never mistaken for a lost answer.

        Sent again after a 5xx or a lost answer: runs leased by an answer that never arrived lapse after their
        heartbeat timeout whether or not the claim is repeated, and the repeat takes other runs."""
        body = {"worker_id": worker_id, "max_runs": max_runs, "wait_seconds": wait_seconds}
        answer = self._request(
            "POST", _path("pools", pool, "claim"), body=body, timeout=wait_seconds + self.timeout
        )
        return _read(ClaimOut, answer)

    def heartbeat(
        self,
        run_id: str,
        *,
        lease_token: str,
        progress: float | None = None,
        stage: str | None = None,
        checkpoint: Any = None,
    ) -> HeartbeatOut:
        """Keep the lease of a claimed run: it is extended by one heartbeat timeout. ``progress`` (0 to 1),
        ``stage`` and ``checkpoint`` (any JSON) are saved when given. A field left ``None`` is not sent, so
        the run keeps its last value: a heartbeat never erases a checkpoint. The answer says whether the run
        was asked to stop (``cancel_requested``). :class:`LeaseLost` when the token is no longer the run's."""
        fields = {"progress": progress, "stage": stage, "checkpoint": checkpoint}
        body = {"lease_token": lease_token, **_given_fields(fields)}
        return _read(HeartbeatOut, self._request("POST", _path("runs", run_id, "heartbeat"), body=body))

    def complete(self, run_id: str, *, lease_token: str, output: Any = None) -> RunOut:
        """The attempt succeeded, with ``output`` (any JSON, not sent when ``None``). :class:`LeaseLost` when
        the token is no longer the run's: another attempt may be under way, and nothing changed.

        Sent again after a 5xx or a lost answer, as losing a completion would have the work done again. A
        repeat whose first send did land is answered ``LeaseLost`` (the run has ended); ``get_run`` tells."""
        body = {"lease_token": lease_token, **_given_fields({"output": output})}
        return _read(RunOut, self._request("POST", _path("runs", run_id, "complete"), body=body))

    def fail(
        self, run_id: str, *, lease_token: str, code: str, message: str = "", retryable: bool = True
    ) -> RunOut:
        """The attempt failed with the error ``code`` (``[A-Za-z0-9._-]``, up to 64 characters) and
        ``message``. The job's retry policy decides what follows; ``retryable=False`` ends the run FAILED.
        :class:`LeaseLost` when the token is no longer the run's (sent again like :meth:`complete`)."""
        body = {
            "lease_token": lease_token,
            "error": {"code": code, "message": message},
            "retryable": retryable,
        }
        return _read(RunOut, self._request("POST", _path("runs", run_id, "fail"), body=body))

    # --- read-only ------------------------------------------------------------------------------------------
    def preview(
        self,
        schedule: Body,
        *,
        after: datetime | str | None = None,
        count: int | None = None,
        jitter_seconds: int | None = None,
    ) -> PreviewResponse:
        """The schedule's next fires after ``after`` (default now, by the API's clock); creates nothing."""
        if isinstance(after, datetime):
            if after.tzinfo is None:
                raise ValueError("after must carry a UTC offset (RFC 3339)")
            after = after.isoformat()
        fields = {"after": after, "count": count, "jitter_seconds": jitter_seconds}
        body = {"schedule": _json_of(schedule), **{k: v for k, v in fields.items() if v is not None}}
        return _read(PreviewResponse, self._request("POST", _path("schedule-preview"), body=body))

    def stats(self) -> StatsOut:
        return _read(StatsOut, self._request("GET", _path("stats")))

    def health(self) -> HealthOut:
        return _read(HealthOut, self._request("GET", _path("health")))

    # --- HTTP -----------------------------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Body | None = None,
        query: Mapping[str, object] | None = None,
        headers: Mapping[str, str] | None = None,
        repeatable: bool = True,
        timeout: float | None = None,
    ) -> Answer:
        """Send until a 2xx, an error not worth retrying, or the retry policy says stop; raise the last
        error. ``repeatable``: sending the request twice has the effect of sending it once. ``timeout``: this
        request's, in place of the client's."""
        url = self._url(path, query)
        data = json.dumps(_json_of(body), allow_nan=False).encode() if body is not None else None
        all_headers = {
            "Accept": JSON,
            "User-Agent": self._user_agent,
            "Authorization": f"Bearer {self._token}",
            **({"Content-Type": JSON} if data is not None else {}),
            **(headers or {}),
        }
        deadline = self._clock() + self.retries.max_total_wait
        attempt = 0
        while True:
            attempt += 1
            outcome = self._attempt(
                method,
                url,
                data,
                all_headers,
                repeatable=repeatable,
                timeout=self.timeout if timeout is None else timeout,
            )
            if isinstance(outcome, Answer):
                return outcome
            outcome.error.attempts = attempt
            if not outcome.retry or attempt >= self.retries.max_attempts:
                raise outcome.error
            delay = outcome.wait if outcome.wait is not None else self.retries.backoff(attempt, self._draw())
            if self._clock() + delay > deadline:
                raise outcome.error
            self._sleep(delay)

    def _attempt(
        self,
        method: str,
        url: str,
        data: bytes | None,
        headers: Mapping[str, str],
        *,
        repeatable: bool,
        timeout: float,
    ) -> Answer | Failure:
        """One send: the 2xx answer, or what went wrong."""
        request = urllib.request.Request(url, data=data, headers=dict(headers), method=method)  # noqa: S310 - http(s) checked
        try:
            answer = self._exchange(request, timeout)
        except TRANSPORT_ERRORS as error:
            unreachable = Unreachable(f"{method} {url}: {_reason(error, timeout)}")
            unreachable.__cause__ = error
            # A refused connection sent nothing, so any request may go again.
            return Failure(unreachable, retry=repeatable or _connection_refused(error))
        if 200 <= answer.status < 300:
            return answer
        wait = parse_retry_after(answer.headers.get("Retry-After"), now=self._clock())
        refusal = api_error(answer.status, answer.body, answer.headers, retry_after=wait)
        return Failure(refusal, retry=retryable_status(answer.status, repeatable=repeatable), wait=wait)

    def _exchange(self, request: urllib.request.Request, timeout: float) -> Answer:
        try:
            with self._opener.open(request, timeout=timeout) as response:
                return Answer(response.status, response.headers, response.read())
        except urllib.error.HTTPError as error:  # an answer, with a status other than 2xx
            with error:
                return Answer(error.code, error.headers, error.read())

    def _url(self, path: str, query: Mapping[str, object] | None) -> str:
        # A list is a repeated parameter (status=FAILED&status=DEAD).
        params = {
            name: [str(item) for item in value] if isinstance(value, list) else str(value)
            for name, value in (query or {}).items()
            if value is not None
        }
        return self.base_url + path + ("?" + urllib.parse.urlencode(params, doseq=True) if params else "")


def _path(*segments: str) -> str:
    # Ids travel in the path: quoting keeps a "/" or "?" in one from changing the route (":" is legal).
    return "/v1/" + "/".join(urllib.parse.quote(segment, safe=":") for segment in segments)


def _json_of(value: Body) -> Any:
    """A model as the fields it was given (the API fills in the same defaults; a patch must carry only its
    changes); a mapping as it is, for the API to check."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    return to_jsonable_python(value)


def _given_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields that have a value: ``None`` means "not given", never "set to null"."""
    return {name: value for name, value in fields.items() if value is not None}


def _given(body: Body, field: str) -> bool:
    if isinstance(body, BaseModel):
        return field in body.model_fields_set
    return body.get(field) is not None


def _read(model: type[Model], answer: Answer) -> Model:
    try:
        # Read as stored: a job accepted under rules tightened since still reads back.
        return model.model_validate_json(answer.body, context={STORED: True})
    except ValidationError as error:
        raise UnexpectedResponse(
            f"HTTP {answer.status}: the answer is not a {model.__name__}: {error.error_count()} problem(s),"
            f" first {error.errors()[0]['loc']}: {error.errors()[0]['msg']}"
        ) from error


def _connection_refused(error: BaseException) -> bool:
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    return isinstance(reason, ConnectionRefusedError)


def _reason(error: BaseException, timeout: float) -> str:
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(reason, TimeoutError):
        return f"no answer within {timeout:g} s"
    return f"cannot reach the API: {str(reason) or type(reason).__name__}"
