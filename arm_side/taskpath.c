/*
 * arm_side._taskpath: the blocking client's per-task path in C, for the compiled build
 * (vdsp_sim/native_build.py compiles it; without it the same steps run as the Python of
 * arm_side.reading, which stays the reference and the pure build's path).
 *
 * Why: a sequential task's client runs this path once per task, on caches the relay's and the
 * firmwares' work evicted while it slept; as bytecode it was about a tenth of the task's client
 * CPU. Here it costs the calls it makes: the sleep (epoll_wait, the GIL let go), the link's
 * drain, the protocol's compiled functions (header parse, body unpack), and the done-callbacks.
 * A RESULT's Task is completed here as Request._complete and Task._on_complete do it (a Task with
 * outputs, a trace being recorded, a subclass or another request: by its own _complete);
 * tests/tools/test_native.py holds both to the same outcome for honest and lying bodies.
 *
 * lead(reading, req, deadline, lane, deferred, closed): Reading._lead's loop. Read until
 * `req._done`, `closed()`, or `deadline` (a time.monotonic() value; None: none) passes. `lane` is
 * what Reading._lane made for the links read (a tuple, below): a round woken by their fds while
 * the links are still those is read here (a RESULT that completes a request in flight as
 * Session.receive does it; any other message through Session.receive), any other round is
 * `reading._round(woken)`. `deferred`: this thread's wake-ups to do before it sleeps
 * (arm_side.task.defer_wakes). A round's Exception is logged through `reading._reader_error(exc)`
 * and the loop goes on, as the Python loop's `except Exception`; what the sleep raises (a signal
 * handler's exception) propagates.
 *
 * The protocol's frames of a task are made and read here by the C client's codec of PROTOCOL.md §3
 * (arm_side/capi/native/vdsp_wire.c): a TASK's header and body (header.pack, wire.pack_body), a
 * RESULT's header and body (Header.parse, wire.unpack_body); any case it does not take is the
 * Python function's (tests/sdk/test_capi_wire.py holds both to the same bytes and objects on the
 * decoder's corpus). As Python calls, they were 2.7-3.7 µs of the 29-30 µs a pipelined task cost
 * the client (vdsp_sim/benchmarks/README.md, "The protocol's frames in C").
 *
 * submit(lane, op, inputs, outputs, params, options, out_mems): Links.submit for the blocking
 * client (Client.submit calls it), in one call: the TASK's frames made (Session.task_frames), its
 * link chosen (direct mode: Session.task_link, here for a task to any core: direct_link), its
 * trace switch read as Recorder.poll reads it between two looks (rec_on), its Task made as
 * Task.__init__ makes it (and Request.__init__), tracked and sent on the link's socket as Links._send_tracked and
 * Channel.send do; `lane` is what Client._submit_lane made (a tuple, below). What is not that
 * usual case goes to the Python it mirrors: an op that is not an int in range (Links.submit,
 * whole: it raises), a link not open with its peer alive (Links._send_later), a link that is not a
 * Channel (Links._send_tracked), a send that raised (Links._send_failed, with what Channel.send
 * would have raised). A first version that still called Task() and Channel.send saved 1.3 µs of a
 * sequential task and nothing in a window of 32; this one, which calls neither, measured in
 * vdsp_sim/benchmarks/README.md ("The submit in C").
 *
 * rpc(lane, cmd, ...): Soc.rpc's usual call, `soc.rpc(op)` or `soc.rpc(op, core=...)` (no buffer,
 * no params, no options object, at most one option as a keyword), in one call: the options from
 * task_options' memo under the key task_options makes, then Client.submit's steps (closed: its
 * Python raises; the compiled submit, as `client._submit_c` is now). Anything else, and options
 * not remembered yet (task_options remembers them on the first such call), is Soc.rpc's Python
 * (`lane`'s first item), whole. Soc._compiled_rpc binds it to a Soc; measured in
 * vdsp_sim/benchmarks/README.md ("Soc.rpc in C").
 *
 * wait_for(lane, req, timeout_s): Client.wait_for's usual wait, in one call: the request not
 * done, this thread not the one that reads, the links' lane current and the turn free. It leads
 * as Reading.wait and Reading._lead do (the reader set, the wake-ups deferred, the links out of the
 * background thread's set, then lead's loop) and leaves as Reading._leave and undefer_wakes do; a
 * lead that ended undone (the deadline, a close) goes on in Reading.wait with the same deadline,
 * which raises as it raises. Any other wait is Client.wait_for's Python (`lane`'s first item),
 * whole. Client._compiled_wait_for binds it to a client; measured in
 * vdsp_sim/benchmarks/README.md ("The wait in C").
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "capi/native/vdsp_wire.h"

#if PY_VERSION_HEX < 0x030C0000 /* the member types' names before 3.12 */
#include <structmember.h>
#define Py_T_OBJECT_EX T_OBJECT_EX
#define Py_READONLY READONLY
#endif

/* the lane tuple's items, in Reading._lane's order */
enum {
  L_LEADING_FD, /* int: the epoll set a waiting thread sleeps on (the links and its kick) */
  L_KICK_FD,    /* int: its kick eventfd */
  L_LINKS_FD,   /* int: the epoll set of the links' fds (in the one above) */
  L_FDS,        /* dict: fd -> link (.drain() -> [frames, ...], .peer), the links read */
  L_PENDING,    /* the session's requests in flight: msg_id -> request */
  L_OWNED,      /* the session's owner (an RLock): acquire() / release() */
  L_RECEIVE,    /* session.receive(peer, frames, now) -> actions */
  L_CARRY_OUT,  /* links.carry_out(actions) */
  L_PARSE,      /* protocol.header.Header.parse(frame) -> Header */
  L_UNPACK,     /* protocol.wire.unpack_body(bytes) -> dict */
  L_RESULT,     /* Command.RESULT */
  L_VERSION,    /* reading._version when the lane was made */
  L_LINKS,      /* the Links: .version, .tick(now) */
  L_PEERSTATE,  /* the PeerState class: .generation */
  L_TICK_S,     /* float: seconds between two ticks of the clock */
  L_PEERS,      /* direct mode: session.peers (each with .inflight, a set of msg_ids); relay mode: None */
  L_LIVE,       /* list: the links read (reading._live), in their order */
  L_TASK,       /* arm_side.task.Task: completed here (complete_task), a subclass by its own _complete */
  L_TRACER,     /* the client's tracer: .rec.on (a trace being recorded: the task's _complete records it) */
  L_BOARD_MODELS, /* arm_side.task.BOARD_MODELS */
  L_HEADER,     /* protocol.header.Header: a RESULT's header made here (header_from) */
  L_CHANNEL,    /* arm_side.channel.Channel: a link of exactly this class is drained here (channel_drain)... */
  L_CHANNEL_DRAIN, /* ...while its drain is still this function (Channel.drain: a test's spy replaces it) */
  L_DRAIN,      /* vdsp_board.sockets.zsock.drain(sock), the compiled build's own (zsock.fastest) */
  L_SIZE
};

static PyObject *s_done, *s_next_tick, *s_wake, *s_drain, *s_last_heard, *s_acquire, *s_release, *s_complete,
    *s_round, *s_reader_error, *s_version, *s_generation, *s_tick, *s_peer, *s_liveness, *s_inflight;

static double monotonic(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* time.monotonic()'s clock */
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* obj.attr as a double; -1 with an exception set (check PyErr_Occurred) */
static double float_attr(PyObject *obj, PyObject *name) {
  PyObject *v = PyObject_GetAttr(obj, name);
  if (v == NULL) return -1.0;
  double d = PyFloat_AsDouble(v);
  Py_DECREF(v);
  return d;
}

/* 1 if obj.attr is true, 0 if not, -1 with an exception */
static int true_attr(PyObject *obj, PyObject *name) {
  PyObject *v = PyObject_GetAttr(obj, name);
  if (v == NULL) return -1;
  int t = PyObject_IsTrue(v);
  Py_DECREF(v);
  return t;
}

/* Are the links what they were when the lane was made: (links.version, PeerState.generation)? */
static int lane_current(PyObject *lane) {
  PyObject *version = PyObject_GetAttr(PyTuple_GET_ITEM(lane, L_LINKS), s_version);
  if (version == NULL) return -1;
  PyObject *generation = PyObject_GetAttr(PyTuple_GET_ITEM(lane, L_PEERSTATE), s_generation);
  if (generation == NULL) {
    Py_DECREF(version);
    return -1;
  }
  PyObject *now = PyTuple_Pack(2, version, generation);
  Py_DECREF(version);
  Py_DECREF(generation);
  if (now == NULL) return -1;
  int same = PyObject_RichCompareBool(now, PyTuple_GET_ITEM(lane, L_VERSION), Py_EQ);
  Py_DECREF(now);
  return same;
}

/* Direct mode: msg_id is no longer in flight on its core (Session.receive: the peer it came from
 * counted it, else whichever did). 0, or -1 with an exception. */
static int not_inflight(PyObject *lane, PyObject *peer, PyObject *msg_id) {
  PyObject *peers = PyTuple_GET_ITEM(lane, L_PEERS);
  if (peers == Py_None) return 0;
  int found = 0;
  if (peer != Py_None) {
    PyObject *inflight = PyObject_GetAttr(peer, s_inflight);
    if (inflight == NULL) return -1;
    found = PySet_Check(inflight) ? PySet_Discard(inflight, msg_id) : -2;
    Py_DECREF(inflight);
    if (found == -2) {
      PyErr_SetString(PyExc_TypeError, "a peer's inflight must be a set");
      return -1;
    }
    if (found < 0) return -1;
  }
  if (found) return 0;
  PyObject *seq = PySequence_Fast(peers, "session.peers");
  if (seq == NULL) return -1;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
    PyObject *inflight = PyObject_GetAttr(PySequence_Fast_GET_ITEM(seq, i), s_inflight);
    int rc = inflight == NULL ? -1 : PySet_Check(inflight) ? PySet_Discard(inflight, msg_id) : 0;
    Py_XDECREF(inflight);
    if (rc < 0) {
      Py_DECREF(seq);
      return -1;
    }
  }
  Py_DECREF(seq);
  return 0;
}

/* lock.release(), whatever happened before: an exception raised before it is kept (as `with`
 * keeps it), one the release raises is set only when none was. Returns rc, or -1 when the
 * release failed and nothing had. */
static int released(PyObject *lock, int rc) {
  PyObject *exc_type, *exc_value, *exc_tb;
  PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  PyObject *out = PyObject_CallMethodNoArgs(lock, s_release);
  if (out == NULL) {
    if (exc_type != NULL) {
      PyErr_Clear();
    } else {
      rc = -1;
    }
  }
  Py_XDECREF(out);
  if (exc_type != NULL) PyErr_Restore(exc_type, exc_value, exc_tb);
  return rc;
}

/* Request._complete(body, None, hdr, raw) with Task._on_complete, in C, for a Task (exactly: a
 * subclass's hooks are its own) whose completion needs nothing more: no outputs to mark written by
 * the device (client.after_task), no trace being recorded (tracer.rec.on). 1: completed (its
 * done-callbacks then run through req._run_callback, as _complete runs them); 0: it had ended
 * already; 2: not such a task (the caller calls req._complete); -1 with an exception (what
 * _on_complete would raise: the task is left as the Python would leave it, not done). */
static PyObject *s_cb_lock, *s_body, *s_error, *s_header, *s_raw, *s_completed_at, *s_callbacks, *s_values, *s_core,
    *s_exec_us, *s_board_us, *s_board_model, *s_queue_us, *s_outputs, *s_rec, *s_on, *s_run_callback, *k_values,
    *k_core, *k_exec_us, *k_board_us, *k_board_model, *zero, *inf;
static PyObject *s_client, *s_msg_id, *s_op, *s_options, *s_released, *s_submitted_at;

/* --- a Task's slots ----------------------------------------------------------------------------
 * Request and Task declare __slots__ (arm_side/task.py): for the exact class a lane names, each
 * field's member descriptor gives its offset in the instance, read once per version of the class
 * (its tp_version_tag, which any change to the class or a base resets), and the task's path reads
 * and writes its fields there instead of by name (about 40 ns each on the 2-CPU VM, a field a
 * lookup in the class and a store in the instance's dict before). Where a field is not such a
 * slot (a subclass that made it a property, a class with its own __setattr__ or __getattribute__),
 * the path uses the attribute by name, as before. A member descriptor is a data descriptor: what
 * the instance's __dict__ holds never hides it, so its slot is what getattr would read. */
enum {
  F_CLIENT, F_MSG_ID, F_DONE, F_CALLBACKS, F_CB_LOCK, F_BODY, F_RAW, F_HEADER, F_ERROR, F_SUBMITTED_AT, F_COMPLETED_AT,
  F_OP, F_OUTPUTS, F_OPTIONS, F_CORE, F_VALUES, F_EXEC_US, F_QUEUE_US, F_BOARD_US, F_BOARD_MODEL, F_RELEASED, F_COUNT
};
static PyObject **const field_name[F_COUNT] = {
    &s_client, &s_msg_id, &s_done, &s_callbacks, &s_cb_lock, &s_body, &s_raw, &s_header, &s_error, &s_submitted_at,
    &s_completed_at, &s_op, &s_outputs, &s_options, &s_core, &s_values, &s_exec_us, &s_queue_us, &s_board_us,
    &s_board_model, &s_released};
static struct {
  PyTypeObject *type; /* a strong reference; NULL: none yet */
  unsigned int tag;   /* its tp_version_tag when the offsets were read (never 0) */
  Py_ssize_t at[F_COUNT];
} slots;

/* 1: `type`'s fields are slots at slots.at (the map is type's now); 0: use the names */
static int slots_of(PyTypeObject *type) {
  if (slots.type == type && type->tp_version_tag == slots.tag) return 1;
  if (type->tp_setattro != PyObject_GenericSetAttr || type->tp_getattro != PyObject_GenericGetAttr) return 0;
  Py_ssize_t at[F_COUNT];
  for (int f = 0; f < F_COUNT; f++) {
    PyObject *d = _PyType_Lookup(type, *field_name[f]); /* borrowed; gives the class a version tag */
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return 0;
    PyMemberDef const *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != Py_T_OBJECT_EX || (m->flags & Py_READONLY) || m->offset <= 0) return 0;
    at[f] = m->offset;
  }
  if (type->tp_version_tag == 0) return 0;
  memcpy(slots.at, at, sizeof at);
  Py_XSETREF(slots.type, (PyTypeObject *)Py_NewRef(type));
  slots.tag = type->tp_version_tag;
  return 1;
}

/* 1 when `obj`'s fields are at slots.at now (the map is its class's, still current) */
static int fast(PyObject *obj) { return Py_TYPE(obj) == slots.type && slots.type->tp_version_tag == slots.tag; }

static PyObject **slot(PyObject *obj, int f) { return (PyObject **)((char *)obj + slots.at[f]); }

/* obj.<f> = value (`at`: fast(obj)); 0 or -1 */
static int put(PyObject *obj, int at, int f, PyObject *value) {
  if (!at) return PyObject_SetAttr(obj, *field_name[f], value);
  Py_XSETREF(*slot(obj, f), Py_NewRef(value));
  return 0;
}

/* put, stealing value (NULL: -1, the exception already set) */
static int put_stolen(PyObject *obj, int at, int f, PyObject *value) {
  if (value == NULL) return -1;
  int rc = put(obj, at, f, value);
  Py_DECREF(value);
  return rc;
}

/* obj.<f>: a new reference, or NULL with an exception (an unset slot: getattr's AttributeError) */
static PyObject *get(PyObject *obj, int at, int f) {
  PyObject *v = at ? *slot(obj, f) : NULL;
  return v != NULL ? Py_NewRef(v) : PyObject_GetAttr(obj, *field_name[f]);
}

/* bool(obj.<f>): 1, 0, or -1 */
static int truth(PyObject *obj, int at, int f) {
  PyObject *v = get(obj, at, f);
  if (v == NULL) return -1;
  int rc = v == Py_True ? 1 : v == Py_False ? 0 : PyObject_IsTrue(v);
  Py_DECREF(v);
  return rc;
}

/* body.get(key, dflt) as a new reference (dflt: a new reference too, or NULL with an exception) */
static PyObject *body_get(PyObject *body, PyObject *key, PyObject *dflt) {
  if (dflt == NULL) return NULL;
  PyObject *v = PyDict_GetItemWithError(body, key);
  if (v == NULL) {
    if (PyErr_Occurred()) {
      Py_DECREF(dflt);
      return NULL;
    }
    return dflt;
  }
  Py_DECREF(dflt);
  Py_INCREF(v);
  return v;
}

/* Task._on_complete's fields from `body` and `hdr` (the lock held; `at`: fast(req)). 0 or -1. */
static int task_fields(PyObject *req, int at, PyObject *body, PyObject *hdr, PyObject *board_models) {
  if (put_stolen(req, at, F_VALUES, body_get(body, k_values, PyDict_New())) < 0) return -1;
  if (put_stolen(req, at, F_CORE, body_get(body, k_core, get(req, at, F_CORE))) < 0) return -1;
  Py_INCREF(zero);
  if (put_stolen(req, at, F_EXEC_US, body_get(body, k_exec_us, zero)) < 0) return -1;
  Py_INCREF(Py_None);
  PyObject *us = body_get(body, k_board_us, Py_None);
  if (us == NULL) return -1;
  int rc = 0;
  if (us != Py_None) { /* a peer may lie: kept only if what PROTOCOL.md §5.3 says (no bool, NaN, inf) */
    Py_INCREF(Py_None);
    PyObject *model = body_get(body, k_board_model, Py_None);
    int ok = model != NULL && (PyFloat_CheckExact(us) || PyLong_CheckExact(us));
    if (model == NULL) rc = -1;
    if (ok) ok = PyObject_RichCompareBool(us, zero, Py_GE);
    if (ok > 0) ok = PyObject_RichCompareBool(us, inf, Py_LT);
    if (ok > 0) ok = PySequence_Contains(board_models, model);
    if (ok < 0) rc = -1;
    if (ok > 0 && (put_stolen(req, at, F_BOARD_US, PyNumber_Float(us)) < 0 || put(req, at, F_BOARD_MODEL, model) < 0))
      rc = -1;
    Py_XDECREF(model);
  }
  Py_DECREF(us);
  if (rc == 0 && PyTuple_Check(hdr) && PyTuple_GET_SIZE(hdr) > 5) { /* if self.header: the queue's µs */
    PyObject *queued = PyTuple_GET_ITEM(hdr, 5);
    int positive = PyObject_RichCompareBool(queued, zero, Py_GT);
    if (positive < 0 || put(req, at, F_QUEUE_US, positive ? queued : zero) < 0) rc = -1;
  } else if (rc == 0 && PyObject_IsTrue(hdr)) {
    PyErr_SetString(PyExc_TypeError, "a reply's header must be a Header");
    rc = -1;
  }
  return rc;
}

static int complete_task(PyObject *req, PyObject *body, PyObject *hdr, PyObject *raw, PyObject *task_type,
                         PyObject *tracer, PyObject *board_models) {
  if ((PyObject *)Py_TYPE(req) != task_type || !PyDict_CheckExact(body) || !PyList_CheckExact(raw)) return 2;
  int at = slots_of(Py_TYPE(req));
  int some = truth(req, at, F_OUTPUTS);
  if (some != 0) return some < 0 ? -1 : 2;
  PyObject *rec = PyObject_GetAttr(tracer, s_rec);
  int on = rec == NULL ? -1 : true_attr(rec, s_on);
  Py_XDECREF(rec);
  if (on != 0) return on < 0 ? -1 : 2;
  PyObject *lock = get(req, at, F_CB_LOCK);
  if (lock == NULL) return -1;
  PyObject *got = PyObject_CallMethodNoArgs(lock, s_acquire);
  if (got == NULL) {
    Py_DECREF(lock);
    return -1;
  }
  Py_DECREF(got);
  at = fast(req); /* (acquire ran Python: the class is looked at again) */
  PyObject *callbacks = NULL;
  int rc = truth(req, at, F_DONE);
  if (rc == 0) {
    rc = 1;
    /* self.body, self.error, self.header, self.raw = body or {}, error, header, raw or [] */
    if (put(req, at, F_BODY, body) < 0 || put(req, at, F_ERROR, Py_None) < 0 || put(req, at, F_HEADER, hdr) < 0 ||
        (PyList_GET_SIZE(raw) ? put(req, at, F_RAW, raw) : put_stolen(req, at, F_RAW, PyList_New(0))) < 0 ||
        put_stolen(req, at, F_COMPLETED_AT, PyFloat_FromDouble(monotonic())) < 0 || /* time.perf_counter()'s clock */
        task_fields(req, at, body, hdr, board_models) < 0 || put(req, at, F_DONE, Py_True) < 0)
      rc = -1;
    if (rc == 1) {
      callbacks = get(req, at, F_CALLBACKS);
      if (callbacks == NULL || put_stolen(req, at, F_CALLBACKS, PyList_New(0)) < 0) rc = -1;
    }
  } else if (rc > 0) {
    rc = 0;
  }
  rc = released(lock, rc);
  Py_DECREF(lock);
  if (rc == 1 && callbacks != NULL) {
    PyObject *seq = PySequence_Fast(callbacks, "a task's callbacks");
    for (Py_ssize_t i = 0; seq != NULL && rc == 1 && i < PySequence_Fast_GET_SIZE(seq); i++) {
      PyObject *out = PyObject_CallMethodOneArg(req, s_run_callback, PySequence_Fast_GET_ITEM(seq, i));
      if (out == NULL) rc = -1;
      Py_XDECREF(out);
    }
    if (seq == NULL) rc = -1;
    Py_XDECREF(seq);
  }
  Py_XDECREF(callbacks);
  return rc;
}

/* --- the protocol's frames (PROTOCOL.md §3), with the C client's codec ------------------------ *
 * A RESULT's header and body, a TASK's header and body, made here without the protocol's Python
 * functions (protocol.header, protocol.wire) where the case is the usual one, by
 * arm_side/capi/native/vdsp_wire.c, which accepts and refuses what those functions do
 * (tests/sdk/test_capi_wire.py). Each function says "not here" (NULL, no exception) for any other
 * case, and its caller then calls the Python function, which makes what it makes or raises what
 * it raises: the outcome is the Python's whatever the input (tests/sdk/test_capi_wire.py holds
 * both to the same bytes and objects). */

/* The str of a short UTF-8 string from a small cache: a reply's body repeats the same few keys
 * and values (values, core, exec_us, board_us, board_model, vdsp0, table), and decoding each
 * anew, and interning each key, was about a third of the body's decoding. `key`: a map's key,
 * interned (as msgpack-python interns them; the cache then keeps the interned one); a value is
 * not interned here (on Python 3.12 an interned string is never freed). Direct-mapped on the
 * bytes' FNV-1a hash; the GIL serialises its use. A new reference, or NULL with an exception
 * (what PyUnicode_DecodeUTF8 raises: nothing is cached then). */
#define STR_CACHE_SLOTS 64
#define STR_CACHE_LONGEST 24
static struct {
  size_t len;
  char bytes[STR_CACHE_LONGEST];
  PyObject *str;
} str_cache[STR_CACHE_SLOTS];

static PyObject *short_str(const char *s, size_t len, int key) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  h ^= h >> 16;
  size_t slot = h & (STR_CACHE_SLOTS - 1);
  PyObject *str;
  if (str_cache[slot].str != NULL && str_cache[slot].len == len && memcmp(str_cache[slot].bytes, s, len) == 0) {
    str = Py_NewRef(str_cache[slot].str);
    if (!key || PyUnicode_CHECK_INTERNED(str)) return str;
  } else {
    str = PyUnicode_DecodeUTF8(s, (Py_ssize_t)len, "strict");
    if (str == NULL) return NULL;
    str_cache[slot].len = len;
    memcpy(str_cache[slot].bytes, s, len);
  }
  if (key) PyUnicode_InternInPlace(&str);
  Py_XSETREF(str_cache[slot].str, Py_NewRef(str));
  return str;
}

/* A decoded value as msgpack-python's unpackb(raw=False) makes it (map keys interned as it
 * interns them; short strings from short_str's cache): a new reference, or NULL
 * with an exception. Depth: at most VDSP_WIRE_MAX_DEPTH, which the decoder enforced. */
static PyObject *py_value_as(const vdsp_wire_value *v, int as_key);
static PyObject *py_value(const vdsp_wire_value *v) { return py_value_as(v, 0); }

static PyObject *py_value_as(const vdsp_wire_value *v, int as_key) {
  switch (v->kind) {
    case VDSP_WIRE_NIL: Py_RETURN_NONE;
    case VDSP_WIRE_BOOL: return PyBool_FromLong(v->v.b);
    case VDSP_WIRE_INT: return PyLong_FromLongLong(v->v.i);
    case VDSP_WIRE_UINT: return PyLong_FromUnsignedLongLong(v->v.u);
    case VDSP_WIRE_FLOAT: return PyFloat_FromDouble(v->v.f);
    case VDSP_WIRE_STR:
      if (v->len > 0 && v->len <= STR_CACHE_LONGEST) return short_str(v->v.s, v->len, as_key);
      return PyUnicode_DecodeUTF8(v->v.s, (Py_ssize_t)v->len, "strict");
    case VDSP_WIRE_BIN: return PyBytes_FromStringAndSize(v->v.s, (Py_ssize_t)v->len);
    case VDSP_WIRE_ARRAY: {
      PyObject *list = PyList_New((Py_ssize_t)v->len);
      for (uint32_t i = 0; list != NULL && i < v->len; i++) {
        PyObject *item = py_value(&v->v.items[i]);
        if (item == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
      }
      return list;
    }
    case VDSP_WIRE_MAP: {
      PyObject *dict = PyDict_New();
      for (uint32_t i = 0; dict != NULL && i < v->len; i++) {
        PyObject *key = py_value_as(&v->v.items[2 * i], 1);
        if (key != NULL && PyUnicode_CheckExact(key)) PyUnicode_InternInPlace(&key);
        PyObject *value = key == NULL ? NULL : py_value(&v->v.items[2 * i + 1]);
        if (value == NULL || PyDict_SetItem(dict, key, value) < 0) Py_CLEAR(dict);
        Py_XDECREF(key);
        Py_XDECREF(value);
      }
      return dict;
    }
    default:
      PyErr_SetString(PyExc_SystemError, "vdsp_wire: a value of no known kind");
      return NULL;
  }
}

/* wire.unpack_body(frame) for a bytes frame the codec takes: a new dict; NULL without an
 * exception: not here (the Python decides, and raises what it raises); NULL with one: out of memory */
static PyObject *body_from(PyObject *frame) {
  if (!PyBytes_CheckExact(frame)) return NULL;
  vdsp_wire_body *body = NULL;
  if (vdsp_wire_body_decode(PyBytes_AS_STRING(frame), (size_t)PyBytes_GET_SIZE(frame), &body, NULL) != VDSP_WIRE_OK)
    return NULL;
  PyObject *out = py_value(vdsp_wire_body_root(body));
  vdsp_wire_body_free(body);
  if (out == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear(); /* the Python's to refuse */
  return out;
}

/* Header.parse(frame) for a bytes frame of a reply of `command` (a Command member; its value the
 * byte wanted) in this version: a new `header_type`; NULL without an exception: not here */
static PyObject *header_from(PyObject *frame, PyObject *header_type, PyObject *command) {
  if (!PyBytes_CheckExact(frame) || PyBytes_GET_SIZE(frame) != VDSP_WIRE_HEADER_SIZE || !PyType_Check(header_type) ||
      !PyType_IsSubtype((PyTypeObject *)header_type, &PyTuple_Type))
    return NULL;
  vdsp_wire_header h;
  long want = PyLong_AsLong(command);
  if (want == -1 && PyErr_Occurred()) return NULL;
  if (vdsp_wire_header_parse(PyBytes_AS_STRING(frame), VDSP_WIRE_HEADER_SIZE, &h, NULL) != VDSP_WIRE_OK ||
      h.version != VDSP_WIRE_VERSION || h.command != want)
    return NULL;
  PyTypeObject *type = (PyTypeObject *)header_type;
  PyObject *hdr = type->tp_alloc(type, 6); /* tuple.__new__(Header, (...)), as Header.parse makes it */
  if (hdr == NULL) return NULL;
  PyObject *fields[6] = {Py_NewRef(command), PyLong_FromLong(h.op), PyLong_FromLong(h.priority),
                         PyLong_FromLong(h.core), PyLong_FromUnsignedLongLong(h.msg_id),
                         PyLong_FromLongLong(h.custom_id)};
  for (int i = 0; i < 6; i++) {
    if (fields[i] == NULL) Py_CLEAR(hdr);
    if (hdr != NULL) PyTuple_SET_ITEM(hdr, i, fields[i]);
    else Py_XDECREF(fields[i]);
  }
  return hdr;
}

/* header.pack(command, msg_id, op, priority, core, custom_id) for ints in the fields' ranges: new
 * bytes; NULL without an exception: not here (the Python raises what it raises) */
static PyObject *header_bytes(PyObject *command, PyObject *msg_id, PyObject *op, PyObject *priority, PyObject *core,
                              PyObject *custom_id) {
  PyObject *in[6] = {command, msg_id, op, priority, core, custom_id};
  for (int i = 0; i < 6; i++)
    if (!PyLong_Check(in[i])) return NULL;
  int overflow = 0;
  long small[4];
  PyObject *narrow[4] = {command, op, priority, core};
  long top[4] = {0xFF, 0xFFFF, 0xFF, 0xFF};
  for (int i = 0; i < 4; i++) {
    small[i] = PyLong_AsLongAndOverflow(narrow[i], &overflow);
    if (overflow || small[i] < 0 || small[i] > top[i]) return NULL;
  }
  unsigned long long id = PyLong_AsUnsignedLongLong(msg_id);
  if (id == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    return NULL;
  }
  long long custom = PyLong_AsLongLongAndOverflow(custom_id, &overflow);
  if (overflow || (custom == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return NULL;
  }
  vdsp_wire_header h = {VDSP_WIRE_VERSION, (uint8_t)small[0], (uint16_t)small[1], (uint8_t)small[2],
                        (uint8_t)small[3], id, custom};
  PyObject *out = PyBytes_FromStringAndSize(NULL, VDSP_WIRE_HEADER_SIZE);
  if (out != NULL) vdsp_wire_header_pack(&h, (uint8_t *)PyBytes_AS_STRING(out));
  return out;
}

/* one value of a body to write, as msgpack's Packer(use_bin_type=True) packs it: 0; 1: not
 * here (a type or value the codec leaves to the Python); -1 with an exception */
static int put_py(vdsp_wire_writer *w, PyObject *o) {
  if (o == Py_None) return vdsp_wire_put_nil(w) == VDSP_WIRE_OK ? 0 : 1;
  if (PyBool_Check(o)) return vdsp_wire_put_bool(w, o == Py_True) == VDSP_WIRE_OK ? 0 : 1;
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow > 0) {
      unsigned long long u = PyLong_AsUnsignedLongLong(o);
      if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 1;
      }
      return vdsp_wire_put_uint(w, u) == VDSP_WIRE_OK ? 0 : 1;
    }
    if (overflow < 0 || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return 1;
    }
    return vdsp_wire_put_int(w, v) == VDSP_WIRE_OK ? 0 : 1;
  }
  if (PyFloat_CheckExact(o)) return vdsp_wire_put_double(w, PyFloat_AS_DOUBLE(o)) == VDSP_WIRE_OK ? 0 : 1;
  if (PyUnicode_CheckExact(o)) {
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(o, &len);
    if (text == NULL) { /* a lone surrogate: msgpack refuses it, through the Python */
      PyErr_Clear();
      return 1;
    }
    return vdsp_wire_put_str(w, text, (size_t)len) == VDSP_WIRE_OK ? 0 : 1;
  }
  if (PyBytes_CheckExact(o))
    return vdsp_wire_put_bin(w, PyBytes_AS_STRING(o), (size_t)PyBytes_GET_SIZE(o)) == VDSP_WIRE_OK ? 0 : 1;
  if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (n > VDSP_WIRE_MAX_CONTAINER || vdsp_wire_put_array(w, (uint32_t)n) != VDSP_WIRE_OK) return 1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); i++) { /* nothing here runs Python: o stays as it is */
      int rc = put_py(w, PySequence_Fast_GET_ITEM(o, i));
      if (rc != 0) return rc;
    }
    return 0;
  }
  if (PyDict_CheckExact(o)) {
    Py_ssize_t n = PyDict_GET_SIZE(o), pos = 0;
    if (n > VDSP_WIRE_MAX_CONTAINER || vdsp_wire_put_map(w, (uint32_t)n) != VDSP_WIRE_OK) return 1;
    PyObject *key, *value;
    while (PyDict_Next(o, &pos, &key, &value)) {
      if (!PyUnicode_CheckExact(key)) return 1;
      int rc = put_py(w, key);
      if (rc == 0) rc = put_py(w, value);
      if (rc != 0) return rc;
    }
    return 0;
  }
  return 1;
}

static vdsp_wire_writer *writer; /* used with the GIL held, and no Python run while it is */

/* wire.pack_body(body) for a dict of the types the codec writes: new bytes; NULL without an
 * exception: not here (the Python packs it or raises) */
static PyObject *body_bytes(PyObject *body) {
  if (!PyDict_CheckExact(body)) return NULL;
  if (writer == NULL && (writer = vdsp_wire_writer_new()) == NULL) return NULL;
  vdsp_wire_writer_reset(writer);
  int rc = put_py(writer, body);
  if (rc < 0) return NULL;
  const uint8_t *data;
  size_t len;
  if (rc != 0 || vdsp_wire_writer_finish(writer, &data, &len, NULL) != VDSP_WIRE_OK) return NULL;
  return PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
}

/* Each "not here" handed to the Python function `python` with `arg` */
static PyObject *or_python(PyObject *made, PyObject *python, PyObject *arg) {
  if (made != NULL || PyErr_Occurred()) return made;
  return PyObject_CallOneArg(python, arg);
}

/* One message of a link of `peer`: a RESULT that completes a request in flight is handled here
 * as Session.receive handles it; any other goes to Session.receive. The owner is held. 0, or -1
 * with an exception. */
static int one_message(PyObject *lane, PyObject *peer, PyObject *frames, PyObject *now) {
  if (PyList_CheckExact(frames) && PyList_GET_SIZE(frames) >= 2 && PyBytes_CheckExact(PyList_GET_ITEM(frames, 1))) {
    PyObject *first = PyList_GET_ITEM(frames, 0);
    PyObject *hdr = or_python(header_from(first, PyTuple_GET_ITEM(lane, L_HEADER), PyTuple_GET_ITEM(lane, L_RESULT)),
                              PyTuple_GET_ITEM(lane, L_PARSE), first);
    if (hdr == NULL) {
      if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
      PyErr_Clear(); /* malformed: Session.receive logs and drops it */
    } else if (PyTuple_Check(hdr) && PyTuple_GET_SIZE(hdr) >= 5 && PyTuple_GET_ITEM(hdr, 0) == PyTuple_GET_ITEM(lane, L_RESULT)) {
      PyObject *second = PyList_GET_ITEM(frames, 1);
      PyObject *body = or_python(body_from(second), PyTuple_GET_ITEM(lane, L_UNPACK), second);
      if (body == NULL) {
        Py_DECREF(hdr);
        if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
        PyErr_Clear(); /* a body that does not decode: Session.receive fails the request with it */
      } else {
        int rc = 0;
        if (peer != Py_None) { /* Session.receive: peer.liveness.last_heard = now */
          PyObject *liveness = PyObject_GetAttr(peer, s_liveness);
          rc = liveness == NULL || PyObject_SetAttr(liveness, s_last_heard, now) < 0 ? -1 : 0;
          Py_XDECREF(liveness);
        }
        PyObject *pending = PyTuple_GET_ITEM(lane, L_PENDING);
        PyObject *msg_id = PyTuple_GET_ITEM(hdr, 4);
        PyObject *req = rc < 0 ? NULL : PyDict_GetItemWithError(pending, msg_id); /* borrowed */
        if (req != NULL) {
          Py_INCREF(req);
          if (PyDict_DelItem(pending, msg_id) < 0 || not_inflight(lane, peer, msg_id) < 0) {
            rc = -1;
          } else {
            PyObject *raw = PyList_GetSlice(frames, 2, PyList_GET_SIZE(frames));
            int done = raw == NULL ? -1
                                   : complete_task(req, body, hdr, raw, PyTuple_GET_ITEM(lane, L_TASK),
                                                   PyTuple_GET_ITEM(lane, L_TRACER), PyTuple_GET_ITEM(lane, L_BOARD_MODELS));
            if (done == 2) {
              PyObject *out = PyObject_CallMethodObjArgs(req, s_complete, body, Py_None, hdr, raw, NULL);
              done = out == NULL ? -1 : 1;
              Py_XDECREF(out);
            }
            Py_XDECREF(raw);
            if (done < 0) rc = -1;
          }
          Py_DECREF(req);
        } else if (PyErr_Occurred()) {
          rc = -1;
        } /* else: released, or timed out and forgotten */
        Py_DECREF(body);
        Py_DECREF(hdr);
        return rc;
      }
    } else {
      Py_DECREF(hdr);
    }
  }
  PyObject *actions = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(lane, L_RECEIVE), peer, frames, now, NULL);
  if (actions == NULL) return -1;
  int some = PyObject_IsTrue(actions);
  PyObject *out = some > 0 ? PyObject_CallOneArg(PyTuple_GET_ITEM(lane, L_CARRY_OUT), actions) : NULL;
  Py_DECREF(actions);
  if (some < 0 || (some > 0 && out == NULL)) return -1;
  Py_XDECREF(out);
  return 0;
}

static PyObject *s_lock, *s_closed, *s_sock;

/* Channel.drain(link), as it drains: under the link's lock, nothing once closed, else every
 * message waiting (zsock.drain). A new list, or NULL with an exception. */
static PyObject *channel_drain(PyObject *lane, PyObject *link) {
  PyObject *lock = PyObject_GetAttr(link, s_lock);
  if (lock == NULL) return NULL;
  PyObject *got = PyObject_CallMethodNoArgs(lock, s_acquire);
  if (got == NULL) {
    Py_DECREF(lock);
    return NULL;
  }
  Py_DECREF(got);
  PyObject *out = NULL;
  int closed = true_attr(link, s_closed);
  if (closed > 0) {
    out = PyList_New(0);
  } else if (closed == 0) {
    PyObject *sock = PyObject_GetAttr(link, s_sock);
    out = sock == NULL ? NULL : PyObject_CallOneArg(PyTuple_GET_ITEM(lane, L_DRAIN), sock);
    Py_XDECREF(sock);
  }
  int rc = released(lock, out == NULL ? -1 : 0);
  Py_DECREF(lock);
  if (rc < 0) Py_CLEAR(out);
  return out;
}

/* What `link` brought, dispatched under the owner (Links.dispatch). 0, or -1 with an exception. */
static int read_link(PyObject *lane, PyObject *link, PyObject *now) {
  PyTypeObject *type = Py_TYPE(link);
  PyObject *incoming = (PyObject *)type == PyTuple_GET_ITEM(lane, L_CHANNEL) &&
                               _PyType_Lookup(type, s_drain) == PyTuple_GET_ITEM(lane, L_CHANNEL_DRAIN)
                           ? channel_drain(lane, link)
                           : PyObject_CallMethodNoArgs(link, s_drain);
  if (incoming == NULL) return -1;
  if (!PyList_Check(incoming)) {
    Py_DECREF(incoming);
    PyErr_SetString(PyExc_TypeError, "a link's drain() must give a list");
    return -1;
  }
  if (PyList_GET_SIZE(incoming) == 0) {
    Py_DECREF(incoming);
    return 0;
  }
  PyObject *peer = PyObject_GetAttr(link, s_peer);
  if (peer == NULL) {
    Py_DECREF(incoming);
    return -1;
  }
  PyObject *owned = PyTuple_GET_ITEM(lane, L_OWNED);
  PyObject *got = PyObject_CallMethodNoArgs(owned, s_acquire);
  int rc = got == NULL ? -1 : 0;
  Py_XDECREF(got);
  if (rc == 0) {
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(incoming); i++)
      rc = one_message(lane, peer, PyList_GET_ITEM(incoming, i), now);
    rc = released(owned, rc);
  }
  Py_DECREF(peer);
  Py_DECREF(incoming);
  return rc;
}

/* The lane's checks ; 0, or -1 with TypeError */
static int lane_ok(PyObject *lane) {
  if (!PyTuple_CheckExact(lane) || PyTuple_GET_SIZE(lane) != L_SIZE || !PyDict_CheckExact(PyTuple_GET_ITEM(lane, L_PENDING)) ||
      !PyDict_CheckExact(PyTuple_GET_ITEM(lane, L_FDS)) || !PyFloat_CheckExact(PyTuple_GET_ITEM(lane, L_TICK_S)) ||
      !PyList_CheckExact(PyTuple_GET_ITEM(lane, L_LIVE))) {
    PyErr_SetString(PyExc_TypeError, "lane: Reading._lane's tuple");
    return -1;
  }
  return 0;
}

/* Reading._round(woken) for the lane's links: one link is read; of several, those whose fds fired
 * (woken), else all; then the clock's tick if due. 0, or -1 with an exception. */
static int lane_round(PyObject *reading, PyObject *lane, int woken) {
  double t = monotonic(); /* when what is drained now was heard, and the clock's time */
  PyObject *now = PyFloat_FromDouble(t);
  if (now == NULL) return -1;
  int rc = 0;
  PyObject *fds = PyTuple_GET_ITEM(lane, L_FDS);
  if (!woken || PyDict_GET_SIZE(fds) == 1) {
    PyObject *live = PyTuple_GET_ITEM(lane, L_LIVE); /* a list, never changed: a new one on a change */
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(live); i++) {
      PyObject *link = PyList_GET_ITEM(live, i);
      Py_INCREF(link);
      rc = read_link(lane, link, now);
      Py_DECREF(link);
    }
  } else {
    struct epoll_event events[16];
    int n;
    do {
      n = epoll_wait((int)PyLong_AsLong(PyTuple_GET_ITEM(lane, L_LINKS_FD)), events, 16, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      PyErr_SetFromErrno(PyExc_OSError);
      rc = -1;
    }
    for (int i = 0; rc == 0 && i < n; i++) {
      PyObject *key = PyLong_FromLong(events[i].data.fd);
      PyObject *link = key == NULL ? NULL : PyDict_GetItemWithError(fds, key); /* borrowed */
      Py_XDECREF(key);
      if (link == NULL) {
        if (PyErr_Occurred()) rc = -1;
        continue;
      }
      Py_INCREF(link);
      rc = read_link(lane, link, now);
      Py_DECREF(link);
    }
  }
  if (rc == 0) {
    double next_tick = float_attr(reading, s_next_tick);
    if (next_tick == -1.0 && PyErr_Occurred()) {
      rc = -1;
    } else if (t >= next_tick) {
      PyObject *out = PyObject_CallMethodOneArg(PyTuple_GET_ITEM(lane, L_LINKS), s_tick, now);
      if (out == NULL) rc = -1;
      Py_XDECREF(out);
      if (rc == 0) {
        PyObject *next = PyFloat_FromDouble(t + PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(lane, L_TICK_S)));
        if (next == NULL || PyObject_SetAttr(reading, s_next_tick, next) < 0) rc = -1;
        Py_XDECREF(next);
      }
    }
  }
  Py_DECREF(now);
  return rc;
}

/* The exception raised, taken (no longer set), as the object an `except ... as exc` would hold
 * (its traceback on it): a new reference, or NULL when none is set */
static PyObject *taken_exception(void) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != NULL && value != NULL) PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  return value;
}

/* A round's Exception goes to reading._reader_error(exc) (logged); 0, or -1 when it is not an
 * Exception (KeyboardInterrupt, SystemExit: they propagate) or the report itself failed. */
static int reported(PyObject *reading) {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
  PyObject *exc = taken_exception();
  PyObject *out = PyObject_CallMethodOneArg(reading, s_reader_error, exc != NULL ? exc : Py_None);
  Py_XDECREF(exc);
  if (out == NULL) return -1;
  Py_DECREF(out);
  return 0;
}

static PyObject *lead(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "lead(reading, req, deadline, lane, deferred, closed)");
    return NULL;
  }
  PyObject *reading = args[0], *req = args[1], *lane = args[3], *deferred = args[4], *closed = args[5];
  double deadline = 0.0;
  int has_deadline = args[2] != Py_None;
  if (has_deadline) {
    deadline = PyFloat_AsDouble(args[2]);
    if (deadline == -1.0 && PyErr_Occurred()) return NULL;
  }
  if (lane_ok(lane) < 0) return NULL;
  if (!PyList_CheckExact(deferred)) {
    PyErr_SetString(PyExc_TypeError, "deferred: a list");
    return NULL;
  }
  int leading = (int)PyLong_AsLong(PyTuple_GET_ITEM(lane, L_LEADING_FD));
  int kick = (int)PyLong_AsLong(PyTuple_GET_ITEM(lane, L_KICK_FD));
  if (PyErr_Occurred()) return NULL;
  for (;;) {
    int done = truth(req, fast(req), F_DONE);
    if (done != 0) {
      if (done < 0) return NULL;
      break;
    }
    PyObject *shut = PyObject_CallNoArgs(closed);
    if (shut == NULL) return NULL;
    int is_shut = PyObject_IsTrue(shut);
    Py_DECREF(shut);
    if (is_shut != 0) {
      if (is_shut < 0) return NULL;
      break;
    }
    double now = monotonic();
    double timeout = float_attr(reading, s_next_tick);
    if (timeout == -1.0 && PyErr_Occurred()) return NULL;
    timeout -= now;
    if (has_deadline) {
      if (deadline <= now) break;
      if (deadline - now < timeout) timeout = deadline - now;
    }
    while (PyList_GET_SIZE(deferred) > 0) { /* wake_deferred() */
      Py_ssize_t last = PyList_GET_SIZE(deferred) - 1;
      PyObject *waker = PyList_GET_ITEM(deferred, last);
      Py_INCREF(waker);
      if (PyList_SetSlice(deferred, last, last + 1, NULL) < 0) {
        Py_DECREF(waker);
        return NULL;
      }
      PyObject *out = PyObject_CallMethodNoArgs(waker, s_wake);
      Py_DECREF(waker);
      if (out == NULL) return NULL;
      Py_DECREF(out);
    }
    int woken = 0;
    struct epoll_event events[8];
    int ms = timeout > 0.0 ? (int)ceil(timeout * 1000.0) : 0; /* select.epoll.poll rounds up too */
    if (timeout > 86400.0) ms = 86400000;
    int n;
    for (;;) {
      Py_BEGIN_ALLOW_THREADS
      n = epoll_wait(leading, events, 8, ms);
      Py_END_ALLOW_THREADS
      if (n >= 0) break;
      if (errno != EINTR) return PyErr_SetFromErrno(PyExc_OSError);
      if (PyErr_CheckSignals() < 0) return NULL; /* a handler's exception, as epoll.poll raises it */
      double left = has_deadline ? deadline - monotonic() : (double)ms / 1000.0;
      ms = left > 0.0 ? (int)ceil(left * 1000.0) : 0;
    }
    for (int i = 0; i < n; i++) {
      if (events[i].data.fd == kick) {
        uint64_t count;
        if (read(kick, &count, sizeof count) < 0 && errno != EAGAIN) return PyErr_SetFromErrno(PyExc_OSError);
        woken = 0;
        break;
      }
      woken = 1;
    }
    int rc;
    int current = woken ? lane_current(lane) : 0;
    if (current < 0) {
      rc = -1;
    } else if (current) {
      rc = lane_round(reading, lane, 1);
    } else {
      PyObject *out = PyObject_CallMethodOneArg(reading, s_round, woken ? Py_True : Py_False);
      rc = out == NULL ? -1 : 0;
      Py_XDECREF(out);
    }
    if (rc < 0 && reported(reading) < 0) return NULL;
  }
  Py_RETURN_NONE;
}

/* round(reading, lane, woken): Reading._round for the lane's links (raises what a round raises) */
static PyObject *round_(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "round(reading, lane, woken)");
    return NULL;
  }
  int woken = PyObject_IsTrue(args[2]);
  if (woken < 0 || lane_ok(args[1]) < 0 || lane_round(args[0], args[1], woken) < 0) return NULL;
  Py_RETURN_NONE;
}

/* read(lane, link): what `link` brought, dispatched (Reading._safe_one's read; raises what it raises) */
static PyObject *read_(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "read(lane, link)");
    return NULL;
  }
  if (lane_ok(args[0]) < 0) return NULL;
  PyObject *now = PyFloat_FromDouble(monotonic());
  if (now == NULL) return NULL;
  int rc = read_link(args[0], args[1], now);
  Py_DECREF(now);
  if (rc < 0) return NULL;
  Py_RETURN_NONE;
}

/* complete(req, body, hdr, raw, task_type, tracer, board_models): complete_task's answer, True
 * (completed), False (it had ended), None (not such a task); for the parity test of both builds */
static PyObject *complete_(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 7) {
    PyErr_SetString(PyExc_TypeError, "complete(req, body, hdr, raw, task_type, tracer, board_models)");
    return NULL;
  }
  int rc = complete_task(args[0], args[1], args[2], args[3], args[4], args[5], args[6]);
  if (rc < 0) return NULL;
  if (rc == 2) Py_RETURN_NONE;
  return PyBool_FromLong(rc);
}

/* The codec's answers, None for "not here" (where the Python function decides), for the tests
 * that hold them to the Python's (tests/sdk/test_capi_wire.py) */
static PyObject *or_none(PyObject *made) {
  if (made != NULL || PyErr_Occurred()) return made;
  Py_RETURN_NONE;
}

static PyObject *unpack_body_(PyObject *self, PyObject *frame) {
  (void)self;
  return or_none(body_from(frame));
}

static PyObject *pack_body_(PyObject *self, PyObject *body) {
  (void)self;
  return or_none(body_bytes(body));
}

static PyObject *parse_header_(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "parse_header(frame, header_type, command)");
    return NULL;
  }
  return or_none(header_from(args[0], args[1], args[2]));
}

static PyObject *pack_header_(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "pack_header(command, msg_id, op, priority, core, custom_id)");
    return NULL;
  }
  return or_none(header_bytes(args[0], args[1], args[2], args[3], args[4], args[5]));
}

/* --- the submit ------------------------------------------------------------------------------ */
/* the submit lane's items, in Client._submit_lane's order */
enum {
  S_LINKS,         /* the Links: .straight, ._missed, .submit / ._send_later / ._send_tracked / ._send_failed */
  S_SESSION,       /* the Session: .owner (read each time: Soc may set it), .task_link(msg_id, options, buffers) */
  S_OWNED,         /* the session's owner (an RLock) */
  S_BY_KEY,        /* links.by_key: key -> link */
  S_IDS,           /* session.ids: the msg_id counter */
  S_PENDING,       /* session.pending: msg_id -> request */
  S_PACK,          /* protocol.header.pack */
  S_PACK_BODY,     /* protocol.wire.pack_body */
  S_TASK_TYPE,     /* arm_side.task.Task */
  S_CLIENT,        /* the Task's client */
  S_SUBMIT_TRACER, /* client.tracer: .rec.poll(), .submit_task(...) */
  S_TASK_CMD,      /* int(Command.TASK) */
  S_RELAY_MODE,    /* bool: session.mode == "relay" */
  S_NEW_LOCK,      /* threading.Lock: a Request's _cb_lock */
  S_PERF_COUNTER,  /* time.perf_counter: a Request's submitted_at */
  S_CHANNEL,       /* arm_side.channel.Channel: a link sent on here (exactly that class) */
  S_SEND_FRAMES,   /* vdsp_board.sockets.zsock.send_frames(sock, frames, flags) */
  S_READABLE,      /* vdsp_board.sockets.zsock.readable(sock) */
  S_NOBLOCK,       /* zmq.NOBLOCK */
  S_MAX_TASKS,     /* int: protocol.constants.MAX_TASKS_PER_CLIENT */
  S_REC_POLL,      /* vdsp_board.observability.trace.Recorder.poll: inlined for a Recorder (rec_on) */
  S_SIZE
};

static PyObject *s_submit_c;
static PyObject *s_wire, *s_owner, *s_task_link, *s_straight, *s_alive_, *s_rec_poll, *s_submit_task, *s_missed,
    *s_send_later, *s_send_tracked, *s_send_failed, *s_failed_send, *s_submit,
    *s_watched, *k_inputs, *k_outputs, *k_params, *k_owner, *k_relay, *s_empty_str, *empty_tuple, *float_zero;

/* Request.__init__ and Task.__init__, their fields set in their order (by slot; by name, in
 * that order, a class whose fields are not slots: its instances' shared key layout as theirs):
 * a new reference, or NULL with an exception */
static PyObject *make_task(PyObject *lane, PyObject *msg_id, PyObject *op, PyObject *outputs, PyObject *core,
                           PyObject *options) {
  PyTypeObject *type = (PyTypeObject *)PyTuple_GET_ITEM(lane, S_TASK_TYPE);
  PyObject *lock = PyObject_CallNoArgs(PyTuple_GET_ITEM(lane, S_NEW_LOCK));
  PyObject *stamp = lock == NULL ? NULL : PyObject_CallNoArgs(PyTuple_GET_ITEM(lane, S_PERF_COUNTER));
  PyObject *task = stamp == NULL ? NULL : PyBaseObject_Type.tp_new(type, empty_tuple, NULL); /* object.__new__(Task) */
  if (task == NULL) {
    Py_XDECREF(lock);
    Py_XDECREF(stamp);
    return NULL;
  }
  int at = slots_of(type) && fast(task);
  int rc = put(task, at, F_CLIENT, PyTuple_GET_ITEM(lane, S_CLIENT));
  rc = rc < 0 ? rc : put(task, at, F_MSG_ID, msg_id);
  rc = rc < 0 ? rc : put(task, at, F_DONE, Py_False);
  rc = rc < 0 ? rc : put_stolen(task, at, F_CALLBACKS, PyList_New(0));
  rc = rc < 0 ? rc : put(task, at, F_CB_LOCK, lock);
  rc = rc < 0 ? rc : put_stolen(task, at, F_BODY, PyDict_New());
  rc = rc < 0 ? rc : put_stolen(task, at, F_RAW, PyList_New(0));
  rc = rc < 0 ? rc : put(task, at, F_HEADER, empty_tuple);
  rc = rc < 0 ? rc : put(task, at, F_ERROR, Py_None);
  rc = rc < 0 ? rc : put(task, at, F_SUBMITTED_AT, stamp);
  rc = rc < 0 ? rc : put(task, at, F_COMPLETED_AT, float_zero);
  rc = rc < 0 ? rc : put(task, at, F_OP, op);
  rc = rc < 0 ? rc : put(task, at, F_OUTPUTS, outputs);
  rc = rc < 0 ? rc : put(task, at, F_OPTIONS, options);
  rc = rc < 0 ? rc : put(task, at, F_CORE, core);
  rc = rc < 0 ? rc : put_stolen(task, at, F_VALUES, PyDict_New());
  rc = rc < 0 ? rc : put(task, at, F_EXEC_US, zero);
  rc = rc < 0 ? rc : put(task, at, F_QUEUE_US, zero);
  rc = rc < 0 ? rc : put(task, at, F_BOARD_US, Py_None);
  rc = rc < 0 ? rc : put(task, at, F_BOARD_MODEL, Py_None);
  rc = rc < 0 ? rc : put(task, at, F_RELEASED, Py_False);
  Py_DECREF(lock);
  Py_DECREF(stamp);
  if (rc < 0) Py_CLEAR(task);
  return task;
}

/* Session.task_frames' frames for msg_id (op an int in range): [header, body]; NULL with an exception */
static PyObject *task_frames(PyObject *lane, PyObject *msg_id, PyObject *op, PyObject *inputs, PyObject *outputs,
                             PyObject *params, PyObject *options) {
  PyObject *wire = PyObject_GetAttr(options, s_wire); /* (priority, core, custom_id) */
  if (wire == NULL) return NULL;
  if (!PyTuple_Check(wire) || PyTuple_GET_SIZE(wire) != 3) {
    Py_DECREF(wire);
    PyErr_SetString(PyExc_ValueError, "options.wire must be (priority, core, custom_id)");
    return NULL;
  }
  PyObject *hargs[6] = {PyTuple_GET_ITEM(lane, S_TASK_CMD), msg_id, op, PyTuple_GET_ITEM(wire, 0),
                        PyTuple_GET_ITEM(wire, 1), PyTuple_GET_ITEM(wire, 2)};
  PyObject *hdr = header_bytes(hargs[0], hargs[1], hargs[2], hargs[3], hargs[4], hargs[5]);
  if (hdr == NULL && !PyErr_Occurred()) hdr = PyObject_Vectorcall(PyTuple_GET_ITEM(lane, S_PACK), hargs, 6, NULL);
  Py_DECREF(wire);
  if (hdr == NULL) return NULL;
  PyObject *owner = PyObject_GetAttr(PyTuple_GET_ITEM(lane, S_SESSION), s_owner);
  int some = PyObject_IsTrue(params); /* params or {} */
  PyObject *p = some > 0 ? Py_NewRef(params) : some == 0 ? PyDict_New() : NULL;
  PyObject *body = owner == NULL || p == NULL ? NULL : PyDict_New();
  if (body != NULL && (PyDict_SetItem(body, k_inputs, inputs) < 0 || PyDict_SetItem(body, k_outputs, outputs) < 0 ||
                       PyDict_SetItem(body, k_params, p) < 0 || PyDict_SetItem(body, k_owner, owner) < 0))
    Py_CLEAR(body);
  Py_XDECREF(owner);
  Py_XDECREF(p);
  PyObject *packed = body == NULL ? NULL : or_python(body_bytes(body), PyTuple_GET_ITEM(lane, S_PACK_BODY), body);
  Py_XDECREF(body);
  PyObject *frames = packed == NULL ? NULL : PyList_New(2);
  if (frames == NULL) {
    Py_DECREF(hdr);
    Py_XDECREF(packed);
    return NULL;
  }
  PyList_SET_ITEM(frames, 0, hdr);
  PyList_SET_ITEM(frames, 1, packed);
  return frames;
}

/* Links._send_tracked on a Channel, as Channel.send sends: 0 (sent, or the link closed: nothing
 * sent, as Channel.send does), or -1 with the exception Links._send_failed raised (the request
 * no longer in flight) or what is not an Exception (it propagates, as there) */
static int send_tracked(PyObject *lane, PyObject *link, PyObject *frames, PyObject *msg_id) {
  PyObject *lock = PyObject_GetAttr(link, s_lock);
  if (lock == NULL) return -1;
  PyObject *got = PyObject_CallMethodNoArgs(lock, s_acquire);
  if (got == NULL) {
    Py_DECREF(lock);
    return -1;
  }
  Py_DECREF(got);
  int missed = 0, failed = 0;
  int closed = true_attr(link, s_closed);
  if (closed == 0) {
    PyObject *sock = PyObject_GetAttr(link, s_sock);
    PyObject *sargs[3] = {sock, frames, PyTuple_GET_ITEM(lane, S_NOBLOCK)};
    PyObject *sent = sock == NULL ? NULL : PyObject_Vectorcall(PyTuple_GET_ITEM(lane, S_SEND_FRAMES), sargs, 3, NULL);
    if (sent == NULL) {
      failed = 1;
    } else {
      Py_DECREF(sent);
      int watched = true_attr(link, s_watched);
      if (watched > 0) {
        PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(lane, S_READABLE), sock);
        missed = r == NULL ? -1 : PyObject_IsTrue(r);
        Py_XDECREF(r);
      }
      missed = watched < 0 ? -1 : missed;
    }
    Py_XDECREF(sock);
  }
  int rc = released(lock, closed < 0 || missed < 0 ? -1 : 0);
  Py_DECREF(lock);
  if (failed) { /* Channel.send's exception, to Links._send_failed (an Exception; anything else propagates) */
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
    PyObject *exc = taken_exception();
    if (exc == NULL) return -1;
    PyObject *as_sent = PyObject_CallMethodOneArg(link, s_failed_send, exc);
    Py_DECREF(exc);
    if (as_sent == NULL) return -1;
    PyObject *out = PyObject_CallMethodObjArgs(PyTuple_GET_ITEM(lane, S_LINKS), s_send_failed, link, msg_id, as_sent,
                                               NULL);
    Py_DECREF(as_sent);
    Py_XDECREF(out); /* it raises */
    if (out != NULL) PyErr_SetString(PyExc_RuntimeError, "Links._send_failed returned");
    return -1;
  }
  if (rc < 0) return -1;
  if (missed) { /* a message waits that the reader sleeps past: Links._missed(link) */
    PyObject *cb = PyObject_GetAttr(PyTuple_GET_ITEM(lane, S_LINKS), s_missed);
    if (cb == NULL) return -1;
    PyObject *out = cb == Py_None ? Py_NewRef(Py_None) : PyObject_CallOneArg(cb, link);
    Py_DECREF(cb);
    if (out == NULL) return -1;
    Py_DECREF(out);
  }
  return 0;
}

/* Direct mode: Session.task_link's (key, core) for a task, as Session.route chooses its core: for
 * any core (options.wire's core 0) the first running core with the fewest in flight, for CORE_0 or
 * CORE_1 (1, 2: a bit per core) that core when it runs; counted in flight there: 0 with *key and
 * *core (new references); 1: not here (another core value, the core asked for not running or not
 * in this SoC, nothing in flight may go there, a firmware refused our HELLO and the task has
 * buffers: Session.task_link decides and raises what it raises; nothing was changed); -1 with an
 * exception */
static PyObject *s_peers, *s_fw_endpoint, *s_fw_refused, *s_name, *s_fw_suffix, *s_rec_due;
static int direct_link(PyObject *lane, PyObject *msg_id, PyObject *options, int buffers, PyObject **key,
                       PyObject **core) {
  PyObject *wire = PyObject_GetAttr(options, s_wire);
  if (wire == NULL) return -1;
  long want = PyTuple_Check(wire) && PyTuple_GET_SIZE(wire) == 3 && PyLong_CheckExact(PyTuple_GET_ITEM(wire, 1))
                  ? PyLong_AsLong(PyTuple_GET_ITEM(wire, 1)) : -1;
  Py_DECREF(wire);
  if (want == -1 && PyErr_Occurred()) PyErr_Clear(); /* out of a long's range: not a core value */
  if (want < 0 || want > 2) return 1;
  Py_ssize_t pinned = want - 1; /* Core(core).index: -1 for any core */
  PyObject *peers = PyObject_GetAttr(PyTuple_GET_ITEM(lane, S_SESSION), s_peers);
  if (peers == NULL) return -1;
  if (!PyList_CheckExact(peers)) {
    Py_DECREF(peers);
    return 1;
  }
  Py_ssize_t in_flight = 0, best_n = 0;
  PyObject *best = NULL, *best_set = NULL;
  int rc = 0;
  for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(peers); i++) {
    PyObject *p = PyList_GET_ITEM(peers, i);
    PyObject *inflight = PyObject_GetAttr(p, s_inflight);
    if (inflight == NULL || !PySet_CheckExact(inflight)) {
      rc = inflight == NULL ? -1 : 1;
      Py_XDECREF(inflight);
      break;
    }
    Py_ssize_t n = PySet_GET_SIZE(inflight);
    Py_DECREF(inflight); /* the peer holds it */
    in_flight += n;
    PyObject *endpoint = PyObject_GetAttr(p, s_fw_endpoint);
    int alive = endpoint == NULL ? -1 : endpoint == Py_None ? 0 : true_attr(p, s_alive_);
    Py_XDECREF(endpoint);
    if (alive < 0) rc = -1;
    else if (alive && (pinned < 0 ? best == NULL || n < best_n : i == pinned)) {
      Py_XSETREF(best, Py_NewRef(p));
      best_n = n;
    }
  }
  long limit = PyLong_AsLong(PyTuple_GET_ITEM(lane, S_MAX_TASKS));
  if (rc == 0 && (limit == -1 && PyErr_Occurred())) rc = -1;
  if (rc == 0 && (in_flight >= limit || best == NULL)) rc = 1; /* TaskNumExceedLimit, CoreOffline: the Python's */
  if (rc == 0 && buffers) {
    PyObject *refused = PyObject_GetAttr(best, s_fw_refused);
    rc = refused == NULL ? -1 : refused != Py_None;
    Py_XDECREF(refused);
  }
  if (rc == 0) {
    best_set = PyObject_GetAttr(best, s_inflight);
    PyObject *name = best_set == NULL ? NULL : PyObject_GetAttr(best, s_name);
    if (name != NULL && PyUnicode_CheckExact(name) && PySet_Add(best_set, msg_id) == 0) {
      *key = PyUnicode_Concat(name, s_fw_suffix); /* fw_key(peer.name) */
      *core = Py_NewRef(name);
      if (*key == NULL) {
        Py_CLEAR(*core);
        PySet_Discard(best_set, msg_id);
        rc = -1;
      }
    } else {
      rc = name != NULL && !PyErr_Occurred() ? 1 : -1;
    }
    Py_XDECREF(name);
    Py_XDECREF(best_set);
  }
  Py_XDECREF(best);
  Py_DECREF(peers);
  return rc;
}

/* Links.submit's `tracer.rec.poll()`: for a Recorder (its poll not overridden) between two looks at
 * the switch (before `rec.due`), what that poll returns then (`rec.on`) without its call; else the call. 1, 0,
 * or -1. */
static int rec_on(PyObject *lane, PyObject *rec) {
  PyObject *poll = PyObject_GetAttr((PyObject *)Py_TYPE(rec), s_rec_poll); /* the class's function */
  if (poll == NULL) return -1;
  Py_DECREF(poll); /* the class holds it */
  if (poll == PyTuple_GET_ITEM(lane, S_REC_POLL)) {
    double next = float_attr(rec, s_rec_due);
    if (next == -1.0 && PyErr_Occurred()) return -1;
    if (monotonic() < next) return true_attr(rec, s_on);
  }
  PyObject *on = PyObject_CallMethodNoArgs(rec, s_rec_poll);
  int traced = on == NULL ? -1 : PyObject_IsTrue(on);
  Py_XDECREF(on);
  return traced;
}

static PyObject *submit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 7 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != S_SIZE) {
    PyErr_SetString(PyExc_TypeError, "submit(lane, op, inputs, outputs, params, options, out_mems): lane as "
                                     "Client._submit_lane makes it");
    return NULL;
  }
  PyObject *lane = args[0], *op = args[1], *inputs = args[2], *outputs = args[3], *params = args[4],
           *options = args[5], *out_mems = args[6];
  PyObject *links = PyTuple_GET_ITEM(lane, S_LINKS);
  long opv = PyLong_CheckExact(op) ? PyLong_AsLong(op) : -1;
  if (opv < 0 || opv > 0xFFFE) { /* not an operator id (or not exactly an int): Links.submit says so */
    PyErr_Clear();
    PyObject *kw = PyDict_New();
    if (kw == NULL || PyDict_SetItemString(kw, "out_mems", out_mems) < 0) {
      Py_XDECREF(kw);
      return NULL;
    }
    PyObject *fn = PyObject_GetAttr(links, s_submit);
    PyObject *pargs = fn == NULL ? NULL : PyTuple_Pack(5, op, inputs, outputs, params, options);
    PyObject *out = pargs == NULL ? NULL : PyObject_Call(fn, pargs, kw);
    Py_XDECREF(fn);
    Py_XDECREF(pargs);
    Py_DECREF(kw);
    return out;
  }
  PyObject *owned = PyTuple_GET_ITEM(lane, S_OWNED);
  PyObject *got = PyObject_CallMethodNoArgs(owned, s_acquire);
  if (got == NULL) return NULL;
  Py_DECREF(got);
  /* under the owner: Links.submit's `with self.owned:` block */
  PyObject *msg_id = NULL, *frames = NULL, *key = NULL, *core = NULL, *task = NULL, *link = NULL;
  int ready = 0;
  msg_id = PyIter_Next(PyTuple_GET_ITEM(lane, S_IDS));
  if (msg_id == NULL && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "the msg_id counter ended");
  if (msg_id != NULL) frames = task_frames(lane, msg_id, op, inputs, outputs, params, options);
  if (frames != NULL) {
    if (PyTuple_GET_ITEM(lane, S_RELAY_MODE) == Py_True) {
      key = Py_NewRef(k_relay), core = Py_NewRef(s_empty_str);
    } else {
      int buffers = PyObject_IsTrue(inputs);
      buffers = buffers == 0 ? PyObject_IsTrue(outputs) : buffers;
      int here = buffers < 0 ? -1 : direct_link(lane, msg_id, options, buffers, &key, &core);
      PyObject *chosen = here != 1 ? NULL
                                     : PyObject_CallMethodObjArgs(PyTuple_GET_ITEM(lane, S_SESSION), s_task_link, msg_id,
                                                                  options, buffers ? Py_True : Py_False, NULL);
      if (chosen != NULL && PyTuple_Check(chosen) && PyTuple_GET_SIZE(chosen) == 2)
        key = Py_NewRef(PyTuple_GET_ITEM(chosen, 0)), core = Py_NewRef(PyTuple_GET_ITEM(chosen, 1));
      else if (chosen != NULL)
        PyErr_SetString(PyExc_TypeError, "Session.task_link must give (key, core)");
      Py_XDECREF(chosen);
    }
  }
  if (core != NULL) {
    int mems = PyObject_IsTrue(out_mems); /* out_mems or [] */
    PyObject *outs = mems > 0 ? Py_NewRef(out_mems) : mems == 0 ? PyList_New(0) : NULL;
    task = outs == NULL ? NULL : make_task(lane, msg_id, op, outs, core, options);
    Py_XDECREF(outs);
  }
  if (task != NULL) {
    int straight = true_attr(links, s_straight);
    if (straight > 0) {
      link = PyDict_GetItemWithError(PyTuple_GET_ITEM(lane, S_BY_KEY), key);
      Py_XINCREF(link);
    }
    if (link != NULL) {
      PyObject *peer = PyObject_GetAttr(link, s_peer);
      ready = peer == NULL ? -1 : peer == Py_None ? 0 : true_attr(peer, s_alive_);
      Py_XDECREF(peer);
    }
    if (ready > 0 && PyDict_SetItem(PyTuple_GET_ITEM(lane, S_PENDING), msg_id, task) < 0) ready = -1;
    if (straight < 0) ready = -1;
  }
  int rc = released(owned, task == NULL || ready < 0 || PyErr_Occurred() ? -1 : 0);
  PyObject *result = NULL;
  if (rc == 0) { /* traced?  Links.submit: tracer.rec.poll(), then tracer.submit_task */
    PyObject *tracer = PyTuple_GET_ITEM(lane, S_SUBMIT_TRACER);
    PyObject *rec = PyObject_GetAttr(tracer, s_rec);
    int traced = rec == NULL ? -1 : rec_on(lane, rec);
    Py_XDECREF(rec);
    if (traced > 0) {
      PyObject *out = PyObject_CallMethodObjArgs(tracer, s_submit_task, msg_id, op, options, inputs, outputs, NULL);
      traced = out == NULL ? -1 : 0;
      Py_XDECREF(out);
    }
    if (traced < 0) {
      rc = -1;
    } else if (ready) {
      if (Py_IS_TYPE(link, (PyTypeObject *)PyTuple_GET_ITEM(lane, S_CHANNEL))) {
        rc = send_tracked(lane, link, frames, msg_id);
      } else {
        PyObject *out = PyObject_CallMethodObjArgs(links, s_send_tracked, link, frames, msg_id, NULL);
        rc = out == NULL ? -1 : 0;
        Py_XDECREF(out);
      }
      result = rc < 0 ? NULL : Py_NewRef(task);
    } else {
      result = PyObject_CallMethodObjArgs(links, s_send_later, key, frames, task, NULL);
    }
  }
  Py_XDECREF(msg_id);
  Py_XDECREF(frames);
  Py_XDECREF(key);
  Py_XDECREF(core);
  Py_XDECREF(task);
  Py_XDECREF(link);
  return result;
}

/* rpc's lane, in the order Soc._compiled_rpc makes it */
enum {
  R_PYTHON,  /* Soc.rpc bound to the Soc: every call but the usual one */
  R_CLIENT,  /* its Client: .closed, ._submit_c (this submit, bound to its lane; None: the Python one) */
  R_OPTIONS, /* arm_side.task._OPTIONS: task_options' memo, key -> TaskOptions */
  R_SIZE
};

/* Is `name` one of Soc.rpc's own parameters (not a field of the task's options)? */
static int rpc_parameter(PyObject *name) {
  return PyUnicode_Compare(name, k_inputs) == 0 || PyUnicode_Compare(name, k_outputs) == 0 ||
         PyUnicode_Compare(name, k_params) == 0 || PyUnicode_Compare(name, s_options) == 0;
}

static PyObject *rpc(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  (void)self;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
  if (nargs < 1 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != R_SIZE) {
    PyErr_SetString(PyExc_TypeError, "rpc(lane, cmd, ...): lane as Soc._compiled_rpc makes it");
    return NULL;
  }
  PyObject *lane = args[0], *opts = NULL;
  if (nargs == 2 && nkw <= 1) { /* soc.rpc(op) or soc.rpc(op, core=...): task_options' key for it */
    PyObject *key = NULL;
    if (nkw == 0) {
      key = PyTuple_Pack(1, Py_None);
    } else {
      PyObject *name = PyTuple_GET_ITEM(kwnames, 0), *value = args[nargs];
      if (!rpc_parameter(name)) key = PyTuple_Pack(4, Py_None, name, value, (PyObject *)Py_TYPE(value));
    }
    if (key != NULL) {
      opts = PyDict_GetItemWithError(PyTuple_GET_ITEM(lane, R_OPTIONS), key); /* borrowed */
      Py_DECREF(key);
    }
    if (opts == NULL && PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
      PyErr_Clear(); /* an unhashable value: Soc.rpc refuses it */
    }
  }
  if (opts != NULL) { /* Client.submit: closed, then its compiled submit */
    PyObject *client = PyTuple_GET_ITEM(lane, R_CLIENT);
    int closed = true_attr(client, s_closed);
    if (closed < 0) return NULL;
    PyObject *submit_c = closed ? NULL : PyObject_GetAttr(client, s_submit_c);
    if (submit_c == NULL && PyErr_Occurred()) return NULL;
    if (submit_c != NULL && submit_c != Py_None) {
      Py_INCREF(opts);
      PyObject *inputs = PyList_New(0), *outputs = PyList_New(0), *params = PyDict_New(), *out_mems = PyList_New(0);
      PyObject *out = NULL;
      if (inputs != NULL && outputs != NULL && params != NULL && out_mems != NULL) {
        PyObject *call[6] = {args[1], inputs, outputs, params, opts, out_mems};
        out = PyObject_Vectorcall(submit_c, call, 6, NULL);
      }
      Py_XDECREF(inputs);
      Py_XDECREF(outputs);
      Py_XDECREF(params);
      Py_XDECREF(out_mems);
      Py_DECREF(opts);
      Py_DECREF(submit_c);
      return out;
    }
    Py_XDECREF(submit_c);
  }
  return PyObject_Vectorcall(PyTuple_GET_ITEM(lane, R_PYTHON), args + 1, nargs - 1, kwnames);
}

/* wait_for's lane, in the order Client._compiled_wait_for makes it */
enum {
  W_PYTHON,   /* Client.wait_for bound to the client: every wait but the usual one */
  W_READING,  /* its Reading */
  W_LOCAL,    /* arm_side.task._THREAD: each thread's deferred wake-ups (defer_wakes / undefer_wakes) */
  W_IDLE_FD,  /* int: reading.idle's fd, the background thread's epoll set */
  W_LINKS_FD, /* int: reading._links_fd, the links' epoll set (in idle while armed) */
  W_SIZE
};

static PyObject *s_reader, *s_lane_made, *s_turn, *s_shut, *s_armed, *s_followers, *s_close_fds, *s_deferred,
    *s_wait;

/* The links' set armed in the background thread's (EPOLLIN) or disarmed (0), as select.epoll's
 * modify does (the fd as the event's data; Reading made the entry). 0, or -1 with OSError set. */
static int links_armed(int idle, int links, int add) {
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = add ? EPOLLIN : 0;
  ev.data.fd = links;
  if (epoll_ctl(idle, EPOLL_CTL_MOD, links, &ev) == 0) return 0;
  PyErr_SetFromErrno(PyExc_OSError);
  return -1;
}

/* reading.<name>() */
static int call_method(PyObject *obj, PyObject *name) {
  PyObject *out = PyObject_CallMethodNoArgs(obj, name);
  Py_XDECREF(out);
  return out == NULL ? -1 : 0;
}

/* Reading._leave(deferred), then undefer_wakes(), as Reading._lead's finally runs them: the links
 * armed again (or the fds closed, once shut), the turn given up, the deferred wake-ups and the
 * first follower woken. 0, or -1 with an exception (what _leave would raise, at the same step). */
static int leave_lead(PyObject *reading, PyObject *local, PyObject *deferred, int idle, int links) {
  int rc = 0, shut = true_attr(reading, s_shut);
  if (shut < 0) {
    rc = -1;
  } else if (shut) {
    rc = call_method(reading, s_close_fds);
  } else {
    int armed = true_attr(reading, s_armed);
    if (armed < 0 || (!armed && (links_armed(idle, links, 1) < 0 || PyObject_SetAttr(reading, s_armed, Py_True) < 0)))
      rc = -1;
  }
  if (rc == 0 && PyObject_SetAttr(reading, s_reader, zero) < 0) rc = -1;
  if (rc == 0) {
    PyObject *turn = PyObject_GetAttr(reading, s_turn);
    rc = turn == NULL ? -1 : call_method(turn, s_release);
    Py_XDECREF(turn);
  }
  while (rc == 0 && PyList_GET_SIZE(deferred) > 0) { /* while deferred: deferred.pop().wake() */
    Py_ssize_t last = PyList_GET_SIZE(deferred) - 1;
    PyObject *waker = PyList_GET_ITEM(deferred, last);
    Py_INCREF(waker);
    rc = PyList_SetSlice(deferred, last, last + 1, NULL) < 0 ? -1 : call_method(waker, s_wake);
    Py_DECREF(waker);
  }
  if (rc == 0) {
    PyObject *followers = PyObject_GetAttr(reading, s_followers);
    if (followers == NULL) {
      rc = -1;
    } else {
      int some = PyObject_IsTrue(followers);
      PyObject *first = some > 0 ? PySequence_GetItem(followers, 0) : NULL;
      rc = some < 0 || (some > 0 && (first == NULL || call_method(first, s_wake) < 0)) ? -1 : 0;
      Py_XDECREF(first);
      Py_DECREF(followers);
    }
  }
  /* undefer_wakes(): _THREAD.__dict__.pop("deferred", None) */
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (PyObject_DelAttr(local, s_deferred) < 0) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
    } else {
      Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
      return -1;
    }
  }
  PyErr_Restore(type, value, tb);
  return rc;
}

static PyObject *wait_for(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != W_SIZE) {
    PyErr_SetString(PyExc_TypeError, "wait_for(lane, req, timeout_s): lane as Client._compiled_wait_for makes it");
    return NULL;
  }
  PyObject *lane = args[0], *req = args[1], *timeout = args[2];
  PyObject *reading = PyTuple_GET_ITEM(lane, W_READING), *local = PyTuple_GET_ITEM(lane, W_LOCAL);
  int idle = (int)PyLong_AsLong(PyTuple_GET_ITEM(lane, W_IDLE_FD));
  int links = (int)PyLong_AsLong(PyTuple_GET_ITEM(lane, W_LINKS_FD));
  if (PyErr_Occurred()) return NULL;
  int done = truth(req, fast(req), F_DONE);
  if (done != 0) return done < 0 ? NULL : Py_NewRef(Py_None);
  /* the usual wait: a timeout that is a number (or none), this thread not the one that reads, the
   * links' lane current and the turn free; anything else is Client.wait_for's Python, whole */
  int usual = timeout == Py_None || PyFloat_CheckExact(timeout) || PyLong_CheckExact(timeout);
  double seconds = usual && timeout != Py_None ? PyFloat_AsDouble(timeout) : 0.0;
  if (seconds == -1.0 && PyErr_Occurred()) return NULL;
  PyObject *me = PyLong_FromUnsignedLong(PyThread_get_thread_ident()), *made = NULL, *turn = NULL;
  if (me == NULL) return NULL;
  if (usual) {
    PyObject *reader = PyObject_GetAttr(reading, s_reader);
    usual = reader == NULL ? -1 : !PyObject_RichCompareBool(reader, me, Py_EQ);
    Py_XDECREF(reader);
  }
  if (usual > 0) {
    made = PyObject_GetAttr(reading, s_lane_made);
    usual = made == NULL ? -1 : made == Py_None || lane_ok(made) < 0 ? (PyErr_Clear(), 0) : lane_current(made);
  }
  if (usual > 0) {
    turn = PyObject_GetAttr(reading, s_turn);
    PyObject *got = turn == NULL ? NULL : PyObject_CallMethodOneArg(turn, s_acquire, Py_False);
    usual = got == NULL ? -1 : got == Py_True;
    Py_XDECREF(got);
    if (usual > 0) { /* Reading.wait: a turn taken once shut is given back (its Python raises) */
      int shut = true_attr(reading, s_shut);
      if (shut != 0) {
        usual = shut < 0 ? -1 : 0;
        if (call_method(turn, s_release) < 0) usual = -1;
      }
    }
  }
  Py_XDECREF(turn);
  if (usual <= 0) {
    Py_XDECREF(made);
    Py_DECREF(me);
    return usual < 0 ? NULL : PyObject_Vectorcall(PyTuple_GET_ITEM(lane, W_PYTHON), args + 1, 2, NULL);
  }
  /* this thread holds the turn: Reading._lead, its loop the compiled one (lead, above) */
  PyObject *deadline = timeout == Py_None ? Py_NewRef(Py_None) : PyFloat_FromDouble(monotonic() + seconds);
  PyObject *deferred = deadline == NULL ? NULL : PyList_New(0), *closed = NULL, *out = NULL;
  int ok = deferred != NULL && PyObject_SetAttr(reading, s_reader, me) == 0 &&
           PyObject_SetAttr(local, s_deferred, deferred) == 0; /* reader = me; defer_wakes() */
  if (ok) {                                                    /* _arm(False), without its call */
    int armed = true_attr(reading, s_armed);
    ok = armed == 0 || (armed > 0 && links_armed(idle, links, 0) == 0 && PyObject_SetAttr(reading, s_armed, Py_False) == 0);
  }
  if (ok) closed = PyObject_GetAttr(reading, s_closed);
  if (closed != NULL) {
    PyObject *largs[6] = {reading, req, deadline, made, deferred, closed};
    out = lead(NULL, largs, 6);
  }
  if (deferred != NULL) { /* finally: _leave(deferred), undefer_wakes() */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (leave_lead(reading, local, deferred, idle, links) < 0) {
      Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb); /* the finally's exception is the one raised */
      Py_CLEAR(out);
    } else {
      PyErr_Restore(type, value, tb);
    }
  }
  PyObject *result = NULL;
  if (out != NULL) { /* ended: done, else Reading.wait goes on from here (its timeout's error, or the close's) */
    done = truth(req, fast(req), F_DONE);
    result = done < 0 ? NULL
             : done  ? Py_NewRef(Py_None)
                     : PyObject_CallMethodObjArgs(reading, s_wait, req, timeout, me, deadline, NULL);
  }
  Py_XDECREF(out);
  Py_XDECREF(closed);
  Py_XDECREF(deferred);
  Py_XDECREF(deadline);
  Py_DECREF(made);
  Py_DECREF(me);
  return result;
}

static PyMethodDef methods[] = {
    {"lead", (PyCFunction)(void (*)(void))lead, METH_FASTCALL,
     "lead(reading, req, deadline, lane, deferred, closed): Reading._lead's loop"},
    {"round", (PyCFunction)(void (*)(void))round_, METH_FASTCALL, "round(reading, lane, woken): Reading._round"},
    {"read", (PyCFunction)(void (*)(void))read_, METH_FASTCALL, "read(lane, link): what link brought, dispatched"},
    {"submit", (PyCFunction)(void (*)(void))submit, METH_FASTCALL,
     "submit(lane, op, inputs, outputs, params, options, out_mems): Links.submit for the blocking client"},
    {"rpc", (PyCFunction)(void (*)(void))rpc, METH_FASTCALL | METH_KEYWORDS,
     "rpc(lane, cmd, ...): Soc.rpc's usual call (an op, at most one option as a keyword) for the blocking client"},
    {"wait_for", (PyCFunction)(void (*)(void))wait_for, METH_FASTCALL,
     "wait_for(lane, req, timeout_s): Client.wait_for's usual wait (the turn free): Reading.wait's lead in one call"},
    {"complete", (PyCFunction)(void (*)(void))complete_, METH_FASTCALL,
     "complete(req, body, hdr, raw, task_type, tracer, board_models): a Task completed as _complete does"},
    {"unpack_body", unpack_body_, METH_O, "unpack_body(frame): wire.unpack_body's dict made here, or None"},
    {"pack_body", pack_body_, METH_O, "pack_body(body): wire.pack_body's bytes made here, or None"},
    {"parse_header", (PyCFunction)(void (*)(void))parse_header_, METH_FASTCALL,
     "parse_header(frame, header_type, command): Header.parse's header of a reply of `command` made here, or None"},
    {"pack_header", (PyCFunction)(void (*)(void))pack_header_, METH_FASTCALL,
     "pack_header(command, msg_id, op, priority, core, custom_id): header.pack's bytes made here, or None"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "arm_side._taskpath",
                                    "the blocking client's per-task path in C (arm_side.reading)", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__taskpath(void) {
#define INTERN(var, text) \
  if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL;
  INTERN(s_done, "_done")
  INTERN(s_next_tick, "next_tick")
  INTERN(s_wake, "wake")
  INTERN(s_drain, "drain")
  INTERN(s_last_heard, "last_heard")
  INTERN(s_acquire, "acquire")
  INTERN(s_release, "release")
  INTERN(s_complete, "_complete")
  INTERN(s_round, "_round")
  INTERN(s_reader_error, "_reader_error")
  INTERN(s_version, "version")
  INTERN(s_generation, "generation")
  INTERN(s_tick, "tick")
  INTERN(s_peer, "peer")
  INTERN(s_liveness, "liveness")
  INTERN(s_inflight, "inflight")
  INTERN(s_cb_lock, "_cb_lock")
  INTERN(s_body, "body")
  INTERN(s_error, "error")
  INTERN(s_header, "header")
  INTERN(s_raw, "raw")
  INTERN(s_completed_at, "completed_at")
  INTERN(s_callbacks, "_callbacks")
  INTERN(s_values, "values")
  INTERN(s_core, "core")
  INTERN(s_exec_us, "exec_us")
  INTERN(s_board_us, "board_us")
  INTERN(s_board_model, "board_model")
  INTERN(s_queue_us, "queue_us")
  INTERN(s_outputs, "outputs")
  INTERN(s_rec, "rec")
  INTERN(s_on, "on")
  INTERN(s_run_callback, "_run_callback")
  INTERN(k_values, "values")
  INTERN(k_core, "core")
  INTERN(k_exec_us, "exec_us")
  INTERN(k_board_us, "board_us")
  INTERN(k_board_model, "board_model")
  INTERN(s_wire, "wire")
  INTERN(s_owner, "owner")
  INTERN(s_task_link, "task_link")
  INTERN(s_straight, "straight")
  INTERN(s_alive_, "_alive")
  INTERN(s_rec_poll, "poll")
  INTERN(s_peers, "peers")
  INTERN(s_fw_endpoint, "fw_endpoint")
  INTERN(s_fw_refused, "fw_refused")
  INTERN(s_name, "name")
  INTERN(s_fw_suffix, ".fw")
  INTERN(s_rec_due, "due")
  INTERN(s_submit_task, "submit_task")
  INTERN(s_missed, "_missed")
  INTERN(s_send_later, "_send_later")
  INTERN(s_send_tracked, "_send_tracked")
  INTERN(s_send_failed, "_send_failed")
  INTERN(s_failed_send, "failed_send")
  INTERN(s_submit, "submit")
  INTERN(s_lock, "lock")
  INTERN(s_closed, "closed")
  INTERN(s_sock, "sock")
  INTERN(s_watched, "watched")
  INTERN(s_client, "client")
  INTERN(s_msg_id, "msg_id")
  INTERN(s_op, "op")
  INTERN(s_options, "options")
  INTERN(s_released, "released")
  INTERN(s_submitted_at, "submitted_at")
  INTERN(k_inputs, "inputs")
  INTERN(k_outputs, "outputs")
  INTERN(k_params, "params")
  INTERN(s_submit_c, "_submit_c")
  INTERN(s_reader, "reader")
  INTERN(s_lane_made, "_lane_made")
  INTERN(s_turn, "turn")
  INTERN(s_shut, "shut")
  INTERN(s_armed, "armed")
  INTERN(s_followers, "followers")
  INTERN(s_close_fds, "_close_fds")
  INTERN(s_deferred, "deferred")
  INTERN(s_wait, "wait")
  INTERN(k_owner, "owner")
  INTERN(k_relay, "relay")
  INTERN(s_empty_str, "")
  if ((empty_tuple = PyTuple_New(0)) == NULL || (float_zero = PyFloat_FromDouble(0.0)) == NULL) return NULL;
  if ((zero = PyLong_FromLong(0)) == NULL || (inf = PyFloat_FromDouble(INFINITY)) == NULL) return NULL;
#undef INTERN
  return PyModule_Create(&module);
}
