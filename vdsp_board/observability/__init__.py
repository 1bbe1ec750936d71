"""Observability: what the SoC's processes say about what they do.

- ``log``: the log lines in the DSP's format (and the DNN runtime's);
- ``trace``: the SoC trace's switch and recorders, one per process;
- ``tracefmt``: the merge of the processes' traces into the Trace Event Format.

Imports ``protocol``, the configuration room and the processes room (the trace's files live in
the runtime directory).
"""
