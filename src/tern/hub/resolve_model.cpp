// resolve_model: cache first, then the hub; one ModelSpec kind per function.
#include "tern/hub/resolve_model.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "tern/core/error.h"
#include "tern/hub/hub_cache.h"
#include "tern/hub/hub_download.h"
#include "tern/hub/model_spec.h"

namespace tern::hub {

namespace fs = std::filesystem;

namespace {

constexpr char kIndexFile[] = "model.safetensors.index.json";

bool has(const std::vector<std::string>& files, const std::string& name) {
  return std::find(files.begin(), files.end(), name) != files.end();
}

bool is_top_level_safetensors(const std::string& f) {
  return f.find('/') == std::string::npos && f.size() > 12 &&
         f.compare(f.size() - 12, 12, ".safetensors") == 0;
}

// The shard files an index's weight_map names, sorted and unique.
std::vector<std::string> index_shards(const std::string& repo, const fs::path& index) {
  std::ifstream in(index);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(index.string() + ": no \"weight_map\" object");
  std::set<std::string> shards;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string())
      throw Error(index.string() + ": weight_map['" + tensor + "'] is not a file name");
    check_repo_file_name(repo, file.get<std::string>());
    shards.insert(file.get<std::string>());
  }
  return {shards.begin(), shards.end()};
}

// The first file a cached snapshot lacks for `what`; empty when it is complete.
std::string missing_in_snapshot(const RepoCache& cache, const std::string& commit, RepoFiles what) {
  const std::vector<std::string> files = cache.snapshot_files(commit);
  if (what == RepoFiles::Tokenizer) {
    const bool any =
        has(files, "tokenizer.json") || has(files, "tokenizer.model") || has(files, "vocab.json");
    return any ? "" : "tokenizer.json";
  }
  if (!has(files, "config.json")) return "config.json";
  if (what == RepoFiles::NoWeights) return "";
  if (has(files, kIndexFile)) {
    for (const auto& shard : index_shards(cache.repo(), cache.snapshot_dir(commit) / kIndexFile))
      if (!has(files, shard)) return shard;
    return "";
  }
  return std::any_of(files.begin(), files.end(), is_top_level_safetensors) ? ""
                                                                           : "model.safetensors";
}

[[noreturn]] void throw_offline(const RepoCache& cache, const std::string& revision,
                                const std::string& missing) {
  throw Error("HF_HUB_OFFLINE is set and " + cache.repo() + " (revision '" + revision +
              "') is not in the cache " + cache.repo_dir().string() + ": " + missing);
}

// Offline, a snapshot without the safetensors model's files may still hold GGUF files (from an
// earlier ORG/NAME or ORG/NAME:QUANT): the one there is what the bare name resolved to when it
// was downloaded; of several, the user must choose, and a "missing config.json" would not say
// so. Throws the offline error when the snapshot holds no GGUF file either.
std::string cached_gguf(const RepoCache& cache, const std::string& commit,
                        const std::string& revision, const std::string& missing) {
  const std::vector<std::string> ggufs = gguf_files(cache.snapshot_files(commit));
  if (ggufs.size() == 1)
    if (auto file = cache.cached_file(commit, ggufs.front())) return file->string();
  if (ggufs.size() > 1)
    throw Error("HF_HUB_OFFLINE is set and the cache " + cache.repo_dir().string() + " holds " +
                cache.repo() + " (revision '" + revision +
                "') as several GGUF files and no config.json; choose one: " +
                gguf_choices(cache.repo(), ggufs));
  throw_offline(cache, revision, "missing " + missing);
}

std::string resolve_file(const HubSettings& settings, const RepoCache& cache,
                         const std::string& revision, const std::string& file) {
  if (auto commit = cache.commit_of(revision))
    if (auto cached = cache.cached_file(*commit, file)) return cached->string();
  if (settings.offline) throw_offline(cache, revision, "missing " + file);
  return HubDownloader(settings).download_file(cache.repo(), revision, file).string();
}

std::string resolve_quant(const HubSettings& settings, const RepoCache& cache,
                          const std::string& revision, const std::string& quant) {
  if (auto commit = cache.commit_of(revision)) {
    const std::vector<std::string> cached = cache.snapshot_files(*commit);
    try {
      return (cache.snapshot_dir(*commit) / select_gguf_file(cache.repo(), cached, quant)).string();
    } catch (const Error& e) {
      if (settings.offline) throw_offline(cache, revision, e.what());
    }
  }
  if (settings.offline)
    throw_offline(cache, revision, "no .gguf file for " + quant + " (nothing cached)");
  HubDownloader hub(settings);
  const RepoListing listing = hub.list_files(cache.repo(), revision);
  cache.write_ref(revision, listing.commit);
  const std::string file = select_gguf_file(cache.repo(), listing.files, quant);
  return hub.download_file(cache.repo(), listing.commit, file).string();
}

std::string resolve_repo(const HubSettings& settings, const RepoCache& cache,
                         const std::string& revision, RepoFiles what) {
  std::string missing = "no snapshot of the revision (refs/" + revision + " is missing)";
  if (auto commit = cache.commit_of(revision)) {
    missing = missing_in_snapshot(cache, *commit, what);
    if (missing.empty()) return cache.snapshot_dir(*commit).string();
    if (settings.offline) return cached_gguf(cache, *commit, revision, missing);
    missing = "missing " + missing;
  }
  if (settings.offline) throw_offline(cache, revision, missing);

  HubDownloader hub(settings);
  const RepoListing listing = hub.list_files(cache.repo(), revision);
  cache.write_ref(revision, listing.commit);
  const std::string& repo = cache.repo();
  const bool has_safetensors =
      std::any_of(listing.files.begin(), listing.files.end(), is_top_level_safetensors);
  const bool has_tokenizer = has(listing.files, "tokenizer.json") ||
                             has(listing.files, "tokenizer.model") ||
                             has(listing.files, "vocab.json");
  const bool usable =
      what == RepoFiles::Tokenizer
          ? has_tokenizer
          : has(listing.files, "config.json") && (what != RepoFiles::All || has_safetensors);
  if (!usable) {
    // A GGUF repository: one file holds config, tokenizer and weights.
    const std::vector<std::string> ggufs = gguf_files(listing.files);
    if (ggufs.size() == 1) return hub.download_file(repo, listing.commit, ggufs.front()).string();
    if (!ggufs.empty())
      throw Error(repo + " holds several GGUF files and no config.json; choose one as " + repo +
                  ":QUANT or " + repo + "/FILE.gguf: " + gguf_choices(repo, ggufs));
    throw Error(repo +
                ": neither a Hugging Face model (config.json, tokenizer, *.safetensors) nor a GGUF "
                "repository; files: " +
                list_or_none(listing.files));
  }
  for (const auto& file : select_support_files(listing.files, what))
    hub.download_file(repo, listing.commit, file);
  if (what == RepoFiles::All) {
    std::vector<std::string> weights;
    if (has(listing.files, kIndexFile)) {
      // Only the shards the index names: a repo may also hold other checkpoints (consolidated.*).
      weights = index_shards(repo, hub.download_file(repo, listing.commit, kIndexFile));
      for (const auto& shard : weights)
        if (!has(listing.files, shard))
          throw Error(repo + ": " + kIndexFile + " names " + shard +
                      ", which the repository lacks");
    } else if (has(listing.files, "model.safetensors")) {
      weights = {"model.safetensors"};
    } else {
      std::copy_if(listing.files.begin(), listing.files.end(), std::back_inserter(weights),
                   is_top_level_safetensors);
    }
    for (const auto& file : weights) hub.download_file(repo, listing.commit, file);
  }
  return cache.snapshot_dir(listing.commit).string();
}

}  // namespace

std::string resolve_model(const std::string& spec, const ResolveOptions& options) {
  const ModelSpec parsed = parse_model_spec(spec);
  if (parsed.kind == ModelSpec::Kind::LocalPath) return parsed.path;  // no environment needed
  return resolve_model(spec, options, HubSettings::from_env());
}

std::string resolve_model(const std::string& spec, const ResolveOptions& options,
                          const HubSettings& settings) {
  const ModelSpec parsed = parse_model_spec(spec);
  if (parsed.kind == ModelSpec::Kind::LocalPath) return parsed.path;
  if (options.revision.empty())
    throw Error(spec + ": the revision is empty (give a branch, tag or commit hash)");
  if (options.revision.find("..") != std::string::npos || options.revision.front() == '/')
    throw Error(spec + ": refusing the revision '" + options.revision + "'");
  const RepoCache cache(settings.cache_dir, parsed.repo);
  switch (parsed.kind) {
    case ModelSpec::Kind::RepoFile:
      return resolve_file(settings, cache, options.revision, parsed.file);
    case ModelSpec::Kind::RepoQuant:
      return resolve_quant(settings, cache, options.revision, parsed.quant);
    case ModelSpec::Kind::Repo:
      return resolve_repo(settings, cache, options.revision, options.files);
    case ModelSpec::Kind::LocalPath:
      break;
  }
  return parsed.path;
}

}  // namespace tern::hub
