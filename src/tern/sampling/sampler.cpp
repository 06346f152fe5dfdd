// Sampler: penalties on a copy of the row, then the truncations on a candidate list (top_k by a
// partial sort, top_p by a heap selection or a bisection, never a full sort), then one
// uniform draw walked over the kept tokens in a fixed order. Every ordering uses one total order
// (logit, then id), so no result depends on how a selection algorithm moves equal elements.
#include "tern/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tern/structured/token_mask.h"

namespace tern {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Up to this top_k a heap selection (partial_sort) is cheapest; above, nth_element then a sort.
constexpr size_t kHeapSelectMaxK = 4096;
// top_p first looks for its nucleus among this many most likely tokens (one heap selection);
// a wider nucleus is found by bisection with nth_element, O(vocab), never a full sort.
constexpr size_t kNucleusFirstGuess = 64;

struct Candidate {
  float logit;  // processed
  int32_t id;
  float weight;  // exp((logit − max) / T), once computed
};

// Most likely first; ties by the lower id.
bool more_likely(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Vocabulary-sized working memory, per thread: one Sampler per sequence would otherwise hold
// megabytes each for a 152K vocabulary, and none of it outlives a call.
struct Scratch {
  std::vector<float> logits;          // [vocab]: the processed row
  std::vector<float> weights;         // [vocab]: exp((logit − max) / T), in id order
  std::vector<Candidate> candidates;  // [<= vocab]
  std::vector<Candidate> selection;   // [<= vocab]: a copy top_p may reorder
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// 53 random bits → [0, 1): the same on every standard library (the distributions are not).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1p-53; }

float weight(float logit, float max_logit, float temperature) {
  // Division, not a multiply by 1/T: at a denormal T the inverse is inf and 0 * inf is NaN.
  return std::exp((logit - max_logit) / temperature);
}

// The one draw over `kept`, walked in its order. Returns the last token with weight when
// rounding leaves the target at the very end.
int32_t pick(std::span<const Candidate> kept, double u) {
  double total = 0.0;
  for (const Candidate& c : kept) total += c.weight;
  const double target = u * total;
  double acc = 0.0;
  int32_t last = kept.front().id;
  for (const Candidate& c : kept) {
    if (c.weight <= 0.0f) continue;
    acc += c.weight;
    last = c.id;
    if (target < acc) return c.id;
  }
  return last;
}

// Sorts the first `k` of c[0, n) (most likely first) and leaves the rest after them.
void select_top(std::vector<Candidate>& c, size_t k, size_t n) {
  const auto first = c.begin();
  const auto mid = first + static_cast<std::ptrdiff_t>(k);
  const auto last = first + static_cast<std::ptrdiff_t>(n);
  if (k <= kHeapSelectMaxK) {
    std::partial_sort(first, mid, last, more_likely);
  } else {
    std::nth_element(first, mid, last, more_likely);
    std::sort(first, mid, more_likely);
  }
}

// top_p over sorted c[0, n): the length of the smallest prefix whose mass reaches top_p.
size_t nucleus_of_sorted(std::span<const Candidate> c, float top_p) {
  double total = 0.0;
  for (const Candidate& x : c) total += x.weight;
  const double goal = static_cast<double>(top_p) * total;
  double mass = 0.0;
  for (size_t i = 0; i < c.size(); ++i) {
    mass += c[i].weight;
    if (mass >= goal) return i + 1;
  }
  return c.size();
}

// The least likely token of the top_p nucleus of `sel` (which it reorders): the smallest
// most-likely-first set whose mass reaches `goal`.
Candidate nucleus_boundary(std::vector<Candidate>& sel, double goal) {
  auto at = [&](size_t i) { return sel.begin() + static_cast<std::ptrdiff_t>(i); };
  const size_t n = sel.size();
  size_t lo = 0, hi = std::min(n, kNucleusFirstGuess);
  std::partial_sort(at(0), at(hi), at(n), more_likely);
  double above = 0.0;  // the mass of sel[0, lo), all in the nucleus
  for (size_t i = 0; i < hi; ++i) {
    if (above + sel[i].weight >= goal) return sel[i];
    above += sel[i].weight;
  }
  // Wider: bisect [lo, hi) = the unsorted rest, keeping "the boundary is in [lo, hi)".
  lo = hi;
  hi = n;
  while (hi - lo > kNucleusFirstGuess) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(at(lo), at(mid), at(hi), more_likely);
    double upper = above;
    for (size_t i = lo; i < mid; ++i) upper += sel[i].weight;
    if (upper >= goal) {
      hi = mid;
    } else {
      above = upper;
      lo = mid;
    }
  }
  std::sort(at(lo), at(hi), more_likely);
  for (size_t i = lo; i < hi; ++i) {
    above += sel[i].weight;
    if (above >= goal) return sel[i];
  }
  return sel[hi - 1];  // rounding left the goal just out of reach: everything
}

// top_p over unsorted c[0, n) (in id order): keeps the nucleus in place, still in id order, so
// a wide nucleus is never sorted. Returns its size.
size_t nucleus_in_place(std::vector<Candidate>& c, size_t n, float top_p) {
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += c[i].weight;
  std::vector<Candidate>& sel = scratch().selection;
  sel.assign(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(n));
  const Candidate boundary = nucleus_boundary(sel, static_cast<double>(top_p) * total);
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i)
    if (!more_likely(boundary, c[i])) c[kept++] = c[i];
  return kept;
}

// The sampling parameters that cut the distribution before the draw.
struct Truncation {
  float temperature;
  int32_t top_k;  // <= 0: all
  float top_p;
  float min_p;
};

// What a draw may pick after temperature, min_p, top_k and top_p: every token (`dense`: the
// weights exp((x − max) / T) in id order, [vocab]) or the kept candidates with their weights,
// in the order a draw walks them (`sparse`). Views of the per-thread scratch.
struct Support {
  std::span<const float> dense;
  std::span<const Candidate> sparse;
};

Support truncate(std::span<const float> x, float max_logit, const Truncation& t) {
  const size_t vocab = x.size();
  const bool truncate_k = t.top_k > 0 && static_cast<size_t>(t.top_k) < vocab;
  if (!truncate_k && t.top_p >= 1.0f && t.min_p <= 0.0f) {
    // Nothing is cut: the whole row in id order, weights computed once.
    std::vector<float>& w = scratch().weights;
    w.resize(vocab);
    for (size_t i = 0; i < vocab; ++i) w[i] = weight(x[i], max_logit, t.temperature);
    return {w, {}};
  }
  // min_p: p_i >= min_p × p_max  ⇔  (x_i − max) / T >= log(min_p).
  std::vector<Candidate>& c = scratch().candidates;
  c.clear();
  c.reserve(vocab);
  const float log_min_p = t.min_p > 0.0f ? std::log(t.min_p) : kNegInf;
  for (size_t i = 0; i < vocab; ++i) {
    if (t.min_p > 0.0f && !((x[i] - max_logit) / t.temperature >= log_min_p)) continue;
    c.push_back(Candidate{x[i], static_cast<int32_t>(i), 0.0f});
  }
  size_t n = c.size();  // >= 1: the maximum always passes
  bool sorted = false;
  if (t.top_k > 0 && static_cast<size_t>(t.top_k) < n) {
    n = static_cast<size_t>(t.top_k);
    select_top(c, n, c.size());
    sorted = true;
  }
  for (size_t i = 0; i < n; ++i) c[i].weight = weight(c[i].logit, max_logit, t.temperature);
  if (t.top_p < 1.0f)
    n = sorted ? nucleus_of_sorted(std::span<const Candidate>(c.data(), n), t.top_p)
               : nucleus_in_place(c, n, t.top_p);
  return {{}, std::span<const Candidate>(c.data(), n)};
}

// NaN would break every comparison (and the strict weak order the sorts need): it counts as
// impossible.
float finite_or_neg_inf(float v) { return std::isnan(v) ? kNegInf : v; }

// vLLM v1's default logprobs: log_softmax of the raw row, the sampled token's and the k largest
// (ties by the lower id), most likely first.
void fill_logprobs(std::span<const float> raw, int32_t token, size_t k, SampledToken& out) {
  float max_logit = kNegInf;
  for (float v : raw) max_logit = std::max(max_logit, finite_or_neg_inf(v));
  double sum = 0.0;
  if (max_logit > kNegInf)
    for (float v : raw) sum += std::exp(finite_or_neg_inf(v) - max_logit);
  // All impossible: every logprob is -inf.
  const double lse =
      max_logit > kNegInf ? max_logit + std::log(sum) : std::numeric_limits<double>::infinity();
  auto logprob = [&](float v) {
    return static_cast<float>(static_cast<double>(finite_or_neg_inf(v)) - lse);
  };
  out.logprob = logprob(raw[static_cast<size_t>(token)]);
  out.top.clear();
  if (k == 0) return;
  out.top.reserve(k + 1);
  // A sorted list of at most k (token, raw logit): ids come in increasing order, so a later
  // equal logit never passes an earlier one.
  for (size_t i = 0; i < raw.size(); ++i) {
    const float v = finite_or_neg_inf(raw[i]);
    if (out.top.size() == k && !(v > out.top.back().logprob)) continue;
    auto at = std::find_if(out.top.begin(), out.top.end(),
                           [v](const TokenLogprob& t) { return t.logprob < v; });
    out.top.insert(at, TokenLogprob{static_cast<int32_t>(i), v});
    if (out.top.size() > k) out.top.pop_back();
  }
  for (TokenLogprob& t : out.top) t.logprob = logprob(t.logprob);
}

}  // namespace

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    const float best_value = logits[static_cast<size_t>(best)];
    if (logits[i] > best_value || (std::isnan(best_value) && !std::isnan(logits[i])))
      best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t pick_weighted(std::span<const float> weights, double u) {
  double total = 0.0;
  for (float w : weights) total += w;
  const double target = u * total;
  double acc = 0.0;
  size_t last = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0.0f) continue;
    acc += weights[i];
    last = i;
    if (target < acc) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last);
}

Sampler::Sampler(const SamplingParams& params, uint64_t seed,
                 std::span<const int32_t> prompt_token_ids,
                 std::vector<int32_t> suppressed_until_min_tokens)
    : temperature_(params.temperature),
      top_p_(params.top_p),
      min_p_(params.min_p),
      top_k_(params.top_k),
      presence_penalty_(params.presence_penalty),
      frequency_penalty_(params.frequency_penalty),
      repetition_penalty_(params.repetition_penalty),
      min_tokens_(params.min_tokens),
      num_logprobs_(params.logprobs ? *params.logprobs : -1),
      rng_(seed),
      // A second stream of the same seed (its own constant), for drafts only.
      draft_rng_(seed ^ 0x6472616674726e67ull),
      suppressed_(std::move(suppressed_until_min_tokens)) {
  params.validate();
  if (repetition_penalty_ != 1.0f) {
    prompt_ids_.assign(prompt_token_ids.begin(), prompt_token_ids.end());
    std::sort(prompt_ids_.begin(), prompt_ids_.end());
    prompt_ids_.erase(std::unique(prompt_ids_.begin(), prompt_ids_.end()), prompt_ids_.end());
  }
  // Distinct output tokens rarely pass a thousand; beyond, the vector grows by doubling.
  if (penalized()) output_counts_.reserve(static_cast<size_t>(std::min(params.max_tokens, 1024)));
  if (min_tokens_ == 0) suppressed_.clear();
}

Sampler::~Sampler() = default;

void Sampler::set_constraint(std::unique_ptr<structured::ConstraintState> constraint) {
  constraint_ = std::move(constraint);
}

bool Sampler::constraint_finished() const { return constraint_ && constraint_->finished(); }

bool Sampler::constraint_finished_after(int64_t num_tokens) const {
  return constraint_ && num_tokens >= 0 &&
         constraint_->finished_after(static_cast<size_t>(num_tokens));
}

bool Sampler::penalized() const {
  return presence_penalty_ != 0.0f || frequency_penalty_ != 0.0f || repetition_penalty_ != 1.0f;
}

void Sampler::process(std::span<const float> logits, std::vector<float>& out) const {
  const size_t vocab = logits.size();
  out.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) out[i] = finite_or_neg_inf(logits[i]);
  if (constraint_) constraint_->apply(out);
  auto in_vocab = [vocab](int32_t id) { return id >= 0 && static_cast<size_t>(id) < vocab; };
  if (num_sampled_ < min_tokens_)
    for (int32_t id : suppressed_)
      if (in_vocab(id)) out[static_cast<size_t>(id)] = kNegInf;
  if (repetition_penalty_ != 1.0f) {
    // Positive logits are divided and negative ones multiplied, so the token always loses.
    auto penalize = [&](int32_t id) {
      if (!in_vocab(id)) return;
      float& v = out[static_cast<size_t>(id)];
      v = v > 0.0f ? v / repetition_penalty_ : v * repetition_penalty_;
    };
    for (int32_t id : prompt_ids_) penalize(id);
    for (const auto& [id, count] : output_counts_)
      if (!std::binary_search(prompt_ids_.begin(), prompt_ids_.end(), id)) penalize(id);
  }
  // OpenAI's definition: minus frequency × count, then minus presence once.
  if (frequency_penalty_ != 0.0f || presence_penalty_ != 0.0f) {
    for (const auto& [id, count] : output_counts_) {
      if (!in_vocab(id)) continue;
      float& v = out[static_cast<size_t>(id)];
      v -= frequency_penalty_ * static_cast<float>(count);
      v -= presence_penalty_;
    }
  }
}

int32_t Sampler::draw(std::span<const float> x) {
  float max_logit = kNegInf;
  for (float v : x) max_logit = std::max(max_logit, v);
  const double u = uniform01(rng_);  // one draw per step, whatever the path
  // Everything impossible, or an infinite logit that takes all the mass: the lowest id of the
  // maximum, as greedy would.
  if (!std::isfinite(max_logit)) return argmax(x);
  const Support kept = truncate(x, max_logit, {temperature_, top_k_, top_p_, min_p_});
  if (!kept.dense.empty()) return pick_weighted(kept.dense, u);
  return pick(kept.sparse, u);
}

int32_t Sampler::greedy_token(std::span<const float> logits) const {
  const bool suppress = num_sampled_ < min_tokens_ && !suppressed_.empty();
  if (!suppress && !penalized() && !constraint_)
    return argmax(logits);  // the row as it is: no copy
  std::vector<float>& x = scratch().logits;
  process(logits, x);
  return argmax(x);
}

void Sampler::probabilities(std::span<const float> logits, std::span<float> probs) const {
  std::fill(probs.begin(), probs.end(), 0.0f);
  if (logits.empty()) return;
  if (greedy()) {
    probs[static_cast<size_t>(greedy_token(logits))] = 1.0f;
    return;
  }
  std::vector<float>& x = scratch().logits;
  process(logits, x);
  float max_logit = kNegInf;
  for (float v : x) max_logit = std::max(max_logit, v);
  if (!std::isfinite(max_logit)) {
    probs[static_cast<size_t>(argmax(x))] = 1.0f;
    return;
  }
  const Support kept = truncate(x, max_logit, {temperature_, top_k_, top_p_, min_p_});
  double total = 0.0;
  if (!kept.dense.empty()) {
    for (float w : kept.dense) total += w;
    for (size_t i = 0; i < kept.dense.size(); ++i)
      probs[i] = static_cast<float>(kept.dense[i] / total);
  } else {
    for (const Candidate& c : kept.sparse) total += c.weight;
    for (const Candidate& c : kept.sparse)
      probs[static_cast<size_t>(c.id)] = static_cast<float>(c.weight / total);
  }
}

SampledToken Sampler::report(std::span<const float> logits, int32_t token) const {
  SampledToken out;
  out.token = token;
  if (num_logprobs_ >= 0) fill_logprobs(logits, token, static_cast<size_t>(num_logprobs_), out);
  return out;
}

double Sampler::uniform() { return uniform01(rng_); }
double Sampler::uniform_for_draft() { return uniform01(draft_rng_); }

SampledToken Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) return {};  // nothing to choose from; the engine never passes this
  int32_t token = 0;
  if (greedy()) {
    token = greedy_token(logits);
  } else {
    std::vector<float>& x = scratch().logits;
    process(logits, x);
    token = draw(x);
  }
  SampledToken out = report(logits, token);
  record(token);
  return out;
}

void Sampler::record(int32_t token) {
  ++num_sampled_;
  if (constraint_) constraint_->advance(token);
  if (!penalized()) return;
  auto at = std::lower_bound(output_counts_.begin(), output_counts_.end(), token,
                             [](const auto& entry, int32_t id) { return entry.first < id; });
  if (at != output_counts_.end() && at->first == token)
    ++at->second;
  else
    output_counts_.insert(at, {token, 1});
}

void Sampler::forget(int32_t token) {
  --num_sampled_;
  if (constraint_) constraint_->rollback();
  if (!penalized()) return;
  auto at = std::lower_bound(output_counts_.begin(), output_counts_.end(), token,
                             [](const auto& entry, int32_t id) { return entry.first < id; });
  if (at == output_counts_.end() || at->first != token) return;  // never recorded: nothing to undo
  if (--at->second == 0) output_counts_.erase(at);
}

}  // namespace tern
