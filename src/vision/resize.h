// vision/resize.h — PIL's bicubic resize, which both Hugging Face image processors nextn
// follows (Qwen3.5's, Gemma 4's) use on the decoded 8-bit picture.
#pragma once
#include "vision/image.h"

namespace nextn::vision {

// PIL's Image.resize(..., BICUBIC) on 8-bit RGB: the cubic kernel with a = −0.5, its
// support widened by the scale when shrinking (so shrinking averages, i.e. antialiased),
// weights normalized per output pixel and applied in 22-bit fixed point; the horizontal
// pass first, rounded to 8 bits, then the vertical one. A pass whose size does not
// change is skipped. Matching PIL matters: the slow Hugging Face processor resizes with
// it, and the fast one's uint8 antialiased path reproduces it.
DecodedImage resize_bicubic(const DecodedImage& image, int width, int height);

}  // namespace nextn::vision
