// load_draft_model and check_draft_vocabulary.
#include "tern/spec_decode/draft_model.h"

#include <algorithm>
#include <string>

#include "tern/core/error.h"
#include "tern/formats/json_util.h"

namespace tern {
namespace {

std::string token_text(const Tokenizer& tokenizer, int32_t id) {
  return quote_name(tokenizer.vocab().tokens[static_cast<size_t>(id)]);
}

}  // namespace

LoadedModel load_draft_model(const LoadOptions& target, const SpeculativeConfig& spec) {
  LoadOptions o = target;
  o.model = spec.model;
  o.tokenizer.clear();
  if (!spec.load_format.empty())
    o.format = spec.load_format == "dummy" ? LoadFormat::Dummy : LoadFormat::Auto;
  if (spec.weight_type != "auto")
    o.weight_recipe = parse_weight_recipe(spec.weight_type);
  else if (o.format != target.format)
    o.weight_recipe.reset();
  if (spec.dtype != "auto") o.dtype = parse_float_dtype(spec.dtype);
  LoadedModel draft = load_model(o);
  if (!draft.tokenizer && !target.tokenizer.empty())
    draft.tokenizer = Tokenizer::load(target.tokenizer);
  return draft;
}

void check_draft_vocabulary(const Tokenizer& target, int64_t target_rows, const Tokenizer& draft,
                            int64_t draft_rows) {
  const int32_t nt = target.vocab_size(), nd = draft.vocab_size();
  for (int32_t id = 0; id < std::min(nt, nd); ++id)
    if (target.vocab().tokens[static_cast<size_t>(id)] !=
        draft.vocab().tokens[static_cast<size_t>(id)])
      throw Error("the draft's vocabulary differs from the target's at id " + std::to_string(id) +
                  ": the target has " + token_text(target, id) + ", the draft " +
                  token_text(draft, id));
  if (nt != nd) {
    const int32_t id = std::min(nt, nd);
    throw Error("the draft's vocabulary differs from the target's at id " + std::to_string(id) +
                ": the target's tokenizer has " + std::to_string(nt) + " tokens, the draft's " +
                std::to_string(nd) + " (" + (nt > nd ? "the target" : "the draft") + " has " +
                token_text(nt > nd ? target : draft, id) + " there)");
  }
  if (target_rows < nt || draft_rows < nd)
    throw Error("the " + std::string(target_rows < nt ? "target" : "draft") +
                " model has fewer vocabulary rows than its tokenizer has tokens");
}

}  // namespace tern
