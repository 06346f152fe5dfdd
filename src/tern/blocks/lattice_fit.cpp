// The lattice types' fits (lattice_fit.h): the signed ones (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS,
// IQ2_S), then the 1-bit ones (IQ1_S, IQ1_M).
#include "tern/blocks/lattice_fit.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/lattice_search.h"
#include "tern/blocks/quantize_row_impl.h"
#include "tern/core/half.h"

namespace tern {
namespace {

// Element e of a super-block decodes as d · (2 ls + 1) · m · ±1, m = grid value · factor (the
// format's constant folded in, so that m is in units of the sub-block's scale).
struct LatticeSpec {
  LatticeGrid grid;
  float factor;
  int sub;             // elements under one 4-bit scale ls: 32, or 16 (IQ2_XS, IQ2_S)
  bool even_signs;     // a group of 8 stores 7 sign bits, the eighth their parity
  float sigma_factor;  // σ² = sigma_factor · Σ x² / 256 (llama.cpp's, per type)
  int tries;           // candidate inverse scales (top + t · step) / max, |t| ≤ tries
  float step;
};

LatticeSpec spec_of(DType t) {
  switch (t) {
    case DType::IQ3_XXS:
      return {LatticeGrid::Iq3Xxs, 0.25f, 32, true, 2.0f, 15, 0.2f};
    case DType::IQ3_S:
      return {LatticeGrid::Iq3S, 1.0f, 32, false, 2.0f, 9, 0.2f};
    case DType::IQ2_XXS:
      return {LatticeGrid::Iq2Xxs, 0.125f, 32, true, 1.0f, 9, 0.1f};
    case DType::IQ2_XS:
      return {LatticeGrid::Iq2Xs, 0.125f, 16, true, 1.0f, 9, 0.1f};
    default:  // IQ2_S
      return {LatticeGrid::Iq2S, 0.125f, 16, false, 2.0f, 9, 0.1f};
  }
}

constexpr int kMaxSubs = kQKK / 16;

// The magnitude of each level and the level nearest a value.
struct Levels {
  float m[8] = {};
  int n = 0;

  Levels(const Lattice& lattice, float factor) : n(lattice.levels()) {
    for (int l = 0; l < n; ++l) m[l] = static_cast<float>(lattice.value(l)) * factor;
  }
  int nearest(float v) const {
    int l = 0;
    while (l + 1 < n && v > 0.5f * (m[l] + m[l + 1])) ++l;
    return l;
  }
};

// Σ w a m and Σ w m² of a sub-block's entries: its least-squares scale is qx / qq, and its
// error under a scale s is Σ w a² − 2 s qx + s² qq.
struct Sums {
  float qx = 0.0f, qq = 0.0f;
  float error_change(float s) const { return s * (s * qq - 2.0f * qx); }
};

// The entry of each group of a sub-block (a, w: [n]) under `scale`: its point of nearest
// levels when on the grid, else the nearest points' entry of least weighted error.
Sums assign(const Lattice& lattice, const Levels& lv, const float* a, const float* w, int n,
            float scale, int* entry) {
  const int g = lattice.group();
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  int levels[8];
  Sums s;
  for (int k = 0; k < n / g; ++k) {
    const float* ak = a + g * k;
    const float* wk = w + g * k;
    for (int e = 0; e < g; ++e) levels[e] = lv.nearest(ak[e] * inv);
    entry[k] = lattice.best_entry(levels, ak, wk, scale, lv.m);
    for (int e = 0; e < g; ++e) {
      const float m = lv.m[lattice.level(entry[k], e)];
      s.qx += wk[e] * ak[e] * m;
      s.qq += wk[e] * m * m;
    }
  }
  return s;
}

// A sub-block's scale (≥ 0) and entries: the best of the candidate scales' least-squares
// refits, its entries chosen again under the refitted scale.
float fit_sub_block(const LatticeSpec& spec, const Lattice& lattice, const Levels& lv,
                    const float* a, const float* w, int* entry) {
  const int n = spec.sub;
  float max = 0.0f;
  for (int e = 0; e < n; ++e) max = std::max(max, a[e]);
  if (!(max > 1e-15f)) {
    assign(lattice, lv, a, w, n, 0.0f, entry);
    return 0.0f;
  }
  int candidate[kQK / 4];
  float best = 0.0f, scale = 0.0f;
  const float top = lv.m[lv.n - 1];
  auto consider = [&](float s) {
    const Sums sums = assign(lattice, lv, a, w, n, s, candidate);
    // The error falls by qx² / qq at the least-squares scale.
    if (sums.qq > 0.0f && sums.qx > 0.0f && sums.qx * sums.qx > best * sums.qq) {
      best = sums.qx * sums.qx / sums.qq;
      scale = sums.qx / sums.qq;
      std::copy(candidate, candidate + n / lattice.group(), entry);
    }
  };
  for (int t = -spec.tries; t <= spec.tries; ++t)
    consider(max / (top + static_cast<float>(t) * spec.step));
  if (scale > 0.0f)
    consider(scale);
  else
    assign(lattice, lv, a, w, n, 0.0f, entry);
  return scale;
}

// How the super-block scale d is searched: the largest sub-block scale on the top ls, times
// 1 + step · mult for each mult (llama.cpp fudges it by a fixed factor per type; here the best
// of several, by the error they give).
struct ScaleSearch {
  int top_ls;
  int lowest_mult, highest_mult;
  float step;
};

// The search both families share. Under each d, each sub-block j takes the ls near its scale
// (±1) whose entries under d · (2 ls + 1) change the error least: `assign(j, s)` fits sub-block
// j's entries under s and returns that change, `keep(j, code)` copies them into a code. *out
// takes the best code; what the search does not choose (the signs) passes through it.
template <typename Code, typename Assign, typename Keep>
void search_super_block_scale(const ScaleSearch& search, const float* scales, int subs, Code* out,
                              Assign assign, Keep keep) {
  float max_scale = 0.0f;
  for (int j = 0; j < subs; ++j) max_scale = std::max(max_scale, scales[j]);
  if (!(max_scale > 0.0f)) {
    out->d16 = 0;
    std::fill(out->ls, out->ls + subs, 0);
    return;
  }
  const auto top = static_cast<float>(2 * search.top_ls + 1);
  float best_total = INFINITY;
  Code trial = *out;
  for (int mult = search.lowest_mult; mult <= search.highest_mult; ++mult) {
    const float d =
        f16_to_f32(f32_to_f16(max_scale / top * (1.0f + search.step * static_cast<float>(mult))));
    if (!(d > 0.0f)) continue;
    trial.d16 = f32_to_f16(d);
    float total = 0.0f;
    for (int j = 0; j < subs; ++j) {
      const int l0 = clamp_int(nearest_int(0.5f * (scales[j] / d - 1.0f)), 0, search.top_ls);
      float best = INFINITY;
      for (int ls = std::max(l0 - 1, 0); ls <= std::min(l0 + 1, search.top_ls); ++ls) {
        const float change = assign(j, d * static_cast<float>(2 * ls + 1));
        if (change < best) {
          best = change;
          trial.ls[j] = ls;
          keep(j, trial);
        }
      }
      total += best;
    }
    if (total < best_total) {
      best_total = total;
      *out = trial;
    }
  }
}

// A super-block's codes before packing.
struct LatticeCode {
  uint16_t d16 = 0;
  int ls[kMaxSubs] = {};  // 0..15
  int entry[kQKK / 4] = {};
  uint8_t signs[kQKK / 8] = {};  // bit e of byte l: element 8l + e negative
};

void fit_super_block(const LatticeSpec& spec, const float* x, const float* importance, DType dtype,
                     LatticeCode* out) {
  const Lattice& lattice = Lattice::of(spec.grid);
  const Levels lv(lattice, spec.factor);
  const int g = lattice.group(), subs = kQKK / spec.sub, per_sub = spec.sub / g;
  float sumx2 = 0.0f;
  for (int e = 0; e < kQKK; ++e) sumx2 += x[e] * x[e];
  const float sigma2 = spec.sigma_factor * sumx2 / kQKK;
  float w[kQKK], a[kQKK];
  for (int e = 0; e < kQKK; ++e) {
    if (importance != nullptr)
      w[e] = importance[e] * std::sqrt(sigma2 + x[e] * x[e]);
    else if (dtype == DType::IQ3_XXS || dtype == DType::IQ3_S)
      w[e] = x[e] * x[e];
    else if (dtype == DType::IQ2_S)
      w[e] = 0.25f * sigma2 + x[e] * x[e];
    else
      w[e] = std::sqrt(sigma2 + x[e] * x[e]);
  }
  // The magnitudes to fit, signs apart. Where only an even count of a group of 8 may be
  // negative, an odd count leaves the element that costs least (w x²) with the wrong sign: it
  // is fitted as −|x|, so that it takes the smallest magnitude.
  for (int l = 0; l < kQKK / 8; ++l) {
    uint8_t s = 0;
    for (int e = 0; e < 8; ++e) {
      a[8 * l + e] = std::fabs(x[8 * l + e]);
      if (x[8 * l + e] < 0.0f) s |= static_cast<uint8_t>(1u << e);
    }
    if (spec.even_signs && std::popcount(s) % 2 != 0) {
      int cheapest = 0;
      for (int e = 1; e < 8; ++e)
        if (w[8 * l + e] * a[8 * l + e] * a[8 * l + e] <
            w[8 * l + cheapest] * a[8 * l + cheapest] * a[8 * l + cheapest])
          cheapest = e;
      a[8 * l + cheapest] = -a[8 * l + cheapest];
      s ^= static_cast<uint8_t>(1u << cheapest);
    }
    out->signs[l] = s;
  }
  float scales[kMaxSubs];
  for (int j = 0; j < subs; ++j)
    scales[j] = fit_sub_block(spec, lattice, lv, a + spec.sub * j, w + spec.sub * j,
                              out->entry + per_sub * j);
  int entry[kQK / 4];
  search_super_block_scale(
      ScaleSearch{15, -2, 4, 0.01f}, scales, subs, out,
      [&](int j, float s) {
        return assign(lattice, lv, a + spec.sub * j, w + spec.sub * j, spec.sub, s, entry)
            .error_change(s);
      },
      [&](int j, LatticeCode& code) {
        std::copy(entry, entry + per_sub, code.entry + per_sub * j);
      });
}

void pack(DType dtype, const LatticeCode& c, void* y) {
  switch (dtype) {
    case DType::IQ3_XXS: {
      auto& b = *static_cast<BlockIq3Xxs*>(y);
      b.d = c.d16;
      for (int j = 0; j < kQKK / kQK; ++j) {
        uint32_t word = static_cast<uint32_t>(c.ls[j]) << 28;
        for (int l = 0; l < 4; ++l)
          word |= static_cast<uint32_t>(c.signs[4 * j + l] & 127) << (7 * l);
        std::memcpy(b.qs + kQKK / 4 + 4 * j, &word, sizeof word);
        for (int m = 0; m < 8; ++m) b.qs[8 * j + m] = static_cast<uint8_t>(c.entry[8 * j + m]);
      }
      return;
    }
    case DType::IQ3_S: {
      auto& b = *static_cast<BlockIq3S*>(y);
      std::memset(&b, 0, sizeof b);
      b.d = c.d16;
      for (int j = 0; j < kQKK / kQK; ++j) {
        for (int m = 0; m < 8; ++m) {
          b.qs[8 * j + m] = static_cast<uint8_t>(c.entry[8 * j + m] & 255);
          b.qh[j] |= static_cast<uint8_t>((c.entry[8 * j + m] >> 8) << m);
        }
        b.scales[j / 2] |= static_cast<uint8_t>(c.ls[j] << (4 * (j % 2)));
      }
      std::memcpy(b.signs, c.signs, sizeof b.signs);
      return;
    }
    case DType::IQ2_XXS: {
      auto& b = *static_cast<BlockIq2Xxs*>(y);
      b.d = c.d16;
      for (int j = 0; j < kQKK / kQK; ++j) {
        uint32_t word = static_cast<uint32_t>(c.ls[j]) << 28;
        for (int l = 0; l < 4; ++l) {
          word |= static_cast<uint32_t>(c.signs[4 * j + l] & 127) << (7 * l);
          b.qs[8 * j + l] = static_cast<uint8_t>(c.entry[4 * j + l]);
        }
        std::memcpy(b.qs + 8 * j + 4, &word, sizeof word);
      }
      return;
    }
    case DType::IQ2_XS: {
      auto& b = *static_cast<BlockIq2Xs*>(y);
      b.d = c.d16;
      for (int j = 0; j < kQKK / kQK; ++j) {
        for (int l = 0; l < 4; ++l)
          b.qs[4 * j + l] =
              static_cast<uint16_t>(c.entry[4 * j + l] | (c.signs[4 * j + l] & 127) << 9);
        b.scales[j] = static_cast<uint8_t>(c.ls[2 * j] | c.ls[2 * j + 1] << 4);
      }
      return;
    }
    default: {  // IQ2_S
      auto& b = *static_cast<BlockIq2S*>(y);
      std::memset(&b, 0, sizeof b);
      b.d = c.d16;
      for (int j = 0; j < kQKK / kQK; ++j) {
        for (int l = 0; l < 4; ++l) {
          b.qs[4 * j + l] = static_cast<uint8_t>(c.entry[4 * j + l] & 255);
          b.qh[j] |= static_cast<uint8_t>((c.entry[4 * j + l] >> 8) << (2 * l));
          b.qs[kQKK / 8 + 4 * j + l] = c.signs[4 * j + l];
        }
        b.scales[j] = static_cast<uint8_t>(c.ls[2 * j] | c.ls[2 * j + 1] << 4);
      }
      return;
    }
  }
}

// The 1-bit types: element e of group l (8 elements) decodes as d · (2 ls + 1) · (g_e + δ_l),
// g_e in {−1, 0, 1} from the grid entry, δ_l = ±1/8 the group's shift; IQ1_S has one ls and one
// shift per sub-block of 32, IQ1_M one ls per 16 and a shift per group.
struct Iq1Spec {
  int sub;      // elements under one ls: 32 (IQ1_S) or 16 (IQ1_M)
  bool shared;  // one shift for the sub-block's groups (IQ1_S)
};

constexpr float kIq1Delta = 0.125f;

// The values of the three levels under the shift sign (+1 or −1).
struct Iq1Values {
  float v[3];
  explicit Iq1Values(int shift)
      : v{-1.0f + kIq1Delta * static_cast<float>(shift), kIq1Delta * static_cast<float>(shift),
          1.0f + kIq1Delta * static_cast<float>(shift)} {}
};

// Group l's (x, w: [8]) entry under `scale` and shift: its point of nearest levels when on the
// grid, else the best of that point's neighbours.
int iq1_entry(const Lattice& lattice, const float* x, const float* w, float scale, int shift,
              Sums* sums) {
  const Iq1Values values(shift);
  int levels[8];
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int e = 0; e < 8; ++e) {
    const float t = x[e] * inv - values.v[1];  // the level's offset from 0, less the shift
    levels[e] = t < -0.5f ? 0 : t > 0.5f ? 2 : 1;
  }
  const int entry = lattice.best_entry(levels, x, w, scale, values.v);
  for (int e = 0; e < 8; ++e) {
    const float v = values.v[lattice.level(entry, e)];
    sums->qx += w[e] * x[e] * v;
    sums->qq += w[e] * v * v;
  }
  return entry;
}

// A sub-block's entries and shifts under `scale`, each group's shift (or the sub-block's one)
// the better of the two.
Sums iq1_assign(const Lattice& lattice, const Iq1Spec& spec, const float* x, const float* w,
                float scale, int* entry, int* shift) {
  const int groups = spec.sub / 8;
  Sums total;
  if (spec.shared) {
    float best = INFINITY;
    for (int sh : {1, -1}) {
      Sums sums;
      int e[4];
      for (int l = 0; l < groups; ++l)
        e[l] = iq1_entry(lattice, x + 8 * l, w + 8 * l, scale, sh, &sums);
      if (sums.error_change(scale) < best) {
        best = sums.error_change(scale);
        total = sums;
        std::copy(e, e + groups, entry);
        std::fill(shift, shift + groups, sh);
      }
    }
    return total;
  }
  for (int l = 0; l < groups; ++l) {
    float best = INFINITY;
    for (int sh : {1, -1}) {
      Sums sums;
      const int e = iq1_entry(lattice, x + 8 * l, w + 8 * l, scale, sh, &sums);
      if (sums.error_change(scale) < best) {
        best = sums.error_change(scale);
        entry[l] = e;
        shift[l] = sh;
      }
    }
    // The chosen group's sums, again (cheap next to the search).
    iq1_entry(lattice, x + 8 * l, w + 8 * l, scale, shift[l], &total);
  }
  return total;
}

// A sub-block's scale, entries and shifts: the exact best split of its sorted values into the
// three levels for each pattern of shifts (llama.cpp's exhaustive search: with 3 levels the
// levels of the optimum are contiguous runs of the sorted values), then the entries on the grid
// nearest those levels, the scale refitted to them.
float fit_iq1_sub_block(const Lattice& lattice, const Iq1Spec& spec, const float* x, const float* w,
                        int* entry, int* shift) {
  const int n = spec.sub, groups = n / 8;
  float max = 0.0f;
  for (int e = 0; e < n; ++e) max = std::max(max, std::fabs(x[e]));
  if (!(max > 1e-12f)) {
    iq1_assign(lattice, spec, x, w, 0.0f, entry, shift);
    return 0.0f;
  }
  int order[kQK];
  for (int e = 0; e < n; ++e) order[e] = e;
  std::sort(order, order + n, [x](int a, int b) { return x[a] < x[b]; });
  // Prefix sums over the sorted order, per group: sx[l][j] = Σ w x, sw[l][j] = Σ w over the first
  // j sorted elements that are in group l.
  float sx[4][kQK + 1], sw[4][kQK + 1];
  for (int l = 0; l < groups; ++l) sx[l][0] = sw[l][0] = 0.0f;
  for (int j = 0; j < n; ++j) {
    const int e = order[j];
    for (int l = 0; l < groups; ++l) {
      const bool in = e / 8 == l;
      sx[l][j + 1] = sx[l][j] + (in ? w[e] * x[e] : 0.0f);
      sw[l][j + 1] = sw[l][j] + (in ? w[e] : 0.0f);
    }
  }
  const int patterns = spec.shared ? 2 : 1 << groups;
  float best = 0.0f, scale = 0.0f;
  int best_i1 = 0, best_i2 = 0, best_pattern = 0;
  for (int i1 = 0; i1 <= n; ++i1) {
    for (int i2 = i1; i2 <= n; ++i2) {
      for (int p = 0; p < patterns; ++p) {
        float qx = 0.0f, qq = 0.0f;
        for (int l = 0; l < groups; ++l) {
          const int sh = spec.shared ? (p == 0 ? 1 : -1) : ((p >> l) & 1 ? -1 : 1);
          const Iq1Values v(sh);
          const float rx[3] = {sx[l][i1], sx[l][i2] - sx[l][i1], sx[l][n] - sx[l][i2]};
          const float rw[3] = {sw[l][i1], sw[l][i2] - sw[l][i1], sw[l][n] - sw[l][i2]};
          for (int k = 0; k < 3; ++k) {
            qx += rx[k] * v.v[k];
            qq += rw[k] * v.v[k] * v.v[k];
          }
        }
        // A negative least-squares scale is the mirrored levels with the shifts negated, which
        // the patterns also hold: only positive ones are taken.
        if (qq > 0.0f && qx > 0.0f && qx * qx > best * qq) {
          best = qx * qx / qq;
          scale = qx / qq;
          best_i1 = i1;
          best_i2 = i2;
          best_pattern = p;
        }
      }
    }
  }
  if (!(scale > 0.0f)) {
    iq1_assign(lattice, spec, x, w, 0.0f, entry, shift);
    return 0.0f;
  }
  int levels[kQK];
  for (int j = 0; j < n; ++j) levels[order[j]] = j < best_i1 ? 0 : j < best_i2 ? 1 : 2;
  Sums sums;
  for (int l = 0; l < groups; ++l) {
    shift[l] = spec.shared ? (best_pattern == 0 ? 1 : -1) : ((best_pattern >> l) & 1 ? -1 : 1);
    const Iq1Values v(shift[l]);
    entry[l] = lattice.best_entry(levels + 8 * l, x + 8 * l, w + 8 * l, scale, v.v);
    for (int e = 0; e < 8; ++e) {
      const float q = v.v[lattice.level(entry[l], e)];
      sums.qx += w[8 * l + e] * x[8 * l + e] * q;
      sums.qq += w[8 * l + e] * q * q;
    }
  }
  if (sums.qq > 0.0f && sums.qx > 0.0f) scale = sums.qx / sums.qq;
  return scale;
}

struct Iq1Code {
  uint16_t d16 = 0;
  int ls[kMaxSubs] = {};  // 0..7
  int entry[kQKK / 8] = {};
  int shift[kQKK / 8] = {};  // ±1
};

void fit_iq1_super_block(DType dtype, const float* x, const float* importance, Iq1Code* out) {
  const Lattice& lattice = Lattice::of(LatticeGrid::Iq1);
  const Iq1Spec spec{dtype == DType::IQ1_S ? 32 : 16, dtype == DType::IQ1_S};
  const int subs = kQKK / spec.sub, per_sub = spec.sub / 8;
  float sumx2 = 0.0f;
  for (int e = 0; e < kQKK; ++e) sumx2 += x[e] * x[e];
  const float sigma2 = 2.0f * sumx2 / kQKK;
  float w[kQKK];
  for (int e = 0; e < kQKK; ++e)
    w[e] = importance != nullptr   ? importance[e] * std::sqrt(sigma2 + x[e] * x[e])
           : dtype == DType::IQ1_M ? x[e] * x[e]
                                   : std::sqrt(sigma2 + x[e] * x[e]);
  float scales[kMaxSubs];
  for (int j = 0; j < subs; ++j)
    scales[j] = fit_iq1_sub_block(lattice, spec, x + spec.sub * j, w + spec.sub * j,
                                  out->entry + per_sub * j, out->shift + per_sub * j);
  int entry[4], shift[4];
  search_super_block_scale(
      ScaleSearch{7, -2, 6, 0.02f}, scales, subs, out,
      [&](int j, float s) {
        return iq1_assign(lattice, spec, x + spec.sub * j, w + spec.sub * j, s, entry, shift)
            .error_change(s);
      },
      [&](int j, Iq1Code& code) {
        std::copy(entry, entry + per_sub, code.entry + per_sub * j);
        std::copy(shift, shift + per_sub, code.shift + per_sub * j);
      });
}

void pack_iq1(DType dtype, const Iq1Code& c, void* y) {
  if (dtype == DType::IQ1_S) {
    auto& b = *static_cast<BlockIq1S*>(y);
    b.d = c.d16;
    for (int j = 0; j < kQKK / kQK; ++j) {
      uint32_t h = static_cast<uint32_t>(c.ls[j]) << 12 | (c.shift[4 * j] < 0 ? 0x8000u : 0u);
      for (int l = 0; l < 4; ++l) {
        b.qs[4 * j + l] = static_cast<uint8_t>(c.entry[4 * j + l] & 255);
        h |= static_cast<uint32_t>(c.entry[4 * j + l] >> 8) << (3 * l);
      }
      b.qh[j] = static_cast<uint16_t>(h);
    }
    return;
  }
  auto& b = *static_cast<BlockIq1M*>(y);
  std::memset(&b, 0, sizeof b);
  uint16_t words[4] = {};
  for (int j = 0; j < kQKK / kQK; ++j) {
    for (int l = 0; l < 4; ++l) {
      b.qs[4 * j + l] = static_cast<uint8_t>(c.entry[4 * j + l] & 255);
      const int nibble = (c.entry[4 * j + l] >> 8) | (c.shift[4 * j + l] < 0 ? 8 : 0);
      b.qh[2 * j + l / 2] |= static_cast<uint8_t>(nibble << (4 * (l % 2)));
    }
    for (int h = 0; h < 2; ++h)
      words[j / 2] |= static_cast<uint16_t>(c.ls[2 * j + h] << (6 * (j % 2) + 3 * h));
  }
  for (int n = 0; n < 4; ++n) {
    words[n] |= static_cast<uint16_t>(((c.d16 >> (4 * n)) & 0xf) << 12);
    b.scales[2 * n] = static_cast<uint8_t>(words[n] & 255);
    b.scales[2 * n + 1] = static_cast<uint8_t>(words[n] >> 8);
  }
}

}  // namespace

bool has_lattice_fit(DType dtype) {
  return dtype == DType::IQ3_XXS || dtype == DType::IQ3_S || dtype == DType::IQ2_XXS ||
         dtype == DType::IQ2_XS || dtype == DType::IQ2_S || dtype == DType::IQ1_S ||
         dtype == DType::IQ1_M;
}

void fit_lattice_row(DType dtype, const float* x, void* y, int64_t k, const float* importance) {
  const auto block_bytes = static_cast<size_t>(*dtype_bytes(dtype, kQKK));
  if (dtype == DType::IQ1_S || dtype == DType::IQ1_M) {
    Iq1Code code;
    for (int64_t i = 0; i < k / kQKK; ++i) {
      fit_iq1_super_block(dtype, x + kQKK * i,
                          importance != nullptr ? importance + kQKK * i : nullptr, &code);
      pack_iq1(dtype, code, static_cast<uint8_t*>(y) + static_cast<size_t>(i) * block_bytes);
    }
    return;
  }
  const LatticeSpec spec = spec_of(dtype);
  LatticeCode code;
  for (int64_t i = 0; i < k / kQKK; ++i) {
    fit_super_block(spec, x + kQKK * i, importance != nullptr ? importance + kQKK * i : nullptr,
                    dtype, &code);
    pack(dtype, code, static_cast<uint8_t*>(y) + static_cast<size_t>(i) * block_bytes);
  }
}

}  // namespace tern
