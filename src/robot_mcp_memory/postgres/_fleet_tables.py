"""The fleet registry's tables on PostgreSQL, written only by
:class:`~robot_mcp_memory.backends._fleet.SqlFleetRepo`.

The same three DEFINITION tables as ``index.db`` (:mod:`robot_mcp_memory.db`), with the
same columns, so a registry copied between the backends answers the same:

- ids are ``TEXT COLLATE "C"``: ordered by code point like SQLite's ``BINARY``, whatever
  the database's default collation, so ``list_robots`` and ``list_groups`` keep their order;
- timestamps are the text :func:`robot_mcp_kit.models.format_ts` writes (what the tools
  answer, byte for byte); ``meta`` is the JSON text the validation produced (not ``jsonb``,
  which would reorder keys and respell numbers);
- ``fleet_groups.self_improve`` is a ``BOOLEAN`` (NULL: inherit the global toggle);
- ``fleet_robots.group_id`` references ``fleet_groups`` (no cascade): a robot never names a
  group that does not exist, and a group with robots cannot be deleted under a replica
  registering one into it.
"""

from __future__ import annotations

from robot_mcp_kit.store import Kind, Table

__all__ = ["FLEET_GROUPS", "FLEET_ROBOTS", "FLEET_SETTINGS", "FLEET_TABLES"]

FLEET_GROUPS = Table(
    "fleet_groups",
    Kind.DEFINITION,
    """
    CREATE TABLE fleet_groups (
      group_id TEXT COLLATE "C" PRIMARY KEY,
      name TEXT,
      customer TEXT,
      factory TEXT,
      self_improve BOOLEAN,
      created TEXT NOT NULL,
      updated TEXT NOT NULL
    )
    """,
)

FLEET_ROBOTS = Table(
    "fleet_robots",
    Kind.DEFINITION,
    """
    CREATE TABLE fleet_robots (
      robot_id TEXT COLLATE "C" PRIMARY KEY,
      group_id TEXT COLLATE "C" REFERENCES fleet_groups (group_id),
      name TEXT,
      meta TEXT NOT NULL DEFAULT '{}',
      registered TEXT NOT NULL,
      updated TEXT NOT NULL
    )
    """,
    indexes=("CREATE INDEX fleet_robots_group ON fleet_robots (group_id, robot_id)",),
)

FLEET_SETTINGS = Table(
    "fleet_settings",
    Kind.DEFINITION,
    'CREATE TABLE fleet_settings (key TEXT COLLATE "C" PRIMARY KEY, value TEXT)',
)

FLEET_TABLES: tuple[Table, ...] = (FLEET_GROUPS, FLEET_ROBOTS, FLEET_SETTINGS)
