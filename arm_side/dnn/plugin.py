"""Layer plugins from ``HB_DNN_PLUGIN_PATH`` (the board's directory of plugin libraries).

A plugin is a Python file ``NAME.py`` in that directory defining ``LAYER_CREATORS``, a map
of layer type -> creator (a callable returning an ``arm_side.dnn.Layer``). Loading makes the
creators available (``Runtime.plugin_creators()``); an application registers the ones it
wants with ``register_layer_creator``, as the J5 sample registers the DSP plugin's Softmax.

The directory and its files are opened without following symlinks; at most ``MAX_PLUGINS``
files of at most ``MAX_PLUGIN_BYTES`` each; names starting with ``_`` are skipped. A plugin
is code: it runs with the application's rights, as a loaded library does.

``STOCK_DIR`` holds the plugin this project ships: ``hb_dsp_nn_plugin.py`` (a Softmax layer
that runs on vdsp0/vdsp1).
"""
from __future__ import annotations

import os
import stat
import types
from pathlib import Path

from protocol import errors

STOCK_DIR = Path(__file__).resolve().parent / "plugins"
MAX_PLUGINS = 16
MAX_PLUGIN_BYTES = 256 << 10
MAX_CREATORS_PER_PLUGIN = 64


def load(directory: Path) -> dict[str, dict]:
    """{plugin name: {layer type: creator}} of the plugins in ``directory``.

    Raises FileNotFound (no such directory, a symlink), InvalidArgument (too many or too
    large files, a plugin that fails to load or has no proper LAYER_CREATORS).
    """
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        why = "is a symlink" if os.path.islink(directory) else exc.strerror
        raise errors.FileNotFound(f"HB_DNN_PLUGIN_PATH {directory}: {why}") from None
    try:
        names = []
        with os.scandir(dfd) as it:
            for entry in it:
                if entry.name.endswith(".py") and not entry.name.startswith("_"):
                    names.append(entry.name)
                    if len(names) > MAX_PLUGINS:
                        raise errors.InvalidArgument(f"HB_DNN_PLUGIN_PATH {directory}: more than {MAX_PLUGINS} plugins")
        return {name[:-3]: _load_one(dfd, directory, name) for name in sorted(names)}
    finally:
        os.close(dfd)


def _load_one(dfd: int, directory: Path, name: str) -> dict:
    where = f"plugin {directory / name}"
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError as exc:
        raise errors.FileNotFound(f"{where}: {'is a symlink' if exc.errno == 40 else exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.FileNotFound(f"{where} is not a regular file")
        if st.st_size > MAX_PLUGIN_BYTES:
            raise errors.InvalidArgument(f"{where} has {st.st_size} bytes, more than {MAX_PLUGIN_BYTES}")
        source = os.read(fd, MAX_PLUGIN_BYTES + 1)
    finally:
        os.close(fd)
    module = types.ModuleType(f"hb_dnn_plugin_{name[:-3]}")
    module.__file__ = str(directory / name)
    try:
        exec(compile(source, str(directory / name), "exec"), module.__dict__)
    except Exception as exc:
        raise errors.InvalidArgument(f"{where} failed to load: {type(exc).__name__}: {exc}") from exc
    creators = getattr(module, "LAYER_CREATORS", None)
    if not isinstance(creators, dict) or not 1 <= len(creators) <= MAX_CREATORS_PER_PLUGIN or \
            not all(isinstance(k, str) and callable(v) for k, v in creators.items()):
        raise errors.InvalidArgument(f"{where} must define LAYER_CREATORS: a map of 1..{MAX_CREATORS_PER_PLUGIN} "
                                     "layer types to creators")
    return dict(creators)
