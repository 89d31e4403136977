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


def test_a_title_underlined_with_stars_or_tildes_heads_its_section_in_plain_text() -> None:
    # texinfo's plain text underlines chapters with "*" (util-linux's parse-date.txt, gdb's README);
    # valgrind's READMEs underline their titles with "~", which Markdown would open a fence with
    text = ("1 Date input formats\n********************\n\nFirst, a quote:\n\n     Units of time are hard.\n\n"
            "1.1 General date syntax\n=======================\n\nA date is a string.\n\n"
            "Missing wrappers\n~~~~~~~~~~~~~~~~\nWrite the wrapper yourself.\n")
    tree = parse_markdown(text, "parse-date.txt", plain_headings=True)
    assert sections(tree) == [(1, "1 Date input formats"), (1, "1.1 General date syntax"), (1, "Missing wrappers")]
    assert tree.root.full_text() == text.strip()
    assert [leaf.kind for leaf in tree.root.leaves()] == ["paragraph"] * 4
    # in Markdown "***" after a line is a rule and "~~~" opens a fence, as before; a rule shorter
    # than the line, or under two lines, is no underline
    assert sections(parse_markdown(text, "parse-date.md")) == [(1, "1.1 General date syntax")]
    assert sections(parse_markdown("Some words\n*****\n\nMore.\n\nTwo\nlines\n***\n", "x.txt",
                                   plain_headings=True)) == []


def test_hash_lines_under_a_command_or_in_a_run_are_text_not_headings_in_plain_text() -> None:
    # fakeroot's README.saving (a root prompt under a command), a comment block quoted from a
    # standard (gcc's README.Bugs), comments over a command (git-jump's README): read as headings,
    # each line was a section with nothing under it
    text = ("Saving\n======\n\nStart it as follows:\n\n$ fakeroot -s backup.environ\n# mkdir backup\n# cd backup\n\n"
            "The standard puts it that way\n\n# A conversion can add cv-qualifiers at levels other\n"
            "# than the first in multi-level pointers.\n\n# jump to staged changes; you can give\n"
            "# arbitrary diff options\ngit jump diff --cached\n\n# Project\n## Install\n\nRun make.\n")
    tree = parse_markdown(text, "README.saving", plain_headings=True)
    assert sections(tree) == [(1, "Saving"), (1, "Project"), (2, "Install")]
    assert tree.root.full_text() == text.strip()
    assert "$ fakeroot -s backup.environ\n# mkdir backup\n# cd backup" in [leaf.content for leaf in tree.root.leaves()]
    # Markdown keeps CommonMark's reading
    assert len(sections(parse_markdown(text, "README.md"))) > 3


def test_a_paragraph_over_a_rule_is_no_heading_in_plain_text() -> None:
    # bc's README: a paragraph of several lines, then a line of dashes under it
    text = ("bc\n==\n\nThe extensions add some features I think are missing.\nThe major changes are names.\n"
            "----------------------------------------------------------\n\nThe end.\n")
    tree = parse_markdown(text, "README", plain_headings=True)
    assert sections(tree) == [(1, "bc")]
    assert tree.root.full_text() == text.strip()
    assert sections(parse_markdown(text, "README.md")) == [
        (1, "bc"), (2, "The extensions add some features I think are missing. The major changes are names.")]
    # a title between an overline of stars and an underline stays a title (coreutils' README)
    titled = "Notes\n=====\n\n*********************\nPre-C99 build failure\n---------------------\n\nUse C99.\n"
    assert sections(parse_markdown(titled, "README", plain_headings=True)) == [
        (1, "Notes"), (2, "********************* Pre-C99 build failure")]
