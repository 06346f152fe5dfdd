#include "tern/server/stats_logger.h"

#include <cstdio>

namespace tern::server {

StatsLogger::StatsLogger(double interval_seconds, Sink sink)
    : interval_(interval_seconds), sink_(std::move(sink)) {
  if (!sink_) sink_ = [](const std::string& text) { std::fputs(text.c_str(), stderr); };
}

std::string StatsLogger::slow_step_warning(const EngineStats& before, const EngineStats& after) {
  const int64_t steps = after.step_times.steps - before.step_times.steps;
  const double seconds = after.step_times.seconds - before.step_times.seconds;
  const double reference = after.step_times.reference_seconds - before.step_times.reference_seconds;
  if (steps < kSlowStepMinSteps || !(reference > 0.0) || !(seconds > kSlowStepFactor * reference))
    return {};
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "engine: warning: steps ran %.0fx slower than the same steps ran before (%.3f ms "
                "against %.3f ms on average over %lld steps): the cores are likely contended "
                "(other processes, or --threads beyond the free cores) or the weights swapped "
                "out\n",
                seconds / reference, 1e3 * seconds / steps, 1e3 * reference / steps,
                static_cast<long long>(steps));
  return buf;
}

std::string StatsLogger::lines(const EngineStats& before, const EngineStats& after,
                               double seconds) {
  const int64_t prompt = after.prompt_tokens - before.prompt_tokens;
  const int64_t generated = after.generation_tokens - before.generation_tokens;
  if ((prompt == 0 && generated == 0) || !(seconds > 0.0)) return {};
  const int64_t queries = after.prefix_cache_queries - before.prefix_cache_queries;
  const int64_t hits = after.prefix_cache_hits - before.prefix_cache_hits;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "engine: prompt throughput %.1f tokens/s, generation throughput %.1f tokens/s, "
                "running %lld, waiting %lld, KV cache usage %.1f%%, prefix cache hit rate %.1f%%\n",
                prompt / seconds, generated / seconds, static_cast<long long>(after.num_running),
                static_cast<long long>(after.num_waiting), 100.0 * after.kv_cache_usage,
                queries > 0 ? 100.0 * hits / queries : 0.0);
  std::string out = buf;
  if (!after.speculative) return out;
  SpecDecodeStats interval;
  interval.num_drafts = after.spec.num_drafts - before.spec.num_drafts;
  interval.num_draft_tokens = after.spec.num_draft_tokens - before.spec.num_draft_tokens;
  interval.num_accepted_tokens = after.spec.num_accepted_tokens - before.spec.num_accepted_tokens;
  // Configured but idle must say why: zeros alone read as a speculation that is broken.
  if (interval.num_drafts == 0 && generated > 0) {
    const std::optional<SpecIdle::Why> why = after.spec_idle.commonest_since(before.spec_idle);
    return out + "speculative decoding: no drafts: " +
           (why ? after.spec_idle.describe(*why)
                : "no step had a sequence to draft for (first tokens only)") +
           "\n";
  }
  out += "speculative decoding: " + interval.summary();
  if (interval.num_drafts > 0) {
    out += ", per-position acceptance";
    for (size_t i = 0; i < after.spec.accepted_per_position.size(); ++i) {
      const int64_t was =
          i < before.spec.accepted_per_position.size() ? before.spec.accepted_per_position[i] : 0;
      std::snprintf(
          buf, sizeof buf, " %.2f",
          static_cast<double>(after.spec.accepted_per_position[i] - was) / interval.num_drafts);
      out += buf;
    }
  }
  return out + "\n";
}

void StatsLogger::observe(const EngineStats& stats, double now) {
  if (interval_ <= 0.0) return;
  if (last_time_ < 0.0) {
    last_time_ = now;
    last_ = stats;
    return;
  }
  if (now - last_time_ < interval_) return;
  std::string text = lines(last_, stats, now - last_time_);
  if (last_warning_time_ < 0.0 || now - last_warning_time_ >= kSlowStepWarningSeconds) {
    const std::string warning = slow_step_warning(last_, stats);
    if (!warning.empty()) {
      text += warning;
      last_warning_time_ = now;
    }
  }
  if (!text.empty()) sink_(text);
  last_time_ = now;
  last_ = stats;
}

}  // namespace tern::server
