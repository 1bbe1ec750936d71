"""The layer plugins this project ships (loaded from a file by ``arm_side.dnn.plugin``, like a
plugin library named by HB_DNN_PLUGIN_PATH; this package only makes them installable)."""
