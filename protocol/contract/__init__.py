"""The operator contract: what the ARM SDK and the firmware must agree on, in one neutral place.

- :mod:`operator`: :class:`~protocol.contract.operator.OperatorEntry`, one operator declared
  once, as data (id, name, J5 name, buffers, typed parameters with defaults, ranges, docs);
- :mod:`framework_ops`, :mod:`cv_ops`, :mod:`nn_ops`, :mod:`pointcloud_ops`: the stock entries,
  to which the firmware binds its kernels and from which everything else derives (the ARM
  API, the typed stubs, the C header, the ids modules and the docs' tables: ``python -m
  vdsp_sim.regen``);
- :mod:`cv_form`: a CV entry's ARM-side form (formats, positional orders, numpy shape rule);
- :mod:`cv_ids`, :mod:`nn_ids`, :mod:`pointcloud_ids`: the catalogs' command ids as plain ints,
  derived from the entries (the framework operators' are in :mod:`protocol.opids`);
- :mod:`image_formats`: CV image descriptors (formats, strides, ROIs) and their plane views;
- :mod:`tensor_types`: NN tensor data types, layouts, quantisation kinds and the C2 table.

Both sides import these; neither imports the other (the SDK never loads firmware code).
Pure: numpy at most, no I/O.
"""
