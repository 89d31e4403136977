"""An installation holding documents at an earlier revision upgrades to head with its data intact and answering.

The tree is written with raw SQL suited to the columns that revision has (no
Python layer of the time to ask), then the installation upgrades through the
frozen revisions and the 0027 baseline.  Its rows must come through unchanged,
the three retrieval modes must return them, and check_integrity() must be clean.
"""

from __future__ import annotations

import psycopg
import pytest

from hrag_pg import migrate

DIM = 3
DOC = "00000000-0000-0000-0000-00000000d0c1"
ROOT, SECTION, LEAF_A, LEAF_B = (f"00000000-0000-0000-0000-00000000000{i}" for i in range(1, 5))
# id, parent, depth, position, kind, content, tokens, children, seq, subtree_end, embedding
NODES = [
    (ROOT, None, 0, 0, "document", "", 0, 1, 0, 3, None),
    (SECTION, ROOT, 1, 0, "section", "# Allowances", 2, 2, 1, 3, None),
    (LEAF_A, SECTION, 2, 0, "paragraph", "Commuting allowance is paid monthly.", 6, 0, 2, 2, "[1,0,0]"),
    (LEAF_B, SECTION, 2, 1, "paragraph", "Lunch allowance starts after probation.", 6, 0, 3, 3, "[0.9,0.1,0]"),
]
SUBTREE_TOKENS = {ROOT: 14, SECTION: 14, LEAF_A: 6, LEAF_B: 6}
REVISIONS = migrate.revisions()[:-1]  # every revision before head (a second or so each)


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _columns(conn: psycopg.Connection, table: str) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'hrag' AND table_name = %s",
        (table,)).fetchall()}


def _write_tree(url: str) -> None:
    with psycopg.connect(_libpq(url)) as conn:
        doc_columns = _columns(conn, "documents")
        extra_doc = {"search_targets": 2, "total_tokens": SUBTREE_TOKENS[ROOT]}
        extra_doc = {k: v for k, v in extra_doc.items() if k in doc_columns}
        names = ["id", "collection", "source", "title", "content_hash", *extra_doc]
        conn.execute(f"INSERT INTO hrag.documents ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))})",
                     [DOC, "rules", "rules.md", "Work rules", "doc-hash", *extra_doc.values()])
        with_subtree = "subtree_tokens" in _columns(conn, "nodes")
        for (node_id, parent, depth, position, kind, content, tokens, children, seq, end, embedding) in NODES:
            names = ["id", "document_id", "collection", "parent_id", "depth", "position", "kind", "title",
                     "heading_path", "content", "token_count", "child_count", "seq", "subtree_end", "content_hash",
                     "embedding"]
            values: list[object] = [node_id, DOC, "rules", parent, depth, position, kind, None,
                                    ["Allowances"] if depth == 2 else [], content, tokens, children, seq, end,
                                    f"hash-{seq}", embedding]
            if with_subtree:
                names.append("subtree_tokens")
                values.append(SUBTREE_TOKENS[node_id])
            placeholders = ", ".join("%s::vector" if n == "embedding" else "%s" for n in names)
            conn.execute(f"INSERT INTO hrag.nodes ({', '.join(names)}) VALUES ({placeholders})", values)
        if conn.execute("SELECT to_regprocedure('hrag.refresh_document_terms(uuid)')").fetchone() != (None,):
            conn.execute("SELECT hrag.refresh_document_terms(%s)", (DOC,))


def _rows(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(_libpq(url)) as conn:
        return conn.execute("SELECT id::text, parent_id::text, depth, seq, subtree_end, content, token_count, "
                            "embedding::text FROM hrag.nodes ORDER BY seq").fetchall()


@pytest.mark.parametrize("revision", REVISIONS)
def test_an_installation_with_documents_upgrades_to_head_and_answers(blank_db_url: str, revision: str) -> None:
    migrate.upgrade(blank_db_url, revision, embedding_dim=DIM)
    _write_tree(blank_db_url)
    before = _rows(blank_db_url)
    migrate.upgrade(blank_db_url)
    assert _rows(blank_db_url) == before
    with psycopg.connect(_libpq(blank_db_url)) as conn:
        assert conn.execute("SELECT version_num FROM hrag.alembic_version").fetchall() == [
            (migrate.head_revision(),)]
        assert conn.execute("SELECT problem, node_id, detail FROM hrag.check_integrity()").fetchall() == []
        query = "[1,0,0]"
        hits = {r[0] for r in conn.execute("SELECT node_id::text FROM hrag.search_hybrid(%s::vector, 'allowance')",
                                           (query,)).fetchall()}
        assert hits == {LEAF_A, LEAF_B}
        parents = conn.execute("SELECT node_id::text, content FROM hrag.parent_child(%s::vector)", (query,)).fetchall()
        assert [p[0] for p in parents] == [SECTION]
        assert "Commuting allowance" in parents[0][1] and "Lunch allowance" in parents[0][1]
        merged = conn.execute("SELECT node_id::text, merged_from FROM hrag.auto_merge(%s::vector, 2, 0.5)",
                              (query,)).fetchall()
        assert [m[0] for m in merged] == [ROOT], "both leaves hit: merged upward to the root (its only child)"
        context = conn.execute("SELECT node_id::text, content FROM hrag.retrieve(%s::vector, 'commuting allowance', "
                               "2000, 'rules')", (query,)).fetchall()
        assert context and "Commuting allowance is paid monthly." in "".join(c[1] for c in context)
