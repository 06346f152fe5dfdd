#include "tern/server/stats_logger.h"

#include <cstdio>

namespace tern::server {

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
  const std::string text = lines(last_, stats, now - last_time_);
  if (!text.empty()) std::fputs(text.c_str(), stderr);
  last_time_ = now;
  last_ = stats;
}

}  // namespace tern::server
