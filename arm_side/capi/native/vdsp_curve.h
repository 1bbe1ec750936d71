/*
 * vdsp_curve.h: the CURVE keys of a client on tcp (PROTOCOL.md §16), in C: what
 * vdsp_board/identity/curve.py does for the Python SDK, with the same rules, codes and messages.
 *
 * The key directory: $VDSP_KEYS_DIR, else <runtime dir>/keys. This client's pair: the
 * `.key_secret` file $VDSP_CLIENT_KEY, else the key directory's client.key_secret: a regular file
 * of ours with no group or world access, opened without following a symlink (FILE_NOT_FOUND when
 * it does not exist, INVALID_ARGUMENT otherwise). The SoC's public key: $VDSP_SERVER_KEY, else the
 * key directory's server.key (a symlink is followed there, as the Python SDK does; FILE_NOT_FOUND
 * when it cannot be read or names no public key).
 *
 * A key file is the zcert text format (§16): lines; the first `public-key = "…"` and
 * `secret-key = "…"` lines count, blanks and quotes around the value stripped; a file of more
 * than VDSP_CURVE_FILE_MAX bytes is refused. A key is 40 characters of Z85 (ZeroMQ RFC 32).
 */
#ifndef VDSP_CURVE_H_
#define VDSP_CURVE_H_

#include "vdsp_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VDSP_CURVE_KEY_LEN 40        /* Z85 characters of a key */
#define VDSP_CURVE_FILE_MAX 65536    /* bytes of a key file read at most */

typedef struct {
  char public_key[VDSP_CURVE_KEY_LEN + 1];
  char secret_key[VDSP_CURVE_KEY_LEN + 1];
  char server_key[VDSP_CURVE_KEY_LEN + 1];   /* the SoC's, from server.key */
  char client_file[4096];                    /* the .key_secret file the pair came from */
} vdsp_curve_keys;

/* This client's pair and the SoC's server key, as above; 0 or a code. `server` 0: the server key
 * is not read (a firmware's own key is given by its core). */
int vdsp_curve_load(vdsp_curve_keys *keys, int server, vdsp_err *err);

/* 1 if `key` is 40 characters of the Z85 alphabet. */
int vdsp_curve_valid(const char *key);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_CURVE_H_ */
