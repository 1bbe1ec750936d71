/*
 * arm_side._taskpath: the blocking client's per-task path in C, for the compiled build
 * (vdsp_sim/native_build.py compiles it; without it the same steps run as the Python of
 * arm_side.reading, which stays the reference and the pure build's path).
 *
 * Why: a sequential task's client runs this path once per task, on caches the relay's and the
 * firmwares' work evicted while it slept; as bytecode it was about a tenth of the task's client
 * CPU. Here it costs the calls it makes: the sleep (epoll_wait, the GIL let go), the link's
 * drain, and the protocol's and the task's own Python or compiled functions (header parse, body
 * unpack, the request's completion), which stay the one place that knows each.
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
 * Not here: the submit. Links.submit's usual case written in C the same way (the request made,
 * tracked and sent in one call) saved 1.3 µs of a sequential task's ~66 and nothing in a window
 * of 32 (paired A/B, 50 rounds): its cost is the calls it makes (the Task's making, the send).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

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

/* One message of a link of `peer`: a RESULT that completes a request in flight is handled here
 * as Session.receive handles it; any other goes to Session.receive. The owner is held. 0, or -1
 * with an exception. */
static int one_message(PyObject *lane, PyObject *peer, PyObject *frames, PyObject *now) {
  if (PyList_CheckExact(frames) && PyList_GET_SIZE(frames) >= 2 && PyBytes_CheckExact(PyList_GET_ITEM(frames, 1))) {
    PyObject *hdr = PyObject_CallOneArg(PyTuple_GET_ITEM(lane, L_PARSE), PyList_GET_ITEM(frames, 0));
    if (hdr == NULL) {
      if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
      PyErr_Clear(); /* malformed: Session.receive logs and drops it */
    } else if (PyTuple_Check(hdr) && PyTuple_GET_SIZE(hdr) >= 5 && PyTuple_GET_ITEM(hdr, 0) == PyTuple_GET_ITEM(lane, L_RESULT)) {
      PyObject *body = PyObject_CallOneArg(PyTuple_GET_ITEM(lane, L_UNPACK), PyList_GET_ITEM(frames, 1));
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
            PyObject *out = raw == NULL ? NULL
                                        : PyObject_CallMethodObjArgs(req, s_complete, body, Py_None, hdr, raw, NULL);
            Py_XDECREF(raw);
            if (out == NULL) rc = -1;
            Py_XDECREF(out);
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

/* What `link` brought, dispatched under the owner (Links.dispatch). 0, or -1 with an exception. */
static int read_link(PyObject *lane, PyObject *link, PyObject *now) {
  PyObject *incoming = PyObject_CallMethodNoArgs(link, s_drain);
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
    /* released whatever happened, keeping the exception raised in the loop (as `with` does) */
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *released = PyObject_CallMethodNoArgs(owned, s_release);
    if (released == NULL) {
      if (exc_type != NULL) {
        PyErr_Clear();
      } else {
        rc = -1;
      }
    }
    Py_XDECREF(released);
    if (exc_type != NULL) PyErr_Restore(exc_type, exc_value, exc_tb);
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

/* A round's Exception goes to reading._reader_error(exc) (logged); 0, or -1 when it is not an
 * Exception (KeyboardInterrupt, SystemExit: they propagate) or the report itself failed. */
static int reported(PyObject *reading) {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
  PyObject *exc_type, *exc_value, *exc_tb;
  PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  PyErr_NormalizeException(&exc_type, &exc_value, &exc_tb);
  if (exc_tb != NULL && exc_value != NULL) PyException_SetTraceback(exc_value, exc_tb);
  PyObject *out = PyObject_CallMethodOneArg(reading, s_reader_error, exc_value != NULL ? exc_value : Py_None);
  Py_XDECREF(exc_type);
  Py_XDECREF(exc_value);
  Py_XDECREF(exc_tb);
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
    int done = true_attr(req, s_done);
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

static PyMethodDef methods[] = {
    {"lead", (PyCFunction)(void (*)(void))lead, METH_FASTCALL,
     "lead(reading, req, deadline, lane, deferred, closed): Reading._lead's loop"},
    {"round", (PyCFunction)(void (*)(void))round_, METH_FASTCALL, "round(reading, lane, woken): Reading._round"},
    {"read", (PyCFunction)(void (*)(void))read_, METH_FASTCALL, "read(lane, link): what link brought, dispatched"},
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
#undef INTERN
  return PyModule_Create(&module);
}
