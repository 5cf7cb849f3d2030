"""Defect (mcp 2.x only): tasks/get reports a different result than the task's events
(contract §12): the native face keeps a result of its own instead of the task's."""

from typing import Any

from _base import build, serve

from robot_mcp_kit import NativeTasks


class OwnResult(NativeTasks):
    def get(self, native_id: object, owner: str) -> dict[str, Any]:
        detailed = super().get(native_id, owner)
        result = detailed.get("result")
        if isinstance(result, dict) and not result.get("isError"):
            result["structuredContent"] = {"slept_s": -1}
        return detailed


if __name__ == "__main__":
    serve(*build(native=OwnResult))
