"""A database with the Japanese examples and an English guide, loaded through each framework's documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from hrag_pg.api import HRAG
from tests.embedders import HashingEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RULES = (FIXTURES / "work_rules_ja.md").read_text(encoding="utf-8")
SECURITY = (FIXTURES / "security_policy_ja.md").read_text(encoding="utf-8")
GUIDE = (FIXTURES / "guide.md").read_text(encoding="utf-8")
#: The seed's parent-child question: it hits item 3, the answer needs the whole 第4条 (item 4: the pay day).
PC_QUESTION = "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？"
PC_PARENT = "第4条：諸手当および福利厚生"
PAY_DAY = "毎月25日"
#: A broad question over 第8条 (BYOD): its items merge into the article.
AM_QUESTION = "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください"


@pytest.fixture
def hrag(db_url: str) -> HRAG:
    return HRAG(db_url, embedder=HashingEmbedder())

#: A small handbook whose "Backups" section has two paragraphs that both match MERGE_QUESTION.
HANDBOOK = """# Handbook

## Backups

Backups of every database run nightly at 02:00 and backups are kept for 30 days.

Backups of every database are encrypted with AES-256 before the backups are uploaded.

## Holidays

Employees receive twenty paid holidays a year; unused days expire in March.

Public holidays follow the calendar of the office's country.
"""
MERGE_QUESTION = "How are database backups kept and encrypted?"
