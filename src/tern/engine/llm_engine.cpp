// LLMEngine: requests → sequences → scheduled steps → sampled tokens → outputs.
#include "tern/engine/llm_engine.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "tern/core/clock.h"
#include "tern/core/error.h"
#include "tern/disagg/model_fingerprint.h"
#include "tern/engine/llm_engine_state.h"
#include "tern/engine/output_text.h"
#include "tern/engine/sampler.h"

namespace tern {

namespace {

SchedulerConfig scheduler_config(const EngineConfig& config, int64_t max_model_len) {
  SchedulerConfig s = config.scheduler;
  // Whole prefills must fit in one step's budget.
  if (!s.enable_chunked_prefill)
    s.max_num_batched_tokens = std::max(s.max_num_batched_tokens, max_model_len);
  return s;
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

KvCachePlan plan_caches(const Decoder& decoder, const Decoder* draft, const EngineConfig& config) {
  const cpu::KvCacheConfig target =
      decoder.kv_cache_config(1, config.block_size, config.kv_cache_dtype);
  const bool drafting = draft && config.speculative.method == SpeculativeMethod::kDraftModel;
  const cpu::KvCacheConfig draft_shape =
      drafting ? draft->kv_cache_config(1, config.block_size, config.kv_cache_dtype) : target;
  return plan_kv_cache(target, config, decoder.config().max_position_embeddings,
                       drafting ? &draft_shape : nullptr);
}

}  // namespace

double LLMEngine::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

LLMEngine::LLMEngine(Decoder& decoder, Tokenizer tokenizer, const EngineConfig& config,
                     Decoder* draft, const Tokenizer* draft_tokenizer)
    : decoder_(decoder),
      tokenizer_(std::move(tokenizer)),
      config_(config),
      plan_(plan_caches(decoder, draft, config)),
      blocks_(plan_.num_blocks, config.block_size, config.enable_prefix_caching),
      scheduler_(scheduler_config(config, plan_.max_model_len), blocks_),
      runner_(decoder, plan_.num_blocks, config.block_size, plan_.max_model_len,
              config.kv_cache_dtype),
      seed_rng_(config.seed) {
  if (config.kv_transfer.enabled()) {
    cpu::KvCache& cache = runner_.cache();
    connector_ = std::make_unique<disagg::KvConnector>(
        config.kv_transfer, cache, disagg::model_fingerprint(decoder, cache.config()));
  }
  eos_ids_ = tokenizer_.eos_ids();
  for (int32_t id : decoder.config().eos_token_ids)
    if (!contains(eos_ids_, id)) eos_ids_.push_back(id);
  const SpeculativeConfig& spec = config.speculative;
  if (!spec.enabled()) return;
  speculator_ = std::make_unique<Speculator>(
      spec, make_proposer(spec, {&tokenizer_, decoder.config().vocab_size, draft, draft_tokenizer,
                                 plan_.num_blocks, config.block_size, plan_.max_model_len,
                                 config.kv_cache_dtype}));
  if (spec.method == SpeculativeMethod::kDraftModel) {
    // One KV layout for both, so that only the models are compared.
    const cpu::KvCacheConfig& kv = runner_.cache().config();
    draft_is_target_ = &decoder == draft || disagg::model_fingerprint(decoder, kv) ==
                                                disagg::model_fingerprint(*draft, kv);
  }
  drafts_wanted_ = [this](const Sequence& seq) { return completion_of_.at(&seq)->spec.planned; };
  if (spec.adaptive)
    speculator_->calibrate(decoder_, runner_.cache(), scheduler_.config().max_num_batched_tokens);
}

LLMEngine::~LLMEngine() = default;

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
  // A one-token prompt has no KV to pull: its one token is computed here either way.
  if (kv.remote_prefill && len > 1) {
    awaiting_blocks_.push_back(first.get());
  } else {
    scheduler_.add(&first->seq);
  }
  request->completions.push_back(std::move(first));
  requests_.emplace(request_id, std::move(request));
}

std::vector<RequestOutput> LLMEngine::step() {
  std::vector<RequestOutput> outputs = std::move(aborted_);
  aborted_.clear();
  if (connector_) poll_transfers(outputs);
  if (speculator_) plan_drafts();
  SchedulerStep step = scheduler_.schedule(drafts_wanted_);
  if (step.empty()) {
    erase_finished_requests();
    return outputs;
  }
  if (speculator_) propose_drafts(step);
  int64_t context_tokens = 0;
  for (const ScheduledChunk& chunk : step.chunks)
    context_tokens += chunk.seq->num_computed_tokens + chunk.num_tokens;
  const auto forward_start = std::chrono::steady_clock::now();
  const std::span<const float> logits = runner_.execute(step);
  step_times_.record(step.num_tokens, context_tokens, seconds_since(forward_start));
  scheduler_.complete(step);
  ++counters_.num_steps;

  const double time = now();
  const size_t vocab = static_cast<size_t>(runner_.vocab_size());
  // Who samples from which logits rows: a plain row, or a verify's 1 + K rows (with the index
  // of its draft request); a request whose prompt just finished brings its n - 1 forked
  // completions, which sample from the prompt's row too.
  std::vector<SampleJob>& jobs = sample_jobs_;
  jobs.clear();
  size_t row = 0;
  for (size_t i = 0; i < step.chunks.size(); ++i) {
    const ScheduledChunk& chunk = step.chunks[i];
    Completion& completion = *completion_of_.at(chunk.seq);
    Request& request = *completion.request;
    if (request.metrics.first_scheduled_time < 0) request.metrics.first_scheduled_time = time;
    if (!chunk.sample) continue;
    if (!request.forked && request.params.n > 1)
      for (Completion* child : fork_completions(request)) jobs.push_back({child, row, 0, 0});
    const size_t drafts = static_cast<size_t>(chunk.num_draft_tokens);
    jobs.push_back({&completion, row, drafts, drafts > 0 ? draft_request_of_chunk_[i] : 0});
    row += 1 + drafts;
  }
  // Each completion draws from its own RNG, so sampling in parallel gives the same tokens as
  // in order; with 64 rows of a 152k vocabulary it is worth the threads.
  // Reused step after step: each result's token vector keeps its capacity.
  std::vector<VerifiedTokens>& results = sampled_;
  if (results.size() < jobs.size()) results.resize(jobs.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < jobs.size(); ++i) {
    const SampleJob& job = jobs[i];
    Sampler& sampler = *job.completion->sampler;
    if (job.num_drafts == 0) {
      results[i].tokens.assign(1, sampler.sample(logits.subspan(job.row * vocab, vocab)));
      continue;
    }
    const Sequence& seq = job.completion->seq;
    speculator_->verify(sampler, logits.subspan(job.row * vocab, (1 + job.num_drafts) * vocab),
                        static_cast<int64_t>(vocab),
                        std::span<const int32_t>(seq.draft_token_ids).first(job.num_drafts),
                        job.draft_request, results[i]);
  }
  // The target's cost of a step is its forward and its sampling: a verify processes K + 1 rows
  // of the distribution where plain decoding processes one.
  if (speculator_)
    speculator_->record_target_forward(step.num_tokens, seconds_since(forward_start));
  for (size_t i = 0; i < jobs.size(); ++i) {
    Completion& c = *jobs[i].completion;
    // A stop inside an accepted run ends the completion there: what follows is dropped.
    for (const SampledToken& token : results[i].tokens) {
      update(c, token, time, outputs);
      if (c.finish_reason) break;
    }
    if (jobs[i].num_drafts == 0) continue;
    speculator_->observe(c.spec, static_cast<int32_t>(jobs[i].num_drafts), results[i].num_accepted);
    if (!c.finish_reason) scheduler_.accept_drafts(c.seq, results[i].num_accepted);
  }
  erase_finished_requests();
  // What finished freed blocks that waiting pulls may take now: an engine that sleeps until
  // the connector wakes it must not leave them waiting.
  if (connector_) start_remote_prefills();
  return outputs;
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

void LLMEngine::plan_drafts() {
  candidates_.clear();
  for (Sequence* seq : scheduler_.running()) {
    Completion& c = *completion_of_.at(seq);
    const int64_t remaining =
        std::min<int64_t>(c.request->params.max_tokens - seq->num_output_tokens(),
                          plan_.max_model_len - seq->num_tokens() + 1);
    candidates_.push_back({seq, &c.spec, 0, remaining});
  }
  int64_t waiting_tokens = 0;
  for (const Sequence* seq : scheduler_.waiting()) waiting_tokens += seq->num_tokens();
  speculator_->plan(candidates_, waiting_tokens, scheduler_.config().max_num_batched_tokens);
}

void LLMEngine::propose_drafts(SchedulerStep& step) {
  draft_requests_.clear();
  draft_request_of_chunk_.assign(step.chunks.size(), 0);
  for (size_t i = 0; i < step.chunks.size(); ++i) {
    const ScheduledChunk& chunk = step.chunks[i];
    if (chunk.num_draft_tokens == 0) continue;
    draft_request_of_chunk_[i] = draft_requests_.size();
    draft_requests_.push_back({chunk.seq, completion_of_.at(chunk.seq)->sampler.get(),
                               static_cast<int32_t>(chunk.num_draft_tokens)});
  }
  speculator_->propose(draft_requests_, step.copies);
  for (size_t i = 0; i < step.chunks.size(); ++i)
    if (step.chunks[i].num_draft_tokens > 0)
      step.cut_drafts(i, draft_requests_[draft_request_of_chunk_[i]].num_drafts);
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

CompletionOutput& LLMEngine::output_for(Completion& completion,
                                        std::vector<RequestOutput>& outputs) {
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
  if (request.metrics.first_token_time < 0) {
    request.metrics.first_token_time = time;
    counters_.prompt_tokens += request.metrics.num_prompt_tokens;  // vLLM: when prefill ends
  }
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
  // A constraint whose grammar is complete and admits nothing more ends the completion (at this
  // token: a verify has advanced the constraint over the whole accepted run already).
  if (!reason && c.sampler->constraint_finished_after(c.seq.num_output_tokens())) reason = "stop";
  if (!reason &&
      (c.seq.num_output_tokens() >= params.max_tokens || c.seq.num_tokens() >= plan_.max_model_len))
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
      if (o.finished) o.kv_transfer_params = request.held_kv;
    }
}

void LLMEngine::finish(Completion& c, std::string reason, double time) {
  c.finish_reason = std::move(reason);
  if (c.request->kv.do_remote_decode && *c.finish_reason != "abort")
    hold_for_remote_decode(c, time);
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
    // A request still waiting for its KV: its pull writes into its blocks until it ends.
    if (auto it = std::find(awaiting_blocks_.begin(), awaiting_blocks_.end(), c.get());
        it != awaiting_blocks_.end())
      awaiting_blocks_.erase(it);
    for (auto it = pulls_.begin(); it != pulls_.end(); ++it)
      if (it->second == c.get()) {
        Sequence& orphan = orphaned_pulls_[it->first];
        orphan.block_table = std::exchange(c->seq.block_table, {});
        pulls_.erase(it);
        break;
      }
    CompletionOutput& out = output_for(*c, aborted_);
    out.new_text += c->text->finish();
    finish(*c, "abort", time);
    request.forked = true;  // no completions are coming
    out.finish_reason = c->finish_reason;
    out.token_ids.assign(c->seq.token_ids.begin() + c->seq.num_prompt_tokens,
                         c->seq.token_ids.end());
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
  s.block_size = config_.block_size;
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
