"""Process documents: what a document is, and every rule of storing and finding one,
written once above the storage.

:class:`ProcessService` holds the rules (save and the collision rule, revisions and lives,
revert, merge, import, outcomes, near-copies, stale marks, find) over a
:class:`ProcessRepo`, the port each backend implements (:mod:`robot_mcp_memory.backends`):
reads (:class:`ProcessReads`, asked with a :class:`Lexical` or a :class:`Semantic` query)
and transaction scripts (:class:`ProcessTx`). :class:`ProcessDoc` parses, validates and
renders a document. The private modules hold the parts: ``_model`` and ``_frontmatter``
(the document), ``_rows`` (a stored row read back), ``_ranking`` (bm25, fusion, rank),
``_rules`` (the other rules), ``_words`` and ``_typos`` (a query's words and their
repair), ``_embedding`` (the embedders), ``_repo`` (the port) and ``_service``.

What a backend needs of the rules to execute them (the bm25 constants, the phrases and
their idf, the owners, the lives of an id) is exported here too; the service's answers
(``Saved``, ``Found``, ``Merged``…) are read by attribute and stay in their modules.
"""

from __future__ import annotations

from robot_mcp_memory.processes._embedding import (
    Embedder,
    FunctionEmbedder,
    HashingEmbedder,
    Pairs,
    Vectors,
    load_default_embedder,
)
from robot_mcp_memory.processes._model import SLUG_PATTERN, Owner, ProcessDoc
from robot_mcp_memory.processes._ranking import (
    BM25_B,
    BM25_K1,
    BM25_WEIGHTS,
    COLUMN_WEIGHTS,
    DocTerms,
    Phrase,
    idf,
    owner_key,
)
from robot_mcp_memory.processes._repo import (
    Counted,
    Lexical,
    ProcessReads,
    ProcessRepo,
    ProcessTx,
    Scored,
    Semantic,
)
from robot_mcp_memory.processes._rows import COLUMNS
from robot_mcp_memory.processes._rules import (
    DocState,
    legacy_lives,
    revision_owner,
)
from robot_mcp_memory.processes._service import ProcessService
from robot_mcp_memory.processes._typos import REPAIR_WEIGHT
from robot_mcp_memory.processes._words import match_expression, truncate_query

__all__ = [
    "BM25_B",
    "BM25_K1",
    "BM25_WEIGHTS",
    "COLUMNS",
    "COLUMN_WEIGHTS",
    "REPAIR_WEIGHT",
    "SLUG_PATTERN",
    "Counted",
    "DocState",
    "DocTerms",
    "Embedder",
    "FunctionEmbedder",
    "HashingEmbedder",
    "Lexical",
    "Owner",
    "Pairs",
    "Phrase",
    "ProcessDoc",
    "ProcessReads",
    "ProcessRepo",
    "ProcessService",
    "ProcessTx",
    "Scored",
    "Semantic",
    "Vectors",
    "idf",
    "legacy_lives",
    "load_default_embedder",
    "match_expression",
    "owner_key",
    "revision_owner",
    "truncate_query",
]
