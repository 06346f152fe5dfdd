// Leases: granted with unguessable ids, one pull each, refused when unknown, expired, in use or
// used, or for a block they do not hold; released after the pull (sent or not) or at expiry.
#include "tern/disagg/kv_lease_table.h"

#include <gtest/gtest.h>

#include <set>

namespace tern::disagg {
namespace {

std::string refusal(KvLeaseTable& t, const std::string& id, std::vector<int32_t> blocks,
                    double now) {
  return t.begin_pull(id, blocks, now).value_or("");
}

TEST(KvLeaseTable, OnePullPerLeaseThenItsBlocksAreReleased) {
  KvLeaseTable table(30.0);
  const KvLease a = table.grant({4, 9, 2}, 100.0);
  EXPECT_EQ(a.id.size(), 32u);
  EXPECT_DOUBLE_EQ(a.expires_at, 130.0);
  EXPECT_EQ(table.stats().held, 1);

  EXPECT_EQ(table.begin_pull(a.id, std::vector<int32_t>{9, 2}, 101.0), std::nullopt);
  EXPECT_NE(refusal(table, a.id, {9}, 101.0).find("being pulled"), std::string::npos);
  EXPECT_TRUE(table.take_released(200.0).empty());  // in use: it does not expire
  table.end_pull(a.id, true);
  EXPECT_NE(refusal(table, a.id, {9}, 102.0).find("already used"), std::string::npos);
  const std::vector<KvLease> released = table.take_released(102.0);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].block_ids, (std::vector<int32_t>{4, 9, 2}));
  EXPECT_NE(refusal(table, a.id, {9}, 103.0).find("already used"), std::string::npos);
  const KvLeaseTable::Stats s = table.stats();
  EXPECT_EQ(s.held, 0);
  EXPECT_EQ(s.granted, 1);
  EXPECT_EQ(s.pulled, 1);
  EXPECT_EQ(s.expired, 0);
}

TEST(KvLeaseTable, RefusesUnknownExpiredAndForeignBlocks) {
  KvLeaseTable table(5.0);
  const KvLease a = table.grant({1, 2}, 0.0);
  EXPECT_NE(refusal(table, "feedface", {1}, 1.0).find("unknown lease"), std::string::npos);
  EXPECT_NE(refusal(table, a.id, {3}, 1.0).find("does not hold block 3"), std::string::npos);
  EXPECT_EQ(table.next_expiry(), 5.0);
  EXPECT_NE(refusal(table, a.id, {1}, 5.0).find("expired"), std::string::npos);
  const std::vector<KvLease> released = table.take_released(5.0);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(table.stats().expired, 1);
  EXPECT_EQ(table.next_expiry(), std::nullopt);
  EXPECT_NE(refusal(table, a.id, {1}, 6.0).find("expired"), std::string::npos);
}

TEST(KvLeaseTable, AFailedPullEndsTheLeaseToo) {
  KvLeaseTable table(30.0);
  const KvLease a = table.grant({7}, 0.0);
  ASSERT_EQ(table.begin_pull(a.id, std::vector<int32_t>{7}, 1.0), std::nullopt);
  table.end_pull(a.id, false);
  EXPECT_EQ(table.take_released(1.0).size(), 1u);
  EXPECT_EQ(table.stats().failed, 1);
  EXPECT_EQ(table.stats().pulled, 0);
}

TEST(KvLeaseTable, IdsDoNotRepeat) {
  KvLeaseTable table(30.0);
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(table.grant({i}, 0.0).id);
  EXPECT_EQ(ids.size(), 1000u);
  EXPECT_THROW(KvLeaseTable(0.0), std::exception);
}

}  // namespace
}  // namespace tern::disagg
