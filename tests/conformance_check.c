/*
 * The C driver of the conformance cases (tests/conformance.py, which describes the line format):
 * `conformance_check CASES_FILE` runs each case through the hbSys/hbDSP functions of hb_sys.h and
 * hb_dsp.h, call for call what tests/conformance_py.py does through arm_side.hb, on the SoC of
 * $VDSP_RUNTIME_DIR, and prints "name<TAB>code<TAB>values<TAB>text" per case (values: the task's
 * values as JSON, "-" without; text: hbDNNGetErrorDesc of the code, "" for 0).
 * Run by tests/integration/test_conformance.py.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb_dnn.h"
#include "hb_dsp.h"
#include "hb_sys.h"

#define MAX_FIELDS 10
#define MAX_BUFS 8
#define MAX_TASKS 64
#define NEVER_OFFSET (1ull << 39) /* an offset of this process's owner that is never allocated */

typedef struct {
  hbSysMem allocated[2 * MAX_BUFS + 1]; /* freed at the end (virAddr NULL: freed already) */
  int n_allocated;
  hbDSPTask_t tasks[MAX_TASKS];
  int n_tasks;
} run_t;

static hbSysMem *alloc(run_t *r, uint32_t size) {
  hbSysMem *m = &r->allocated[r->n_allocated++];
  int32_t rc = hbSysAllocMem(m, size);
  if (rc != 0) {
    fprintf(stderr, "hbSysAllocMem(%u) failed: %s\n", size, hbDNNGetErrorDesc(rc));
    exit(1);
  }
  for (uint32_t i = 0; i < size; i++) ((unsigned char *)m->virAddr)[i] = (unsigned char)(i * 7 + 3);
  return m;
}

/* One buffer of tests/conformance.py's spec into *out. */
static void buffer(run_t *r, char *spec, hbSysMem *out) {
  char *arg = strchr(spec, ':');
  if (arg != NULL) *arg++ = '\0';
  if (strcmp(spec, "mem") == 0) {
    *out = *alloc(r, (uint32_t)strtoul(arg, NULL, 10));
  } else if (strcmp(spec, "freed") == 0) {
    hbSysMem *m = alloc(r, (uint32_t)strtoul(arg, NULL, 10));
    *out = *m; /* the copy a program keeps after hbSysFreeMem */
    hbSysFreeMem(m);
  } else if (strcmp(spec, "past") == 0) {
    *out = *alloc(r, (uint32_t)strtoul(arg, NULL, 10));
    out->memSize += 1;
  } else if (strcmp(spec, "sub") == 0) {
    char *end;
    uint32_t size = (uint32_t)strtoul(arg, &end, 10);
    uint32_t offset = (uint32_t)strtoul(end + 1, &end, 10);
    *out = *alloc(r, size);
    out->phyAddr += offset;
    out->virAddr = (unsigned char *)out->virAddr + offset;
    out->memSize = (uint32_t)strtoul(end + 1, NULL, 10);
  } else if (strcmp(spec, "never") == 0) {
    uint64_t owner = alloc(r, 64)->phyAddr >> 40;
    out->phyAddr = (owner << 40) | NEVER_OFFSET;
    out->virAddr = NULL;
    out->memSize = 64;
  } else if (strcmp(spec, "raw") == 0) {
    char *end;
    out->phyAddr = strtoull(arg, &end, 16);
    out->virAddr = NULL;
    out->memSize = (uint32_t)strtoul(end + 1, NULL, 10);
  } else {
    fprintf(stderr, "unknown buffer %s\n", spec);
    exit(1);
  }
}

static int buffers(run_t *r, char *field, hbSysMem *out) {
  int n = 0;
  if (strcmp(field, "-") == 0) return 0;
  for (char *spec = strtok(field, ","); spec != NULL && n < MAX_BUFS; spec = strtok(NULL, ",")) buffer(r, spec, &out[n++]);
  return n;
}

static int32_t submit(run_t *r, hbDSPTask_t *task, hbSysMem *ins, int n_in, hbSysMem *outs, int n_out, int32_t op,
                      const char *json, hbDSPRpcCtrlParam *ctrl) {
  *task = NULL;
  int32_t rc = hbDSPRpcV2Json(task, ins, n_in, outs, n_out, op, json, ctrl);
  if (rc == 0 && r->n_tasks < MAX_TASKS) r->tasks[r->n_tasks++] = *task;
  return rc;
}

/* The "packed" flow's input, as a J5 program packs it: the struct's bytes (hex) at byte 0, the
 * data (`spec` "mem:N": N bytes of the pattern, or "-": none) from HB_DSP_PACKED_DATA on. */
static hbSysMem packed_input(run_t *r, const char *hex, const char *spec) {
  uint32_t header = (uint32_t)strlen(hex) / 2, data = HB_DSP_PACKED_DATA(header);
  uint32_t n = strncmp(spec, "mem:", 4) == 0 ? (uint32_t)strtoul(spec + 4, NULL, 10) : 0;
  hbSysMem *m = alloc(r, data + n);
  unsigned char *p = m->virAddr;
  for (uint32_t i = 0; i < header; i++) {
    unsigned int byte;
    sscanf(hex + 2 * i, "%2x", &byte);
    p[i] = (unsigned char)byte;
  }
  for (uint32_t i = 0; i < n; i++) p[data + i] = (unsigned char)(i * 7 + 3);
  return *m;
}

/* The case's first non-zero code (0: success); its values into `values` ("-" without). */
static int32_t flow(run_t *r, char **f, char *values, uint32_t cap) {
  hbSysMem ins[MAX_BUFS], outs[MAX_BUFS];
  int packed = strcmp(f[7], "packed") == 0;
  if (packed) ins[0] = packed_input(r, f[9], f[2]);
  int n_in = packed ? 1 : buffers(r, f[2], ins), n_out = buffers(r, f[3], outs);
  int32_t op = (int32_t)strtol(f[1], NULL, 10), arg = (int32_t)strtol(f[8], NULL, 10);
  const char *json = strcmp(f[4], "-") == 0 ? NULL : f[4];
  hbDSPRpcCtrlParam ctrl;
  HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
  ctrl.dspCoreId = (int32_t)strtol(f[5], NULL, 10);
  ctrl.priority = (int32_t)strtol(f[6], NULL, 10);
  hbDSPTask_t task = NULL;
  strcpy(values, "-");
  if (strcmp(f[7], "flush") == 0) return hbSysFlushMem(&ins[0], arg);
  if (strcmp(f[7], "flood") == 0) {
    for (int32_t i = 0; i < arg; i++) {
      int32_t rc = submit(r, &task, ins, n_in, outs, n_out, op, json, &ctrl);
      if (rc != 0) return rc;
    }
    return hbDSPWaitTaskDone(task, 0);
  }
  int32_t rc;
  if (packed) {
    rc = hbDSPRpcV2(&task, &ins[0], n_out ? &outs[0] : NULL, op, &ctrl);
    if (rc == 0 && r->n_tasks < MAX_TASKS) r->tasks[r->n_tasks++] = task;
  } else {
    rc = submit(r, &task, ins, n_in, outs, n_out, op, json, &ctrl);
  }
  if (rc != 0) return rc;
  if (strcmp(f[7], "release_wait") == 0) {
    hbDSPReleaseTask(task);
    return hbDSPWaitTaskDone(task, 0);
  }
  if (strcmp(f[7], "release_twice") == 0) {
    hbDSPWaitTaskDone(task, 0);
    hbDSPReleaseTask(task);
    return hbDSPReleaseTask(task);
  }
  rc = hbDSPWaitTaskDone(task, arg);
  if (rc == 0) rc = hbDSPGetTaskValuesJson(task, values, cap);
  return rc;
}

int main(int argc, char **argv) {
  FILE *in = argc == 2 ? fopen(argv[1], "r") : NULL;
  if (in == NULL) {
    fprintf(stderr, "usage: conformance_check CASES_FILE\n");
    return 2;
  }
  static char line[1 << 16], values[1 << 16], text[1 << 12];
  while (fgets(line, sizeof line, in) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    char *f[MAX_FIELDS];
    int n = 0;
    for (char *p = line; n < MAX_FIELDS; n++) {
      f[n] = p;
      p = strchr(p, '\t');
      if (p == NULL) {
        n++;
        break;
      }
      *p++ = '\0';
    }
    if (n != MAX_FIELDS) continue;
    run_t *r = calloc(1, sizeof *r);
    int32_t code = flow(r, f, values, sizeof values);
    /* the description before the clean-up calls make another one this thread's last */
    snprintf(text, sizeof text, "%s", code != 0 ? hbDNNGetErrorDesc(code) : "");
    for (char *c = text; *c; c++)
      if (*c == '\n' || *c == '\t') *c = ' ';
    for (int i = 0; i < r->n_tasks; i++) hbDSPReleaseTask(r->tasks[i]);
    for (int i = 0; i < r->n_allocated; i++)
      if (r->allocated[i].virAddr != NULL) hbSysFreeMem(&r->allocated[i]);
    free(r);
    printf("%s\t%d\t%s\t%s\n", f[0], (int)code, values, text);
    fflush(stdout);
  }
  fclose(in);
  return 0;
}
