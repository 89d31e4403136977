"""The reading operations through a running ``hrag serve`` (the CLI with ``HRAG_SERVER_URL`` set).

No database connection, no model, no torch: this module imports httpx,
hrag's errors and the shapes only, so a question costs a process start and
one HTTP round trip.  The server answers with the shapes the in-process
:class:`~hrag_pg.operations.reading.Reader` returns, so the CLI prints the
same whichever way it asked.  A server that cannot be reached is
:class:`~hrag_pg.errors.ServerUnavailable` (exit 3); an error it answers
carries the server's message: 400/422 as ValueError (exit 2, a usage
error as locally), anything else as HragError (exit 1).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import HragError, InvalidArgument, NotFound, ServerUnavailable, install_extra
from ..models import OutlineEntry
from .shapes import Answer, Deleted, NodeView, SourceEntry

if TYPE_CHECKING:  # pragma: no cover
    from .question import Question

#: The server to ask instead of the database, e.g. http://127.0.0.1:8740 (unset or empty: none).
ENV_SERVER_URL = "HRAG_SERVER_URL"
#: The server's write token, sent when set (``hrag delete`` through the server needs it).
ENV_TOKEN = "HRAG_SERVER_TOKEN"
#: Seconds to wait for an answer (the first question after a start may load the model).
TIMEOUT = 120.0


def server_url() -> str | None:
    """``HRAG_SERVER_URL`` without a trailing slash, or None when unset or empty."""
    value = os.environ.get(ENV_SERVER_URL, "").strip().rstrip("/")
    return value or None


def call(method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None) -> Any:
    """One request to the server; its JSON answer, or the server's error message raised."""
    try:
        import httpx
    except ImportError:
        raise HragError(f"{ENV_SERVER_URL} is set, but httpx is not installed: {install_extra('serve')}, "
                        f"or unset {ENV_SERVER_URL} to use the database directly") from None

    url = server_url()
    if url is None:
        raise HragError(f"{ENV_SERVER_URL} is not set")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{ENV_SERVER_URL} must be an http:// or https:// URL, got {url!r}")
    query = {k: v for k, v in (params or {}).items() if v is not None}
    token = os.environ.get(ENV_TOKEN, "")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.request(method, url + path, params=query, json=body, headers=headers, timeout=TIMEOUT)
    except httpx.TimeoutException:
        raise HragError(f"the hrag server at {url} ({ENV_SERVER_URL}) did not answer within {TIMEOUT:.0f} s") \
            from None
    except httpx.TransportError as exc:
        reason = str(exc).strip() or type(exc).__name__
        raise ServerUnavailable(f"cannot reach the hrag server at {url} ({ENV_SERVER_URL}): {reason}; start it "
                                f"with `hrag serve`, or unset {ENV_SERVER_URL} to use the database directly") from None
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if response.is_success:
        return payload
    message = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(message, str) or not message:
        message = f"the hrag server at {url} answered {response.status_code} {response.reason_phrase} to {path}"
    if response.status_code in (400, 422):
        raise InvalidArgument(message)
    if response.status_code == 404:
        raise NotFound(message)
    raise HragError(message)


class RemoteReader:
    """:class:`~hrag_pg.operations.reading.Reader`'s operations, answered by the server at ``HRAG_SERVER_URL``."""

    def retrieve(self, question: Question) -> Answer:
        body = {"question": question.text, "mode": question.mode, "max_tokens": question.max_tokens,
                "collection": question.collection, "filter": question.filter, **question.settings}
        return Answer.model_validate(call("POST", "/retrieve", body={k: v for k, v in body.items() if v is not None}))

    def node(self, node_id: str) -> NodeView:
        return NodeView.model_validate(call("GET", f"/nodes/{node_id}"))

    def outline(self, collection: str | None = None, source: str | None = None,
                max_depth: int = 3) -> list[OutlineEntry]:
        answer = call("GET", "/outline", params={"collection": collection, "source": source, "max_depth": max_depth})
        return [OutlineEntry.model_validate(e) for e in answer]

    def sources(self, collection: str | None = None) -> list[SourceEntry]:
        return [SourceEntry.model_validate(r) for r in call("GET", "/sources", params={"collection": collection})]

    def delete(self, source: str, collection: str = "default") -> Deleted:
        return Deleted.model_validate(call("DELETE", "/documents", params={"source": source, "collection": collection}))
