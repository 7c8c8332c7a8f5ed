"""The order the local stack's pollers serve the run queues in.

On AWS each priority's queue has event source mappings of its own, so a backlog in one never holds another's
runs. Here a few pollers serve the three queues, so each receive goes first to the queue whose longest-waiting
run comes first in the priority order (its time plus its priority's offset, :mod:`tickwork.domain.priority`):
under a backlog higher priorities start first, and no run waits more than the bound longer than it would
without priorities. With nothing visible anywhere, a poller long-polls the queue it watches when idle, and the
pollers spread over the three queues so each has one waiting on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from tickwork.domain.priority import AGING_BOUND, Priority, order_key

from tickwork_local import moto_sqs

# Which queue each poller long-polls when idle, by poller: normal runs first (the most of them).
IDLE_ROTATION: tuple[Priority, ...] = ("normal", "high", "low")


class ServeOrder:
    """For one poller: the run queues to try, in order, for its next receive (the last one long-polled)."""

    def __init__(self, queue_urls: Mapping[Priority, str], *, poller: int, bound: timedelta = AGING_BOUND):
        self.queue_urls = dict(queue_urls)
        watched = [priority for priority in IDLE_ROTATION if priority in self.queue_urls]
        self.idle = self.queue_urls[watched[poller % len(watched)]]
        self.bound = bound

    def __call__(self) -> list[str]:
        waiting: list[tuple[float, str]] = []
        for priority, url in self.queue_urls.items():
            since = moto_sqs.oldest_visible_ms(url.rstrip("/").rsplit("/", 1)[-1])
            if since is not None:
                waiting.append((order_key(priority, int(since), self.bound), url))
        ordered = [url for _, url in sorted(waiting)]
        return ordered if ordered else [self.idle]


__all__ = ["IDLE_ROTATION", "ServeOrder"]
