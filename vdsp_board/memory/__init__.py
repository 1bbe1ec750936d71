"""The shared DDR: memory the ARM and DSP processes map.

- ``ddr``: segments in the DDR directory (/dev/shm), their owners and locks, quota, reaping;
- ``acl``: each owner's access list beside its segments (the grants to other owners, and the
  CURVE key that speaks for it over tcp; the rule itself is ``protocol.acl``).

Imports ``protocol``, the configuration and observability rooms.
"""
