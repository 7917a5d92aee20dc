// One row of the engine's settings schema as the plugin sees it (the rows are generated: ofx/tools/gen_params.py).
#pragma once

namespace ff {

struct SchemaParam {
  const char* name;  // the engine's setting name, also the OpenFX parameter name
  const char* kind;  // enum | float | int | bool | str
  const char* label;
  const char* help;
  const char* group;  // faces | swap | colour | enhance | matte | output
  double number_default;
  const char* text_default;
  bool has_min;
  double min;
  bool has_max;
  double max;
  const char* const* choices;      // enum values (the OpenFX choice options are these values)
  const char* const* choice_help;  // what each value does
  int choice_count;
};

}  // namespace ff
