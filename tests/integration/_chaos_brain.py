"""A child process for test_receiver_chaos: a brain built on the receiver's public API only.

``python _chaos_brain.py PORT STATE LOG`` serves ``Receiver(servers_from_env(), ...)`` on
127.0.0.1:PORT with its state in STATE; the handler appends one JSON line per update to
LOG (flushed before it returns, so a ``kill -9`` loses no line of a returned call):
``{"key", "kind", "task_id", "seq", "type", "event_id", "source", "redelivered"}``. The
servers come from the environment (``RVC_SERVERS``, ``RVC_<NAME>_SECRET``,
``RVC_<NAME>_MCP_URL``); short repair and reconcile intervals so a test sees them work.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

import uvicorn

from robot_mcp_kit.receiver import Receiver, TaskUpdate, servers_from_env


def main() -> None:
    port, state, log_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    log: TextIO = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - the process's life

    async def handle(update: TaskUpdate) -> None:
        line = {
            "key": update.key,
            "kind": update.kind.value,
            "task_id": update.task_id,
            "seq": update.seq,
            "type": update.type,
            "event_id": None if update.event is None else update.event.event_id,
            "source": update.source,
            "redelivered": update.redelivered,
            "missing": update.missing,
        }
        log.write(json.dumps(line) + "\n")
        log.flush()

    receiver = Receiver(
        servers_from_env(),
        handle,
        state=state,
        repair_wait_s=0.3,
        reconcile_every_s=2.0,
        call_timeout_s=3.0,
        connect_timeout_s=3.0,
        max_backoff_s=2.0,
    )
    uvicorn.run(receiver.asgi_app(), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
