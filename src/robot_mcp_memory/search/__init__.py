"""Finding process documents: query words, the index's tokens and per-owner statistics, typo
repair, lexical and hybrid ranking, vectors and the embedders.

:class:`ProcessSearch` ranks (bm25 alone, or fused with the cosine of an
:class:`Embedder`'s vectors, decision 0011); the module-level knobs tune it.
"""

from __future__ import annotations

from robot_mcp_memory.search._embedding import (
    DEFAULT_MODEL,
    MAX_EMBED_CHARS,
    Embedder,
    FunctionEmbedder,
    HashingEmbedder,
    WordLlamaEmbedder,
    load_default_embedder,
    normalise,
)
from robot_mcp_memory.search._process_search import (
    LEXICAL_POOL,
    RELIABILITY_SQL,
    SEMANTIC_FLOOR,
    SEMANTIC_POOL,
    SEMANTIC_WEIGHT,
    Found,
    ProcessSearch,
    fuse,
    rank,
)
from robot_mcp_memory.search._term_index import (
    BM25_B,
    BM25_K1,
    IDF_FLOOR,
    SHARED_OWNER,
    Phrase,
    TermIndex,
    index_document,
    owner_key,
    rebuild_term_index,
    unindex_document,
    visible_owners,
)
from robot_mcp_memory.search._tokens import (
    BM25_WEIGHTS,
    DocTerms,
    Tokenizer,
)
from robot_mcp_memory.search._typos import (
    MAX_REPAIRED_WORDS,
    MAX_REPAIRS_PER_WORD,
    REPAIR_WEIGHT,
    Repair,
    Stemmer,
    TypoRepair,
    Vocabulary,
)
from robot_mcp_memory.search._vector_table import (
    Pairs,
    VectorTable,
    document_texts,
)
from robot_mcp_memory.search._vectors import (
    VectorIndex,
    from_blob,
    to_blob,
)
from robot_mcp_memory.search._words import (
    ACTION_WORDS,
    MAX_TERMS,
    STOPWORDS,
    content_words,
    match_expression,
    search_terms,
    truncate_query,
)

__all__ = [
    "ACTION_WORDS",
    "BM25_B",
    "BM25_K1",
    "BM25_WEIGHTS",
    "DEFAULT_MODEL",
    "IDF_FLOOR",
    "LEXICAL_POOL",
    "MAX_EMBED_CHARS",
    "MAX_REPAIRED_WORDS",
    "MAX_REPAIRS_PER_WORD",
    "MAX_TERMS",
    "RELIABILITY_SQL",
    "REPAIR_WEIGHT",
    "SEMANTIC_FLOOR",
    "SEMANTIC_POOL",
    "SEMANTIC_WEIGHT",
    "SHARED_OWNER",
    "STOPWORDS",
    "DocTerms",
    "Embedder",
    "Found",
    "FunctionEmbedder",
    "HashingEmbedder",
    "Pairs",
    "Phrase",
    "ProcessSearch",
    "Repair",
    "Stemmer",
    "TermIndex",
    "Tokenizer",
    "TypoRepair",
    "VectorIndex",
    "VectorTable",
    "Vocabulary",
    "WordLlamaEmbedder",
    "content_words",
    "document_texts",
    "from_blob",
    "fuse",
    "index_document",
    "load_default_embedder",
    "match_expression",
    "normalise",
    "owner_key",
    "rank",
    "rebuild_term_index",
    "search_terms",
    "to_blob",
    "truncate_query",
    "unindex_document",
    "visible_owners",
]
