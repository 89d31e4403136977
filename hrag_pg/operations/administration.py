"""The administration operations: what is stored (stats), whether the trees are sound (check), and the vector
index's state; the CLI's ``stats``, ``check`` and ``ingest --bulk`` translate them."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from ..errors import NotPermitted

if TYPE_CHECKING:  # pragma: no cover
    from ..repository import Repository


class CollectionStats(BaseModel):
    """One collection's size, and the model its vectors are of (None: not recorded yet)."""

    model_config = ConfigDict(frozen=True)

    collection: str
    documents: int
    nodes: int
    #: Nodes with an embedding (the search targets).
    embedded: int
    #: Characters of the nodes' own text (text is stored once, in the node that owns it).
    characters: int
    model: dict[str, Any] | None = None


class Stats(BaseModel):
    """``hrag stats``: the installation's dimension, each collection, and the bytes hrag's tables take."""

    model_config = ConfigDict(frozen=True)

    embedding_dim: int
    collections: list[CollectionStats]
    total_bytes: int


class Problem(BaseModel):
    """One inconsistency ``hrag.check_integrity()`` found."""

    model_config = ConfigDict(frozen=True)

    problem: str
    document_id: uuid.UUID | None = None
    node_id: uuid.UUID | None = None
    detail: str


class IntegrityReport(BaseModel):
    """``hrag check``: what ``--repair`` fixed (by kind), what is still wrong, and whether all is sound."""

    model_config = ConfigDict(frozen=True)

    repaired: dict[str, int]
    problems: list[Problem]
    ok: bool


class Administration:
    """The administration operations on one repository (:attr:`hrag_pg.api.HRAG.administration` makes one)."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository

    def stats(self) -> Stats:
        return Stats.model_validate(self.repository.stats())

    def check(self, *, repair: bool = False) -> IntegrityReport:
        """The trees' consistency, after recomputing what can be recomputed when ``repair`` (it needs the
        owner's write access, and says so)."""
        import sqlalchemy as sa

        try:
            repaired = self.repository.repair_integrity() if repair else {}
        except sa.exc.ProgrammingError as exc:
            reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
            raise NotPermitted(f"repair needs write access to hrag's tables ({reason}); run it as the owner, "
                               "or check without repair", field="repair") from None
        problems = [Problem.model_validate(p) for p in self.repository.check_integrity()]
        return IntegrityReport(repaired=repaired, problems=problems, ok=not problems)

    def vector_index_state(self, *, default: str | None = None) -> str:
        """valid, invalid (an interrupted build) or missing (a bulk load killed before its rebuild)."""
        return self.repository.vector_index_state(default=default)
