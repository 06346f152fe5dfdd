// The plan's text tables and its JSON object.
#include "tern/plan/plan_report.h"

#include <cstdarg>
#include <cstdio>

namespace tern::plan {
namespace {

std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return buf;
}

std::string flags_text(const Suggestion& s) {
  std::string out;
  for (const auto& [flag, value] : s.flags) out += (out.empty() ? "" : " ") + flag + " " + value;
  return out;
}

std::string tokens_per_s_text(double t) {
  return t >= 100 ? printf_string("%.0f", t) : printf_string("%.1f", t);
}

}  // namespace

std::string grouped(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (uint64_t{1} << 30)) return printf_string("%.2f GiB", b / (1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return printf_string("%.1f MiB", b / (1 << 20));
  if (bytes >= (uint64_t{1} << 10)) return printf_string("%.0f KiB", b / (1 << 10));
  return std::to_string(bytes) + " B";
}

std::string format_plan(const Plan& p) {
  const ModelConfig& c = p.model.config;
  const PlanOptions& o = p.options;
  std::string s;
  const std::string mlp =
      c.num_experts > 0
          ? printf_string("%lld experts of %lld (%lld per token)",
                          static_cast<long long>(c.num_experts),
                          static_cast<long long>(c.moe_intermediate_size),
                          static_cast<long long>(c.num_experts_per_tok)) +
                (c.shared_expert_intermediate_size > 0
                     ? printf_string(" + a shared expert of %lld",
                                     static_cast<long long>(c.shared_expert_intermediate_size))
                     : std::string())
          : printf_string("ffn %lld", static_cast<long long>(c.intermediate_size));
  s += printf_string(
      "model: %s (%s): %s, %lld layers, hidden %lld, %s, heads %lld / kv %lld x %lld, vocab "
      "%lld, "
      "context %lld%s\n",
      p.model.name.c_str(), p.model.format.c_str(), std::string(model_arch_name(c.arch)).c_str(),
      static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size), mlp.c_str(),
      static_cast<long long>(c.num_heads), static_cast<long long>(c.num_kv_heads),
      static_cast<long long>(c.head_dim), static_cast<long long>(c.vocab_size),
      static_cast<long long>(c.max_position_embeddings),
      c.tie_word_embeddings ? ", tied embeddings" : "");

  s += printf_string("\nweights (%s): %s parameters, %s\n", p.weights.types.c_str(),
                     grouped(p.weights.parameters()).c_str(),
                     format_bytes(p.weights.total_bytes()).c_str());
  s += printf_string("  %-6s %8s %16s %16s %11s\n", "type", "tensors", "parameters", "bytes", "");
  for (const TypeTotal& t : p.weights.by_type())
    s += printf_string("  %-6s %8lld %16s %16s %11s\n", std::string(dtype_name(t.dtype)).c_str(),
                       static_cast<long long>(t.tensors), grouped(t.elements).c_str(),
                       grouped(t.bytes).c_str(), format_bytes(t.bytes).c_str());
  std::string read_note =
      p.weights.tied_embeddings ? "" : "; of the token embedding table, one row";
  if (p.weights.num_experts > 0)
    read_note += printf_string("; of the experts, the %lld of %lld a token chooses",
                               static_cast<long long>(p.weights.experts_per_token),
                               static_cast<long long>(p.weights.num_experts));
  s += printf_string("  read per decoded token: %s (%s bytes%s)\n",
                     format_bytes(p.weights.bytes_read_per_token()).c_str(),
                     grouped(p.weights.bytes_read_per_token()).c_str(), read_note.c_str());
  if (p.model.repo_weight_bytes)
    s += printf_string("  the repository's *.safetensors files: %s bytes (headers included)\n",
                       grouped(*p.model.repo_weight_bytes).c_str());
  if (p.memory.repacked > 0)
    s += printf_string(
        "  + %s: the tied embedding repacked for this CPU's lm_head kernels (its rows stay for "
        "lookups)\n",
        format_bytes(p.memory.repacked).c_str());

  s += printf_string(
      "\nKV cache: %lld sequence%s x %lld tokens, in blocks of %d tokens (%lld blocks)\n",
      static_cast<long long>(o.max_num_seqs), o.max_num_seqs == 1 ? "" : "s",
      static_cast<long long>(o.max_model_len), o.block_size,
      static_cast<long long>(p.chosen_kv.num_blocks));
  s += printf_string("  %-9s %12s %16s %11s\n", "dtype", "bytes/token", "bytes", "");
  for (const KvPlan& kv : p.kv)
    s += printf_string("  %-9s %12s %16s %11s%s\n", std::string(kv_dtype_name(kv.dtype)).c_str(),
                       grouped(static_cast<uint64_t>(kv.bytes_per_token)).c_str(),
                       grouped(kv.bytes).c_str(), format_bytes(kv.bytes).c_str(),
                       kv.dtype == o.kv_cache_dtype ? "  <- --kv-cache-dtype" : "");

  const WorkingMemory& w = p.working;
  s += printf_string(
      "\nworking memory (steps of %lld tokens, %lld logit row%s): activations %s + matmul "
      "workspace %s + "
      "logits %s = %s\n",
      static_cast<long long>(w.num_tokens), static_cast<long long>(w.logit_rows),
      w.logit_rows == 1 ? "" : "s", format_bytes(w.activations).c_str(),
      format_bytes(w.workspace).c_str(), format_bytes(w.logits).c_str(),
      format_bytes(w.total()).c_str());

  const MemoryTotal& m = p.memory;
  s += printf_string("\nmemory: weights %s%s + KV cache %s + working %s = %s of %s (%s): ",
                     format_bytes(m.weights).c_str(),
                     m.repacked ? (" + repacked " + format_bytes(m.repacked)).c_str() : "",
                     format_bytes(m.kv_cache).c_str(), format_bytes(m.working).c_str(),
                     format_bytes(m.total()).c_str(), format_bytes(o.device_memory).c_str(),
                     o.device_memory_source.c_str());
  if (p.fits) {
    s += "fits, " + format_bytes(o.device_memory - m.total()) + " to spare\n";
  } else {
    s += "does not fit";
    if (p.suggestions.empty()) {
      s += "; nothing tern plan tried fits (the smallest weights alone need more)\n";
    } else {
      s += ". What would:\n";
      for (const Suggestion& sg : p.suggestions)
        s += printf_string("  %-52s total %s\n", flags_text(sg).c_str(),
                           format_bytes(sg.total_bytes).c_str());
    }
  }

  const DecodeCeiling& d = p.ceiling;
  s += printf_string(
      "\ndecode ceiling at %s (%s): bandwidth / (%s of weights + %s bytes of KV per token of "
      "context)\n",
      format_bandwidth(d.bandwidth).c_str(), o.bandwidth_source.c_str(),
      format_bytes(d.weight_bytes).c_str(),
      grouped(static_cast<uint64_t>(d.kv_bytes_per_token)).c_str());
  s += printf_string("  1 sequence at context 0: %s tokens/s; at context %lld: %s tokens/s\n",
                     tokens_per_s_text(d.tokens_per_s(0)).c_str(),
                     static_cast<long long>(o.max_model_len),
                     tokens_per_s_text(d.tokens_per_s(o.max_model_len)).c_str());
  if (o.max_num_seqs > 1)
    s += printf_string("  %lld sequences at context %lld: %s tokens/s together\n",
                       static_cast<long long>(o.max_num_seqs),
                       static_cast<long long>(o.max_model_len),
                       tokens_per_s_text(d.tokens_per_s(o.max_model_len, o.max_num_seqs)).c_str());

  s += printf_string("\n  %-14s %11s %10s %5s %14s %16s\n", "device", "bandwidth", "memory", "fits",
                     "tokens/s ctx 0", ("ctx " + std::to_string(o.max_model_len)).c_str());
  for (const DeviceFit& f : p.devices)
    s += printf_string("  %-14s %11s %10s %5s %14s %16s\n", f.name.c_str(),
                       format_bandwidth(f.bandwidth).c_str(), format_bytes(f.memory).c_str(),
                       f.fits ? "yes" : "no", tokens_per_s_text(f.tokens_per_s).c_str(),
                       tokens_per_s_text(f.tokens_per_s_full).c_str());
  return s;
}

nlohmann::ordered_json plan_json(const Plan& p) {
  using json = nlohmann::ordered_json;
  const ModelConfig& c = p.model.config;
  const PlanOptions& o = p.options;
  json j;
  j["model"] = p.model.name;
  j["format"] = p.model.format;
  j["config"] = {{"arch", std::string(model_arch_name(c.arch))},
                 {"num_layers", c.num_layers},
                 {"hidden_size", c.hidden_size},
                 {"intermediate_size", c.intermediate_size},
                 {"num_heads", c.num_heads},
                 {"num_kv_heads", c.num_kv_heads},
                 {"head_dim", c.head_dim},
                 {"vocab_size", c.vocab_size},
                 {"max_position_embeddings", c.max_position_embeddings},
                 {"tie_word_embeddings", c.tie_word_embeddings},
                 {"num_experts", c.num_experts},
                 {"num_experts_per_tok", c.num_experts_per_tok},
                 {"moe_intermediate_size", c.moe_intermediate_size},
                 {"shared_expert_intermediate_size", c.shared_expert_intermediate_size}};
  j["settings"] = {{"weight_type", o.recipe ? json(o.recipe->name()) : json(nullptr)},
                   {"kv_cache_dtype", std::string(kv_dtype_name(o.kv_cache_dtype))},
                   {"max_model_len", o.max_model_len},
                   {"max_num_seqs", o.max_num_seqs},
                   {"max_num_batched_tokens", o.max_num_batched_tokens},
                   {"block_size", o.block_size}};
  json types = json::array();
  for (const TypeTotal& t : p.weights.by_type())
    types.push_back({{"type", std::string(dtype_name(t.dtype))},
                     {"tensors", t.tensors},
                     {"parameters", t.elements},
                     {"bytes", t.bytes}});
  j["weights"] = {{"types", p.weights.types},
                  {"parameters", p.weights.parameters()},
                  {"bytes", p.weights.total_bytes()},
                  {"by_type", types},
                  {"bytes_read_per_token", p.weights.bytes_read_per_token()},
                  {"repacked_bytes", p.memory.repacked},
                  {"repo_safetensors_bytes",
                   p.model.repo_weight_bytes ? json(*p.model.repo_weight_bytes) : json(nullptr)}};
  json kv = json::array();
  for (const KvPlan& k : p.kv)
    kv.push_back({{"dtype", std::string(kv_dtype_name(k.dtype))},
                  {"bytes_per_token", k.bytes_per_token},
                  {"num_blocks", k.num_blocks},
                  {"bytes", k.bytes},
                  {"chosen", k.dtype == o.kv_cache_dtype}});
  j["kv_cache"] = {{"dtype", std::string(kv_dtype_name(p.chosen_kv.dtype))},
                   {"bytes_per_token", p.chosen_kv.bytes_per_token},
                   {"num_blocks", p.chosen_kv.num_blocks},
                   {"bytes", p.chosen_kv.bytes},
                   {"per_dtype", kv}};
  j["working_memory"] = {
      {"num_tokens", p.working.num_tokens},         {"logit_rows", p.working.logit_rows},
      {"activations_bytes", p.working.activations}, {"workspace_bytes", p.working.workspace},
      {"logits_bytes", p.working.logits},           {"bytes", p.working.total()}};
  json suggestions = json::array();
  for (const Suggestion& s : p.suggestions) {
    json flags = json::object();
    for (const auto& [flag, value] : s.flags) flags[flag] = value;
    suggestions.push_back({{"flags", flags}, {"total_bytes", s.total_bytes}});
  }
  j["memory"] = {{"weights_bytes", p.memory.weights},
                 {"repacked_bytes", p.memory.repacked},
                 {"kv_cache_bytes", p.memory.kv_cache},
                 {"working_bytes", p.memory.working},
                 {"total_bytes", p.memory.total()},
                 {"device_memory_bytes", o.device_memory},
                 {"device_memory_source", o.device_memory_source},
                 {"fits", p.fits},
                 {"suggestions", suggestions}};
  const DecodeCeiling& d = p.ceiling;
  j["decode"] = {
      {"bandwidth_bytes_per_s", d.bandwidth},
      {"bandwidth_source", o.bandwidth_source},
      {"weight_bytes_per_token", d.weight_bytes},
      {"kv_bytes_per_token_of_context", d.kv_bytes_per_token},
      {"tokens_per_s_context_0", d.tokens_per_s(0)},
      {"tokens_per_s_max_model_len", d.tokens_per_s(o.max_model_len)},
      {"tokens_per_s_all_seqs_max_model_len", d.tokens_per_s(o.max_model_len, o.max_num_seqs)}};
  json devices = json::array();
  for (const DeviceFit& f : p.devices)
    devices.push_back({{"name", f.name},
                       {"bandwidth_bytes_per_s", f.bandwidth},
                       {"memory_bytes", f.memory},
                       {"fits", f.fits},
                       {"tokens_per_s_context_0", f.tokens_per_s},
                       {"tokens_per_s_max_model_len", f.tokens_per_s_full}});
  j["devices"] = devices;
  return j;
}

}  // namespace tern::plan
