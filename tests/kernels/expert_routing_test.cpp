// The router's top-k against the definition (softmax, the k largest, ties to the lower index,
// renormalised or not) and the grouping of a step's tokens by expert.
#include "tern/kernels/cpu/ops/expert_routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tern::cpu {
namespace {

TEST(ExpertRouting, TopKOfTheSoftmaxWithTiesToTheLowerIndex) {
  // Token 0: experts 3 and 1 lead; token 1: 0, 2 and 4 tie, so 0 and 2 win.
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 3.0f, 0.0f,  //
                               1.0f, 0.0f, 1.0f,  0.0f, 1.0f};
  std::vector<int32_t> experts(4);
  std::vector<float> weights(4);
  route_top_k(logits.data(), 2, 5, 2, false, experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{3, 1, 0, 2}));
  double sum = 0;
  for (double l : {0.5, 2.0, -1.0, 3.0, 0.0}) sum += std::exp(l - 3.0);
  EXPECT_NEAR(weights[0], 1.0 / sum, 1e-6);
  EXPECT_NEAR(weights[1], std::exp(-1.0) / sum, 1e-6);
  EXPECT_FLOAT_EQ(weights[2], weights[3]);

  std::vector<float> again = {0.5f, 2.0f, -1.0f, 3.0f, 0.0f};
  route_top_k(again.data(), 1, 5, 2, true, experts.data(), weights.data());
  EXPECT_NEAR(weights[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(weights[0] + weights[1], 1.0, 1e-6);

  // k = n: every expert, largest first.
  std::vector<float> all = {1.0f, 3.0f, 2.0f};
  std::vector<int32_t> order(3);
  std::vector<float> w(3);
  route_top_k(all.data(), 1, 3, 3, true, order.data(), w.data());
  EXPECT_EQ(order, (std::vector<int32_t>{1, 2, 0}));
}

TEST(ExpertRouting, GroupsRoutesByExpertInTokenOrder) {
  // Three tokens, two experts each, of four experts.
  const std::vector<int32_t> experts = {2, 0, 0, 3, 2, 3};
  std::vector<int32_t> first(5), routes(6), slot(6);
  group_by_expert(experts.data(), 6, 4, first.data(), routes.data(), slot.data());
  EXPECT_EQ(first, (std::vector<int32_t>{0, 2, 2, 4, 6}));
  EXPECT_EQ(routes, (std::vector<int32_t>{1, 2, 0, 4, 3, 5}));
  for (int32_t r = 0; r < 6; ++r)
    EXPECT_EQ(routes[static_cast<size_t>(slot[static_cast<size_t>(r)])], r);
}

}  // namespace
}  // namespace tern::cpu
