/* A kernel whose work is known by hand (tests/dsp/test_board_time.py):
 * - one IDMA transfer in of min(input bytes, 4096) bytes into bank 0, waited for after the loop;
 * - `reps` times IVP_ADDN_2X32 and IVP_DIVN_2XF32;
 * - two 32-bit gathers (address and data phase): one from the TCM tile, one from the input in DDR;
 * - one 32-bit scatter into the TCM tile and its IVP_SCATTERW (straight-line code, as the gathers);
 * - one 2-D IDMA transfer out of `rows` rows of 64 bytes (output pitch 64), waited for at once. */
#include <string.h>
#include <xtensa/tie/xt_ivpn.h>

#include "vdsp_kernel.h"
#include "vdsp_kernel_params.h"

#define TILE 4096u

VDSP_KERNEL(board_count_kernel) {
  hbDSPBoardCountParam const *p = VDSP_PARAM(task, hbDSPBoardCountParam);
  TileBuffer const in = task->inputs[0], out = task->outputs[0];
  uint32_t const n = in.data_size < TILE ? in.data_size : TILE, rows = (uint32_t)p->rows;
  if (n < 64 || out.data_size < 64u * rows) return -1;
  TileBuffer tile = vdsp_tcm_tile(0, TILE, "tile");
  vdsp_dma_t fill = vdsp_idma_copy(tile.tile_buffer, in.tile_buffer, n);
  xb_vecN_2x32v acc = 0;
  xb_vecN_2xf32 q = 3.0f;
  for (int64_t i = 0; i < p->reps; i++) {
    acc = IVP_ADDN_2X32(acc, 1);
    q = IVP_DIVN_2XF32(q, 1.0f);
  }
  vdsp_idma_wait(fill);
  xb_vecN_2x32Uv const at = 4u;
  xb_vecN_2xf32 const a = IVP_GATHERDN_2XF32(IVP_GATHERAN_2XF32((float32_t const *)tile.tile_buffer, at));
  xb_vecN_2xf32 const b = IVP_GATHERDN_2XF32(IVP_GATHERAN_2XF32((float32_t const *)in.tile_buffer, at));
  IVP_SCATTERN_2X32(acc, (int32_t *)tile.tile_buffer + 16, at); /* every lane at byte 68 of the tile */
  IVP_SCATTERW();
  memcpy(tile.tile_buffer, acc.s, 8);
  memcpy((char *)tile.tile_buffer + 8, q.s, 4);
  memcpy((char *)tile.tile_buffer + 12, a.s, 4);
  memcpy((char *)tile.tile_buffer + 16, b.s, 4);
  vdsp_idma_copy_2d(out.tile_buffer, tile.tile_buffer, 64, rows, 64, 64);
  vdsp_idma_wait_all();
  return 0;
}
