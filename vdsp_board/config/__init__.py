"""Configuration: what a process of the product is told, and what it says of itself.

- ``settings``: every ``VDSP_*`` variable, declared once and read only here (its table is
  docs/commands.md's: ``python -m vdsp_board.config.settings``);
- ``clihelp``: what every command line shares (``--version``, help with defaults, a quiet exit
  when the reader of its output goes away);
- ``version``: the version, from the installed distribution's metadata;
- ``jit``: numba's ``njit`` where numba is installed and not turned off, else a no-op.

The bottom room of the board: it imports only ``protocol``.
"""
