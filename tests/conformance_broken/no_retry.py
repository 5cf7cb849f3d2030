"""Defect: the poster makes one attempt per event and never retries (contract §5.1)."""

from _base import NAME, build, serve

from robot_mcp_kit import EventPoster, RetryPolicy

if __name__ == "__main__":
    once = RetryPolicy(delays_s=(), then_every_s=1.0, give_up_after_s=0.0)
    serve(*build(poster=EventPoster(NAME, retry=once)))
