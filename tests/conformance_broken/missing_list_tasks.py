"""Defect: the server exposes get_task and cancel_task but no list_tasks (contract §6)."""

from _base import build, serve

if __name__ == "__main__":
    mcp, manager, poster = build()
    mcp.remove_tool("list_tasks")
    serve(mcp, manager, poster)
