// tests/speculative/suffix_index_test.cc — the counted trie of suffix decoding against
// brute force over the same sequences: every string's count, the longest matching suffix
// and the continuation it drafts, also after sequences are taken out again and their
// nodes reused.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "speculative/suffix_index.h"

namespace nextn {
namespace {

using Seq = std::vector<int32_t>;

// Occurrences of s in the sequences (every start position).
int count_of(const std::vector<Seq>& seqs, const Seq& s, bool followed = false) {
  int n = 0;
  for (const Seq& q : seqs)
    for (size_t i = 0; i + s.size() + (followed ? 1 : 0) <= q.size(); ++i)
      if (std::equal(s.begin(), s.end(), q.begin() + long(i))) ++n;
  return n;
}

Seq random_seq(std::mt19937& rng, int len, int vocab) {
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  Seq s(static_cast<size_t>(len));
  for (auto& t : s) t = tok(rng);
  return s;
}

// Every string of up to `depth` tokens that occurs, and some that do not, counted right.
void expect_counts(const SuffixIndex& index, const std::vector<Seq>& seqs, std::mt19937& rng, int vocab) {
  for (const Seq& q : seqs)
    for (size_t i = 0; i < q.size(); ++i)
      for (size_t len = 1; len <= size_t(index.depth()) && i + len <= q.size(); ++len) {
        const Seq s(q.begin() + long(i), q.begin() + long(i + len));
        ASSERT_EQ(index.count(s), count_of(seqs, s)) << "at " << i << " length " << len;
      }
  for (int trial = 0; trial < 200; ++trial) {
    const Seq s = random_seq(rng, 1 + trial % 4, vocab);
    ASSERT_EQ(index.count(s), count_of(seqs, s));
  }
}

// The longest suffix of the context followed by a token somewhere, and its greedy
// continuation (the most frequent next token, ties to the smaller id, while the product
// of count(s + x) / count(s) stays ≥ the bound).
void expect_match(const SuffixIndex& index, const std::vector<Seq>& seqs, const Seq& context, int max_length,
                  int vocab) {
  int want = 0;
  for (int m = std::min<int>({max_length, int(context.size()), index.depth() - 1}); m >= 1 && !want; --m)
    if (count_of(seqs, Seq(context.end() - m, context.end()), true) > 0) want = m;
  const SuffixIndex::Match got = index.longest_suffix(context, max_length);
  ASSERT_EQ(got.length, want);
  if (!want) return;
  Seq s(context.end() - want, context.end()), drafted;
  const double bound = 0.05;
  double p = 1.0;
  Seq expected;
  while (int(s.size()) < index.depth() && int(expected.size()) < 8) {
    int best = -1, best_count = 0;
    for (int32_t x = 0; x < vocab; ++x) {
      Seq t = s;
      t.push_back(x);
      const int c = count_of(seqs, t);
      if (c > best_count) best = x, best_count = c;
    }
    if (best < 0) break;
    const double step = double(best_count) / double(count_of(seqs, s));
    if (p * step < bound) break;
    p *= step;
    expected.push_back(best);
    s.push_back(best);
  }
  const double got_p = index.continue_match(got, 8, bound, drafted);
  EXPECT_EQ(drafted, expected);
  EXPECT_NEAR(got_p, p, 1e-12);
}

TEST(SuffixIndex, CountsMatchesAndContinuationsEqualBruteForce) {
  std::mt19937 rng(5);
  const int vocab = 4, depth = 6;
  SuffixIndex index(depth);
  std::vector<Seq> seqs;
  for (int i = 0; i < 6; ++i) {
    seqs.push_back(random_seq(rng, 20 + 7 * i, vocab));
    index.add(seqs.back());
  }
  expect_counts(index, seqs, rng, vocab);
  for (int trial = 0; trial < 100; ++trial)
    expect_match(index, seqs, random_seq(rng, 1 + trial % 12, vocab), 1 + trial % 7, vocab);

  // Take three out (their nodes are freed), add two more (reusing them), and recheck.
  const size_t before = index.nodes_in_use();
  for (int i : {4, 1, 0}) {
    index.remove(seqs[size_t(i)]);
    seqs.erase(seqs.begin() + i);
  }
  EXPECT_LT(index.nodes_in_use(), before);
  expect_counts(index, seqs, rng, vocab);
  for (int i = 0; i < 2; ++i) {
    seqs.push_back(random_seq(rng, 30, vocab));
    index.add(seqs.back());
  }
  expect_counts(index, seqs, rng, vocab);
  for (int trial = 0; trial < 100; ++trial)
    expect_match(index, seqs, random_seq(rng, 1 + trial % 12, vocab), 1 + trial % 7, vocab);

  // Everything out: nothing left but the root.
  for (const Seq& q : seqs) index.remove(q);
  EXPECT_EQ(index.nodes_in_use(), 1u);
  EXPECT_EQ(index.longest_suffix(seqs[0], 5).length, 0);
}

TEST(SuffixIndex, GrowingSequenceEqualsWholeAdd) {
  std::mt19937 rng(9);
  const Seq q = random_seq(rng, 200, 3);
  SuffixIndex grown(8), whole(8);
  SuffixIndex::Cursor cursor;
  for (int32_t t : q) grown.append(cursor, t);
  whole.add(q);
  expect_counts(grown, {q}, rng, 3);
  EXPECT_EQ(grown.nodes_in_use(), whole.nodes_in_use());
}

TEST(SuffixIndex, RepeatedTextDraftsItsContinuation) {
  // A line that occurred before: after its first words the rest is drafted, as far as
  // the match allows and the trie is deep.
  const Seq line = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  SuffixIndex index(16);
  Seq text = {1, 2, 3};
  text.insert(text.end(), line.begin(), line.end());
  text.insert(text.end(), {4, 5});
  index.add(text);
  const Seq context = {7, 8, 10, 11, 12};
  const SuffixIndex::Match m = index.longest_suffix(context, 8);
  EXPECT_EQ(m.length, 3);
  Seq drafted;
  EXPECT_DOUBLE_EQ(index.continue_match(m, 20, 0.1, drafted), 1.0);
  EXPECT_EQ(drafted, (Seq{13, 14, 15, 16, 17, 18, 19, 4, 5}));
}

}  // namespace
}  // namespace nextn
