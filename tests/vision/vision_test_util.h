// tests/vision/vision_test_util.h — test images written with the same Debian libraries'
// encoders (libpng, libjpeg, libwebp, giflib), so each decoder is checked against pixels
// the test chose, plus hand-built PNG headers for the limit cases.
#pragma once
// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on
#include <gif_lib.h>
#include <png.h>
#include <webp/encode.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace nextn::testing_vision {

// A deterministic RGB pattern: every pixel different along both axes.
inline std::vector<uint8_t> pattern(int w, int h, int channels = 3) {
  std::vector<uint8_t> px(size_t(w) * h * channels);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c)
        px[(size_t(y) * w + x) * channels + c] = uint8_t(c == 3 ? (x * 40 + y * 7) % 256 : (x * 13 + y * 29 + c * 71) % 256);
  return px;
}

inline std::string encode_png(int w, int h, const std::vector<uint8_t>& px, int channels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = uint32_t(w);
  image.height = uint32_t(h);
  image.format = channels == 4 ? PNG_FORMAT_RGBA : channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&image, nullptr, &size, 0, px.data(), 0, nullptr);
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&image, out.data(), &size, 0, px.data(), 0, nullptr)) std::abort();
  out.resize(size);
  return out;
}

inline std::string encode_jpeg(int w, int h, const std::vector<uint8_t>& rgb, int quality = 95) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = JDIMENSION(w);
  cinfo.image_height = JDIMENSION(h);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(rgb.data()) + size_t(cinfo.next_scanline) * w * 3;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buffer), size);
  std::free(buffer);
  return out;
}

// Lossless, so the decoded pixels must equal the input.
inline std::string encode_webp(int w, int h, const std::vector<uint8_t>& px, int channels) {
  uint8_t* buffer = nullptr;
  size_t size = channels == 4 ? WebPEncodeLosslessRGBA(px.data(), w, h, w * 4, &buffer)
                              : WebPEncodeLosslessRGB(px.data(), w, h, w * 3, &buffer);
  std::string out(reinterpret_cast<char*>(buffer), size);
  WebPFree(buffer);
  return out;
}

inline int gif_write(GifFileType* gif, const GifByteType* data, int length) {
  static_cast<std::string*>(gif->UserData)->append(reinterpret_cast<const char*>(data), size_t(length));
  return length;
}

// A GIF of palette indices (`index` row-major) over `colors`; `transparent` ≥ 0 writes a
// graphics control block naming that index; `interlace` stores the rows in GIF's 4 passes.
inline std::string encode_gif(int w, int h, const std::vector<uint8_t>& index, const std::vector<GifColorType>& colors,
                              int transparent = -1, bool interlace = false) {
  std::string out;
  int error = 0;
  GifFileType* gif = EGifOpen(&out, gif_write, &error);
  ColorMapObject* map = GifMakeMapObject(256, nullptr);
  for (size_t i = 0; i < colors.size(); ++i) map->Colors[i] = colors[i];
  EGifSetGifVersion(gif, true);
  EGifPutScreenDesc(gif, w, h, 8, 0, map);
  if (transparent >= 0) {
    GraphicsControlBlock gcb{};
    gcb.TransparentColor = transparent;
    GifByteType ext[4];
    EGifGCBToExtension(&gcb, ext);
    EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, 4, ext);
  }
  EGifPutImageDesc(gif, 0, 0, w, h, interlace, nullptr);
  std::vector<int> order;
  if (interlace) {
    const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    for (int p = 0; p < 4; ++p)
      for (int y = start[p]; y < h; y += step[p]) order.push_back(y);
  } else {
    for (int y = 0; y < h; ++y) order.push_back(y);
  }
  for (int y : order) EGifPutLine(gif, const_cast<GifPixelType*>(index.data() + size_t(y) * w), w);
  EGifCloseFile(gif, &error);
  GifFreeMapObject(map);
  return out;
}

// A PNG made of a signature, an IHDR with any dimensions and one IDAT of `idat_raw`
// compressed: for the header-only limit checks and decompression bombs.
inline std::string png_chunk(const char* type, const std::string& data) {
  std::string out;
  const uint32_t n = uint32_t(data.size());
  out += char(n >> 24), out += char(n >> 16), out += char(n >> 8), out += char(n);
  std::string body = std::string(type, 4) + data;
  out += body;
  const uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size())));
  out += char(crc >> 24), out += char(crc >> 16), out += char(crc >> 8), out += char(crc);
  return out;
}

inline std::string png_with_header(uint32_t w, uint32_t h, const std::string& idat_raw) {
  std::string ihdr;
  for (uint32_t v : {w, h}) ihdr += char(v >> 24), ihdr += char(v >> 16), ihdr += char(v >> 8), ihdr += char(v);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB, no interlace
  uLongf size = compressBound(uLong(idat_raw.size()));
  std::string z(size, '\0');
  compress(reinterpret_cast<Bytef*>(z.data()), &size, reinterpret_cast<const Bytef*>(idat_raw.data()),
           uLong(idat_raw.size()));
  z.resize(size);
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) + png_chunk("IDAT", z) + png_chunk("IEND", "");
}

}  // namespace nextn::testing_vision
