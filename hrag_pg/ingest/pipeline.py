"""From a file (or a parsed tree) to a :class:`FlatDocument` ready to write.

The order matters: the parent strategy builds the tree, the child strategy
cuts leaves to searchable size (with overlap), then the parent limit splits
parents that grew too long for an LLM context, then :func:`flatten` numbers
and identifies everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..argument_limits import MAX_CHUNK_TOKENS, MAX_COUNT, check_count, check_nonnegative
from .children import (
    QuestionGenerator,
    add_qa_children,
    extract_facts,
    split_functions,
    split_paragraphs,
    split_sentences,
)
from .flatten import FlatDocument, flatten
from .groups import group_wide_parents
from .loaders import load_document
from .navigation import demote_navigation, join_menu_runs
from .packing import join_lead_ins, pack_short_leaves
from .parent_size import enforce_parent_limit
from .tokens import DEFAULT_COUNTER, CachedCounter, TokenCounter
from .tree import DocumentTree

Strategy = Literal["headings", "clauses", "pages", "code", "window"]
ChildStrategy = Literal["paragraph", "sentence", "fact", "function", "qa", "none"]
STRATEGIES: tuple[str, ...] = ("headings", "clauses", "pages", "code", "window")
CHILD_STRATEGIES: tuple[str, ...] = ("paragraph", "sentence", "fact", "function", "qa", "none")


@dataclass(frozen=True)
class IngestOptions:
    """Settings of one ingestion (all have the seed's defaults).

    ``child``: "paragraph" caps leaves at ``max_child_tokens``; "sentence"
    makes leaves of ``sentences_per_child`` sentences; "fact" one leaf per
    sentence with a number or a requirement; "function" one leaf per
    top-level ``def``/``class`` of Python code blocks in documents (the code
    strategy already has one leaf per function, so there it equals
    "paragraph"); "qa" generated questions as children of every leaf (needs
    a ``question_generator``, Python API only); "none" keeps the parent
    strategy's leaves as they are.  All but "none" end with the size cap.
    """

    strategy: Strategy | None = None  # None: by file type
    child: ChildStrategy = "paragraph"
    max_child_tokens: int = 150
    overlap_tokens: int = 25
    max_parent_tokens: int = 3000
    window_tokens: int = 1200
    sentences_per_child: int = 3
    #: Wrap the leaves of parents with more children than this in ~group_tokens groups (0: never).
    group_children_over: int = 6
    group_tokens: int = 512
    #: Join runs of short blocks of one section into children of about this many tokens
    #: (headings strategy only; 0: never).  See hrag_pg/ingest/packing.py.
    pack_tokens: int = 0
    #: Join a lead-in ("For example:") to the block it introduces when the two fit max_child_tokens
    #: (headings strategy only).  See hrag_pg/ingest/packing.py.
    join_lead_ins: bool = True
    errors: Literal["strict", "replace"] = "strict"

    def __post_init__(self) -> None:
        if self.strategy is not None and self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")
        if self.child not in CHILD_STRATEGIES:
            raise ValueError(f"unknown child strategy {self.child!r}; choose one of {', '.join(CHILD_STRATEGIES)}")
        # The same ranges as the CLI's options (hrag_pg/argument_limits.py), named as Python spells them.
        check_count(self.max_child_tokens, "max_child_tokens", maximum=MAX_CHUNK_TOKENS)
        check_nonnegative(self.overlap_tokens, "overlap_tokens", maximum=MAX_CHUNK_TOKENS)
        if self.overlap_tokens >= self.max_child_tokens:
            # the overlap is embedded with each piece: as long as a piece, it would double what the model reads
            raise ValueError(f"overlap_tokens ({self.overlap_tokens}) must be less than max_child_tokens "
                             f"({self.max_child_tokens})")
        check_count(self.max_parent_tokens, "max_parent_tokens", maximum=MAX_CHUNK_TOKENS)
        check_count(self.window_tokens, "window_tokens", maximum=MAX_CHUNK_TOKENS)
        check_count(self.group_tokens, "group_tokens", maximum=MAX_CHUNK_TOKENS)
        check_nonnegative(self.group_children_over, "group_children_over", maximum=MAX_COUNT)
        if self.errors not in ("strict", "replace"):
            raise ValueError(f"errors must be 'strict' or 'replace', got {self.errors!r}")
        if not 0 <= self.pack_tokens <= self.max_child_tokens:
            raise ValueError(f"pack_tokens must be between 0 and max_child_tokens ({self.max_child_tokens}), "
                             f"got {self.pack_tokens}")
        if not 1 <= self.sentences_per_child <= 3:
            raise ValueError("sentences_per_child must be 1, 2 or 3")


def refine(
    tree: DocumentTree,
    options: IngestOptions,
    counter: TokenCounter = DEFAULT_COUNTER,
    question_generator: QuestionGenerator | None = None,
) -> DocumentTree:
    """Apply the child strategy and the parent size limit to a parsed tree."""
    headings = options.child == "paragraph" and tree.metadata.get("strategy") == "headings"
    join_menu_runs(tree)
    if options.join_lead_ins and headings:
        join_lead_ins(tree, max_tokens=options.max_child_tokens, counter=counter)
    # (after the lead-ins: a list of links a lead-in introduces is its content)
    demote_navigation(tree, lone_headings=tree.metadata.get("strategy") == "headings")
    if options.pack_tokens and headings:
        pack_short_leaves(tree, pack_tokens=options.pack_tokens, counter=counter)
    if options.child == "sentence":
        split_sentences(tree, group=options.sentences_per_child, counter=counter)
    elif options.child == "fact":
        extract_facts(tree)
    elif options.child == "function":
        split_functions(tree)
    elif options.child == "qa" and question_generator is None:
        raise ValueError("the qa child strategy needs a question generator (none ships with hrag-pg)")
    # Every strategy ends with the size cap, so no child exceeds max_child_tokens.
    if options.child != "none":
        split_paragraphs(tree, max_tokens=options.max_child_tokens, overlap_tokens=options.overlap_tokens,
                         counter=counter)
    enforce_parent_limit(tree, max_parent_tokens=options.max_parent_tokens, counter=counter)
    if options.group_children_over:
        group_wide_parents(tree, max_children=options.group_children_over, group_tokens=options.group_tokens,
                           counter=counter)
    if options.child == "qa" and question_generator is not None:
        add_qa_children(tree, question_generator)
    return tree


def prepare_file(
    path: Path,
    options: IngestOptions,
    *,
    collection: str = "default",
    source: str | None = None,
    model_name: str = "",
    counter: TokenCounter = DEFAULT_COUNTER,
    question_generator: QuestionGenerator | None = None,
) -> FlatDocument:
    """Parse, refine and flatten one file (named by its file name unless ``source`` is given, as ``ingest`` does)."""
    counter = counter if isinstance(counter, CachedCounter) else CachedCounter(counter)
    name = source if source is not None else Path(path).name
    tree = load_document(Path(path), strategy=options.strategy, source=name, errors=options.errors,
                         window_tokens=options.window_tokens)
    return prepare_tree(tree, options, collection=collection, model_name=model_name, counter=counter,
                        question_generator=question_generator)


def prepare_tree(
    tree: DocumentTree,
    options: IngestOptions,
    *,
    collection: str = "default",
    model_name: str = "",
    counter: TokenCounter = DEFAULT_COUNTER,
    question_generator: QuestionGenerator | None = None,
) -> FlatDocument:
    """Refine and flatten an already-built tree (for callers with their own parser)."""
    counter = counter if isinstance(counter, CachedCounter) else CachedCounter(counter)
    # The refining steps count every node's text and the whole text of every section made
    # of leaves (the parent limit); count them in one batch first (see CachedCounter.prime).
    # A tokenizer that splits at whitespace gets a section's count from its paragraphs'
    # (tokens.count_parts), so only the texts are primed.  Flatten then finds every final
    # node's text counted already (the splitter counts each leaf it keeps and each piece it makes).
    nodes = [node for node, _ in tree.root.walk()]
    sections = [] if counter.splits_at_whitespace else [
        node.full_text() for node in nodes if node.children and all(c.is_leaf for c in node.children)]
    counter.prime([node.content for node in nodes] + sections)
    refine(tree, options, counter, question_generator)
    return flatten(tree, collection=collection, model_name=model_name, counter=counter)
