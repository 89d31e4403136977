"""Hostile input: every case is a clear error or a safe result, never an injected statement.

After each test the earlier-ingested document is byte-for-byte intact and a
canary table (the target of every injected ``DROP TABLE``) still exists.
Limits documented here: the question is 1..10,000 characters; k, top_k,
top_k_children, max_parents and candidates are limited to 1..1000; a
collection name is 1..256 characters, a source name at most 1,500 bytes of
UTF-8, and neither may contain NUL or U+001F.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from hrag_pg import queries
from hrag_pg.api import HRAG, MAX_QUESTION_CHARS
from hrag_pg.errors import IngestError, InvalidArgument, NotFound
from hrag_pg.ingest.flatten import MAX_SOURCE_BYTES
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.models import SearchHit
from hrag_pg.queries import Search
from hrag_pg.settings import AutoMergeSettings, ParentChildSettings
from tests.embedders import HashingEmbedder
from tests.integration.test_ingest_write import GUIDE, assert_same, snapshot

CANARY = "public.hrag_canary"
INJECTIONS = [
    f"'; DROP TABLE {CANARY}; --",
    f'"; DROP TABLE {CANARY}; --',
    f"\\'; DROP TABLE {CANARY}; --\\",
    f"$$; DROP TABLE {CANARY}; $$",
    "x' OR '1'='1'; DELETE FROM hrag.nodes; --",
    f"*/ DROP TABLE {CANARY}; /*",
    "%s %(q)s {0} {{}} :id ? $1",
    "back\\slash\\\\ and \\x00 written out",
    "日本語の名前・🎌・\u202eevil\u200b",
    "tabs\tnew\nlines\rand\x0bvertical",
]
QUESTION = "How do I install the guide's tool?"


@dataclass
class Guarded:
    hrag: HRAG
    sql: psycopg.Connection
    before: dict[str, Any]

    def assert_intact(self) -> None:
        assert self.sql.execute(f"SELECT count(*) FROM {CANARY}").fetchone()[0] == 1
        assert_same(self.before, snapshot(self.sql, GUIDE))


@pytest.fixture
def guarded(hrag: HRAG, sql: psycopg.Connection) -> Iterator[Guarded]:
    hrag.ingest([GUIDE], stop_on_error=True)
    sql.execute(f"CREATE TABLE {CANARY} (id int)")
    sql.execute(f"INSERT INTO {CANARY} VALUES (1)")
    register_vector(sql)
    guard = Guarded(hrag, sql, snapshot(sql, GUIDE))
    yield guard
    guard.assert_intact()


def note(title: str, word: str) -> str:
    return f"# {title}\n\n## Part\n\nA paragraph about {word} and pelicans.\n\nAnother paragraph about {word}.\n"


# ------------------------------------------------ 1. names of sources and collections


def test_hostile_source_and_collection_names_are_stored_verbatim_and_match_only_themselves(
    guarded: Guarded,
) -> None:
    hrag, sql = guarded.hrag, guarded.sql
    for i, name in enumerate(INJECTIONS):
        result = hrag.ingest_tree(parse_markdown(note(f"Note {i}", f"topic{i}"), name), collection=name)
        assert result.status == "created"
        assert sql.execute("SELECT source, collection FROM hrag.documents WHERE id = %s",
                           (result.document_id,)).fetchone() == (name, name)
        found = hrag.parent_child(f"topic{i} pelicans", collection=name)
        assert found and {r.document_id for r in found} == {result.document_id}
    # Each name is its own collection: nothing else leaked in or out.
    assert sql.execute("SELECT count(DISTINCT collection) FROM hrag.documents").fetchone()[0] == len(INJECTIONS) + 1
    for name in INJECTIONS:
        assert hrag.delete(name, collection=name) is True
        assert hrag.delete(name, collection=name) is False
    guarded.assert_intact()


def test_long_and_malformed_names_are_refused_clearly_at_the_limits(guarded: Guarded) -> None:
    hrag = guarded.hrag
    rnd = random.Random(7)
    # At the limits: 256 four-byte characters and 1,500 bytes of incompressible CJK text fit the index.
    collection = "".join(chr(rnd.randrange(0x1F300, 0x1F5FF)) for _ in range(256))
    source = "".join(chr(rnd.randrange(0x4E00, 0x9FFF)) for _ in range(MAX_SOURCE_BYTES // 3))
    assert len(source.encode("utf-8")) == MAX_SOURCE_BYTES == 1500
    assert hrag.ingest_tree(parse_markdown(note("Edge", "edges"), source), collection=collection).status == "created"
    assert hrag.parent_child("edges pelicans", collection=collection)

    too_long_source = source + "末"
    random_10k = "".join(chr(rnd.randrange(0x4E00, 0x9FFF)) for _ in range(10_000))
    for name, coll, message in [
        (too_long_source, "default", "is 1,503 bytes in UTF-8; the limit is 1,500"),
        (random_10k, "default", "is 30,000 bytes in UTF-8; the limit is 1,500"),
        ("x" * 10_000, "default", "is 10,000 bytes in UTF-8; the limit is 1,500"),
        ("fine.md", "c" * 257, "collection name must be 1 to 256 characters, got 257"),
        ("fine.md", "", "collection name must be 1 to 256 characters, got 0"),
        ("b\x1fc", "a", r"the source name 'b\\x1fc' contains the control character U\+001F"),
        ("c", "a\x1fb", r"the collection name 'a\\x1fb' contains the control character U\+001F"),
    ]:
        with pytest.raises(IngestError, match=message):
            hrag.ingest_tree(parse_markdown(note("Bad", "bad"), name), collection=coll)
    # ("a\x1fb", "c") and ("a", "b\x1fc") used to get the same document id: the second ingest
    # reported "unchanged" for a document that was never stored.
    # Queries with absurd collection names find no such collection, and say so without echoing the name.
    with pytest.raises(NotFound, match=r"^no collection 'x{40}…' \(10,000 characters\) in this database"):
        hrag.parent_child(QUESTION, collection="x" * 10_000)
    with pytest.raises(NotFound, match=r"\(10,000 characters\) in this database") as refused:
        hrag.auto_merge(QUESTION, collection=random_10k)
    assert len(str(refused.value)) < 1_000
    guarded.assert_intact()


# ------------------------------------------------------- 2. metadata filters


def test_hostile_filter_keys_and_values_match_exactly_or_nothing(guarded: Guarded) -> None:
    hrag = guarded.hrag
    doc_ids: dict[str, uuid.UUID] = {}
    for i, value in enumerate(INJECTIONS):
        tree = parse_markdown(note(f"Owned {i}", "ownership"), f"owned/{i}.md")
        tree.metadata = {"owner": value, value: "as a key"}
        doc_ids[value] = hrag.ingest_tree(tree, collection="owned").document_id
    for value in INJECTIONS:
        for retrieve in (hrag.parent_child, hrag.auto_merge):
            exact = retrieve("ownership pelicans", collection="owned", filter={"owner": value})
            assert exact and {r.document_id for r in exact} == {doc_ids[value]}
            as_key = retrieve("ownership pelicans", collection="owned", filter={value: "as a key"})
            assert {r.document_id for r in as_key} == {doc_ids[value]}
            assert retrieve("ownership pelicans", filter={"owner": value + "'"}) == []
            assert retrieve("ownership pelicans", filter={"owner": [value], "x": {"y": None}}) == []
    long_value = "ω" * 10_000
    assert hrag.parent_child(QUESTION, filter={"owner": long_value}) == []
    assert hrag.auto_merge(QUESTION, filter={long_value: long_value}) == []
    guarded.assert_intact()


def test_hostile_sql_function_parameters_are_data_not_code(guarded: Guarded) -> None:
    sql = guarded.sql
    q = HashingEmbedder().vector(QUESTION)
    for value in [*INJECTIONS, "ω" * 10_000]:
        for statement in (
            "SELECT count(*) FROM hrag.search_leaves(%s, 5, %s, jsonb_build_object('owner', %s::text))",
            "SELECT count(*) FROM hrag.parent_child(%s, 5, 2, %s, jsonb_build_object(%s::text, 1))",
            "SELECT count(*) FROM hrag.auto_merge(%s, 5, 0.5, %s, jsonb_build_object('k', %s::text))",
        ):
            assert sql.execute(statement, (q, value, value)).fetchone()[0] == 0
        hybrid = sql.execute("SELECT count(*) FROM hrag.search_hybrid(%s, %s, 5)", (q, value)).fetchone()[0]
        assert hybrid == 5  # the question text only rescores
        assert isinstance(sql.execute("SELECT hrag.lexical_terms(%s)", (value,)).fetchone()[0], list)
        with pytest.raises(psycopg.errors.InvalidTextRepresentation, match="invalid input syntax for type uuid"):
            sql.execute("SELECT hrag.node_text(%s::uuid)", (value,))
    # The role helpers quote identifiers: a hostile role name is just a (strange) role name.
    role = f'hrag_role"; DROP TABLE {CANARY}; --{uuid.uuid4().hex[:6]}'
    try:
        sql.execute("SELECT hrag.create_tenant_role(%s, ARRAY[%s])", (role, INJECTIONS[0]))
        assert sql.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,)).fetchone()[0] == 1
        assert sql.execute("SELECT collection FROM hrag.tenant_collections WHERE role_name = %s",
                           (role,)).fetchone()[0] == INJECTIONS[0]
    finally:
        quoted = '"' + role.replace('"', '""') + '"'
        sql.execute(f"DROP OWNED BY {quoted}")
        sql.execute(f"DROP ROLE {quoted}")
    with pytest.raises(psycopg.errors.UndefinedObject, match="does not exist"):
        sql.execute("SELECT hrag.grant_reader(%s)", (f"nobody; DROP TABLE {CANARY}; --",))
    guarded.assert_intact()


# ------------------------------------------------------- 3. malformed arguments


@pytest.mark.parametrize("bad", [[1, 2], "owner=me", 3, True, ("owner", "me")])
def test_a_filter_that_is_not_a_json_object_is_refused_by_the_api(guarded: Guarded, bad: Any) -> None:
    for retrieve in (guarded.hrag.parent_child, guarded.hrag.auto_merge):
        with pytest.raises(ValueError, match="filter must be a JSON object"):
            retrieve(QUESTION, filter=bad)
    guarded.assert_intact()


@pytest.mark.parametrize(("bad", "kind"), [("[1, 2]", "array"), ('"owner"', "string"), ("3", "number"),
                                          ("true", "boolean"), ("null", "null")])
def test_a_filter_that_is_not_a_json_object_is_refused_by_sql(guarded: Guarded, bad: str, kind: str) -> None:
    q = HashingEmbedder().vector(QUESTION)
    for statement in ("SELECT * FROM hrag.search_leaves(%s, 5, NULL, %s::jsonb)",
                      "SELECT * FROM hrag.parent_child(%s, 5, 2, NULL, %s::jsonb)",
                      "SELECT * FROM hrag.auto_merge(%s, 5, 0.5, NULL, %s::jsonb)"):
        with pytest.raises(psycopg.errors.InvalidParameterValue,
                           match=f'argument "filter" must be a JSON object, got a JSON {kind}'):
            guarded.sql.execute(statement, (q, bad))
    guarded.assert_intact()


def test_questions_of_zero_characters_and_of_a_megabyte_are_refused(guarded: Guarded) -> None:
    """The question is 1..10,000 characters (a model reads only its first 256 or 512 tokens)."""
    hrag = guarded.hrag
    for retrieve in (hrag.parent_child, hrag.auto_merge):
        for empty in ("", "   \n\t"):
            with pytest.raises(ValueError, match="the question is empty"):
                retrieve(empty)
        with pytest.raises(ValueError, match="1,000,000 characters long; the limit is 10,000"):
            retrieve("a" * 1_000_000)
        with pytest.raises(ValueError, match="10,001 characters long"):
            retrieve("b" * (MAX_QUESTION_CHARS + 1))
        assert isinstance(retrieve("c " * (MAX_QUESTION_CHARS // 2)), list)  # exactly at the limit
    guarded.assert_intact()


@pytest.mark.parametrize("k", [0, -1, 1001, 2**31, 10**12, 2**70])
def test_counts_outside_1_to_1000_are_refused_with_the_argument_named(guarded: Guarded, k: int) -> None:
    """k (top_k, top_k_children, max_parents, candidates) is limited to 1..1000.

    Values beyond PostgreSQL's integer range used to fail as a bare "integer
    out of range"; they are now refused by name like the others, and always
    by the name the caller used (``top_k``, not the SQL function's ``k``).
    """
    hrag = guarded.hrag
    for call, name in [
        (lambda: hrag.parent_child(QUESTION, ParentChildSettings(top_k_children=k, lexical_weight=0)),
         "top_k_children"),
        (lambda: hrag.parent_child(QUESTION, ParentChildSettings(max_parents=k)), "max_parents"),
        (lambda: hrag.auto_merge(QUESTION, AutoMergeSettings(top_k=k)), "top_k"),
        (lambda: hrag.auto_merge(QUESTION, AutoMergeSettings(top_k=k, lexical_weight=0, min_relative_score=None)),
         "top_k"),
    ]:
        with pytest.raises(InvalidArgument, match=f'^{name} must be between 1 and 1000, got {k}'):
            call()
    with pytest.raises(InvalidArgument, match=f'^candidates must be between 1 and 1000, got {k}'):
        hrag.parent_child(QUESTION, ParentChildSettings(candidates=k))
    guarded.assert_intact()


def test_nan_infinite_zero_and_wrong_dimension_query_vectors_are_refused(guarded: Guarded) -> None:
    repo, sql = guarded.hrag.repository, guarded.sql
    dim = 384
    cases = [
        (np.full(dim, np.nan, np.float32), "NaN not allowed in vector"),
        (np.r_[np.ones(dim - 1), np.inf].astype(np.float32), "infinite value not allowed in vector"),
        (np.zeros(dim, np.float32), 'argument "query" is the zero vector'),
        (np.ones(8, np.float32), 'argument "query" has 8 dimensions, but this installation stores 384'),
        (np.ones(dim + 1, np.float32), 'argument "query" has 385 dimensions, but this installation stores 384'),
    ]
    for vector, message in cases:
        for plan in [
            queries.plan_search(Search(vector), 5),
            queries.plan_parent_child(Search(vector), 20, 4, None),
            queries.plan_auto_merge(Search(vector), 12, 0.5),
            queries.plan_auto_merge(Search(vector, text=QUESTION, lexical_weight=0.5), 12, 0.5),
        ]:
            with pytest.raises(InvalidArgument, match=message):
                repo.fetch(*plan)
    # In SQL: pgvector refuses NaN and infinity on input; hrag names zero and wrong-sized queries.
    with pytest.raises(psycopg.errors.DataException, match="NaN not allowed in vector"):
        sql.execute("SELECT * FROM hrag.search_leaves('[NaN,1,2]'::vector, 5)")
    with pytest.raises(psycopg.errors.DataException, match="infinite value not allowed in vector"):
        sql.execute("SELECT * FROM hrag.search_leaves('[Infinity,1,2]'::vector, 5)")
    with pytest.raises(psycopg.errors.DataException, match="zero vector"):
        sql.execute("SELECT * FROM hrag.auto_merge(array_fill(0, ARRAY[384])::real[]::vector)")
    with pytest.raises(psycopg.errors.DataException, match='has 3 dimensions, but this installation stores 384'):
        sql.execute("SELECT * FROM hrag.parent_child('[1,2,3]'::vector)")
    guarded.assert_intact()


def test_unknown_malformed_and_mismatched_node_ids(guarded: Guarded) -> None:
    hrag, sql = guarded.hrag, guarded.sql
    unknown = uuid.uuid4()
    assert hrag.node_text(unknown) is None
    assert sql.execute("SELECT hrag.node_text(%s)", (unknown,)).fetchone()[0] is None
    for bad in ("not-a-uuid", f"'; DROP TABLE {CANARY}; --", "0" * 10_000, 42):
        with pytest.raises(InvalidArgument, match="is not a node id"):
            hrag.node_text(bad)
        with pytest.raises(InvalidArgument, match="is not a node id"):
            hrag.repository.get_node(bad)

    # Unknown ids in hits are ignored; known ones still merge/expand.
    known = sql.execute("SELECT id, parent_id, document_id FROM hrag.nodes WHERE embedding IS NOT NULL "
                        "ORDER BY seq LIMIT 1").fetchone()
    ghost = SearchHit(node_id=unknown, parent_id=uuid.uuid4(), document_id=uuid.uuid4(), score=0.99)
    real = SearchHit(node_id=known[0], parent_id=known[1], document_id=known[2], score=0.5)

    def merged(hits: list[SearchHit]) -> list[dict[str, object]]:
        return hrag.repository.fetch(*queries.plan_auto_merge_hits(*queries.hits_arrays(hits), 0.5))

    def expanded(hits: list[SearchHit]) -> list[dict[str, object]]:
        return hrag.repository.fetch(*queries.plan_parent_child_hits(*queries.hits_arrays(hits), 4, None))

    assert merged([ghost]) == []
    assert expanded([ghost]) == []
    alone = merged([real])
    assert alone and merged([ghost, real]) == alone
    assert [r["node_id"] for r in expanded([ghost, real])] == [known[1]]
    assert sql.execute("SELECT count(*) FROM hrag.auto_merge_hits(ARRAY[%s]::uuid[], ARRAY[1]::real[])",
                       (unknown,)).fetchone()[0] == 0

    # Mismatched lengths and NULLs: the error names both arguments (and both lengths).
    for function in ("auto_merge_hits", "parent_child_hits"):
        with pytest.raises(psycopg.errors.ArraySubscriptError,
                           match=r'"node_ids" \(1 elements\) and "scores" \(3 elements\) must have the same length'):
            sql.execute(f"SELECT * FROM hrag.{function}(ARRAY[%s]::uuid[], ARRAY[1, 2, 3]::real[])", (unknown,))
        with pytest.raises(psycopg.errors.NullValueNotAllowed, match="must not contain NULL"):
            sql.execute(f"SELECT * FROM hrag.{function}(ARRAY[%s, NULL]::uuid[], ARRAY[1, 2]::real[])",
                        (unknown,))
    guarded.assert_intact()
