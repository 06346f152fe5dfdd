// LLMEngine: requests → sequences → scheduled steps → sampled tokens → outputs.
#include "tern/engine/llm_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "tern/core/clock.h"
#include "tern/core/error.h"
#include "tern/disagg/model_fingerprint.h"
#include "tern/engine/llm_engine_state.h"
#include "tern/engine/output_text.h"
#include "tern/sampling/sampler.h"
#include "tern/spec_decode/forward_timing.h"

namespace tern {

namespace {

SchedulerConfig scheduler_config(const EngineConfig& config, int64_t max_model_len) {
  SchedulerConfig s = config.scheduler;
  // Whole prefills must fit in one step's budget.
  if (!s.enable_chunked_prefill)
    s.max_num_batched_tokens = std::max(s.max_num_batched_tokens, max_model_len);
  return s;
}

const EngineConfig& checked(const EngineConfig& config) {
  if (config.max_step_ms < 0 && config.max_step_ms != kAutoMaxStepMs)
    throw Error("--max-step-ms must be auto or >= 0, got " + std::to_string(config.max_step_ms));
  if (config.max_step_ms > 0 && !config.scheduler.enable_chunked_prefill)
    throw Error(
        "--max-step-ms sizes chunked prefill's steps; with --no-enable-chunked-prefill it "
        "would do nothing");
  return config;
}

KvCachePlan plan_caches(LanguageModel& decoder, LanguageModel* draft, const EngineConfig& config) {
  // On a device with memory of its own the KV cache gets what the weights and the activations
  // leave, so the activations are allocated first, at their largest step.
  if (decoder.device().own_memory()) {
    const int64_t tokens = config.scheduler.max_num_batched_tokens;
    decoder.reserve(tokens, tokens);
    if (draft) draft->reserve(tokens, tokens);
  }
  const KvCacheConfig target = decoder.kv_cache_config(1, config.block_size, config.kv_cache_dtype);
  const bool drafting = draft && config.speculative.method == SpeculativeMethod::kDraftModel;
  const KvCacheConfig draft_shape =
      drafting ? draft->kv_cache_config(1, config.block_size, config.kv_cache_dtype) : target;
  KvCachePlan plan = plan_kv_cache(target, config, decoder.config().max_position_embeddings,
                                   decoder.device(), drafting ? &draft_shape : nullptr);
  // Said before the runner allocates it: zeroing gigabytes takes seconds.
  if (config.announce) config.announce(plan.summary + "; allocating it");
  return plan;
}

// A start-up step that may take seconds, told as it begins and when it is done, so that the
// log of a start-up that sits silent says which step it sits in and what each one cost.
template <class Step>
void announced(const EngineConfig& config, const std::string& what, const char* done, Step&& step) {
  if (!config.announce) return step();
  config.announce(what);
  const double start = LLMEngine::now();
  step();
  char line[64];
  std::snprintf(line, sizeof line, "%s in %.2f s", done, LLMEngine::now() - start);
  config.announce(line);
}

}  // namespace

double LLMEngine::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

LLMEngine::LLMEngine(LanguageModel& decoder, Tokenizer tokenizer, const EngineConfig& config,
                     LanguageModel* draft, const Tokenizer* draft_tokenizer)
    : decoder_(decoder),
      tokenizer_(std::move(tokenizer)),
      config_(checked(config)),
      plan_(plan_caches(decoder, draft, config)),
      blocks_(plan_.num_blocks, config.block_size, config.enable_prefix_caching),
      scheduler_(scheduler_config(config, plan_.max_model_len), blocks_),
      runner_(decoder, plan_.num_blocks, config.block_size, plan_.max_model_len,
              config.kv_cache_dtype),
      seed_rng_(config.seed) {
  if (config_.announce) {
    char line[64];
    std::snprintf(line, sizeof line, "allocated in %.2f s", now() - constructed_at_);
    config_.announce(line);
  }
  if (config.kv_transfer.enabled()) {
    KvCache& cache = runner_.cache();
    connector_ = std::make_unique<disagg::KvConnector>(
        config.kv_transfer, cache, disagg::model_fingerprint(decoder, cache.config()));
    kv_transfer_ =
        std::make_unique<KvTransferScheduling>(*connector_, config.block_size, &LLMEngine::now);
    scheduler_.set_kv_connector(kv_transfer_.get());
  }
  eos_ids_ = tokenizer_.eos_ids();
  for (int32_t id : decoder.config().eos_token_ids)
    if (!contains_token(eos_ids_, id)) eos_ids_.push_back(id);
  if (config_.max_step_ms != 0 && scheduler_.config().enable_chunked_prefill)
    calibrate_step_costs();
  const SpeculativeConfig& spec = config.speculative;
  if (!spec.enabled()) return;
  speculator_ = std::make_unique<Speculator>(
      spec,
      make_proposer(
          spec, {&tokenizer_, decoder.config().vocab_size, draft, draft_tokenizer, plan_.num_blocks,
                 config.block_size, plan_.max_model_len, config.kv_cache_dtype}),
      step_costs_);
  if (spec.method == SpeculativeMethod::kDraftModel) {
    // One KV layout for both, so that only the models are compared.
    const KvCacheConfig& kv = runner_.cache().config();
    draft_is_target_ = &decoder == draft || disagg::model_fingerprint(decoder, kv) ==
                                                disagg::model_fingerprint(*draft, kv);
  }
  drafts_wanted_ = [this](const Sequence& seq) { return completion_of_.at(&seq)->spec.planned; };
  if (spec.adaptive) {
    const int64_t budget = scheduler_.config().max_num_batched_tokens;
    announced(config_,
              "timing " + speculator_->calibration_summary(budget) +
                  ", to choose how many tokens to draft",
              "timed", [&] { speculator_->calibrate(decoder_, runner_.cache(), budget); });
  }
}

LLMEngine::~LLMEngine() = default;

void LLMEngine::calibrate_step_costs() {
  // A chunk small enough to cost little at start-up: larger ones are priced at its cost per
  // token (an upper bound) until a step of their size has been measured.
  const int64_t chunk = std::min<int64_t>(64, scheduler_.config().max_num_batched_tokens);
  announced(config_,
            "timing a decode step and a " + std::to_string(chunk) +
                "-token chunk, to size steps to --max-step-ms",
            "timed", [&] {
              KvCache& cache = runner_.cache();
              (void)time_forward(decoder_, cache, 1, false);  // the first forward grows buffers
              step_costs_.record(1, time_forward(decoder_, cache, 1, false));
              step_costs_.record(chunk, time_forward(decoder_, cache, chunk, false));
            });
}

std::unique_ptr<LLMEngine::Completion> LLMEngine::make_completion(Request& request, int32_t index,
                                                                  std::span<const int32_t> prompt) {
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
  if (params.structured.enabled()) {
    if (!structured_)
      structured_ = std::make_unique<structured::StructuredOutputs>(tokenizer_, eos_ids_);
    c->sampler->set_constraint(
        structured_->start(params.structured, static_cast<size_t>(params.max_tokens), prompt));
  }
  c->text = std::make_unique<CompletionText>(tokenizer_, params, tokenizer_.decode(prompt).empty());
  completion_of_[&c->seq] = c.get();
  return c;
}

void LLMEngine::add_request(const std::string& request_id, std::vector<int32_t> prompt,
                            const SamplingParams& params, const disagg::KvTransferParams& kv) {
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

  if (kv.do_remote_decode) {
    if (!connector_ || !connector_->config().produces())
      throw Error(
          "kv_transfer_params: do_remote_decode needs an instance that prefills for "
          "others (--role prefill or both)");
    if (params.n != 1) throw Error("kv_transfer_params: do_remote_decode needs n = 1");
  }
  if (kv.remote_prefill) {
    if (!connector_ || !connector_->config().consumes())
      throw Error(
          "kv_transfer_params: do_remote_prefill needs an instance that decodes for "
          "others (--role decode or both)");
    const int64_t needed = blocks_.blocks_for(len - 1);
    const size_t given = kv.remote_prefill->block_ids.size();
    if (static_cast<int64_t>(given) < needed)
      throw Error("kv_transfer_params: remote_block_ids has " + std::to_string(given) +
                  " blocks; a prompt of " + std::to_string(len) + " tokens needs " +
                  std::to_string(needed) + " of " + std::to_string(config_.block_size) +
                  " tokens (do both instances have the same --block-size?)");
  }

  auto request = std::make_unique<Request>();
  request->id = request_id;
  request->params = params;
  request->kv = kv;
  request->seed = params.seed ? *params.seed : seed_rng_();
  request->metrics.arrival_time = now();
  request->metrics.num_prompt_tokens = len;
  auto first = make_completion(*request, 0, prompt);
  first->seq.token_ids = std::move(prompt);
  first->seq.num_prompt_tokens = len;
  // A prompt whose KV a prefill instance holds waits for its pull (see KvTransferScheduling).
  if (kv_transfer_) kv_transfer_->add(first->seq, kv);
  scheduler_.add(&first->seq);
  request->completions.push_back(std::move(first));
  requests_.emplace(request_id, std::move(request));
}

void LLMEngine::erase_finished_requests() {
  for (auto it = requests_.begin(); it != requests_.end();) {
    if (it->second->finished()) {
      for (auto& c : it->second->completions) completion_of_.erase(&c->seq);
      it = requests_.erase(it);
    } else {
      ++it;
    }
  }
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
    scheduler_.fork(parent.seq, &child->seq, after);
    after = &child->seq;
    children.push_back(child.get());
    request.completions.push_back(std::move(child));
  }
  return children;
}

bool LLMEngine::abort_request(const std::string& request_id) {
  const auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  Request& request = *it->second;
  const double time = now();
  for (auto& c : request.completions)
    if (!c->finish_reason) finish(*c, "abort", time, aborted_);
  for (auto& c : request.completions) completion_of_.erase(&c->seq);
  requests_.erase(it);
  return true;
}

bool LLMEngine::has_work_to_step() const {
  return scheduler_.num_running() > 0 || scheduler_.num_waiting() > 0 || !aborted_.empty();
}

bool LLMEngine::has_pending_transfers() const {
  return kv_transfer_ &&
         (kv_transfer_->has_pending() || scheduler_.num_waiting_for_remote_kv() > 0);
}

std::optional<double> LLMEngine::next_transfer_deadline() const {
  return connector_ ? connector_->next_expiry() : std::nullopt;
}

void LLMEngine::set_transfer_wakeup(std::function<void()> wakeup) {
  if (connector_) connector_->set_wakeup(std::move(wakeup));
}

EngineStats LLMEngine::stats() const {
  EngineStats s = counters_;
  s.num_running = scheduler_.num_running();
  s.num_waiting = scheduler_.num_waiting();
  s.kv_cache_usage = blocks_.usage();
  s.num_blocks = blocks_.num_blocks();
  s.block_size = config_.block_size;
  s.prefix_caching = blocks_.prefix_caching();
  s.kv_cache_dtype = config_.kv_cache_dtype;
  s.kv_cache_bytes_per_token = plan_.bytes_per_token;
  s.prefix_cache_queries = blocks_.prefix_queries();
  s.prefix_cache_hits = blocks_.prefix_hits();
  s.num_preemptions = scheduler_.num_preemptions();
  s.step_times = step_times_.times();
  if (speculator_) {
    s.speculative = true;
    s.spec = speculator_->stats();
    s.spec_idle = speculator_->idle();
  }
  if (connector_) {
    s.kv_transfer = true;
    s.kv = connector_->stats();
  }
  return s;
}

}  // namespace tern
