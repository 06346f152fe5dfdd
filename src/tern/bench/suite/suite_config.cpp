// The suite's JSON config: every key checked against the defaults' keys and types.
#include "tern/bench/suite/suite_config.h"

#include <cstdlib>
#include <functional>
#include <map>

#include "tern/blocks/kv_dtype.h"
#include "tern/core/did_you_mean.h"
#include "tern/core/error.h"
#include "tern/quant/quant_recipe.h"

namespace tern::bench {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Reads the keys of one JSON object into fields, each by a function that knows its type; any
// key without a reader is an error naming it and the section.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string where) : object_(object), where_(std::move(where)) {
    if (!object_.is_object()) throw Error(where_ + ": expected a JSON object");
  }

  void integer(const std::string& key, int& out, int min, int max) {
    readers_[key] = [&out, min, max, this, key](const json& v) {
      if (!v.is_number_integer()) throw Error(name(key) + ": expected an integer");
      const int64_t n = v.get<int64_t>();
      if (n < min || n > max)
        throw Error(name(key) + ": " + std::to_string(n) + " is outside [" + std::to_string(min) +
                    ", " + std::to_string(max) + "]");
      out = static_cast<int>(n);
    };
  }
  void number(const std::string& key, double& out, double min_exclusive) {
    readers_[key] = [&out, min_exclusive, this, key](const json& v) {
      if (!v.is_number()) throw Error(name(key) + ": expected a number");
      const double x = v.get<double>();
      if (!(x > min_exclusive))
        throw Error(name(key) + ": must be greater than " + std::to_string(min_exclusive));
      out = x;
    };
  }
  void string(const std::string& key, std::string& out,
              const std::function<void(const std::string&)>& check = {}) {
    readers_[key] = [&out, check, this, key](const json& v) {
      if (!v.is_string()) throw Error(name(key) + ": expected a string");
      if (check) check(v.get<std::string>());
      out = v.get<std::string>();
    };
  }
  void path(const std::string& key, fs::path& out, const fs::path& base) {
    readers_[key] = [&out, base, this, key](const json& v) {
      if (!v.is_string()) throw Error(name(key) + ": expected a path (a string)");
      out = resolve(base, v.get<std::string>());
    };
  }
  void strings(const std::string& key, std::vector<std::string>& out,
               const std::function<void(const std::string&)>& check) {
    readers_[key] = [&out, check, this, key](const json& v) {
      if (!v.is_array()) throw Error(name(key) + ": expected a list of strings");
      std::vector<std::string> items;
      for (const json& item : v) {
        if (!item.is_string()) throw Error(name(key) + ": expected a list of strings");
        check(item.get<std::string>());
        items.push_back(item.get<std::string>());
      }
      out = std::move(items);
    };
  }
  void integers(const std::string& key, std::vector<int>& out, int min, int max) {
    readers_[key] = [&out, min, max, this, key](const json& v) {
      if (!v.is_array() || v.empty()) throw Error(name(key) + ": expected a list of integers");
      std::vector<int> items;
      for (const json& item : v) {
        if (!item.is_number_integer() || item.get<int64_t>() < min || item.get<int64_t>() > max)
          throw Error(name(key) + ": every entry must be an integer in [" + std::to_string(min) +
                      ", " + std::to_string(max) + "]");
        items.push_back(item.get<int>());
      }
      out = std::move(items);
    };
  }
  void paths(const std::string& key, std::vector<fs::path>& out, const fs::path& base) {
    readers_[key] = [&out, base, this, key](const json& v) {
      if (!v.is_array()) throw Error(name(key) + ": expected a list of paths");
      std::vector<fs::path> items;
      for (const json& item : v) {
        if (!item.is_string()) throw Error(name(key) + ": expected a list of paths");
        items.push_back(resolve(base, item.get<std::string>()));
      }
      out = std::move(items);
    };
  }
  // A nested section: false turns it off; an object is read by `read`.
  void section(const std::string& key, bool& enabled,
               const std::function<void(const json&)>& read) {
    readers_[key] = [&enabled, read, this, key](const json& v) {
      if (v.is_boolean()) {
        enabled = v.get<bool>();
        return;
      }
      if (!v.is_object()) throw Error(name(key) + ": expected an object, or false to skip it");
      enabled = true;
      read(v);
    };
  }

  // Reads every key of the object; call after the readers are registered.
  void read() const {
    std::vector<std::string> known;
    for (const auto& [key, reader] : readers_) known.push_back(key);
    for (const auto& [key, value] : object_.items()) {
      const auto it = readers_.find(key);
      if (it == readers_.end())
        throw Error(where_ + ": unknown key '" + key + "'" + did_you_mean(key, known));
      it->second(value);
    }
  }

 private:
  std::string name(const std::string& key) const { return where_ + "." + key; }
  static fs::path resolve(const fs::path& base, const std::string& p) {
    if (p.empty()) return {};
    const fs::path path(p);
    return path.is_absolute() || base.empty() ? path : base / path;
  }

  const json& object_;
  std::string where_;
  std::map<std::string, std::function<void(const json&)>> readers_;
};

void check_weight_type(const std::string& where, const std::string& type, bool checkpoints) {
  if (checkpoints && (type == "gptq" || type == "awq")) return;
  if (!file_type_from_name(type))
    throw Error(where + ": unknown weight type '" + type + "' (tern quantize's GGUF types" +
                (checkpoints ? std::string(", gptq or awq)") : std::string(")")));
}

void check_one_of(const std::string& where, const std::string& value,
                  const std::vector<std::string>& allowed) {
  for (const std::string& a : allowed)
    if (a == value) return;
  std::string list;
  for (const std::string& a : allowed) {
    if (!list.empty()) list += ", ";
    list += a;
  }
  throw Error(where + ": unknown '" + value + "' (one of " + list + ")" +
              did_you_mean(value, allowed));
}

}  // namespace

fs::path fixtures_dir() {
  const char* env = std::getenv("TERN_FIXTURES");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path("../shared/fixtures");
}

SuiteConfig default_suite_config(const fs::path& fixtures) {
  SuiteConfig c;
  for (const char* shape : {"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b"})
    c.shapes.configs.push_back(fixtures / "model-configs" / shape);
  c.shapes.tokenizer = fixtures / "qwen-tokenizer";
  c.kv_cache.config = fixtures / "model-configs" / "qwen3-0.6b";
  return c;
}

SuiteConfig parse_suite_config(const json& doc, const fs::path& base_dir) {
  SuiteConfig c = default_suite_config(fixtures_dir());
  ObjectReader top(doc, "config");
  top.path("model", c.model, base_dir);
  top.path("draft", c.draft, base_dir);
  top.string("prompt", c.prompt);
  top.integer("threads", c.threads, 0, 4096);
  top.string("device", c.device);
  top.path("llama_cpp", c.llama_cpp, base_dir);
  top.path("ik_llama_cpp", c.ik_llama_cpp, base_dir);

  top.section("weights", c.weights.enabled, [&](const json& v) {
    ObjectReader r(v, "config.weights");
    WeightsSection& s = c.weights;
    r.strings("types", s.types, [](const std::string& t) {
      check_weight_type("config.weights.types", t, /*checkpoints=*/true);
    });
    r.integer("group_size", s.group_size, 32, 128);
    r.integer("prompt_tokens", s.prompt_tokens, 1, 1 << 16);
    r.integer("decode_tokens", s.decode_tokens, 1, 1 << 16);
    r.integer("reps", s.reps, 1, 100);
    r.integer("rounds", s.rounds, 1, 100);
    r.read();
    if (s.group_size != 32 && s.group_size != 64 && s.group_size != 128)
      throw Error("config.weights.group_size: " + std::to_string(s.group_size) +
                  " is not 32, 64 or 128");
  });
  top.section("speculative", c.speculative.enabled, [&](const json& v) {
    ObjectReader r(v, "config.speculative");
    SpeculativeSection& s = c.speculative;
    r.string("type", s.type,
             [](const std::string& t) { check_weight_type("config.speculative.type", t, false); });
    r.strings("methods", s.methods, [](const std::string& m) {
      check_one_of("config.speculative.methods", m, {"draft", "draft-k4", "ngram"});
    });
    r.integer("decode_tokens", s.decode_tokens, 1, 1 << 16);
    r.integer("runs", s.runs, 1, 100);
    r.read();
  });
  top.section("kv_cache", c.kv_cache.enabled, [&](const json& v) {
    ObjectReader r(v, "config.kv_cache");
    KvCacheSection& s = c.kv_cache;
    r.path("config", s.config, base_dir);
    r.string("type", s.type,
             [](const std::string& t) { check_weight_type("config.kv_cache.type", t, false); });
    r.strings("dtypes", s.dtypes, [](const std::string& d) {
      if (!kv_dtype_from_name(d))
        throw Error("config.kv_cache.dtypes: unknown KV-cache dtype '" + d + "' (" +
                    std::string(kv_cache_dtype_choices()) + ")");
    });
    r.integer("context", s.context, 1, 1 << 20);
    r.integer("decode_tokens", s.decode_tokens, 1, 1 << 16);
    r.integer("reps", s.reps, 1, 100);
    r.read();
  });
  top.section("mixed_load", c.mixed_load.enabled, [&](const json& v) {
    ObjectReader r(v, "config.mixed_load");
    MixedLoadSection& s = c.mixed_load;
    r.string("type", s.type,
             [](const std::string& t) { check_weight_type("config.mixed_load.type", t, false); });
    r.strings("setups", s.setups, [](const std::string& m) {
      check_one_of("config.mixed_load.setups", m, {"whole", "chunked", "pd"});
    });
    r.integer("chunk_tokens", s.chunk_tokens, 1, 1 << 20);
    r.integer("num_prompts", s.num_prompts, 1, 1 << 20);
    r.number("request_rate", s.request_rate, 0);
    r.integer("input_len", s.input_len, 1, 1 << 20);
    r.integer("output_len", s.output_len, 2, 1 << 20);
    r.integer("long_num_prompts", s.long_num_prompts, 0, 1 << 20);
    r.integer("long_input_len", s.long_input_len, 1, 1 << 20);
    r.integer("long_output_len", s.long_output_len, 1, 1 << 20);
    r.number("long_request_rate", s.long_request_rate, 0);
    r.read();
  });
  top.section("serving", c.serving.enabled, [&](const json& v) {
    ObjectReader r(v, "config.serving");
    ServingSection& s = c.serving;
    r.string("type", s.type,
             [](const std::string& t) { check_weight_type("config.serving.type", t, false); });
    r.integers("concurrency", s.concurrency, 1, 4096);
    r.integer("prompts_per_concurrency", s.prompts_per_concurrency, 1, 1000);
    r.integer("input_len", s.input_len, 1, 1 << 20);
    r.integer("output_len", s.output_len, 1, 1 << 20);
    r.read();
  });
  top.section("shapes", c.shapes.enabled, [&](const json& v) {
    ObjectReader r(v, "config.shapes");
    ShapesSection& s = c.shapes;
    r.paths("configs", s.configs, base_dir);
    r.path("tokenizer", s.tokenizer, base_dir);
    r.strings("types", s.types, [](const std::string& t) {
      check_weight_type("config.shapes.types", t, /*checkpoints=*/false);
    });
    r.integer("prompt_tokens", s.prompt_tokens, 1, 1 << 16);
    r.integer("decode_tokens", s.decode_tokens, 1, 1 << 16);
    r.integer("reps", s.reps, 1, 100);
    r.integer("rounds", s.rounds, 1, 100);
    r.read();
  });
  top.read();
  return c;
}

nlohmann::ordered_json suite_config_json(const SuiteConfig& c) {
  using oj = nlohmann::ordered_json;
  auto section = [](bool enabled, oj body) { return enabled ? body : oj(false); };
  std::vector<std::string> configs;
  for (const fs::path& p : c.shapes.configs) configs.push_back(p.string());
  oj j;
  j["model"] = c.model.string();
  j["draft"] = c.draft.string();
  j["prompt"] = c.prompt;
  j["threads"] = c.threads;
  j["device"] = c.device;
  j["llama_cpp"] = c.llama_cpp.string();
  j["ik_llama_cpp"] = c.ik_llama_cpp.string();
  const WeightsSection& w = c.weights;
  j["weights"] = section(w.enabled, {{"types", w.types},
                                     {"group_size", w.group_size},
                                     {"prompt_tokens", w.prompt_tokens},
                                     {"decode_tokens", w.decode_tokens},
                                     {"reps", w.reps},
                                     {"rounds", w.rounds}});
  const SpeculativeSection& sp = c.speculative;
  j["speculative"] = section(sp.enabled, {{"type", sp.type},
                                          {"methods", sp.methods},
                                          {"decode_tokens", sp.decode_tokens},
                                          {"runs", sp.runs}});
  const KvCacheSection& kv = c.kv_cache;
  j["kv_cache"] = section(kv.enabled, {{"config", kv.config.string()},
                                       {"type", kv.type},
                                       {"dtypes", kv.dtypes},
                                       {"context", kv.context},
                                       {"decode_tokens", kv.decode_tokens},
                                       {"reps", kv.reps}});
  const MixedLoadSection& m = c.mixed_load;
  j["mixed_load"] = section(m.enabled, {{"type", m.type},
                                        {"setups", m.setups},
                                        {"chunk_tokens", m.chunk_tokens},
                                        {"num_prompts", m.num_prompts},
                                        {"request_rate", m.request_rate},
                                        {"input_len", m.input_len},
                                        {"output_len", m.output_len},
                                        {"long_num_prompts", m.long_num_prompts},
                                        {"long_input_len", m.long_input_len},
                                        {"long_output_len", m.long_output_len},
                                        {"long_request_rate", m.long_request_rate}});
  const ServingSection& s = c.serving;
  j["serving"] = section(s.enabled, {{"type", s.type},
                                     {"concurrency", s.concurrency},
                                     {"prompts_per_concurrency", s.prompts_per_concurrency},
                                     {"input_len", s.input_len},
                                     {"output_len", s.output_len}});
  const ShapesSection& sh = c.shapes;
  j["shapes"] = section(sh.enabled, {{"configs", configs},
                                     {"tokenizer", sh.tokenizer.string()},
                                     {"types", sh.types},
                                     {"prompt_tokens", sh.prompt_tokens},
                                     {"decode_tokens", sh.decode_tokens},
                                     {"reps", sh.reps},
                                     {"rounds", sh.rounds}});
  return j;
}

}  // namespace tern::bench
