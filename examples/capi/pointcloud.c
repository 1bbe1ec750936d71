/*
 * The point-cloud pattern of the J5 NN sample (PointPillars preprocessing) in C: the ARM side
 * writes the cloud through hbSysMem.virAddr into cached DDR and cleans the cache; stage 1
 * (pointcloud_encode) runs on a DSP core; the ARM side invalidates, reads the encoded points and
 * voxelizes them (first come first served pillars, the reference's loop), writes the pillars and
 * cleans; stage 2 (pointcloud_transpose) runs on the DSP; the ARM side invalidates and reads the
 * feature tensor.
 *
 *   ./pointcloud cloud.bin out [--no-flush]    # cloud.bin: N x 4 float32 (KITTI velodyne)
 *
 * writes out_coords.bin (int32 max_pillars x 4) and out_features.bin (int8 1x4xPxM). With
 * --no-flush the cache is not cleaned after the CPU wrote the cloud: the DSP reads stale DDR,
 * exactly the bug a board shows.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn/hb_sys.h"
#include "hb_dsp.h"

#define DIM 4
#define MAX_PILLARS 40000
#define MAX_POINTS 20
#define MAX_CLOUD (4 << 20)

#define CHECK(call)                                                                 \
  do {                                                                              \
    int32_t ret_ = (call);                                                          \
    if (ret_ != 0) {                                                                \
      fprintf(stderr, "%s failed: %d %s\n", #call, ret_, hbDNNGetErrorDesc(ret_)); \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

static int write_file(char const *prefix, char const *suffix, void const *data, size_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s", prefix, suffix);
  FILE *f = fopen(path, "wb");
  if (f == NULL) return -1;
  size_t n = fwrite(data, 1, size, f);
  return fclose(f) == 0 && n == size ? 0 : -1;
}

static hbDSPTask_t run(int32_t op, hbSysMem *in, int32_t n_in, hbSysMem *out, int32_t n_out, void const *param,
                       uint32_t size) {
  hbDSPTask_t task = NULL;
  CHECK(hbDSPRpcV2Param(&task, in, n_in, out, n_out, op, param, size, NULL));
  CHECK(hbDSPWaitTaskDone(task, 10000));
  return task;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s cloud.bin out_prefix [--no-flush]\n", argv[0]);
    return 2;
  }
  int flush = !(argc > 3 && strcmp(argv[3], "--no-flush") == 0);
  FILE *f = fopen(argv[1], "rb");
  if (f == NULL || fseek(f, 0, SEEK_END) != 0) return 1;
  long bytes = ftell(f);
  rewind(f);
  if (bytes <= 0 || bytes % (DIM * 4) != 0 || bytes / (DIM * 4) > MAX_CLOUD) return 1;
  int32_t n = (int32_t)(bytes / (DIM * 4));
  fprintf(stderr, "point count: %d\n", n);

  hbSysMem points, cells, xyzr, voxels, features;
  CHECK(hbSysAllocCachedMem(&points, (uint32_t)bytes));
  CHECK(hbSysAllocCachedMem(&cells, (uint32_t)n * 4));
  CHECK(hbSysAllocCachedMem(&xyzr, (uint32_t)n * 4));
  CHECK(hbSysAllocCachedMem(&voxels, MAX_PILLARS * MAX_POINTS * 4));
  CHECK(hbSysAllocCachedMem(&features, DIM * MAX_PILLARS * MAX_POINTS));
  if (fread(points.virAddr, 1, (size_t)bytes, f) != (size_t)bytes) return 1; /* the CPU writes the cloud */
  fclose(f);
  if (flush) CHECK(hbSysFlushMem(&points, HB_SYS_MEM_CACHE_CLEAN));

  /* stage 1 on the DSP: cell and quantised features of every point */
  hbDSPPointcloudEncodeParam encode;
  HB_DSP_INITIALIZE_POINTCLOUD_ENCODE_PARAM(&encode);
  encode.dim = DIM;
  encode.num_points = n;
  encode.back = 0.0f, encode.front = 69.12f, encode.right = -39.68f, encode.left = 39.68f;
  encode.bottom = -3.0f, encode.top = 1.0f, encode.lower = 0.0f, encode.upper = 1.0f;
  encode.x_scale = 0.16f, encode.y_scale = 0.16f, encode.scale = 1.0f / 128;
  hbSysMem encoded[2] = {cells, xyzr};
  fprintf(stderr, "stage 1 rpc begin\n");
  hbDSPTask_t task = run(HB_DSP_OP_POINTCLOUD_ENCODE, &points, 1, encoded, 2, &encode, sizeof encode);
  int64_t valid = 0;
  CHECK(hbDSPGetTaskValueInt(task, "valid", &valid));
  CHECK(hbDSPReleaseTask(task));
  fprintf(stderr, "stage 1 rpc finish: %lld valid points\n", (long long)valid);

  /* voxelization on the ARM side, after an invalidate */
  CHECK(hbSysFlushMem(&cells, HB_SYS_MEM_CACHE_INVALIDATE));
  CHECK(hbSysFlushMem(&xyzr, HB_SYS_MEM_CACHE_INVALIDATE));
  int32_t const *cell = (int32_t const *)cells.virAddr, *packed = (int32_t const *)xyzr.virAddr;
  int32_t gx = 1, gy = 1;
  for (int32_t i = 0; i < n; i++) {
    if (cell[i] < 0) continue;
    if ((cell[i] & 0xffff) >= gx) gx = (cell[i] & 0xffff) + 1;
    if ((cell[i] >> 16) >= gy) gy = (cell[i] >> 16) + 1;
  }
  int32_t *lut = malloc(sizeof(int32_t) * (size_t)gx * (size_t)gy);
  int32_t *count = calloc(MAX_PILLARS, sizeof(int32_t));
  int32_t *coords = malloc(sizeof(int32_t) * MAX_PILLARS * 4);
  if (lut == NULL || count == NULL || coords == NULL) return 1;
  memset(lut, 0xff, sizeof(int32_t) * (size_t)gx * (size_t)gy);
  for (int32_t i = 0; i < MAX_PILLARS * 4; i++) coords[i] = -1;
  int32_t *voxel = (int32_t *)voxels.virAddr;
  memset(voxel, 0, MAX_PILLARS * MAX_POINTS * 4);
  int32_t used = 0;
  for (int32_t i = 0; i < n; i++) {
    if (cell[i] < 0) continue;
    int32_t idy = cell[i] >> 16, idx = cell[i] & 0xffff, *slot = &lut[idy * gx + idx];
    if (*slot == -1) {
      *slot = used < MAX_PILLARS ? used++ : MAX_PILLARS - 1;
      int32_t *row = &coords[*slot * 4];
      row[0] = 0, row[1] = 0, row[2] = idy, row[3] = idx;
    }
    if (count[*slot] < MAX_POINTS) voxel[*slot * MAX_POINTS + count[*slot]++] = packed[i];
  }
  CHECK(hbSysFlushMem(&voxels, HB_SYS_MEM_CACHE_CLEAN));
  fprintf(stderr, "gen voxel data finish: %d pillars\n", used);

  /* stage 2 on the DSP: pillars -> the model's feature layout */
  hbDSPPointcloudTransposeParam transpose;
  HB_DSP_INITIALIZE_POINTCLOUD_TRANSPOSE_PARAM(&transpose);
  transpose.dim = DIM;
  transpose.layout = "cpm";
  transpose.max_pillars = MAX_PILLARS;
  transpose.max_points = MAX_POINTS;
  transpose.pillar_stride = MAX_PILLARS;
  transpose.num_pillars = used;
  fprintf(stderr, "stage 2 rpc begin\n");
  CHECK(hbDSPReleaseTask(run(HB_DSP_OP_POINTCLOUD_TRANSPOSE, &voxels, 1, &features, 1, &transpose,
                             sizeof transpose)));
  fprintf(stderr, "stage 2 rpc finish\n");
  CHECK(hbSysFlushMem(&features, HB_SYS_MEM_CACHE_INVALIDATE));
  if (write_file(argv[2], "_coords.bin", coords, sizeof(int32_t) * MAX_PILLARS * 4) != 0 ||
      write_file(argv[2], "_features.bin", features.virAddr, DIM * MAX_PILLARS * MAX_POINTS) != 0) {
    fprintf(stderr, "cannot write %s_*.bin\n", argv[2]);
    return 1;
  }
  printf("valid points %lld, pillars %d\n", (long long)valid, used);
  hbSysMem all[] = {points, cells, xyzr, voxels, features};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CHECK(hbSysFreeMem(&all[i]));
  free(lut), free(count), free(coords);
  return 0;
}
