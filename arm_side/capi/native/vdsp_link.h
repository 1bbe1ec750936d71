/*
 * vdsp_link.h: where a client finds the relay and how its ZeroMQ socket connects there, in C
 * (what vdsp_board/processes/rundir.py and vdsp_board/sockets/ipclink.py do for the Python SDK; PROTOCOL.md §2).
 *
 * The endpoint: $VDSP_RELAY_ENDPOINT, else ipc://<sockets dir>/relay.sock of the runtime
 * directory ($VDSP_RUNTIME_DIR, else $XDG_RUNTIME_DIR/vdsp when $XDG_RUNTIME_DIR is an existing
 * directory, else /tmp/vdsp-<uid>), which must be a real directory of ours with no group or world
 * access (refused otherwise, saying how to fix it). A client makes nothing: a runtime directory
 * that does not exist means no SoC is up there. The sockets dir is the runtime directory when its
 * path has at most 90 characters, else what its `sockets` symlink names: an absolute path of at
 * most 90 characters to a private directory of ours (§2.2); no usable link means no SoC is up.
 *
 * The link (ipc): one DEALER, LINGER 0, RECONNECT_IVL -1 (it connects once, §2.1), high water
 * marks 100000, connected through its directory opened with O_PATH|O_DIRECTORY|O_NOFOLLOW and
 * checked ours and private: ipc:///proc/self/fd/N/<name>, so the connection reaches a socket in
 * the directory checked whatever becomes of the path (without /proc: the path, then the directory
 * there checked to be the one opened). An abstract name (ipc://@name) connects once, unchecked.
 * A socket monitor (ZMQ_EVENT_CONNECTED, _CLOSED, _DISCONNECTED, over inproc) tells when the one
 * attempt failed (nothing listens) or the connection ended: the link is then dead for good.
 *
 * The link (tcp): a CURVE client (§16: our pair and the server's key, vdsp_curve.h), RECONNECT_IVL
 * 50 ms: libzmq connects again by itself, so a tcp link is never dead. Its monitor also hears the
 * handshakes (arm_side/channel.py's Watch): `lost` once a connection whose handshake had succeeded
 * closed (its server went away); `refusal` once the server refused our key (HANDSHAKE_FAILED_AUTH),
 * or once VDSP_LINK_HANDSHAKE_FAILURES handshakes failed without a word over
 * VDSP_LINK_HANDSHAKE_FAILING_MS at least, none succeeding (a wrong server key looks so; a server
 * also closes handshakes beyond those it keeps at once, §3.4).
 */
#ifndef VDSP_LINK_H_
#define VDSP_LINK_H_

#include <stddef.h>

#include "vdsp_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VDSP_IPC_PATH_MAX 107        /* sun_path less its NUL */
#define VDSP_SHORT_ENOUGH 90         /* a runtime dir this long holds its sockets itself */
#define VDSP_ENDPOINT_MAX 512
#define VDSP_LINK_HANDSHAKE_FAILURES 5
#define VDSP_LINK_HANDSHAKE_FAILING_MS 5000
#define VDSP_LINK_REFUSAL_MAX 200

typedef struct {
  void *sock;          /* the DEALER */
  void *monitor;       /* PAIR receiving its monitor's events */
  int dir_fd;          /* the checked directory the connection goes through (-1: none) */
  int up, failed, ended;
  int tcp;             /* a CURVE link: connected again by libzmq, never dead */
  int handshook;       /* tcp: the connection's handshake succeeded (cleared when it closes) */
  int lost;            /* tcp: a connection that had handshook closed (vdsp_link_take_lost clears it) */
  int failures;        /* tcp: handshakes failed without a word since the last success */
  long long failing_since_ms;
  char refusal[VDSP_LINK_REFUSAL_MAX];   /* tcp: why the server refused us, "" while it did not */
  char endpoint[VDSP_ENDPOINT_MAX];
} vdsp_link;



/* The relay's endpoint as above into `out`; INVALID_ARGUMENT for a refused runtime directory or a
 * path past 107 characters, RELAY_UNAVAILABLE (saying to run `vdsp up -d`) when no SoC can be up
 * there. `rt_out` (may be NULL, VDSP_ENDPOINT_MAX bytes): the runtime dir, "" with an override. */
int vdsp_link_relay_endpoint(char *out, char *rt_out, vdsp_err *err);

typedef struct {
  char name[32];
  char endpoint[VDSP_ENDPOINT_MAX];
} vdsp_link_core;

/* Direct mode: each core's control endpoint, in core order (rundir.core_endpoints): the items of
 * $VDSP_CORE_ENDPOINTS (name=url, comma-separated: INVALID_ARGUMENT for a malformed one), else
 * vdsp0 and vdsp1 at ipc://<sockets dir>/<name>.sock (CORE_OFFLINE when no SoC can be up there). */
int vdsp_link_core_endpoints(vdsp_link_core *cores, size_t max, size_t *n, vdsp_err *err);

/* A firmware endpoint a core announced, connectable (§2.2): a wildcard tcp host replaced by the
 * host of `via`, the control endpoint it was reached through; into `out` (VDSP_ENDPOINT_MAX). */
void vdsp_link_connectable(const char *announced, const char *via, char *out);

/* The runtime directory ($VDSP_RUNTIME_DIR, else $XDG_RUNTIME_DIR/vdsp, else /tmp/vdsp-<uid>),
 * unchecked, into `out` (`len` bytes); INVALID_ARGUMENT when it does not fit. */
int vdsp_link_runtime_dir(char *out, size_t len, vdsp_err *err);

/* Open `link` to `endpoint` on `context`: INVALID_ARGUMENT for what it cannot connect to (not ipc
 * or tcp, a path too long, a tcp endpoint without `keys`, a `server_key` that is no Z85 key),
 * RELAY_UNAVAILABLE when the directory is gone or refused or no socket is there. tcp: `keys` is
 * our pair (a vdsp_curve_keys), `server_key` the server's own key (a firmware's), NULL or "" for
 * the SoC's (keys->server_key). */
int vdsp_link_open(void *context, const char *endpoint, const void *keys, const char *server_key, vdsp_link *link,
                   vdsp_err *err);

/* tcp: 1 if a connection that had handshook closed since the last call (its server went away). */
int vdsp_link_take_lost(vdsp_link *link);

/* Read the monitor's pending events into up/failed/ended; 1 if the link is dead (it will never
 * carry a message again), else 0. */
int vdsp_link_poll_events(vdsp_link *link);

/* Close the socket, the monitor and the directory (a zeroed or closed link: nothing). */
void vdsp_link_close(vdsp_link *link);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_LINK_H_ */
