"""hrag-pg on a real Citus cluster: distribute, ingest, re-ingest, delete, and what the functions do there.

The cluster (coordinator + 2 workers, see conftest.py) is migrated and
distributed once per session; each test writes its own collection.
"""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

import psycopg
import pytest
from pgvector.psycopg import register_vector
from typer.testing import CliRunner

from hrag_pg import db, migrate
from hrag_pg.api import HRAG
from hrag_pg.cli import app
from hrag_pg.distribute import distribute
from hrag_pg.errors import ConfigurationError
from tests.embedders import HashingEmbedder

EXAMPLES = Path(migrate.MIGRATIONS_DIR).parent / "examples"
QUESTION = "試用期間中の通勤手当と昼食手当 allowance during probation"


def _libpq(url: str) -> str:
    return db.libpq_url(url)


def _write_corpus(tmp_path: Path, count: int) -> Path:
    """``count`` small Markdown documents with two sections of three paragraphs each."""
    for i in range(count):
        sections = "\n\n".join(
            f"## Section {s} of document {i}\n\n"
            + "\n\n".join(f"Paragraph {p} of section {s} in document {i} talks about topic {(i + p) % 7}."
                          for p in range(3))
            for s in range(2)
        )
        (tmp_path / f"doc{i:02}.md").write_text(f"# Document {i}\n\n{sections}\n", encoding="utf-8")
    return tmp_path


def _ingest(url: str, paths: list[Path], collection: str) -> list[str]:
    return _ingest_with(url, paths, collection, HashingEmbedder())


def _ingest_with(url: str, paths: list[Path], collection: str, embedder: HashingEmbedder) -> list[str]:
    hrag = HRAG(url, embedder=embedder)
    report = hrag.ingest(paths, collection=collection, stop_on_error=True)
    return [r.status for r in report.results]


def _plan(conn: psycopg.Connection, sql: str, args: tuple[object, ...] = ()) -> str:
    return "\n".join(row[0] for row in conn.execute("EXPLAIN (COSTS OFF) " + sql, args))


# ------------------------------------------------------------------ distribute


def test_distribute_makes_documents_and_nodes_colocated_and_small_tables_reference_tables(cluster_url: str) -> None:
    with psycopg.connect(_libpq(cluster_url)) as conn:
        tables: dict[str, str] = dict(conn.execute(
            "SELECT table_name::text, citus_table_type || ':' || distribution_column || ':' || colocation_id "
            "FROM citus_tables WHERE table_name::text LIKE 'hrag.%'").fetchall())
    assert set(tables) == {"hrag.config", "hrag.tenant_collections", "hrag.documents", "hrag.nodes",
                           "hrag.document_terms", "hrag.collection_models", "hrag.reembed_documents",
                           "hrag.reembed_nodes"}
    assert tables["hrag.config"].startswith("reference:")
    assert tables["hrag.tenant_collections"].startswith("reference:")
    assert tables["hrag.collection_models"].startswith("reference:")
    doc_type, doc_column, doc_colocation = tables["hrag.documents"].split(":")
    node_type, node_column, node_colocation = tables["hrag.nodes"].split(":")
    assert (doc_type, doc_column, node_type, node_column) == ("distributed", "id", "distributed", "document_id")
    assert doc_colocation == node_colocation
    assert tables["hrag.document_terms"] == f"distributed:document_id:{doc_colocation}"
    assert tables["hrag.reembed_documents"] == f"distributed:document_id:{doc_colocation}"
    assert tables["hrag.reembed_nodes"] == f"distributed:document_id:{doc_colocation}"


def test_distribute_again_changes_nothing_and_says_so(cluster_url: str) -> None:
    rows = distribute(cluster_url)
    assert {r.action for r in rows} == {"already distributed"}
    assert [r.name for r in rows] == ["hrag.config", "hrag.tenant_collections", "hrag.documents", "hrag.nodes",
                                      "hrag.document_terms", "hrag.collection_models", "hrag.reembed_documents",
                                      "hrag.reembed_nodes", *PER_DOCUMENT_FUNCTIONS]


def test_hrag_distribute_command_reports_each_table(cluster_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HRAG_DATABASE_URL", cluster_url)
    result = CliRunner().invoke(app, ["distribute", "--json"])
    assert result.exit_code == 0, result.output
    assert {row["name"]: row["action"] for row in json.loads(result.output)}["hrag.nodes"] == "already distributed"


def test_distribute_refuses_in_one_sentence_on_a_server_without_citus(db_url: str) -> None:
    with pytest.raises(ConfigurationError, match="has no Citus extension"):
        distribute(db_url)
    with psycopg.connect(_libpq(db_url)) as conn, pytest.raises(psycopg.errors.FeatureNotSupported,
                                                                match="this server has no Citus extension"):
        conn.execute("SELECT * FROM hrag.distribute()")


# ------------------------------------------------------------------ writes


def test_ingested_documents_land_on_both_workers_with_each_tree_on_its_documents_shard(
    cluster_url: str, tmp_path: Path,
) -> None:
    statuses = _ingest(cluster_url, [_write_corpus(tmp_path, 12)], "spread")
    assert statuses == ["created"] * 12
    with psycopg.connect(_libpq(cluster_url)) as conn:
        workers = conn.execute(
            "SELECT DISTINCT s.nodename || ':' || s.nodeport FROM hrag.documents d "
            "JOIN citus_shards s ON s.shardid = get_shard_id_for_distribution_column('hrag.documents', d.id) "
            "WHERE d.collection = 'spread'").fetchall()
        assert len(workers) == 2
        # every node sits on the same worker as its document (colocation, one shard per tree)
        misplaced = conn.execute(
            "SELECT count(*) FROM hrag.nodes n JOIN hrag.documents d ON d.id = n.document_id "
            "WHERE n.collection = 'spread' AND "
            "(SELECT nodeport FROM citus_shards WHERE shardid = get_shard_id_for_distribution_column("
            "'hrag.nodes', n.document_id)) <> "
            "(SELECT nodeport FROM citus_shards WHERE shardid = get_shard_id_for_distribution_column("
            "'hrag.documents', d.id))").fetchone()
        assert misplaced == (0,)
        nodes = conn.execute("SELECT count(*) FROM hrag.nodes WHERE collection = 'spread'").fetchone()
        assert nodes is not None and nodes[0] > 12 * 7


def test_a_collection_records_its_model_refuses_another_and_reembeds_on_the_cluster(
        cluster_url: str, tmp_path: Path) -> None:
    from hrag_pg.errors import ModelMismatchError
    from tests.embedders import SaltedHashingEmbedder

    corpus = _write_corpus(tmp_path, 4)
    assert _ingest(cluster_url, [corpus], "models") == ["created"] * 4
    hrag = HRAG(cluster_url, embedder=HashingEmbedder())
    assert hrag.collection_models("models")["models"].name == "hashing-test"
    with pytest.raises(ModelMismatchError):
        HRAG(cluster_url, embedder=SaltedHashingEmbedder()).retrieve("topic", collection="models")
    report = hrag.reembed("models", SaltedHashingEmbedder())
    assert (report.status, report.documents, report.prepared) == ("switched", 4, 4)
    salted = HRAG(cluster_url, embedder=SaltedHashingEmbedder())
    assert salted.collection_models("models")["models"].name == "hashing-salted"
    assert salted.retrieve("topic", collection="models")
    assert _ingest_with(cluster_url, [corpus], "models", SaltedHashingEmbedder()) == ["unchanged"] * 4
    with psycopg.connect(_libpq(cluster_url)) as conn:
        assert conn.execute("SELECT count(*) FROM hrag.reembed_nodes").fetchone() == (0,)


def test_re_ingest_and_delete_work_on_the_cluster(cluster_url: str, tmp_path: Path) -> None:
    corpus = _write_corpus(tmp_path, 3)
    assert _ingest(cluster_url, [corpus], "rewrite") == ["created"] * 3
    assert _ingest(cluster_url, [corpus], "rewrite") == ["unchanged"] * 3
    edited = corpus / "doc01.md"
    edited.write_text(edited.read_text().replace("topic", "subject", 1))  # same shape: an in-place update
    assert _ingest(cluster_url, [edited], "rewrite") == ["updated"]
    restructured = corpus / "doc02.md"
    restructured.write_text(restructured.read_text() + "\n## A new section\n\nWith a new paragraph.\n")
    assert _ingest(cluster_url, [restructured], "rewrite") == ["updated"]

    hrag = HRAG(cluster_url, embedder=HashingEmbedder())
    assert hrag.delete(str(corpus / "doc00.md"), collection="rewrite") or hrag.delete("doc00.md", "rewrite")
    with psycopg.connect(_libpq(cluster_url)) as conn:
        sources = [r[0] for r in conn.execute(
            "SELECT source FROM hrag.documents WHERE collection = 'rewrite' ORDER BY source")]
        assert len(sources) == 2 and not any(s.endswith("doc00.md") for s in sources)
        assert conn.execute(
            "SELECT count(*) FROM hrag.nodes WHERE collection = 'rewrite' AND content LIKE '%%document 0.%%'"
        ).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM hrag.nodes WHERE collection = 'rewrite' "
                            "AND content LIKE '%%subject%%'").fetchone() == (1,)


# ------------------------------------------------------------------ reads
# Every retrieval function on the cluster, compared with a single node holding
# the same documents: same rows, same order, scores within float tolerance.

#: The per-document steps hrag.distribute() makes distributed functions (delegated to one worker).
PER_DOCUMENT_FUNCTIONS = [
    "hrag.node_text(uuid, uuid)",
    "hrag._node_rows_document(uuid, uuid[])",
    "hrag._auto_merge_document(uuid, uuid[], real[], real)",
    "hrag._parents_document(uuid, uuid[], bigint[])",
    "hrag._budget_candidates_document(uuid, uuid[], real[], double precision[])",
    "hrag._budget_rows_document(uuid, uuid[], text[], integer[], uuid[], real[], boolean)",
]

CALLS: dict[str, str] = {
    "search_leaves": "SELECT * FROM hrag.search_leaves(%(q)s, 8, %(c)s)",
    "search_hybrid": "SELECT * FROM hrag.search_hybrid(%(q)s, %(t)s, 8, %(c)s)",
    "parent_child": "SELECT * FROM hrag.parent_child(%(q)s, 8, 3, %(c)s)",
    "parent_child_hits": "SELECT * FROM hrag.parent_child_hits(%(ids)s::uuid[], %(scores)s::real[], 3)",
    "auto_merge": "SELECT * FROM hrag.auto_merge(%(q)s, 8, 0.5, %(c)s)",
    "auto_merge_hits": "SELECT * FROM hrag.auto_merge_hits(%(ids)s::uuid[], %(scores)s::real[], 0.5)",
    "retrieve": "SELECT * FROM hrag.retrieve(%(q)s, %(t)s, 800, %(c)s)",
    "retrieve_hits": "SELECT * FROM hrag.retrieve_hits(%(ids)s::uuid[], %(scores)s::real[], 800)",
    "node_text": "SELECT hrag.node_text(%(node)s)",
    "node_text_in_document": "SELECT hrag.node_text(%(doc)s, %(node)s)",
    # (revision 0028) navigation: the outline of the collection, one node expanded and read
    "outline": "SELECT * FROM hrag.outline(%(c)s, max_depth => 5)",
    "children": "SELECT * FROM hrag.children(%(node)s)",
    "node": "SELECT * FROM hrag.node(%(node)s)",
}


def _results(url: str, name: str, collection: str) -> list[tuple[object, ...]]:
    embedder = HashingEmbedder()
    with psycopg.connect(_libpq(url)) as conn:
        register_vector(conn)
        q = embedder.vector(QUESTION)
        hits = conn.execute("SELECT node_id, score FROM hrag.search_leaves(%s, 8, %s)", (q, collection)).fetchall()
        node, doc = conn.execute(
            "SELECT id, document_id FROM hrag.nodes WHERE collection = %s AND depth = 1 ORDER BY id LIMIT 1",
            (collection,)).fetchone()  # type: ignore[misc]
        args = {"q": q, "t": QUESTION, "c": collection, "ids": [h[0] for h in hits],
                "scores": [h[1] for h in hits], "node": node, "doc": doc}
        return [tuple(round(v, 5) if isinstance(v, float) else v for v in row)
                for row in conn.execute(CALLS[name], args).fetchall()]


@pytest.fixture(scope="module")
def same_documents_on_both(cluster_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The bundled examples in collection 'compare' on the cluster; the single node gets them per test."""
    assert _ingest(cluster_url, [EXAMPLES], "compare") == ["created"] * 3
    return "compare"


@pytest.mark.parametrize("name", list(CALLS))
def test_retrieval_function_on_the_cluster_matches_a_single_node(
    name: str, cluster_url: str, db_url: str, same_documents_on_both: str,
) -> None:
    assert _ingest(db_url, [EXAMPLES], same_documents_on_both) == ["created"] * 3
    single = _results(db_url, name, same_documents_on_both)
    assert single, f"{name} returned nothing on the single node: the comparison proves nothing"
    assert _results(cluster_url, name, same_documents_on_both) == single


HIT_CALLS: dict[str, str] = {
    "auto_merge_hits": "SELECT * FROM hrag.auto_merge_hits(%s::uuid[], %s::real[], %s::real)",
    "parent_child_hits": "SELECT * FROM hrag.parent_child_hits(%s::uuid[], %s::real[], %s::int, %s::int)",
    "retrieve_hits": "SELECT * FROM hrag.retrieve_hits(%s::uuid[], %s::real[], %s::int)",
}


def _hit_sets(url: str, collection: str, count: int) -> list[tuple[str, tuple[object, ...]]]:
    """Random hit sets over the collection's nodes (leaves and inner nodes, duplicates, several documents)."""
    with psycopg.connect(_libpq(url)) as conn:
        leaves = [r[0] for r in conn.execute("SELECT id FROM hrag.nodes WHERE collection = %s "
                                             "AND embedding IS NOT NULL ORDER BY id", (collection,))]
        every = [r[0] for r in conn.execute("SELECT id FROM hrag.nodes WHERE collection = %s ORDER BY id",
                                            (collection,))]
    rnd = random.Random(13)
    calls: list[tuple[str, tuple[object, ...]]] = []
    for i in range(count):
        ids = rnd.sample(every if i % 3 == 0 else leaves, rnd.randint(1, 25))
        ids += ids[:2] if i % 5 == 0 else []
        scores = [round(rnd.uniform(0.2, 0.9), 4) for _ in ids]
        calls.append((HIT_CALLS["auto_merge_hits"], (ids, scores, (0.3, 0.5, 0.7)[i % 3])))
        calls.append((HIT_CALLS["parent_child_hits"], (ids, scores, 1 + i % 5, None if i % 2 else 5)))
        calls.append((HIT_CALLS["retrieve_hits"], (ids, scores, (60, 300, 800, 2000)[i % 4])))
    return calls


def _rows(url: str, calls: list[tuple[str, tuple[object, ...]]]) -> list[list[tuple[object, ...]]]:
    with psycopg.connect(_libpq(url)) as conn:
        return [[tuple(round(v, 5) if isinstance(v, float) else v for v in row)
                 for row in conn.execute(sql, args).fetchall()] for sql, args in calls]


def test_merges_and_expansions_of_random_hit_sets_match_a_single_node_row_for_row(
    cluster_url: str, db_url: str, same_documents_on_both: str,
) -> None:
    """150 hit sets (1-27 hits over 3 documents, inner nodes, duplicates) through the three *_hits functions."""
    assert _ingest(db_url, [EXAMPLES], same_documents_on_both) == ["created"] * 3
    calls = _hit_sets(db_url, same_documents_on_both, 50)
    single = _rows(db_url, calls)
    assert sum(1 for rows in single if len(rows) > 1) > 50, "the hit sets hardly ever give several rows"
    assert _rows(cluster_url, calls) == single


def test_the_python_api_retrieves_the_same_on_the_cluster_as_on_a_single_node(
    cluster_url: str, db_url: str, same_documents_on_both: str,
) -> None:
    """The statements of queries.py (hybrid and vector-only), the API's parent_child, auto_merge and retrieve."""
    assert _ingest(db_url, [EXAMPLES], same_documents_on_both) == ["created"] * 3
    questions = [QUESTION, "BYOD anti-virus obligations 第8条", "payment day salary"]

    def answers(url: str) -> list[str]:
        hrag = HRAG(url, embedder=HashingEmbedder())
        out = []
        for question in questions:
            for weight in (0.0, 0.3):
                for mode in (hrag.parent_child, hrag.auto_merge, hrag.retrieve):
                    results = mode(question, collection=same_documents_on_both, lexical_weight=weight)
                    assert results, f"{mode.__name__} found nothing for {question!r}"
                    out.append(repr([r.model_dump() if hasattr(r, "model_dump") else r for r in results]))
        return out

    assert answers(cluster_url) == answers(db_url)


def test_check_integrity_reports_the_same_problems_on_the_cluster(
    cluster_url: str, db_url: str, tmp_path: Path,
) -> None:
    corpus = _write_corpus(tmp_path, 3)
    broken = {"child_count": "UPDATE hrag.nodes SET child_count = child_count + 1 WHERE id = %s",
              "subtree_end": "UPDATE hrag.nodes SET subtree_end = subtree_end + 100 WHERE id = %s",
              "embedding": "UPDATE hrag.nodes SET embedding = NULL WHERE id = %s"}
    found = []
    for url in (db_url, cluster_url):
        assert _ingest(url, [corpus], "broken") == ["created"] * 3
        with psycopg.connect(_libpq(url)) as conn:
            inner, section, leaf = (conn.execute(
                f"SELECT id FROM hrag.nodes WHERE collection = 'broken' AND {where} ORDER BY id LIMIT 1"
            ).fetchone()[0] for where in ("child_count > 0", "depth = 1", "embedding IS NOT NULL"))  # type: ignore[index]
            for (_, statement), node in zip(broken.items(), (inner, section, leaf), strict=True):
                conn.execute(statement, (node,))
            found.append(sorted(conn.execute("SELECT * FROM hrag.check_integrity()").fetchall()))
            conn.rollback()  # the cluster's other tests see healthy trees
    single, cluster = found
    assert {row[0] for row in single} >= {"wrong_child_count", "broken_ordering", "leaf_without_embedding"}
    assert cluster == single


def test_repair_fixes_the_same_problems_on_the_cluster_as_on_a_single_node(
    cluster_url: str, db_url: str, tmp_path: Path,
) -> None:
    """Counts, ranges and depths broken in two documents; repair leaves only what it cannot fix."""
    corpus = _write_corpus(tmp_path, 3)
    repaired, left = [], []
    for url in (db_url, cluster_url):
        assert _ingest(url, [corpus], "torn") == ["created"] * 3
        with psycopg.connect(_libpq(url)) as conn:
            docs = [r[0] for r in conn.execute(
                "SELECT id FROM hrag.documents WHERE collection = 'torn' ORDER BY source LIMIT 2").fetchall()]
            for doc in docs:
                conn.execute("UPDATE hrag.nodes SET child_count = child_count + 1 WHERE id = (SELECT id FROM "
                             "hrag.nodes WHERE document_id = %s AND child_count > 0 ORDER BY id LIMIT 1)", (doc,))
                conn.execute("UPDATE hrag.nodes SET subtree_end = subtree_end + 100 WHERE id = (SELECT id FROM "
                             "hrag.nodes WHERE document_id = %s AND depth = 1 ORDER BY id LIMIT 1)", (doc,))
            conn.execute("UPDATE hrag.nodes SET embedding = NULL WHERE id = (SELECT id FROM hrag.nodes "
                         "WHERE collection = 'torn' AND embedding IS NOT NULL ORDER BY id LIMIT 1)")
            repaired.append(dict(conn.execute("SELECT * FROM hrag.repair_integrity()").fetchall()))
            left.append(sorted(r[0] for r in conn.execute("SELECT * FROM hrag.check_integrity()").fetchall()))
            conn.rollback()  # the cluster's other tests see healthy trees
    single, cluster = repaired
    assert single["wrong_child_count"] == 2 and single["broken_ordering"] == 2, single
    assert cluster == single
    assert left == [["leaf_without_embedding"], ["leaf_without_embedding"]], "only re-ingestion fixes that"


def test_a_lookup_carrying_the_document_id_is_routed_to_one_shard_and_a_bare_id_fans_out(
    cluster_url: str, same_documents_on_both: str,
) -> None:
    with psycopg.connect(_libpq(cluster_url)) as conn:
        node, doc = conn.execute("SELECT id, document_id FROM hrag.nodes WHERE collection = 'compare' "
                                 "AND depth = 1 LIMIT 1").fetchone()  # type: ignore[misc]
        shards = conn.execute("SELECT count(*) FROM citus_shards WHERE table_name = 'hrag.nodes'::regclass"
                              ).fetchone()[0]  # type: ignore[index]
        assert f"Task Count: {shards}" in _plan(conn, "SELECT * FROM hrag.nodes WHERE id = %s", (node,))
        assert "Task Count: 1" in _plan(conn, "SELECT * FROM hrag.nodes WHERE document_id = %s AND id = %s",
                                        (doc, node))
        # the whole call is delegated to the worker holding the document (a distributed function)
        assert "Task Count: 1" in _plan(conn, f"SELECT hrag.node_text('{doc}'::uuid, '{node}'::uuid)")
        assert conn.execute("SELECT hrag.node_text(%s::uuid, %s::uuid) = (SELECT hrag._subtree_text("
                            "n.document_id, n.seq, n.subtree_end) FROM hrag.nodes n WHERE n.document_id = %s "
                            "AND n.id = %s)", (doc, node, doc, node)).fetchone() == (True,)
        assert conn.execute("SELECT hrag.node_text(%s::uuid, %s::uuid)", (uuid.uuid4(), node)).fetchone() == (None,)


def test_each_per_document_step_is_delegated_to_the_one_worker_holding_the_document(
    cluster_url: str, same_documents_on_both: str,
) -> None:
    """EXPLAIN of a per-document step: one task, the function itself run on the worker; and a merge over
    hits from every document delegates one call per document (Citus's delegation log)."""
    with psycopg.connect(_libpq(cluster_url)) as conn:
        hits = conn.execute("SELECT id, document_id FROM hrag.nodes WHERE collection = 'compare' "
                            "AND embedding IS NOT NULL ORDER BY id").fetchall()
        doc = hits[0][1]
        ids = [h[0] for h in hits if h[1] == doc][:6]
        shards = conn.execute("SELECT count(*) FROM citus_shards WHERE table_name = 'hrag.nodes'::regclass"
                              ).fetchone()[0]  # type: ignore[index]
        assert shards > 1
        for step in (f"hrag._auto_merge_document('{doc}', %s::uuid[], %s::real[], 0.5)",
                     f"hrag._budget_candidates_document('{doc}', %s::uuid[], %s::real[], %s::float8[])",
                     f"hrag._parents_document('{doc}', %s::uuid[], %s::bigint[])",
                     f"hrag._node_rows_document('{doc}', %s::uuid[])"):
            args = (ids, [0.5] * len(ids), [1.0] * len(ids))[:step.count("%s")]
            if "bigint" in step:
                args = (ids, list(range(1, len(ids) + 1)))
            plan = _plan(conn, "SELECT * FROM " + step, args)
            assert "Task Count: 1" in plan, plan
            assert "Function Scan on " + step.split("(")[0].removeprefix("hrag.") in plan, plan
        # the recursive climb itself, outside the function: routed to one shard by the document filter
        plan = _plan(conn, "WITH RECURSIVE chain AS (SELECT n.id, n.parent_id FROM hrag.nodes n "
                           "WHERE n.document_id = %s AND n.id = ANY (%s) UNION ALL SELECT p.id, p.parent_id "
                           "FROM chain c JOIN hrag.nodes p ON p.document_id = %s AND p.id = c.parent_id) "
                           "SELECT count(*) FROM chain", (doc, ids, doc))
        assert "Task Count: 1" in plan, plan

        documents = {h[1] for h in hits}
        assert len(documents) == 3
        one_per_document = [next(h[0] for h in hits if h[1] == d) for d in sorted(documents)]
        log: list[str] = []
        conn.add_notice_handler(lambda diag: log.append(diag.message_primary or ""))
        conn.execute("SET client_min_messages = debug1")
        rows = conn.execute("SELECT * FROM hrag.auto_merge_hits(%s::uuid[], %s::real[], 0.5)",
                            (one_per_document, [0.9, 0.8, 0.7])).fetchall()
        conn.execute("RESET client_min_messages")
    assert len(rows) == 3
    assert log.count("pushing down the function call") == len(documents), log


def test_the_ann_step_fans_out_to_every_shard_and_the_coordinator_keeps_the_top_k(
    cluster_url: str, same_documents_on_both: str,
) -> None:
    query = "[" + ",".join(str(x) for x in HashingEmbedder().vector(QUESTION).tolist()) + "]"
    with psycopg.connect(_libpq(cluster_url)) as conn:
        shards = conn.execute("SELECT count(*) FROM citus_shards WHERE table_name = 'hrag.nodes'::regclass"
                              ).fetchone()[0]  # type: ignore[index]
        # a small table: make the shards' planners take the index, as they do at scale
        conn.execute("SET citus.propagate_set_commands = 'local'")
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        conn.execute("SET LOCAL enable_sort = off")
        plan = _plan(conn, f"SELECT id FROM hrag.nodes WHERE embedding IS NOT NULL "
                           f"ORDER BY embedding <=> '{query}'::vector LIMIT 8")
    assert f"Task Count: {shards}" in plan
    assert "nodes_embedding_hnsw_idx" in plan  # each shard walks its own HNSW graph
    assert plan.index("Limit") < plan.index("Custom Scan (Citus Adaptive)")  # the coordinator merges


# ------------------------------------------------------------------ tenants


def test_a_tenant_role_sees_only_its_collection_through_the_tables_and_the_search(
    cluster_url: str, tmp_path: Path,
) -> None:
    for collection in ("tenant_a", "tenant_b"):
        folder = tmp_path / collection
        folder.mkdir()
        _ingest(cluster_url, [_write_corpus(folder, 4)], collection)
    role = f"hrag_tenant_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_libpq(cluster_url), autocommit=True) as owner:
        owner.execute("SELECT hrag.create_tenant_role(%s, ARRAY['tenant_a'])", (role,))
        # Citus opens the worker connections as the current user: a NOLOGIN tenant role
        # ("is not permitted to log in") must be allowed to log in to the workers
        owner.execute(f'ALTER ROLE "{role}" LOGIN')
        # the policy reads hrag.tenant_collections (a reference table) on the shards
        owner.execute(f'ALTER ROLE "{role}" SET citus.allow_nested_distributed_execution = on')
    try:
        with psycopg.connect(_libpq(cluster_url)) as conn:
            register_vector(conn)
            conn.execute(f'SET ROLE "{role}"')
            assert conn.execute("SELECT DISTINCT collection FROM hrag.documents").fetchall() == [("tenant_a",)]
            assert conn.execute("SELECT DISTINCT collection FROM hrag.nodes").fetchall() == [("tenant_a",)]
            seen = conn.execute(
                "SELECT DISTINCT n.collection FROM hrag.search_leaves(%s, 50) s "
                "JOIN hrag.nodes n ON n.document_id = s.document_id AND n.id = s.node_id",
                (HashingEmbedder().vector("Paragraph 1 of section 0 in document 2"),)).fetchall()
            assert seen == [("tenant_a",)]
            conn.rollback()
    finally:
        with psycopg.connect(_libpq(cluster_url), autocommit=True) as owner:
            owner.execute(f'DROP OWNED BY "{role}"')
            owner.execute(f'DROP ROLE "{role}"')
