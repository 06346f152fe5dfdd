// The proposer a speculative config names: n-gram prompt lookup, or a draft model with a paged
// cache of its own in the target's layout.
#pragma once

#include <cstdint>
#include <memory>

#include "tern/blocks/kv_dtype.h"
#include "tern/spec_decode/proposer.h"
#include "tern/spec_decode/speculative_config.h"

namespace tern {

class LanguageModel;
class Tokenizer;

// What make_proposer needs of the target and, for a draft model, of the draft.
struct ProposerSetup {
  const Tokenizer* tokenizer = nullptr;  // the target's
  int64_t vocab_size = 0;                // the target's vocabulary rows
  // draft_model: the draft and its tokenizer, both outliving the proposer.
  LanguageModel* draft = nullptr;
  const Tokenizer* draft_tokenizer = nullptr;
  // The draft's cache follows the target's: as many blocks of as many tokens, of one dtype.
  int64_t num_blocks = 0;
  int block_size = 0;
  int64_t max_model_len = 0;
  KvDtype kv_dtype = KvDtype::F16;
};

// Throws tern::Error for a draft model that was not loaded or whose vocabulary differs from
// the target's (check_draft_vocabulary), and for a config that names no method.
std::unique_ptr<Proposer> make_proposer(const SpeculativeConfig& config,
                                        const ProposerSetup& setup);

}  // namespace tern
