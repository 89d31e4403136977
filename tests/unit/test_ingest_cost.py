"""A page's cost grows with its size and nothing else: a minified (single-line) HTML page reads as the same
page with line breaks, and the passages it embeds, each within the child limit, grow in proportion to it.

(The time and memory this means on a real model are measured by bench/ingest_cost.py, not here.)
"""

from __future__ import annotations

from hrag_pg.ingest.html import parse_html
from hrag_pg.ingest.pipeline import IngestOptions, prepare_tree
from hrag_pg.ingest.tokens import DEFAULT_COUNTER


def page(paragraphs: int) -> str:
    """An HTML page on one line: a heading every ten paragraphs of five numbered sentences."""
    body = "".join((f"<h2>Part {i // 10 + 1}</h2>" if i % 10 == 0 else "")
                   + "<p>" + " ".join(f"Rule {i}.{j} applies to every office and team." for j in range(5)) + "</p>"
                   for i in range(paragraphs))
    return f"<html><head><title>Rules</title></head><body>{body}</body></html>"


def leaves(html: str) -> list[str]:
    return [node.content for node, _ in parse_html(html, "page.html").root.walk() if node.is_leaf]


def test_a_page_on_one_line_reads_as_the_same_page_with_line_breaks() -> None:
    one_line = page(40)
    assert "\n" not in one_line
    assert leaves(one_line) == leaves(one_line.replace("><", ">\n<"))
    assert len(leaves(one_line)) >= 40


def test_the_passages_a_page_embeds_grow_in_proportion_to_its_size() -> None:
    options = IngestOptions()
    small = prepare_tree(parse_html(page(400), "page.html"), options).search_targets
    large = prepare_tree(parse_html(page(1600), "page.html"), options).search_targets
    assert 3.6 <= len(large) / len(small) <= 4.4, (len(small), len(large))
    assert max(DEFAULT_COUNTER.count(n.content) for n in large) <= options.max_child_tokens
