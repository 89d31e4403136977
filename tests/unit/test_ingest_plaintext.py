"""Plain text (.txt, README, NEWS) without Markdown headings: lines standing alone as headings open sections."""

from __future__ import annotations

import gzip
from pathlib import Path

from hrag_pg.ingest.loaders import load_document
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.text import load_text

from .ingest_checks import shape

# the shape of libpng's manual (Debian: /usr/share/doc/libpng16-16/libpng-manual.txt.gz)
MANUAL = """libpng-manual.txt - A description on how to use and modify libpng

 TABLE OF CONTENTS

    I. Introduction
   II. Reading

I. Introduction

This file describes how to use and modify the PNG reference library.

II. Reading

We'll now walk you through the possible functions to call.

Setup

You will want to do the I/O initialization before you get into libpng.

    FILE *fp = fopen(file_name, "rb");

A. Changing pnglibconf.h

Copy scripts/pnglibconf.h.prebuilt and edit it.

C. Configuration using PNG_USER_CONFIG

Define PNG_USER_CONFIG and the header is included.

III. Writing

Choices for the alpha_mode are

PNG_ALPHA_PNG, the default.
"""


def sections(tree) -> list[tuple[int, str]]:
    return [(depth, key) for depth, kind, key in shape(tree.root) if kind == "section"]


def test_numbered_and_title_lines_head_sections_of_plain_text() -> None:
    tree = parse_markdown(MANUAL, "manual.txt", plain_headings=True)
    assert sections(tree) == [
        (1, "I. Introduction"),
        (1, "II. Reading"),
        (2, "Setup"),
        # a letter that does not continue the Roman numbering (C. after II.) is a title line
        (2, "A. Changing pnglibconf.h"),
        (2, "C. Configuration using PNG_USER_CONFIG"),
        (1, "III. Writing"),
    ]
    # the table of contents (indented) and a lead-in ending in "are" stay text
    assert tree.root.full_text() == MANUAL.strip()


def test_decimal_numbers_give_the_level_and_a_deeper_number_may_follow_directly() -> None:
    text = "1. Scope\n\n1.1 Terms\n\nA term is a word.\n\n2. Usage\n\nRun it.\n"
    assert sections(parse_markdown(text, "spec.txt", plain_headings=True)) == [
        (1, "1. Scope"), (2, "1.1 Terms"), (1, "2. Usage"),
    ]


def test_one_line_steps_and_lists_of_names_are_not_headings() -> None:
    steps = "Install\n\n1. Download it\n\n2. Unpack it\n\n3. Run make\n"
    tree = parse_markdown(steps, "INSTALL", plain_headings=True)
    assert sections(tree) == []
    assert tree.root.full_text() == steps.strip()


def test_markdown_headings_switch_plain_headings_off() -> None:
    text = "Title\n=====\n\nSetup\n\nDo this.\n"
    assert sections(parse_markdown(text, "x.txt", plain_headings=True)) == [(1, "Title")]


def test_txt_and_readme_files_get_plain_headings_but_markdown_files_do_not(tmp_path: Path) -> None:
    body = "Setup\n\nYou will want to do the I/O initialization first.\n"
    for name in ("manual.txt", "README"):
        (tmp_path / name).write_text(body, encoding="utf-8")
        assert sections(load_document(tmp_path / name)) == [(1, "Setup")]
    with gzip.open(tmp_path / "NEWS.gz", "wt", encoding="utf-8") as f:
        f.write(body)
    assert sections(load_document(tmp_path / "NEWS.gz")) == [(1, "Setup")]
    (tmp_path / "guide.md").write_text(body, encoding="utf-8")
    assert sections(load_document(tmp_path / "guide.md")) == []  # Markdown: a paragraph
    assert sections(load_text(body, source="s", format="text")) == [(1, "Setup")]
    assert sections(load_text(body, source="s", format="markdown")) == []
