"""The test suite (``./test.sh``, which runs all of it; ``./test.sh tests/board`` runs one folder).

A folder per package, by what a test module tests, and the live tests apart:

- ``proto/``: ``protocol`` (wire, errors, schemas, task options, the contract, liveness);
- ``board/``: ``vdsp_board``'s rooms (DDR, identity, processes, sockets, logs and trace, settings),
  and the old import paths' shims;
- ``sdk/``: ``arm_side``, the SDK and its C face, without a SoC;
- ``dsp/``: ``dsp_side``: cores' and firmwares' engines, images, signing, operators, kernels;
- ``relay/``: ``relay_server``: its engine, scheduler, loop and metrics;
- ``soc/``: ``vdsp_sim.soc``, the SoC's runtime, without its processes;
- ``tools/``: the rest of ``vdsp_sim``: the CLI, benchmarks, samples, fuzzer, the compiled build;
- ``project/``: the repository as a whole: docs, lint, layers, packaging, deployment, the suite;
- ``integration/``: the live tests (``pytestmark = pytest.mark.live``): each module starts real SoC
  processes.

A few modules of the other folders have a live test or two beside their unit tests (marked
``live`` one by one). What the modules share stays here: ``conftest.py`` (fixtures, the parallel
run's order and lock), ``live.py`` and ``supervised.py`` (SoCs for tests), ``peers.py``,
``privilege.py``, ``capi_library.py`` (the C client library, built once per run), the C sources
of checks and the firmware sources of test images.
"""
