#include "pixels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

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

void unpremultiply(std::vector<float>& rgba) {
  for (size_t i = 0; i + 3 < rgba.size(); i += 4) {
    const float a = rgba[i + 3];
    if (a > 0.0f && a != 1.0f)
      for (int k = 0; k < 3; ++k) rgba[i + k] /= a;
  }
}

void keep_untouched(const float* result, const float* sent, const HostImage& in, const HostImage& out, int wx1, int wy1,
                    int wx2, int wy2) {
  const int w = in.width();
  const size_t px = in.depth == Depth::Float ? 16 : in.depth == Depth::Short ? 8 : 4;
  wx1 = std::max(wx1, out.x1);
  wy1 = std::max(wy1, out.y1);
  wx2 = std::min(wx2, out.x2);
  wy2 = std::min(wy2, out.y2);
  for (int y = wy1; y < wy2; ++y) {
    const size_t top = size_t(in.y2 - 1 - y) * w * 4;  // the engine's rows are top first
    for (int x = wx1; x < wx2; ++x) {
      const size_t at = top + size_t(x - in.x1) * 4;
      if (std::memcmp(result + at, sent + at, 16) == 0)
        std::memcpy(row_of(out, y) + size_t(x - out.x1) * px, row_of(in, y) + size_t(x - in.x1) * px, px);
    }
  }
}

void from_engine(const float* rgba, const HostImage& img, int wx1, int wy1, int wx2, int wy2, bool srgb,
                 bool engine_premult, bool host_premult) {
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
      const double a = c[3];
      if (srgb || engine_premult != host_premult) {
        // straight colour (encode the colour, not colour times coverage); alpha 0 or 1: nothing to divide
        const bool divide = engine_premult && a > 0 && a < 1;
        const bool multiply = host_premult && (engine_premult ? divide : a < 1);
        for (int k = 0; k < 3; ++k) {
          double s = divide ? c[k] / a : c[k];
          if (srgb)
            s = srgb_encode(s);
          c[k] = multiply ? s * a : s;
        }
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
