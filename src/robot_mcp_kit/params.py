"""The lesson store: learned parameters per scope.

A *lesson* is a JSON object of parameters (a grasp offset, an LLM correction) plus how it
fared — success and failure counts — the place it was learned at, the robot that taught
it, and when it was created and last updated. :class:`ParamStore` is one scope's view
(``group:<G>``, ``solo:<robot>``, ``robot:<id>`` in the memory server); the backend holds
every scope.

:class:`SqliteBackend` keeps all scopes in ONE table keyed ``(scope, key)``::

    params(scope, key, value_json, success_count, failure_count, place, robot,
           created, updated, note)

and opens its file lazily: reads of a missing file answer "nothing" and create nothing; the
first write creates it. So a service where nobody records a lesson leaves no file behind.
Lesson writes are cold (synchronous, never dropped): they are rare and their caller wants
the stored result back. :class:`MemoryBackend` is the same contract in a dict, for tests.

Schema versions: 1 as above without ``note``; 2 adds ``note``, the last free-text note
recorded with the lesson — a version-1 file migrates on open, its lessons kept.

Keys: one lesson per ``(scope, key, place)``. The row's ``key`` column is
``lesson_key(key, place)`` — ``key`` alone for a place-less lesson, ``key@place``
otherwise — so the ``(scope, key)`` primary key holds one lesson per place.

The code lives in ``_param_store`` (:class:`Lesson`, :func:`lesson_key`,
:class:`ParamBackend`, :class:`ParamStore`) and ``_param_backends`` (the backends and
:data:`PARAMS_SCHEMA`); this module is their public face.
"""

from __future__ import annotations

from robot_mcp_kit._exceptions import (
    ConfigurationError,
    InvalidLessonParams,
    LessonError,
    LessonNotFound,
)
from robot_mcp_kit._param_backends import PARAMS_SCHEMA, MemoryBackend, SqliteBackend
from robot_mcp_kit._param_store import Lesson, ParamBackend, ParamStore, lesson_key

__all__ = [
    "PARAMS_SCHEMA",
    "ConfigurationError",
    "InvalidLessonParams",
    "Lesson",
    "LessonError",
    "LessonNotFound",
    "MemoryBackend",
    "ParamBackend",
    "ParamStore",
    "SqliteBackend",
    "lesson_key",
]
