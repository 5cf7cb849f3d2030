"""FailureEpisodes: when write failures are logged (one line per episode, folded when they flap)."""

from __future__ import annotations

from robot_mcp_kit._failures import EPISODE_LOG_GAP_S, FailureEpisodes


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_line_when_failures_start_and_one_when_they_end():
    clock = Clock()
    episodes = FailureEpisodes(clock=clock)
    assert not episodes.failing
    assert episodes.succeeded() is False  # nothing to end
    assert episodes.failed() is True
    for _ in range(100):
        clock.now += 1
        assert episodes.failed(3) is False
    assert (episodes.failing, episodes.failures) == (True, 301)
    assert episodes.succeeded() is True
    assert episodes.seconds() == 100.0
    clock.now += 50
    assert episodes.seconds() == 100.0  # the last episode's length, not the time since
    assert not episodes.failing


def test_an_episode_soon_after_a_logged_one_is_folded_unless_it_lasts():
    """Near a full disk's limit writes flap: fail, work, fail. Only the first start and end
    are logged, and a folded episode still failing a gap later is logged then."""
    clock = Clock()
    episodes = FailureEpisodes(clock=clock)
    assert episodes.failed() is True
    clock.now += 1
    assert episodes.succeeded() is True
    clock.now += 1
    assert episodes.failed() is False  # folded
    assert episodes.failing  # health is never folded
    clock.now += 1
    assert episodes.succeeded() is False  # its end is not logged either
    clock.now += 1
    assert episodes.failed() is False
    clock.now += EPISODE_LOG_GAP_S
    assert episodes.failed() is True  # still failing a gap later: logged after all
    assert episodes.succeeded() is True
    clock.now += EPISODE_LOG_GAP_S
    assert episodes.failed() is True  # a gap after the last logged end: a new episode
