"""Writing documents: the write guarantees of docs/guarantees.md, against a real PostgreSQL.

One transaction per document (an exception, a killed connection or a broken
embedder half-way leaves the previous version intact), deterministic ids,
incremental re-embedding by content hash, per-source serialisation, and clear
errors for bad input that never cost what is already stored.
"""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
import sqlalchemy as sa

import hrag_pg.repository as repository_module
from hrag_pg import db
from hrag_pg.api import HRAG
from hrag_pg.errors import ConnectionLost, EmbeddingError, IngestError
from hrag_pg.ingest.flatten import FlatDocument, flatten
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.pipeline import IngestOptions, prepare_file, prepare_tree
from hrag_pg.ingest.tree import DocumentTree, DraftNode
from hrag_pg.repository import Repository
from hrag_pg.settings import ParentChildSettings
from tests.embedders import HashingEmbedder, WrongDimEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
WORK_RULES = FIXTURES / "work_rules_ja.md"
SECURITY = FIXTURES / "security_policy_ja.md"
GUIDE = FIXTURES / "guide.md"
ITEM_3 = "3. 試用期間中の従業員については、通勤手当は全額実費支給の対象とするが、昼食手当の適用は本採用以降とする。"


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture
def hrag(db_url: str, embedder: HashingEmbedder) -> Iterator[HRAG]:
    instance = HRAG(db_url, embedder=embedder)
    yield instance
    instance.repository.engine.dispose()


def own_hrag(db_url: str, embedder: HashingEmbedder) -> HRAG:
    """An HRAG with an engine (connection pool) of its own."""
    instance = HRAG(db_url, embedder=embedder)
    instance.repository = Repository(db._engine_for.__wrapped__(db.sqlalchemy_url(db_url)))
    return instance


def document_row(sql: psycopg.Connection, source: str | Path) -> tuple[Any, ...] | None:
    return sql.execute(
        "SELECT id, content_hash, title FROM hrag.documents WHERE source = %s", (stored_name(source),)
    ).fetchone()


def snapshot(sql: psycopg.Connection, source: str | Path) -> dict[str, Any]:
    """Everything stored for a source: its document row and every node, in order."""
    doc = document_row(sql, source)
    assert doc is not None, f"{source} is not stored"
    rows = sql.execute(
        "SELECT id, parent_id, seq, subtree_end, child_count, content, content_hash, embedding "
        "FROM hrag.nodes WHERE document_id = %s ORDER BY seq",
        (doc[0],),
    ).fetchall()
    return {
        "document": doc,
        "nodes": [r[:7] for r in rows],
        "embeddings": {r[0]: (None if r[7] is None else np.asarray(r[7].to_numpy())) for r in rows},
    }


def stored_name(source: str | Path) -> str:
    """The source name a file was stored under: a file given directly is named by its file name."""
    return source.name if isinstance(source, Path) else source


def assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert after["document"] == before["document"]
    assert after["nodes"] == before["nodes"]
    assert after["embeddings"].keys() == before["embeddings"].keys()
    for key, vector in before["embeddings"].items():
        if vector is None:
            assert after["embeddings"][key] is None
        else:
            assert np.array_equal(after["embeddings"][key], vector)


def root_id(sql: psycopg.Connection, source: str | Path) -> uuid.UUID:
    return sql.execute(
        "SELECT n.id FROM hrag.nodes n JOIN hrag.documents d ON d.id = n.document_id "
        "WHERE d.source = %s AND n.parent_id IS NULL",
        (stored_name(source),),
    ).fetchone()[0]


def node_count(sql: psycopg.Connection, source: str | Path | None = None) -> int:
    if source is None:
        return sql.execute("SELECT count(*) FROM hrag.nodes").fetchone()[0]
    return sql.execute(
        "SELECT count(*) FROM hrag.nodes n JOIN hrag.documents d ON d.id = n.document_id WHERE d.source = %s",
        (stored_name(source),),
    ).fetchone()[0]


def handbook(sections: int, paragraphs: int, *, edits: dict[tuple[int, int], str] | None = None,
             tag: str = "") -> str:
    """A Markdown handbook with ``sections`` × ``paragraphs`` short, distinct paragraphs."""
    edits = edits or {}
    lines = [f"# Handbook{tag}", ""]
    for s in range(sections):
        lines += [f"## Section {s}{tag}", ""]
        for p in range(paragraphs):
            k = s * paragraphs + p
            text = edits.get((s, p)) or (
                f"Rule {k}{tag}: employees submit form F-{k:03d} within {k % 17 + 3} days to office {k % 7}."
            )
            lines += [text, ""]
    return "\n".join(lines)


def expected_text(doc: FlatDocument) -> str:
    """What ``hrag.node_text(root)`` returns for a written document."""
    return "\n\n".join(n.content for n in doc.nodes if n.content)


def flat(text: str, source: str, embedder: HashingEmbedder) -> FlatDocument:
    return prepare_tree(parse_markdown(text, source), IngestOptions(), model_name=embedder.model_name,
                        counter=embedder.token_counter)


# ------------------------------------------------------------------- 1. the tree


def test_work_rules_writes_one_document_and_its_whole_tree(hrag: HRAG, sql: psycopg.Connection) -> None:
    report = hrag.ingest([WORK_RULES], stop_on_error=True)
    assert not report.failed and not report.skipped
    [result] = report.results
    assert result.status == "created"
    assert sql.execute("SELECT count(*) FROM hrag.documents").fetchone()[0] == 1
    assert node_count(sql) == result.nodes == 26

    text = hrag.repository.node_text(root_id(sql, WORK_RULES))
    assert text is not None
    for line in WORK_RULES.read_text(encoding="utf-8").splitlines():
        line = line.lstrip("#").strip()
        if line:
            assert line in text, f"{line!r} is missing from the root's full text"
    assert text.index("第4条") < text.index(ITEM_3) < text.index("第十二条")

    article = sql.execute(
        "SELECT id, child_count, kind FROM hrag.nodes WHERE title LIKE '第4条%'"
    ).fetchone()
    assert article[1:] == (4, "clause")
    # The article's text is its lines as written: heading line and items, one newline apart.
    lines = WORK_RULES.read_text(encoding="utf-8").splitlines()
    assert hrag.repository.node_text(article[0]) == "\n".join(lines[20:25])
    assert lines[24].startswith("4. 各手当は、毎月25日")

    # child_count is the real number of children, for every node.
    assert sql.execute(
        "SELECT count(*) FROM hrag.nodes n "
        "WHERE n.child_count <> (SELECT count(*) FROM hrag.nodes c WHERE c.parent_id = n.id)"
    ).fetchone()[0] == 0
    # seq is 0..N-1; every node's [seq, subtree_end] range holds exactly its subtree.
    assert sql.execute("SELECT min(seq), max(seq), count(DISTINCT seq) FROM hrag.nodes").fetchone() == (0, 25, 26)
    mismatched = sql.execute(
        """
        WITH RECURSIVE subtree(node, member) AS (
            SELECT id, id FROM hrag.nodes
            UNION ALL
            SELECT s.node, c.id FROM subtree s JOIN hrag.nodes c ON c.parent_id = s.member
        )
        SELECT n.seq FROM hrag.nodes n
         WHERE (SELECT array_agg(r.id ORDER BY r.id) FROM hrag.nodes r
                 WHERE r.document_id = n.document_id AND r.seq BETWEEN n.seq AND n.subtree_end)
               IS DISTINCT FROM
               (SELECT array_agg(s.member ORDER BY s.member) FROM subtree s WHERE s.node = n.id)
        """
    ).fetchall()
    assert mismatched == []
    # Leaves (and only leaves) are embedded.
    assert sql.execute(
        "SELECT count(*) FROM hrag.nodes WHERE (embedding IS NOT NULL) <> (child_count = 0 AND depth > 0)"
    ).fetchone()[0] == 0


# ------------------------------------------------------------ 2. deterministic ids


def test_reingesting_the_same_file_keeps_ids_and_embeds_nothing(
    hrag: HRAG, sql: psycopg.Connection, embedder: HashingEmbedder, tmp_path: Path
) -> None:
    first = hrag.ingest([WORK_RULES], stop_on_error=True).results[0]
    ids = [r[0] for r in snapshot(sql, WORK_RULES)["nodes"]]
    embedded_before = len(embedder.texts)
    assert first.embedded == embedded_before == 16

    again = hrag.ingest([WORK_RULES], stop_on_error=True).results[0]
    assert again.status == "unchanged"
    assert again.embedded == 0
    assert len(embedder.texts) == embedded_before
    assert [r[0] for r in snapshot(sql, WORK_RULES)["nodes"]] == ids
    assert again.document_id == first.document_id

    # The same passages under two other sources: same contents, disjoint ids.
    copies = [tmp_path / "a.md", tmp_path / "b.md"]
    for copy in copies:
        shutil.copy(WORK_RULES, copy)
    hrag.ingest(copies, stop_on_error=True)
    a, b = (snapshot(sql, c)["nodes"] for c in copies)
    assert [r[5] for r in a] == [r[5] for r in b]
    assert not {r[0] for r in a} & {r[0] for r in b}
    assert not {r[0] for r in a} & set(ids)
    assert document_row(sql, copies[0])[0] != document_row(sql, copies[1])[0]


# ------------------------------------------------------- 3. incremental re-ingest


def test_editing_one_paragraph_reembeds_exactly_one_paragraph(
    hrag: HRAG, sql: psycopg.Connection, embedder: HashingEmbedder, tmp_path: Path
) -> None:
    path = tmp_path / "handbook.md"
    path.write_text(handbook(5, 10), encoding="utf-8")
    first = hrag.ingest([path], stop_on_error=True).results[0]
    assert first.embedded == 50
    before = snapshot(sql, path)

    edited = "Rule 23 (amended): employees submit form F-023 within 30 days to any office."
    path.write_text(handbook(5, 10, edits={(2, 3): edited}), encoding="utf-8")
    calls_before, texts_before = embedder.calls, len(embedder.texts)
    result = hrag.ingest([path], stop_on_error=True).results[0]

    new_texts = embedder.texts[texts_before:]
    assert len(new_texts) == 1 and new_texts[0].endswith(edited)
    assert embedder.calls == calls_before + 1
    assert (result.status, result.embedded, result.reused) == ("updated", 1, 49)
    after = snapshot(sql, path)
    assert len(after["nodes"]) == len(before["nodes"]) == result.nodes
    assert [r[0] for r in after["nodes"]] == [r[0] for r in before["nodes"]]

    changed = [r[0] for r, old in zip(after["nodes"], before["nodes"], strict=True) if r[5] != old[5]]
    assert len(changed) == 1
    for node_id, vector in before["embeddings"].items():
        if vector is None:
            continue
        if node_id in changed:
            assert not np.array_equal(after["embeddings"][node_id], vector)
        else:
            assert np.array_equal(after["embeddings"][node_id], vector), "an unchanged leaf was re-embedded"
    assert document_row(sql, path)[1] != before["document"][1]


# -------------------------------------------- 4. embedded text vs stored content


def test_embedded_text_carries_the_heading_path_but_content_stays_original(
    hrag: HRAG, sql: psycopg.Connection, embedder: HashingEmbedder
) -> None:
    hrag.ingest([WORK_RULES], stop_on_error=True)
    original = next(line for line in WORK_RULES.read_text(encoding="utf-8").splitlines() if line.startswith("3. 試用"))
    content, heading_path = sql.execute(
        "SELECT c.content, c.heading_path FROM hrag.nodes c JOIN hrag.nodes p ON p.id = c.parent_id "
        "WHERE p.title LIKE '第4条%' AND c.position = 2"
    ).fetchone()
    assert content == original == ITEM_3
    assert heading_path == ["就業規則", "第2章 勤務", "第4条：諸手当および福利厚生"]
    [sent] = [t for t in embedder.texts if t.endswith(original)]
    assert sent.startswith("[") and "第4条" in sent.split("]")[0]
    assert sent == f"[就業規則 > 第2章 勤務 > 第4条：諸手当および福利厚生] {original}"


# --------------------------------------------------------------------- 5. delete


def test_deleting_a_source_removes_its_document_and_nodes_only(hrag: HRAG, sql: psycopg.Connection) -> None:
    hrag.ingest([WORK_RULES, SECURITY], stop_on_error=True)
    kept = snapshot(sql, SECURITY)
    doc_id = document_row(sql, WORK_RULES)[0]

    assert hrag.delete(WORK_RULES.name) is True
    assert document_row(sql, WORK_RULES) is None
    assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE document_id = %s", (doc_id,)).fetchone()[0] == 0
    assert_same(kept, snapshot(sql, SECURITY))
    assert node_count(sql) == len(kept["nodes"])

    assert hrag.delete(WORK_RULES.name) is False
    assert hrag.delete("no/such/source.md") is False
    assert hrag.delete(SECURITY.name, collection="another") is False
    assert_same(kept, snapshot(sql, SECURITY))


# ----------------------------------------------------------------- 6. atomicity


def _two_versions(tmp_path: Path, hrag: HRAG, sql: psycopg.Connection,
                  embedder: HashingEmbedder) -> tuple[Path, dict[str, Any], FlatDocument]:
    """Store version 1 of a handbook; return it and version 2 (not yet written)."""
    path = tmp_path / "handbook.md"
    path.write_text(handbook(3, 6), encoding="utf-8")
    hrag.ingest([path], stop_on_error=True)
    before = snapshot(sql, path)
    path.write_text(handbook(5, 6, edits={(0, 0): "Rule 0 is replaced in version 2."}), encoding="utf-8")
    new = prepare_file(path, IngestOptions(), source=path.name, model_name=embedder.model_name,
                       counter=embedder.token_counter)
    assert len(new.nodes) > len(before["nodes"])
    return path, before, new


def test_exception_half_way_through_copy_keeps_the_previous_version(
    hrag: HRAG, sql: psycopg.Connection, embedder: HashingEmbedder, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(repository_module, "COPY_CHUNK", 5)
    path, before, new = _two_versions(tmp_path, hrag, sql, embedder)
    assert len(new.nodes) > 2 * repository_module.COPY_CHUNK
    seen: list[int] = []

    def explode(written: int) -> None:
        seen.append(written)
        raise RuntimeError("injected failure after the first COPY chunk")

    with pytest.raises(RuntimeError, match="injected"):
        hrag.repository.write_document(new, embedder, after_chunk=explode)
    assert seen == [5]

    assert_same(before, snapshot(sql, path))
    new_only = {n.id for n in new.nodes} - {r[0] for r in before["nodes"]}
    assert new_only
    assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE id = ANY(%s)", (list(new_only),)).fetchone()[0] == 0
    assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE content LIKE '%%version 2%%'").fetchone()[0] == 0

    # The same write without the failure succeeds, in chunks.
    chunks: list[int] = []
    result = hrag.repository.write_document(new, embedder, after_chunk=chunks.append)
    assert result.status == "updated"
    assert chunks[-1] == len(new.nodes) and len(chunks) == -(-len(new.nodes) // 5)
    assert hrag.repository.node_text(root_id(sql, path)) == expected_text(new)


def test_killed_connection_half_way_keeps_the_previous_version_and_engine_recovers(
    hrag: HRAG, sql: psycopg.Connection, embedder: HashingEmbedder, tmp_path: Path, db_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(repository_module, "COPY_CHUNK", 5)
    path, before, new = _two_versions(tmp_path, hrag, sql, embedder)
    killed: list[int] = []

    def kill_writer(written: int) -> None:
        if killed:
            return
        with psycopg.connect(db.libpq_url(db_url), autocommit=True) as killer:
            pids = [r[0] for r in killer.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND query LIKE 'COPY hrag.nodes%'"
            )]
            for pid in pids:
                assert killer.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()[0]
        killed.extend(pids)

    with pytest.raises(ConnectionLost, match="was lost during the call"):  # hrag's sentence, not the driver's
        hrag.repository.write_document(new, embedder, after_chunk=kill_writer)
    assert len(killed) == 1, "exactly the writer's backend was running the COPY"

    assert_same(before, snapshot(sql, path))
    assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE content LIKE '%%version 2%%'").fetchone()[0] == 0

    # The engine hands out a working connection for the next calls.
    assert hrag.repository.node_text(root_id(sql, path)) == "\n\n".join(r[5] for r in before["nodes"] if r[5])
    result = hrag.ingest([path], stop_on_error=True).results[0]
    assert result.status == "updated"
    assert hrag.repository.node_text(root_id(sql, path)) == expected_text(new)


def test_failing_embedder_half_way_writes_nothing(
    hrag: HRAG, sql: psycopg.Connection, db_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "big.md"
    path.write_text(handbook(2, 5), encoding="utf-8")
    hrag.ingest([path], stop_on_error=True)
    before = snapshot(sql, path)

    # 300 new paragraphs: the first batch of 256 embeds, the second batch fails.
    path.write_text(handbook(20, 15, tag="b"), encoding="utf-8")
    broken = HashingEmbedder(fail_after=256)
    with pytest.raises(RuntimeError, match="simulated model failure"):
        HRAG(db_url, embedder=broken).ingest([path])
    assert len(broken.texts) == 256 and broken.calls == 2
    assert_same(before, snapshot(sql, path))
    assert node_count(sql) == len(before["nodes"])


#: A test-only trigger that counts the UPDATEs of hrag.nodes and raises on the one numbered in
#: public.test_fail_at (none if NULL): a failure injected at a chosen row of an in-place rewrite.
_FAIL_ON_NTH_NODE_UPDATE = """
CREATE SEQUENCE public.test_node_updates;
CREATE TABLE public.test_fail_at (n bigint);
INSERT INTO public.test_fail_at VALUES (NULL);
CREATE FUNCTION public.test_count_node_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    k bigint := nextval('public.test_node_updates');
BEGIN
    IF k = (SELECT n FROM public.test_fail_at) THEN
        RAISE EXCEPTION 'injected failure at UPDATE % of hrag.nodes', k;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_count_node_update BEFORE UPDATE ON hrag.nodes
    FOR EACH ROW EXECUTE FUNCTION public.test_count_node_update();
CREATE FUNCTION public.test_fail_terms() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'injected failure writing the lexical statistics (term %)', NEW.term;
END $$;
"""


def _node_updates(sql: psycopg.Connection) -> int:
    """UPDATEs of hrag.nodes counted since the last reset (rolled back ones included: sequences are not)."""
    last, called = sql.execute("SELECT last_value, is_called FROM public.test_node_updates").fetchone()
    return last if called else 0


def _stored_rows(sql: psycopg.Connection, source: str) -> list[tuple[Any, ...]]:
    """Every column an in-place rewrite touches, for every node of the source, in order."""
    return sql.execute(
        "SELECT n.id, n.kind, n.title, n.heading_path, n.content, n.token_count, n.content_hash, n.metadata, "
        "n.subtree_tokens, n.separator, n.embedding::text FROM hrag.nodes n "
        "JOIN hrag.documents d ON d.id = n.document_id WHERE d.source = %s ORDER BY n.seq", (source,),
    ).fetchall()


@pytest.mark.parametrize("failure", ["at the 7th of the rewritten rows", "after the last row, in the statistics"])
def test_a_failure_inside_an_in_place_rewrite_keeps_the_previous_version_whole_and_a_retry_succeeds(
    hrag: HRAG, sql: psycopg.Connection, failure: str
) -> None:
    """Re-ingesting a document of the same shape UPDATEs its rows in place, in the document's one transaction.

    A trigger installed by the test makes the rewrite fail at a chosen point:
    on the 7th row UPDATEd (six rewritten before it, more after), or once every
    row is rewritten, when the lexical statistics are written.  The previous
    version must stay whole and readable (rows, hashes, embeddings, full text,
    retrieval, a clean integrity check) with nothing of the new one, and the
    same write must succeed once the failure is gone.  A rewrite that committed
    rows one by one (or before the statistics) fails this test.
    """
    source = "inplace/handbook.md"
    version_1 = handbook(3, 5)
    edits = {(s, p): f"Rule {s}.{p} in version two: visitors show badge B-{s}{p} at gate {p}."
             for s in range(3) for p in range(5)}
    version_2 = handbook(3, 5, edits=edits)
    probe = HashingEmbedder()
    ids = [[n.id for n in flat(text, source, probe).nodes] for text in (version_1, version_2)]
    assert ids[0] == ids[1], "same shape: the rewrite is in place"
    assert hrag.ingest_tree(parse_markdown(version_1, source)).status == "created"
    root = root_id(sql, source)
    before = snapshot(sql, source)
    rows_before = _stored_rows(sql, source)
    assert hrag.node_text(root) == version_1.strip()
    assert hrag.repository.check_integrity() == []

    sql.execute(_FAIL_ON_NTH_NODE_UPDATE)
    if failure.startswith("at the 7th"):
        sql.execute("UPDATE public.test_fail_at SET n = 7")
    else:
        sql.execute("CREATE TRIGGER test_fail_terms BEFORE INSERT ON hrag.document_terms "
                    "FOR EACH ROW EXECUTE FUNCTION public.test_fail_terms()")
    # (the server's error as the driver raised it: psycopg's from the rows' UPDATEs, SQLAlchemy's from a statement)
    with pytest.raises((psycopg.errors.RaiseException, sa.exc.DBAPIError), match="injected failure") as raised:
        hrag.ingest_tree(parse_markdown(version_2, source))
    updated_when_it_failed = _node_updates(sql)
    assert updated_when_it_failed > 0, f"the rewrite was not in place (no row UPDATEd): {raised.value}"

    # The previous version, whole: every row and vector, the full text, retrieval, the statistics.
    assert_same(before, snapshot(sql, source))
    assert _stored_rows(sql, source) == rows_before
    assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE content LIKE '%%version two%%'").fetchone()[0] == 0
    assert hrag.node_text(root) == version_1.strip()
    results = hrag.parent_child("visitors show a badge at the gate",
                                ParentChildSettings(top_k_children=10, max_parents=3))
    assert results and all("version two" not in r.content for r in results)
    assert {r.content for r in results} <= {hrag.node_text(r.node_id) for r in results}
    assert hrag.repository.check_integrity() == []

    # The same write, the failure gone: it succeeds, in place (same ids), with every row rewritten.
    sql.execute("UPDATE public.test_fail_at SET n = NULL")
    sql.execute("DROP TRIGGER IF EXISTS test_fail_terms ON hrag.document_terms")
    sql.execute("SELECT setval('public.test_node_updates', 1, false)")
    result = hrag.ingest_tree(parse_markdown(version_2, source))
    assert result.status == "updated"
    rewritten = _node_updates(sql)
    if failure.startswith("at the 7th"):
        assert updated_when_it_failed == 7 < rewritten, "the failure came half-way through the rewrite"
    else:
        assert updated_when_it_failed == rewritten, "the failure came after every row was rewritten"
    assert [r[0] for r in _stored_rows(sql, source)] == [r[0] for r in rows_before]
    assert hrag.node_text(root) == version_2.strip()
    assert hrag.repository.check_integrity() == []


def test_embedder_returning_nan_is_refused_before_anything_is_written(
    hrag: HRAG, sql: psycopg.Connection, db_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "poison.md"
    path.write_text(handbook(2, 5), encoding="utf-8")
    hrag.ingest([path], stop_on_error=True)
    before = snapshot(sql, path)

    path.write_text(handbook(2, 5, edits={(1, 2): "This paragraph is POISON for the model."}), encoding="utf-8")
    nan_hrag = HRAG(db_url, embedder=HashingEmbedder(nan_on="POISON"))
    with pytest.raises(EmbeddingError, match="NaN"):
        nan_hrag.ingest([path], stop_on_error=True)
    report = nan_hrag.ingest([path])
    assert report.results == [] and len(report.failed) == 1 and "NaN" in report.failed[0][1]
    assert_same(before, snapshot(sql, path))


class ShortEmbedder(HashingEmbedder):
    """Returns one vector fewer than it was given texts."""

    def embed(self, texts):  # type: ignore[no-untyped-def]
        return super().embed(texts)[:-1]


class NarrowEmbedder(HashingEmbedder):
    """Claims 384 dimensions but returns 8."""

    def embed(self, texts):  # type: ignore[no-untyped-def]
        return super().embed(texts)[:, :8]


@pytest.mark.parametrize(("broken", "message"), [
    (ShortEmbedder(), r"returned shape \(9, 384\), expected \(10, dim\)"),
    (NarrowEmbedder(), "returned 8-dimensional vectors but this database stores 384"),
])
def test_embedder_returning_the_wrong_shape_is_refused_before_anything_is_written(
    broken: HashingEmbedder, message: str, hrag: HRAG, sql: psycopg.Connection, db_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "shape.md"
    path.write_text(handbook(2, 5), encoding="utf-8")
    hrag.ingest([path], stop_on_error=True)
    before = snapshot(sql, path)
    path.write_text(handbook(2, 5, tag="v2"), encoding="utf-8")
    with pytest.raises(EmbeddingError, match=message):
        HRAG(db_url, embedder=broken).ingest([path], stop_on_error=True)
    assert_same(before, snapshot(sql, path))


# -------------------------------------------------------------- 7. serialisation


def test_two_writers_on_the_same_source_are_serialised(db_url: str, sql: psycopg.Connection) -> None:
    source = "shared/handbook.md"
    texts = {"a": handbook(3, 5, tag="A"), "b": handbook(4, 3, tag="B")}
    probe = HashingEmbedder()
    expected = {k: flat(t, source, probe) for k, t in texts.items()}
    assert len(expected["a"].nodes) != len(expected["b"].nodes)
    errors: list[BaseException] = []
    statuses: list[str] = []
    start = threading.Barrier(2)

    def writer(version: str) -> None:
        instance = own_hrag(db_url, HashingEmbedder())
        try:
            start.wait(timeout=10)
            for _ in range(10):
                result = instance.ingest_tree(parse_markdown(texts[version], source))
                statuses.append(result.status)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            instance.repository.engine.dispose()

    threads = [threading.Thread(target=writer, args=(v,)) for v in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert len(statuses) == 20 and statuses.count("created") == 1

    assert sql.execute("SELECT count(*) FROM hrag.documents WHERE source = %s", (source,)).fetchone()[0] == 1
    doc_hash = document_row(sql, source)[1]
    winner = next(k for k, d in expected.items() if d.content_hash == doc_hash)
    stored = snapshot(sql, source)
    assert [r[0] for r in stored["nodes"]] == [n.id for n in expected[winner].nodes]
    repo = Repository(db.engine(db_url))
    assert repo.node_text(root_id(sql, source)) == expected_text(expected[winner])
    repo.engine.dispose()


def test_writers_on_different_sources_do_not_block_each_other(db_url: str, sql: psycopg.Connection) -> None:
    hrag = own_hrag(db_url, HashingEmbedder())
    a, b = "locked/a.md", "free/b.md"
    hrag.ingest_tree(parse_markdown(handbook(2, 2, tag="A1"), a))
    done: dict[str, float] = {}
    errors: list[BaseException] = []

    def write(source: str, text: str) -> None:
        try:
            hrag.ingest_tree(parse_markdown(text, source))
            done[source] = time.monotonic()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    with psycopg.connect(db.libpq_url(db_url)) as locker:  # one open transaction holding A's lock
        locker.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"hrag\x1fdefault\x1f{a}",))

        writer_b = threading.Thread(target=write, args=(b, handbook(2, 2, tag="B")))
        writer_b.start()
        writer_b.join(timeout=15)
        assert not writer_b.is_alive() and b in done, "a write of another source waited for A's lock"

        writer_a = threading.Thread(target=write, args=(a, handbook(2, 2, tag="A2")))
        writer_a.start()
        writer_a.join(timeout=1.0)
        assert writer_a.is_alive() and a not in done, "a write of the locked source did not wait"
        waiting = sql.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
        ).fetchone()[0]
        assert waiting == 1
        released = time.monotonic()
        locker.rollback()

    writer_a.join(timeout=15)
    assert not writer_a.is_alive() and errors == []
    assert done[a] >= released
    assert "Section 0A2" in hrag.repository.node_text(root_id(sql, a))
    hrag.repository.engine.dispose()


# -------------------------------------------------------------- 8. bad input


BAD_FILES: dict[str, tuple[str, bytes, str]] = {
    "invalid-utf8": ("latin1.md", "# Café\n\nLe café est très bon.\n".encode("latin-1"), "not valid UTF-8"),
    "nul-bytes": ("nul.md", b"# Title\n\n" + b"Plain text. " * 20 + b"\x00" + b"More text.\n", "NUL byte"),
    "empty": ("empty.md", b"", "empty"),
    "whitespace-only": ("blank.txt", b"  \n\t\n   \n", "empty"),
    "binary": ("image.md", bytes(range(256)) * 8, "binary"),
    "no-leaves": ("shell.html", b"<html><head><title>T</title></head><body><div></div></body></html>",
                  "no text blocks"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_file_is_a_clear_error_and_costs_nothing_stored(
    case: str, hrag: HRAG, sql: psycopg.Connection, tmp_path: Path
) -> None:
    hrag.ingest([GUIDE], stop_on_error=True)
    before = snapshot(sql, GUIDE)
    name, data, message = BAD_FILES[case]
    bad = tmp_path / name
    bad.write_bytes(data)

    with pytest.raises(IngestError, match=message) as raised:
        hrag.ingest([bad], stop_on_error=True)
    assert str(bad) in str(raised.value)

    # Without stop_on_error the bad file is reported and the good one next to it is ingested.
    good = tmp_path / "good.md"
    good.write_text("# Good\n\nA perfectly fine paragraph.\n", encoding="utf-8")
    report = hrag.ingest([bad, good])
    assert [f for f, _ in report.failed] == [str(bad)]
    assert str(bad) in report.failed[0][1] and message in report.failed[0][1]
    assert [r.source for r in report.results] == [good.name]

    assert document_row(sql, bad) is None
    assert_same(before, snapshot(sql, GUIDE))
    assert sql.execute("SELECT count(*) FROM hrag.documents").fetchone()[0] == 2


def test_missing_file_directory_of_mixed_files_and_empty_tree(
    hrag: HRAG, sql: psycopg.Connection, tmp_path: Path
) -> None:
    hrag.ingest([GUIDE], stop_on_error=True)
    before = snapshot(sql, GUIDE)

    missing = tmp_path / "nope.md"
    with pytest.raises(IngestError, match="no such file") as raised:
        hrag.ingest([missing])
    assert str(missing) in str(raised.value)

    folder = tmp_path / "mixed"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# A\n\nAlpha paragraph.\n", encoding="utf-8")
    (folder / "sub" / "b.txt").write_text("Beta paragraph.\n", encoding="utf-8")
    (folder / "data.csv").write_text("x,y\n1,2\n", encoding="utf-8")
    (folder / "blob.bin").write_bytes(b"\x00\x01\x02")
    (folder / ".hidden.md").write_text("# Hidden\n\nsecret\n", encoding="utf-8")
    report = hrag.ingest([folder], stop_on_error=True)
    assert sorted(Path(p).name for p, _ in report.skipped) == ["blob.bin", "data.csv"]
    assert all("unsupported file type" in reason for _, reason in report.skipped)
    assert sorted(Path(r.source).name for r in report.results) == ["a.md", "b.txt"]
    assert report.failed == []

    empty = DocumentTree(source="hollow.md", root=DraftNode(kind="document", title="Hollow"))
    with pytest.raises(IngestError, match=r"hollow\.md: the document's structure yields no leaves"):
        hrag.ingest_tree(empty)

    assert document_row(sql, "hollow.md") is None
    assert_same(before, snapshot(sql, GUIDE))


def test_embedder_with_the_wrong_dimension_is_refused(
    hrag: HRAG, sql: psycopg.Connection, db_url: str
) -> None:
    hrag.ingest([GUIDE], stop_on_error=True)
    before = snapshot(sql, GUIDE)
    wrong = WrongDimEmbedder()
    for call in (
        lambda h: h.ingest([WORK_RULES], stop_on_error=True),
        lambda h: h.ingest([WORK_RULES]),
        lambda h: h.ingest_tree(parse_markdown("# T\n\nText.\n", "t.md")),
    ):
        with pytest.raises(EmbeddingError) as raised:
            call(HRAG(db_url, embedder=wrong))
        assert "8-dimensional" in str(raised.value) and "384" in str(raised.value)
    # The repository refuses it too when called directly.
    doc = prepare_file(WORK_RULES, IngestOptions(), model_name=wrong.model_name, counter=wrong.token_counter)
    with pytest.raises(EmbeddingError, match=r"8-dimensional.*384"):
        hrag.repository.write_document(doc, wrong)
    assert wrong.texts == []
    assert document_row(sql, WORK_RULES) is None
    assert_same(before, snapshot(sql, GUIDE))


# ------------------------------------------------------------ 9. PDF and Python


def test_pdf_and_python_ingest_into_page_and_code_trees(hrag: HRAG, sql: psycopg.Connection) -> None:
    report = hrag.ingest([FIXTURES / "sample.pdf", FIXTURES / "module.py"], stop_on_error=True)
    assert [r.status for r in report.results] == ["created", "created"]

    def children(source: Path, parent_title: str | None = None) -> list[tuple[str, str | None]]:
        parent = root_id(sql, source) if parent_title is None else sql.execute(
            "SELECT n.id FROM hrag.nodes n JOIN hrag.documents d ON d.id = n.document_id "
            "WHERE d.source = %s AND n.title = %s", (stored_name(source), parent_title)
        ).fetchone()[0]
        return [tuple(r) for r in sql.execute(
            "SELECT kind, title FROM hrag.nodes WHERE parent_id = %s ORDER BY position", (parent,)
        )]

    pdf = FIXTURES / "sample.pdf"
    assert children(pdf) == [("page", "Page 1"), ("page", "Page 2")]
    page_1 = hrag.repository.node_text(sql.execute(
        "SELECT id FROM hrag.nodes WHERE title = 'Page 1'").fetchone()[0])
    assert "Claims must be submitted within 30 days." in page_1 and "director" not in page_1

    module = FIXTURES / "module.py"
    kinds = children(module)
    assert ("class", "Item") in kinds and ("class", "Inventory") in kinds and ("function", "total_value") in kinds
    assert children(module, "Inventory") == [
        ("function", f"Inventory.{name}") for name in ("__init__", "add", "remove", "low_stock")
    ]
    inventory = sql.execute("SELECT id, child_count FROM hrag.nodes WHERE title = 'Inventory'").fetchone()
    assert inventory[1] == 4
    assert "only {available} units" in hrag.repository.node_text(inventory[0])


# ----------------------------------------------------------- 10. write throughput


def test_write_rows_only_stores_a_5000_node_document(db_url: str, sql: psycopg.Connection) -> None:
    root = DraftNode(kind="document", title="Big")
    for s in range(50):
        section = DraftNode(kind="section", title=f"Part {s}", content=f"Part {s}", key=f"part{s}")
        section.children = [DraftNode(kind="paragraph", content=f"Paragraph {s}.{p} of the big document.")
                            for p in range(98)]
        root.children.append(section)
    root.children += [DraftNode(kind="paragraph", content=f"Appendix note {i}.") for i in range(49)]
    doc = flatten(DocumentTree(source="big.md", root=root), model_name="precomputed")
    assert len(doc.nodes) == 5000 and len(doc.nodes) > 2 * repository_module.COPY_CHUNK

    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((len(doc.search_targets), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    by_text = {n.embed_text: v for n, v in zip(doc.search_targets, vectors, strict=True)}

    # Maintaining the HNSW index costs ~1.6 ms per vector on a 2-core machine (~8 s here),
    # which is the benchmark's business; this test's private database drops it so the
    # test checks the write path itself (COPY in 3 chunks, FKs, constraints) quickly.
    sql.execute("DROP INDEX hrag.nodes_embedding_hnsw_idx")
    repo = Repository(db.engine(db_url))
    started = time.perf_counter()
    repo.write_rows_only(doc, by_text)  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    assert node_count(sql, "big.md") == 5000
    assert sql.execute("SELECT count(embedding) FROM hrag.nodes").fetchone()[0] == 4949
    assert sql.execute("SELECT max(subtree_end) FROM hrag.nodes WHERE parent_id IS NULL").fetchone()[0] == 4999
    print(f"wrote 5,000 nodes in {seconds:.2f} s")
    repo.engine.dispose()


def test_an_explicit_strategy_reads_a_named_file_of_any_type_but_a_walk_still_skips_them(
        hrag: HRAG, tmp_path: Path) -> None:
    """The advice in the "unsupported file type" error (pass a strategy to read it as text) works."""
    config = tmp_path / "settings.toml"
    config.write_text('retention = "30 days"\n\n[backup]\nhour = 3\n', encoding="utf-8")
    (tmp_path / "notes.md").write_text("# Notes\n\nKept for a month.\n", encoding="utf-8")
    window = IngestOptions(strategy="window")
    assert [r.status for r in hrag.ingest([config], options=window, stop_on_error=True).results] == ["created"]
    walked = hrag.ingest([tmp_path], options=window, stop_on_error=True)
    assert [(Path(p).name, reason) for p, reason in walked.skipped] == [
        ("settings.toml", "unsupported file type '.toml'")]
    assert [Path(r.source).name for r in walked.results] == ["notes.md"]
