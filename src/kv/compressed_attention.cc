// kv/compressed_attention.cc — the online-softmax driver of compressed_attention.h.
#include "kv/compressed_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kv/hadamard.h"
#include "util/thread_pool.h"

namespace nextn {

namespace {

struct Scratch {
  std::vector<float> q_plain, q_rot, q_sum, scores, m, l, acc_plain, acc_rot;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void ensure(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

int attention_rows_per_job(int group) { return std::max(1, 64 / std::max(1, group)); }

void attend_all_kv_heads(int n_heads, int n_kv_heads, int head_dim, int pos, int n, const float* q, float* out,
                         float scale, const RandomizedHadamard* rotation, int rot_dim, const HeadSegmentsFn& segments) {
  const int g = n_heads / n_kv_heads;
  const int rows_per_job = attention_rows_per_job(g);
  const int row_jobs = (n + rows_per_job - 1) / rows_per_job;
  parallel_for(static_cast<size_t>(n_kv_heads) * row_jobs, [&](size_t begin, size_t end, int) {
    for (size_t item = begin; item < end; ++item) {
      const int h = static_cast<int>(item % n_kv_heads), rj = static_cast<int>(item / n_kv_heads);
      AttnSegment segs[kMaxAttnSegments];
      AttnHeadJob job;
      job.segments = segs;
      job.n_segments = segments(h, segs);
      job.head_dim = head_dim;
      job.rot_dim = rot_dim;
      job.rotation = rotation;
      job.scale = scale;
      job.q = q;
      job.out = out;
      job.q_stride = static_cast<size_t>(n_heads) * head_dim;
      job.pos = pos;
      job.row_begin = rj * rows_per_job;
      job.row_end = std::min(n, job.row_begin + rows_per_job);
      job.head_begin = h * g;
      job.n_heads = g;
      attend_kv_head(job);
    }
  });
}

void attend_kv_head(const AttnHeadJob& job) {
  const int D = job.head_dim, Dp = std::max(job.rot_dim, D), g = job.n_heads;
  const int n_rows = job.row_end - job.row_begin, nq = n_rows * g;
  bool any_rot = false, any_plain = false;
  int max_groups = 1;
  for (int s = 0; s < job.n_segments; ++s) {
    if (job.segments[s].count <= 0) continue;
    (job.segments[s].rotated ? any_rot : any_plain) = true;
    max_groups = std::max(max_groups, job.segments[s].format.n_groups());
  }
  Scratch& sc = scratch();
  ensure(sc.m, nq);
  ensure(sc.l, nq);
  ensure(sc.scores, static_cast<size_t>(nq) * kKernelTile);
  ensure(sc.q_plain, static_cast<size_t>(nq) * D);
  ensure(sc.acc_plain, static_cast<size_t>(nq) * D);
  ensure(sc.q_sum, static_cast<size_t>(nq) * max_groups);
  float* m = sc.m.data();
  float* l = sc.l.data();
  float* S = sc.scores.data();
  float* qp = sc.q_plain.data();
  float* ap = sc.acc_plain.data();
  float* qr = nullptr;
  float* ar = nullptr;
  // Queries (pre-scaled), query k = (row r, head hh) at k = r·g + hh.
  for (int r = 0; r < n_rows; ++r)
    for (int hh = 0; hh < g; ++hh) {
      const float* src = job.q + static_cast<size_t>(job.row_begin + r) * job.q_stride +
                         static_cast<size_t>(job.head_begin + hh) * D;
      float* dst = qp + static_cast<size_t>(r * g + hh) * D;
      for (int i = 0; i < D; ++i) dst[i] = src[i] * job.scale;
    }
  std::fill(m, m + nq, -std::numeric_limits<float>::infinity());
  std::fill(l, l + nq, 0.0f);
  std::fill(ap, ap + static_cast<size_t>(nq) * D, 0.0f);
  if (any_rot) {
    ensure(sc.q_rot, static_cast<size_t>(nq) * Dp);
    ensure(sc.acc_rot, static_cast<size_t>(nq) * Dp);
    qr = sc.q_rot.data();
    ar = sc.acc_rot.data();
    const int block = job.rotation->block();
    for (int k = 0; k < nq; ++k) {
      float* dst = qr + static_cast<size_t>(k) * Dp;
      std::memcpy(dst, qp + static_cast<size_t>(k) * D, D * sizeof(float));
      std::fill(dst + D, dst + Dp, 0.0f);
      job.rotation->forward(dst, Dp / block);
    }
    std::fill(ar, ar + static_cast<size_t>(nq) * Dp, 0.0f);
  }
  const int last_visible = job.pos + job.row_end - 1;  // highest position any row sees
  for (int s = 0; s < job.n_segments; ++s) {
    const AttnSegment& seg = job.segments[s];
    const RowFormat& f = seg.format;
    const float* q = seg.rotated ? qr : qp;
    float* acc = seg.rotated ? ar : ap;
    const int dim = f.dim;
    const float* qsum = nullptr;
    if (f.has_bias()) {  // per-group sums of the (plain) queries
      const int ng = f.n_groups(), G = f.group;
      for (int k = 0; k < nq; ++k)
        for (int gi = 0; gi < ng; ++gi) {
          float t = 0;
          for (int i = 0; i < G; ++i) t += q[static_cast<size_t>(k) * dim + gi * G + i];
          sc.q_sum[static_cast<size_t>(k) * ng + gi] = t;
        }
      qsum = sc.q_sum.data();
    }
    for (int off = 0; off < seg.count; off += kKernelTile) {
      const int t0 = seg.first + off;
      if (t0 > last_visible) break;
      const int nt = std::min({kKernelTile, seg.count - off, last_visible - t0 + 1});
      score_rows(f, seg.k + off * seg.stride, seg.stride, nt, q, qsum, nq, S, kKernelTile);
      for (int k = 0; k < nq; ++k) {
        float* row = S + static_cast<size_t>(k) * kKernelTile;
        const int r = job.row_begin + k / g;
        const int valid = std::min(nt, job.pos + r - t0 + 1);
        if (valid <= 0) {
          std::fill(row, row + nt, 0.0f);
          continue;
        }
        const float corr = online_softmax_block(row, valid, m[k], l[k]);
        if (corr != 1.0f) {
          scale_floats(ap + static_cast<size_t>(k) * D, D, corr);
          if (ar) scale_floats(ar + static_cast<size_t>(k) * Dp, Dp, corr);
        }
        std::fill(row + valid, row + nt, 0.0f);
      }
      accumulate_rows(f, seg.v + off * seg.stride, seg.stride, nt, S, kKernelTile, nq, acc);
    }
  }
  for (int k = 0; k < nq; ++k) {
    const int r = k / g, hh = k % g;
    float* dst = job.out + static_cast<size_t>(job.row_begin + r) * job.q_stride +
                 static_cast<size_t>(job.head_begin + hh) * D;
    const float inv = l[k] > 0 ? 1.0f / l[k] : 0.0f;
    const float* a = ap + static_cast<size_t>(k) * D;
    if (ar) {
      float* rot = ar + static_cast<size_t>(k) * Dp;
      job.rotation->inverse(rot, Dp / job.rotation->block());
      for (int i = 0; i < D; ++i) dst[i] = (a[i] + rot[i]) * inv;
    } else {
      for (int i = 0; i < D; ++i) dst[i] = a[i] * inv;
    }
  }
  (void)any_plain;
}

}  // namespace nextn
