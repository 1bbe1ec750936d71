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
  L_TASK,       /* arm_side.task.Task: completed here (complete_task), a subclass by its own _complete */
  L_TRACER,     /* the client's tracer: .rec.on (a trace being recorded: the task's _complete records it) */
  L_BOARD_MODELS, /* arm_side.task.BOARD_MODELS */
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

/* obj.name = value, stealing value (NULL: -1, the exception already set) */
static int set_stolen(PyObject *obj, PyObject *name, PyObject *value) {
  if (value == NULL) return -1;
  int rc = PyObject_SetAttr(obj, name, value);
  Py_DECREF(value);
  return rc;
}

/* Task._on_complete's fields from `body` and `hdr` (the lock held). 0 or -1. */
static int task_fields(PyObject *req, PyObject *body, PyObject *hdr, PyObject *board_models) {
  if (set_stolen(req, s_values, body_get(body, k_values, PyDict_New())) < 0) return -1;
  if (set_stolen(req, s_core, body_get(body, k_core, PyObject_GetAttr(req, s_core))) < 0) return -1;
  Py_INCREF(zero);
  if (set_stolen(req, s_exec_us, body_get(body, k_exec_us, zero)) < 0) return -1;
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
    if (ok > 0 && (set_stolen(req, s_board_us, PyNumber_Float(us)) < 0 || PyObject_SetAttr(req, s_board_model, model) < 0))
      rc = -1;
    Py_XDECREF(model);
  }
  Py_DECREF(us);
  if (rc == 0 && PyTuple_Check(hdr) && PyTuple_GET_SIZE(hdr) > 5) { /* if self.header: the queue's µs */
    PyObject *queued = PyTuple_GET_ITEM(hdr, 5);
    int positive = PyObject_RichCompareBool(queued, zero, Py_GT);
    if (positive < 0 || PyObject_SetAttr(req, s_queue_us, positive ? queued : zero) < 0) rc = -1;
  } else if (rc == 0 && PyObject_IsTrue(hdr)) {
    PyErr_SetString(PyExc_TypeError, "a reply's header must be a Header");
    rc = -1;
  }
  return rc;
}

static int complete_task(PyObject *req, PyObject *body, PyObject *hdr, PyObject *raw, PyObject *task_type,
                         PyObject *tracer, PyObject *board_models) {
  if ((PyObject *)Py_TYPE(req) != task_type || !PyDict_CheckExact(body) || !PyList_CheckExact(raw)) return 2;
  PyObject *outputs = PyObject_GetAttr(req, s_outputs);
  if (outputs == NULL) return -1;
  int some = PyObject_IsTrue(outputs);
  Py_DECREF(outputs);
  if (some != 0) return some < 0 ? -1 : 2;
  PyObject *rec = PyObject_GetAttr(tracer, s_rec);
  int on = rec == NULL ? -1 : true_attr(rec, s_on);
  Py_XDECREF(rec);
  if (on != 0) return on < 0 ? -1 : 2;
  PyObject *lock = PyObject_GetAttr(req, s_cb_lock);
  if (lock == NULL) return -1;
  PyObject *got = PyObject_CallMethodNoArgs(lock, s_acquire);
  if (got == NULL) {
    Py_DECREF(lock);
    return -1;
  }
  Py_DECREF(got);
  PyObject *callbacks = NULL;
  int rc = true_attr(req, s_done);
  if (rc == 0) {
    rc = 1;
    /* self.body, self.error, self.header, self.raw = body or {}, error, header, raw or [] */
    if (PyObject_SetAttr(req, s_body, body) < 0 || PyObject_SetAttr(req, s_error, Py_None) < 0 ||
        PyObject_SetAttr(req, s_header, hdr) < 0 ||
        (PyList_GET_SIZE(raw) ? PyObject_SetAttr(req, s_raw, raw) : set_stolen(req, s_raw, PyList_New(0))) < 0 ||
        set_stolen(req, s_completed_at, PyFloat_FromDouble(monotonic())) < 0 || /* time.perf_counter()'s clock */
        task_fields(req, body, hdr, board_models) < 0 || PyObject_SetAttr(req, s_done, Py_True) < 0)
      rc = -1;
    if (rc == 1) {
      callbacks = PyObject_GetAttr(req, s_callbacks);
      if (callbacks == NULL || set_stolen(req, s_callbacks, PyList_New(0)) < 0) rc = -1;
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

static PyMethodDef methods[] = {
    {"lead", (PyCFunction)(void (*)(void))lead, METH_FASTCALL,
     "lead(reading, req, deadline, lane, deferred, closed): Reading._lead's loop"},
    {"round", (PyCFunction)(void (*)(void))round_, METH_FASTCALL, "round(reading, lane, woken): Reading._round"},
    {"read", (PyCFunction)(void (*)(void))read_, METH_FASTCALL, "read(lane, link): what link brought, dispatched"},
    {"complete", (PyCFunction)(void (*)(void))complete_, METH_FASTCALL,
     "complete(req, body, hdr, raw, task_type, tracer, board_models): a Task completed as _complete does"},
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
  if ((zero = PyLong_FromLong(0)) == NULL || (inf = PyFloat_FromDouble(INFINITY)) == NULL) return NULL;
#undef INTERN
  return PyModule_Create(&module);
}
