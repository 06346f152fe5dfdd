// Reads llama.cpp's tokenizer test vectors: NAME.inp holds the strings separated by
// "\n__ggml_vocab_test__\n" (the file ends with one), NAME.out one line of ids per string.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/mapped_file.h"

namespace tern::testing {

struct VocabVector {
  std::string text;
  std::vector<int32_t> ids;
};

inline std::vector<VocabVector> read_llama_cpp_vectors(const std::string& inp_path,
                                                       const std::string& out_path) {
  const std::string inp = read_text_file(inp_path);
  const std::string out = read_text_file(out_path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabVector> vectors;
  size_t pos = 0;
  while (pos < inp.size()) {
    const size_t end = inp.find(sep, pos);
    if (end == std::string::npos) throw Error(inp_path + ": text after the last separator");
    vectors.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    if (i >= vectors.size()) throw Error(out_path + ": more lines than strings");
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) vectors[i].ids.push_back(id);
    ++i;
  }
  if (i != vectors.size()) throw Error(out_path + ": fewer lines than strings");
  return vectors;
}

}  // namespace tern::testing
