// Lattice (lattice_search.h): the point → entry map and the neighbour lists of each grid.
#include "tern/blocks/lattice_search.h"

#include <algorithm>
#include <cfloat>

#include "tern/blocks/iq1_grids.h"
#include "tern/blocks/iq2_grids.h"
#include "tern/blocks/iq3_grids.h"

namespace tern {
namespace {

struct GridSource {
  int group;
  std::span<const uint8_t> bytes;  // [entries × group], element e of entry i at i · group + e
  // How many of the smallest distances from a point off the grid give its neighbours:
  // llama.cpp's choices (a grid of few entries needs more to find a good one).
  int distances;
};

template <class Word, size_t N>
std::span<const uint8_t> bytes_of(const Word (&grid)[N]) {
  return {reinterpret_cast<const uint8_t*>(grid), sizeof grid};
}

GridSource source(LatticeGrid grid) {
  switch (grid) {
    case LatticeGrid::Iq3Xxs:
      return {4, bytes_of(kIq3XxsGrid), 2};
    case LatticeGrid::Iq3S:
      return {4, bytes_of(kIq3SGrid), 3};
    case LatticeGrid::Iq2Xxs:
      return {8, bytes_of(kIq2XxsGrid), 2};
    case LatticeGrid::Iq2Xs:
      return {8, bytes_of(kIq2XsGrid), 2};
    case LatticeGrid::Iq2S:
      return {8, bytes_of(kIq2SGrid), 1};
    case LatticeGrid::Iq1:
      return {
          8,
          {reinterpret_cast<const uint8_t*>(kIq1Grid.data()), kIq1Grid.size() * sizeof(uint64_t)},
          3};
  }
  return {};
}

}  // namespace

const Lattice& Lattice::of(LatticeGrid grid) {
  // One per grid, each built on first use (C++ guarantees a local static's initialisation is
  // done once, the other threads waiting).
  switch (grid) {
    case LatticeGrid::Iq3Xxs: {
      static const Lattice l(LatticeGrid::Iq3Xxs);
      return l;
    }
    case LatticeGrid::Iq3S: {
      static const Lattice l(LatticeGrid::Iq3S);
      return l;
    }
    case LatticeGrid::Iq2Xxs: {
      static const Lattice l(LatticeGrid::Iq2Xxs);
      return l;
    }
    case LatticeGrid::Iq2Xs: {
      static const Lattice l(LatticeGrid::Iq2Xs);
      return l;
    }
    case LatticeGrid::Iq2S: {
      static const Lattice l(LatticeGrid::Iq2S);
      return l;
    }
    case LatticeGrid::Iq1:
      break;
  }
  static const Lattice l(LatticeGrid::Iq1);
  return l;
}

Lattice::Lattice(LatticeGrid grid) {
  const GridSource src = source(grid);
  group_ = src.group;
  // The levels are the grid's distinct element values in order (as signed bytes: IQ1's are
  // −1, 0, 1).
  std::vector<int>& values = values_;
  for (uint8_t b : src.bytes) values.push_back(static_cast<int8_t>(b));
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  levels_ = static_cast<int>(values.size());
  bits_ = levels_ > 4 ? 3 : 2;
  entry_levels_.resize(src.bytes.size());
  for (size_t i = 0; i < src.bytes.size(); ++i)
    entry_levels_[i] = static_cast<uint8_t>(
        std::lower_bound(values.begin(), values.end(), static_cast<int8_t>(src.bytes[i])) -
        values.begin());
  const int n_entries = entries();

  map_.assign(size_t{1} << (bits_ * group_), -1);
  int point[8];
  for (int i = 0; i < n_entries; ++i) {
    for (int e = 0; e < group_; ++e) point[e] = level(i, e);
    map_[key(point)] = i;
  }
  // Every point of levels (levels^group of them) off the grid gets the entries at its
  // `distances` smallest squared distances, nearest first (ties by entry).
  int total = 1;
  for (int e = 0; e < group_; ++e) total *= levels_;
  std::vector<int> dist(static_cast<size_t>(n_entries)), order(static_cast<size_t>(n_entries));
  for (int p = 0; p < total; ++p) {
    for (int e = 0, rest = p; e < group_; ++e, rest /= levels_) point[e] = rest % levels_;
    const uint32_t k = key(point);
    if (map_[k] >= 0) continue;
    for (int i = 0; i < n_entries; ++i) {
      int d2 = 0;
      for (int e = 0; e < group_; ++e) d2 += (level(i, e) - point[e]) * (level(i, e) - point[e]);
      dist[static_cast<size_t>(i)] = d2;
      order[static_cast<size_t>(i)] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return dist[static_cast<size_t>(a)] < dist[static_cast<size_t>(b)];
    });
    const size_t start = neighbours_.size();
    neighbours_.push_back(0);
    int seen = 0, last = -1;
    for (int i : order) {
      const int d = dist[static_cast<size_t>(i)];
      if (d != last) {
        if (seen == src.distances) break;
        ++seen;
        last = d;
      }
      neighbours_.push_back(static_cast<uint16_t>(i));
    }
    neighbours_[start] = static_cast<uint16_t>(neighbours_.size() - start - 1);
    map_[k] = -1 - static_cast<int32_t>(start);
  }
}

uint32_t Lattice::key(const int* levels) const {
  uint32_t k = 0;
  for (int e = 0; e < group_; ++e) k |= static_cast<uint32_t>(levels[e]) << (bits_ * e);
  return k;
}

int Lattice::entry_of(const int* levels) const {
  const int32_t m = map_[key(levels)];
  return m >= 0 ? m : -1;
}

std::span<const uint16_t> Lattice::neighbours(const int* levels) const {
  const int32_t m = map_[key(levels)];
  if (m >= 0) return {};
  const uint16_t* list = neighbours_.data() + (-1 - m);
  return {list + 1, list[0]};
}

int Lattice::best_entry(const int* levels, const float* x, const float* w, float scale,
                        const float* value) const {
  const int32_t m = map_[key(levels)];
  if (m >= 0) return m;
  const uint16_t* list = neighbours_.data() + (-1 - m);
  float best = FLT_MAX;
  int best_entry = list[1];
  for (int n = 1; n <= list[0]; ++n) {
    float err = 0.0f;
    for (int e = 0; e < group_; ++e) {
      const float r = x[e] - scale * value[level(list[n], e)];
      err += w[e] * r * r;
    }
    if (err < best) {
      best = err;
      best_entry = list[n];
    }
  }
  return best_entry;
}

}  // namespace tern
