"""The operator contract: what the ARM SDK and the firmware must agree on, in one neutral place.

- :mod:`cv_ids`, :mod:`nn_ids`, :mod:`pointcloud_ids`: command ids of the operator catalogs
  (the framework operators are in :mod:`protocol.opids`);
- :mod:`image_formats`: CV image descriptors (formats, strides, ROIs) and their plane views;
- :mod:`tensor_types`: NN tensor data types, layouts, quantisation kinds and the C2 table.

Both sides import these; neither imports the other (the SDK never loads firmware code).
Pure: numpy at most, no I/O.
"""
