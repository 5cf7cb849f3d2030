"""Defect: the poster retries after 0.1 s and 0.1 s, not 0.5 s and 2 s (contract §5.2).

Every event is still delivered, so only the retry timing comparison can catch it.
"""

from _base import NAME, build, serve

from robot_mcp_kit import EventPoster, RetryPolicy

if __name__ == "__main__":
    hasty = RetryPolicy(delays_s=(0.1, 0.1))
    serve(*build(poster=EventPoster(NAME, retry=hasty)))
