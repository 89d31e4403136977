"""Pack runs of short blocks into children that carry meaning.

A manual's blocks are short: a one-line lead-in ("For example:"), the code
block it introduces, a two-line remark.  Embedded one by one they are weak
search targets (the benchmark's leaves averaged 54 tokens, and narrow
questions missed exactly such passages).  Packing joins consecutive short
leaves of one parent into one child, in document order, with the original
text between them, so nothing is lost or stored twice.

Boundaries must not move when one paragraph is edited, or an edit would
re-embed the rest of its section.  So a pack's end is decided by each leaf
alone, never by running totals: a leaf *ends* a pack if it is not short
(``>= pack_tokens / 2`` tokens) or if its content hash says so (about one in
three short leaves, which bounds the length of a run of short leaves).  A
short leaf otherwise joins the leaf after it (a lead-in belongs with what
it introduces).  Editing one leaf changes its own pack, and at most merges
it with or splits it from the next one: at most two texts to re-embed.

Only leaves of the headings strategy are packed (Markdown, HTML, text):
clause items, pages, windows and code keep their own structure.

Joining lead-ins (on by default, unlike packing) is packing's narrowest
case: a leaf that says nothing alone (it ends with a colon, it does not end
a sentence over an indented block, or it is a definition list's term) joins
the one block after it, if the two fit a child; a term over a lead-in and its
block heads the two.  Nothing else is joined.  Packing, when on, runs after it.
"""

from __future__ import annotations

import hashlib

from .tokens import DEFAULT_COUNTER, TokenCounter
from .tree import DocumentTree, DraftNode
from .tree_helpers import MENU_KIND

#: Leaf kinds a pack may contain.
PACKABLE_KINDS = frozenset({"paragraph", "item", "code", "table"})


def _joinable(node: DraftNode) -> bool:
    """A whole leaf of a kind packs and lead-ins may join (not a piece of a split block)."""
    return node.is_leaf and node.kind in PACKABLE_KINDS and not node.overlap_prefix


def _ends_pack(leaf: DraftNode, tokens: int, pack_tokens: int) -> bool:
    if tokens * 2 >= pack_tokens:
        return True
    return hashlib.sha256(leaf.content.encode("utf-8")).digest()[0] % 3 == 0


def pack_short_leaves(
    tree: DocumentTree, *, pack_tokens: int, counter: TokenCounter = DEFAULT_COUNTER
) -> DocumentTree:
    """Join runs of short sibling leaves (see the module docstring).  Mutates and returns ``tree``.

    ``pack_tokens`` is the size a pack aims at: leaves under half of it are
    short.  0 disables packing.
    """
    if pack_tokens < 0:
        raise ValueError(f"pack_tokens must be >= 0, got {pack_tokens}")
    if pack_tokens == 0:
        return tree
    for node, _ in list(tree.root.walk()):
        if not node.children:
            continue
        packed: list[DraftNode] = []
        run: list[DraftNode] = []
        for child in node.children:
            if not _joinable(child):
                packed.extend(_close(run))
                run = []
                packed.append(child)
                continue
            run.append(child)
            if _ends_pack(child, counter.count(child.content), pack_tokens):
                packed.extend(_close(run))
                run = []
        packed.extend(_close(run))
        node.children = packed
    return tree


#: A label is at most this many words.
LABEL_WORDS = 12
_SENTENCE_ENDS = (".", "!", "?", ";", ",", "\u3002", "\uff01", "\uff1f")
#: ... but for these abbreviations, which announce an example ("… is built, e.g.").
_NOT_SENTENCE_ENDS = ("e.g.", "i.e.")
_COLONS = (":", "\uff1a")


def _indent(text: str) -> int:
    """The columns the least indented line of ``text`` starts at (tabs at 8, as reStructuredText reads them)."""
    return min((len(line.expandtabs(8)) - len(line.expandtabs(8).lstrip())
                for line in text.split("\n") if line.strip()), default=0)


def _ends_like_a_sentence(text: str) -> bool:
    return text.endswith(_SENTENCE_ENDS) and not text.endswith(_NOT_SENTENCE_ENDS)


def _is_label(leaf: DraftNode, following: DraftNode | None) -> bool:
    """A one-line paragraph of a few words that is not a sentence: the term a definition list's
    description follows (``UNIQUE``, ``data_checksums (boolean)``, ``-k --data-checksums``), or a
    heading the reader took for a line.  The description alone does not even name what it describes.

    A term is never indented deeper than its description, so a line indented deeper than the
    block after it (``following``), or indented with nothing after it, is no label: it is a
    command or a code line (``    openssl genrsa -out key.pem``), which belongs to the lead-in
    before it, not to the paragraph that follows.
    """
    text = leaf.content.strip()
    return (leaf.kind == "paragraph" and "\n" not in text and len(text.split()) <= LABEL_WORDS
            and not _ends_like_a_sentence(text) and not text.endswith(_COLONS)
            and _indent(leaf.content) <= (_indent(following.content) if following is not None else 0))


def _is_lead_in(leaf: DraftNode, following: DraftNode | None = None) -> bool:
    """A leaf that says nothing without the block after it (``following``, None if there is none).

    Either it ends with a colon ("For example:", "The following steps run:",
    「例：」), or it is a paragraph that does not end like a sentence over a
    block indented deeper than itself ("… can be found in the directory" over
    an indented path, "… ready to be built, e.g." over a command), or it is a
    label (:func:`_is_label`).
    """
    if leaf.kind not in ("paragraph", "item"):
        return False
    text = leaf.content.strip()
    if text.endswith(_COLONS):
        return True
    if leaf.kind != "paragraph" or _ends_like_a_sentence(text):
        return False
    if following is not None and _indent(following.content) > _indent(leaf.content):
        return True
    return _is_label(leaf, following)


def join_lead_ins(
    tree: DocumentTree, *, max_tokens: int, counter: TokenCounter = DEFAULT_COUNTER
) -> DocumentTree:
    """Join each lead-in or label to the block after it, when the two fit ``max_tokens``.  Mutates and returns ``tree``.

    A lead-in says nothing alone, and the code block, list or description it
    introduces is a weak search target without it; embedded apart, the
    lead-in is hit for its heading path and comes back as a passage of one to
    three tokens.  Of two lead-ins in a row only the second joins the block,
    unless the first is a label (a term, a heading read as a line): then the
    three travel together if they fit, the label heading the pair.
    Whether a leaf is joined depends on it and its next three siblings only
    (a block's own next sibling says whether it is a term or a command), so
    an edit re-embeds at most the joins around it.
    """
    for node, _ in list(tree.root.walk()):
        if len(node.children) < 2:
            continue
        children = node.children
        joined: list[DraftNode] = []
        i = 0
        while i < len(children):
            lead = children[i]
            if (i + 2 < len(children) and _joinable(lead) and _is_label(lead, children[i + 1])
                    and _is_pair(children, i + 1, max_tokens, counter)
                    and counter.count(_joined_text(children[i:i + 3])) <= max_tokens):
                joined.extend(_close(children[i:i + 3]))
                i += 3
            elif _is_pair(children, i, max_tokens, counter):
                joined.extend(_close(children[i:i + 2]))
                i += 2
            else:
                joined.append(lead)
                i += 1
        node.children = joined
    return tree


def _is_pair(children: list[DraftNode], i: int, max_tokens: int, counter: TokenCounter) -> bool:
    """Whether ``children[i]`` is a lead-in that joins the block after it."""
    if i + 1 >= len(children):
        return False
    lead, block = children[i], children[i + 1]
    after = children[i + 2] if i + 2 < len(children) else None
    # a list of links (a menu, hrag_pg.ingest.navigation) is a block too, when a sentence introduces it
    menu = block.kind == MENU_KIND and block.is_leaf and lead.content.rstrip().endswith(_COLONS)
    return (_joinable(lead) and (_joinable(block) or menu) and _is_lead_in(lead, block)
            and not _is_lead_in(block, after) and counter.count(_joined_text([lead, block])) <= max_tokens)


def _joined_text(run: list[DraftNode]) -> str:
    text = run[0].content
    for leaf in run[1:]:
        text += leaf.separator + leaf.content
    return text


def _close(run: list[DraftNode]) -> list[DraftNode]:
    """One leaf for a run of two or more; a single leaf stays as it is."""
    if len(run) < 2:
        return run
    first = run[0]
    text = _joined_text(run)
    kinds = sorted({leaf.kind for leaf in run})
    pack = DraftNode(
        kind="paragraph" if len(kinds) > 1 else first.kind,
        content=text,
        title=first.title,
        metadata={**first.metadata, "packed": len(run), "packed_kinds": kinds},
        key=first.key,
        separator=first.separator,
    )
    return [pack]


__all__ = ["PACKABLE_KINDS", "join_lead_ins", "pack_short_leaves"]
