"""Packing short blocks into children: exact text, stable boundaries, headings strategy only."""

from __future__ import annotations

from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.packing import join_lead_ins, pack_short_leaves
from hrag_pg.ingest.pipeline import IngestOptions, prepare_tree
from hrag_pg.ingest.rst import parse_rst
from hrag_pg.ingest.tokens import ApproximateTokenCounter
from hrag_pg.ingest.tree import DocumentTree

COUNTER = ApproximateTokenCounter()


def _doc(blocks: list[str]) -> DocumentTree:
    return parse_markdown("# Guide\n\n## Section\n\n" + "\n\n".join(blocks) + "\n", "guide.md")


def _leaf_texts(tree: DocumentTree) -> list[str]:
    return [leaf.content for leaf in tree.root.leaves()]


def test_a_lead_in_is_packed_with_the_block_it_introduces_and_no_text_is_lost() -> None:
    blocks = ["For example:", "```\nSELECT 1;\n```", " ".join(["word"] * 60)]
    tree = _doc(blocks)
    before = tree.root.full_text()
    pack_short_leaves(tree, pack_tokens=120, counter=COUNTER)
    texts = _leaf_texts(tree)
    assert any(t.startswith("For example:\n\n```") for t in texts), texts
    assert tree.root.full_text() == before


def test_a_lead_in_travels_with_the_block_it_introduces_and_no_text_is_lost() -> None:
    blocks = ["The dump can be restored with psql:", "```\npsql dbname < dumpfile\n```",
              "A remark that introduces nothing.", "Options:", "- `-k` checks the pages", "- `-v` is verbose"]
    tree = _doc(blocks)
    before = tree.root.full_text()
    join_lead_ins(tree, max_tokens=150, counter=COUNTER)
    assert _leaf_texts(tree) == ["The dump can be restored with psql:\n\n```\npsql dbname < dumpfile\n```",
                                 "A remark that introduces nothing.", "Options:\n\n- `-k` checks the pages",
                                 "- `-v` is verbose"]
    assert tree.root.full_text() == before


def test_a_definition_lists_term_travels_with_its_description() -> None:
    description = "Causes the system to check for duplicate values in the table."
    tree = join_lead_ins(_doc(["UNIQUE", description, "data_checksums (boolean)", "Reports whether checksums are on.",
                               "This line is a remark, not a label.", "Another remark follows it here."]),
                         max_tokens=150, counter=COUNTER)
    assert _leaf_texts(tree) == [f"UNIQUE\n\n{description}",
                                 "data_checksums (boolean)\n\nReports whether checksums are on.",
                                 "This line is a remark, not a label.", "Another remark follows it here."]


def test_a_long_line_or_a_list_item_without_a_period_is_no_label() -> None:
    long_line = " ".join(["word"] * 13)
    tree = join_lead_ins(_doc([long_line, "Next paragraph.", "- first item", "- second item"]),
                         max_tokens=150, counter=COUNTER)
    assert _leaf_texts(tree) == [long_line, "Next paragraph.", "- first item", "- second item"]


def test_a_japanese_lead_in_with_a_full_width_colon_is_a_lead_in_too() -> None:
    tree = join_lead_ins(_doc(["設定例：", "```\nmax_connections = 100\n```"]), max_tokens=150, counter=COUNTER)
    assert _leaf_texts(tree) == ["設定例：\n\n```\nmax_connections = 100\n```"]


def test_a_lead_in_stays_alone_when_the_pair_would_not_fit_or_nothing_follows() -> None:
    code = "```\n" + "\n".join(f"SELECT {i};" for i in range(60)) + "\n```"
    tree = join_lead_ins(_doc(["For example:", code, "Finally:"]), max_tokens=150, counter=COUNTER)
    assert _leaf_texts(tree)[0] == "For example:" and _leaf_texts(tree)[-1] == "Finally:"


def test_of_two_lead_ins_in_a_row_only_the_second_joins_the_block() -> None:
    tree = join_lead_ins(_doc(["Run it as follows:", "Or, on Windows:", "```\nrun.bat\n```"]),
                         max_tokens=150, counter=COUNTER)
    assert _leaf_texts(tree) == ["Run it as follows:", "Or, on Windows:\n\n```\nrun.bat\n```"]


def test_editing_one_block_changes_at_most_two_children_with_lead_ins() -> None:
    blocks = [b for i in range(15) for b in (f"Example {i} runs:", f"```\nrun --step {i}\n```",
                                              f"Step {i} is done.")]
    def texts(bs: list[str]) -> set[str]:
        return set(_leaf_texts(join_lead_ins(_doc(bs), max_tokens=150, counter=COUNTER)))
    before = texts(blocks)
    for edited in range(len(blocks)):
        for change in (lambda b: b.replace("run", "run --edited") if b.startswith("```") else b + " Edited",
                       lambda b: b if b.startswith("```") else b.rstrip(".:") + " now:"):
            changed = list(blocks)
            changed[edited] = change(changed[edited])
            assert len(texts(changed) - before) <= 2, f"editing block {edited} changed too many children"


def test_lead_ins_are_joined_by_default_for_the_headings_strategy_only() -> None:
    blocks = ["For example:", "```\nSELECT 1;\n```"]
    joined = prepare_tree(_doc(blocks), IngestOptions(), counter=COUNTER)
    assert len([n for n in joined.nodes if n.embed_text is not None]) == 1
    apart = prepare_tree(_doc(blocks), IngestOptions(join_lead_ins=False), counter=COUNTER)
    assert len([n for n in apart.nodes if n.embed_text is not None]) == 2
    tree = _doc(blocks)
    tree.metadata["strategy"] = "clauses"
    assert len([n for n in prepare_tree(tree, IngestOptions(), counter=COUNTER).nodes
                if n.embed_text is not None]) == 2


def test_long_blocks_end_packs_and_are_never_joined_to_each_other() -> None:
    long_block = " ".join(["alpha"] * 70)
    tree = _doc([long_block, long_block.replace("alpha", "beta")])
    pack_short_leaves(tree, pack_tokens=120, counter=COUNTER)
    assert len(_leaf_texts(tree)) == 2


def test_editing_one_short_block_changes_at_most_two_packs() -> None:
    blocks = [f"Short remark number {i} about topic {i * 7}." for i in range(30)]
    before = set(_leaf_texts(pack_short_leaves(_doc(blocks), pack_tokens=120, counter=COUNTER)))
    for edited in range(30):
        changed = list(blocks)
        changed[edited] = changed[edited].replace("remark", "much longer remark, edited")
        after = set(_leaf_texts(pack_short_leaves(_doc(changed), pack_tokens=120, counter=COUNTER)))
        assert len(after - before) <= 2, f"editing block {edited} re-packed {len(after - before)} children"


def test_packing_is_off_at_zero_and_for_other_strategies() -> None:
    blocks = ["One.", "Two.", "Three."]
    assert len(_leaf_texts(pack_short_leaves(_doc(blocks), pack_tokens=0, counter=COUNTER))) == 3
    tree = _doc(blocks)
    tree.metadata["strategy"] = "clauses"
    flat = prepare_tree(tree, IngestOptions(pack_tokens=120), counter=COUNTER)
    assert len([n for n in flat.nodes if n.embed_text is not None]) == 3


def test_ingest_options_refuse_the_ranges_the_cli_refuses_naming_the_python_argument() -> None:
    import pytest

    from hrag_pg.errors import InvalidArgument

    for kwargs, name in (({"max_child_tokens": 0}, "max_child_tokens"), ({"overlap_tokens": -1}, "overlap_tokens"),
                         ({"max_parent_tokens": 0}, "max_parent_tokens"), ({"window_tokens": 10**6}, "window_tokens")):
        with pytest.raises(InvalidArgument, match=name):
            IngestOptions(**kwargs)  # type: ignore[arg-type]


# -- a lead-in and the indented command it introduces (issue 40, item 2a) ---------------------------
# The pattern of OpenSSL's HOWTO/keys.txt and of README files: a sentence ending with a colon, the
# command on an indented line of its own, then the paragraph that explains it.
_COMMAND_PAGE = """Keys

Generating a key is easy, all you have to do is the following:

  tool genkey -out key.pem 2048

With this variant, you will be prompted for a password.

You can list the supported curves with:

  tool curves
"""


def _children_of_plain_text(text: str, source: str = "keys.txt") -> list[str]:
    tree = parse_markdown(text, source, plain_headings=True)
    return _leaf_texts(join_lead_ins(tree, max_tokens=150, counter=COUNTER))


def test_a_lead_in_keeps_the_indented_command_it_introduces() -> None:
    assert _children_of_plain_text(_COMMAND_PAGE) == [
        "Generating a key is easy, all you have to do is the following:\n\n  tool genkey -out key.pem 2048",
        "With this variant, you will be prompted for a password.",
        "You can list the supported curves with:\n\n  tool curves",
    ]


def test_an_indented_command_is_not_glued_to_the_paragraph_after_it() -> None:
    # no colon before it: the command stays a child of its own, the explanation after it too
    text = "Keys\n\nRun the command below.\n\n  tool genkey -out key.pem\n\nIt asks for a password.\n"
    assert _children_of_plain_text(text) == [
        "Run the command below.", "  tool genkey -out key.pem", "It asks for a password."]


def test_a_markdown_lead_in_keeps_the_indented_code_line_it_introduces() -> None:
    tree = _doc(["Create the key as follows:", "    tool genkey -out key.pem", "It asks for a password.",
                 "Then list the curves:", "    tool curves"])
    assert _leaf_texts(join_lead_ins(tree, max_tokens=150, counter=COUNTER)) == [
        "Create the key as follows:\n\n    tool genkey -out key.pem", "It asks for a password.",
        "Then list the curves:\n\n    tool curves"]


def test_an_rst_lead_in_keeps_the_indented_block_after_a_single_colon() -> None:
    text = ("Keys\n====\n\nCreate the key as follows::\n\n    tool genkey\n\nIt asks for a password.\n\n"
            "To list the curves, run:\n\n.. code-block:: sh\n\n    tool curves\n\nOne curve per line.\n\n"
            "Or this:\n\n    tool version\n\nThe end.\n")
    tree = join_lead_ins(parse_rst(text, "keys.rst"), max_tokens=150, counter=COUNTER)
    assert _leaf_texts(tree) == [
        "Create the key as follows::\n\n    tool genkey", "It asks for a password.",
        "To list the curves, run:\n\n.. code-block:: sh\n\n    tool curves", "One curve per line.",
        "Or this:\n\n    tool version", "The end."]


def test_a_term_indented_no_deeper_than_its_description_is_still_a_term() -> None:
    # a plain-text definition list after a lead-in: the term joins its description, not the lead-in
    text = "Usage\n\nThe options are:\n\n  -v, --verbose\n\n      Print every step.\n\nThat is all.\n"
    assert _children_of_plain_text(text) == [
        "The options are:", "  -v, --verbose\n\n      Print every step.", "That is all."]


def test_a_paragraph_that_does_not_end_a_sentence_leads_in_the_indented_block_after_it() -> None:
    # README.Debian's "… can be found in the directory" over an indented path; "e.g." over a command
    text = ("Docs\n\nThe upstream documentation can be found after installation\nof the doc package in the directory"
            "\n\n\t/usr/share/doc/tool/html\n\nIt will move some day.\n\n"
            "The branch is ready to be built, e.g.\n\n $ dpkg-buildpackage -uc -us\n\nThat is all.\n")
    assert _children_of_plain_text(text) == [
        "The upstream documentation can be found after installation\nof the doc package in the directory"
        "\n\n\t/usr/share/doc/tool/html",
        "It will move some day.",
        "The branch is ready to be built, e.g.\n\n $ dpkg-buildpackage -uc -us",
        "That is all."]


def test_a_label_travels_with_a_lead_in_and_the_block_it_introduces() -> None:
    # a heading the plain-text reader took for a line (linuxdoc's "  3.2.  Qualifiers") over a lead-in
    text = ("Guide\n\n  3.2.  Qualifiers\n\n  Qualifiers pass extra information, as in a function\n\n"
            "      define plot (x, y)\n\n  It takes two arrays.\n")
    assert _children_of_plain_text(text) == [
        "  3.2.  Qualifiers\n\n  Qualifiers pass extra information, as in a function\n\n      define plot (x, y)",
        "  It takes two arrays."]
