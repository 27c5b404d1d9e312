// engine/image_row_cache.h — the vision encoder's output rows of recent pictures, keyed by
// the pixels' hash, so a picture sent again (the next turn of a conversation, another
// client asking about the same screenshot) is not encoded again. The tower costs seconds
// per picture on a CPU and runs on the engine thread, where it stalls every sequence.
// Least recently used entries go first once the bytes pass the budget. Engine thread only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

namespace nextn {

class ImageRowCache {
 public:
  using Rows = std::shared_ptr<const std::vector<float>>;

  explicit ImageRowCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // The rows stored for (hash, n_floats), or null.
  Rows find(uint64_t hash, size_t n_floats);
  // Keeps `rows` (dropping the least recently used beyond the budget; a single entry
  // larger than the budget is not kept).
  void insert(uint64_t hash, Rows rows);

  size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    uint64_t hash;
    Rows rows;
  };
  size_t budget_;
  size_t bytes_ = 0;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
};

}  // namespace nextn
