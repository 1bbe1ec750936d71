// A J5 CV sample's ARM side (test_gaussian_blur.cc) against the simulated SoC: read an image,
// pack gaussianBlur's parameters and the image into cached DDR (the struct at byte 0, the image from
// HB_DSP_PACKED_DATA: docs/capi.md), clean the cache, run gaussianBlur on vdsp1 through hbDSPRpcV2,
// wait, invalidate, write the result. The same source builds for the board apart from the
// include path; it logs the J5 sample's lines ("rpc begin", "rpc finish", ...).
//
//   c++ -std=c++17 -Wall -Wextra -Werror $(vdsp capi --cflags) test_gaussian_blur.cc $(vdsp capi --libs)
//   ./a.out input.pgm output.pgm          # 8-bit grey PGM (P5) in and out
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "dnn/hb_sys.h"
#include "hb_dsp.h"

#define LOGI(...) Log(__LINE__, __VA_ARGS__)

template <typename... Args>
static void Log(int line, char const *fmt, Args... args) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  long us = static_cast<long>(
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000);
  std::fprintf(stderr, "I%02d%02d %02d:%02d:%02d.%06ld test_gaussian_blur.cc:%d] ", tm.tm_mon + 1, tm.tm_mday,
               tm.tm_hour, tm.tm_min, tm.tm_sec, us, line);
  if constexpr (sizeof...(args) == 0) {
    std::fputs(fmt, stderr);
  } else {
    std::fprintf(stderr, fmt, args...);
  }
  std::fputc('\n', stderr);
}

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;
};

// An 8-bit PGM (P5): "P5 <w> <h> 255" then w*h bytes.
static bool ReadPgm(std::string const &path, Image *img) {
  std::ifstream in(path, std::ios::binary);
  std::string magic;
  int maxval = 0;
  if (!(in >> magic >> img->width >> img->height >> maxval) || magic != "P5" || maxval != 255 || img->width <= 0 ||
      img->height <= 0 || img->width > 32768 || img->height > 32768) {
    return false;
  }
  in.get();
  img->pixels.resize(static_cast<size_t>(img->width) * img->height);
  return static_cast<bool>(in.read(reinterpret_cast<char *>(img->pixels.data()), img->pixels.size()));
}

static bool WritePgm(std::string const &path, Image const &img) {
  std::ofstream out(path, std::ios::binary);
  out << "P5\n" << img.width << " " << img.height << "\n255\n";
  out.write(reinterpret_cast<char const *>(img.pixels.data()), img.pixels.size());
  return static_cast<bool>(out);
}

#define HB_CHECK_SUCCESS(value, errmsg)                                                   \
  do {                                                                                    \
    int32_t ret_code = (value);                                                           \
    if (ret_code != 0) {                                                                  \
      std::fprintf(stderr, "%s, error code: %d, %s\n", errmsg, ret_code, hbDNNGetErrorDesc(ret_code)); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main(int argc, char **argv) {
  std::string input = argc > 1 ? argv[1] : "data/input.pgm";
  std::string output = argc > 2 ? argv[2] : "output/gaussian_blur.pgm";
  LOGI("gaussianBlur begin");
  Image src_img;
  if (!ReadPgm(input, &src_img)) {
    std::fprintf(stderr, "read image %s failed\n", input.c_str());
    return 1;
  }
  LOGI("read image %s success", input.c_str());
  uint32_t const size = static_cast<uint32_t>(src_img.pixels.size());

  hbDSPGaussianBlurParam param;
  HB_DSP_INITIALIZE_GAUSSIAN_BLUR_PARAM(&param);
  param.src.format = HB_DSP_IMAGE_Y;
  param.src.width = src_img.width;
  param.src.height = src_img.height;
  param.src.stride = src_img.width;
  param.dst = param.src;
  param.ksize[0] = param.ksize[1] = 5;
  param.sigma_x = 1.5;

  // the input: the parameters, then the image from the next 64-byte boundary
  uint32_t const data = HB_DSP_PACKED_DATA(sizeof(param));
  hbSysMem src_mem, dst_mem;
  HB_CHECK_SUCCESS(hbSysAllocCachedMem(&src_mem, data + size), "hbSysAllocCachedMem failed");
  HB_CHECK_SUCCESS(hbSysAllocCachedMem(&dst_mem, size), "hbSysAllocCachedMem failed");
  std::memcpy(src_mem.virAddr, &param, sizeof(param));
  std::memcpy(static_cast<char *>(src_mem.virAddr) + data, src_img.pixels.data(), size);
  HB_CHECK_SUCCESS(hbSysFlushMem(&src_mem, HB_SYS_MEM_CACHE_CLEAN), "hbSysFlushMem failed");

  hbDSPRpcCtrlParam ctrl;
  HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
  ctrl.dspCoreId = HB_DSP_CORE_1;
  hbDSPTask_t task = nullptr;
  LOGI("rpc begin");
  HB_CHECK_SUCCESS(hbDSPRpcV2(&task, &src_mem, &dst_mem, HB_DSP_OP_GAUSSIAN_BLUR, &ctrl), "hbDSPRpcV2 failed");
  HB_CHECK_SUCCESS(hbDSPWaitTaskDone(task, 5000), "hbDSPWaitTaskDone failed");
  int32_t core = 0;
  HB_CHECK_SUCCESS(hbDSPGetTaskCore(task, &core), "hbDSPGetTaskCore failed");
  HB_CHECK_SUCCESS(hbDSPReleaseTask(task), "hbDSPReleaseTask failed");
  LOGI("rpc finish (vdsp%d)", core - 1);

  HB_CHECK_SUCCESS(hbSysFlushMem(&dst_mem, HB_SYS_MEM_CACHE_INVALIDATE), "hbSysFlushMem failed");
  Image dst_img = src_img;
  std::memcpy(dst_img.pixels.data(), dst_mem.virAddr, size);
  if (!WritePgm(output, dst_img)) {
    std::fprintf(stderr, "write output image %s failed\n", output.c_str());
    return 1;
  }
  LOGI("write output image success");
  HB_CHECK_SUCCESS(hbSysFreeMem(&src_mem), "hbSysFreeMem failed");
  HB_CHECK_SUCCESS(hbSysFreeMem(&dst_mem), "hbSysFreeMem failed");
  LOGI("gaussianBlur finish");
  return 0;
}
