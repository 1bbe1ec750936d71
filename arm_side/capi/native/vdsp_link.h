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
 * tcp needs CURVE (§16), which this core does not do yet: a tcp endpoint is refused.
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

typedef struct {
  void *sock;          /* the DEALER */
  void *monitor;       /* PAIR receiving its monitor's events */
  int dir_fd;          /* the checked directory the connection goes through (-1: none) */
  int up, failed, ended;
  char endpoint[VDSP_ENDPOINT_MAX];
} vdsp_link;

/* The relay's endpoint as above into `out`; INVALID_ARGUMENT for a refused runtime directory or a
 * path past 107 characters, RELAY_UNAVAILABLE (saying to run `vdsp up -d`) when no SoC can be up
 * there. `rt_out` (may be NULL, VDSP_ENDPOINT_MAX bytes): the runtime dir, "" with an override. */
int vdsp_link_relay_endpoint(char *out, char *rt_out, vdsp_err *err);

/* Open `link` to `endpoint` on `context`: INVALID_ARGUMENT for what it cannot connect to (tcp, a
 * path too long), RELAY_UNAVAILABLE when the directory is gone or refused or no socket is there. */
int vdsp_link_open(void *context, const char *endpoint, vdsp_link *link, vdsp_err *err);

/* Read the monitor's pending events into up/failed/ended; 1 if the link is dead (it will never
 * carry a message again), else 0. */
int vdsp_link_poll_events(vdsp_link *link);

/* Close the socket, the monitor and the directory (a zeroed or closed link: nothing). */
void vdsp_link_close(vdsp_link *link);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_LINK_H_ */
