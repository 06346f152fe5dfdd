// LLMEngine: requests → sequences → scheduled steps → sampled tokens → outputs.
#include "tern/engine/llm_engine.h"

#include <algorithm>
#include <chrono>

#include "tern/core/error.h"
#include "tern/engine/output_text.h"
#include "tern/engine/sampler.h"

namespace tern {

struct LLMEngine::Completion {
  Sequence seq;
  Request* request = nullptr;
  int32_t index = 0;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<CompletionText> text;
  std::vector<SampledToken> logprobs;
  double cumulative_logprob = 0.0;
  std::optional<std::string> finish_reason;
  std::variant<std::monostate, int32_t, std::string> stop_reason;
};

struct LLMEngine::Request {
  std::string id;
  SamplingParams params;
  uint64_t seed = 0;
  std::vector<std::unique_ptr<Completion>> completions;  // one until the prompt is prefilled
  bool forked = false;
  int32_t num_finished = 0;
  RequestMetrics metrics;

  bool finished() const {
    return num_finished == static_cast<int32_t>(completions.size()) && (forked || params.n == 1);
  }
};

namespace {

SchedulerConfig scheduler_config(const EngineConfig& config, int64_t max_model_len) {
  SchedulerConfig s = config.scheduler;
  // Whole prefills must fit in one step's budget.
  if (!s.enable_chunked_prefill) s.max_num_batched_tokens = std::max(s.max_num_batched_tokens, max_model_len);
  return s;
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

double LLMEngine::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

LLMEngine::LLMEngine(Decoder& decoder, Tokenizer tokenizer, const EngineConfig& config)
    : decoder_(decoder),
      tokenizer_(std::move(tokenizer)),
      config_(config),
      plan_(plan_kv_cache(decoder.kv_cache_config(1, config.block_size), config,
                          decoder.config().max_position_embeddings)),
      blocks_(plan_.num_blocks, config.block_size, config.enable_prefix_caching),
      scheduler_(scheduler_config(config, plan_.max_model_len), blocks_),
      runner_(decoder, plan_.num_blocks, config.block_size, plan_.max_model_len),
      seed_rng_(config.seed) {
  eos_ids_ = tokenizer_.eos_ids();
  for (int32_t id : decoder.config().eos_token_ids)
    if (!contains(eos_ids_, id)) eos_ids_.push_back(id);
}

LLMEngine::~LLMEngine() = default;

std::unique_ptr<LLMEngine::Completion> LLMEngine::make_completion(
    Request& request, int32_t index, std::span<const int32_t> prompt) {
  const SamplingParams& params = request.params;
  auto c = std::make_unique<Completion>();
  c->request = &request;
  c->index = index;
  c->seq.seq_id = next_seq_id_++;
  std::vector<int32_t> suppressed = params.stop_token_ids;
  if (!params.ignore_eos) suppressed.insert(suppressed.end(), eos_ids_.begin(), eos_ids_.end());
  // Completion i of a seeded request draws from seed + i: reproducible, yet not n copies.
  c->sampler = std::make_unique<Sampler>(params, request.seed + static_cast<uint64_t>(index),
                                         prompt, std::move(suppressed));
  c->text = std::make_unique<CompletionText>(tokenizer_, params, tokenizer_.decode(prompt).empty());
  completion_of_[&c->seq] = c.get();
  return c;
}

void LLMEngine::add_request(const std::string& request_id, std::vector<int32_t> prompt,
                            const SamplingParams& params) {
  params.validate();
  if (requests_.count(request_id)) throw Error("request id '" + request_id + "' is already in use");
  if (prompt.empty()) throw Error("the prompt is empty");
  const int64_t vocab = decoder_.config().vocab_size;
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab)
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0 to " +
                  std::to_string(vocab - 1) + ")");
  const int64_t len = static_cast<int64_t>(prompt.size());
  if (len > plan_.max_model_len)
    throw Error("the prompt has " + std::to_string(len) + " tokens, more than max_model_len (" +
                std::to_string(plan_.max_model_len) + ")");
  // The longest this request can grow to in the cache (the last sampled token needs no K/V).
  const int64_t longest = std::min(len + params.max_tokens - 1, plan_.max_model_len);
  if (blocks_.blocks_for(longest) > blocks_.num_blocks())
    throw Error("the request needs " + std::to_string(blocks_.blocks_for(longest)) +
                " KV blocks, more than the whole cache holds (" +
                std::to_string(blocks_.num_blocks()) + ")");

  auto request = std::make_unique<Request>();
  request->id = request_id;
  request->params = params;
  request->seed = params.seed ? *params.seed : seed_rng_();
  request->metrics.arrival_time = now();
  request->metrics.num_prompt_tokens = len;
  auto first = make_completion(*request, 0, prompt);
  first->seq.token_ids = std::move(prompt);
  first->seq.num_prompt_tokens = len;
  scheduler_.add(&first->seq);
  request->completions.push_back(std::move(first));
  requests_.emplace(request_id, std::move(request));
}

std::vector<RequestOutput> LLMEngine::step() {
  std::vector<RequestOutput> outputs = std::move(aborted_);
  aborted_.clear();
  const SchedulerStep step = scheduler_.schedule();
  if (step.empty()) return outputs;
  const std::span<const float> logits = runner_.execute(step);
  scheduler_.complete(step);
  ++counters_.num_steps;

  const double time = now();
  const size_t vocab = static_cast<size_t>(runner_.vocab_size());
  // Who samples from which logits row; a request whose prompt just finished brings its n - 1
  // forked completions, which sample from the prompt's row too.
  std::vector<std::pair<Completion*, size_t>> to_sample;
  size_t row = 0;
  for (const ScheduledChunk& chunk : step.chunks) {
    Completion& completion = *completion_of_.at(chunk.seq);
    Request& request = *completion.request;
    if (request.metrics.first_scheduled_time < 0) request.metrics.first_scheduled_time = time;
    // Prompt tokens computed (a recomputation after preemption counts again, as in vLLM).
    const int64_t start = chunk.seq->num_computed_tokens - chunk.num_tokens;
    if (start < chunk.seq->num_prompt_tokens)
      counters_.prompt_tokens += std::min(chunk.seq->num_prompt_tokens, start + chunk.num_tokens) - start;
    if (!chunk.sample) continue;
    if (!request.forked && request.params.n > 1)
      for (Completion* child : fork_completions(request)) to_sample.emplace_back(child, row);
    to_sample.emplace_back(&completion, row++);
  }
  // Each completion draws from its own RNG, so sampling in parallel gives the same tokens as
  // in order; with 64 rows of a 152k vocabulary it is worth the threads.
  std::vector<SampledToken> sampled(to_sample.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < to_sample.size(); ++i)
    sampled[i] = to_sample[i].first->sampler->sample(logits.subspan(to_sample[i].second * vocab, vocab));
  for (size_t i = 0; i < to_sample.size(); ++i) update(*to_sample[i].first, sampled[i], time, outputs);
  for (auto it = requests_.begin(); it != requests_.end();) {
    if (it->second->finished()) {
      for (auto& c : it->second->completions) completion_of_.erase(&c->seq);
      it = requests_.erase(it);
    } else {
      ++it;
    }
  }
  return outputs;
}

std::vector<LLMEngine::Completion*> LLMEngine::fork_completions(Request& request) {
  request.forked = true;
  Completion& parent = *request.completions[0];
  const auto prompt = std::span<const int32_t>(parent.seq.token_ids)
                          .first(static_cast<size_t>(parent.seq.num_prompt_tokens));
  std::vector<Completion*> children;
  const Sequence* after = &parent.seq;
  for (int32_t i = 1; i < request.params.n; ++i) {
    auto child = make_completion(request, i, prompt);
    blocks_.fork(parent.seq, child->seq);
    scheduler_.add_running(&child->seq, after);
    after = &child->seq;
    children.push_back(child.get());
    request.completions.push_back(std::move(child));
  }
  return children;
}

CompletionOutput& LLMEngine::output_for(Completion& completion, std::vector<RequestOutput>& outputs) {
  Request& request = *completion.request;
  auto it = std::find_if(outputs.begin(), outputs.end(),
                         [&](const RequestOutput& o) { return o.request_id == request.id; });
  if (it == outputs.end()) {
    outputs.emplace_back();
    it = outputs.end() - 1;
    it->request_id = request.id;
  }
  for (CompletionOutput& out : it->outputs)
    if (out.index == completion.index) return out;
  it->outputs.emplace_back();
  it->outputs.back().index = completion.index;
  return it->outputs.back();
}

void LLMEngine::update(Completion& c, const SampledToken& sampled, double time,
                       std::vector<RequestOutput>& outputs) {
  Request& request = *c.request;
  const SamplingParams& params = request.params;
  const int32_t token = sampled.token;
  c.seq.token_ids.push_back(token);
  ++counters_.generation_tokens;
  if (request.metrics.first_token_time < 0) request.metrics.first_token_time = time;
  request.metrics.last_token_time = time;
  request.metrics.num_generation_tokens++;
  request.metrics.num_cached_tokens = request.completions[0]->seq.num_cached_tokens;

  CompletionOutput& out = output_for(c, outputs);
  out.new_token_ids.push_back(token);
  if (params.logprobs) {
    c.logprobs.push_back(sampled);
    c.cumulative_logprob += sampled.logprob;
    out.new_logprobs.push_back(sampled);
  }

  // vLLM's stop checks, in its order. The text of an EOS or stop-id token is left out unless
  // include_stop_str_in_output.
  std::optional<std::string> reason;
  if (!params.ignore_eos && contains(eos_ids_, token)) {
    reason = "stop";
  } else if (contains(params.stop_token_ids, token)) {
    reason = "stop";
    c.stop_reason = token;
  }
  if (!reason || params.include_stop_str_in_output) {
    CompletionText::Update update = c.text->append(token);
    out.new_text += update.delta;
    if (!reason && update.stop_string) {
      reason = "stop";
      c.stop_reason = *update.stop_string;
    }
  }
  if (!reason && (c.seq.num_output_tokens() >= params.max_tokens ||
                  c.seq.num_tokens() >= plan_.max_model_len))
    reason = "length";
  if (reason) {
    out.new_text += c.text->finish();
    finish(c, *reason, time);
    out.finish_reason = c.finish_reason;
    out.stop_reason = c.stop_reason;
    out.token_ids.assign(c.seq.token_ids.begin() + c.seq.num_prompt_tokens, c.seq.token_ids.end());
    out.text = c.text->text();
    out.logprobs = c.logprobs;
    out.cumulative_logprob = c.cumulative_logprob;
  }
  for (RequestOutput& o : outputs)
    if (o.request_id == request.id) {
      o.metrics = request.metrics;
      o.finished = request.finished();
    }
}

void LLMEngine::finish(Completion& c, std::string reason, double time) {
  c.finish_reason = std::move(reason);
  scheduler_.remove(&c.seq);
  Request& request = *c.request;
  request.num_finished++;
  if (request.finished()) request.metrics.finished_time = time;
}

bool LLMEngine::abort_request(const std::string& request_id) {
  const auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  Request& request = *it->second;
  const double time = now();
  for (auto& c : request.completions) {
    if (c->finish_reason) continue;
    CompletionOutput& out = output_for(*c, aborted_);
    out.new_text += c->text->finish();
    finish(*c, "abort", time);
    request.forked = true;  // no completions are coming
    out.finish_reason = c->finish_reason;
    out.token_ids.assign(c->seq.token_ids.begin() + c->seq.num_prompt_tokens, c->seq.token_ids.end());
    out.text = c->text->text();
    out.logprobs = c->logprobs;
    out.cumulative_logprob = c->cumulative_logprob;
  }
  request.metrics.finished_time = time;
  for (RequestOutput& o : aborted_)
    if (o.request_id == request_id) {
      o.metrics = request.metrics;
      o.finished = true;
    }
  for (auto& c : request.completions) completion_of_.erase(&c->seq);
  requests_.erase(it);
  return true;
}

EngineStats LLMEngine::stats() const {
  EngineStats s = counters_;
  s.num_running = scheduler_.num_running();
  s.num_waiting = scheduler_.num_waiting();
  s.kv_cache_usage = blocks_.usage();
  s.num_blocks = blocks_.num_blocks();
  s.prefix_cache_queries = blocks_.prefix_queries();
  s.prefix_cache_hits = blocks_.prefix_hits();
  s.num_preemptions = scheduler_.num_preemptions();
  return s;
}

}  // namespace tern
