"""Identity: who is at the other end of a connection, and what it may claim.

- ``peercred``, ``sockdiag``, ``peerproof``: the kernel's facts about a local peer (its
  credentials, the other end of a unix socket, the proofs that pin its process);
- ``admission``: what peers that have not authenticated can make a server hold (bounded), and
  each ipc connection's peer, recorded at accept;
- ``ownership``: the judge of HELLO claims and TASK handles (whose memory a client may use);
- ``bindings``: which owner each of a firmware's connections is bound to, once judged;
- ``hellogate``: HELLO claims judged off the server's loop, in order per connection;
- ``curve``: CURVE keys for tcp endpoints (``vdsp keys``).

The top room of the board: imports ``protocol``, configuration, processes, observability and memory.
"""
