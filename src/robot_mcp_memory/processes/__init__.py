"""Process documents: what a document is, and every rule of storing and finding one,
written once above the storage.

:class:`ProcessService` holds the rules (save and the collision rule, revisions and lives,
revert, merge, import, outcomes, near-copies, stale marks, find) over a
:class:`ProcessRepo`, the port each backend implements (:mod:`robot_mcp_memory.backends`).
:class:`ProcessDoc` parses, validates and renders a document (:mod:`.model`); :mod:`.rows`
reads a stored row back as one; :mod:`.ranking` says how documents are ranked and
:mod:`.rules` what the other rules are; the words a query is searched by, the repair of
misspelt words and the embedders are this package's too.
"""

from __future__ import annotations

from robot_mcp_memory.processes._embedding import (
    DEFAULT_MODEL,
    MAX_EMBED_CHARS,
    Embedder,
    FunctionEmbedder,
    HashingEmbedder,
    Pairs,
    Vectors,
    WordLlamaEmbedder,
    document_texts,
    load_default_embedder,
    normalise,
)
from robot_mcp_memory.processes._frontmatter import FIELDS
from robot_mcp_memory.processes._typos import (
    MAX_REPAIRED_WORDS,
    MAX_REPAIRS_PER_WORD,
    REPAIR_WEIGHT,
    Repair,
    Stemmer,
    TypoRepair,
    Vocabulary,
)
from robot_mcp_memory.processes._words import (
    ACTION_WORDS,
    MAX_TERMS,
    STOPWORDS,
    content_words,
    match_expression,
    search_terms,
    truncate_query,
)
from robot_mcp_memory.processes.model import SLUG_PATTERN, Owner, ProcessDoc
from robot_mcp_memory.processes.ranking import (
    BM25_B,
    BM25_K1,
    BM25_WEIGHTS,
    COLUMN_WEIGHTS,
    IDF_FLOOR,
    LEXICAL_POOL,
    SEMANTIC_FLOOR,
    SEMANTIC_POOL,
    SEMANTIC_WEIGHT,
    SHARED_OWNER,
    DocTerms,
    Found,
    Phrase,
    fuse,
    idf,
    owner_key,
    rank,
    visible_owners,
)
from robot_mcp_memory.processes.repo import (
    Counted,
    Lexical,
    ProcessReads,
    ProcessRepo,
    ProcessTx,
    Scored,
)
from robot_mcp_memory.processes.rows import COLUMNS, Row, readable, row_to_doc, tags_json
from robot_mcp_memory.processes.rules import (
    LIFE_ENDING_REASONS,
    DocState,
    Imported,
    Merged,
    NearDuplicate,
    Revision,
    Saved,
    legacy_lives,
    revision_owner,
)
from robot_mcp_memory.processes.service import ProcessService

__all__ = [
    "ACTION_WORDS",
    "BM25_B",
    "BM25_K1",
    "BM25_WEIGHTS",
    "COLUMNS",
    "COLUMN_WEIGHTS",
    "DEFAULT_MODEL",
    "FIELDS",
    "IDF_FLOOR",
    "LEXICAL_POOL",
    "LIFE_ENDING_REASONS",
    "MAX_EMBED_CHARS",
    "MAX_REPAIRED_WORDS",
    "MAX_REPAIRS_PER_WORD",
    "MAX_TERMS",
    "REPAIR_WEIGHT",
    "SEMANTIC_FLOOR",
    "SEMANTIC_POOL",
    "SEMANTIC_WEIGHT",
    "SHARED_OWNER",
    "SLUG_PATTERN",
    "STOPWORDS",
    "Counted",
    "DocState",
    "DocTerms",
    "Embedder",
    "Found",
    "FunctionEmbedder",
    "HashingEmbedder",
    "Imported",
    "Lexical",
    "Merged",
    "NearDuplicate",
    "Owner",
    "Pairs",
    "Phrase",
    "ProcessDoc",
    "ProcessReads",
    "ProcessRepo",
    "ProcessService",
    "ProcessTx",
    "Repair",
    "Revision",
    "Row",
    "Saved",
    "Scored",
    "Stemmer",
    "TypoRepair",
    "Vectors",
    "Vocabulary",
    "WordLlamaEmbedder",
    "content_words",
    "document_texts",
    "fuse",
    "idf",
    "legacy_lives",
    "load_default_embedder",
    "match_expression",
    "normalise",
    "owner_key",
    "rank",
    "readable",
    "revision_owner",
    "row_to_doc",
    "search_terms",
    "tags_json",
    "truncate_query",
    "visible_owners",
]
