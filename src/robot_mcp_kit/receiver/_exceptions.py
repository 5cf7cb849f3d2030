"""The receiver's errors, under the kit's base::

    RobotMcpKitError
    ├── ConfigurationError          (ValueError) a server entry, a file or a variable the
    │                               receiver cannot use; raised where it is read
    └── ReceiverError               base of the receiver's own errors
        ├── ReceiverClosed          (RuntimeError) the receiver was used after aclose()
        └── ServerCallFailed        (RuntimeError) a call to a server's MCP tools failed:
                                    ``code`` says how (unreachable, timeout, not_found,
                                    invalid, error, bad_answer, no_mcp_url,
                                    missing_extra)

A post the receiver refuses is no exception: :func:`~robot_mcp_kit.receiver.check_post`
answers it with a :class:`~robot_mcp_kit.receiver.Verdict`.
"""

from __future__ import annotations

from robot_mcp_kit._exceptions import RobotMcpKitError

__all__ = ["ReceiverClosed", "ReceiverError", "ServerCallFailed"]


class ReceiverError(RobotMcpKitError):
    """Base of the errors the receiver raises on purpose."""


class ReceiverClosed(ReceiverError, RuntimeError):
    """The receiver was used after :meth:`~robot_mcp_kit.receiver.Receiver.aclose`."""


class ServerCallFailed(ReceiverError, RuntimeError):
    """A call to one of a server's MCP tools failed.

    Attributes:
        server: the server's name (its ``X-RVC-Server``).
        tool: the tool called (``get_task_events``, ``list_tasks``, ``answer_task_input``…).
        code: ``unreachable`` (no connection or session), ``timeout``, ``not_found`` /
            ``invalid`` (the server's error answer), ``error`` (another error answer or an
            MCP error), ``bad_answer`` (an answer that is not the contract's shape),
            ``no_mcp_url`` (the receiver has no MCP URL for the server) or
            ``missing_extra`` (the ``mcp`` package is not installed).
        detail: one sentence; never a secret or a token.
    """

    def __init__(self, server: str, tool: str, code: str, detail: str) -> None:
        super().__init__(f"{tool} on server {server!r} failed ({code}): {detail}")
        self.server = server
        self.tool = tool
        self.code = code
        self.detail = detail
