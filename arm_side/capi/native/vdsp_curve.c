/* vdsp_curve.c: see vdsp_curve.h. The rules and messages are those of vdsp_board/identity/curve.py
 * (load_pair, load_public, client_key_file) and of the zcert reader it uses. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vdsp_curve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vdsp_link.h"

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v != NULL && *v ? v : NULL;
}

int vdsp_curve_valid(const char *key) {
  static const char z85[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  if (strlen(key) != VDSP_CURVE_KEY_LEN) return 0;
  for (const char *p = key; *p; p++)
    if (strchr(z85, *p) == NULL) return 0;
  return 1;
}

/* The text of the file open at `fd` (at most VDSP_CURVE_FILE_MAX bytes) into a new buffer. */
static int read_all(int fd, const char *path, char **out, vdsp_err *err) {
  char *buf = malloc(VDSP_CURVE_FILE_MAX + 1);
  if (buf == NULL) return vdsp_fail(err, VDSP_E_OUT_OF_MEMORY, "out of memory");
  size_t n = 0;
  for (;;) {
    ssize_t got = read(fd, buf + n, VDSP_CURVE_FILE_MAX + 1 - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int e = errno;
      free(buf);
      return vdsp_fail(err, VDSP_E_FILE_NOT_FOUND, "cannot read key file %s: %s", path, strerror(e));
    }
    if (got == 0) break;
    n += (size_t)got;
    if (n > VDSP_CURVE_FILE_MAX) {
      free(buf);
      return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "key file %s is larger than %d bytes: no key file is", path,
                       VDSP_CURVE_FILE_MAX);
    }
  }
  buf[n] = '\0';
  *out = buf;
  return 0;
}

/* The value of the first line `name = "value"` (after blanks; comments skipped) into `out`
 * (VDSP_CURVE_KEY_LEN + 1 bytes): 1 if found, 0 if not; a value of another length is kept
 * truncated to "" so that the caller refuses it. */
static int find_key(const char *text, const char *name, char *out) {
  size_t name_len = strlen(name);
  for (const char *line = text; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    const char *p = line, *stop = line + len;
    while (p < stop && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    if (p < stop && *p != '#' && (size_t)(stop - p) >= name_len && memcmp(p, name, name_len) == 0) {
      const char *eq = memchr(p, '=', (size_t)(stop - p));
      if (eq != NULL) {
        const char *v = eq + 1, *w = stop;
        while (v < w && strchr(" \t\r'\"", *v) != NULL) v++;
        while (w > v && strchr(" \t\r'\"", w[-1]) != NULL) w--;
        size_t n = (size_t)(w - v);
        if (n == VDSP_CURVE_KEY_LEN) {
          memcpy(out, v, n);
          out[n] = '\0';
        } else {
          out[0] = '\0';
        }
        return 1;
      }
    }
    line = end != NULL ? end + 1 : stop;
  }
  return 0;
}

static int bad_key(const char *path, const char *which, vdsp_err *err) {
  return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "the %s in key file %s is not a Z85 CURVE key (40 characters)",
                   which, path);
}

/* curve.load_pair: the secret file must be a regular file of ours, mode 0600, no symlink. */
static int load_pair(const char *path, vdsp_curve_keys *keys, vdsp_err *err) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  struct stat st;
  if (fd < 0 && errno == ENOENT)
    return vdsp_fail(err, VDSP_E_FILE_NOT_FOUND, "key file %s does not exist (create keys with 'vdsp keys init')",
                     path);
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
    if (fd >= 0) close(fd);
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "secret key file %s must be a regular file of yours with mode "
                     "0600", path);
  }
  char *text = NULL;
  int rc = read_all(fd, path, &text, err);
  close(fd);
  if (rc != 0) return rc;
  int has_public = find_key(text, "public-key", keys->public_key);
  int has_secret = find_key(text, "secret-key", keys->secret_key);
  free(text);
  if (!has_public)
    return vdsp_fail(err, VDSP_E_FILE_NOT_FOUND, "cannot read public key %s: No public key found in %s", path, path);
  if (!has_secret) return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "%s holds no secret key", path);
  if (!vdsp_curve_valid(keys->public_key)) return bad_key(path, "public key", err);
  if (!vdsp_curve_valid(keys->secret_key)) return bad_key(path, "secret key", err);
  snprintf(keys->client_file, sizeof keys->client_file, "%s", path);
  return 0;
}

/* curve.load_public: FILE_NOT_FOUND when it cannot be read or names no public key. */
static int load_public(const char *path, char *out, vdsp_err *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  struct stat st;
  if (fd < 0)
    return vdsp_fail(err, VDSP_E_FILE_NOT_FOUND, "cannot read public key %s: %s", path,
                     errno == ENOENT ? "Invalid certificate file" : strerror(errno));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return vdsp_fail(err, VDSP_E_FILE_NOT_FOUND, "cannot read public key %s: not a regular file", path);
  }
  char *text = NULL;
  int rc = read_all(fd, path, &text, err);
  close(fd);
  if (rc != 0) return rc;
  int found = find_key(text, "public-key", out);
  free(text);
  if (!found)
    return vdsp_fail(err, VDSP_E_FILE_NOT_FOUND, "cannot read public key %s: No public key found in %s", path, path);
  if (!vdsp_curve_valid(out)) return bad_key(path, "public key", err);
  return 0;
}

int vdsp_curve_load(vdsp_curve_keys *keys, int server, vdsp_err *err) {
  memset(keys, 0, sizeof *keys);
  char dir[PATH_MAX], path[PATH_MAX];
  const char *given = env("VDSP_KEYS_DIR");
  if (given != NULL) {
    snprintf(dir, sizeof dir, "%s", given);
  } else {
    char rt[PATH_MAX];
    int rc = vdsp_link_runtime_dir(rt, sizeof rt, err);
    if (rc != 0) return rc;
    if (snprintf(dir, sizeof dir, "%s/keys", rt) >= (int)sizeof dir)
      return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "key directory path %.200s... is too long", rt);
  }
  const char *client = env("VDSP_CLIENT_KEY");
  if (client != NULL) snprintf(path, sizeof path, "%s", client);
  else if (snprintf(path, sizeof path, "%s/client.key_secret", dir) >= (int)sizeof path)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "key directory path %.200s... is too long", dir);
  int rc = load_pair(path, keys, err);
  if (rc != 0 || !server) return rc;
  const char *srv = env("VDSP_SERVER_KEY");
  if (srv != NULL) snprintf(path, sizeof path, "%s", srv);
  else if (snprintf(path, sizeof path, "%s/server.key", dir) >= (int)sizeof path)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "key directory path %.200s... is too long", dir);
  return load_public(path, keys->server_key, err);
}
