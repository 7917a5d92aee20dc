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
// Premultiplied colour made straight, in place: RGB / A where A > 0 (A = 0 keeps its RGB: nothing to divide by).
void unpremultiply(std::vector<float>& rgba);
// Write engine RGBA (top row first, width x height = the image's bounds) into the host image's window
// [wx1, wx2) x [wy1, wy2). ``srgb``: encode RGB with the sRGB curve, which applies to straight colour.
// ``engine_premult``: the engine's colour is premultiplied by its alpha (the face layer), else straight (the
// composite); ``host_premult``: the host gets colour premultiplied by alpha, else straight.
void from_engine(const float* rgba, const HostImage& img, int wx1, int wy1, int wx2, int wy2, bool srgb,
                 bool engine_premult, bool host_premult);
// Where the engine's result equals what it was sent (all four channels, bit for bit: a pixel the swap did not
// touch), put the input's own pixel into the output, so untouched pixels survive un- and re-premultiplying exactly.
void keep_untouched(const float* result, const float* sent, const HostImage& in, const HostImage& out, int wx1, int wy1,
                    int wx2, int wy2);

double srgb_encode(double linear);

}  // namespace ff
