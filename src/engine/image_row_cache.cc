// engine/image_row_cache.cc — see image_row_cache.h.
#include "engine/image_row_cache.h"

namespace nextn {

ImageRowCache::Rows ImageRowCache::find(uint64_t hash, size_t n_floats) {
  const auto it = index_.find(hash);
  if (it == index_.end() || it->second->rows->size() != n_floats) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->rows;
}

void ImageRowCache::insert(uint64_t hash, Rows rows) {
  const size_t size = rows->size() * sizeof(float);
  if (size > budget_) return;
  if (const auto it = index_.find(hash); it != index_.end()) {
    bytes_ -= it->second->rows->size() * sizeof(float);
    order_.erase(it->second);
    index_.erase(it);
  }
  order_.push_front({hash, std::move(rows)});
  index_[hash] = order_.begin();
  bytes_ += size;
  while (bytes_ > budget_) {
    const Entry& last = order_.back();
    bytes_ -= last.rows->size() * sizeof(float);
    index_.erase(last.hash);
    order_.pop_back();
  }
}

}  // namespace nextn
