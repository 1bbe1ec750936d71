"""Processes: starting them, knowing them, and where a SoC keeps its state.

- ``starter``: the one process starter (a fork server) every process of a SoC is started by;
- ``proc``: what every process of the SoC does to itself (its title in ps, its umask, dying with
  its parent, a fast exit);
- ``procfacts``: what the kernel says of a process, for liveness decisions;
- ``pidfile``: who runs the relay and the supervisor, and the supervisor's state file;
- ``rundir``: the runtime directory, its short sockets directory and the endpoints;
- ``fdwait``: waiting on file descriptors with poll(2);
- ``filepages``: letting go of library pages a process mapped and does not run.

Imports ``protocol`` and the configuration room.
"""
