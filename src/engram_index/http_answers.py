"""What a remote service's HTTP answer says about a failure: its own message and its Retry-After.

Shared by the clients of embedding providers (`embed/remote.py`) and of LLM and rerank endpoints
(`llm/http.py`), which read failed answers the same way.
"""

from __future__ import annotations

import httpx


def excerpt(response: httpx.Response) -> str:
    """The service's own error message if it gave one (`error`, `error.message`, `message` or `detail`),
    else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error", body.get("message", body.get("detail")))
        if isinstance(error, dict):
            error = error.get("message")
        if isinstance(error, str):
            return error[:200]
    return response.text[:200]


def retry_after(response: httpx.Response | None) -> float | None:
    """The seconds a Retry-After header asks for, if the answer has a usable one."""
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
