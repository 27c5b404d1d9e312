// kernels/weight_formats.cc — the tables of quantized weight formats and interleaved
// layouts (one line each).

#include "kernels/weight_format.h"

namespace nextn {

// Defined in the family files (format_<family>.cc).
extern const WeightFormat kQ8_0Format;
extern const WeightFormat kQ4_0Format;
extern const WeightFormat kQ4_1Format;
extern const WeightFormat kQ5_0Format;
extern const WeightFormat kQ5_1Format;
extern const WeightFormat kQ4_KFormat;
extern const WeightFormat kQ5_KFormat;
extern const WeightFormat kQ6_KFormat;
extern const WeightFormat kMlx4G32Format, kMlx4G64Format, kMlx4G128Format;
extern const WeightFormat kMlx8G32Format, kMlx8G64Format, kMlx8G128Format;
extern const WeightFormat kQ8_0x16Format, kQ4_0x16Format, kQ4_Kx16Format, kQ6_Kx16Format;
extern const Interleaving kQ8_0x16Interleaving, kQ4_0x16Interleaving, kQ4_Kx16Interleaving, kQ6_Kx16Interleaving;

const WeightFormat* weight_format(DType dtype) {
  static const WeightFormat* const table[] = {
      &kQ8_0Format, &kQ4_0Format, &kQ4_1Format, &kQ5_0Format,
      &kQ5_1Format, &kQ4_KFormat, &kQ5_KFormat, &kQ6_KFormat,
      &kMlx4G32Format, &kMlx4G64Format, &kMlx4G128Format, &kMlx8G32Format, &kMlx8G64Format, &kMlx8G128Format,
      &kQ8_0x16Format, &kQ4_0x16Format, &kQ4_Kx16Format, &kQ6_Kx16Format,
  };
  for (const WeightFormat* f : table)
    if (f->dtype == dtype) return f;
  return nullptr;
}

const Interleaving* interleaving(DType file) {
  static const Interleaving* const table[] = {&kQ8_0x16Interleaving, &kQ4_0x16Interleaving,
                                              &kQ4_Kx16Interleaving, &kQ6_Kx16Interleaving};
  for (const Interleaving* i : table)
    if (i->file == file) return i;
  return nullptr;
}

}  // namespace nextn
