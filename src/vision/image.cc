// vision/image.cc — the four decoders over Debian's libraries, each reading the
// header first, checking ImageLimits, and only then allocating the pixels.
#include "vision/image.h"

// clang-format off: jpeglib.h needs <cstdio> (FILE) before it.
#include <cstdio>
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <gif_lib.h>
#include <png.h>
#include <webp/decode.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <memory>

#include "util/error.h"

namespace nextn::vision {

namespace {

// "" when width × height passes the limits, else what is wrong.
std::string dimension_problem(int64_t width, int64_t height, const char* format, const ImageLimits& limits) {
  if (width <= 0 || height <= 0) return fmt::format("{} image has no pixels ({}×{})", format, width, height);
  if (width > limits.max_side || height > limits.max_side)
    return fmt::format("{} image is {}×{} pixels; each side is limited to {}", format, width, height,
                       limits.max_side);
  if (width * height > limits.max_pixels)
    return fmt::format("{} image is {}×{} = {} pixels; the limit is {}", format, width, height, width * height,
                       limits.max_pixels);
  const double ratio = double(std::max(width, height)) / double(std::min(width, height));
  if (ratio > limits.max_aspect_ratio)
    return fmt::format("{} image is {}×{} pixels, an aspect ratio of {:.0f}:1; the limit is {:.0f}:1", format, width,
                       height, ratio, limits.max_aspect_ratio);
  return {};
}

// Transparency over white, per channel: c·a + 255·(255 − a), divided by 255 and rounded
// (PIL's alpha_composite onto an opaque white canvas agrees within one level).
void composite_rgba_on_white(const std::vector<uint8_t>& rgba, DecodedImage& out) {
  const size_t n = size_t(out.width) * size_t(out.height);
  out.rgb.resize(n * 3);
  for (size_t i = 0; i < n; ++i) {
    const unsigned a = rgba[i * 4 + 3];
    for (int c = 0; c < 3; ++c) {
      const unsigned v = rgba[i * 4 + c];
      out.rgb[i * 3 + c] = uint8_t((v * a + 255u * (255u - a) + 127u) / 255u);
    }
  }
}

// ---- PNG: libpng's simplified API (it reports errors in image.message, no longjmp).

DecodedImage decode_png(std::string_view bytes, const ImageLimits& limits) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()))
    fail(ErrorKind::kBadInput, "corrupt PNG: {}", image.message);
  std::unique_ptr<png_image, void (*)(png_image*)> guard(&image, png_image_free);
  if (std::string problem = dimension_problem(image.width, image.height, "PNG", limits); !problem.empty())
    fail(ErrorKind::kBadInput, "{}", problem);
  DecodedImage out;
  out.width = int(image.width);
  out.height = int(image.height);
  image.format = PNG_FORMAT_RGBA;  // palette, grey and 16-bit files all come out as 8-bit RGBA
  std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, rgba.data(), 0, nullptr))
    fail(ErrorKind::kBadInput, "corrupt or truncated PNG: {}", image.message);
  composite_rgba_on_white(rgba, out);
  return out;
}

// ---- JPEG: libjpeg's error manager longjmps; the function holding the setjmp keeps
// only trivially destructible locals, and reports a problem as text.

struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_error_exit(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// libjpeg goes on after a premature end of data and fills the rest grey; a truncated
// file is refused instead (PIL, the reference, refuses it too). Other warnings (e.g.
// stray bytes between markers, common in camera files) are let through.
void jpeg_emit_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(errors->message, sizeof errors->message, "truncated (premature end of data)");
    std::longjmp(errors->jump, 1);
  }
}

// Returns "" on success, else the problem.
std::string decode_jpeg_into(std::string_view bytes, const ImageLimits& limits, DecodedImage& out) {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = jpeg_error_exit;
  errors.mgr.emit_message = jpeg_emit_message;
  errors.message[0] = '\0';
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return std::string("corrupt JPEG: ") + errors.message;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  {
    std::string problem = dimension_problem(cinfo.image_width, cinfo.image_height, "JPEG", limits);
    if (!problem.empty()) {
      jpeg_destroy_decompress(&cinfo);
      return problem;
    }
  }
  cinfo.out_color_space = JCS_RGB;  // greyscale and YCbCr convert; CMYK files are refused by libjpeg
  jpeg_start_decompress(&cinfo);
  out.width = int(cinfo.output_width);
  out.height = int(cinfo.output_height);
  out.rgb.resize(size_t(out.width) * size_t(out.height) * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.rgb.data() + size_t(cinfo.output_scanline) * size_t(out.width) * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return {};
}

DecodedImage decode_jpeg(std::string_view bytes, const ImageLimits& limits) {
  DecodedImage out;
  if (std::string problem = decode_jpeg_into(bytes, limits, out); !problem.empty())
    fail(ErrorKind::kBadInput, "{}", problem);
  return out;
}

// ---- WebP: libwebp's one-call decoder into a buffer sized from the header.

DecodedImage decode_webp(std::string_view bytes, const ImageLimits& limits) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(data, bytes.size(), &features) != VP8_STATUS_OK)
    fail(ErrorKind::kBadInput, "corrupt WebP: the header cannot be read");
  if (std::string problem = dimension_problem(features.width, features.height, "WebP", limits); !problem.empty())
    fail(ErrorKind::kBadInput, "{}", problem);
  if (features.has_animation) fail(ErrorKind::kBadInput, "animated WebP is not supported: send a still image");
  DecodedImage out;
  out.width = features.width;
  out.height = features.height;
  std::vector<uint8_t> rgba(size_t(out.width) * size_t(out.height) * 4);
  if (!WebPDecodeRGBAInto(data, bytes.size(), rgba.data(), rgba.size(), out.width * 4))
    fail(ErrorKind::kBadInput, "corrupt or truncated WebP");
  composite_rgba_on_white(rgba, out);
  return out;
}

// ---- GIF: giflib record by record, stopping at the first image (an animation's first
// frame); DGifSlurp would decode every frame of an animation first.

struct GifReader {
  std::string_view bytes;
  size_t pos = 0;
};

int gif_read(GifFileType* gif, GifByteType* buffer, int length) {
  auto* reader = static_cast<GifReader*>(gif->UserData);
  const size_t n = std::min(size_t(std::max(length, 0)), reader->bytes.size() - reader->pos);
  std::memcpy(buffer, reader->bytes.data() + reader->pos, n);
  reader->pos += n;
  return int(n);
}

DecodedImage decode_gif(std::string_view bytes, const ImageLimits& limits) {
  GifReader reader{bytes};
  int error = 0;
  GifFileType* opened = DGifOpen(&reader, gif_read, &error);
  if (!opened) fail(ErrorKind::kBadInput, "corrupt GIF: {}", GifErrorString(error));
  auto close = [](GifFileType* g) {
    int ignored = 0;
    DGifCloseFile(g, &ignored);
  };
  std::unique_ptr<GifFileType, decltype(close)> gif(opened, close);
  auto gif_fail = [&](const char* what) {
    const char* why = GifErrorString(gif->Error);
    fail(ErrorKind::kBadInput, "corrupt or truncated GIF: {} ({})", what, why ? why : "unknown error");
  };
  if (std::string problem = dimension_problem(gif->SWidth, gif->SHeight, "GIF", limits); !problem.empty())
    fail(ErrorKind::kBadInput, "{}", problem);

  DecodedImage out;
  out.width = gif->SWidth;
  out.height = gif->SHeight;
  int transparent = NO_TRANSPARENT_COLOR;
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(gif.get(), &type) == GIF_ERROR) gif_fail("reading a record");
    if (type == TERMINATE_RECORD_TYPE) fail(ErrorKind::kBadInput, "GIF holds no image");
    if (type == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif.get(), &code, &ext) == GIF_ERROR) gif_fail("reading an extension");
      if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4) {
        GraphicsControlBlock gcb;
        if (DGifExtensionToGCB(ext[0], ext + 1, &gcb) == GIF_OK) transparent = gcb.TransparentColor;
      }
      while (ext)
        if (DGifGetExtensionNext(gif.get(), &ext) == GIF_ERROR) gif_fail("reading an extension");
      continue;
    }
    if (type != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif.get()) == GIF_ERROR) gif_fail("reading the image descriptor");
    const GifImageDesc& d = gif->Image;
    if (d.Left < 0 || d.Top < 0 || d.Width < 0 || d.Height < 0 || d.Left + d.Width > out.width ||
        d.Top + d.Height > out.height)
      fail(ErrorKind::kBadInput, "corrupt GIF: the first frame ({}×{} at {},{}) lies outside the {}×{} screen",
           d.Width, d.Height, d.Left, d.Top, out.width, out.height);
    const ColorMapObject* map = d.ColorMap ? d.ColorMap : gif->SColorMap;
    if (!map || !map->Colors) fail(ErrorKind::kBadInput, "corrupt GIF: no colour table");
    // Where the first frame does not paint, and where it is transparent, the screen shows
    // white (the background a transparent image is composited onto).
    out.rgb.assign(size_t(out.width) * size_t(out.height) * 3, 255);
    std::vector<GifPixelType> line(size_t(std::max(d.Width, 1)));
    // Interlaced frames store rows in four passes: every 8th from 0, every 8th from 4,
    // every 4th from 2, every 2nd from 1.
    static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
    const int passes = d.Interlace ? 4 : 1;
    for (int pass = 0; pass < passes; ++pass) {
      const int start = d.Interlace ? kStart[pass] : 0, step = d.Interlace ? kStep[pass] : 1;
      for (int y = start; y < d.Height; y += step) {
        if (d.Width > 0 && DGifGetLine(gif.get(), line.data(), d.Width) == GIF_ERROR) gif_fail("reading pixels");
        uint8_t* row = out.rgb.data() + (size_t(d.Top + y) * size_t(out.width) + size_t(d.Left)) * 3;
        for (int x = 0; x < d.Width; ++x) {
          const int index = line[size_t(x)];
          if (index == transparent) continue;
          // An index past the table's end shows black (giflib does not check it).
          const GifColorType c = index < map->ColorCount ? map->Colors[index] : GifColorType{0, 0, 0};
          row[x * 3 + 0] = c.Red;
          row[x * 3 + 1] = c.Green;
          row[x * 3 + 2] = c.Blue;
        }
      }
    }
    return out;
  }
}

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

bool equals_lower(std::string_view text, std::string_view lower) {
  if (text.size() != lower.size()) return false;
  for (size_t i = 0; i < text.size(); ++i)
    if (ascii_lower(text[i]) != lower[i]) return false;
  return true;
}

}  // namespace

void check_image_dimensions(int64_t width, int64_t height, const char* format, const ImageLimits& limits) {
  if (std::string problem = dimension_problem(width, height, format, limits); !problem.empty())
    fail(ErrorKind::kBadInput, "{}", problem);
}

ImageFormat sniff_image_format(std::string_view b) {
  if (b.size() >= 8 && b.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) return ImageFormat::kPng;
  if (b.size() >= 3 && b.substr(0, 3) == "\xff\xd8\xff") return ImageFormat::kJpeg;
  if (b.size() >= 6 && (b.substr(0, 6) == "GIF87a" || b.substr(0, 6) == "GIF89a")) return ImageFormat::kGif;
  if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WEBP") return ImageFormat::kWebp;
  return ImageFormat::kUnknown;
}

std::string encode_png_rgb(const DecodedImage& image) {
  if (image.width < 1 || image.height < 1 || image.rgb.size() != size_t(image.width) * size_t(image.height) * 3)
    fail(ErrorKind::kBadInput, "PNG encoder: {}×{} does not match its {} bytes", image.width, image.height,
         image.rgb.size());
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = uint32_t(image.width);
  png.height = uint32_t(image.height);
  png.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.rgb.data(), 0, nullptr))
    fail(ErrorKind::kResource, "PNG encoder: {}", png.message);
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&png, out.data(), &size, 0, image.rgb.data(), 0, nullptr))
    fail(ErrorKind::kResource, "PNG encoder: {}", png.message);
  out.resize(size);
  return out;
}

DecodedImage test_picture(int width, int height, uint32_t seed) {
  if (width < 1 || height < 1) fail(ErrorKind::kBadInput, "test picture: {}×{} has no pixels", width, height);
  DecodedImage img;
  img.width = width;
  img.height = height;
  img.rgb.resize(size_t(width) * size_t(height) * 3);
  uint32_t state = seed * 2654435761u + 1;
  auto noise = [&]() {  // xorshift32: a little texture
    state ^= state << 13, state ^= state >> 17, state ^= state << 5;
    return int(state & 15) - 8;
  };
  const double cx = width * (0.3 + 0.4 * ((seed >> 3) % 7) / 7.0), cy = height * 0.45, r = std::min(width, height) / 3.0;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const bool disc = (x - cx) * (x - cx) + (y - cy) * (y - cy) < r * r;
      const bool stripe = ((x + 2 * y) / 24) % 5 == 0;
      const int base[3] = {disc ? 220 : 40 + 150 * x / width, disc ? 90 : 60 + 120 * y / height,
                           stripe ? 230 : 110 + int(seed % 80)};
      uint8_t* p = img.rgb.data() + (size_t(y) * size_t(width) + size_t(x)) * 3;
      for (int ch = 0; ch < 3; ++ch) p[ch] = uint8_t(std::clamp(base[ch] + noise(), 0, 255));
    }
  return img;
}

const char* media_type_of(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng: return "image/png";
    case ImageFormat::kJpeg: return "image/jpeg";
    case ImageFormat::kWebp: return "image/webp";
    case ImageFormat::kGif: return "image/gif";
    case ImageFormat::kUnknown: break;
  }
  return "application/octet-stream";
}

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat format_of_media_type(std::string_view media_type) {
  if (equals_lower(media_type, "image/png")) return ImageFormat::kPng;
  if (equals_lower(media_type, "image/jpeg") || equals_lower(media_type, "image/jpg")) return ImageFormat::kJpeg;
  if (equals_lower(media_type, "image/webp")) return ImageFormat::kWebp;
  if (equals_lower(media_type, "image/gif")) return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

DecodedImage decode_image(std::string_view bytes, std::string_view media_type, const ImageLimits& limits) {
  if (format_of_media_type(media_type) == ImageFormat::kUnknown)
    fail(ErrorKind::kBadInput, "unsupported media type '{}' (image/png, image/jpeg, image/webp, image/gif)",
         media_type.substr(0, 64));
  if (bytes.empty()) fail(ErrorKind::kBadInput, "the image is empty (0 bytes)");
  if (bytes.size() > limits.max_bytes)
    fail(ErrorKind::kBadInput, "the image is {} bytes; the limit is {}", bytes.size(), limits.max_bytes);
  switch (sniff_image_format(bytes)) {
    case ImageFormat::kPng: return decode_png(bytes, limits);
    case ImageFormat::kJpeg: return decode_jpeg(bytes, limits);
    case ImageFormat::kWebp: return decode_webp(bytes, limits);
    case ImageFormat::kGif: return decode_gif(bytes, limits);
    case ImageFormat::kUnknown: break;
  }
  fail(ErrorKind::kBadInput, "the bytes are not a PNG, JPEG, WebP or GIF image (declared {})", media_type.substr(0, 64));
}

}  // namespace nextn::vision
