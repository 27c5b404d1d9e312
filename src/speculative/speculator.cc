// speculative/speculator.cc — see speculator.h.
#include "speculative/speculator.h"

#include <algorithm>

#include "model/model.h"
#include "util/log.h"
#include "util/timer.h"

namespace nextn {

namespace {

// Structured output: the drafts the constraint allows, in order, up to the first one it
// forbids (n-gram drafts are not chosen under the constraint; MTP and draft-model drafts
// are, through choose_draft()). The constraint returns to `depth`, its state before the
// drafts: only verification's accepted tokens move it for good.
void keep_allowed_drafts(Constraint& c, int depth, DraftProposal& proposal) {
  c.rollback(c.depth() - depth);
  size_t n = 0;
  while (n < proposal.tokens.size() && c.allows(proposal.tokens[n])) c.accept(proposal.tokens[n++]);
  c.rollback(int(n));
  proposal.tokens.resize(n);
  if (!proposal.q.empty()) proposal.q.resize(n);
}

// What one target forward cost.
struct ForwardCost {
  double seconds = 0;
  double distinct_experts = -1.0;  // per routed layer (Mixture of Experts), < 0: none
};

// Runs the forward and measures it; the verify cost of a Mixture-of-Experts model
// follows the distinct experts it ran.
ForwardCost timed_forward(Model& model, std::span<SequenceRows> rows, ForwardResult& result) {
  const RoutedStats before = model.routed_stats();
  Stopwatch sw;
  model.forward(rows, result);
  ForwardCost c;
  c.seconds = sw.seconds();
  c.distinct_experts = model.routed_stats().experts_per_forward_since(before);
  return c;
}

// Start-up measurement of the forward costs stops after this long (a large model then
// measures only its smaller sizes; the rest is learnt from its steps).
constexpr double kCalibrationSeconds = 3.0;

void count_depth(std::vector<uint64_t>& steps_per_depth, int k) {
  if (steps_per_depth.size() <= size_t(k)) steps_per_depth.resize(size_t(k) + 1, 0);
  steps_per_depth[size_t(k)] += 1;
}

}  // namespace

struct Speculator::Impl {
  Model& target;
  ForwardCostModel forward_costs;
  DraftCostModel draft_costs;
  AcceptanceEstimate pooled{kMaxDraftsPerStep};  // every request's acceptance: new requests start from it
  VerifyRules rules;

  // One step's working set.
  std::vector<PlanSequence> plan_sequences;  // the decoding sequences
  std::vector<size_t> plan_index;            // batch index of each
  std::vector<DraftProposal> proposals;      // per decoding sequence
  std::vector<DraftJob> jobs;                // the drafting sequences
  std::vector<int> constraint_depth;         // per job: its grammar's state before drafting
  std::vector<DraftedRows> drafted;          // per batch entry
  std::vector<SequenceRows> rows;            // per batch entry
  int total_rows = 0;
  bool fresh_sequence = false;               // a drafting sequence takes its request's first step
  DraftPasses passes;
  ForwardResult result;

  // The step's stages (Speculator::step). plan: a depth per decoding sequence (in
  // plan_sequences order; extra_rows: the prefill rows); draft: every drafting sequence's
  // rows, returns the seconds spent; verify_forward: the one target forward; accept:
  // verification, rollback, commits and counts, returns the seconds the commits took.
  std::vector<int> plan(std::span<StepSequence> batch, bool adaptive, int& extra_rows);
  double draft(std::span<StepSequence> batch, const std::vector<int>& depths, Drafter* drafter);
  ForwardCost verify_forward(std::span<StepSequence> batch, bool hidden_wanted);
  double accept(std::span<StepSequence> batch, StepReport& report);

  Impl(Model& model, int max_sequences) : target(model), forward_costs(max_sequences, max_sequences * kMaxRowsPerStep) {}
};

Speculator::Speculator(Model& target, const SpeculativeOptions& options, int max_sequences, RejectionRule on_reject)
    : options_(options), impl_(std::make_unique<Impl>(target, std::max(1, max_sequences))) {
  if (options_.num_draft_tokens > 0) drafter_ = make_drafter(target, options_);
  if (!drafter_) options_.adaptive = false;
  if (drafter_) reads_ = drafter_->reads();
  target.capture_streams(reads_.streams);
  for (const LayerSpec& l : target.config().layers)
    if (l.mlp.routed()) impl_->forward_costs.set_routing(l.mlp.experts, l.mlp.top_k);
  impl_->rules.synthetic_accept = options_.synthetic_accept;
  impl_->rules.on_reject = on_reject;
  if (options_.adaptive) calibrate(max_sequences, kCalibrationSeconds);
}

Speculator::~Speculator() = default;

void Speculator::start(SequenceSpeculation& spec, int request_depth, int max_tokens, const KvOptions& kv) {
  spec.limit = 0;
  spec.counters = {};
  spec.depths.clear();
  spec.draft_seconds = 0;
  if (!drafter_ || request_depth == 0) return;
  spec.limit = request_depth > 0 ? std::min(request_depth, kMaxDraftsPerStep) : options_.num_draft_tokens;
  if (!spec.session) {
    spec.session = drafter_->new_session(max_tokens, kv);
    spec.session_len = 0;
  }
  spec.acceptance.start_from(impl_->pooled);
}

int Speculator::reusable_prefix(const SequenceSpeculation& spec, int n) const {
  return spec.limit > 0 ? std::min(n, spec.session_len) : n;
}

void Speculator::return_to(SequenceSpeculation& spec, int n) {
  if (!spec.session) return;
  spec.session_len = std::min(n, spec.session_len);
  spec.session->rollback(spec.session_len);
}

void Speculator::finish(SequenceSpeculation& spec, int prompt_tokens) {
  // A request that did not draft left the session on an earlier request's tokens.
  if (spec.limit > 0 && spec.session) spec.session->request_finished(prompt_tokens);
}

void Speculator::reset(SequenceSpeculation& spec) {
  spec.session.reset();
  spec.session_len = 0;
}

StepReport Speculator::step(std::span<StepSequence> batch) {
  Impl& s = *impl_;
  StepReport report;
  Stopwatch step_watch;
  int extra_rows = 0;
  const std::vector<int> depths = s.plan(batch, options_.adaptive, extra_rows);
  const double drafting = s.draft(batch, depths, drafter_.get());
  const ForwardCost forward = s.verify_forward(batch, reads_.any());
  const double committing = s.accept(batch, report);
  // What the step cost, less drafting (measured apart, per pass) and the drafters'
  // commits (which may catch a head up on a whole prompt): the forward and the
  // verification and sampling around it, a large share of a step on small models.
  // Not when a sequence takes its request's first step: that pays one-time allocations
  // (the drafter's caches, the row logs of recurrent layers; four fresh sequences of the
  // Qwen3.5-0.8B shape: the draft pass 15x a later one, the forward 1.4x), and a stall
  // recorded for a size the steps seldom visit stands for long.
  if (extra_rows == 0 && !s.fresh_sequence)
    s.forward_costs.record(int(batch.size()), s.total_rows, step_watch.seconds() - drafting - committing,
                           forward.distinct_experts);
  return report;
}

std::vector<int> Speculator::Impl::plan(std::span<StepSequence> batch, bool adaptive, int& extra_rows) {
  extra_rows = 0;
  fresh_sequence = false;
  plan_sequences.clear();
  plan_index.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    StepSequence& q = batch[i];
    q.drafts = 0;
    if (!q.decoding()) {
      extra_rows += int(q.prefill.size());
      continue;
    }
    const int max_depth = q.spec && q.spec->limit > 0 ? std::max(0, std::min(q.spec->limit, q.room)) : 0;
    if (q.spec && q.spec->limit > 0 && q.spec->depths.empty()) fresh_sequence = true;
    plan_sequences.push_back(PlanSequence{q.spec ? &q.spec->acceptance : &pooled, max_depth});
    plan_index.push_back(i);
  }
  std::vector<int> depths(plan_sequences.size(), 0);
  if (!adaptive || plan_sequences.empty()) {
    for (size_t p = 0; p < plan_sequences.size(); ++p) depths[p] = plan_sequences[p].max_depth;
    return depths;
  }
  const int sequences = int(batch.size());
  const DepthPlanner planner(forward_costs, sequences, draft_costs, 0.05 * forward_costs.cost(sequences, sequences));
  depths = planner.plan(plan_sequences, extra_rows);
  // Probes move single sequences to a neighbouring depth now and then.
  const std::vector<int> chosen = depths;
  for (size_t p = 0; p < plan_sequences.size(); ++p)
    if (plan_sequences[p].max_depth > 0)
      depths[p] = batch[plan_index[p]].spec->acceptance.probe(
          chosen[p], plan_sequences[p].max_depth, planner.deeper_could_win(plan_sequences, chosen, p, extra_rows));
  return depths;
}

double Speculator::Impl::draft(std::span<StepSequence> batch, const std::vector<int>& depths, Drafter* drafter) {
  drafted.resize(batch.size());
  proposals.resize(plan_sequences.size());
  jobs.clear();
  constraint_depth.clear();
  for (size_t p = 0; p < plan_sequences.size(); ++p) {
    StepSequence& q = batch[plan_index[p]];
    proposals[p].clear();
    if (depths[p] <= 0) continue;
    Constraint* c = q.sampler->constraint();
    constraint_depth.push_back(c ? c->depth() : 0);
    jobs.push_back(DraftJob{q.spec->session.get(), q.last, depths[p], q.sampler, q.state, &proposals[p]});
  }
  passes.clear();
  double seconds = 0;
  if (!jobs.empty()) {
    Stopwatch sw;
    drafter->propose(jobs, passes);
    seconds = sw.seconds();
    for (size_t j = 0; j < jobs.size(); ++j)
      if (Constraint* c = jobs[j].sampler->constraint()) keep_allowed_drafts(*c, constraint_depth[j], *jobs[j].out);
    if (!fresh_sequence)
      for (size_t d = 0; d < passes.sequences.size(); ++d) draft_costs.record(int(d), passes.sequences[d], passes.seconds[d]);
  }
  for (size_t p = 0; p < plan_sequences.size(); ++p) {
    StepSequence& q = batch[plan_index[p]];
    DraftedRows& d = drafted[plan_index[p]];
    d.rows.assign(1, q.last);
    d.rows.insert(d.rows.end(), proposals[p].tokens.begin(), proposals[p].tokens.end());
    d.q.swap(proposals[p].q);
    d.drafter = proposals[p].drafter;
    d.draft_seconds = depths[p] > 0 ? seconds / double(jobs.size()) : 0.0;
  }
  return seconds;
}

ForwardCost Speculator::Impl::verify_forward(std::span<StepSequence> batch, bool hidden_wanted) {
  rows.clear();
  total_rows = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    StepSequence& q = batch[i];
    SequenceRows r;
    r.state = q.state;
    r.position_offset = q.position_offset;
    if (!q.decoding()) {
      r.tokens = q.prefill;
      r.embeddings = q.embeddings;
      r.positions = q.positions;
      if (q.last_chunk) r.logit_rows.push_back(int(q.prefill.size()) - 1);
    } else {
      r.tokens = drafted[i].rows;
      for (int j = 0; j < int(r.tokens.size()); ++j) r.logit_rows.push_back(j);
      r.snapshots = r.tokens.size() > 1;  // verify rows: the state must be able to return to any of them
    }
    if (hidden_wanted && q.spec && q.spec->limit > 0)
      for (int j = 0; j < int(r.tokens.size()); ++j) r.hidden_rows.push_back(j);
    total_rows += int(r.tokens.size());
    rows.push_back(std::move(r));
  }
  return timed_forward(target, rows, result);
}

double Speculator::Impl::accept(std::span<StepSequence> batch, StepReport& report) {
  const int vocab = target.config().vocab_size;
  const size_t H = size_t(target.config().hidden_size);
  const size_t S = target.captured_streams().size() * H;  // stream floats per hidden row
  size_t logit_row = 0, hidden_row = 0;
  double committing = 0;  // drafters catching up on prompts: drafting work, not the forward's
  auto commit = [&](SequenceSpeculation& spec, int start, std::span<const int32_t> tokens, const TargetRows& hidden) {
    Stopwatch sw;
    spec.session->commit(start, tokens, hidden);
    committing += sw.seconds();
    spec.session_len = start + int(tokens.size());
  };
  for (size_t i = 0; i < batch.size(); ++i) {
    StepSequence& q = batch[i];
    const SequenceRows& r = rows[i];
    const float* logits = result.logits.data() + logit_row * size_t(vocab);
    TargetRows hidden;
    if (!r.hidden_rows.empty()) {
      hidden.post_norm = result.hidden_post.data() + hidden_row * H;
      if (S > 0) hidden.streams = result.streams.data() + hidden_row * S;
    }
    logit_row += r.logit_rows.size();
    hidden_row += r.hidden_rows.size();
    SequenceSpeculation* spec = q.spec;
    const bool drafting = spec && spec->limit > 0 && spec->session;
    if (!q.decoding()) {
      if (drafting) commit(*spec, q.state->length() - int(q.prefill.size()), q.prefill, hidden);
      q.logits = q.last_chunk ? logits : nullptr;
      continue;
    }
    const DraftedRows& d = drafted[i];
    const int k = d.num_drafts();
    const int base = q.state->length() - int(d.rows.size());
    q.tokens = verify_rows(d, logits, vocab, *q.sampler, rules);
    q.drafts = k;
    q.logits = logits;
    // Keep [last, d1..da]; drop the rejected rows.
    std::span<const int32_t> kept(d.rows.data(), size_t(q.tokens.accepted + 1));
    q.state->return_to(base + int(kept.size()));
    if (drafting) commit(*spec, base, kept, hidden);
    if (k > 0) report.counters.record(k, q.tokens.accepted, d.drafter);
    if (!spec || spec->limit <= 0) continue;
    if (k > 0) {
      spec->counters.record(k, q.tokens.accepted, d.drafter);
      spec->acceptance.record(k, q.tokens.accepted);
      pooled.record(k, q.tokens.accepted);
    }
    spec->draft_seconds += d.draft_seconds;
    count_depth(spec->depths, k);
    count_depth(report.depths, k);
  }
  return committing;
}

void Speculator::calibrate(int max_sequences, double budget_seconds) {
  Impl& s = *impl_;
  const int vocab = s.target.config().vocab_size;
  const bool hidden = reads_.any();
  const int per_sequence = std::max(1, std::min(options_.num_draft_tokens + 1, kMaxRowsPerStep));
  // One sequence verifying 1..k+1 rows, and (with several slots) every slot verifying
  // 1..k+1 rows each: the planner's single-sequence shape and a full batch's offset.
  std::vector<int> batch_sizes = {1};
  if (max_sequences > 1) batch_sizes.push_back(max_sequences);
  std::vector<std::unique_ptr<SequenceState>> states;
  std::vector<int32_t> tokens(static_cast<size_t>(per_sequence));
  for (int i = 0; i < per_sequence; ++i) tokens[size_t(i)] = int32_t((i * 7919 + 11) % vocab);
  auto run = [&](int b, int rows) {
    while (int(states.size()) < b) states.push_back(s.target.new_state(per_sequence + 1, KvOptions{}));
    std::vector<SequenceRows> batch(static_cast<size_t>(b));
    for (int i = 0; i < b; ++i) {
      SequenceRows& r = batch[size_t(i)];
      r.state = states[size_t(i)].get();
      r.tokens = std::span<const int32_t>(tokens.data(), size_t(rows));
      for (int j = 0; j < rows; ++j) r.logit_rows.push_back(j);
      if (hidden) r.hidden_rows = r.logit_rows;
      r.snapshots = rows > 1;
    }
    const ForwardCost c = timed_forward(s.target, batch, s.result);
    for (auto& st : states) {
      if (st->can_return_to(0)) st->return_to(0);
      else st = s.target.new_state(per_sequence + 1, KvOptions{});  // a sliding ring moved on
    }
    return c;
  };
  Stopwatch sw;
  for (int b : batch_sizes) run(b, per_sequence);  // one-time allocations at the largest sizes
  // Sizes in turns, so a busy moment does not fall on one size alone; the fastest of up
  // to three forwards a size (a busy host only ever slows a forward down), as far as the
  // budget goes. Steps refine the estimates from then on.
  std::vector<std::pair<int, int>> sizes;  // (sequences, rows each)
  for (int b : batch_sizes)
    for (int rows = 1; rows <= per_sequence; ++rows) sizes.emplace_back(b, rows);
  std::vector<ForwardCost> fastest(sizes.size());
  std::vector<bool> seen(sizes.size(), false);
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < sizes.size() && sw.seconds() < budget_seconds; ++i) {
      const ForwardCost c = run(sizes[i].first, sizes[i].second);
      if (!seen[i] || c.seconds < fastest[i].seconds) fastest[i] = c;
      seen[i] = true;
    }
  int measured = 0;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (seen[i]) {
      const auto [b, rows] = sizes[i];
      s.forward_costs.calibrate(b, b * rows, fastest[i].seconds, fastest[i].distinct_experts);
      ++measured;
    }
  log_info("speculation: measured {} target forward sizes (1 and {} sequences, 1..{} rows each) in {:.0f} ms; the "
           "rest is learnt as steps run",
           measured, batch_sizes.back(), per_sequence, sw.seconds() * 1e3);
}

}  // namespace nextn
