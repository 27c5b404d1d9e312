// vision/image.h — image files (PNG, JPEG, WebP, GIF) decoded to 8-bit RGB.
// The vision folder owns everything between the bytes a client sends and the rows a
// language model would take in place of image tokens: image decoding (here), data:
// URLs (data_url.h), the model-specific image processors (qwen_processor.h) and vision
// towers (qwen_vision.h). Decoding goes
// through Debian's libraries (libpng, libjpeg-turbo, libwebp, giflib); every file
// is checked against ImageLimits from its header before any pixel buffer is
// allocated, so a small file that claims a huge canvas (a decompression bomb)
// costs nothing. Failures are nextn::Error kBadInput naming the format and the
// problem; the server turns them into 400s.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nextn::vision {

// An image as the processors see it: row-major, 3 bytes (R, G, B) per pixel.
struct DecodedImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // width × height × 3
};

// Bounds checked on the header's dimensions, before decoding.
struct ImageLimits {
  size_t max_bytes = 16u << 20;         // the encoded file
  int max_side = 16384;                 // width and height each
  int64_t max_pixels = int64_t(1) << 25;  // width × height (32 Mi: 96 MiB of RGB)
  // Qwen's processors refuse images more elongated than 200:1; no encoder nextn knows
  // takes a thinner one, and a 100000×1 strip is a cheap way to make a processor
  // upscale to its pixel budget.
  double max_aspect_ratio = 200.0;
};

enum class ImageFormat { kUnknown, kPng, kJpeg, kWebp, kGif };

// The format the leading bytes (magic numbers) say, or kUnknown.
ImageFormat sniff_image_format(std::string_view bytes);
const char* image_format_name(ImageFormat format);
// "image/png", ... for a known format; "application/octet-stream" for kUnknown (a local
// file read by the CLI has only its bytes to say what it is).
const char* media_type_of(ImageFormat format);

// The format a media type names ("image/png", "image/jpeg" or "image/jpg", "image/webp",
// "image/gif"; case-insensitive), or kUnknown.
ImageFormat format_of_media_type(std::string_view media_type);

// Decodes the first frame of `bytes`. `media_type` is the type the sender declared:
// it must be one of the four (else an "unsupported media type" error); the bytes'
// own magic number picks the decoder, so a JPEG labelled image/png still decodes
// (clients mislabel often; the magic number cannot lie about which decoder applies).
// Transparency is composited onto white, as the Hugging Face processors the encoders
// were trained with do (PIL alpha_composite over an opaque white canvas).
DecodedImage decode_image(std::string_view bytes, std::string_view media_type, const ImageLimits& limits);

// `image` as PNG bytes (libpng), for tools that send pictures (`nextn bench`).
std::string encode_png_rgb(const DecodedImage& image);

// A width × height picture with a photo's kind of content — smooth shading, edges and
// fine texture — made from `seed`: what benchmarks feed the encoders, so no image file
// has to ship. PNG compresses it to a few bytes per pixel, as it would a screenshot.
DecodedImage test_picture(int width, int height, uint32_t seed);

// The limit checks on a header's dimensions (also used by the decoders above).
void check_image_dimensions(int64_t width, int64_t height, const char* format, const ImageLimits& limits);

}  // namespace nextn::vision
