"""vdsp_board.processes.fdwait: waits on fds above 1023, which select() refuses (FD_SETSIZE)."""
from __future__ import annotations

import os
import resource
import select

import pytest

from vdsp_board.processes import fdwait
from vdsp_board.processes.fdwait import PollSet


@pytest.fixture
def high_pipe():
    """A pipe whose read end is fd 1500 (the soft RLIMIT_NOFILE raised for it if needed)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= 1500:
        if hard <= 1500:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard}: no fd 1500 possible")
        resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    r, w = os.pipe()
    os.dup2(r, 1500)
    os.close(r)
    try:
        yield 1500, w
    finally:
        os.close(1500)
        os.close(w)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_wait_on_an_fd_above_1023_works_where_select_fails(high_pipe):
    r, w = high_pipe
    with pytest.raises(ValueError):
        select.select([r], [], [], 0)
    waits = PollSet()
    assert waits.wait([r], 0.01) == [] and not fdwait.readable(r, 0.01)
    os.write(w, b"x")
    assert [fd for fd, _ in waits.wait([r], 1.0)] == [r] and fdwait.readable(r, 1.0)
    os.read(r, 1)
    assert waits.wait([r], 0) == []


def test_a_poll_set_follows_its_fds():
    (r1, w1), (r2, w2) = os.pipe(), os.pipe()
    try:
        waits = PollSet()
        os.write(w2, b"x")
        assert waits.wait([r1], 0) == []
        assert [fd for fd, _ in waits.wait([r1, r2], 0)] == [r2]        # the set changed: rebuilt
        assert waits.wait([r1], 0) == []
    finally:
        for fd in (r1, w1, r2, w2):
            os.close(fd)
