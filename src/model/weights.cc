// model/weights.cc — tensor binding and embedding lookup.
#include "model/weights.h"

#include <sys/mman.h>

#include <cstring>
#include <string_view>

#include "io/checkpoint.h"
#include "kernels/weight_format.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace nextn {

WeightStore::WeightStore(const Checkpoint& ckpt, bool copy)
    : ckpt_(ckpt), copy_(copy), mlx_(MlxQuantization::from_config(ckpt.config(), ckpt.dir() + "/config.json")) {}

void* WeightStore::allocate(size_t bytes) {
  // Large matrices go on transparent huge pages: 512x fewer page faults while copying and
  // fewer TLB misses while streaming them every decode step.
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t align = bytes >= 2 * kHuge ? kHuge : 64;
  size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
  if (!p) fail(ErrorKind::kResource, "out of memory allocating {} bytes of weights", bytes);
#ifdef MADV_HUGEPAGE
  if (align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);  // a hint; failure is harmless
#endif
  buffers_.emplace_back(p);
  return p;
}

bool WeightStore::has(const std::string& name) const { return ckpt_.has(name); }

std::string WeightStore::mlx_module(const std::string& name) const {
  constexpr std::string_view kSuffix = ".weight";
  if (name.size() <= kSuffix.size() || name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return "";
  std::string module = name.substr(0, name.size() - kSuffix.size());
  return is_mlx_quantized(ckpt_, module) ? module : "";
}

WeightMatrix WeightStore::matrix(const std::string& name, int64_t rows, int64_t cols, Access access) {
  if (const std::string module = mlx_module(name); !module.empty()) {
    WeightMatrix m;
    m.dtype = mlx_matrix_dtype(ckpt_, mlx_, module, rows, cols);
    m.rows = rows;
    m.cols = cols;
    const size_t bytes = static_cast<size_t>(rows) * dtype_row_bytes(m.dtype, cols);
    void* p = allocate(bytes);
    repack_mlx_matrix(ckpt_, module, m.dtype, rows, cols, p);
    m.data = p;
    matrix_bytes_ += bytes;
    return m;
  }
  const TensorView& t = ckpt_.require(name, {rows, cols});
  return bind(t, rows, cols, rows, access);
}

WeightMatrix WeightStore::stacked(const std::string& name, int64_t n, int64_t rows, int64_t cols) {
  if (!mlx_module(name).empty() || !mlx_module(name + ".weight").empty())
    fail(ErrorKind::kUnsupported, "{}: MLX-quantized stacked experts are not supported", name);
  const TensorView& t = ckpt_.require(name, {n, rows, cols});
  return bind(t, n * rows, cols, rows, Access::kMatmul);  // groups must not straddle two experts
}

WeightMatrix WeightStore::bind(const TensorView& t, int64_t rows, int64_t cols, int64_t group, Access access) {
  WeightMatrix m;
  m.dtype = t.dtype;
  m.rows = rows;
  m.cols = cols;
  const Interleaving* layout = copy_ && access == Access::kMatmul ? interleaving(t.dtype) : nullptr;
  if (layout && group % weight_format(layout->layout)->group_rows == 0) {
    m.dtype = layout->layout;
    const size_t bytes = static_cast<size_t>(rows) * dtype_row_bytes(m.dtype, cols);
    void* p = allocate(bytes);
    // Groups of 16 rows are independent: repack them over the pool (a few seconds a
    // gigabyte on one core).
    const size_t file_row = dtype_row_bytes(t.dtype, cols), layout_row = dtype_row_bytes(m.dtype, cols);
    parallel_for(
        static_cast<size_t>(rows / 16),
        [&](size_t begin, size_t end, int) {
          layout->repack(static_cast<const uint8_t*>(t.data) + begin * 16 * file_row, int64_t(end - begin) * 16, cols,
                         static_cast<uint8_t*>(p) + begin * 16 * layout_row);
        },
        64);
    m.data = p;
    matrix_bytes_ += bytes;
    return m;
  }
  if (copy_) {
    void* p = allocate(t.nbytes);
    std::memcpy(p, t.data, t.nbytes);
    m.data = p;
  } else {
    m.data = t.data;
  }
  matrix_bytes_ += t.nbytes;
  return m;
}

WeightMatrix slice_rows(const WeightMatrix& m, int64_t row0, int64_t n) {
  if (row0 < 0 || n < 0 || row0 + n > m.rows)
    fail(ErrorKind::kInternal, "slice_rows: rows [{}, {}) of a {}-row matrix", row0, row0 + n, m.rows);
  if (is_quantized(m.dtype))
    if (const int64_t group = weight_format(m.dtype)->group_rows; row0 % group != 0 || n % group != 0)
      fail(ErrorKind::kInternal, "slice_rows: rows [{}, {}) cut {}'s groups of {} rows", row0, row0 + n,
           dtype_name(m.dtype), group);
  WeightMatrix s = m;
  s.rows = n;
  s.data = static_cast<const char*>(m.data) + dtype_row_bytes(m.dtype, m.cols) * size_t(row0);
  return s;
}

WeightMatrix WeightStore::row_table(const std::string& name, int64_t rows, int64_t cols) {
  if (!copy_ || !mlx_module(name).empty()) return matrix(name, rows, cols, Access::kRows);  // MLX: repacked in memory
  const TensorView& t = ckpt_.require(name, {rows, cols});
  WeightMatrix m;
  m.dtype = t.dtype;
  m.rows = rows;
  m.cols = cols;
  m.data = t.data;
  matrix_bytes_ += t.nbytes;
  uses_mapping_ = true;
  return m;
}

Linear WeightStore::linear(const std::string& prefix, int64_t rows, int64_t cols, bool bias) {
  Linear l;
  l.w = matrix(prefix + ".weight", rows, cols);
  if (bias) l.bias = vector(prefix + ".bias", rows);
  return l;
}

const float* WeightStore::vector(const std::string& name, int64_t n) { return floats(name, {n}); }

const float* WeightStore::floats(const std::string& name, std::vector<int64_t> shape, float offset) {
  const TensorView& t = ckpt_.require(name, shape);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  float* out = static_cast<float*>(allocate(static_cast<size_t>(n) * sizeof(float)));
  if (is_quantized(t.dtype)) {  // GGUF keeps 1-D tensors in F32, but a file may quantize them
    convert_row(t.dtype, t.data, n, out);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = t.float_at(i);
  }
  if (offset != 0.0f)
    for (int64_t i = 0; i < n; ++i) out[i] += offset;
  return out;
}

WeightMatrix WeightStore::float_matrix(const std::string& name, int64_t rows, int64_t cols) {
  const float* values = floats(name, {rows, cols});
  matrix_bytes_ += static_cast<size_t>(rows * cols) * sizeof(float);
  return {DType::kF32, rows, cols, values};
}

void embed_rows(const WeightMatrix& embedding, const int32_t* tokens, int64_t n, float* out) {
  for (int64_t r = 0; r < n; ++r) {
    int32_t tok = tokens[r];
    if (tok < 0 || tok >= embedding.rows)
      fail(ErrorKind::kBadInput, "token id {} is out of range (vocabulary size {})", tok, embedding.rows);
    matrix_row(embedding, tok, out + r * embedding.cols);
  }
}

}  // namespace nextn
