"""Errors that carry one clear sentence for the user.

Every failure a user can cause (bad configuration, bad input, a server that
cannot host hrag) is raised as an :class:`HragError` whose message names the
problem and the fix; the CLI prints exactly that message and exits non-zero.
"""

from __future__ import annotations


def install_extra(extra: str) -> str:
    """How to add one of hrag-pg's extras: it is installed from its checkout, not from a package index."""
    return f"`pip install '.[{extra}]'` in the hrag-pg checkout"


class HragError(Exception):
    """Base class: the message is meant to be shown to the user as is.

    ``field`` names the argument the failure is about, as Python and JSON
    spell it (``top_k``), so a front end can say it in its own words (the
    CLI's ``--top-k``); None when no one argument is to blame.
    """

    def __init__(self, message: str = "", *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ConfigurationError(HragError):
    """The database URL, data dir or installation is unusable."""


class SchemaError(HragError):
    """The database is not migrated, or migrated with another embedding dimension."""


class IngestError(HragError):
    """A document could not be ingested; nothing of it was written."""


class EmbeddingError(HragError):
    """The embedding model is unavailable or produced unusable vectors."""


class InvalidArgument(HragError, ValueError):
    """An argument out of its range, or one the call does not take; the message names it (``field``)."""


class UnknownSetting(InvalidArgument, TypeError):
    """A setting the mode does not take (one of another mode, or none at all); the message names the modes
    that take it (``taken_by``).  A TypeError too, as an unexpected keyword argument is in Python."""

    def __init__(self, message: str, *, field: str, mode: str, taken_by: list[str]) -> None:
        super().__init__(message, field=field)
        self.mode, self.taken_by = mode, taken_by


class ConnectionLost(HragError):
    """The connection to PostgreSQL broke during a call (server restart, killed backend).

    The call did not complete; the next call reconnects (a checkout pings first, and a read
    whose unpinged connection turns out dead runs again on a pinged one).
    ``dead_connection`` says whether the connection itself is closed or
    broken (so a read may be repeated on another one), not just the statement.
    """

    def __init__(self, message: str, *, dead_connection: bool = False) -> None:
        super().__init__(message)
        self.dead_connection = dead_connection


class QueryCancelled(HragError):
    """The server cancelled the statement (``statement_timeout`` or a cancel request)."""


def from_database(exc: Exception) -> Exception:
    """hrag's own SQL argument checks (SQLSTATE class 22, "hrag: ..." messages) as InvalidArgument."""
    diag = getattr(exc, "diag", None)
    message = getattr(diag, "message_primary", None) or ""
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if sqlstate.startswith("22") and message:
        return InvalidArgument(message.removeprefix("hrag: "))
    return exc


class ModelMismatchError(EmbeddingError):
    """A collection's vectors were made by another embedding model than the one asked to read or extend them."""


class ModelChanged(ModelMismatchError):
    """A collection was switched to another model (a reembed) after the question was embedded for it.

    The retrievers embed the question again with the collection's new model
    and ask once more; it reaches a caller only if the model changed again.
    """


#: The SQLSTATE of hrag._checked_collection's refusal (sql/common.sql).
MODEL_CHANGED_SQLSTATE = "HRM01"


class NotFound(HragError):
    """What the caller names does not exist, or this role cannot see it: a collection, a node, a source."""


#: Collections an "unknown collection" message names at most, and characters of each name it shows.
_NAMED_COLLECTIONS, _NAME_CHARS = 20, 40


def _quoted(name: str) -> str:
    """A name as a message quotes it: whole, or its start and its length (a 10,000-character name is not echoed)."""
    return repr(name) if len(name) <= _NAME_CHARS else f"'{name[:_NAME_CHARS]}…' ({len(name):,} characters)"


def unknown_collection(collection: str, existing: list[str]) -> NotFound:
    """The one message for a collection that does not exist (or this role cannot see), naming those that do."""
    named = ", ".join(name if len(name) <= _NAME_CHARS else _quoted(name) for name in existing[:_NAMED_COLLECTIONS])
    more = f" and {len(existing) - _NAMED_COLLECTIONS:,} more" if len(existing) > _NAMED_COLLECTIONS else ""
    return NotFound(f"no collection {_quoted(collection)} in this database; collections: "
                    f"{named + more if existing else '(none: ingest something first)'}")


class NotPermitted(HragError):
    """This role may not do what was asked (a repair without write access); ``field`` names the argument that
    asked for it."""


class ServerUnavailable(HragError):
    """``HRAG_SERVER_URL`` names a server that cannot be reached (the CLI exits 3, as for a stopped database)."""
