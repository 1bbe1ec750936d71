// A C++ kernel: the J5 sample's DSP sources are C++ too.
#include <cstring>
#include <numeric>

#include "vdsp_kernel.h"
#include "vdsp_kernel_params.h"

VDSP_KERNEL(sum_kernel) {
  auto const *p = VDSP_PARAM(task, hbDSPSumU8Param);
  auto const *in = static_cast<uint8_t const *>(task->inputs[0].tile_buffer);
  double sum = p->scale * static_cast<double>(std::accumulate(in, in + task->inputs[0].data_size, uint64_t{0}));
  if (task->outputs[0].data_size < sizeof sum) return 1;
  std::memcpy(task->outputs[0].tile_buffer, &sum, sizeof sum);
  return 0;
}
