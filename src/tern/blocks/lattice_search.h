// The grid searches behind the lattice types' quantizers (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS,
// IQ2_S, IQ1_S, IQ1_M): a group of 4 or 8 elements takes one entry of a grid, and most points
// of levels are not on it. For each grid, a map from a point (one level per element) to its
// entry, and for each point off the grid the entries nearest it (those at the few smallest
// distances), among which a fit picks the one of least weighted error: llama.cpp's
// iq2xs_init_impl / iq3xs_init_impl tables, built once, on first use, from iq*_grids.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tern {

enum class LatticeGrid { Iq3Xxs, Iq3S, Iq2Xxs, Iq2Xs, Iq2S, Iq1 };

class Lattice {
 public:
  // Built on the first call for `grid` (thread-safe), then shared.
  static const Lattice& of(LatticeGrid grid);

  int group() const { return group_; }    // elements per entry: 4 (IQ3) or 8
  int levels() const { return levels_; }  // levels an element takes: 8 (IQ3) or 3
  int entries() const { return static_cast<int>(entry_levels_.size()) / group_; }
  // The level (0 .. levels − 1) of element e of entry i.
  int level(int entry, int e) const {
    return entry_levels_[static_cast<size_t>(entry * group_ + e)];
  }
  // The grid's element value at level l (iq*_grids.h's byte: IQ3_XXS's 4 … 62, IQ2's 8, 25,
  // 43, IQ1's −1, 0, 1), ascending in l.
  int value(int l) const { return values_[static_cast<size_t>(l)]; }

  // levels: [group] one level per element. The entry with exactly these levels, or −1.
  int entry_of(const int* levels) const;
  // The entries nearest a point off the grid (empty for one on it).
  std::span<const uint16_t> neighbours(const int* levels) const;

  // x, w: [group]; value: [levels()], the value each level stands for. The entry minimising
  // Σ w (x − scale · value[level])²: the point of `levels` itself when on the grid, else the
  // best of its neighbours.
  int best_entry(const int* levels, const float* x, const float* w, float scale,
                 const float* value) const;

 private:
  Lattice(LatticeGrid grid);
  uint32_t key(const int* levels) const;

  int group_ = 0, levels_ = 0, bits_ = 0;
  std::vector<int> values_;            // [levels]
  std::vector<uint8_t> entry_levels_;  // [entries × group]
  // Per key (the levels packed `bits_` to an element): ≥ 0 the entry; < 0 −(1 + offset) of the
  // point's neighbour list in neighbours_ (its count, then the entries).
  std::vector<int32_t> map_;
  std::vector<uint16_t> neighbours_;
};

}  // namespace tern
