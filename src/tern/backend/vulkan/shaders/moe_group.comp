#version 450
// A mixture of experts' step grouped by expert, for the matmul_id kernels: each expert's routes
// (a token's j-th choice, route = token · top_k + j) cut into tiles of up to 8, so that a tile
// reads its expert's rows once for all its routes, and an expert no token chose is not read at
// all. One workgroup. tiles[0] is the number of tiles, and tile i, at 1 + 10 i, is its expert,
// its count of routes, then the routes. Which tile a route lands in, and where in it, varies with
// the atomics' order; no value does: a route's sum in matmul.comp is the same whatever the other
// routes of its tile.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Ints experts; Ints tiles;
  uint routes; uint n; uint pad0; uint pad1;
} p;
#define MAX_EXPERTS 1024u  // vulkan_weights.h's kMaxExperts
#define TILE 8u
#define TILE_WORDS 10u
shared uint count[MAX_EXPERTS];  // routes of each expert, then each expert's next free slot
shared uint first_tile[MAX_EXPERTS];
void main() {
  const uint lid = gl_LocalInvocationID.x;
  for (uint e = lid; e < p.n; e += 64u) count[e] = 0u;
  barrier();
  for (uint r = lid; r < p.routes; r += 64u) atomicAdd(count[uint(p.experts.v[r])], 1u);
  barrier();
  if (lid == 0u) {
    uint tiles = 0u;
    for (uint e = 0u; e < p.n; ++e) {
      first_tile[e] = tiles;
      tiles += (count[e] + TILE - 1u) / TILE;
    }
    p.tiles.v[0] = int(tiles);
  }
  barrier();
  for (uint e = lid; e < p.n; e += 64u) {
    for (uint j = 0u; j * TILE < count[e]; ++j) {
      const uint at = 1u + (first_tile[e] + j) * TILE_WORDS;
      p.tiles.v[at] = int(e);
      p.tiles.v[at + 1u] = int(min(TILE, count[e] - j * TILE));
    }
    count[e] = 0u;
  }
  barrier();
  for (uint r = lid; r < p.routes; r += 64u) {
    const uint e = uint(p.experts.v[r]);
    const uint slot = atomicAdd(count[e], 1u);
    p.tiles.v[1u + (first_tile[e] + slot / TILE) * TILE_WORDS + 2u + slot % TILE] = int(r);
  }
}
