"""The SoC's runtime: bringing a SoC's processes up, watching them, and taking them down.

- ``supervisor``: ``vdsp up``'s service manager (relay and cores as processes, restarts, state);
- ``entries``: what the SoC's process starter may start (a core, the relay, the preparation job);
- ``prepare``: the preparation job (CURVE keys, the stock firmware images: ``stock``);
- ``readiness``: whether a SoC being started serves yet, and how long its start may still take;
- ``private_soc``: the one way tests, benchmarks and samples start a SoC of their own;
- ``loopback``: a whole SoC in one process (the engines wired to each other), for unit tests.

Beside it in ``vdsp_sim``: the ``vdsp`` CLI (``cli``, ``commands/``), the benchmarks, the samples,
the load test and the fuzzer, which use this room; it imports nothing of them.
"""
