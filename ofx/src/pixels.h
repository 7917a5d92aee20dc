// Pixels at the plugin's edge: host images (8-bit, 16-bit or float RGBA, rows bottom-up as OpenFX addresses them,
// rowBytes possibly negative) to the engine's float32 RGBA with the top row first, and back.
//
// Rounding: 8- and 16-bit values v become v / 255 (v / 65535) in float; back, a value x becomes
// round(clamp(x, 0, 1) * 255) (65535), half away from zero. sRGB spaces are encoded back with the piecewise sRGB
// curve in double precision, so an untouched 8- or 16-bit pixel comes back as the same integer.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ff {

enum class Depth { Byte, Short, Float };

struct HostImage {
  void* data = nullptr;                // the pixel at (x1, y1), as OpenFX's kOfxImagePropData
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // bounds
  long row_bytes = 0;                  // may be negative (MLT hands bottom-up images)
  Depth depth = Depth::Byte;
  int width() const { return x2 - x1; }
  int height() const { return y2 - y1; }
};

// The host image as float RGBA, top row first (what the engine reads from a slot).
std::vector<float> to_engine(const HostImage& img);
// Write engine RGBA (top row first, width x height = the image's bounds) into the host image's window
// [wx1, wx2) x [wy1, wy2). ``srgb``: encode RGB with the sRGB curve (premultiplied colour is unpremultiplied first).
void from_engine(const float* rgba, const HostImage& img, int wx1, int wy1, int wx2, int wy2, bool srgb);

double srgb_encode(double linear);

}  // namespace ff
