"""A question to every collection when they hold different models (issue #49, item 4), real models.

The demo's collections are two Japanese ones embedded with multilingual e5
and an English one with MiniLM.  A question without a collection is
embedded once per model, each collection searched with its own model's
vector, and the candidates merged on their calibrated scores (0 at each
question's background, so the two models' scores compare); before, it was
refused ("embedded with different models").
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hrag_pg import cli
from hrag_pg.api import HRAG
from hrag_pg.settings import AutoMergeSettings, BudgetSettings, ParentChildSettings

pytestmark = pytest.mark.model

ENGLISH = "How long are messages kept before they are deleted?"
JAPANESE = "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？"


def test_the_question_is_embedded_once_per_model_for_every_collection(hrag: HRAG) -> None:
    stamped = hrag.embed_question(ENGLISH)
    vectors = stamped.vectors
    assert isinstance(vectors, dict) and set(vectors) == {"hr", "security", "manual"}
    assert np.array_equal(vectors["hr"], vectors["security"]), "one model, one vector"
    assert not np.array_equal(vectors["hr"], vectors["manual"])
    assert np.array_equal(vectors["manual"], hrag.embed_query(ENGLISH, "manual"))
    # each vector stamped with its model, which the statements check against the collections' records
    assert stamped.model["hr"][0] == "multilingual-e5-small-q4" and stamped.model["manual"][0] == "all-MiniLM-L6-v2"
    one = hrag.embed_question(ENGLISH, "manual")
    assert isinstance(one.vectors, np.ndarray) and one.model[0] == "all-MiniLM-L6-v2", "one collection: one vector"


@pytest.mark.parametrize("settings", [BudgetSettings(), ParentChildSettings(), AutoMergeSettings()],
                         ids=lambda s: s.mode)
def test_each_language_finds_its_collection_whichever_model_embedded_it(hrag: HRAG, settings: object) -> None:
    english = hrag.context(ENGLISH, settings).results  # type: ignore[arg-type]
    assert english and english[0].source == "manual_en.md"
    assert any("72 hours" in r.content for r in english)
    japanese = hrag.context(JAPANESE, settings).results  # type: ignore[arg-type]
    assert japanese and japanese[0].source == "work_rules_ja.md"
    assert any("毎月25日" in r.content for r in japanese)


def test_hrag_query_without_a_collection_answers_across_models(examples_url: str, tmp_path: object) -> None:
    env = {"HRAG_DATABASE_URL": examples_url, "HRAG_DATA_DIR": str(tmp_path)}
    out = CliRunner().invoke(cli.app, ["query", ENGLISH, "--json"], env=env)
    assert out.exit_code == 0, out.output
    payload = json.loads(out.stdout)
    assert payload["mode"] == "auto" and payload["results"][0]["source"] == "manual_en.md"
