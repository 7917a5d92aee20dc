#include "pixels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ff {

double srgb_encode(double v) {
  if (v <= 0.0031308)
    return v * 12.92;  // negatives stay linear (as the engine's decode, mirrored)
  return 1.055 * std::pow(v, 1.0 / 2.4) - 0.055;
}

namespace {

char* row_of(const HostImage& img, int y) {  // y in OpenFX coordinates (bottom-up)
  return static_cast<char*>(img.data) + long(y - img.y1) * img.row_bytes;
}

}  // namespace

std::vector<float> to_engine(const HostImage& img) {
  const int w = img.width(), h = img.height();
  std::vector<float> out(size_t(w) * h * 4);
  for (int r = 0; r < h; ++r) {
    const char* src = row_of(img, img.y2 - 1 - r);  // the engine's first row is the picture's top
    float* dst = out.data() + size_t(r) * w * 4;
    const int n = w * 4;
    if (img.depth == Depth::Float) {
      std::copy_n(reinterpret_cast<const float*>(src), n, dst);
    } else if (img.depth == Depth::Short) {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
      for (int i = 0; i < n; ++i) dst[i] = float(s[i]) / 65535.0f;
    } else {
      const uint8_t* s = reinterpret_cast<const uint8_t*>(src);
      for (int i = 0; i < n; ++i) dst[i] = float(s[i]) / 255.0f;
    }
  }
  return out;
}

void from_engine(const float* rgba, const HostImage& img, int wx1, int wy1, int wx2, int wy2, bool srgb) {
  const int w = img.width();
  wx1 = std::max(wx1, img.x1);
  wy1 = std::max(wy1, img.y1);
  wx2 = std::min(wx2, img.x2);
  wy2 = std::min(wy2, img.y2);
  for (int y = wy1; y < wy2; ++y) {
    const float* src = rgba + size_t(img.y2 - 1 - y) * w * 4;
    char* dst = row_of(img, y);
    for (int x = wx1; x < wx2; ++x) {
      const float* p = src + size_t(x - img.x1) * 4;
      double c[4] = {p[0], p[1], p[2], p[3]};
      if (srgb) {
        const double a = c[3];
        const bool premult = a > 0 && a < 1;  // encode the colour, not colour times coverage
        for (int k = 0; k < 3; ++k) c[k] = premult ? srgb_encode(c[k] / a) * a : srgb_encode(c[k]);
      }
      const size_t at = size_t(x - img.x1) * 4;
      for (int k = 0; k < 4; ++k) {
        if (img.depth == Depth::Float) {
          reinterpret_cast<float*>(dst)[at + k] = float(c[k]);
        } else if (img.depth == Depth::Short) {
          reinterpret_cast<uint16_t*>(dst)[at + k] = uint16_t(std::lround(std::clamp(c[k], 0.0, 1.0) * 65535.0));
        } else {
          reinterpret_cast<uint8_t*>(dst)[at + k] = uint8_t(std::lround(std::clamp(c[k], 0.0, 1.0) * 255.0));
        }
      }
    }
  }
}

}  // namespace ff
