"""hrag.retrieve_hits / hrag.retrieve: the best non-overlapping context within a token budget.

The budget is counted in stored token counts (``nodes.subtree_tokens``, the
sum of ``token_count`` over a node's subtree); these trees store one token
per word of each node's own text (tests/sqltree.py), and the properties below
count the same way.
"""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pgvector.psycopg import register_vector

from tests.integration.test_sql_merge_property import trees
from tests.sqltree import Spec, insert_tree, unit


@pytest.fixture
def conn(postgresql: psycopg.Connection) -> psycopg.Connection:
    register_vector(postgresql)
    return postgresql


def _tokens(spec: Spec) -> dict[str, int]:
    """Subtree token totals by key, computed independently of the database."""
    totals: dict[str, int] = {}

    def visit(s: Spec) -> int:
        total = (s.own_tokens if s.content else 0) + sum(visit(c) for c in s.children)
        totals[s.key] = total
        return total

    visit(spec)
    return totals


def _ancestors(spec: Spec) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}

    def visit(s: Spec, above: set[str]) -> None:
        found[s.key] = above
        for c in s.children:
            visit(c, above | {s.key})

    visit(spec, set())
    return found


@st.composite
def budget_cases(draw: st.DrawFn) -> tuple[Spec, dict[str, float], int]:
    root = draw(trees())
    stack, keys = [root], []
    while stack:
        s = stack.pop()
        s.tokens = draw(st.integers(1, 60))
        s.content = " ".join(["w"] * s.tokens)
        keys.append(s.key)
        stack.extend(s.children)
    hit_keys = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=15, unique=True))
    scores = {k: draw(st.floats(0.0, 1.0, width=32)) for k in hit_keys}
    budget = draw(st.integers(1, 800))
    return root, scores, budget


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=budget_cases())
# The best hit is over a 1-token budget and the one that fits scores 0: not worth a token, so the best stands alone.
@example(case=(Spec("n1", "w", children=[Spec("n2", "w w", kind="section", tokens=2),
                                          Spec("n3", "w", kind="section", tokens=1)], kind="section", tokens=1),
               {"n1": 0.0, "n3": 0.0, "n2": 1.0}, 1))
def test_retrieve_hits_never_overlaps_never_exceeds_the_budget_and_never_returns_nothing(
    conn: psycopg.Connection, case: tuple[Spec, dict[str, float], int]
) -> None:
    root, scores, budget = case
    built = insert_tree(conn, root)
    key_of = {v: k for k, v in built.ids.items()}
    tokens, ancestors = _tokens(root), _ancestors(root)
    rows = conn.execute(
        "SELECT node_id, token_count, reason FROM hrag.retrieve_hits(%s, %s::real[], %s)",
        ([built.ids[k] for k in scores], list(scores.values()), budget),
    ).fetchall()
    got = [key_of[r[0]] for r in rows]

    assert rows, "a hit exists, so something is returned"
    assert len(set(got)) == len(got)
    for key in got:
        assert not (ancestors[key] & set(got)), f"{key} returned with one of its ancestors"
    assert [r[1] for r in rows] == [tokens[k] for k in got], "token_count is the subtree's stored tokens"
    best = max(scores, key=lambda k: scores[k])
    if sum(tokens[k] for k in got) > budget:
        # Over the budget only as the fallback: nothing that fits was worth its tokens (a zero-score
        # hit that fits is not), so one hit stands alone, flagged; the best hit never fits then.
        assert len(rows) == 1 and rows[0][2].startswith("over budget"), rows
        assert all(tokens[k] > budget for k in scores if scores[k] == scores[best]), "the best hit fits, passed by"
    else:
        assert all(not r[2].startswith("over budget") for r in rows)
    # Every returned node holds at least one hit (nothing without evidence).
    for key in got:
        assert any(k == key or key in ancestors[k] for k in scores)


def _article(n_items: int, axis0: int, tokens: int = 40) -> list[Spec]:
    return [Spec(f"a{axis0}.{i}", " ".join(["w"] * tokens), {axis0 + i: 1.0}, kind="item", tokens=tokens)
            for i in range(n_items)]


def _policy() -> tuple[Spec, list[str]]:
    """A chapter of four 3-item articles and a document around it (about 600 tokens)."""
    articles = [Spec(f"art{j}", f"Article {j}", kind="clause", children=_article(3, 10 * j)) for j in range(4)]
    return Spec("policy", kind="document", children=[Spec("ch", "Chapter", kind="chapter", children=articles)]), []


def test_a_question_hitting_most_of_an_article_gets_the_article_not_the_chapter(conn: psycopg.Connection) -> None:
    root, _ = _policy()
    built = insert_tree(conn, root)
    hits = {"a10.0": 0.70, "a10.1": 0.69, "a10.2": 0.68, "a0.0": 0.40, "a20.1": 0.38}
    rows = conn.execute("SELECT node_id, merged_from, reason FROM hrag.retrieve_hits(%s, %s::real[], 2000)",
                        ([built.ids[k] for k in hits], list(hits.values()))).fetchall()
    key_of = {v: k for k, v in built.ids.items()}
    assert key_of[rows[0][0]] == "art1", "the article whose three items are all hit comes first, merged"
    assert {key_of[m] for m in rows[0][1]} == {"a10.0", "a10.1", "a10.2"}
    assert "ch" not in {key_of[r[0]] for r in rows} and "policy" not in {key_of[r[0]] for r in rows}


def test_a_narrow_question_keeps_its_one_strong_hit_small(conn: psycopg.Connection) -> None:
    root, _ = _policy()
    built = insert_tree(conn, root)
    hits = {"a10.0": 0.80, "a0.1": 0.45, "a20.2": 0.44, "a30.0": 0.43}
    rows = conn.execute("SELECT node_id FROM hrag.retrieve_hits(%s, %s::real[], 2000)",
                        ([built.ids[k] for k in hits], list(hits.values()))).fetchall()
    key_of = {v: k for k, v in built.ids.items()}
    got = [key_of[r[0]] for r in rows]
    assert got[0] in ("a10.0", "art1"), "the strong hit (or its own article) first"
    assert "ch" not in got and "policy" not in got, "weak scattered hits do not pull in the chapter"


def _short_regulation() -> Spec:
    """A short rule book as the seed's are: a document › a chapter of five 3-item articles (40 tokens an item)."""
    articles = [Spec(f"art{j}", f"Article {j}", kind="clause", children=_article(3, 10 * j)) for j in range(5)]
    return Spec("rules", kind="document", children=[Spec("ch", "Chapter", kind="chapter", children=articles)])


def test_one_article_hit_in_a_short_chapter_is_taken_without_its_chapter(conn: psycopg.Connection) -> None:
    """A broad question about one article: its three items score high, two items of another article
    nearly as high, and in a collection this small the rest of the chapter is hit weakly (hits
    counted by rank).

    The voting hits cover a third of the chapter's tokens, and its two hit articles share its
    evidence, which made the chapter a merge whatever its articles said; above the level of
    leaves a merge needs voting hits in half its children (auto-merge's levels), and two of
    five articles hold them, so the article is the unit.
    """
    built = insert_tree(conn, _short_regulation())
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"a10.0": 0.70, "a10.1": 0.68, "a10.2": 0.66, "a0.0": 0.66, "a0.1": 0.64,
            "a20.1": 0.30, "a30.2": 0.29, "a40.0": 0.28, "a0.2": 0.27}
    sql = "SELECT node_id, merged_from FROM hrag.retrieve_hits(%s, %s::real[], 2000)"
    params = ([built.ids[k] for k in hits], list(hits.values()))
    rows = conn.execute(sql, params).fetchall()
    got = [key_of[r[0]] for r in rows]
    assert got[0] == "art1" and {key_of[m] for m in rows[0][1]} == {"a10.0", "a10.1", "a10.2"}
    assert "ch" not in got and "rules" not in got

    conn.execute("SET hrag.auto_merge_ratio = 0")  # without the levels: the chapter (or all of it), for one article
    assert {"ch", "rules"} & {key_of[r[0]] for r in conn.execute(sql, params)}


def test_a_chapter_is_not_merged_around_the_one_article_that_holds_its_evidence(conn: psycopg.Connection) -> None:
    """A narrow question: one article's three items score high, two items of two other articles well
    enough to vote (0.6 of the best), which puts voting hits in three of the five articles.

    By the levels alone the chapter is a merge, and it replaced the article at its whole
    evidence (the regulations' j03-n4: 642 tokens for a 120-token article).  Its second-best
    article holds a twentieth of the best one's evidence: the chapter adds tokens, not a
    second place where the answer lies, so the article is the unit.
    """
    built = insert_tree(conn, _short_regulation())
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"a10.0": 0.70, "a10.1": 0.66, "a10.2": 0.64, "a20.0": 0.45, "a30.0": 0.44}
    sql = "SELECT node_id FROM hrag.retrieve_hits(%s, %s::real[], 2000)"
    params = ([built.ids[k] for k in hits], list(hits.values()))
    assert [key_of[r[0]] for r in conn.execute(sql, params)] == ["art1"]

    conn.execute("SET hrag.auto_merge_balance = 0")  # any spread of evidence: the chapter, or its document
    assert {"ch", "rules"} & {key_of[r[0]] for r in conn.execute(sql, params)}


def test_a_chapter_whose_articles_share_its_evidence_is_still_merged(conn: psycopg.Connection) -> None:
    """A broad question over a chapter: three of its five articles hit, the weakest holding a third of
    the strongest's evidence, so the chapter comes back whole."""
    built = insert_tree(conn, _short_regulation())
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"a10.0": 0.70, "a10.1": 0.69, "a20.0": 0.68, "a20.1": 0.66, "a30.0": 0.62, "a30.1": 0.60}
    rows = conn.execute("SELECT node_id FROM hrag.retrieve_hits(%s, %s::real[], 2000)",
                        ([built.ids[k] for k in hits], list(hits.values()))).fetchall()
    assert [key_of[r[0]] for r in rows] == ["ch"]


def test_groups_are_no_level_a_section_over_them_merges_as_over_its_leaves(conn: psycopg.Connection) -> None:
    """A section of twelve notes, packed by ingestion into two groups; its hits lie in the first group.

    The groups are not the author's parts: that one of them holds nearly all the evidence says
    nothing about the section, which merges as it would over its twelve notes.
    """
    notes = _leaves("note", 12, 30)
    section = Spec("notes", "Notes", kind="section", tokens=1, children=[
        Spec("g1", kind="group", children=notes[:6]), Spec("g2", kind="group", children=notes[6:])])
    filler = Spec("filler", "Other", kind="section", children=_leaves("other", 20, 100), tokens=1)
    built = insert_tree(conn, Spec("manual", kind="document", children=[section, filler]))
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"note0": 0.80, "note1": 0.79, "note2": 0.78, "note3": 0.77, "note4": 0.76, "note7": 0.55}
    sql = "SELECT node_id FROM hrag.retrieve_hits(%s, %s::real[], 2000)"
    params = ([built.ids[k] for k in hits], list(hits.values()))
    with_groups = [key_of[r[0]] for r in conn.execute(sql, params)]
    conn.execute("UPDATE hrag.nodes SET kind = 'clause' WHERE kind = 'group'")
    as_clauses = [key_of[r[0]] for r in conn.execute(sql, params)]
    assert with_groups[0] == "notes"
    assert "notes" not in as_clauses, "the same tree with authored parts: the first part is the unit"


def test_a_hit_far_below_the_best_does_not_vote_for_a_merge(conn: psycopg.Connection) -> None:
    """A narrow question: one item scores high, its two siblings far below the best (under hrag.auto_vote).

    Counted by rank they were three hits covering the whole article, a merge; counted by
    evidence they are no evidence for one, and the item stands alone.
    """
    built = insert_tree(conn, _short_regulation())
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"a10.0": 0.70, "a10.1": 0.30, "a10.2": 0.28}
    sql = "SELECT node_id FROM hrag.retrieve_hits(%s, %s::real[], 2000)"
    params = ([built.ids[k] for k in hits], list(hits.values()))
    assert [key_of[r[0]] for r in conn.execute(sql, params)] == ["a10.0"]

    conn.execute("SET hrag.auto_vote = 0")  # every hit votes, as every hit counted before
    assert [key_of[r[0]] for r in conn.execute(sql, params)] == ["art1"]


def test_weaker_hits_beside_the_best_one_vote_for_its_section(conn: psycopg.Connection) -> None:
    """A broad question whose answer is a list: one item matches best, its siblings score little over
    half of it (the manual's b22).  Beside a voting hit, a hit at half the best votes too, so the
    article merges; weak hits elsewhere still do not (the test above)."""
    built = insert_tree(conn, _short_regulation())
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"a10.0": 0.80, "a10.1": 0.45, "a10.2": 0.44, "a30.0": 0.46}
    sql = "SELECT node_id FROM hrag.retrieve_hits(%s, %s::real[], 2000)"
    params = ([built.ids[k] for k in hits], list(hits.values()))
    assert "art1" in [key_of[r[0]] for r in conn.execute(sql, params)]

    conn.execute("SET hrag.auto_sibling_vote = 1.01")  # only hits at 0.6 of the best vote
    assert "art1" not in [key_of[r[0]] for r in conn.execute(sql, params)]


def test_the_merged_article_holding_the_most_evidence_ranks_first(conn: psycopg.Connection) -> None:
    """The budget mode ranks what it took by the evidence each holds: an article whose three items
    together outweigh one better-scoring item elsewhere comes first (the seed's "all BYOD
    obligations" and the definition of BYOD)."""
    built = insert_tree(conn, _short_regulation())
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"a0.0": 0.70, "a10.0": 0.68, "a10.1": 0.67, "a10.2": 0.66}
    rows = conn.execute("SELECT node_id, rank, score FROM hrag.retrieve_hits(%s, %s::real[], 2000)",
                        ([built.ids[k] for k in hits], list(hits.values()))).fetchall()
    assert [(key_of[r[0]], r[1]) for r in rows] == [("art1", 1), ("a0.0", 2)]
    assert rows[0][2] < rows[1][2], "ranked by evidence, not by the best hit's score"


def test_a_result_too_big_for_the_budget_is_replaced_by_its_parts(conn: psycopg.Connection) -> None:
    root, _ = _policy()
    built = insert_tree(conn, root)
    hits = {"a10.0": 0.70, "a10.1": 0.69, "a10.2": 0.68}
    key_of = {v: k for k, v in built.ids.items()}
    whole = conn.execute("SELECT node_id, token_count FROM hrag.retrieve_hits(%s, %s::real[], 2000)",
                         ([built.ids[k] for k in hits], list(hits.values()))).fetchall()
    assert [key_of[r[0]] for r in whole] == ["art1"] and whole[0][1] == 122  # 2 words + 3 x 40
    parts = conn.execute("SELECT node_id, token_count FROM hrag.retrieve_hits(%s, %s::real[], 100)",
                         ([built.ids[k] for k in hits], list(hits.values()))).fetchall()
    assert {key_of[r[0]] for r in parts} <= {"a10.0", "a10.1", "a10.2"} and len(parts) == 2
    assert sum(r[1] for r in parts) <= 100


@pytest.mark.parametrize("bad", [0, -5, 100001, None])
def test_max_tokens_outside_1_to_100000_is_refused_by_name(conn: psycopg.Connection, bad: int | None) -> None:
    root, _ = _policy()
    built = insert_tree(conn, root)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='"max_tokens" must be between 1 and 100000'):
        conn.execute("SELECT * FROM hrag.retrieve_hits(%s, %s::real[], %s)",
                     ([built.ids["a0.0"]], [0.5], bad))


def test_retrieve_searches_and_selects_in_one_call_with_vector_only_for_empty_text(conn: psycopg.Connection) -> None:
    root, _ = _policy()
    built = insert_tree(conn, root)
    query = unit({10: 1.0, 11: 0.9, 12: 0.9})
    for text in (None, "", "the and of"):
        rows = conn.execute("SELECT node_id, merged_from FROM hrag.retrieve(%s, %s, 2000)", (query, text)).fetchall()
        assert rows and rows[0][0] == built.ids["art1"], f"query text {text!r}: vector-only behaviour"


def _leaves(prefix: str, n: int, tokens: int) -> list[Spec]:
    return [Spec(f"{prefix}{i}", " ".join(["w"] * tokens), {i: 1.0}, kind="paragraph", tokens=tokens)
            for i in range(n)]


def _manual(notes: int = 6, note_tokens: int = 60) -> Spec:
    """Two sections of a manual and a long unrelated one (so every cluster clears the lift)."""
    return Spec("manual", kind="document", children=[
        Spec("notes", "Notes", kind="section", children=_leaves("note", notes, note_tokens), tokens=1),
        Spec("membership", "Membership", kind="section", children=_leaves("member", 5, 100), tokens=1),
        Spec("filler", "Other", kind="section", children=_leaves("other", 20, 100), tokens=1),
    ])


def test_a_section_replacing_its_taken_hits_is_worth_only_what_it_adds(conn: psycopg.Connection) -> None:
    """Two of twelve notes are hit and taken; the section around them adds 300 tokens and no evidence.

    Valued at its whole evidence it would replace them and leave no room for
    the third-best passage, in another section (its hits cover 60 of its 361
    tokens, below hrag.auto_merge_share, so it is not a merge).
    """
    built = insert_tree(conn, _manual(notes=12, note_tokens=30))
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"note0": 0.80, "note1": 0.78, "member2": 0.76}
    sql = "SELECT node_id FROM hrag.retrieve_hits(%s, %s::real[], 400)"
    params = ([built.ids[k] for k in hits], list(hits.values()))
    got = {key_of[r[0]] for r in conn.execute(sql, params)}
    assert got == {"note0", "note1", "member2"}

    # The rule before revision 0014 (every node keeps its whole value), as a setting.
    conn.execute("SET hrag.auto_merge_share = 0")
    assert {key_of[r[0]] for r in conn.execute(sql, params)} == {"notes"}


def test_one_hit_in_a_section_of_a_group_and_a_leaf_is_not_a_merge_of_the_section(
    conn: psycopg.Connection,
) -> None:
    """Git's release notes: a section is one 480-token group and one leaf left over, one short leaf is hit.

    Counted by children that is "1 of 2 children hit", a merge: at 660 tokens
    the section (526) was taken for one sentence and left room for one other
    hit only (revision 0021).  One hit adds no evidence to what the leaf
    already gives, so the section is worth only what it adds, and the room
    goes to the other hits.
    """
    features = Spec("features", "Features", kind="section", tokens=1, children=[
        Spec("group", kind="group", children=_leaves("f", 8, 60)),
        Spec("tail", " ".join(["w"] * 45), {50: 1.0}, kind="paragraph", tokens=45),
    ])
    filler = Spec("filler", "Other", kind="section", children=_leaves("other", 20, 100), tokens=1)
    built = insert_tree(conn, Spec("notes", kind="document", children=[features, filler]))
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"f3": 0.80, "other5": 0.70, "other9": 0.68}
    rows = conn.execute("SELECT node_id, reason FROM hrag.retrieve_hits(%s, %s::real[], 660)",
                        ([built.ids[k] for k in hits], list(hits.values()))).fetchall()
    assert [key_of[r[0]] for r in rows] == ["f3", "other5", "other9"]
    assert rows[0][1] == "direct hit"


def test_a_section_half_of_whose_children_are_hit_is_still_merged_whole(conn: psycopg.Connection) -> None:
    """Its best note is taken first; the section (its three hits cover half its tokens) then replaces it whole."""
    built = insert_tree(conn, _manual())
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"note0": 0.80, "note1": 0.70, "note2": 0.69, "member2": 0.60}
    sql = "SELECT node_id, merged_from FROM hrag.retrieve_hits(%s, %s::real[], 400)"
    params = ([built.ids[k] for k in hits], list(hits.values()))
    rows = conn.execute(sql, params).fetchall()
    assert key_of[rows[0][0]] == "notes", "a merge: the section replaces its hit notes"
    assert {key_of[m] for m in rows[0][1]} == {"note0", "note1", "note2"}

    # Valued only by what it adds, the section would lose to the notes one by one (every passage
    # worth its tokens here, so the weak member2 comes too: only the merge rule is compared).
    conn.execute("SET hrag.auto_merge_share = 1.01")
    conn.execute("SET hrag.auto_token_cost = 0")
    conn.execute("SET hrag.auto_passage_cost = 0")
    assert {key_of[r[0]] for r in conn.execute(sql, params)} == {"note0", "note1", "note2", "member2"}


def test_a_large_section_of_weak_hits_leaves_room_for_the_second_best_hit_elsewhere(
    conn: psycopg.Connection,
) -> None:
    """All five members are hit, the best of them first; the second-best hit is a note.

    The section (501 tokens) comes first by evidence per tokens^0.5 and would
    fill the 520-token budget; the best two hits keep room (revision 0016), so
    the note is taken with the best members instead.
    """
    built = insert_tree(conn, _manual())
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"member0": 0.80, "note3": 0.78, "member1": 0.77, "member2": 0.76, "member3": 0.75, "member4": 0.74}
    sql = "SELECT node_id, token_count FROM hrag.retrieve_hits(%s, %s::real[], 520)"
    params = ([built.ids[k] for k in hits], list(hits.values()))
    rows = conn.execute(sql, params).fetchall()
    assert {key_of[r[0]] for r in rows} == {"note3", "member0", "member1", "member2", "member3"}
    assert sum(r[1] for r in rows) <= 520

    # Without reserved hits (the rule before revision 0016) the section crowds the note out.
    conn.execute("SET hrag.auto_reserved_hits = 0")
    assert {key_of[r[0]] for r in conn.execute(sql, params)} == {"membership"}


def test_reserved_hits_that_do_not_fit_together_reserve_only_what_fits(conn: psycopg.Connection) -> None:
    """At 100 tokens the best member (100) fits and the note (60) no longer does beside it: no deadlock."""
    built = insert_tree(conn, _manual())
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"member0": 0.80, "note3": 0.78, "member1": 0.77}
    rows = conn.execute("SELECT node_id FROM hrag.retrieve_hits(%s, %s::real[], 100)",
                        ([built.ids[k] for k in hits], list(hits.values()))).fetchall()
    assert [key_of[r[0]] for r in rows] == ["member0"]


def test_a_tuning_setting_that_is_not_a_number_is_refused_by_name(conn: psycopg.Connection) -> None:
    built = insert_tree(conn, _manual())
    conn.execute("SET hrag.auto_merge_share = 'lots'")
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match=r"setting hrag.auto_merge_share must be a number, got 'lots'"):
        conn.execute("SELECT * FROM hrag.retrieve_hits(%s, %s::real[], 400)", ([built.ids["note0"]], [0.8]))


def test_a_narrow_question_gets_its_passage_not_a_full_budget_of_weaker_ones(conn: psycopg.Connection) -> None:
    """One strong hit and twelve weak ones (a tenth of its evidence or less each): the budget is a ceiling.

    Taken while they fit, the weak hits, and then the sections around them,
    would fill the 2,000 tokens; each is worth less than its tokens cost.
    """
    built = insert_tree(conn, _manual(notes=12, note_tokens=60))
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"member2": 0.80} | {f"note{i}": 0.55 - i * 0.01 for i in range(12)}
    rows = conn.execute("SELECT node_id, token_count FROM hrag.retrieve_hits(%s, %s::real[], 2000)",
                        ([built.ids[k] for k in hits], list(hits.values()))).fetchall()
    assert [key_of[r[0]] for r in rows] == ["member2"]

    # The same weak hits scored near the best are evidence, and a broad context is taken for them.
    close = {"member2": 0.80} | {f"note{i}": 0.79 - i * 0.002 for i in range(12)}
    rows = conn.execute("SELECT node_id, token_count FROM hrag.retrieve_hits(%s, %s::real[], 2000)",
                        ([built.ids[k] for k in close], list(close.values()))).fetchall()
    assert {key_of[r[0]] for r in rows} == {"member2", "notes"} and sum(r[1] for r in rows) > 700

    # The old rule, a budget to fill, as settings.
    conn.execute("SET hrag.auto_token_cost = 0")
    conn.execute("SET hrag.auto_passage_cost = 0")
    rows = conn.execute("SELECT node_id FROM hrag.retrieve_hits(%s, %s::real[], 2000)",
                        ([built.ids[k] for k in hits], list(hits.values()))).fetchall()
    assert len(rows) > 1


def test_a_scrap_is_never_taken_but_the_best_hit_always_is(conn: psycopg.Connection) -> None:
    """A one-word leaf ("or") hit second is left out; at a budget only it fits, the best hit comes flagged."""
    root = Spec("doc", kind="document", children=[
        Spec("answer", " ".join(["w"] * 40), {0: 1.0}, kind="paragraph"),
        Spec("scrap", "or", {1: 1.0}, kind="paragraph"),
        Spec("filler", "Other", kind="section", children=_leaves("other", 20, 100), tokens=1),
    ])
    built = insert_tree(conn, root)
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"answer": 0.80, "scrap": 0.79}
    sql = "SELECT node_id, reason FROM hrag.retrieve_hits(%s, %s::real[], %s)"
    ids, scores = [built.ids[k] for k in hits], list(hits.values())
    assert [key_of[r[0]] for r in conn.execute(sql, (ids, scores, 2000))] == ["answer"]
    [(node, reason)] = conn.execute(sql, (ids, scores, 5)).fetchall()
    assert key_of[node] == "answer" and reason.startswith("over budget")

    # The best hit is never a scrap, however small.
    assert [key_of[r[0]] for r in conn.execute(sql, (ids[::-1], scores, 2000))] == ["scrap", "answer"]


def test_a_question_without_its_vector_is_answered_by_its_terms_and_says_so(conn: psycopg.Connection) -> None:
    texts = ["Employees get twenty vacation days a year.", "Passwords rotate every ninety days.",
             "Laptops are encrypted before they leave the office.", "Visitors sign in at the front desk."]
    root = Spec("policy", kind="document", children=[
        Spec(f"rule{i}", text, {i: 1.0}, kind="paragraph") for i, text in enumerate(texts)])
    built = insert_tree(conn, root)
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    rows = conn.execute("SELECT node_id, content, score FROM hrag.retrieve(NULL, %s, 2000)",
                        ("How many vacation days?",)).fetchall()
    assert rows[0][0] == built.ids["rule0"] and all(0 <= r[2] <= 1 for r in rows)
    assert any("no query vector" in n and "terms alone" in n for n in notices), notices

    with pytest.raises(psycopg.errors.NullValueNotAllowed, match='argument "query" must not be NULL'):
        conn.execute("SELECT * FROM hrag.retrieve(NULL, NULL, 2000)")


# ------------------------------------------------------- the budget's edges, by example
#
# The manual of _manual(): notes 6 x 60 tokens (section 361), members 5 x 100 (section 501),
# filler 20 x 100; 2,863 tokens in all.  Each case sits at one edge of the rule "never more
# than max_tokens in total": the budget exactly filled, and the same question one token short.
# Every hit taken here is worth its tokens (hrag.auto_token_cost, auto_passage_cost), so the
# budget, a ceiling, is what stops the selection.

_EDGES = [
    pytest.param({"note0": 0.80, "member1": 0.79, "other3": 0.78}, 260, {"note0", "member1", "other3"},
                 id="three hits fill the budget exactly"),
    pytest.param({"note0": 0.80, "member1": 0.79, "other3": 0.78}, 259, {"note0", "member1"},
                 id="one token short the third hit is left out"),
    pytest.param({"member0": 0.80, "note3": 0.78, "member1": 0.77, "member2": 0.76, "member3": 0.75,
                  "member4": 0.74}, 561, {"membership", "note3"},
                 id="a section and the reserved hit elsewhere fill the budget exactly"),
    pytest.param({"member0": 0.80, "note3": 0.78, "member1": 0.77, "member2": 0.76, "member3": 0.75,
                  "member4": 0.74}, 560, {"note3", "member0", "member1", "member2", "member3", "member4"},
                 id="one token short the reserved hit keeps its room and the hits fill the budget exactly"),
    pytest.param({"note0": 0.80, "note1": 0.70, "note2": 0.69, "member2": 0.60}, 361, {"notes"},
                 id="a section replacing its taken hit fills the budget exactly"),
    pytest.param({"note0": 0.80, "note1": 0.70, "note2": 0.69, "member2": 0.78}, 461, {"notes", "member2"},
                 id="the replaced hit's tokens are given back and the next hit fills the budget exactly"),
    pytest.param({"member0": 0.80, "note0": 0.70}, 60, {"note0"},
                 id="a smaller hit that fits is taken not the better one that does not"),
]


@pytest.mark.parametrize(("hits", "budget", "expected"), _EDGES)
def test_the_budget_is_filled_up_to_its_last_token_and_never_past_it(
    conn: psycopg.Connection, hits: dict[str, float], budget: int, expected: set[str]
) -> None:
    root = _manual()
    built = insert_tree(conn, root)
    key_of = {v: k for k, v in built.ids.items()}
    tokens, ancestors = _tokens(root), _ancestors(root)
    rows = conn.execute("SELECT node_id, token_count, reason FROM hrag.retrieve_hits(%s, %s::real[], %s)",
                        ([built.ids[k] for k in hits], list(hits.values()), budget)).fetchall()
    got = [key_of[r[0]] for r in rows]
    assert [r[1] for r in rows] == [tokens[k] for k in got]
    assert sum(tokens[k] for k in got) <= budget, f"{got} hold {sum(tokens[k] for k in got)} tokens"
    assert not any(ancestors[k] & set(got) for k in got)
    assert not any(r[2].startswith("over budget") for r in rows)
    assert set(got) == expected
    assert len(got) == len(expected)


def test_only_a_best_hit_larger_than_the_whole_budget_is_returned_over_it_and_flagged(
    conn: psycopg.Connection,
) -> None:
    built = insert_tree(conn, _manual())
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"note0": 0.80, "member0": 0.70}  # 60 and 100 tokens
    sql = "SELECT node_id, token_count, reason FROM hrag.retrieve_hits(%s, %s::real[], %s)"
    params = ([built.ids[k] for k in hits], list(hits.values()))
    rows = conn.execute(sql, (*params, 59)).fetchall()
    assert [(key_of[r[0]], r[1], r[2]) for r in rows] == [
        ("note0", 60, "over budget: the best hit alone is larger than max_tokens")]
    rows = conn.execute(sql, (*params, 60)).fetchall()
    assert [(key_of[r[0]], r[1], r[2]) for r in rows] == [("note0", 60, "direct hit")], "at 60 it fits: no flag"


def test_a_weak_hit_its_tokens_would_pay_for_is_not_worth_a_new_passage(conn: psycopg.Connection) -> None:
    """The passage cost alone: a small weak hit in another section is worth its tokens but not a passage.

    The note is 10 tokens (0.02 of evidence at hrag.auto_token_cost) and
    holds about 0.04 of the best hit's evidence; what makes it not worth
    taking is hrag.auto_passage_cost, the price of one more passage to read.
    """
    built = insert_tree(conn, _manual(notes=4, note_tokens=10))
    key_of = {v: k for k, v in built.ids.items()}
    hits = {"member2": 0.80, "note1": 0.46}
    sql = "SELECT node_id FROM hrag.retrieve_hits(%s, %s::real[], 2000)"
    ids, scores = [built.ids[k] for k in hits], list(hits.values())
    assert [key_of[r[0]] for r in conn.execute(sql, (ids, scores))] == ["member2"]

    conn.execute("SET hrag.auto_passage_cost = 0")
    assert len(conn.execute(sql, (ids, scores)).fetchall()) > 1, "without the passage cost the note is taken"
