"""The simulated board under everything else, in six rooms (subpackages), each for one concern:

- ``config``: settings (every ``VDSP_*`` variable), what command lines share, the version;
- ``processes``: the process starter, pid files, the runtime directory, kernel facts of processes;
- ``observability``: logs in the DSP format and the SoC trace;
- ``memory``: the shared DDR (segments, owners, quota) and the owners' access lists;
- ``identity``: proofs of a local peer, admission, ownership of memory, CURVE keys;
- ``sockets``: the ZeroMQ frame calls and client links.

Imports only ``protocol`` (and third-party libraries); each room imports the rooms below it
(tests/project/test_layers.py has a row per room). A module's path directly under ``vdsp_board`` (before
the rooms) still imports, as the same module, with a DeprecationWarning until the next release
(``_moved``).
"""
