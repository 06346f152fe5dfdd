// The folders of src/tern/ depend one way: every `#include "tern/<folder>/…"` of src/tern/ and
// apps/ names the including file's own folder or one below it in the layers that open
// docs/ARCHITECTURE.md (its ```layers block). The test reads that block, so the page and the
// check cannot disagree, and a new folder fails until the page gives it a layer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace tern {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = TERN_SOURCE_DIR;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Folder → its layer (0 the lowest), from the first ```layers block of `page`: one line per
// layer, lowest first, its folders separated by spaces. Problems go to `errors`.
std::map<std::string, int> parse_layers(const std::string& page, std::vector<std::string>& errors) {
  std::map<std::string, int> layer_of;
  std::istringstream lines(page);
  std::string line;
  bool found = false;
  int layer = 0;
  while (std::getline(lines, line)) {
    if (!found) {
      found = line == "```layers";
      continue;
    }
    if (line.rfind("```", 0) == 0) break;
    std::istringstream words(line);
    std::string folder;
    bool any = false;
    while (words >> folder) {
      if (!layer_of.emplace(folder, layer).second)
        errors.push_back("the layers name '" + folder + "' twice");
      any = true;
    }
    if (any) ++layer;
  }
  if (!found) errors.push_back("docs/ARCHITECTURE.md has no ```layers block");
  return layer_of;
}

// The folder X of a line `#include "tern/X/…"`, else nullopt.
std::optional<std::string> included_folder(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line[i] != '#') return std::nullopt;
  i = line.find_first_not_of(" \t", i + 1);
  const std::string directive = "include";
  if (i == std::string::npos || line.compare(i, directive.size(), directive) != 0)
    return std::nullopt;
  i = line.find_first_not_of(" \t", i + directive.size());
  const std::string prefix = "\"tern/";
  if (i == std::string::npos || line.compare(i, prefix.size(), prefix) != 0) return std::nullopt;
  const size_t start = i + prefix.size();
  const size_t slash = line.find('/', start);
  if (slash == std::string::npos || line.find('"', start) < slash) return std::nullopt;
  return line.substr(start, slash - start);
}

// Every include of `text` (the file `name`, in `folder`) that is not of its own folder or a
// lower layer, as "name:line: …".
std::vector<std::string> upward_includes(const std::map<std::string, int>& layer_of,
                                         const std::string& folder, const std::string& name,
                                         const std::string& text) {
  std::vector<std::string> found;
  const int own = layer_of.at(folder);
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::optional<std::string> target = included_folder(line);
    if (!target || *target == folder) continue;
    const std::string where = name + ":" + std::to_string(number) + ": " + folder + " includes " +
                              *target + " (" + line + "), ";
    const auto it = layer_of.find(*target);
    if (it == layer_of.end())
      found.push_back(where + "a folder the layers do not name");
    else if (it->second == own)
      found.push_back(where + "a folder of its own layer");
    else if (it->second > own)
      found.push_back(where + "a folder above it");
  }
  return found;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& line : lines) s += line + "\n";
  return s;
}

TEST(IncludeOrder, FlagsAnIncludeFromAboveOrBeside) {
  std::vector<std::string> errors;
  const auto layers =
      parse_layers("intro\n```layers\ncore\nformats http\nmodels\n```\nmore", errors);
  ASSERT_TRUE(errors.empty()) << joined(errors);
  EXPECT_EQ(layers,
            (std::map<std::string, int>{{"core", 0}, {"formats", 1}, {"http", 1}, {"models", 2}}));
  const std::string text =
      "#include \"tern/core/error.h\"\n"
      "#include <vector>\n"
      "  #  include \"tern/models/decoder.h\"\n"
      "#include \"tern/http/event_server.h\"\n"
      "#include \"tern/formats/gguf.h\"\n"
      "#include \"tern/nowhere/x.h\"\n";
  const std::vector<std::string> found = upward_includes(layers, "formats", "a.cpp", text);
  ASSERT_EQ(found.size(), 3u) << joined(found);
  EXPECT_EQ(found[0].rfind("a.cpp:3: formats includes models", 0), 0u) << found[0];
  EXPECT_NE(found[0].find("above"), std::string::npos) << found[0];
  EXPECT_EQ(found[1].rfind("a.cpp:4: formats includes http", 0), 0u) << found[1];
  EXPECT_NE(found[1].find("own layer"), std::string::npos) << found[1];
  EXPECT_EQ(found[2].rfind("a.cpp:6: formats includes nowhere", 0), 0u) << found[2];
}

TEST(IncludeOrder, EveryFolderHasALayer) {
  std::vector<std::string> errors;
  const auto layers = parse_layers(read_text(kRoot / "docs" / "ARCHITECTURE.md"), errors);
  for (const auto& entry : fs::directory_iterator(kRoot / "src" / "tern")) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory())
      errors.push_back("src/tern/" + name + " is outside every folder, so it has no layer");
    else if (!layers.contains(name))
      errors.push_back("src/tern/" + name + "/ has no layer in docs/ARCHITECTURE.md");
  }
  for (const auto& [folder, layer] : layers) {
    const fs::path dir = folder == "apps" ? kRoot / "apps" : kRoot / "src" / "tern" / folder;
    if (!fs::is_directory(dir))
      errors.push_back("the layers name '" + folder + "', which is not a folder");
  }
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

TEST(IncludeOrder, EveryIncludePointsDown) {
  std::vector<std::string> errors;
  const auto layers = parse_layers(read_text(kRoot / "docs" / "ARCHITECTURE.md"), errors);
  ASSERT_TRUE(errors.empty()) << joined(errors);
  ASSERT_TRUE(layers.contains("apps")) << "the layers do not name apps";
  size_t files = 0;
  for (const fs::path& top : {kRoot / "src" / "tern", kRoot / "apps"}) {
    for (const auto& entry : fs::recursive_directory_iterator(top)) {
      if (!entry.is_regular_file()) continue;
      const fs::path relative = entry.path().lexically_relative(top);
      const std::string folder = top.filename() == "apps" ? "apps" : relative.begin()->string();
      if (!layers.contains(folder)) continue;  // EveryFolderHasALayer names it
      const std::string name = entry.path().lexically_relative(kRoot).string();
      for (std::string& e : upward_includes(layers, folder, name, read_text(entry.path())))
        errors.push_back(std::move(e));
      ++files;
    }
  }
  EXPECT_GT(files, 100u);
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

}  // namespace
}  // namespace tern
