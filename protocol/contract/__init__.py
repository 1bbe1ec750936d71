"""The operator contract: what the ARM SDK and the firmware must agree on, in one neutral place.

- :mod:`operator`: :class:`~protocol.contract.operator.OperatorEntry`, one operator declared
  once, as data (id, name, J5 name, buffers, typed parameters with defaults, ranges, docs);
- :mod:`framework_ops`, :mod:`cv_ops`, :mod:`nn_ops`, :mod:`pointcloud_ops`: the stock entries,
  to which the firmware binds its kernels and from which the ARM API, the typed stubs
  (``arm_side.stubgen``) and the docs' tables derive;
- :mod:`cv_ids`, :mod:`nn_ids`, :mod:`pointcloud_ids`: command ids of the operator catalogs
  (the framework operators are in :mod:`protocol.opids`);
- :mod:`image_formats`: CV image descriptors (formats, strides, ROIs) and their plane views;
- :mod:`tensor_types`: NN tensor data types, layouts, quantisation kinds and the C2 table.

Both sides import these; neither imports the other (the SDK never loads firmware code).
Pure: numpy at most, no I/O.
"""
