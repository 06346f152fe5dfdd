// make_proposer: the method's proposer, a draft model checked against the target first.
#include "tern/spec_decode/make_proposer.h"

#include "tern/core/error.h"
#include "tern/spec_decode/draft_model.h"
#include "tern/spec_decode/draft_model_proposer.h"
#include "tern/spec_decode/ngram_proposer.h"

namespace tern {

std::unique_ptr<Proposer> make_proposer(const SpeculativeConfig& config,
                                        const ProposerSetup& setup) {
  switch (config.method) {
    case SpeculativeMethod::kNgram:
      return std::make_unique<NgramProposer>(config.prompt_lookup_min, config.prompt_lookup_max,
                                             setup.vocab_size);
    case SpeculativeMethod::kDraftModel:
      if (!setup.draft || !setup.draft_tokenizer || !setup.tokenizer)
        throw Error("speculative decoding with a draft model needs the draft loaded");
      check_draft_vocabulary(*setup.tokenizer, setup.vocab_size, *setup.draft_tokenizer,
                             setup.draft->config().vocab_size);
      return std::make_unique<DraftModelProposer>(*setup.draft, setup.num_blocks, setup.block_size,
                                                  setup.max_model_len, setup.kv_dtype);
    case SpeculativeMethod::kNone:
      break;
  }
  throw Error("internal: a proposer for a speculative config without a method");
}

}  // namespace tern
