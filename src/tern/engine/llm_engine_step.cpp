// LLMEngine::step() in named stages (vLLM v1's shape, one mixed forward per step): the KV
// connector's news, the scheduler's plan, drafts, the forward, sampling, and the update that
// appends tokens and finishes completions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "tern/core/clock.h"
#include "tern/engine/llm_engine.h"
#include "tern/engine/llm_engine_state.h"
#include "tern/kernels/cpu/stealing_split.h"

namespace tern {

std::vector<RequestOutput> LLMEngine::step() {
  std::vector<RequestOutput> outputs = std::exchange(aborted_, {});
  before_schedule(outputs);
  SchedulerStep step = schedule();
  if (!step.empty()) {
    propose(step);
    const std::span<const float> logits = execute(step);
    sample(step, logits);
    update_from_output(outputs);
  }
  erase_finished_requests();
  return outputs;
}

void LLMEngine::before_schedule(std::vector<RequestOutput>& outputs) {
  if (!kv_transfer_) return;
  const double time = now();
  for (KvLoadOutcome& load : scheduler_.update_from_connector()) {
    Completion& c = *completion_of_.at(load.seq);
    c.request->metrics.kv_transfer_seconds = load.seconds;
    c.request->metrics.kv_transfer_bytes = load.bytes;
    if (load.result == KvLoadOutcome::Result::kRecompute)
      std::fprintf(stderr, "tern: request %s: %s; prefilling it here\n", c.request->id.c_str(),
                   load.error.c_str());
    else if (load.result == KvLoadOutcome::Result::kFailed)
      finish(c, "abort", time, outputs, std::move(load.error));
  }
  scheduler_.start_remote_loads();
}

SchedulerStep LLMEngine::schedule() {
  if (speculator_) plan_drafts();
  return scheduler_.schedule(drafts_wanted_, step_token_budget());
}

int64_t LLMEngine::step_token_budget() const {
  const int64_t most = scheduler_.config().max_num_batched_tokens;
  // Whole prefill takes a prompt in one step or not at all: a time limit would hold it back.
  if (config_.max_step_ms == 0 || step_costs_.empty() ||
      !scheduler_.config().enable_chunked_prefill)
    return most;
  const double limit = step_time_limit_ms(config_.max_step_ms, 1e3 * step_costs_.estimate(1)) / 1e3;
  // Every running sequence's next token, and one more so that a prompt always advances: a
  // step of decodes alone may take longer than the limit, but is not cut.
  const int64_t least = std::min(most, scheduler_.num_running() + 1);
  // The largest budget whose estimate fits, by bisection: estimates grow with the tokens
  // (measurement noise aside, which at worst leaves a budget smaller than it could be). Beyond
  // the largest step measured, a step is priced at that step's cost per token (an upper bound),
  // so the first chunk of a prompt after decode-only steps stays within the limit, and each
  // step measured lets the next grow, until the limit is reached.
  int64_t lo = least, hi = most;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (step_costs_.upper_estimate(mid) <= limit) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
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

void LLMEngine::propose(SchedulerStep& step) {
  if (!speculator_) return;
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

std::span<const float> LLMEngine::execute(const SchedulerStep& step) {
  int64_t context_tokens = 0;
  for (const ScheduledChunk& chunk : step.chunks)
    context_tokens += chunk.seq->num_computed_tokens + chunk.num_tokens;
  forward_start_ = std::chrono::steady_clock::now();
  const std::span<const float> logits = runner_.execute(step);
  step_times_.record(step.num_tokens, context_tokens, seconds_since(forward_start_));
  // Now rather than after sampling: completions forked from a prompt that just finished take
  // its computed count with its blocks.
  scheduler_.complete(step);
  ++counters_.num_steps;
  return logits;
}

void LLMEngine::sample(const SchedulerStep& step, std::span<const float> logits) {
  output_time_ = now();
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
    if (request.metrics.first_scheduled_time < 0)
      request.metrics.first_scheduled_time = output_time_;
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
  cpu::parallel_for(jobs.size(), [&](int64_t i) {
    const SampleJob& job = jobs[i];
    Sampler& sampler = *job.completion->sampler;
    if (job.num_drafts == 0) {
      results[i].tokens.assign(1, sampler.sample(logits.subspan(job.row * vocab, vocab)));
      return;
    }
    const Sequence& seq = job.completion->seq;
    speculator_->verify(sampler, logits.subspan(job.row * vocab, (1 + job.num_drafts) * vocab),
                        static_cast<int64_t>(vocab),
                        std::span<const int32_t>(seq.draft_token_ids).first(job.num_drafts),
                        job.draft_request, results[i]);
  });
  // A step's cost is its forward and its sampling: a verify processes K + 1 rows of the
  // distribution where plain decoding processes one.
  step_costs_.record(step.num_tokens, seconds_since(forward_start_));
}

void LLMEngine::update_from_output(std::vector<RequestOutput>& outputs) {
  const std::vector<SampleJob>& jobs = sample_jobs_;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Completion& c = *jobs[i].completion;
    const VerifiedTokens& sampled = sampled_[i];
    // A stop inside an accepted run ends the completion there: what follows is dropped.
    for (const SampledToken& token : sampled.tokens) {
      update(c, token, outputs);
      if (c.finish_reason) break;
    }
    if (jobs[i].num_drafts == 0) continue;
    speculator_->observe(c.spec, static_cast<int32_t>(jobs[i].num_drafts), sampled.num_accepted);
    if (!c.finish_reason) scheduler_.accept_drafts(c.seq, sampled.num_accepted);
  }
  // What finished freed blocks that waiting pulls may take now: an engine that sleeps until
  // the connector wakes it must not leave them waiting.
  if (kv_transfer_) scheduler_.start_remote_loads();
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

void LLMEngine::update(Completion& c, const SampledToken& sampled,
                       std::vector<RequestOutput>& outputs) {
  Request& request = *c.request;
  const SamplingParams& params = request.params;
  const int32_t token = sampled.token;
  const double time = output_time_;
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
  if (!params.ignore_eos && contains_token(eos_ids_, token)) {
    reason = "stop";
  } else if (contains_token(params.stop_token_ids, token)) {
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
    finish(c, std::move(*reason), time, outputs);
  } else {
    report(request, outputs);
  }
}

void LLMEngine::finish(Completion& c, std::string reason, double time,
                       std::vector<RequestOutput>& outputs, std::optional<std::string> error) {
  Request& request = *c.request;
  const bool aborted = reason == "abort";
  CompletionOutput& out = output_for(c, outputs);
  out.new_text += c.text->finish();
  c.finish_reason = std::move(reason);
  if (aborted) request.forked = true;  // no completions are coming
  // The connector may keep some of its blocks: a prompt prefilled for a decode instance leaves
  // them under a lease (the output says where), a pull in flight writes into them.
  if (std::optional<disagg::RemoteBlocks> held = scheduler_.remove(&c.seq, aborted))
    request.held_kv = std::move(held);
  request.num_finished++;
  if (request.finished()) request.metrics.finished_time = time;
  out.finish_reason = c.finish_reason;
  out.stop_reason = c.stop_reason;
  out.token_ids.assign(c.seq.token_ids.begin() + c.seq.num_prompt_tokens, c.seq.token_ids.end());
  out.text = c.text->text();
  out.logprobs = c.logprobs;
  out.cumulative_logprob = c.cumulative_logprob;
  report(request, outputs, std::move(error));
}

void LLMEngine::report(const Request& request, std::vector<RequestOutput>& outputs,
                       std::optional<std::string> error) {
  for (RequestOutput& o : outputs)
    if (o.request_id == request.id) {
      o.metrics = request.metrics;
      o.finished = request.finished();
      if (o.finished) o.kv_transfer_params = request.held_kv;
      if (error) o.error = error;
    }
}

}  // namespace tern
