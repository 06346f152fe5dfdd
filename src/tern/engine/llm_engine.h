// The engine loop (vLLM's LLMEngine / EngineCore): requests come in with add_request, each
// step() schedules one token budget, runs it as one forward, samples, detokenizes, checks the
// stop conditions and reports what changed. Single-threaded: whoever owns it calls step();
// the server drives it from its own thread through queues.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "tern/disagg/kv_connector.h"
#include "tern/disagg/kv_transfer_params.h"
#include "tern/engine/engine_config.h"
#include "tern/engine/kv_transfer_scheduling.h"
#include "tern/engine/model_runner.h"
#include "tern/engine/request_output.h"
#include "tern/engine/step_time_watch.h"
#include "tern/models/language_model.h"
#include "tern/sampling/sampler.h"
#include "tern/sampling/sampling_params.h"
#include "tern/scheduler/block_manager.h"
#include "tern/scheduler/scheduler.h"
#include "tern/spec_decode/speculator.h"
#include "tern/structured/structured_outputs.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

// Counters and gauges for logs and /metrics.
struct EngineStats {
  int64_t num_running = 0;  // sequences (a request with n completions counts n)
  int64_t num_waiting = 0;
  double kv_cache_usage = 0.0;  // fraction of blocks held
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  bool prefix_caching = false;
  KvDtype kv_cache_dtype = KvDtype::F16;
  int64_t kv_cache_bytes_per_token = 0;  // the target's cache (and the draft's, when drafting)
  int64_t prefix_cache_queries = 0;      // tokens
  int64_t prefix_cache_hits = 0;         // tokens
  int64_t prompt_tokens = 0;             // of requests whose prefill ended (cache hits included)
  int64_t generation_tokens = 0;
  int64_t num_preemptions = 0;
  int64_t num_steps = 0;
  StepTimes step_times;      // forwards against the fastest their shape ran (StepTimeWatch)
  bool speculative = false;  // speculative decoding is configured; `spec` counts it
  SpecDecodeStats spec;
  SpecIdle spec_idle;        // why steps that could have drafted did not, by reason
  bool kv_transfer = false;  // disaggregation is configured; `kv` counts it
  disagg::KvConnectorStats kv;
};

class LLMEngine {
 public:
  // The decoder (and its weights) must outlive the engine. Throws tern::Error when the KV
  // cache does not fit (see plan_kv_cache). With config.speculative's draft_model method, the
  // draft's decoder and tokenizer (outliving the engine too) are required and checked against
  // the target's vocabulary (check_draft_vocabulary).
  LLMEngine(LanguageModel& decoder, Tokenizer tokenizer, const EngineConfig& config,
            LanguageModel* draft = nullptr, const Tokenizer* draft_tokenizer = nullptr);
  ~LLMEngine();

  // Queues a request. Throws tern::Error, queueing nothing, for invalid sampling parameters,
  // a duplicate id, an empty prompt, a token id outside the vocabulary, a prompt longer than
  // max_model_len, or one that could not fit even in an empty KV cache.
  // Disaggregation (`kv`, with config.kv_transfer's role): do_remote_decode prefills and, at
  // the end, holds the prompt's blocks under a lease (the finishing output says where);
  // remote_prefill pulls the prompt's KV (all but its last token, and only the blocks the
  // prefix cache lacks) from the prefill instance, then decodes as if it had prefilled: the
  // same tokens and logprobs.
  void add_request(const std::string& request_id, std::vector<int32_t> prompt_token_ids,
                   const SamplingParams& params, const disagg::KvTransferParams& kv = {});

  // Runs one step; returns the requests with news (new tokens, finished, or aborted).
  std::vector<RequestOutput> step();

  // Stops a request; its blocks are freed now and the next step() reports it finished with
  // "abort". False when no such request is unfinished.
  bool abort_request(const std::string& request_id);

  bool has_unfinished_requests() const { return !requests_.empty(); }
  // step() has something to compute or report now. False while the only requests wait on
  // their KV pulls (or on blocks for them): the caller may sleep until the connector's wake-up
  // (set_transfer_wakeup) or next_transfer_deadline().
  bool has_work_to_step() const;
  // Leases held, pulls in flight or waiting for blocks: step() must still be called when the
  // connector wakes or the deadline passes, to free and admit.
  bool has_pending_transfers() const;
  // When the next held lease expires (now()'s clock); nullopt: none.
  std::optional<double> next_transfer_deadline() const;
  // Called from a transfer thread when a pull finished or a lease ended; nothing without
  // disaggregation.
  void set_transfer_wakeup(std::function<void()> wakeup);
  // The connector (null without --kv-transfer-config): engine id, port, fingerprint.
  const disagg::KvConnector* kv_connector() const { return connector_.get(); }
  int64_t num_unfinished_requests() const { return static_cast<int64_t>(requests_.size()); }
  EngineStats stats() const;

  // KV cache events for a router's prefix index (kv_events/): once on, what the prefix cache
  // took in and lost, in order, since the last take_kv_events().
  void record_kv_events(bool on) { blocks_.record_events(on); }
  std::vector<kv_events::KvCacheEvent> take_kv_events() { return blocks_.take_events(); }
  // Empties the prefix cache (vLLM's reset_prefix_cache): only while no request holds blocks;
  // false otherwise, changing nothing.
  bool reset_prefix_cache() { return blocks_.reset_prefix_cache(); }
  // The prefix cache's blocks now (BlockManager::cached_blocks), for tests.
  std::vector<BlockManager::CachedBlock> cached_blocks() const { return blocks_.cached_blocks(); }

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const LanguageModel& decoder() const { return decoder_; }
  int64_t max_model_len() const { return plan_.max_model_len; }
  const std::string& max_model_len_limit() const { return plan_.max_model_len_limit; }
  const std::string& kv_cache_summary() const { return plan_.summary; }
  const EngineConfig& config() const { return config_; }
  // The draft model has the target's weights (its own file as --speculative-model, say): a
  // draft forward costs about a target forward, so drafting cannot speed decoding up.
  bool draft_is_target() const { return draft_is_target_; }

  // Seconds on the clock the request metrics use.
  static double now();

 private:
  struct Request;
  struct Completion;
  // Who samples from which logits rows in a step: a plain row, or a verify's 1 + K rows (and
  // its draft request's index).
  struct SampleJob {
    Completion* completion;
    size_t row;
    size_t num_drafts;
    size_t draft_request;
  };

  // The stages of step(), in order.
  // Disaggregation: frees the blocks of leases that ended, takes finished pulls (their
  // sequences join the queue, or fail), starts the pulls free blocks allow.
  void before_schedule(std::vector<RequestOutput>& outputs);
  // Speculative decoding plans each decoding sequence's drafts; the scheduler plans the step.
  SchedulerStep schedule();
  // The proposer drafts for the chunks that made room for drafts (and its cache copies the
  // step's blocks); chunks shrink to the drafts it gave.
  void propose(SchedulerStep& step);
  // The one forward of the step; returns its logits ([sampled rows, vocab]).
  std::span<const float> execute(const SchedulerStep& step);
  // Samples every sampling row (a verify's 1 + K rows), after forking the n - 1 more
  // completions of prompts that just finished (they sample from the prompt's row).
  void sample(const SchedulerStep& step, std::span<const float> logits);
  // Appends the sampled tokens (of a verify, the accepted run), checks the stop conditions,
  // and gives the verifier's acceptance to the scheduler and the speculator.
  void update_from_output(std::vector<RequestOutput>& outputs);

  void plan_drafts();
  // The n - 1 more completions of a request whose prompt is in the cache: they share its
  // blocks and join the running set.
  std::vector<Completion*> fork_completions(Request& request);
  // Appends a sampled token, streams its text, and checks the stop conditions.
  void update(Completion& completion, const SampledToken& sampled,
              std::vector<RequestOutput>& outputs);
  CompletionOutput& output_for(Completion& completion, std::vector<RequestOutput>& outputs);
  // The one place a completion finishes (a stop, the length, an abort, a failed pull): the
  // scheduler lets go of its sequence and its output gets the whole completion; `error`, for
  // a request that failed, goes with the request's output.
  void finish(Completion& completion, std::string reason, double time,
              std::vector<RequestOutput>& outputs, std::optional<std::string> error = {});
  // The request-wide fields of the request's output in `outputs`: metrics, finished, the
  // lease a prefill for a decode instance holds, the error.
  void report(const Request& request, std::vector<RequestOutput>& outputs,
              std::optional<std::string> error = {});
  // This step's token budget: max_num_batched_tokens, or with --max-step-ms what the
  // measured step costs say fits in that time.
  int64_t step_token_budget() const;
  // Before any request, with a step time limit: times a one-token forward and a prompt chunk's
  // on the empty cache, so that the first step that holds a prompt beside running streams is
  // already priced (step_token_budget).
  void calibrate_step_costs();
  std::unique_ptr<Completion> make_completion(Request& request, int32_t index,
                                              std::span<const int32_t> prompt);
  void erase_finished_requests();

  LanguageModel& decoder_;
  Tokenizer tokenizer_;
  EngineConfig config_;
  // When construction began: the KV cache's allocation (planned and announced next, allocated
  // by runner_) is timed from it.
  double constructed_at_ = now();
  KvCachePlan plan_;
  std::vector<int32_t> eos_ids_;
  BlockManager blocks_;
  Scheduler scheduler_;
  ModelRunner runner_;
  // Seconds of a step (forward and sampling) by its tokens: the speculator's prices, and with
  // --max-step-ms the step budget's.
  ForwardCosts step_costs_;
  std::unique_ptr<Speculator> speculator_;  // null without speculative decoding
  // Compiled constraints over this tokenizer; made by the first constrained request.
  std::unique_ptr<structured::StructuredOutputs> structured_;
  Scheduler::DraftsWanted drafts_wanted_;          // the plan, as the scheduler asks for it
  bool draft_is_target_ = false;                   // see draft_is_target()
  std::vector<Speculator::Candidate> candidates_;  // this step's, reused
  std::vector<DraftRequest> draft_requests_;       // this step's, reused
  std::vector<size_t> draft_request_of_chunk_;     // the chunk's index in draft_requests_
  std::vector<SampleJob> sample_jobs_;             // this step's, reused
  std::vector<VerifiedTokens> sampled_;            // [jobs]: what each job's rows gave, reused
  std::chrono::steady_clock::time_point forward_start_;  // this step's
  double output_time_ = 0;  // this step's outputs' time (now() after the forward)
  std::mt19937_64 seed_rng_;
  int64_t next_seq_id_ = 0;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::unordered_map<const Sequence*, Completion*> completion_of_;
  std::vector<RequestOutput> aborted_;  // reported by the next step()
  // Disaggregation (null without it): the transfers, and the scheduler's view of them.
  std::unique_ptr<disagg::KvConnector> connector_;
  std::unique_ptr<KvTransferScheduling> kv_transfer_;
  EngineStats counters_;
  StepTimeWatch step_times_;
};

}  // namespace tern
