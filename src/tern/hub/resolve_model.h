// The one entry point the commands use: a --model / --tokenizer argument → a local path,
// reading the Hugging Face cache first and downloading only what it lacks.
#pragma once

#include <string>

#include "tern/hub/hub_settings.h"
#include "tern/hub/model_spec.h"

namespace tern::hub {

struct ResolveOptions {
  std::string revision = "main";  // a branch, tag or commit hash
  RepoFiles files = RepoFiles::All;
};

// A local path is returned as it is. A hub name is answered from the cache when the snapshot of
// the revision already holds what is needed (no network at all: a moved branch is only seen
// with a new download, or --revision); otherwise the repository is listed and the missing files
// downloaded. Returns the snapshot folder (safetensors repository) or the .gguf file's path.
// Throws tern::Error (not found, gated, offline and not cached, …).
std::string resolve_model(const std::string& spec, const ResolveOptions& options = {});
std::string resolve_model(const std::string& spec, const ResolveOptions& options,
                          const HubSettings& settings);

}  // namespace tern::hub
