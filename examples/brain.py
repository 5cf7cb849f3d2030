"""A brain's receiver: each task's events once, in order, repaired and reconciled."""

import os

import uvicorn

from robot_mcp_kit.receiver import Receiver, TaskUpdate, UpdateKind, servers_from_env


async def handle(update: TaskUpdate) -> None:
    """Called once per update, each task's in seq order; return when it is handled."""
    if update.kind is UpdateKind.EVENT and update.type == "input_required":
        await receiver.answer(update, content={"confirm": True})  # a task asks: say yes
    # An effect that must happen once is stored with update.key (unique): a redelivered
    # update (the handler raised, or the process died as it ran) may have been seen.
    again = " redelivered" if update.redelivered else ""
    print(update.describe(), f"({update.source}){again}", flush=True)


receiver = Receiver(
    servers_from_env(),  # RVC_SERVERS=sleeper, RVC_SLEEPER_SECRET, RVC_SLEEPER_MCP_URL
    handle,
    state=os.environ.get("BRAIN_STATE", "brain-receiver.db"),  # survives restarts
)
app = receiver.asgi_app()  # POST /api/agent/events; or app.include_router(receiver.router())

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("BRAIN_PORT", "8000")))
