"""Corrupted trees are found by name, repaired where SQL can, and re-ingested where it cannot.

Each corruption is made on purpose, as a superuser, with
``session_replication_role = replica`` where foreign keys would refuse it
(that switch disables FK triggers, which is how such damage happens in real
life too: restores, replication mishaps, hand edits).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from typer.testing import CliRunner

import hrag_pg.api as api_module
from hrag_pg.api import HRAG
from hrag_pg.cli import app
from tests.embedders import HashingEmbedder
from tests.integration.test_ingest_write import assert_same, handbook, root_id, snapshot


def hrag_cli(db_url: str, *args: str) -> tuple[int, str, Any]:
    """Run ``hrag ARGS`` on this test's database; (exit code, output, parsed JSON or None)."""
    result = CliRunner().invoke(app, list(args), env={"HRAG_DATABASE_URL": db_url})
    payload = json.loads(result.stdout) if "--json" in args and result.stdout.strip() else None
    return result.exit_code, result.output, payload


@pytest.fixture
def tree(hrag: HRAG, sql: psycopg.Connection, tmp_path: Path) -> dict[str, Any]:
    """A handbook (root > H1 > 3 sections > 4 paragraphs) and the ids of its parts."""
    path = tmp_path / "handbook.md"
    path.write_text(handbook(3, 4), encoding="utf-8")
    assert hrag.ingest([path], stop_on_error=True).results[0].status == "created"
    rows = sql.execute(
        "SELECT id, depth, position, parent_id, child_count FROM hrag.nodes ORDER BY seq").fetchall()
    sections = [r[0] for r in rows if r[1] == 2]
    first_leaves = [r[0] for r in rows if r[3] == sections[0]]
    return {
        "path": path,
        "source": str(path),
        "document": sql.execute("SELECT id FROM hrag.documents").fetchone()[0],
        "root": root_id(sql, path),
        "section": sections[0],
        "leaves": first_leaves,
        "before": snapshot(sql, path),
        "text": hrag.repository.node_text(root_id(sql, path)),
    }


def replica(sql: psycopg.Connection, *statements: tuple[str, tuple]) -> None:
    """Run statements with FK triggers off (superuser only), in one transaction."""
    with sql.transaction():
        sql.execute("SET LOCAL session_replication_role = replica")
        for statement, params in statements:
            sql.execute(statement, params)


def corrupt_child_count(sql: psycopg.Connection, t: dict[str, Any]) -> None:
    sql.execute("UPDATE hrag.nodes SET child_count = child_count + 2 WHERE id = %s", (t["section"],))


def corrupt_ordering(sql: psycopg.Connection, t: dict[str, Any]) -> None:
    """Swap the pre-order numbers of the first two paragraphs (their text comes out swapped)."""
    a, b = t["leaves"][:2]
    with sql.transaction():
        sa_, sb = (sql.execute("SELECT seq FROM hrag.nodes WHERE id = %s", (x,)).fetchone()[0] for x in (a, b))
        sql.execute("UPDATE hrag.nodes SET seq = 1000000, subtree_end = 1000000 WHERE id = %s", (a,))
        sql.execute("UPDATE hrag.nodes SET seq = %s, subtree_end = %s WHERE id = %s", (sa_, sa_, b))
        sql.execute("UPDATE hrag.nodes SET seq = %s, subtree_end = %s WHERE id = %s", (sb, sb, a))


def corrupt_depth(sql: psycopg.Connection, t: dict[str, Any]) -> None:
    replica(sql, ("UPDATE hrag.nodes SET depth = depth + 1 WHERE id = %s", (t["leaves"][2],)))


def corrupt_embedding(sql: psycopg.Connection, t: dict[str, Any]) -> None:
    sql.execute("UPDATE hrag.nodes SET embedding = NULL WHERE id = %s", (t["leaves"][3],))


def corrupt_root_missing(sql: psycopg.Connection, t: dict[str, Any]) -> None:
    replica(sql, ("DELETE FROM hrag.nodes WHERE id = %s", (t["root"],)))


def corrupt_second_root(sql: psycopg.Connection, t: dict[str, Any]) -> None:
    sql.execute(
        "INSERT INTO hrag.nodes (id, document_id, collection, parent_id, depth, position, kind, content, "
        "seq, subtree_end, content_hash) SELECT %s, document_id, collection, NULL, 0, 1, 'document', "
        "'A stray root', max(seq) + 1, max(seq) + 1, 'stray' FROM hrag.nodes WHERE document_id = %s "
        "GROUP BY document_id, collection",
        (uuid.uuid4(), t["document"]),
    )


CORRUPTIONS: dict[str, tuple[Callable[[psycopg.Connection, dict[str, Any]], None], bool]] = {
    # problem name: (corruption, repairable by `hrag check --repair`)
    "wrong_child_count": (corrupt_child_count, True),
    "broken_ordering": (corrupt_ordering, True),
    "wrong_depth": (corrupt_depth, True),
    "leaf_without_embedding": (corrupt_embedding, False),
    "document_without_root": (corrupt_root_missing, False),
    "document_with_several_roots": (corrupt_second_root, False),
}


@pytest.mark.parametrize("problem", list(CORRUPTIONS))
def test_each_corruption_is_found_by_name_and_repaired_or_reported(
    problem: str, tree: dict[str, Any], hrag: HRAG, sql: psycopg.Connection, db_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    corrupt, repairable = CORRUPTIONS[problem]
    assert hrag.repository.check_integrity() == []
    corrupt(sql, tree)

    found = hrag.repository.check_integrity()
    assert problem in {p["problem"] for p in found}, found
    assert all(p["document_id"] == tree["document"] for p in found)
    code, output, _ = hrag_cli(db_url, "check")
    assert code == 1 and problem in output
    count = len(hrag.repository.check_integrity())
    assert output.splitlines()[-1] == ("1 problem" if count == 1 else f"{count} problems")
    code, _, report = hrag_cli(db_url, "check", "--json")
    assert code == 1 and report["ok"] is False and problem in {p["problem"] for p in report["problems"]}

    code, output, report = hrag_cli(db_url, "check", "--repair", "--json")
    if repairable:
        assert (code, report["ok"], report["problems"]) == (0, True, []), output
        assert report["repaired"][problem] >= 1
        assert_same(tree["before"], snapshot(sql, tree["path"]))  # exactly the tree as ingested
        assert hrag.repository.node_text(tree["root"]) == tree["text"]
        return
    assert code == 1 and problem in {p["problem"] for p in report["problems"]}

    # What SQL cannot recompute, re-ingesting with --force rewrites (reusing stored embeddings).
    embedder = HashingEmbedder()
    monkeypatch.setattr(api_module, "embedder_for", lambda model=None: embedder)
    code, output, ingested = hrag_cli(db_url, "ingest", tree["source"], "--force", "--json")
    assert code == 0, output
    [result] = ingested["results"]
    assert result["status"] == "updated"
    assert result["embedded"] == (1 if problem == "leaf_without_embedding" else 0)
    assert len(embedder.texts) == result["embedded"]
    assert hrag_cli(db_url, "check")[0] == 0
    assert_same(tree["before"], snapshot(sql, tree["path"]))


def test_check_repair_fixes_counts_ordering_and_depth_at_once_and_force_reingest_fixes_the_rest(
    tree: dict[str, Any], hrag: HRAG, sql: psycopg.Connection, db_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    for problem in ("wrong_child_count", "broken_ordering", "wrong_depth", "leaf_without_embedding"):
        CORRUPTIONS[problem][0](sql, tree)
    assert hrag.repository.node_text(tree["root"]) != tree["text"]  # the swapped paragraphs show
    found = {p["problem"] for p in hrag.repository.check_integrity()}
    assert found == {"wrong_child_count", "broken_ordering", "wrong_depth", "leaf_without_embedding"}

    code, output, _ = hrag_cli(db_url, "check", "--repair")
    assert code == 1
    assert "repaired wrong_child_count" in output and "repaired broken_ordering" in output
    assert "repaired wrong_depth" in output
    assert "leaf_without_embedding" in output and "re-ingest its document with --force" in output
    remaining = hrag.repository.check_integrity()
    assert [(p["problem"], p["node_id"]) for p in remaining] == [("leaf_without_embedding", tree["leaves"][3])]
    assert hrag.repository.node_text(tree["root"]) == tree["text"]

    # `hrag ingest --force` embeds exactly the one missing text and reuses every other embedding.
    embedder = HashingEmbedder()
    monkeypatch.setattr(api_module, "embedder_for", lambda model=None: embedder)
    code, output, ingested = hrag_cli(db_url, "ingest", tree["source"], "--force", "--json")
    assert code == 0, output
    assert (ingested["results"][0]["embedded"], len(embedder.texts), embedder.calls) == (1, 1, 1)
    assert embedder.texts[0].endswith(sql.execute("SELECT content FROM hrag.nodes WHERE id = %s",
                                                  (tree["leaves"][3],)).fetchone()[0])
    code, output, report = hrag_cli(db_url, "check", "--json")
    assert (code, report["problems"]) == (0, []), output
    after = snapshot(sql, tree["path"])
    assert_same(tree["before"], after)
    assert np.array_equal(after["embeddings"][tree["leaves"][3]], tree["before"]["embeddings"][tree["leaves"][3]])

    # Without --force an unchanged file is left alone.
    code, _, again = hrag_cli(db_url, "ingest", tree["source"], "--json")
    assert code == 0 and again["results"][0]["status"] == "unchanged" and len(embedder.texts) == 1


def _vector_index_problems(hrag: HRAG) -> set[str]:
    return {p["problem"] for p in hrag.repository.check_integrity() if p["problem"].startswith("vector_index")}


def _valid_hnsw_indexes(sql: psycopg.Connection) -> int:
    return sql.execute(
        "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam "
        "WHERE i.indrelid = 'hrag.nodes'::regclass AND am.amname = 'hnsw' AND i.indisvalid").fetchone()[0]


def test_a_missing_vector_index_is_reported_and_rebuilt_by_repair(
    tree: dict[str, Any], hrag: HRAG, sql: psycopg.Connection, db_url: str
) -> None:
    """A bulk load killed between DROP INDEX and CREATE INDEX leaves searches scanning every row."""
    sql.execute("DROP INDEX hrag.nodes_embedding_hnsw_idx")
    assert _vector_index_problems(hrag) == {"vector_index_missing"}
    code, output, _ = hrag_cli(db_url, "check")
    assert code == 1 and "vector_index_missing" in output

    code, output, report = hrag_cli(db_url, "check", "--repair", "--json")
    assert (code, report["ok"]) == (0, True), output
    assert report["repaired"]["vector_index"] == 1
    assert _valid_hnsw_indexes(sql) == 1
    assert _vector_index_problems(hrag) == set()


def test_an_invalid_vector_index_is_reported_and_rebuilt_by_repair(
    tree: dict[str, Any], hrag: HRAG, sql: psycopg.Connection
) -> None:
    """An interrupted CREATE INDEX CONCURRENTLY leaves an index marked invalid that the planner ignores."""
    sql.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'hrag.nodes_embedding_hnsw_idx'::regclass")
    assert _vector_index_problems(hrag) == {"vector_index_invalid"}
    assert hrag.repository.repair_integrity()["vector_index"] == 1
    assert _valid_hnsw_indexes(sql) == 1
    assert _vector_index_problems(hrag) == set()


_LINKED = ("# Timers\n\nUse [`setTimeout()`][] to wait.\n\n## Delays\n\n"
           "A delay above `2147483647` becomes `1`.\n\n"
           "[`setTimeout()`]: #settimeoutzanzibar\n[`clearTimeout()`]: #cleartimeoutzanzibar\n")


def test_markup_leaves_are_stored_whole_not_searched_and_not_reported_as_unembedded(
    hrag: HRAG, sql: psycopg.Connection, tmp_path: Path
) -> None:
    path = tmp_path / "timers.md"
    path.write_text(_LINKED, encoding="utf-8")
    assert hrag.ingest([path], stop_on_error=True).results[0].status == "created"
    markup = sql.execute("SELECT depth, embedding IS NULL, lexical_hashes IS NULL, content FROM hrag.nodes "
                         "WHERE kind = 'markup'").fetchall()
    assert markup == [(1, True, True, "[`setTimeout()`]: #settimeoutzanzibar\n"
                                      "[`clearTimeout()`]: #cleartimeoutzanzibar")]
    assert hrag.repository.node_text(root_id(sql, path)) == _LINKED.rstrip("\n")
    assert hrag.repository.check_integrity() == []
    # the link targets' words are not searched: the lexical channel finds nothing for them
    vector = hrag.embedder.embed(["settimeoutzanzibar"])[0].tolist()
    lexical = sql.execute("SELECT count(*) FROM hrag.search_hybrid(%s::real[]::vector, 'settimeoutzanzibar') "
                          "WHERE lexical_score > 0", (vector,)).fetchone()[0]
    assert lexical == 0


_NAVIGATION = ("# Tool\n\nTool converts files.\n\n- [Install](#install)\n- [Zanzibar threads](#threads)\n\n"
               "## Install\n\nRun the installer as root.\n\n## Quixotic options\n\n## Threads\n\n"
               "Tool is thread safe.\n")


def test_menus_and_lone_headings_are_stored_in_their_sections_not_searched_and_not_reported(
    hrag: HRAG, sql: psycopg.Connection, tmp_path: Path
) -> None:
    path = tmp_path / "tool.md"
    path.write_text(_NAVIGATION, encoding="utf-8")
    assert hrag.ingest([path], stop_on_error=True).results[0].status == "created"
    markup = sql.execute("SELECT depth, embedding IS NULL, lexical_hashes IS NULL, metadata->>'source_kind', content "
                         "FROM hrag.nodes WHERE kind = 'markup' ORDER BY seq").fetchall()
    assert markup == [(2, True, True, "menu", "- [Install](#install)\n- [Zanzibar threads](#threads)"),
                      (2, True, True, "section", "## Quixotic options")]
    assert hrag.repository.node_text(root_id(sql, path)) == _NAVIGATION.rstrip("\n")
    assert hrag.repository.check_integrity() == []
    for word in ("zanzibar", "quixotic"):  # neither the menu's words nor the lone heading's are searched
        vector = hrag.embedder.embed([word])[0].tolist()
        assert sql.execute("SELECT count(*) FROM hrag.search_hybrid(%s::real[]::vector, %s) WHERE lexical_score > 0",
                           (vector, word)).fetchone()[0] == 0
