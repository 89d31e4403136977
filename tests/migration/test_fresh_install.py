"""A fresh install (the topic files in ``sql/``) and the revision chain give the same schema.

The topic files are where each function, table and policy is read and
changed; the frozen revision files in ``sql/revisions/`` are how existing
installations got there.  Both must end in the same catalog, function bodies,
comments and privileges included (``tests/schema_snapshot.py``).  Where the
chain before the baseline (0026) meets the topic files, function bodies are
compared without their SQL comments: the topic files' comments are edited,
the revisions' are frozen.
"""

from __future__ import annotations

import difflib
import pprint
import re

import psycopg
import pytest

from hrag_pg import migrate, schema_sql
from hrag_pg.errors import SchemaError
from tests.schema_snapshot import snapshot

HEAD = migrate.head_revision()
BASELINE = "0027"
PREVIOUS = "0026"


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _version(url: str) -> str | None:
    with psycopg.connect(_libpq(url)) as conn:
        row = conn.execute("SELECT version_num FROM hrag.alembic_version").fetchone()
        return row[0] if row else None


# pg_get_functiondef quotes a body with $function$ (no body here nests a dollar
# quote), so what is inside it is scanned as SQL: string literals and quoted
# identifiers are kept as they are; comments and whitespace outside them are not.
_SQL_TOKEN = re.compile(
    r"""(?P<quoted>\b[Ee]'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*'|"(?:[^"]|"")*")"""
    r"""|(?P<comment>--[^\n]*|/\*.*?\*/)"""
    r"""|(?P<space>\s+)""",
    re.S)


def _without_comments(sql: str) -> str:
    """``sql`` without ``--`` and ``/* */`` comments, whitespace collapsed (string literals untouched)."""
    # each comment or run of whitespace becomes a NUL (in no literal), each run of those one space
    return re.sub("\0+", " ", _SQL_TOKEN.sub(lambda m: m.group("quoted") or "\0", sql)).strip()


def _function_bodies_without_comments(catalog: dict[str, list[tuple]]) -> dict[str, list[tuple]]:
    """The snapshot with each function's definition stripped of comments and whitespace.

    Editing a comment inside a function body changes its ``prosrc``; the
    baseline revision re-applies the topic files, so it may differ from the
    chain before it in comments only, never in what a function does.
    """
    return {**catalog, "functions": [(name, _without_comments(definition))
                                     for name, definition in catalog["functions"]]}


def _diff(a: dict[str, list[tuple]], b: dict[str, list[tuple]]) -> str:
    lines = []
    for key in a:
        if a[key] != b[key]:
            lines += difflib.unified_diff(pprint.pformat(a[key], width=160).splitlines(),
                                          pprint.pformat(b[key], width=160).splitlines(), key, key, lineterm="", n=1)
    return "\n".join(lines[:200])


def test_a_fresh_install_is_the_topic_files_stamped_at_head(blank_db_url: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    installs: list[object] = []
    real_install = schema_sql.install
    monkeypatch.setattr(schema_sql, "install", lambda *a, **k: installs.append(a) or real_install(*a, **k))
    migrate.upgrade(blank_db_url, "0020")
    assert installs == [], "an upgrade to an earlier revision runs the chain"
    migrate.downgrade(blank_db_url, "base")
    migrate.upgrade(blank_db_url)
    assert len(installs) == 1
    assert _version(blank_db_url) == HEAD
    migrate.upgrade(blank_db_url)
    assert len(installs) == 1, "an installed schema is never installed again"


def test_a_fresh_install_and_the_chain_give_the_same_catalog(blank_db_url: str) -> None:
    migrate.upgrade(blank_db_url)
    fresh = snapshot(blank_db_url)
    migrate.downgrade(blank_db_url, "base")
    migrate.upgrade(blank_db_url, PREVIOUS)
    frozen = snapshot(blank_db_url)
    migrate.upgrade(blank_db_url, BASELINE)
    baseline = snapshot(blank_db_url)
    # The baseline applies the function topic files on the frozen chain's 0026:
    # the same catalog but for the comments inside function bodies, or a topic
    # file is not what the revisions built.
    baseline, frozen = _function_bodies_without_comments(baseline), _function_bodies_without_comments(frozen)
    assert baseline == frozen, "chain at 0027 (left) and at 0026 (right) differ:\n" + _diff(baseline, frozen)
    migrate.upgrade(blank_db_url)
    assert _version(blank_db_url) == HEAD
    chain = snapshot(blank_db_url)
    assert fresh == chain, "fresh install (left) and chain 0001..head (right) differ:\n" + _diff(fresh, chain)


def test_downgrading_the_baseline_leaves_the_chains_previous_catalog(blank_db_url: str) -> None:
    migrate.upgrade(blank_db_url, PREVIOUS)
    chain_previous = snapshot(blank_db_url)
    migrate.downgrade(blank_db_url, "base")
    migrate.upgrade(blank_db_url)  # fresh install
    migrate.downgrade(blank_db_url, PREVIOUS)
    assert _version(blank_db_url) == PREVIOUS
    # (0027's downgrade restores nothing: the topic files' functions stay, equal but for comments)
    after = _function_bodies_without_comments(snapshot(blank_db_url))
    chain_previous = _function_bodies_without_comments(chain_previous)
    assert after == chain_previous, "downgraded fresh install (left) and chain 0026 (right):\n" + _diff(
        after, chain_previous)


def test_a_fresh_install_honours_the_embedding_dimension(blank_db_url: str) -> None:
    migrate.upgrade(blank_db_url, embedding_dim=12)
    with psycopg.connect(_libpq(blank_db_url)) as conn:
        assert conn.execute("SELECT embedding_dim FROM hrag.config").fetchone() == (12,)
        types = conn.execute(
            "SELECT attrelid::regclass::text, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attname = 'embedding' AND attrelid IN ('hrag.nodes'::regclass, 'hrag.reembed_nodes'::regclass) "
            "ORDER BY 1").fetchall()
        assert types == [("hrag.nodes", "vector(12)"), ("hrag.reembed_nodes", "vector(12)")]


def test_the_topic_files_hold_every_function_once(db_url: str) -> None:
    """Each function of the head schema is created in exactly one topic file."""
    created: dict[str, list[str]] = {}
    for name in schema_sql.TOPICS:
        for match in re.finditer(r"^CREATE (?:OR REPLACE )?FUNCTION hrag\.(\w+)\(", schema_sql.read_topic(name), re.M):
            created.setdefault(match.group(1), []).append(name)
    with psycopg.connect(_libpq(db_url)) as conn:
        rows = conn.execute("SELECT proname, count(*) FROM pg_proc WHERE pronamespace = 'hrag'::regnamespace "
                            "GROUP BY 1").fetchall()
    assert {name: len(files) for name, files in created.items()} == dict(rows)
    assert all(len(set(files)) == 1 for files in created.values()), "a function split over topic files"
    assert sorted(schema_sql.TOPICS) == schema_sql.topic_names(), "a topic file no install applies"


def test_a_syntax_error_in_a_topic_files_function_fails_the_install_naming_the_function(
        blank_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The install creates bodies unchecked (the files are ordered by definitions, not calls), then checks them all."""
    real_read = schema_sql.read_topic
    broken = "    IF target IS NULL THEN"

    def read_with_a_typo(name: str) -> str:
        text = real_read(name)
        if name == "reembed.sql":
            assert broken in text, "reembed.sql changed: update this test's typo"
            text = text.replace(broken, "    IF target IS NULL THEM", 1)
        return text

    monkeypatch.setattr(schema_sql, "read_topic", read_with_a_typo)
    with pytest.raises(SchemaError, match=r"do not compile \(1\): hrag\.finish_reembed\(text\): missing \"THEN\""):
        migrate.upgrade(blank_db_url)
    assert _version_or_none(blank_db_url) is None, "nothing of the broken install stays"


def _version_or_none(url: str) -> str | None:
    with psycopg.connect(_libpq(url)) as conn:
        if conn.execute("SELECT to_regclass('hrag.alembic_version')").fetchone() == (None,):
            return None
    return _version(url)
