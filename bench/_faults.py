"""A fault injector on botocore's event system: fails a chosen fraction of AWS calls by service and
operation, deterministically from a seeded random generator, and counts what it injected.

Kinds of fault:

- ``throttle``: ``ProvisionedThroughputExceededException`` (DynamoDB) or ``ThrottlingException`` (SQS);
- ``internal``: ``InternalServerError`` (DynamoDB) or ``InternalError`` (SQS), HTTP 500;
- ``connection``: ``EndpointConnectionError`` or ``ConnectionClosedError`` (alternately), the request
  never reached the service;
- ``timeout``: ``ReadTimeoutError`` *after* the service applied the request: the write happened, the
  caller cannot know it (the harder half of a read timeout);
- ``partial`` (``SendMessageBatch`` only): some entries of the batch are left out of the request and
  reported in ``Failed``, as SQS does for a partial batch failure;
- ``crash_before`` / ``crash_after``: the calling process dies just before the call, or just after the
  service applied it (``crash``, a ``BaseException`` that no handler catches, is raised).

The first three are raised while the call's parameters are built, before anything is sent, so the caller
sees them as if botocore's own retries had given up; ``timeout`` is raised by the last ``after-call``
handler, after any ``after-call`` bookkeeping (such as the local stack's DynamoDB lock) has run.
"""

from __future__ import annotations

import random
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

KINDS = ("throttle", "internal", "connection", "timeout", "partial", "crash_before", "crash_after")
DYNAMODB_WRITES = frozenset({"PutItem", "UpdateItem", "TransactWriteItems", "BatchWriteItem", "DeleteItem"})
SQS_SENDS = frozenset({"SendMessage", "SendMessageBatch"})
_ERROR_CODES = {
    ("dynamodb", "throttle"): ("ProvisionedThroughputExceededException", 400),
    ("dynamodb", "internal"): ("InternalServerError", 500),
    ("sqs", "throttle"): ("ThrottlingException", 400),
    ("sqs", "internal"): ("InternalError", 500),
}
_CONTEXT_KEY = "tickwork_injected_fault"
_RUN_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}:(?:\d{10,16}|m:[0-9a-f-]+)")


@dataclass(frozen=True)
class FaultRule:
    """Fail ``rate`` of the calls of ``operations`` on ``service``, with a kind drawn from ``kinds``."""

    service: str
    operations: frozenset[str]
    rate: float
    kinds: tuple[str, ...] = ("throttle",)

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"unknown fault kinds: {sorted(unknown)}")
        if not 0 <= self.rate <= 1:
            raise ValueError("rate must be between 0 and 1")


class Stratified:
    """Picks exactly one call in each block of ``1 / rate`` calls, at a position drawn from ``rng``: the
    fraction is exact over any whole number of blocks (no run of bad luck leaves a short scenario with
    no fault at all), and the positions are reproducible from the seed."""

    def __init__(self, rate: float, rng: random.Random):
        self.block = max(1, round(1 / rate)) if rate > 0 else 0
        self.rng = rng
        self.calls = 0
        self.target = -1

    def hit(self) -> bool:
        if not self.block:
            return False
        position = self.calls % self.block
        if position == 0:
            self.target = self.rng.randrange(self.block)
        self.calls += 1
        return position == self.target


class KindCycle:
    """Kinds in a shuffled order, every kind once per cycle, so each one shows up in a short run too."""

    def __init__(self, kinds: tuple[str, ...], rng: random.Random):
        self.kinds = kinds
        self.rng = rng
        self.queue: list[str] = []

    def next(self, allowed: Callable[[str], bool]) -> str | None:
        for _ in range(2 * len(self.kinds)):
            if not self.queue:
                self.queue = list(self.kinds)
                self.rng.shuffle(self.queue)
            kind = self.queue.pop()
            if allowed(kind):
                return kind
        return None


@dataclass(frozen=True)
class Injection:
    """One injected fault: what, where, when (the caller's clock) and the run ids the call named."""

    service: str
    operation: str
    kind: str
    at: datetime | None
    run_ids: frozenset[str]


@dataclass
class FaultInjector:
    rules: list[FaultRule]
    seed: int = 0
    clock: Callable[[], datetime] | None = None
    enabled: bool = True
    crash: type[BaseException] = SystemExit
    injections: list[Injection] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)  # noqa: S311 - fault choice, not security
        self._lock = threading.Lock()
        self._closed_alternate = False
        self._exceptions: dict[str, Any] = {}
        self._pickers = [Stratified(rule.rate, self._rng) for rule in self.rules]
        self._kinds = [KindCycle(rule.kinds, self._rng) for rule in self.rules]

    @property
    def counts(self) -> Counter[str]:
        """Injected faults by kind."""
        return Counter(injection.kind for injection in self.injections)

    def counts_by_call(self) -> Counter[tuple[str, str, str]]:
        return Counter((i.service, i.operation, i.kind) for i in self.injections)

    def faulted_run_ids(self) -> set[str]:
        return {run_id for injection in self.injections for run_id in injection.run_ids}

    def install(self, client: Any) -> None:
        """Hook this injector into one boto3 client (DynamoDB or SQS)."""
        service = client.meta.service_model.service_id.hyphenize()
        events = client.meta.events
        self._exceptions[service] = client.exceptions
        events.register_first(f"before-parameter-build.{service}", self._before)
        events.register_last(f"after-call.{service}", self._after)

    def uninstall(self, client: Any) -> None:
        service = client.meta.service_model.service_id.hyphenize()
        client.meta.events.unregister(f"before-parameter-build.{service}", self._before)
        client.meta.events.unregister(f"after-call.{service}", self._after)

    # --- handlers -----------------------------------------------------------------------------------------
    def _choose(self, service: str, operation: str) -> str | None:
        with self._lock:
            if not self.enabled:
                return None
            for rule, picker, kinds in zip(self.rules, self._pickers, self._kinds, strict=True):
                if rule.service == service and operation in rule.operations and picker.hit():
                    return kinds.next(lambda kind: kind != "partial" or operation == "SendMessageBatch")
            return None

    def _record(self, service: str, operation: str, kind: str, params: Any) -> None:
        injection = Injection(
            service,
            operation,
            kind,
            self.clock() if self.clock else None,
            frozenset(_RUN_ID.findall(str(params))),
        )
        with self._lock:
            self.injections.append(injection)

    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        service = model.service_model.service_id.hyphenize()
        operation = model.name
        kind = self._choose(service, operation)
        if kind is None:
            return
        if kind == "partial":
            entries = params.get("Entries", [])
            if len(entries) < 2:
                kind = "timeout" if self._rng.random() < 0.5 else "connection"
            else:
                dropped = [entry for index, entry in enumerate(entries) if index % 2 == 1]
                params["Entries"] = [entry for index, entry in enumerate(entries) if index % 2 == 0]
                context[_CONTEXT_KEY] = ("partial", [entry["Id"] for entry in dropped])
                self._record(service, operation, kind, dropped)
                return
        self._record(service, operation, kind, params)
        if kind in ("timeout", "crash_after"):
            context[_CONTEXT_KEY] = (kind, [])
            return
        if kind == "crash_before":
            raise self.crash(f"injected: died before {operation}")
        if kind == "connection":
            with self._lock:
                self._closed_alternate = not self._closed_alternate
                closed = self._closed_alternate
            url = f"https://{service}.injected.invalid"
            raise (
                ConnectionClosedError(endpoint_url=url)
                if closed
                else EndpointConnectionError(endpoint_url=url)
            )
        code, status = _ERROR_CODES[(service, kind)]
        response: dict[str, Any] = {
            "Error": {"Code": code, "Message": "injected fault"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        # The modelled class where the service has one, as botocore raises it
        raise self._exceptions[service].from_code(code)(response, operation)

    def _after(self, parsed: dict[str, Any], context: dict[str, Any], model: Any, **_: Any) -> None:
        fault = context.pop(_CONTEXT_KEY, None)
        if fault is None:
            return
        kind, dropped = fault
        if kind == "partial":
            parsed.setdefault("Failed", []).extend(
                {"Id": entry_id, "SenderFault": False, "Code": "InternalError", "Message": "injected"}
                for entry_id in dropped
            )
            return
        if kind == "crash_after":
            raise self.crash(f"injected: died after {model.name}")
        service = model.service_model.service_id.hyphenize()
        raise ReadTimeoutError(endpoint_url=f"https://{service}.injected.invalid")


def install_all(injector: FaultInjector, clients: Iterable[Any]) -> None:
    for client in clients:
        injector.install(client)
