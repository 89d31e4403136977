"""Helpers of the reliability and security suite: bounded polling and lock inspection."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg

T = TypeVar("T")


def wait_for(condition: Callable[[], T], *, timeout: float = 5.0, interval: float = 0.05,
             message: str = "condition") -> T:
    """Poll ``condition`` until it returns something truthy (bounded in time); return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message} did not become true within {timeout} s")
        time.sleep(interval)


def advisory_locks(sql: psycopg.Connection) -> list[tuple[int, bool]]:
    """(pid, granted) of every advisory lock in the current database."""
    return [tuple(r) for r in sql.execute(
        "SELECT pid, granted FROM pg_locks WHERE locktype = 'advisory' "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )]


def locks_of(sql: psycopg.Connection, pid: int) -> list[tuple[str, str, bool]]:
    """(locktype, mode, granted) of every lock a backend holds or waits for."""
    return [tuple(r) for r in sql.execute(
        "SELECT locktype, mode, granted FROM pg_locks WHERE pid = %s", (pid,)
    )]


def source_lock_key(source: str, collection: str = "default") -> str:
    """The text hashed into the advisory lock of (collection, source) (see Repository._lock_source)."""
    return f"hrag\x1f{collection}\x1f{source}"


@contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Raise TimeoutError in the main thread if the block runs longer than ``seconds``.

    For library calls that wait without a bound of their own (the embedded
    server's start-up loop polls until the server is ready).
    """

    def expired(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"{what} took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
