"""Tenant isolation by row-level security: tables, every function, writes and privileges.

Documents are ingested into collections 'a' and 'b' by the owner; tenant
roles are made with ``hrag.create_tenant_role`` and a reader with
``hrag.grant_reader``; each check runs after ``SET ROLE`` on a connection of
this test's database (and, where the Python API matters, as a login role).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from hrag_pg import db
from hrag_pg.api import HRAG
from hrag_pg.errors import NotFound
from hrag_pg.ingest.markdown import parse_markdown
from tests.embedders import HashingEmbedder
from tests.integration.test_ingest_write import root_id

A_DOC = """# Alpha handbook

## Leave

Alpha staff take leave after filing form A-1 with the office.

Alpha staff return the laptop on the last working day.

## Travel

Alpha travel is booked through the travel desk two weeks ahead.
"""

B_DOC = """# Bravo secrets

## Vault

BRAVO-SECRET: the vault code rotates every Monday at noon.

BRAVO-SECRET: only two officers may open the vault together.

## Payroll

BRAVO-SECRET: payroll runs on the 25th from the bravo account.
"""

#: Every hrag function a reader or tenant calls to retrieve (all must be SECURITY INVOKER).
RETRIEVAL_FUNCTIONS = {
    "search_leaves", "search_hybrid", "parent_child", "parent_child_hits", "auto_merge", "auto_merge_hits",
    "node_text", "check_integrity", "lexical_terms", "term_hash", "visible_collections",
    "outline", "children", "node",
}


@dataclass
class Corpus:
    a_ids: set[uuid.UUID]
    b_ids: set[uuid.UUID]
    a_root: uuid.UUID
    b_root: uuid.UUID
    b_leaves: list[uuid.UUID]
    b_vector: np.ndarray  # the stored embedding of a b leaf, read as owner
    b_text: str


@pytest.fixture
def corpus(hrag: HRAG, sql: psycopg.Connection) -> Corpus:
    hrag.ingest_tree(parse_markdown(A_DOC, "a/handbook.md"), collection="a")
    hrag.ingest_tree(parse_markdown(B_DOC, "b/secrets.md"), collection="b")
    ids = {c: {r[0] for r in sql.execute("SELECT id FROM hrag.nodes WHERE collection = %s", (c,))}
           for c in ("a", "b")}
    _leaf, vector, text = sql.execute(
        "SELECT id, embedding, content FROM hrag.nodes WHERE collection = 'b' AND embedding IS NOT NULL "
        "ORDER BY seq LIMIT 1").fetchone()
    b_leaves = [r[0] for r in sql.execute(
        "SELECT id FROM hrag.nodes WHERE collection = 'b' AND embedding IS NOT NULL ORDER BY seq")]
    sql.execute("ANALYZE hrag.nodes")
    return Corpus(ids["a"], ids["b"], root_id(sql, "a/handbook.md"), root_id(sql, "b/secrets.md"),
                  b_leaves, np.asarray(vector.to_numpy()), text)


@pytest.fixture
def make_role(sql: psycopg.Connection) -> Iterator[Callable[..., str]]:
    """Create roles with names unique to this run; DROP OWNED + DROP ROLE them afterwards."""
    made: list[str] = []

    def make(kind: str, collections: list[str] | None = None, *, can_write: bool = False) -> str:
        name = f"hrag_{kind}_{uuid.uuid4().hex[:10]}"
        made.append(name)
        if collections is None:
            sql.execute(f'CREATE ROLE "{name}" NOLOGIN')
            sql.execute("SELECT hrag.grant_reader(%s)", (name,))
        else:
            sql.execute("SELECT hrag.create_tenant_role(%s, %s, %s)", (name, collections, can_write))
        return name

    yield make
    for name in made:
        sql.execute(f'DROP OWNED BY "{name}"')
        sql.execute(f'DROP ROLE "{name}"')


@contextmanager
def as_role(db_url: str, role: str) -> Iterator[psycopg.Connection]:
    """A connection of this test's database acting as ``role`` (SET ROLE); rolled back at the end."""
    with psycopg.connect(db.libpq_url(db_url)) as conn:
        register_vector(conn)
        conn.execute(f'SET ROLE "{role}"')
        try:
            yield conn
        finally:
            conn.rollback()


def login_url(db_url: str, sql: psycopg.Connection, role: str) -> str:
    """The test database's URL for ``role``, made a login role (trust auth on the socket)."""
    sql.execute(f'ALTER ROLE "{role}" LOGIN')
    user = db_url.split("://", 1)[1].split("@", 1)[0]
    return db_url.replace(f"{user}@", f"{role}@", 1)


def refused(conn: psycopg.Connection, statement: str, params: tuple | dict[str, object] = ()) -> str:
    """Run ``statement`` in a savepoint; it must fail for lack of privilege.  Returns the message."""
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as raised, conn.transaction():
        conn.execute(statement, params)
    return str(raised.value)


def ids_of(conn: psycopg.Connection, statement: str, params: tuple = ()) -> set[uuid.UUID]:
    return {r[0] for r in conn.execute(statement, params)}


# ------------------------------------------------------------- 1. reading


def test_a_tenant_sees_only_its_collection_through_tables_and_every_function(
    corpus: Corpus, make_role: Callable[..., str], db_url: str, sql: psycopg.Connection
) -> None:
    tenant = make_role("tenant_a", ["a"])
    q, text = corpus.b_vector, corpus.b_text
    scores = [1.0] * len(corpus.b_leaves)
    with as_role(db_url, tenant) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == tenant
        assert [r[0] for r in conn.execute("SELECT DISTINCT collection FROM hrag.documents")] == ["a"]
        assert ids_of(conn, "SELECT id FROM hrag.nodes") == corpus.a_ids
        assert conn.execute("SELECT hrag.visible_collections()").fetchone()[0] == ["a"]
        assert conn.execute("SELECT count(*) FROM hrag.nodes WHERE collection = 'b'").fetchone()[0] == 0
        # The embeddings of b are not readable, not even by id.
        assert conn.execute("SELECT embedding FROM hrag.nodes WHERE id = %s",
                            (corpus.b_leaves[0],)).fetchall() == []
        assert conn.execute("SELECT count(*) FROM hrag.nodes WHERE embedding = %s", (q,)).fetchone()[0] == 0
        # Nor do planner statistics of the protected table leak values.
        assert conn.execute(
            "SELECT count(*) FROM pg_stats WHERE schemaname = 'hrag' AND tablename = 'nodes'").fetchone()[0] == 0
        assert [r[0] for r in conn.execute("SELECT collection FROM hrag.tenant_collections")] == ["a"]

        # Every function, with a b leaf's exact embedding as the query, with and without collection => 'b'.
        for collection in (None, "b"):
            leaves = ids_of(conn, "SELECT node_id FROM hrag.search_leaves(%s, 1000, %s)", (q, collection))
            hybrid = ids_of(conn, "SELECT node_id FROM hrag.search_hybrid(%s, %s, 1000, %s, NULL, 0.5, 1000)",
                            (q, text, collection))
            pc = conn.execute("SELECT node_id, matched_children, content "
                              "FROM hrag.parent_child(%s, 1000, 1000, %s)", (q, collection)).fetchall()
            am = conn.execute("SELECT node_id, merged_from, content "
                              "FROM hrag.auto_merge(%s, 1000, 0.5, %s)", (q, collection)).fetchall()
            if collection == "b":
                assert leaves == hybrid == set() and pc == [] and am == []
            else:
                assert leaves and leaves <= corpus.a_ids and hybrid and hybrid <= corpus.a_ids
                assert pc and am
            for node_id, members, content in pc + am:
                assert node_id in corpus.a_ids and set(members) <= corpus.a_ids
                assert "BRAVO" not in content
        # Hits given by id: b's ids are unknown ids to a tenant of a.
        assert conn.execute("SELECT * FROM hrag.parent_child_hits(%s, %s::real[])",
                            (corpus.b_leaves, scores)).fetchall() == []
        assert conn.execute("SELECT * FROM hrag.auto_merge_hits(%s, %s::real[], 0.1)",
                            (corpus.b_leaves, scores)).fetchall() == []
        mixed = [*corpus.b_leaves, *sorted(corpus.a_ids)]
        assert ids_of(conn, "SELECT node_id FROM hrag.auto_merge_hits(%s, %s::real[], 1.0)",
                      (mixed, [1.0] * len(mixed))) <= corpus.a_ids
        assert conn.execute("SELECT hrag.node_text(%s)", (corpus.b_root,)).fetchone()[0] is None
        assert conn.execute("SELECT hrag.node_text(%s)", (corpus.b_leaves[0],)).fetchone()[0] is None
        assert "Alpha staff" in conn.execute("SELECT hrag.node_text(%s)", (corpus.a_root,)).fetchone()[0]
        assert conn.execute("SELECT * FROM hrag.check_integrity()").fetchall() == []

    # The Python API as a login tenant: retrieval works and stays inside 'a'.
    instance = HRAG(login_url(db_url, sql, tenant), embedder=HashingEmbedder())
    try:
        for mode in (instance.parent_child, instance.auto_merge):
            results = mode(corpus.b_text)
            assert results and {r.node_id for r in results} <= corpus.a_ids
            with pytest.raises(NotFound, match=r"^no collection 'b' in this database; collections: a$"):
                mode(corpus.b_text, collection="b")  # (another tenant's collection is one this role cannot see)
        assert instance.node_text(corpus.b_root) is None
        assert instance.repository.check_integrity() == []
    finally:
        instance.repository.engine.dispose()
        db._engine_for.cache_clear()


def test_each_tenant_sees_its_own_collections_and_a_multi_collection_tenant_sees_both(
    corpus: Corpus, make_role: Callable[..., str], db_url: str
) -> None:
    only_b, both = make_role("tenant_b", ["b"]), make_role("tenant_ab", ["a", "b"])
    with as_role(db_url, only_b) as conn:
        assert ids_of(conn, "SELECT id FROM hrag.nodes") == corpus.b_ids
        assert ids_of(conn, "SELECT node_id FROM hrag.search_leaves(%s, 1000)", (corpus.b_vector,)) <= corpus.b_ids
    with as_role(db_url, both) as conn:
        assert ids_of(conn, "SELECT id FROM hrag.nodes") == corpus.a_ids | corpus.b_ids
        assert sorted(conn.execute("SELECT hrag.visible_collections()").fetchone()[0]) == ["a", "b"]


def test_a_tenant_outlines_and_expands_only_its_collections_and_another_tenants_source_is_unknown(
    corpus: Corpus, make_role: Callable[..., str], db_url: str
) -> None:
    tenant, both = make_role("tenant_a", ["a"]), make_role("tenant_ab", ["a", "b"])
    with as_role(db_url, both) as conn:
        assert {r[0] for r in conn.execute("SELECT source FROM hrag.outline()")} == {"a/handbook.md", "b/secrets.md"}
    with as_role(db_url, tenant) as conn:
        rows = conn.execute("SELECT node_id, source, collection, title FROM hrag.outline()").fetchall()
        assert rows and {r[0] for r in rows} <= corpus.a_ids and {(r[1], r[2]) for r in rows} == {
            ("a/handbook.md", "a")}
        assert conn.execute("SELECT * FROM hrag.outline('b')").fetchall() == []
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"no document 'b/secrets\.md' is stored"), \
                conn.transaction():
            conn.execute("SELECT * FROM hrag.outline(source => 'b/secrets.md')")
        assert conn.execute("SELECT * FROM hrag.children(%s)", (corpus.b_root,)).fetchall() == []
        assert conn.execute("SELECT * FROM hrag.node(%s)", (corpus.b_root,)).fetchall() == []
        assert {r[0] for r in conn.execute("SELECT node_id FROM hrag.children(%s)", (corpus.a_root,))} <= corpus.a_ids


# ------------------------------------------------------------- 2. writing


def _documents(sql: psycopg.Connection) -> list[tuple]:
    return [tuple(r) for r in sql.execute(
        "SELECT d.collection, d.source, d.content_hash, count(n.id), string_agg(n.content, '|' ORDER BY n.seq) "
        "FROM hrag.documents d JOIN hrag.nodes n ON n.document_id = d.id GROUP BY 1, 2, 3 ORDER BY 1, 2")]


def test_a_read_only_tenant_cannot_write_create_or_widen_its_own_access(
    corpus: Corpus, make_role: Callable[..., str], db_url: str, sql: psycopg.Connection
) -> None:
    tenant = make_role("tenant_ro", ["a"])
    before = _documents(sql)
    b_doc = sql.execute("SELECT id FROM hrag.documents WHERE collection = 'b'").fetchone()[0]
    with as_role(db_url, tenant) as conn:
        for statement, params in [
            (("INSERT INTO hrag.documents (id, collection, source, content_hash) "
              "VALUES (gen_random_uuid(), 'a', 'new.md', 'h')"), ()),
            ("UPDATE hrag.nodes SET content = 'changed' WHERE collection = 'a'", ()),
            ("UPDATE hrag.documents SET title = 'changed'", ()),
            ("DELETE FROM hrag.nodes", ()),
            ("DELETE FROM hrag.documents WHERE id = %s", (b_doc,)),
            ("TRUNCATE hrag.nodes", ()),
            ("CREATE TABLE hrag.evil (x int)", ()),
            ("CREATE FUNCTION hrag.evil() RETURNS int LANGUAGE sql AS 'SELECT 1'", ()),
            ("CREATE VIEW hrag.all_nodes AS SELECT 1", ()),
            ("INSERT INTO hrag.tenant_collections VALUES (current_user, 'b')", ()),
            ("UPDATE hrag.tenant_collections SET collection = 'b'", ()),
            ("DELETE FROM hrag.tenant_collections", ()),
            ("SELECT hrag.create_tenant_role(current_user, ARRAY['b'])", ()),
            ("SELECT hrag.grant_reader(current_user)", ()),
            ("SELECT * FROM hrag.repair_integrity()", ()),
            ("ALTER TABLE hrag.nodes DISABLE ROW LEVEL SECURITY", ()),
        ]:
            message = refused(conn, statement, params)
            assert "permission denied" in message or "must be owner" in message, (statement, message)
        # Still only its own collection after all those attempts.
        assert conn.execute("SELECT hrag.visible_collections()").fetchone()[0] == ["a"]
    assert _documents(sql) == before


def test_a_writing_tenant_cannot_write_into_another_collection(
    corpus: Corpus, make_role: Callable[..., str], db_url: str, sql: psycopg.Connection, hrag: HRAG
) -> None:
    tenant = make_role("tenant_rw", ["a"], can_write=True)
    b_doc = sql.execute("SELECT id FROM hrag.documents WHERE collection = 'b'").fetchone()[0]
    b_before = [d for d in _documents(sql) if d[0] == "b"]
    with as_role(db_url, tenant) as conn:
        for statement, params in [
            (("INSERT INTO hrag.documents (id, collection, source, content_hash) "
              "VALUES (gen_random_uuid(), 'b', 'planted.md', 'h')"), ()),
            (("INSERT INTO hrag.nodes (id, document_id, collection, depth, position, kind, seq, subtree_end, "
              "content_hash, content) VALUES (gen_random_uuid(), %s, 'b', 0, 0, 'document', 99, 99, 'h', 'x')"),
             (b_doc,)),
            ("UPDATE hrag.documents SET collection = 'b' WHERE collection = 'a'", ()),
            ("UPDATE hrag.nodes SET collection = 'b' WHERE collection = 'a'", ()),
        ]:
            message = refused(conn, statement, params)
            assert "row-level security policy" in message, (statement, message)
        # b's rows are invisible, so updates and deletes of them touch nothing.
        with conn.transaction():
            assert conn.execute("UPDATE hrag.nodes SET content = 'pwned' WHERE collection = 'b'").rowcount == 0
            assert conn.execute("DELETE FROM hrag.nodes WHERE document_id = %s", (b_doc,)).rowcount == 0
            assert conn.execute("DELETE FROM hrag.documents").rowcount == 1  # its own document only
        conn.commit()

    assert [d for d in _documents(sql) if d[0] == "b"] == b_before
    assert sql.execute("SELECT count(*) FROM hrag.documents WHERE collection = 'a'").fetchone()[0] == 0

    # Through the Python API: ingesting into its own collection works, into 'b' is refused.
    instance = HRAG(login_url(db_url, sql, tenant), embedder=HashingEmbedder())
    try:
        assert instance.ingest_tree(parse_markdown(A_DOC, "a/again.md"), collection="a").status == "created"
        with pytest.raises(Exception, match="row-level security policy"):
            instance.ingest_tree(parse_markdown("# Planted\n\nBRAVO-SECRET overwritten.\n", "b/secrets.md"),
                                 collection="b")
    finally:
        instance.repository.engine.dispose()
        db._engine_for.cache_clear()
    assert [d for d in _documents(sql) if d[0] == "b"] == b_before


# ------------------------------------------------------------- 3. reader role


def test_grant_reader_makes_a_read_only_role_that_sees_every_collection(
    corpus: Corpus, make_role: Callable[..., str], db_url: str, sql: psycopg.Connection
) -> None:
    reader = make_role("reader")
    q, scores = corpus.b_vector, [1.0] * len(corpus.b_leaves)
    before = _documents(sql)
    with as_role(db_url, reader) as conn:
        assert conn.execute("SELECT hrag.visible_collections()").fetchone()[0] is None  # not a tenant
        assert ids_of(conn, "SELECT id FROM hrag.nodes") == corpus.a_ids | corpus.b_ids
        # Every retrieval function runs and finds b's leaf by its own embedding.
        assert corpus.b_leaves[0] in ids_of(conn, "SELECT node_id FROM hrag.search_leaves(%s, 5)", (q,))
        assert corpus.b_leaves[0] in ids_of(
            conn, "SELECT node_id FROM hrag.search_hybrid(%s, %s, 5)", (q, corpus.b_text))
        assert conn.execute("SELECT count(*) FROM hrag.parent_child(%s, 5, 2)", (q,)).fetchone()[0] >= 1
        assert conn.execute("SELECT count(*) FROM hrag.auto_merge(%s, 5)", (q,)).fetchone()[0] >= 1
        assert conn.execute("SELECT count(*) FROM hrag.parent_child_hits(%s, %s::real[])",
                            (corpus.b_leaves, scores)).fetchone()[0] >= 1
        assert conn.execute("SELECT count(*) FROM hrag.auto_merge_hits(%s, %s::real[])",
                            (corpus.b_leaves, scores)).fetchone()[0] >= 1
        assert "BRAVO-SECRET" in conn.execute("SELECT hrag.node_text(%s)", (corpus.b_root,)).fetchone()[0]
        assert conn.execute("SELECT * FROM hrag.check_integrity()").fetchall() == []
        assert conn.execute("SELECT hrag.lexical_terms('vault code')").fetchone()[0]
        for statement in (
            ("INSERT INTO hrag.documents (id, collection, source, content_hash) "
             "VALUES (gen_random_uuid(), 'a', 'x.md', 'h')"),
            "UPDATE hrag.nodes SET content = 'x'",
            "DELETE FROM hrag.documents",
            "SELECT * FROM hrag.repair_integrity()",
            "SELECT hrag.create_tenant_role(current_user, ARRAY['a'])",
            "SELECT hrag.grant_reader(current_user)",
            "CREATE TABLE hrag.evil (x int)",
            "INSERT INTO hrag.tenant_collections VALUES (current_user, 'a')",
        ):
            assert "permission denied" in refused(conn, statement), statement
    assert _documents(sql) == before

    # The Python API as the reader (it checks the schema revision first).
    instance = HRAG(login_url(db_url, sql, reader), embedder=HashingEmbedder())
    try:
        results = instance.parent_child(corpus.b_text)
        assert any("BRAVO-SECRET" in r.content for r in results)
        assert instance.auto_merge(corpus.b_text, collection="b")
        assert instance.repository.stats()["collections"]
    finally:
        instance.repository.engine.dispose()
        db._engine_for.cache_clear()


def test_every_hrag_function_runs_with_the_callers_rights(sql: psycopg.Connection) -> None:
    """SECURITY INVOKER everywhere: row-level security applies inside the functions."""
    rows = sql.execute(
        "SELECT p.proname, p.prosecdef FROM pg_proc p WHERE p.pronamespace = 'hrag'::regnamespace"
    ).fetchall()
    names = {name for name, _ in rows}
    assert names >= RETRIEVAL_FUNCTIONS
    assert [name for name, definer in rows if definer] == []


# --------------------------------------- 4. every function of the catalog


#: How each function of schema hrag is called by the isolation check, keyed by its
#: signature as pg_proc shows it (``oid::regprocedure``).  %(q)s is the exact embedding
#: of one of b's leaves, %(text)s that leaf's text, %(b_leaves)s/%(b_root)s b's node ids:
#: arguments that return b's rows to anyone who can see b.
PROBES: dict[str, str] = {
    "hrag.search_leaves(vector,integer,text,jsonb)":
        "SELECT * FROM hrag.search_leaves(%(q)s, 1000, %(collection)s)",
    "hrag.search_hybrid(vector,text,integer,text,jsonb,real,integer,real)":
        "SELECT * FROM hrag.search_hybrid(%(q)s, %(text)s, 1000, %(collection)s, NULL, 0.5, 1000)",
    "hrag.parent_child(vector,integer,integer,text,jsonb,real)":
        "SELECT * FROM hrag.parent_child(%(q)s, 1000, 1000, %(collection)s)",
    "hrag.auto_merge(vector,integer,real,text,jsonb)":
        "SELECT * FROM hrag.auto_merge(%(q)s, 1000, 0.1, %(collection)s)",
    "hrag.parent_child_hits(uuid[],real[],integer,integer)":
        "SELECT * FROM hrag.parent_child_hits(%(b_leaves)s, %(scores)s::real[], 1000, 1000)",
    "hrag.auto_merge_hits(uuid[],real[],real)":
        "SELECT * FROM hrag.auto_merge_hits(%(b_leaves)s, %(scores)s::real[], 0.1)",
    "hrag.node_text(uuid)": "SELECT hrag.node_text(%(b_root)s)",
    "hrag.check_integrity()": "SELECT * FROM hrag.check_integrity()",  # b's tree is corrupted first
    "hrag.visible_collections()": "SELECT hrag.visible_collections()",
    "hrag.retrieve(vector,text,integer,text,jsonb,integer,real)":
        "SELECT * FROM hrag.retrieve(%(q)s, %(text)s, 100000, %(collection)s)",
    "hrag.retrieve_hits(uuid[],real[],integer)":
        "SELECT * FROM hrag.retrieve_hits(%(b_leaves)s, %(scores)s::real[], 100000)",
    "hrag._subtree_text(uuid,integer,integer)": "SELECT hrag._subtree_text(%(b_doc)s, 0, 1000000)",
    # A count of b's search targets is b's data too: it shows as the marker 'b' when visible.
    "hrag.sample_hits(integer,text,real)":
        "SELECT CASE WHEN hrag.sample_hits(1000, 'b', 1.0) > 1 THEN 'b' END",
    "hrag.node_text(uuid,uuid)": "SELECT hrag.node_text(%(b_doc)s, %(b_root)s)",
    # (revision 0028) navigation: b's outline (all collections, or 'b'), b's root expanded and read.
    "hrag.outline(text,text,integer)": "SELECT * FROM hrag.outline(%(collection)s, NULL, 100)",
    "hrag._outline(text,text,integer)": "SELECT * FROM hrag._outline(%(collection)s, NULL, 100)",
    "hrag.children(uuid)": "SELECT * FROM hrag.children(%(b_root)s)",
    "hrag._children(uuid)": "SELECT * FROM hrag._children(%(b_root)s)",
    "hrag.node(uuid)": "SELECT * FROM hrag.node(%(b_root)s)",
    # May the caller see b: the marker 'b' when it may.
    "hrag._collection_visible(text)": "SELECT CASE WHEN hrag._collection_visible('b') THEN 'b' END",
    # A collection's size is b's data too (revision 0021): the marker 'b' when visible.
    "hrag._collection_size(text[])":
        "SELECT CASE WHEN s.search_targets > 0 THEN 'b' END FROM hrag._collection_size(ARRAY['b']) s",
    # (revision 0029) the question's background is b's data too (the mean direction of b's
    # vectors): the marker 'b' when visible.
    "hrag._question_background(vector,text[])":
        "SELECT CASE WHEN hrag._question_background(%(q)s, ARRAY['b']) <> 0 THEN 'b' END",
    "hrag._term_weights(text[],text)":
        "SELECT * FROM hrag._term_weights(hrag.lexical_terms(%(b_all_text)s), %(collection)s)",
    # The per-document steps and their coordinator loops (revision 0010), asked for b's tree.
    "hrag._document_ids(uuid[])": "SELECT hrag._document_ids(%(b_leaves)s)",
    "hrag._node_rows_document(uuid,uuid[])":
        "SELECT * FROM hrag._node_rows_document(%(b_doc)s, %(b_leaves)s)",
    "hrag._node_rows_each(uuid[],uuid[])": "SELECT * FROM hrag._node_rows_each(%(b_leaves)s, %(b_docs)s)",
    "hrag._auto_merge_document(uuid,uuid[],real[],real)":
        "SELECT * FROM hrag._auto_merge_document(%(b_doc)s, %(b_leaves)s, %(scores)s::real[], 0.1)",
    "hrag._auto_merge_each(uuid[],uuid[],real[],real)":
        "SELECT * FROM hrag._auto_merge_each(%(b_leaves)s, %(b_docs)s, %(scores)s::real[], 0.1)",
    "hrag._auto_merge_ranked(uuid[],uuid[],real[],real)":
        "SELECT * FROM hrag._auto_merge_ranked(%(b_leaves)s, %(b_docs)s, %(scores)s::real[], 0.1)",
    "hrag._parents_document(uuid,uuid[],bigint[])":
        "SELECT * FROM hrag._parents_document(%(b_doc)s, %(b_leaves)s, %(ords)s::bigint[])",
    "hrag._parents_each(uuid[],uuid[])": "SELECT * FROM hrag._parents_each(%(b_leaves)s, %(b_docs)s)",
    "hrag._parent_child_hits(uuid[],uuid[],real[],integer,integer)":
        "SELECT * FROM hrag._parent_child_hits(%(b_leaves)s, %(b_docs)s, %(scores)s::real[], 1000, 1000)",
    "hrag._budget_candidates_document(uuid,uuid[],real[],double precision[])":
        "SELECT * FROM hrag._budget_candidates_document(%(b_doc)s, %(b_leaves)s, %(scores)s::real[], "
        "%(scores)s::float8[])",
    "hrag._budget_candidates_each(uuid[],uuid[],real[],double precision[])":
        "SELECT * FROM hrag._budget_candidates_each(%(b_leaves)s, %(b_docs)s, %(scores)s::real[], "
        "%(scores)s::float8[])",
    "hrag._budget_rows_document(uuid,uuid[],text[],integer[],uuid[],real[],boolean)":
        "SELECT * FROM hrag._budget_rows_document(%(b_doc)s, ARRAY[%(b_root)s]::uuid[], ARRAY['merged'], "
        "ARRAY[1], %(b_leaves)s, %(scores)s::real[], false)",
    "hrag._budget_rows_each(uuid[],uuid[],text[],integer[],uuid[],uuid[],real[],boolean)":
        "SELECT * FROM hrag._budget_rows_each(ARRAY[%(b_root)s]::uuid[], ARRAY[%(b_doc)s]::uuid[], "
        "ARRAY['merged'], ARRAY[1], %(b_leaves)s, %(b_docs)s, %(scores)s::real[], false)",
    "hrag._retrieve_hits(uuid[],uuid[],real[],integer)":
        "SELECT * FROM hrag._retrieve_hits(%(b_leaves)s, %(b_docs)s, %(scores)s::real[], 100000)",
    # (revision 0026) a result too large for the budget, replaced by the best part among b's hits:
    # the part is b's data (the result ids it names are the caller's own, here a's root).
    "hrag._fit_budget(uuid[],integer[],uuid[],uuid[],real[],integer[],integer)":
        "SELECT * FROM hrag._fit_budget(ARRAY[%(a_root)s]::uuid[], ARRAY[100000], %(b_leaves)s, %(b_docs)s, "
        "%(scores)s::real[], %(ones)s::int[], 99999)",
}

#: Functions a tenant may not call at all: each must be refused (they would widen access or
#: rewrite other tenants' rows if it could call them).
REFUSED: dict[str, str] = {
    "hrag.create_tenant_role(name,text[],boolean)": "SELECT hrag.create_tenant_role(current_user, ARRAY['b'], true)",
    "hrag.grant_reader(name)": "SELECT hrag.grant_reader(current_user)",
    "hrag.repair_integrity()": "SELECT * FROM hrag.repair_integrity()",
    "hrag.refresh_document_terms(uuid)": "SELECT hrag.refresh_document_terms(%(b_doc)s)",
    "hrag._repair_document(uuid)": "SELECT * FROM hrag._repair_document(%(b_doc)s)",
    "hrag._create_vector_index()": "SELECT hrag._create_vector_index()",
    # (revision 0021) the statistics' writers: tables a reader may not write, a rebuild only the owner runs
    "hrag._add_term_counts(text[],text[],bigint[])":
        "SELECT hrag._add_term_counts(ARRAY['b'], ARRAY['bravo'], ARRAY[-1]::bigint[])",
    "hrag._keep_collection_statistics()": "SELECT hrag._keep_collection_statistics()",
    "hrag._drop_statistics_triggers()": "SELECT hrag._drop_statistics_triggers()",
    # (revision 0025) the reembed switch locks the model record FOR UPDATE: a reader may not
    "hrag.finish_reembed(text)": "SELECT hrag.finish_reembed('b')",
}

#: Trigger functions: PostgreSQL refuses a direct call; they run only as their triggers, inside
#: the writes a role may make (and see only that write's rows).
TRIGGERS: dict[str, str] = {
    "hrag._document_terms_changed()": "keeps hrag.collection_terms from each write of hrag.document_terms",
    "hrag._documents_changed()": "keeps hrag.collection_sizes from each write of hrag.documents",
}

#: Functions that return only their argument, or refuse (revision 0030): what they could tell of b
#: is whether they refuse on b's behalf.  A tenant of b is refused (b's record names another model);
#: a tenant of a gets its argument back, having learnt nothing of b.
REFUSES_FOR_B: dict[str, str] = {
    "hrag._checked_collection(text,text,text)": "SELECT hrag._checked_collection('b', 'no-such-model', '')",
}

#: Functions that cannot return anyone's rows, and why.  Each must be IMMUTABLE (so it
#: reads no table) unless listed in READS_NO_TABLE: a change that made one read tables fails.
READS_NO_TABLE = {"hrag._vector_index_state()", "hrag._drop_invalid_vector_indexes()",
                  "hrag._setting(text,double precision)", "hrag._ef_search(integer)", "hrag._is_member_of(name)",
                  "hrag.distribute(integer)", "hrag._statistics_per_document()"}
NO_ROWS: dict[str, str] = {
    "hrag._setting(text,double precision)": "reads one session setting (current_setting), no table",
    "hrag._ef_search(integer)": "a number from its argument and two session settings, no table",
    "hrag._is_member_of(name)": "reads pg_roles (is the caller a member of a role), no tenant rows",
    "hrag.distribute(integer)": ("returns table names and what it did; refuses without Citus, and on Citus "
                                 "distributing a table needs its owner"),
    "hrag._vector_index_state()": "reads only pg_catalog (is the HNSW index valid), no table rows",
    "hrag._drop_invalid_vector_indexes()": "returns nothing; drops only invalid indexes, which needs the owner",
    "hrag._check_count(integer,text,integer)": "argument validator: raises or returns nothing",
    "hrag._check_hits(uuid[],real[])": "argument validator of two arrays the caller passes",
    "hrag._check_query(vector,jsonb)": "argument validator of the caller's query vector and filter",
    "hrag._check_threshold(real)": "argument validator of a number",
    "hrag.lexical_terms(text)": "tokenises its text argument",
    "hrag.node_lexical_terms(text[],text,jsonb)": "tokenises the heading path, text and metadata it is given",
    "hrag.term_hash(text)": "hashes its text argument",
    "hrag.term_hashes(text[])": "hashes the terms it is given",
    "hrag._statistics_per_document()": "reads only pg_catalog (is hrag.document_terms distributed by Citus)",
}


def _leaks(rows: list[tuple[object, ...]], b_ids: set[uuid.UUID]) -> list[object]:
    """Every value in ``rows`` that belongs to collection b: its ids, its text, its name."""
    found: list[object] = []

    def visit(value: object) -> None:
        if isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif (isinstance(value, uuid.UUID) and value in b_ids) or (
                isinstance(value, str) and ("bravo" in value.lower() or value == "b")):
            found.append(value)

    visit(rows)
    return found


def test_no_function_of_schema_hrag_returns_another_tenants_rows_listed_from_the_catalog(
    corpus: Corpus, make_role: Callable[..., str], db_url: str, sql: psycopg.Connection
) -> None:
    """Every function in pg_proc for schema hrag is probed as tenant a with b's data as arguments.

    The list is the catalog's, not a hand-kept one: a function missing from
    PROBES/REFUSED/NO_ROWS fails the test by name.  Each probe is first run as
    a tenant of both a and b, where it must return b's rows (so the
    arguments really ask for them), then as the tenant of a, where it must
    return nothing of b.  b's tree is corrupted (a wrong child count) so
    ``check_integrity`` has b problems to hide; a's tree too, so tenant a's
    check is seen to work.
    """
    catalog = {r[0]: r[1] for r in sql.execute(
        "SELECT p.oid::regprocedure::text, p.provolatile FROM pg_proc p "
        "WHERE p.pronamespace = 'hrag'::regnamespace")}
    listed = PROBES.keys() | REFUSED.keys() | NO_ROWS.keys() | TRIGGERS.keys() | REFUSES_FOR_B.keys()
    assert not catalog.keys() - listed, (
        f"functions of schema hrag not covered by the tenant isolation check: {sorted(catalog.keys() - listed)}; "
        "add each to PROBES (with arguments that return other tenants' rows), REFUSED, REFUSES_FOR_B, NO_ROWS "
        "or TRIGGERS (with why)")
    assert not listed - catalog.keys(), f"listed but not in the catalog: {sorted(listed - catalog.keys())}"
    pure = [name for name in NO_ROWS if name not in READS_NO_TABLE]
    assert {name: catalog[name] for name in pure} == dict.fromkeys(pure, "i"), "a NO_ROWS function reads tables"

    b_doc = sql.execute("SELECT id FROM hrag.documents WHERE collection = 'b'").fetchone()[0]
    b_ids = corpus.b_ids | {b_doc}
    sql.execute("UPDATE hrag.nodes SET child_count = child_count + 7 WHERE id = ANY(%s)",
                ([corpus.b_root, corpus.a_root],))
    tenant, both = make_role("tenant_a", ["a"]), make_role("tenant_ab", ["a", "b"])
    params: dict[str, object] = {
        "q": corpus.b_vector, "text": corpus.b_text, "b_leaves": corpus.b_leaves, "b_root": corpus.b_root,
        "scores": [1.0] * len(corpus.b_leaves), "b_doc": b_doc, "b_all_text": B_DOC,
        "b_docs": [b_doc] * len(corpus.b_leaves), "ords": list(range(1, len(corpus.b_leaves) + 1)),
        "a_root": corpus.a_root, "ones": [1] * len(corpus.b_leaves),
    }
    probes = [(name, statement, collection) for name, statement in sorted(PROBES.items())
              for collection in ((None, "b") if "%(collection)s" in statement else (None,))]
    with as_role(db_url, both) as conn:
        for name, statement, collection in probes:
            rows = conn.execute(statement, {**params, "collection": collection}).fetchall()
            assert _leaks(rows, b_ids), f"{name} (collection {collection}) returns none of b's rows even to a " \
                                        "tenant of b: the probe proves nothing"
        for statement in REFUSES_FOR_B.values():
            with pytest.raises(psycopg.Error, match="collection b holds vectors of"), conn.transaction():
                conn.execute(statement)
    with as_role(db_url, tenant) as conn:
        for name, statement, collection in probes:
            rows = conn.execute(statement, {**params, "collection": collection}).fetchall()
            assert _leaks(rows, b_ids) == [], f"{name} (collection {collection}) returned b's data to a tenant of a"
        for name, statement in sorted(REFUSES_FOR_B.items()):
            assert conn.execute(statement).fetchall() == [("b",)], f"{name} told a tenant of a something of b"
        for name, statement in sorted(REFUSED.items()):
            message = refused(conn, statement, params)
            assert "permission denied" in message or "must be owner" in message, (name, message)
        for name in sorted(TRIGGERS):
            with pytest.raises(psycopg.errors.FeatureNotSupported, match="can only be called as triggers"), \
                    conn.transaction():
                conn.execute(f"SELECT {name}")
        # check_integrity as tenant a: exactly a's problem, nothing of b's.
        problems = conn.execute("SELECT problem, node_id FROM hrag.check_integrity()").fetchall()
        assert problems == [("wrong_child_count", corpus.a_root)]
    with as_role(db_url, both) as conn:
        problems = conn.execute("SELECT problem, node_id FROM hrag.check_integrity() ORDER BY node_id").fetchall()
        assert sorted(problems) == sorted([("wrong_child_count", corpus.a_root), ("wrong_child_count", corpus.b_root)])

    # The Python API as tenant a (what `hrag check` prints): a's problem only.
    instance = HRAG(login_url(db_url, sql, tenant), embedder=HashingEmbedder())
    try:
        assert [(p["problem"], p["node_id"]) for p in instance.repository.check_integrity()] == [
            ("wrong_child_count", corpus.a_root)]
    finally:
        instance.repository.engine.dispose()
        db._engine_for.cache_clear()


def test_dropping_one_tenant_role_leaves_the_other_roles_working(
    corpus: Corpus, make_role: Callable[..., str], db_url: str, sql: psycopg.Connection
) -> None:
    """Regression: the binding of a dropped role made every other tenant's and reader's reads fail.

    ``hrag.tenant_collections`` keeps the (role name, collection) rows of a
    dropped role; its policy called ``pg_has_role(current_user, role_name,
    'MEMBER')``, which raises "role ... does not exist" for them, so every
    query of every non-owner role on documents/nodes failed.
    """
    tenant, reader = make_role("tenant_a", ["a"]), make_role("reader")
    doomed = f"hrag_tenant_gone_{uuid.uuid4().hex[:10]}"
    sql.execute("SELECT hrag.create_tenant_role(%s, ARRAY['b'])", (doomed,))
    sql.execute(f'DROP OWNED BY "{doomed}"')
    sql.execute(f'DROP ROLE "{doomed}"')
    assert sql.execute("SELECT count(*) FROM hrag.tenant_collections WHERE role_name = %s",
                       (doomed,)).fetchone()[0] == 1  # the binding outlives the role
    with as_role(db_url, tenant) as conn:
        assert ids_of(conn, "SELECT id FROM hrag.nodes") == corpus.a_ids
        assert ids_of(conn, "SELECT node_id FROM hrag.search_leaves(%s, 50)", (corpus.b_vector,)) <= corpus.a_ids
    with as_role(db_url, reader) as conn:
        assert ids_of(conn, "SELECT id FROM hrag.nodes") == corpus.a_ids | corpus.b_ids


def test_a_tenant_sees_the_model_records_and_reembed_rows_of_its_collections_only(
    corpus: Corpus, make_role: Callable[..., str], db_url: str, sql: psycopg.Connection
) -> None:
    sql.execute("INSERT INTO hrag.reembed_documents (document_id, collection, fingerprint, document_hash, "
                "new_document_hash, total_tokens) SELECT id, collection, 'f', content_hash, '', 0 "
                "FROM hrag.documents")
    tables = ("hrag.collection_models", "hrag.reembed_documents")
    for table in tables:
        assert {r[0] for r in sql.execute(f"SELECT collection FROM {table}")} == {"a", "b"}
    tenant = make_role("tenant_a", ["a"], can_write=True)
    with as_role(db_url, tenant) as conn:
        for table in tables:
            assert [r[0] for r in conn.execute(f"SELECT collection FROM {table}")] == ["a"], table
        assert conn.execute("UPDATE hrag.collection_models SET next_model = '{}' WHERE collection = 'b'"
                            ).rowcount == 0
