"""How the fake space host calls registered services: one background thread posting notifications
in the order they were made, so a write never waits on (or deadlocks with) the receiver."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Delivery:
    """What became of one notification: the receiver's status, or why it never got one."""

    endpoint: str
    nsid: str
    body: dict[str, Any]
    status: int | None
    error: str | None = None


class Notifier:
    """Posts `{endpoint}/xrpc/{nsid}` with a bearer token, in order, on its own thread."""

    def __init__(self, timeout: float = 5.0) -> None:
        self.deliveries: list[Delivery] = []
        self._queue: queue.Queue[tuple[str, str, dict[str, Any], str] | None] = queue.Queue()
        self._timeout = timeout
        self._thread = threading.Thread(target=self._run, name="spacenet-notifier", daemon=True)

    def start(self) -> None:
        """Start posting."""
        self._thread.start()

    def send(self, endpoint: str, nsid: str, body: dict[str, Any], token: str) -> None:
        """Queue one notification."""
        self._queue.put((endpoint, nsid, body, token))

    def record(self, delivery: Delivery) -> None:
        """Note a notification that was not sent (a lost one)."""
        self.deliveries.append(delivery)

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every queued notification was posted; TimeoutError when that takes too long."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._queue.all_tasks_done.wait(remaining):
                    raise TimeoutError("notifications are still being delivered")

    def close(self) -> None:
        """Deliver what is queued, then stop the thread."""
        if not self._thread.is_alive():
            return
        self._queue.put(None)
        self._thread.join(self._timeout * 2)

    def _run(self) -> None:
        with httpx.Client(timeout=self._timeout) as client:
            while True:
                item = self._queue.get()
                try:
                    if item is None:
                        return
                    endpoint, nsid, body, token = item
                    try:
                        response = client.post(f"{endpoint.rstrip('/')}/xrpc/{nsid}", json=body,
                                                headers={"authorization": f"Bearer {token}"})
                        self.deliveries.append(Delivery(endpoint, nsid, body, response.status_code))
                    except httpx.HTTPError as exc:
                        # A receiver that is down misses the notification, as with a real host.
                        self.deliveries.append(Delivery(endpoint, nsid, body, None, type(exc).__name__))
                finally:
                    self._queue.task_done()
