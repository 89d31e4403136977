"""The HTTP API: FastAPI, JSON in and out, OpenAPI docs at ``/docs``, the MCP tools at ``/mcp``, the
inspector page at ``/`` (``/inspector/``).

Reads are open; writes (``POST``/``DELETE /documents``) need
``Authorization: Bearer <HRAG_SERVER_TOKEN>``, and with no token configured
they are refused (403), so a server bound to loopback (the default) shares
its documents with local programs and changes nothing unless told how.
Errors are ``{"error": "<the message the CLI prints>"}`` with a 4xx status
(400 bad value, 401/403 token, 404 unknown collection/node/source, 409 model
mismatch, 413 body too large, 422 malformed body), 503 when the database
is unreachable, 500 with one line for a bug.
"""

from __future__ import annotations

import contextlib
import hmac
import inspect
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__, defaults
from ..api import AsyncHRAG
from ..argument_limits import MAX_CONTEXT_TOKENS
from ..errors import (
    ConfigurationError,
    ConnectionLost,
    EmbeddingError,
    HragError,
    ModelMismatchError,
    NotFound,
    QueryCancelled,
)
from ..models import IngestResult, OutlineEntry
from ..operations.question import Question
from ..operations.shapes import Deleted, NodeView, SourceEntry
from . import DEFAULT_HOST, DEFAULT_MAX_BODY_BYTES, ENV_TOKEN
from .service import Service

logger = logging.getLogger("hrag_pg.server")

#: The inspector page (docs/inspector.md): plain HTML, CSS and JavaScript shipped in the package, no build step.
INSPECTOR = Path(__file__).resolve().parent / "inspector"

#: What opens the facade when the server starts (tests inject one with a fake embedder).
FacadeFactory = Callable[[], "AsyncHRAG | Awaitable[AsyncHRAG]"]


def one_line(message: object) -> str:
    return " ".join(str(message).split("\n")).strip()


def status_of(exc: Exception) -> int:
    """The HTTP status of a failure: what the caller can fix is 4xx, a database that is away 503."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, ValueError):  # InvalidArgument included: a value out of range
        return 400
    if isinstance(exc, ModelMismatchError):
        return 409
    if isinstance(exc, (ConnectionLost, QueryCancelled, ConfigurationError, EmbeddingError)):
        return 503
    if isinstance(exc, HragError):
        return 400
    return 500


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": one_line(message)}, status_code=status, headers=headers)


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413 before any endpoint reads it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = error_response(413, f"the request body is over the server's limit of {self.limit:,} bytes "
                                        "(hrag serve --max-body-mb)")
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await too_large(scope, receive, send)
            return
        # Without a length (chunked), read the body here, counting, and hand it on whole.
        chunks: list[Message] = []
        size = 0
        more = scope["method"] not in ("GET", "HEAD", "OPTIONS", "DELETE") or length is not None
        while more:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.limit:
                await too_large(scope, receive, send)
                return
            more = message.get("more_body", False)

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)


class JsonErrors:
    """Every error the server answers is JSON, ``{"error": "..."}``: also those written below FastAPI's handlers
    (the MCP transport's plain-text "Invalid Host header", 421, for a foreign Host)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        body = b""

        async def send_json_errors(message: Message) -> None:
            nonlocal held, body
            if message["type"] == "http.response.start":
                kind = dict(message.get("headers", [])).get(b"content-type", b"")
                if message["status"] >= 400 and not kind.startswith(b"application/json"):
                    held = message  # (its body follows; rewritten once it is whole)
                    return
            elif held is not None and message["type"] == "http.response.body":
                body += message.get("body", b"")
                if message.get("more_body", False):
                    return
                text = body.decode("utf-8", "replace").strip() or f"HTTP {held['status']}"
                await error_response(held["status"], text)(scope, receive, send)
                return
            await send(message)

        await self.app(scope, receive, send_json_errors)


# ------------------------------------------------------------------ bodies


class _PlainJSON(JSONResponse):
    """A payload that is already plain JSON data (the CLI's own objects), written as it is.

    FastAPI would otherwise walk every result through its encoder again: a
    few milliseconds per answer of a couple of thousand tokens.
    """

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":"), default=str).encode()


class RetrieveRequest(BaseModel):
    """A question and how to retrieve (the settings of ``hrag_pg.settings`` by their flat names)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"question": "How do I rotate the keys?", "collection": "manuals", "max_tokens": 2000}]})

    question: str = Field(description="The question (at most 10,000 characters).")
    mode: Literal["parent-child", "auto-merge", "auto"] | None = Field(
        None, description="Default: auto, the budget mode (as `hrag query`).")
    max_tokens: int | None = Field(None, description=f"Token budget of the context (1 to {MAX_CONTEXT_TOKENS}; "
                                                     f"auto's default {defaults.MAX_TOKENS}, the other modes none).")
    collection: str | None = Field(None, description="Search only this collection.")
    filter: dict[str, Any] | None = Field(None, description="Metadata the documents must contain.")
    top_k: int | None = Field(None, description="Hits: children (parent-child), leaves (auto-merge), "
                                                "candidates (auto).")
    top_k_children: int | None = Field(None, description="parent-child: children to match (same as top_k).")
    max_parents: int | None = Field(None, description="parent-child: parents to return.")
    min_score: float | None = Field(None, description="parent-child: leave out children scoring under this.")
    merge_threshold: float | None = Field(None, description="auto-merge: merge once this share of children hit.")
    max_hit_share: float | None = Field(None, description="auto-merge: cap hits at this share of the collection.")
    lexical_weight: float | None = Field(None, description="Weight of lexical overlap, in [0, 1].")
    candidates: int | None = Field(None, description="Vector candidates the hybrid score rescores.")
    min_relative_score: float | None = Field(None, description="Drop hits under this share of the best score.")


class IngestRequest(BaseModel):
    """One document as text: ``HRAG.ingest_text`` (re-ingesting a source replaces it atomically)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"text": "# Keys\n\nRotate the keys every 90 days.", "source": "keys.md", "collection": "manuals"}]})

    text: str = Field(description="The document's text.")
    source: str = Field(description="Its source name, unique in the collection (re-ingesting replaces it).")
    collection: str = Field("default", description="The collection to write into.")
    metadata: dict[str, Any] | None = Field(None, description="A JSON object stored on the document.")
    format: Literal["markdown", "text", "html", "rst"] = Field("markdown", description="How to parse the text.")
    strategy: str | None = Field(None, description="Parent strategy: headings, clauses, pages, code or window.")


_SCOPE = ("question", "mode", "max_tokens", "collection", "filter")


def question_of(body: RetrieveRequest) -> Question:
    """The question a request asks, its mode's settings by their flat names (checked by ``Question.plan``)."""
    given = body.model_dump(exclude_unset=True)
    settings = {k: v for k, v in given.items() if k not in _SCOPE and v is not None}
    return Question(body.question, mode=body.mode, max_tokens=body.max_tokens, collection=body.collection,
                    filter=body.filter, settings=settings)


# ------------------------------------------------------------------ the app


def create_app(open_facade: FacadeFactory, *, token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               host: str = DEFAULT_HOST, mcp: bool = True, warm_up: bool = True) -> FastAPI:
    """The HTTP app.  ``open_facade()`` is called when the server starts (the lifespan), and the
    facade it returns is closed when it stops; ``token`` defaults to ``HRAG_SERVER_TOKEN``."""
    from .mcp import build_mcp

    write_token = token if token is not None else os.environ.get(ENV_TOKEN, "")
    mcp_server = build_mcp(lambda: app.state.service) if mcp else None
    mcp_routes = mcp_server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host,
        max_request_body_size=max_body_bytes).routes if mcp_server is not None else []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opened = open_facade()
        facade = await opened if inspect.isawaitable(opened) else opened
        service = Service(facade)
        try:
            await facade.connect()
            if warm_up:
                await service.warm_up()
            app.state.service = service
            async with contextlib.AsyncExitStack() as stack:
                if mcp_server is not None:
                    await stack.enter_async_context(mcp_server.session_manager.run())
                yield
        finally:
            await service.close()

    app = FastAPI(
        title="hrag-pg", version=__version__, lifespan=lifespan,
        description="Hierarchical retrieval (Parent-Child, Auto-Merging, budget) in PostgreSQL. Reads are open; "
                    f"POST and DELETE /documents need `Authorization: Bearer <{ENV_TOKEN}>`. The MCP tools are "
                    "at /mcp (streamable HTTP). See docs/serve.md.")
    app.router.routes.extend(mcp_routes)
    app.mount("/inspector", StaticFiles(directory=INSPECTOR, html=True), name="inspector")
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(JsonErrors)

    # ---------------------------------------------------------- errors

    @app.exception_handler(HragError)
    @app.exception_handler(ValueError)
    async def known_failure(request: Request, exc: Exception) -> JSONResponse:
        return error_response(status_of(exc), str(exc))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error in %s %s", request.method, request.url.path)
        return error_response(500, f"unexpected {type(exc).__name__}: {exc} (a bug in hrag-pg; the server's "
                                   "log has the traceback)")

    @app.exception_handler(HTTPException)
    async def http_failure(request: Request, exc: HTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail), dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"] if part not in ("body", "query", "path"))
            if error["type"] == "extra_forbidden":
                problems.append(f"{where} is not a field this endpoint takes")
            elif error["type"] == "json_invalid":
                problems.append(f"the body is not valid JSON ({error.get('ctx', {}).get('error', error['msg'])})")
            else:
                problems.append(f"{where or 'the body'}: {error['msg']}"
                                + (f" (got {json.dumps(error['input'], default=str)[:80]})"
                                   if error["type"] != "missing" and "input" in error else ""))
        return error_response(422, "; ".join(problems))

    # ---------------------------------------------------------- token

    bearer = HTTPBearer(auto_error=False, description=f"The server's {ENV_TOKEN}; only writes need it.")

    def writer(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if not write_token:
            raise HTTPException(403, f"writes are disabled on this server: start it with {ENV_TOKEN} set to a "
                                     "secret and send it as 'Authorization: Bearer <token>'")
        given = credentials.credentials if credentials is not None else ""
        if not hmac.compare_digest(given.encode(), write_token.encode()):
            raise HTTPException(401, "writes need 'Authorization: Bearer <token>' with the server's "
                                     f"{ENV_TOKEN}" + (" (the token given is not it)" if given else ""),
                                headers={"WWW-Authenticate": "Bearer"})

    def service(request: Request) -> Service:
        running: Service = request.app.state.service
        return running

    # ---------------------------------------------------------- endpoints

    @app.post("/retrieve", summary="Ask a question: the mode, the passages and what did not fit (`hrag query --json`)",
              response_class=_PlainJSON)
    async def retrieve(body: RetrieveRequest, run: Service = Depends(service)) -> _PlainJSON:
        """The answer as `hrag query --json` prints it: `mode`, `max_tokens`, `total_tokens`, `results` (each
        with its `rank`) and `dropped`. A setting of another mode than the one chosen is refused (400),
        naming it."""
        return _PlainJSON((await run.retrieve(question_of(body))).model_dump(mode="json"))

    @app.post("/inspect", summary="Ask a question and see how it was answered (what the inspector page draws)",
              response_class=_PlainJSON)
    async def inspect_answer(body: RetrieveRequest, run: Service = Depends(service)) -> _PlainJSON:
        """The answer `/retrieve` gives (`answer`), why each passage is in it (`reasons`), the mode's settings
        with its defaults (`settings`), the hits it was built from, best first (`hits`), and the map of the
        documents it touched (`tree`: the nodes on the paths to the hits and passages, with their children,
        each marked with its hit and passage)."""
        return _PlainJSON((await run.inspect(question_of(body))).model_dump(mode="json"))

    @app.get("/sources", summary="The stored documents, as `hrag sources --json` lists them")
    async def sources(collection: str | None = Query(None, description="Only this collection."),
                      run: Service = Depends(service)) -> list[SourceEntry]:
        return await run.sources(collection)

    @app.get("/outline", summary="The heading tree with node ids and tokens, as `hrag outline --json`")
    async def outline(collection: str | None = Query(None, description="Only this collection."),
                      source: str | None = Query(None, description="Only this document."),
                      max_depth: int = Query(3, description="Deepest level shown (0: the documents only; at most "
                                                            "100)."),
                      run: Service = Depends(service)) -> list[OutlineEntry]:
        return await run.outline(collection=collection, source=source, max_depth=max_depth)

    @app.get("/nodes/{node_id}", summary="One node with its full text and children, as `hrag show --json`")
    async def node(node_id: str, run: Service = Depends(service)) -> NodeView:
        return await run.node(node_id)

    @app.post("/documents", summary="Ingest a text as a document (needs the token)", dependencies=[Depends(writer)])
    async def ingest(body: IngestRequest, run: Service = Depends(service)) -> IngestResult:
        """One transaction: the document's whole tree, or nothing (bad input is refused before any write)."""
        return await run.ingest(text=body.text, source=body.source, collection=body.collection,
                                metadata=body.metadata, format=body.format, strategy=body.strategy)

    @app.delete("/documents", summary="Delete a document and its tree (needs the token)",
                dependencies=[Depends(writer)])
    async def delete(source: str = Query(..., description="The source to delete."),
                     collection: str = Query("default", description="Its collection."),
                     run: Service = Depends(service)) -> Deleted:
        return await run.delete(source, collection)

    @app.get("/", include_in_schema=False)
    async def home(request: Request) -> RedirectResponse:
        query = request.url.query
        return RedirectResponse("/inspector/" + (f"?{query}" if query else ""))

    @app.get("/health", summary="Database reachable, schema revision, model loaded")
    async def health(run: Service = Depends(service)) -> JSONResponse:
        try:
            payload = await run.health()
        except HragError as exc:
            return JSONResponse({"status": "unavailable", "database": "unreachable", "error": one_line(exc),
                                 "model_loaded": run.model_loaded}, status_code=503)
        return JSONResponse(payload)

    return app
