"""The demo behind ``hrag demo`` (the README's first command).

It ingests the bundled sample documents — Japanese work rules (就業規則), a
Japanese security policy (情報セキュリティ管理規程) and an English operations
manual — each into its own collection, then asks the seed's questions in
both modes and says whether each answer has the shape the seed promises.
The same cases run as tests (tests/acceptance), so the demo cannot rot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .models import RetrievalResult

EXAMPLES = {
    "hr": "work_rules_ja.md",
    "security": "security_policy_ja.md",
    "manual": "manual_en.md",
}


def examples_dir() -> Path:
    return Path(str(resources.files("hrag_pg").joinpath("examples")))


@dataclass(frozen=True)
class DemoCase:
    """One question, where to ask it, and what the answer must look like."""

    title: str
    question: str
    mode: str  # "parent-child" | "auto-merge" | "auto"
    collection: str
    expectation: str
    check: Callable[[list[RetrievalResult]], bool]
    #: Retriever settings beyond the defaults, shown by the demo with the reason.
    settings: dict[str, Any] = field(default_factory=dict)
    why_settings: str = ""


def _top_is(title_part: str, *, contains: str | None = None, merged: bool | None = None) -> Callable[..., bool]:
    def check(results: list[RetrievalResult]) -> bool:
        if not results:
            return False
        top = results[0]
        ok = title_part in " ".join(top.heading_path)
        if contains is not None:
            ok = ok and contains in top.content
        if merged is True:
            ok = ok and bool(top.merged_from)
        if merged is False:
            ok = ok and not top.merged_from
        return ok

    return check


def _lead(content: str) -> str:
    """A node's text without the Markdown heading markers it is stored with (``## 第8条`` -> ``第8条``)."""
    return content.lstrip("#").lstrip()


def _contains_result_starting(prefix: str, text: str) -> Callable[..., bool]:
    def check(results: list[RetrievalResult]) -> bool:
        return any(_lead(r.content).startswith(prefix) and text in r.content for r in results)

    return check


def _antivirus_small(results: list[RetrievalResult]) -> bool:
    return bool(results) and _lead(results[0].content).startswith(("8.1", "第8条")) and not any(
        _lead(r.content).startswith(("第2章", "情報セキュリティ管理規程")) for r in results
    )


def _merged_article(title_part: str, *, not_around: tuple[str, ...]) -> Callable[..., bool]:
    """The article merged whole from its items, and nothing around it (its chapter, its document)."""
    def check(results: list[RetrievalResult]) -> bool:
        merged = [r for r in results if title_part in (r.title or "") and r.merged_from]
        return bool(merged) and not any(_lead(r.content).startswith(not_around) for r in results)

    return check


def _antivirus_alone(results: list[RetrievalResult]) -> bool:
    if not results:
        return False
    top = results[0]
    return _lead(top.content).startswith("8.1") and not top.merged_from and all(
        not _lead(r.content).startswith("第8条") for r in results
    )


CASES: tuple[DemoCase, ...] = (
    DemoCase(
        "Parent-Child: a narrow hit, the whole article as context",
        "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？",
        "parent-child", "hr",
        "第4条 in full — item 3 matched, and item 4 (paid on the 25th) comes along",
        _top_is("第4条", contains="毎月25日"),
    ),
    DemoCase(
        "Auto-Merging: a narrow question stays small",
        "私物のスマートフォンにウイルス対策ソフトを入れる必要はありますか？",
        "auto-merge", "security",
        "8.1 (anti-virus) alone, not merged into 第8条",
        _antivirus_alone,
    ),
    DemoCase(
        "Auto-Merging: a broad question merges upward",
        "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください",
        "auto-merge", "security",
        "第8条 (BYOD), merged from 8.1, 8.2 and 8.3, not the chapter around it",
        _merged_article("第8条", not_around=("第2章", "情報セキュリティ管理規程")),
    ),
    DemoCase(
        "Parent-Child in English: one fact, its section as context",
        "How long are messages kept before they are deleted?",
        "parent-child", "manual",
        "the Retention Policies section (default 72 hours)",
        _top_is("Retention", contains="72"),
    ),
    DemoCase(
        "Auto (2,000-token budget): the probation question gets the whole article",
        "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？",
        "auto", "hr",
        "all of 第4条 (item 4, the payment day, comes along) chosen within the budget",
        _contains_result_starting("第4条", "毎月25日"),
    ),
    DemoCase(
        "Auto (2,000-token budget): a narrow question stays small",
        "私物のスマートフォンにウイルス対策ソフトを入れる必要はありますか？",
        "auto", "security",
        "8.1 first, and nothing of the rest of 第2章",
        _antivirus_small,
    ),
    DemoCase(
        "Auto (2,000-token budget): a broad question gets the merged article",
        "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください",
        "auto", "security",
        "第8条 (8.1–8.3) whole, not the chapter around it",
        _merged_article("第8条", not_around=("第2章", "情報セキュリティ管理規程")),
    ),
)


def ingest_examples(hrag: Any, progress: Any = None) -> list[Any]:
    """Ingest each bundled example into its own collection (idempotent)."""
    reports = []
    for collection, name in EXAMPLES.items():
        reports.append(hrag.ingest([examples_dir() / name], collection=collection, progress=progress,
                                   stop_on_error=True))
    return reports


def run_case(hrag: Any, case: DemoCase) -> tuple[list[RetrievalResult], bool]:
    """Ask one case with the default settings of its mode (the auto mode with its default budget)."""
    from .settings import for_mode

    settings = for_mode(case.mode, collection=case.collection, **case.settings)
    results = hrag.context(case.question, settings).results
    return results, case.check(results)
