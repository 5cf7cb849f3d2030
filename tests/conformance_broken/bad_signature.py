"""Defect: events are signed with the wrong key (contract §4.1)."""

import os

from _base import NAME, build, serve

from robot_mcp_kit import EventPoster

if __name__ == "__main__":
    wrong = os.environ["RVC_EVENT_SECRET"] + "-but-not-quite"
    serve(*build(poster=EventPoster(NAME, secret=wrong)))
