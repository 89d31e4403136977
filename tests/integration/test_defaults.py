"""One home for every retrieval default: the SQL functions' DEFAULTs equal hrag_pg.defaults."""

from __future__ import annotations

import inspect
import re

import psycopg
import pytest

from hrag_pg import defaults
from hrag_pg.queries import Search
from hrag_pg.settings import AutoMergeSettings, BudgetSettings, ParentChildSettings

#: (function, argument) → the Python default it must equal.
SQL_DEFAULTS = {
    ("parent_child", "top_k_children"): defaults.TOP_K_CHILDREN,
    ("parent_child", "max_parents"): defaults.MAX_PARENTS,
    ("parent_child_hits", "max_parents"): defaults.MAX_PARENTS,
    ("auto_merge", "top_k"): defaults.TOP_K,
    ("auto_merge", "merge_threshold"): defaults.MERGE_THRESHOLD,
    ("auto_merge_hits", "merge_threshold"): defaults.MERGE_THRESHOLD,
    ("search_hybrid", "lexical_weight"): defaults.LEXICAL_WEIGHT,
    ("search_leaves", "k"): defaults.TOP_K_CHILDREN,
    ("retrieve", "max_tokens"): defaults.MAX_TOKENS,
    ("retrieve", "top_k"): defaults.AUTO_TOP_K,
    ("retrieve", "lexical_weight"): defaults.LEXICAL_WEIGHT,
    ("retrieve_hits", "max_tokens"): defaults.MAX_TOKENS,
}


def sql_defaults(conn: psycopg.Connection, function: str) -> dict[str, str]:
    """Each argument's DEFAULT expression, parsed from pg_get_function_arguments."""
    row = conn.execute(
        "SELECT pg_get_function_arguments(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'hrag' AND p.proname = %s", (function,)).fetchone()
    assert row is not None, f"hrag.{function} is not installed"
    out: dict[str, str] = {}
    for arg in row[0].split(", "):
        match = re.match(r"(\w+) .*? DEFAULT (.+)$", arg)
        if match:
            out[match.group(1)] = match.group(2)
    return out


@pytest.mark.parametrize(("function", "argument"), sorted(SQL_DEFAULTS))
def test_sql_function_defaults_equal_the_python_defaults(postgresql: psycopg.Connection, function: str,
                                                         argument: str) -> None:
    found = sql_defaults(postgresql, function)
    assert argument in found, f"hrag.{function}({argument}) has no DEFAULT"
    value = float(re.sub(r"::\w+( \w+)?$", "", found[argument]).strip("'()"))
    assert value == pytest.approx(SQL_DEFAULTS[(function, argument)]), (
        f"hrag.{function}({argument}) defaults to {found[argument]} in SQL but "
        f"{SQL_DEFAULTS[(function, argument)]} in hrag_pg.defaults")


def test_python_entry_points_take_their_defaults_from_the_defaults_module() -> None:
    searched = Search(query=[0.0])
    assert searched.lexical_weight == defaults.LEXICAL_WEIGHT
    for settings in (ParentChildSettings(), AutoMergeSettings(), BudgetSettings()):
        assert (settings.lexical_weight, settings.rerank_candidates) == (defaults.LEXICAL_WEIGHT,
                                                                         defaults.RERANK_CANDIDATES)
    assert (ParentChildSettings().top_k_children, ParentChildSettings().max_parents) == (
        defaults.TOP_K_CHILDREN, defaults.MAX_PARENTS)
    assert (AutoMergeSettings().top_k, AutoMergeSettings().merge_threshold, AutoMergeSettings().max_hit_share) == (
        defaults.TOP_K, defaults.MERGE_THRESHOLD, defaults.MAX_HIT_SHARE)
    assert (BudgetSettings().top_k, BudgetSettings().max_tokens) == (defaults.AUTO_TOP_K, defaults.MAX_TOKENS)


def test_cli_query_options_default_to_the_defaults_module() -> None:
    from hrag_pg.cli.user_commands import query_cmd

    # (left unset, an option is not passed: the settings objects' defaults, tested above, apply; the help says them)
    params = inspect.signature(query_cmd).parameters
    for name, default in [("lexical_weight", defaults.LEXICAL_WEIGHT), ("max_parents", defaults.MAX_PARENTS),
                          ("merge_threshold", defaults.MERGE_THRESHOLD)]:
        assert params[name].default.default is None
        assert f"default {default})" in params[name].default.help, name
