"""Every endpoint of the HTTP API, in-process, with good and bad input: the CLI's payloads and messages."""

from __future__ import annotations

import re
from collections.abc import Callable

import psycopg
import pytest
from fastapi.testclient import TestClient

from hrag_pg import argument_limits, db
from hrag_pg.api import HRAG, MAX_QUESTION_CHARS
from hrag_pg.settings import AutoMergeSettings
from tests.embedders import HashingEmbedder
from tests.server.conftest import TOKEN, auth

QUESTION = "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？"


def documents(url: str) -> list[tuple[str, str, int]]:
    """(collection, source, nodes) of every stored document, read as the owner."""
    with psycopg.connect(db.libpq_url(url)) as conn:
        return conn.execute("SELECT d.collection, d.source, count(n.id) FROM hrag.documents d "
                            "JOIN hrag.nodes n ON n.document_id = d.id GROUP BY 1, 2 ORDER BY 1, 2").fetchall()


# ------------------------------------------------------------------ retrieve


def test_retrieve_answers_what_the_cli_answers_as_query_json_with_ranks(client: TestClient, ingested: str) -> None:
    answer = client.post("/retrieve", json={"question": QUESTION, "collection": "hr", "mode": "auto-merge",
                                            "top_k": 6, "merge_threshold": 0.5})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    direct = HRAG(ingested, embedder=HashingEmbedder()).context(  # what `hrag query` prints
        QUESTION, AutoMergeSettings(top_k=6, merge_threshold=0.5), collection="hr")
    assert body["mode"] == "auto-merge" and body["max_tokens"] is None and body["dropped"] == []
    assert body["results"] == [r.model_dump(mode="json") for r in direct.results]
    assert body["total_tokens"] == direct.total_tokens == sum(r["token_count"] for r in body["results"])


def test_retrieve_with_a_budget_reports_total_tokens_and_dropped(client: TestClient) -> None:
    body = client.post("/retrieve", json={"question": QUESTION, "collection": "hr", "max_tokens": 300}).json()
    assert body["mode"] == "auto"  # the CLI's default with a budget
    assert body["results"] and body["total_tokens"] <= 300 and isinstance(body["dropped"], list)
    assert sum(r["token_count"] for r in body["results"]) == body["total_tokens"]


def test_retrieve_filters_on_document_metadata(client: TestClient) -> None:
    english = client.post("/retrieve", json={"question": "install pgvector", "filter": {"lang": "en"}}).json()
    assert english["results"] and {r["source"] for r in english["results"]} == {"guide.md"}
    assert client.post("/retrieve", json={"question": "install", "filter": {"lang": "xx"}}).json()["results"] == []


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"question": "x", "merge_threshold": 0.5}, 400, "merge_threshold is a setting of auto-merge, not of mode "
                                                     "auto"),
    ({"question": "x", "mode": "auto", "max_parents": 3}, 400, "max_parents is a setting of parent-child"),
    ({"question": "x", "top_kk": 3}, 422, "top_kk is not a field this endpoint takes"),
    ({"question": "x", "top_k": 0}, 400, "top_k must be between 1 and 1000, got 0"),
    ({"question": "x", "top_k": "many"}, 422, "top_k: Input should be a valid integer"),
    ({"question": "x", "max_tokens": argument_limits.MAX_CONTEXT_TOKENS + 1}, 400,
     f"max_tokens must be between 1 and {argument_limits.MAX_CONTEXT_TOKENS}"),
    ({"question": "x", "lexical_weight": 1.5}, 400, "lexical_weight must be in [0, 1], got 1.5"),
    ({"question": "x", "mode": "best"}, 422, "mode: Input should be"),
    ({"question": "  "}, 400, "the question is empty; ask something"),
    ({"question": "x" * (MAX_QUESTION_CHARS + 1)}, 400, f"the limit is {MAX_QUESTION_CHARS:,}"),
    ({"mode": "auto"}, 422, "question: Field required"),
    ({"question": "x", "collection": "nope"}, 404, "no collection 'nope' in this database; collections: hr, "
                                                   "manuals"),
])
def test_retrieve_refuses_bad_input_with_the_message_naming_it(client: TestClient, body: dict[str, object],
                                                               status: int, message: str) -> None:
    answer = client.post("/retrieve", json=body)
    assert answer.status_code == status, answer.text
    assert message in answer.json()["error"]
    assert "\n" not in answer.json()["error"]


def test_a_body_that_is_not_json_is_a_422_saying_so(client: TestClient) -> None:
    answer = client.post("/retrieve", content=b"{not json", headers={"Content-Type": "application/json"})
    assert answer.status_code == 422 and "not valid JSON" in answer.json()["error"]


# ------------------------------------------------------------------ reads


def test_sources_lists_documents_as_sources_json(client: TestClient) -> None:
    rows = client.get("/sources").json()
    assert [(r["collection"], r["source"]) for r in rows] == [("hr", "work_rules_ja.md"), ("manuals", "guide.md")]
    assert rows[0]["model"]["model"] == "hashing-test" and rows[1]["metadata"]["lang"] == "en"
    assert [r["source"] for r in client.get("/sources", params={"collection": "manuals"}).json()] == ["guide.md"]
    unknown = client.get("/sources", params={"collection": "nope"})
    assert unknown.status_code == 404 and "collections: hr, manuals" in unknown.json()["error"]


def test_outline_and_nodes_let_a_client_walk_a_document(client: TestClient) -> None:
    outline = client.get("/outline", params={"source": "work_rules_ja.md", "max_depth": 2}).json()
    assert outline[0]["depth"] == 0 and outline[0]["source"] == "work_rules_ja.md"
    article = next(e for e in outline if e["title"] == "第4条：諸手当および福利厚生")
    node = client.get(f"/nodes/{article['node_id']}").json()
    assert node["node_id"] == article["node_id"] and "毎月25日" in node["content"]
    assert node["token_count"] == article["token_count"]  # the whole article's, as the outline says
    assert len(node["children"]) >= 4
    assert all({"node_id", "kind", "title", "lead", "token_count"} <= set(c) for c in node["children"])
    assert client.get("/outline", params={"collection": "manuals", "max_depth": 0}).json()[0]["source"] == "guide.md"


@pytest.mark.parametrize(("path", "status", "message"), [
    ("/nodes/not-a-uuid", 400, "'not-a-uuid' is not a node id (a UUID)"),
    ("/nodes/00000000-0000-0000-0000-000000000000", 404, "no node 00000000-0000-0000-0000-000000000000"),
    ("/outline?max_depth=101", 400, "max_depth"),
    ("/outline?collection=nope", 404, "no collection 'nope'"),
    ("/outline?source=missing.md", 400, "no document 'missing.md' is stored"),
    ("/no-such-endpoint", 404, "Not Found"),
])
def test_reads_refuse_what_does_not_exist_or_is_malformed(client: TestClient, path: str, status: int,
                                                          message: str) -> None:
    answer = client.get(path)
    assert answer.status_code == status, answer.text
    assert message in answer.json()["error"]


def test_health_says_database_schema_and_model(client: TestClient) -> None:
    from hrag_pg import migrate

    body = client.get("/health").json()
    assert body["status"] == "ok" and body["database"] == "reachable" and body["model_loaded"] is True
    assert body["schema_revision"] == body["head_revision"] == migrate.head_revision()


def test_health_is_503_while_the_database_is_unreachable(client: TestClient, ingested: str) -> None:
    with psycopg.connect(db.libpq_url(ingested)) as conn:
        name = conn.info.dbname
    with psycopg.connect(db.libpq_url(ingested), dbname="postgres", autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        try:
            answer = client.get("/health")
        finally:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    assert answer.status_code == 503 and answer.json()["database"] == "unreachable"
    assert client.get("/health").status_code == 200  # and it comes back by itself


def test_the_openapi_docs_list_every_endpoint(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/retrieve", "/inspect", "/sources", "/outline", "/nodes/{node_id}", "/documents", "/health"} <= set(paths)
    assert client.get("/docs").status_code == 200


# ------------------------------------------------------------------ the inspector


@pytest.mark.parametrize("body", [
    {"question": "試用期間中の通勤手当", "collection": "hr"},
    {"question": "How do I rotate the keys?", "mode": "auto-merge", "merge_threshold": 0.3},
    {"question": "退職の手続", "collection": "hr", "mode": "parent-child", "max_parents": 2, "max_tokens": 300},
])
def test_inspect_answers_what_retrieve_answers_with_its_hits_and_map(client: TestClient,
                                                                     body: dict[str, object]) -> None:
    inspected = client.post("/inspect", json=body)
    assert inspected.status_code == 200, inspected.text
    shown = inspected.json()
    assert shown["answer"] == client.post("/retrieve", json=body).json()
    assert len(shown["reasons"]) == len(shown["answer"]["results"]) and shown["hits"]
    on_map = {n["node_id"]: n for n in shown["tree"]}
    assert all(on_map[r["node_id"]]["passage_rank"] == r["rank"] for r in shown["answer"]["results"])
    assert all(on_map[h["node_id"]]["hit_rank"] == h["rank"] for h in shown["hits"])
    assert shown["settings"]["mode"] == (body.get("mode") or "auto")


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"question": "keys", "collection": "nope"}, 404, "no collection 'nope'"),
    ({"question": "keys", "mode": "auto", "max_parents": 2}, 400, "max_parents"),
    ({"question": ""}, 400, "question"),
])
def test_inspect_refuses_what_retrieve_refuses_in_the_same_words(client: TestClient, body: dict[str, object],
                                                                 status: int, message: str) -> None:
    inspected, retrieved = client.post("/inspect", json=body), client.post("/retrieve", json=body)
    assert (inspected.status_code, inspected.json()) == (retrieved.status_code, retrieved.json())
    assert inspected.status_code == status and message in inspected.json()["error"]


def test_the_inspector_page_is_served_from_the_package_with_nothing_from_elsewhere(client: TestClient) -> None:
    home = client.get("/?compare=1", follow_redirects=False)
    assert home.status_code == 307 and home.headers["location"] == "/inspector/?compare=1"
    page = client.get("/inspector/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for asset in ("inspector.js", "inspector.css"):
        served = client.get(f"/inspector/{asset}")
        assert served.status_code == 200 and served.text
        assert "//" not in " ".join(re.findall(r"(?:src|href|url)\(?=?[\"']?([^\"')\s]+)", served.text))
    assert not re.findall(r"(?:src|href)=\"(?:https?:)?//", page.text), "no script, style or font from the network"
    assert client.get("/inspector/missing.js").json() == {"error": "Not Found"}


# ------------------------------------------------------------------ writes


DOC = "# Keys\n\n## Rotation\n\nRotate the signing keys every 90 days.\n\n## Storage\n\nKeep keys in the vault.\n"


def test_a_write_with_the_token_ingests_and_deletes(client: TestClient, ingested: str) -> None:
    created = client.post("/documents", headers=auth(), json={"text": DOC, "source": "keys.md",
                                                              "collection": "ops", "metadata": {"team": "sec"}})
    assert created.status_code == 200, created.text
    assert created.json()["status"] == "created" and created.json()["nodes"] >= 3
    again = client.post("/documents", headers=auth(), json={"text": DOC, "source": "keys.md", "collection": "ops",
                                                            "metadata": {"team": "sec"}})
    assert again.json()["status"] == "unchanged"
    hits = client.post("/retrieve", json={"question": "how often are signing keys rotated", "collection": "ops"})
    assert "90 days" in hits.json()["results"][0]["content"]
    deleted = client.delete("/documents", headers=auth(), params={"source": "keys.md", "collection": "ops"})
    assert deleted.status_code == 200 and deleted.json() == {"deleted": "keys.md", "collection": "ops"}
    assert ("ops", "keys.md") not in [(c, s) for c, s, _ in documents(ingested)]


@pytest.mark.parametrize(("token", "headers", "status", "message"), [
    ("", {}, 403, "writes are disabled on this server: start it with HRAG_SERVER_TOKEN set"),
    ("", auth("anything"), 403, "writes are disabled"),
    (TOKEN, {}, 401, "writes need 'Authorization: Bearer <token>'"),
    (TOKEN, auth("wrong"), 401, "the token given is not it"),
    (TOKEN, {"Authorization": f"Basic {TOKEN}"}, 401, "writes need"),
])
def test_a_write_without_the_right_token_is_refused_and_writes_nothing(
        ingested: str, make_client: Callable[..., TestClient], token: str, headers: dict[str, str], status: int,
        message: str) -> None:
    server = make_client(token)
    before = documents(ingested)
    posted = server.post("/documents", headers=headers, json={"text": DOC, "source": "keys.md"})
    deleted = server.delete("/documents", headers=headers, params={"source": "guide.md", "collection": "manuals"})
    for answer in (posted, deleted):
        assert answer.status_code == status, answer.text
        assert message in answer.json()["error"]
    assert documents(ingested) == before
    assert server.get("/sources").status_code == 200  # reads stay open


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"text": "", "source": "a.md"}, 400, "a.md"),
    ({"text": "# A\n\nok", "source": " "}, 400, "non-empty source name"),
    ({"text": "# A\n\nok", "source": "a.md", "format": "docx"}, 422, "format: Input should be"),
    ({"text": "# A\n\nok", "source": "a.md", "strategy": "chapters"}, 400, "unknown strategy 'chapters'"),
    ({"text": "# A\n\nok", "source": "a.md", "metadata": [1]}, 422, "metadata: Input should be a valid dictionary"),
    ({"text": "# A\n\nnul \x00 byte", "source": "a.md"}, 400, "NUL"),
    ({"text": "# A\n\nok", "source": "a.md", "collection": " "}, 400, "collection must not be empty"),
    ({"source": "a.md"}, 422, "text: Field required"),
])
def test_a_bad_document_is_refused_and_nothing_is_written(client: TestClient, ingested: str,
                                                          body: dict[str, object], status: int, message: str) -> None:
    before = documents(ingested)
    answer = client.post("/documents", headers=auth(), json=body)
    assert answer.status_code == status, answer.text
    assert message in answer.json()["error"]
    assert documents(ingested) == before


def test_deleting_what_is_not_stored_is_404_saying_where_it_is(client: TestClient, ingested: str) -> None:
    answer = client.delete("/documents", headers=auth(), params={"source": "guide.md"})
    assert answer.status_code == 404
    assert answer.json()["error"] == ("no source 'guide.md' in collection 'default'; it is stored in collection "
                                      "'manuals' (give its collection)")
    assert client.delete("/documents", headers=auth()).status_code == 422  # source is required
    assert len(documents(ingested)) == 2


def test_a_body_over_the_limit_is_413_and_writes_nothing(ingested: str, make_client: Callable[..., TestClient]) -> None:
    server = make_client(TOKEN, max_body_bytes=2_000)
    big = {"text": "# Big\n\n" + "word " * 1_000, "source": "big.md"}
    answer = server.post("/documents", headers=auth(), json=big)
    assert answer.status_code == 413 and "over the server's limit of 2,000 bytes" in answer.json()["error"]

    def chunks() -> object:  # no Content-Length: counted as it arrives
        yield b'{"text": "'
        for _ in range(50):
            yield b"word " * 20
        yield b'", "source": "big.md"}'

    chunked = server.post("/documents", headers={**auth(), "Content-Type": "application/json"}, content=chunks())
    assert chunked.status_code == 413
    assert ("default", "big.md") not in [(c, s) for c, s, _ in documents(ingested)]
    assert server.post("/documents", headers=auth(), json={"text": DOC, "source": "small.md"}).status_code == 200


def test_an_unexpected_failure_is_a_500_with_one_line(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from hrag_pg.server.service import Service

    async def broken(self: Service, *args: object, **kwargs: object) -> object:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(Service, "sources", broken)
    answer = client.get("/sources")
    assert answer.status_code == 500
    assert answer.json() == {"error": "unexpected RuntimeError: boom second line (a bug in hrag-pg; the server's log "
                                      "has the traceback)"}


# ------------------------------------------------------------------ tenants


def test_a_server_on_a_tenant_role_sees_only_its_collections(ingested: str,
                                                             make_client: Callable[..., TestClient]) -> None:
    role = "hrag_tenant_serve"
    with psycopg.connect(db.libpq_url(ingested), autocommit=True) as conn:
        conn.execute("SELECT hrag.create_tenant_role(%s, %s, true)", (role, ["manuals"]))
        conn.execute(f'ALTER ROLE "{role}" LOGIN')
        hr_root = conn.execute("SELECT n.id FROM hrag.nodes n JOIN hrag.documents d ON d.id = n.document_id "
                               "WHERE d.collection = 'hr' AND n.parent_id IS NULL").fetchone()[0]
    user = ingested.split("://", 1)[1].split("@", 1)[0]
    try:
        server = make_client(TOKEN, url=ingested.replace(f"{user}@", f"{role}@", 1))
        assert [r["collection"] for r in server.get("/sources").json()] == ["manuals"]
        assert {e["collection"] for e in server.get("/outline").json()} == {"manuals"}
        refused = server.post("/retrieve", json={"question": QUESTION, "collection": "hr"})
        assert refused.status_code == 404 and refused.json()["error"].endswith("collections: manuals")
        everything = server.post("/retrieve", json={"question": QUESTION, "max_tokens": 5000}).json()
        assert {r["source"] for r in everything["results"]} <= {"guide.md"}
        assert server.get(f"/nodes/{hr_root}").status_code == 404
        before = documents(ingested)
        foreign = server.delete("/documents", headers=auth(), params={"source": "work_rules_ja.md",
                                                                      "collection": "hr"})
        assert foreign.status_code == 404 and "it is stored in" not in foreign.json()["error"]  # (nor where)
        written = server.post("/documents", headers=auth(), json={"text": DOC, "source": "x.md",
                                                                   "collection": "hr"})
        assert written.status_code >= 400
        assert documents(ingested) == before
    finally:
        with psycopg.connect(db.libpq_url(ingested), autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def test_every_error_is_json_even_the_mcp_transports_foreign_host_refusal(ingested: str) -> None:
    from hrag_pg.server.http import create_app
    from tests.server.conftest import facade_factory

    app = create_app(facade_factory(ingested), token="", warm_up=False)
    with TestClient(app, base_url="http://attacker.example:8740", raise_server_exceptions=False) as foreign:
        answer = foreign.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                              headers={"Accept": "application/json, text/event-stream"})
        assert (answer.status_code, answer.json()) == (421, {"error": "Invalid Host header"})
        assert foreign.get("/no-such-endpoint").json() == {"error": "Not Found"}
