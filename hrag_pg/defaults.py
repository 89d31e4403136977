"""The one home of every retrieval default.

The Python retrievers, the ``HRAG``/``AsyncHRAG`` methods, the CLI options and
the adapters all read these names; the SQL functions in ``sql/`` declare the
same values as their ``DEFAULT``s, and ``tests/integration/test_defaults.py``
reads them back from ``pg_proc`` so the two cannot drift apart.  Change a
value here and in the SQL together.
"""

from __future__ import annotations

#: parent-child: children matched by the vector search (``hrag.parent_child(top_k_children)``).
TOP_K_CHILDREN = 20
#: parent-child: distinct parents returned (``hrag.parent_child(max_parents)``).
MAX_PARENTS = 4
#: auto-merge: leaves hit before merging (``hrag.auto_merge(top_k)``).
TOP_K = 12
#: auto-merge: hits are at most this share of the collection's search targets (``hrag.sample_hits``).
MAX_HIT_SHARE = 0.1
#: auto-merge: merge a parent when hit children / all children reaches this (``merge_threshold``).
MERGE_THRESHOLD = 0.5
#: parent-child and auto-merge: a hit scoring below this share of the best hit's score is no evidence
#: (``hrag.search_hybrid(min_relative_score)``), so a parent or a merge far below the first is not
#: returned; the budget mode's ``hrag.auto_vote`` (the same share) keeps such hits from voting for a merge.
MIN_RELATIVE_SCORE = 0.5
#: Weight of lexical term overlap in the hybrid score (``hrag.search_hybrid(lexical_weight)``);
#: 0 searches by vector only.
LEXICAL_WEIGHT = 0.3
#: Children the reranker rescores before expansion or merging.
RERANK_CANDIDATES = 50
#: auto mode: the token budget of the context (``hrag.retrieve(max_tokens)``).
MAX_TOKENS = 2000
#: auto mode: hits from the candidate stage that feed the selection (``hrag.retrieve(top_k)``).
AUTO_TOP_K = 30
#: Retrieval modes, as the result model, the CLI and the adapters name them.
MODES = ("parent-child", "auto-merge", "auto")
