"""The receiver suite: holds a brain's ``POST /api/agent/events`` to ``docs/contract.md``.

Run it with ``robot-mcp-conformance receiver URL --secret SECRET --server-name NAME`` or
``pytest --pyargs robot_mcp_conformance.receiver --receiver-url URL ...``. It posts signed
events (valid, re-sent, out of order, and bad in every way §4.3 and §4.4 name) and judges
each answer, clause by clause; through the receiver's optional inspection hook (§5.5) it
also checks what the receiver did with them. Each test module holds one group of clauses;
the posts themselves are made once per session by the fixtures in ``conftest.py``.
"""
