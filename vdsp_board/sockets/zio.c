/*
 * vdsp_board.sockets._zio: the frame calls of vdsp_board.sockets.zsock in C, for the compiled build
 * (vdsp_sim/native_build.py compiles it with the mypyc modules; without it zsock calls pyzmq).
 *
 * Why: pyzmq lets go of the GIL around every zmq_msg_send / zmq_msg_recv, even one that cannot
 * wait (ZMQ_DONTWAIT). In a process whose threads take turns on one socket (the SDK: callers
 * send, one reader receives) each such call hands the GIL to the other thread and takes it
 * back: two thread switches per frame. A call that cannot wait returns in about a microsecond,
 * so here it keeps the GIL; a call that may wait (no ZMQ_DONTWAIT) lets go of it as pyzmq does.
 *
 * The socket calls go to the very libzmq that pyzmq loaded (its handle, Socket.underlying,
 * means nothing to another copy): the one object named libzmq* mapped into this process after
 * `import zmq`, taken with dlopen(RTLD_NOLOAD). Errors are pyzmq's exceptions, as its calls
 * raise them: zmq.Again (EAGAIN), zmq.ContextTerminated (ETERM), zmq.ZMQError(errno) otherwise,
 * ZMQError(ENOTSOCK) for a closed socket; a frame that is not a buffer raises TypeError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <string.h>

/* libzmq's ABI (zmq.h, stable across 4.x): a message is 64 bytes, pointer-aligned */
typedef struct {
  _Alignas(void *) unsigned char bytes[64];
} zmsg;
#define ZMQ_DONTWAIT 1
#define ZMQ_SNDMORE 2
#define ZMQ_EVENTS 15
#define ZMQ_POLLIN 1
#ifndef ETERM
#define ETERM (156384712 + 53) /* ZMQ_HAUSNUMERO + 53 */
#endif

static int (*z_send)(void *, const void *, size_t, int);
static int (*z_msg_init)(zmsg *);
static int (*z_msg_recv)(zmsg *, void *, int);
static void *(*z_msg_data)(zmsg *);
static size_t (*z_msg_size)(const zmsg *);
static int (*z_msg_more)(const zmsg *);
static int (*z_msg_close)(zmsg *);
static int (*z_getsockopt)(void *, int, void *, size_t *);
static int (*z_errno)(void);
static int (*z_msg_get)(const zmsg *, int);
static const char *(*z_msg_gets)(const zmsg *, const char *);

/* An int argument (flags); -1 with an exception set when it is not one. */
static int int_arg(PyObject *value) {
  long v = PyLong_AsLong(value);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < INT_MIN || v > INT_MAX) {
    PyErr_SetString(PyExc_OverflowError, "flags out of range");
    return -1;
  }
  return (int)v;
}

static PyObject *zmq_error, *zmq_again, *zmq_terminated; /* pyzmq's exception classes */
static PyObject *str_closed, *str_underlying;

/* Raise what pyzmq raises for errno ``e``. */
static void *raise_errno(int e) {
  PyObject *cls = e == EAGAIN ? zmq_again : e == ETERM ? zmq_terminated : zmq_error;
  PyObject *exc = PyObject_CallFunction(cls, "i", e);
  if (exc != NULL) {
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
  }
  return NULL;
}

/* The libzmq socket behind a pyzmq socket; NULL with ZMQError(ENOTSOCK) once it is closed. */
static void *handle_of(PyObject *sock) {
  PyObject *closed = PyObject_GetAttr(sock, str_closed);
  if (closed == NULL) return NULL;
  int is_closed = PyObject_IsTrue(closed);
  Py_DECREF(closed);
  if (is_closed < 0) return NULL;
  if (is_closed) return raise_errno(ENOTSOCK);
  PyObject *underlying = PyObject_GetAttr(sock, str_underlying);
  if (underlying == NULL) return NULL;
  void *handle = PyLong_AsVoidPtr(underlying);
  Py_DECREF(underlying);
  if (handle == NULL && !PyErr_Occurred()) return raise_errno(ENOTSOCK);
  return handle;
}

/* The frames to send, as a fast sequence (a list or tuple; not an iterator: pyzmq's path takes len()). */
static PyObject *frames_of(PyObject *frames) {
  if (!PySequence_Check(frames)) {
    PyErr_Format(PyExc_TypeError, "frames must be a sequence, not %.100s", Py_TYPE(frames)->tp_name);
    return NULL;
  }
  return PySequence_Fast(frames, "frames must be a sequence");
}

/* One frame. Returns 0, or -1 with an exception set. */
static int send_one(void *handle, PyObject *frame, int flags) {
  Py_buffer view;
  if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0) return -1;
  int rc, e;
  for (;;) {
    if (flags & ZMQ_DONTWAIT) {
      rc = z_send(handle, view.buf, (size_t)view.len, flags);
    } else {
      Py_BEGIN_ALLOW_THREADS
      rc = z_send(handle, view.buf, (size_t)view.len, flags);
      Py_END_ALLOW_THREADS
    }
    if (rc >= 0) break;
    e = z_errno();
    if (e != EINTR) {
      PyBuffer_Release(&view);
      raise_errno(e);
      return -1;
    }
    if (PyErr_CheckSignals() < 0) {
      PyBuffer_Release(&view);
      return -1;
    }
  }
  PyBuffer_Release(&view);
  return 0;
}

/* A multipart message: ``identity`` (a ROUTER's peer; NULL: none) then ``frames``, with ``flags``
 * (an int object; NULL: 0). Refuses an empty ``frames`` before anything is sent. */
static PyObject *send_message(PyObject *sock, PyObject *identity, PyObject *frames, PyObject *flags_obj) {
  int flags = flags_obj != NULL ? int_arg(flags_obj) : 0;
  if (flags == -1 && PyErr_Occurred()) return NULL;
  void *handle = handle_of(sock);
  if (handle == NULL) return NULL;
  PyObject *seq = frames_of(frames);
  if (seq == NULL) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n == 0) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_IndexError, "no frame to send");
    return NULL;
  }
  PyObject **items = PySequence_Fast_ITEMS(seq);
  int failed = identity != NULL && send_one(handle, identity, flags | ZMQ_SNDMORE) < 0;
  for (Py_ssize_t i = 0; !failed && i < n; i++)
    failed = send_one(handle, items[i], i < n - 1 ? flags | ZMQ_SNDMORE : flags) < 0;
  Py_DECREF(seq);
  if (failed) return NULL;
  Py_RETURN_NONE;
}

static PyObject *send_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs < 2 || nargs > 3) {
    PyErr_SetString(PyExc_TypeError, "send_frames(sock, frames, flags=0)");
    return NULL;
  }
  return send_message(args[0], NULL, args[1], nargs > 2 ? args[2] : NULL);
}

static PyObject *send_routed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs < 3 || nargs > 4) {
    PyErr_SetString(PyExc_TypeError, "send_routed(sock, identity, frames, flags=0)");
    return NULL;
  }
  return send_message(args[0], args[1], args[2], nargs > 3 ? args[3] : NULL);
}

/* One frame into a new bytes object; *more: another frame follows. NULL with an exception set. */
static PyObject *recv_one(void *handle, int flags, int *more) {
  zmsg msg;
  z_msg_init(&msg);
  for (;;) {
    int rc;
    if (flags & ZMQ_DONTWAIT) {
      rc = z_msg_recv(&msg, handle, flags);
    } else {
      Py_BEGIN_ALLOW_THREADS
      rc = z_msg_recv(&msg, handle, flags);
      Py_END_ALLOW_THREADS
    }
    if (rc >= 0) break;
    int e = z_errno();
    if (e != EINTR) {
      z_msg_close(&msg);
      return raise_errno(e);
    }
    if (PyErr_CheckSignals() < 0) {
      z_msg_close(&msg);
      return NULL;
    }
  }
  PyObject *frame = PyBytes_FromStringAndSize((const char *)z_msg_data(&msg), (Py_ssize_t)z_msg_size(&msg));
  *more = z_msg_more(&msg);
  z_msg_close(&msg);
  return frame;
}

/* The frames of a message after its first (``more``: the first said more follow), appended to
 * ``out``: 0, or -1 with an exception set. */
static int recv_rest(void *handle, int flags, int more, PyObject *out) {
  while (more) {
    PyObject *frame = recv_one(handle, flags, &more);
    if (frame == NULL || PyList_Append(out, frame) < 0) {
      Py_XDECREF(frame);
      return -1;
    }
    Py_DECREF(frame);
  }
  return 0;
}

/* A message's first frame into ``msg`` (initialised), not waiting: 1; 0 when none waits (EAGAIN);
 * -1 with an exception set. */
static int recv_first(void *handle, zmsg *msg) {
  for (;;) {
    if (z_msg_recv(msg, handle, ZMQ_DONTWAIT) >= 0) return 1;
    int e = z_errno();
    if (e == EINTR) {
      if (PyErr_CheckSignals() < 0) return -1;
      continue;
    }
    if (e == EAGAIN) return 0;
    raise_errno(e);
    return -1;
  }
}

static PyObject *recv_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs < 1 || nargs > 2) {
    PyErr_SetString(PyExc_TypeError, "recv_frames(sock, flags=0)");
    return NULL;
  }
  int flags = nargs > 1 ? int_arg(args[1]) : 0;
  if (flags == -1 && PyErr_Occurred()) return NULL;
  void *handle = handle_of(args[0]);
  if (handle == NULL) return NULL;
  PyObject *out = PyList_New(0);
  if (out != NULL && recv_rest(handle, flags, 1, out) < 0) Py_CLEAR(out);
  return out;
}

/* The next message of ``handle``, not waiting: a new list of bytes frames; Py_None (a new
 * reference) when none waits; NULL with an exception set. The rest of a message arrives with its
 * first frame (ZeroMQ queues a message whole). */
static PyObject *next_message(void *handle) {
  zmsg msg;
  z_msg_init(&msg);
  int got = recv_first(handle, &msg);
  if (got <= 0) {
    z_msg_close(&msg);
    return got < 0 ? NULL : Py_NewRef(Py_None);
  }
  PyObject *first = PyBytes_FromStringAndSize((const char *)z_msg_data(&msg), (Py_ssize_t)z_msg_size(&msg));
  int more = z_msg_more(&msg);
  z_msg_close(&msg);
  PyObject *out = first == NULL ? NULL : PyList_New(1);
  if (out == NULL) {
    Py_XDECREF(first);
    return NULL;
  }
  PyList_SET_ITEM(out, 0, first);
  if (recv_rest(handle, ZMQ_DONTWAIT, more, out) < 0) Py_CLEAR(out);
  return out;
}

/* The next message, not waiting: a list of bytes frames, or None when none waits (no exception:
 * the failed receive has libzmq look at its commands, as an EVENTS read does, so the socket's
 * edge-triggered FD signals the next message). */
static PyObject *recv_next(PyObject *self, PyObject *sock) {
  (void)self;
  void *handle = handle_of(sock);
  return handle == NULL ? NULL : next_message(handle);
}

/* Every message waiting now, each a list of bytes frames: the next message until none waits. The
 * last, failed receive has libzmq look at its commands as an EVENTS read does, so the socket's
 * edge-triggered FD signals the next message. Errors raise what pyzmq raises (the messages read
 * so far are lost with the socket's error, as with pyzmq). */
static PyObject *drain(PyObject *self, PyObject *sock) {
  (void)self;
  void *handle = handle_of(sock);
  if (handle == NULL) return NULL;
  PyObject *out = PyList_New(0);
  while (out != NULL) {
    PyObject *message = next_message(handle);
    if (message == Py_None) {
      Py_DECREF(message);
      break;
    }
    if (message == NULL || PyList_Append(out, message) < 0) Py_CLEAR(out);
    Py_XDECREF(message);
  }
  return out;
}

/* A routed message's first frame, kept for its properties: what pyzmq's Frame.get answers of a
 * frame received with copy=False (zmq_msg_get for an int, zmq_msg_gets for a str), and nothing
 * else. The peer's credentials are read from it (Peer-Address, ZMQ_SRCFD: on the thread that
 * received it, while its connection is open; User-Id over CURVE). */
typedef struct {
  PyObject_HEAD
  zmsg msg;
} Meta;

static void meta_dealloc(PyObject *self) {
  z_msg_close(&((Meta *)self)->msg);
  Py_TYPE(self)->tp_free(self);
}

static PyObject *meta_get(PyObject *self, PyObject *option) {
  zmsg *msg = &((Meta *)self)->msg;
  if (PyLong_Check(option)) {
    int name = int_arg(option);
    if (name == -1 && PyErr_Occurred()) return NULL;
    int value = z_msg_get(msg, name);
    if (value == -1) { /* as pyzmq's check: -1 is an error when libzmq's errno says one */
      int e = z_errno();
      if (e != 0) return raise_errno(e);
    }
    return PyLong_FromLong(value);
  }
  const char *name = PyUnicode_Check(option) ? PyUnicode_AsUTF8(option)
                     : PyBytes_Check(option)   ? PyBytes_AS_STRING(option)
                                               : NULL;
  if (name == NULL) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "expected str, got: %R", option);
    return NULL;
  }
  const char *value = z_msg_gets(msg, name);
  if (value == NULL) return raise_errno(z_errno());
  return PyUnicode_DecodeUTF8(value, (Py_ssize_t)strlen(value), NULL);
}

static PyMethodDef meta_methods[] = {
    {"get", meta_get, METH_O, "get(option): a property of the message (an int option or a str name), as Frame.get"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject MetaType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "vdsp_board.sockets._zio.Meta",
    .tp_basicsize = sizeof(Meta),
    .tp_dealloc = meta_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a received message's properties (its first frame, kept)",
    .tp_methods = meta_methods,
};

/* A ROUTER's next message, not waiting: (identity, frames, meta), its first frame as bytes, the
 * rest as a list of bytes, and the first kept as a Meta; None when none waits (no exception: the
 * failed receive has libzmq look at its commands, as an EVENTS read does, so the socket's
 * edge-triggered FD signals the next message). A lone frame gives an empty list. */
static PyObject *recv_routed(PyObject *self, PyObject *sock) {
  (void)self;
  void *handle = handle_of(sock);
  if (handle == NULL) return NULL;
  Meta *meta = PyObject_New(Meta, &MetaType);
  if (meta == NULL) return NULL;
  z_msg_init(&meta->msg);
  int got = recv_first(handle, &meta->msg);
  if (got <= 0) {
    Py_DECREF(meta); /* closes its message */
    if (got < 0) return NULL;
    Py_RETURN_NONE;
  }
  PyObject *identity = PyBytes_FromStringAndSize((const char *)z_msg_data(&meta->msg),
                                                 (Py_ssize_t)z_msg_size(&meta->msg));
  PyObject *frames = identity == NULL ? NULL : PyList_New(0);
  if (frames != NULL && recv_rest(handle, ZMQ_DONTWAIT, z_msg_more(&meta->msg), frames) < 0) Py_CLEAR(frames);
  PyObject *out = frames == NULL ? NULL : PyTuple_New(3);
  if (out == NULL) {
    Py_XDECREF(identity);
    Py_XDECREF(frames);
    Py_DECREF(meta);
    return NULL;
  }
  PyTuple_SET_ITEM(out, 0, identity);
  PyTuple_SET_ITEM(out, 1, frames);
  PyTuple_SET_ITEM(out, 2, (PyObject *)meta);
  return out;
}

static PyObject *readable(PyObject *self, PyObject *sock) {
  (void)self;
  void *handle = handle_of(sock);
  if (handle == NULL) return NULL;
  int events = 0;
  size_t size = sizeof events;
  if (z_getsockopt(handle, ZMQ_EVENTS, &events, &size) < 0) return raise_errno(z_errno());
  return PyBool_FromLong(events & ZMQ_POLLIN);
}

/* dl_iterate_phdr: the loaded objects whose file name starts with libzmq */
struct found {
  int count;
  char name[4096];
};

static int find_libzmq(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct found *found = data;
  const char *name = info->dlpi_name;
  const char *base = name ? strrchr(name, '/') : NULL;
  base = base ? base + 1 : name;
  if (base != NULL && strncmp(base, "libzmq", 6) == 0 && strcmp(found->name, name) != 0) {
    found->count++;
    snprintf(found->name, sizeof found->name, "%s", name);
  }
  return 0;
}

static int bind_libzmq(void) {
  struct found found = {0, ""};
  dl_iterate_phdr(find_libzmq, &found);
  if (found.count != 1) {
    PyErr_Format(PyExc_ImportError, "vdsp_board.sockets._zio: %d libzmq libraries loaded (pyzmq's must be the one)",
                 found.count);
    return -1;
  }
  void *lib = dlopen(found.name, RTLD_NOW | RTLD_NOLOAD);
  if (lib == NULL) {
    PyErr_Format(PyExc_ImportError, "vdsp_board.sockets._zio: %s: %s", found.name, dlerror());
    return -1;
  }
#define BIND(var, symbol)                                                                \
  if ((*(void **)&(var) = dlsym(lib, symbol)) == NULL) {                                  \
    PyErr_Format(PyExc_ImportError, "vdsp_board.sockets._zio: no %s in %s", symbol, found.name); \
    return -1;                                                                           \
  }
  BIND(z_send, "zmq_send")
  BIND(z_msg_init, "zmq_msg_init")
  BIND(z_msg_recv, "zmq_msg_recv")
  BIND(z_msg_data, "zmq_msg_data")
  BIND(z_msg_size, "zmq_msg_size")
  BIND(z_msg_more, "zmq_msg_more")
  BIND(z_msg_close, "zmq_msg_close")
  BIND(z_getsockopt, "zmq_getsockopt")
  BIND(z_errno, "zmq_errno")
  BIND(z_msg_get, "zmq_msg_get")
  BIND(z_msg_gets, "zmq_msg_gets")
#undef BIND
  return 0; /* lib stays open: pyzmq holds it for the life of the process anyway */
}

static PyMethodDef methods[] = {
    {"send_frames", (PyCFunction)(void (*)(void))send_frames, METH_FASTCALL,
     "send_frames(sock, frames, flags=0): send a multipart message"},
    {"send_routed", (PyCFunction)(void (*)(void))send_routed, METH_FASTCALL,
     "send_routed(sock, identity, frames, flags=0): send_frames(sock, [identity, *frames], flags)"},
    {"recv_frames", (PyCFunction)(void (*)(void))recv_frames, METH_FASTCALL,
     "recv_frames(sock, flags=0): a multipart message, as a list of bytes"},
    {"readable", readable, METH_O, "readable(sock): a message waits (ZMQ_EVENTS has ZMQ_POLLIN)"},
    {"drain", drain, METH_O, "drain(sock): every message waiting now, each a list of bytes (non-blocking)"},
    {"recv_next", recv_next, METH_O, "recv_next(sock): the next message as a list of bytes, None when none waits"},
    {"recv_routed", recv_routed, METH_O,
     "recv_routed(sock): (identity, frames, meta) of the next message, None when none waits (non-blocking)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "vdsp_board.sockets._zio",
                                    "libzmq frame calls that keep the GIL when they cannot wait", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__zio(void) {
  PyObject *zmq = PyImport_ImportModule("zmq"); /* loads pyzmq's backend, and its libzmq */
  if (zmq == NULL) return NULL;
  zmq_error = PyObject_GetAttrString(zmq, "ZMQError");
  zmq_again = PyObject_GetAttrString(zmq, "Again");
  zmq_terminated = PyObject_GetAttrString(zmq, "ContextTerminated");
  Py_DECREF(zmq);
  if (zmq_error == NULL || zmq_again == NULL || zmq_terminated == NULL) return NULL;
  str_closed = PyUnicode_InternFromString("closed");
  str_underlying = PyUnicode_InternFromString("underlying");
  if (str_closed == NULL || str_underlying == NULL || bind_libzmq() < 0 || PyType_Ready(&MetaType) < 0) return NULL;
  PyObject *mod = PyModule_Create(&module);
  if (mod != NULL && PyModule_AddObjectRef(mod, "Meta", (PyObject *)&MetaType) < 0) Py_CLEAR(mod);
  return mod;
}
