// Reading GPTQ, AWQ and MLX settings from a checkpoint's config files. The field names and
// values are those the writers use (AutoGPTQ and GPTQModel's QuantizeConfig, AutoAWQ's
// AwqConfig as transformers saves it, mlx-lm's `quantization`); tools add informational fields
// (damp_percent, dataset, meta, …) that do not change the tensors and are passed over.
#include "tern/formats/checkpoint_quantization.h"

#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/formats/json_fields.h"
#include "tern/formats/json_util.h"

namespace tern {
namespace {

using nlohmann::json;

constexpr int kMaxJsonDepth = 16;

json parse_object(std::string_view text, std::string_view name) {
  json root;
  try {
    root = parse_json_strict(text, kMaxJsonDepth);
  } catch (const std::exception& e) {
    throw Error(std::string(name) + ": invalid JSON: " + e.what());
  }
  if (!root.is_object()) throw Error(std::string(name) + ": not a JSON object");
  return root;
}

void check_group_size(const JsonFields& f, const char* key, int64_t group) {
  if (group == -1)
    f.fail("field " + f.field(key) +
           " is -1 (one group per row), which tern does not load; it reads groups of 32, 64 or "
           "128");
  if (group != 32 && group != 64 && group != 128)
    f.fail("field " + f.field(key) + " is " + std::to_string(group) +
           "; tern reads groups of 32, 64 or 128");
}

void check_bits(const JsonFields& f, const char* key, int64_t bits, bool eight_too) {
  if (bits != 4 && !(eight_too && bits == 8))
    f.fail("field " + f.field(key) + " is " + std::to_string(bits) + "; tern reads " +
           (eight_too ? "4- and 8-bit" : "4-bit") + " weights of this format");
}

// A field that must hold one of the values tern reads, when present.
void require_value(const JsonFields& f, const char* key, std::initializer_list<const char*> ok,
                   const char* what) {
  const std::optional<std::string> v = f.opt_string(key);
  if (!v) return;
  for (const char* o : ok)
    if (*v == o) return;
  f.fail("field " + f.field(key) + " is " + quote_name(*v) + "; " + what);
}

CheckpointQuantization parse_gptq(const JsonFields& f) {
  CheckpointQuantization q;
  q.method = QuantMethod::Gptq;
  q.bits = static_cast<int>(f.req_int("bits"));
  check_bits(f, "bits", q.bits, true);
  q.group_size = static_cast<int>(f.req_int("group_size"));
  check_group_size(f, "group_size", q.group_size);
  q.desc_act = f.opt_bool("desc_act").value_or(false);
  q.sym = f.opt_bool("sym").value_or(true);
  if (f.opt_bool("is_marlin_format").value_or(false))
    f.fail("field " + f.field("is_marlin_format") +
           " is true: Marlin's repacked layout is not GPTQ's, and tern reads GPTQ's");
  require_value(
      f, "checkpoint_format", {"gptq", "gptq_v2"},
      "tern reads GPTQ's own layouts (\"gptq\", \"gptq_v2\"), not kernel-specific repacks");
  q.zeros_minus_one = f.opt_string("checkpoint_format").value_or("gptq") == "gptq";
  require_value(f, "pack_dtype", {"int32"}, "tern reads GPTQ tensors packed in int32");
  if (const json* dynamic = f.find("dynamic"); dynamic != nullptr && !dynamic->empty())
    f.fail("field " + f.field("dynamic") +
           " gives modules their own bits or group sizes, which tern does not read for GPTQ");
  return q;
}

CheckpointQuantization parse_awq(const JsonFields& f) {
  CheckpointQuantization q;
  q.method = QuantMethod::Awq;
  // transformers saves AutoAWQ's w_bit / q_group_size as bits / group_size.
  const char* bits_key = f.find("bits") != nullptr ? "bits" : "w_bit";
  const char* group_key = f.find("group_size") != nullptr ? "group_size" : "q_group_size";
  q.bits = static_cast<int>(f.req_int(bits_key));
  check_bits(f, bits_key, q.bits, false);
  q.group_size = static_cast<int>(f.req_int(group_key));
  check_group_size(f, group_key, q.group_size);
  if (const std::optional<std::string> v = f.opt_string("version")) {
    std::string lower = *v;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower != "gemm")
      f.fail("field " + f.field("version") + " is " + quote_name(*v) +
             "; tern reads AWQ's GEMM layout (GEMV, Marlin and the other kernels' layouts differ)");
  }
  if (!f.opt_bool("zero_point").value_or(true))
    f.fail("field " + f.field("zero_point") +
           " is false; tern reads AWQ checkpoints with zero points (AutoAWQ's GEMM default)");
  q.zeros_minus_one = false;
  return q;
}

CheckpointQuantization parse_mlx(const json& object, std::string_view name,
                                 const std::string& prefix) {
  JsonFields f(object, name, prefix);
  CheckpointQuantization q;
  q.method = QuantMethod::Mlx;
  auto read_format = [&](const JsonFields& m) {
    AffineIntFormat format{static_cast<int>(m.req_int("bits")),
                           static_cast<int>(m.req_int("group_size"))};
    check_bits(m, "bits", format.bits, true);
    check_group_size(m, "group_size", format.group);
    require_value(m, "mode", {"affine"},
                  "tern reads MLX's affine quantization (w = scale · q + bias), not the "
                  "microscaling float formats");
    return format;
  };
  const AffineIntFormat format = read_format(f);
  q.bits = format.bits;
  q.group_size = format.group;
  for (const auto& [key, value] : object.items()) {
    if (key == "bits" || key == "group_size" || key == "mode") continue;
    if (value.is_boolean() && !value.get<bool>()) {
      q.mlx_modules[key] = std::nullopt;
    } else if (value.is_object()) {
      q.mlx_modules[key] = read_format(JsonFields(value, name, prefix + key + "."));
    } else {
      f.fail("field " + f.field(key.c_str()) + " is " + value.dump() +
             "; a module's entry is its {bits, group_size} or false");
    }
  }
  return q;
}

json quantization_object(const CheckpointQuantization& q) {
  switch (q.method) {
    case QuantMethod::Gptq:
      return {{"quant_method", "gptq"},
              {"bits", q.bits},
              {"group_size", q.group_size},
              {"desc_act", q.desc_act},
              {"sym", q.sym},
              {"static_groups", false},
              {"lm_head", false},
              {"checkpoint_format", q.zeros_minus_one ? "gptq" : "gptq_v2"}};
    case QuantMethod::Awq:
      return {{"quant_method", "awq"}, {"bits", q.bits},    {"group_size", q.group_size},
              {"zero_point", true},    {"version", "gemm"}, {"modules_to_not_convert", nullptr}};
    case QuantMethod::Mlx: {
      json m = {{"group_size", q.group_size}, {"bits", q.bits}};
      for (const auto& [module, format] : q.mlx_modules)
        m[module] =
            format ? json{{"group_size", format->group}, {"bits", format->bits}} : json(false);
      return m;
    }
  }
  return {};
}

}  // namespace

std::string with_checkpoint_quantization(std::string_view config_json, std::string_view name,
                                         const CheckpointQuantization& q,
                                         std::string_view torch_dtype) {
  json root = parse_object(config_json, name);
  root.erase("quantization");
  root.erase("quantization_config");
  root["torch_dtype"] = std::string(torch_dtype);
  if (q.method == QuantMethod::Mlx) root["quantization"] = quantization_object(q);
  root["quantization_config"] = quantization_object(q);
  return root.dump(2) + "\n";
}

std::string gptq_quantize_config_json(const CheckpointQuantization& q) {
  json config = quantization_object(q);
  config.erase("lm_head");
  return config.dump(2) + "\n";
}

std::string_view quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::Gptq:
      return "gptq";
    case QuantMethod::Awq:
      return "awq";
    case QuantMethod::Mlx:
      return "mlx";
  }
  return "unknown";
}

std::optional<QuantMethod> quant_method_from_name(std::string_view name) {
  for (QuantMethod m : {QuantMethod::Gptq, QuantMethod::Awq, QuantMethod::Mlx})
    if (quant_method_name(m) == name) return m;
  return std::nullopt;
}

std::optional<AffineIntFormat> CheckpointQuantization::format_of(std::string_view module) const {
  if (auto it = mlx_modules.find(module); it != mlx_modules.end()) return it->second;
  return AffineIntFormat{bits, group_size};
}

std::optional<CheckpointQuantization> parse_checkpoint_quantization(
    std::string_view config_json, std::string_view name, std::string_view quantize_config_json,
    std::string_view quantize_config_name) {
  const json root = parse_object(config_json, name);
  const JsonFields top(root, name);
  if (const json* config = top.find("quantization_config")) {
    if (!config->is_object()) top.fail("field 'quantization_config' must be an object");
    const JsonFields f(*config, name, "quantization_config.");
    const std::optional<std::string> method = f.opt_string("quant_method");
    if (method == "gptq") return parse_gptq(f);
    if (method == "awq") return parse_awq(f);
    // OpenAI's MXFP4 (gpt-oss) quantizes only the experts, whose *_blocks / *_scales tensors the
    // gpt-oss loader reads by name (models/openai_experts.h); every other module loads as is.
    if (method == "mxfp4") return std::nullopt;
    // mlx-lm writes its settings under both names; `quantization` is the one it reads.
    if (!method && top.find("quantization") != nullptr)
      return parse_mlx(*top.find("quantization"), name, "quantization.");
    f.fail("field " + f.field("quant_method") + " is " +
           (method ? quote_name(*method) : std::string("missing")) +
           "; tern reads GPTQ, AWQ, MLX and gpt-oss's MXFP4 checkpoints (and GGUF files)");
  }
  if (const json* mlx = top.find("quantization")) {
    if (!mlx->is_object()) top.fail("field 'quantization' must be an object");
    return parse_mlx(*mlx, name, "quantization.");
  }
  if (!quantize_config_json.empty()) {  // AutoGPTQ before transformers carried it
    const json config = parse_object(quantize_config_json, quantize_config_name);
    const JsonFields f(config, quantize_config_name);
    const std::optional<std::string> method = f.opt_string("quant_method");
    if (method && *method != "gptq")
      f.fail("field " + f.field("quant_method") + " is " + quote_name(*method) +
             "; quantize_config.json is AutoGPTQ's, and tern reads it for GPTQ");
    return parse_gptq(f);
  }
  return std::nullopt;
}

}  // namespace tern
