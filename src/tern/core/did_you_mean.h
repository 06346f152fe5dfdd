// "Did you mean …?": the closest of a set of names to a misspelled one, for error messages of
// request fields and command-line flags.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tern {

// The candidate nearest to `word` by edit distance (insertions, deletions, substitutions and
// swaps of two neighbours each cost 1), or "" when none is near enough to be a likely typo: at
// most 2 edits or one in five characters, and fewer than half of the longer name's characters.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'NAME'?)" for the closest candidate, or "" when there is none.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace tern
