"""vdsp bench identity's HELLO timing (vdsp_sim/benchmarks/bench_identity.py) on bad paths."""
from __future__ import annotations

import threading

import zmq

from vdsp_sim.benchmarks import bench_identity


def test_a_hello_that_goes_unanswered_is_an_error_not_a_hang(short_dir, monkeypatch):
    """Before, the socket of the HELLO that failed stayed open and the context's term() waited
    for it for ever: the benchmark hung instead of saying what failed."""
    url = f"ipc://{short_dir}/silent.sock"
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)      # takes the connection, never answers
    router.bind(url)
    monkeypatch.setattr(zmq.Socket, "poll", lambda self, timeout=None, flags=zmq.POLLIN: 0)  # its 60 s, at once
    raised: list[BaseException] = []

    def hello() -> None:
        try:
            bench_identity.hello_ms(url, 1)
        except BaseException as exc:     # noqa: BLE001 (what the test looks at)
            raised.append(exc)
    thread = threading.Thread(target=hello, daemon=True)
    try:
        thread.start()
        thread.join(30)
        assert not thread.is_alive(), "hello_ms did not return: its context waits for a socket left open"
        assert len(raised) == 1 and "no answer to HELLO" in str(raised[0]), raised
    finally:
        router.close(0)
        if not thread.is_alive():
            ctx.term()
