/* vdsp_json.c: see vdsp_json.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vdsp_json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *s;
  size_t n, i;
  vdsp_wire_writer *w;   /* NULL: the counting pass */
  uint32_t *counts;      /* elements of each container, in the order they open */
  size_t n_containers, next_container;
  const char *error;
} parser;

static void skip_space(parser *p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static int bad(parser *p, const char *what) {
  if (p->error == NULL) p->error = what;
  return -1;
}

static int hex4(parser *p, uint32_t *out) {
  if (p->i + 4 > p->n) return bad(p, "an incomplete \\u escape");
  uint32_t v = 0;
  for (int k = 0; k < 4; k++) {
    char c = p->s[p->i++];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
    else return bad(p, "an invalid \\u escape");
  }
  *out = v;
  return 0;
}

static void put_utf8(char *buf, size_t *len, uint32_t cp) {
  if (cp < 0x80) {
    buf[(*len)++] = (char)cp;
  } else if (cp < 0x800) {
    buf[(*len)++] = (char)(0xc0 | (cp >> 6));
    buf[(*len)++] = (char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    buf[(*len)++] = (char)(0xe0 | (cp >> 12));
    buf[(*len)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    buf[(*len)++] = (char)(0x80 | (cp & 0x3f));
  } else {
    buf[(*len)++] = (char)(0xf0 | (cp >> 18));
    buf[(*len)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
    buf[(*len)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    buf[(*len)++] = (char)(0x80 | (cp & 0x3f));
  }
}

/* A string at p->i (its opening quote) into the writer (decoded; never longer than its text). */
static int string(parser *p) {
  p->i++;
  size_t start = p->i;
  while (p->i < p->n && p->s[p->i] != '"') p->i += p->s[p->i] == '\\' ? 2 : 1;
  if (p->i >= p->n) return bad(p, "an unterminated string");
  size_t end = p->i++;
  if (p->w == NULL) return 0;
  char *buf = malloc(end - start + 1);
  if (buf == NULL) return bad(p, "out of memory");
  size_t len = 0;
  for (size_t i = start; i < end;) {
    unsigned char c = (unsigned char)p->s[i];
    if (c < 0x20) {
      free(buf);
      return bad(p, "a control character in a string");
    }
    if (c != '\\') {
      buf[len++] = (char)c;
      i++;
      continue;
    }
    char e = p->s[i + 1];
    i += 2;
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *at = strchr(from, e);
    if (e != 'u' && (at == NULL || e == '\0')) {
      free(buf);
      return bad(p, "an invalid escape");
    }
    if (e != 'u') {
      buf[len++] = to[at - from];
      continue;
    }
    uint32_t cp, low;
    size_t save = p->i;
    p->i = i;
    if (hex4(p, &cp) != 0) return free(buf), -1;
    if (cp >= 0xd800 && cp < 0xdc00 && p->i + 6 <= end && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
      size_t before = p->i;
      p->i += 2;
      if (hex4(p, &low) != 0) return free(buf), -1;
      if (low >= 0xdc00 && low < 0xe000) cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      else p->i = before;
    }
    i = p->i;
    p->i = save;
    if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd;   /* a lone surrogate: msgpack needs UTF-8 */
    put_utf8(buf, &len, cp);
  }
  int rc = vdsp_wire_put_str(p->w, buf, len);
  free(buf);
  return rc != 0 ? bad(p, "a string the wire refuses") : 0;
}

static int number(parser *p) {
  size_t start = p->i;
  int is_float = 0;
  if (p->i < p->n && p->s[p->i] == '-') p->i++;
  if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return bad(p, "an invalid value");
  if (p->s[p->i] == '0' && p->i + 1 < p->n && p->s[p->i + 1] >= '0' && p->s[p->i + 1] <= '9')
    return bad(p, "a number with a leading zero");
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  if (p->i < p->n && p->s[p->i] == '.') {
    is_float = 1;
    p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return bad(p, "an invalid number");
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  }
  if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
    is_float = 1;
    p->i++;
    if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return bad(p, "an invalid number");
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  }
  if (p->w == NULL) return 0;
  char text[400];
  size_t len = p->i - start;
  if (len >= sizeof text) return bad(p, "a number too long");
  memcpy(text, p->s + start, len);
  text[len] = '\0';
  errno = 0;
  if (is_float) return vdsp_wire_put_double(p->w, strtod(text, NULL));
  if (text[0] == '-') {
    long long v = strtoll(text, NULL, 10);
    if (errno == ERANGE) return bad(p, "an integer past 64 bits");
    return vdsp_wire_put_int(p->w, v);
  }
  unsigned long long u = strtoull(text, NULL, 10);
  if (errno == ERANGE) return bad(p, "an integer past 64 bits");
  return u > INT64_MAX ? vdsp_wire_put_uint(p->w, u) : vdsp_wire_put_int(p->w, (int64_t)u);
}

static int word(parser *p, const char *w) {
  size_t n = strlen(w);
  if (p->i + n > p->n || memcmp(p->s + p->i, w, n) != 0) return 0;
  p->i += n;
  return 1;
}

/* One value; containers without recursion: `stack` holds the open ones (their kind and index). */
static int value(parser *p) {
  char kinds[VDSP_WIRE_MAX_DEPTH + 1];
  size_t ids[VDSP_WIRE_MAX_DEPTH + 1];
  size_t depth = 0;
  for (;;) {
    skip_space(p);
    if (p->i >= p->n) return bad(p, "the text ended early");
    char c = p->s[p->i];
    int rc = 0, opened = 0;
    if (c == '{' || c == '[') {
      if (depth >= VDSP_WIRE_MAX_DEPTH) return bad(p, "nesting deeper than the wire allows");
      size_t id = p->next_container++;
      if (p->w == NULL) {
        if (id >= p->n_containers) return bad(p, "too many containers");
        p->counts[id] = 0;
      } else {
        rc = c == '{' ? vdsp_wire_put_map(p->w, p->counts[id]) : vdsp_wire_put_array(p->w, p->counts[id]);
      }
      p->i++;
      kinds[depth] = c;
      ids[depth++] = id;
      opened = 1;
      skip_space(p);
      if (p->i < p->n && p->s[p->i] == (c == '{' ? '}' : ']')) {
        p->i++;
        depth--;
      } else if (c == '{') {
        if (p->i >= p->n || p->s[p->i] != '"') return bad(p, "expecting a property name in double quotes");
        if (string(p) != 0) return -1;
        skip_space(p);
        if (p->i >= p->n || p->s[p->i] != ':') return bad(p, "expecting ':'");
        p->i++;
        if (p->w == NULL) p->counts[id]++;
        continue;
      } else {
        if (p->w == NULL) p->counts[id]++;
        continue;
      }
    } else if (c == '"') {
      rc = string(p);
    } else if (word(p, "true") || word(p, "false")) {
      rc = p->w ? vdsp_wire_put_bool(p->w, c == 't') : 0;
    } else if (word(p, "null")) {
      rc = p->w ? vdsp_wire_put_nil(p->w) : 0;
    } else if (word(p, "NaN")) {
      rc = p->w ? vdsp_wire_put_double(p->w, NAN) : 0;
    } else if (word(p, "Infinity")) {
      rc = p->w ? vdsp_wire_put_double(p->w, INFINITY) : 0;
    } else if (word(p, "-Infinity")) {
      rc = p->w ? vdsp_wire_put_double(p->w, -INFINITY) : 0;
    } else {
      rc = number(p);
    }
    if (rc != 0) return bad(p, "a value the wire refuses");
    (void)opened;
    /* after a value: close containers, or go on to the next element */
    for (;;) {
      if (depth == 0) return 0;
      skip_space(p);
      if (p->i >= p->n) return bad(p, "the text ended early");
      char k = kinds[depth - 1];
      char d = p->s[p->i];
      if (d == (k == '{' ? '}' : ']')) {
        p->i++;
        depth--;
        continue;
      }
      if (d != ',') return bad(p, k == '{' ? "expecting ',' or '}'" : "expecting ',' or ']'");
      p->i++;
      if (p->w == NULL) p->counts[ids[depth - 1]]++;
      if (k == '{') {
        skip_space(p);
        if (p->i >= p->n || p->s[p->i] != '"') return bad(p, "expecting a property name in double quotes");
        if (string(p) != 0) return -1;
        skip_space(p);
        if (p->i >= p->n || p->s[p->i] != ':') return bad(p, "expecting ':'");
        p->i++;
      }
      break;
    }
  }
}

static const char *type_name(const char *text, size_t len) {
  char c = len ? text[0] : 0;
  if (c == '[') return "list";
  if (c == '"') return "str";
  if (c == 't' || c == 'f') return "bool";
  if (c == 'n') return "NoneType";
  for (size_t i = 0; i < len; i++)
    if (strchr(".eEIN", text[i]) != NULL && text[i] != '\0') return "float";
  return "int";
}

int vdsp_json_to_msgpack(const char *text, size_t len, vdsp_wire_writer *w, char *message, size_t message_len) {
  parser p = {text, len, 0, NULL, NULL, len / 2 + 1, 0, NULL};
  size_t first = 0;
  while (first < len && strchr(" \t\r\n", text[first]) != NULL && text[first] != '\0') first++;
  p.counts = calloc(p.n_containers, sizeof *p.counts);
  if (p.counts == NULL) return snprintf(message, message_len, "out of memory"), -1;
  int rc = value(&p);
  skip_space(&p);
  if (rc == 0 && p.i != p.n) rc = bad(&p, "extra data after the value");
  if (rc == 0 && (first >= len || text[first] != '{')) {
    snprintf(message, message_len, "paramJson must be a JSON object, got %s", type_name(text + first, len - first));
    free(p.counts);
    return 1;
  }
  if (rc == 0) {
    p.w = w;
    p.i = 0;
    p.next_container = 0;
    rc = value(&p);
  }
  if (rc != 0) snprintf(message, message_len, "paramJson is not JSON: %s at char %zu", p.error, p.i);
  free(p.counts);
  return rc != 0 ? -1 : 0;
}
