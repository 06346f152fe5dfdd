#include "tern/core/did_you_mean.h"

#include <algorithm>
#include <cstdint>

namespace tern {
namespace {

// Optimal string alignment distance: Levenshtein plus the swap of two neighbouring characters
// ("tempreature"), the commonest typo.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    // Two edits, or one in five characters of a long name ("--max-model-length").
    const size_t longer = std::max(word.size(), c.size());
    if (d < best_distance && 2 * d < longer && (d <= 2 || d <= longer / 5)) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string name = closest_name(word, candidates);
  return name.empty() ? std::string() : " (did you mean '" + name + "'?)";
}

}  // namespace tern
