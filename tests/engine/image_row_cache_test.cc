// tests/engine/image_row_cache_test.cc — the engine's picture cache: hits by hash and
// size, least recently used entries dropped past the byte budget, oversize entries kept out.
#include "engine/image_row_cache.h"

#include <gtest/gtest.h>

namespace nextn {
namespace {

ImageRowCache::Rows rows(size_t n, float value) { return std::make_shared<const std::vector<float>>(n, value); }

TEST(ImageRowCache, FindsByHashAndSize) {
  ImageRowCache cache(1024);
  cache.insert(7, rows(16, 1.0f));
  ASSERT_NE(cache.find(7, 16), nullptr);
  EXPECT_EQ((*cache.find(7, 16))[0], 1.0f);
  EXPECT_EQ(cache.find(7, 32), nullptr);  // same pixels at another processed size
  EXPECT_EQ(cache.find(8, 16), nullptr);
}

TEST(ImageRowCache, DropsLeastRecentlyUsedPastTheBudget) {
  ImageRowCache cache(3 * 16 * sizeof(float));
  cache.insert(1, rows(16, 1.0f));
  cache.insert(2, rows(16, 2.0f));
  cache.insert(3, rows(16, 3.0f));
  ASSERT_NE(cache.find(1, 16), nullptr);  // 1 is now the most recently used
  cache.insert(4, rows(16, 4.0f));        // 2 goes
  EXPECT_EQ(cache.find(2, 16), nullptr);
  EXPECT_NE(cache.find(1, 16), nullptr);
  EXPECT_NE(cache.find(3, 16), nullptr);
  EXPECT_NE(cache.find(4, 16), nullptr);
  EXPECT_EQ(cache.bytes(), 3 * 16 * sizeof(float));
  cache.insert(3, rows(16, 5.0f));  // replacing an entry keeps one copy
  EXPECT_EQ((*cache.find(3, 16))[0], 5.0f);
  EXPECT_EQ(cache.bytes(), 3 * 16 * sizeof(float));
}

TEST(ImageRowCache, KeepsOutAnEntryLargerThanTheBudget) {
  ImageRowCache cache(64);
  cache.insert(1, rows(4, 1.0f));
  cache.insert(2, rows(100, 2.0f));
  EXPECT_EQ(cache.find(2, 100), nullptr);
  EXPECT_NE(cache.find(1, 4), nullptr);
}

}  // namespace
}  // namespace nextn
