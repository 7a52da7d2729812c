// The host+device index header (src/common/index_math.h), run on the CPU and
// checked exhaustively on small geometries against the enumeration reference.
#include "common/index_math.h"

#include <random>

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "plan/fast_mod.h"
#include "plan_reference.h"

namespace {

using namespace swa::plan;

struct Geo {
  int32_t w, r;
};

std::vector<Geo> SmallGeometries() {
  std::vector<Geo> g;
  for (int32_t w = 1; w <= 9; ++w)
    for (int32_t r = w; r <= w + 6; ++r) g.push_back({w, r});
  return g;
}

TEST(PlanIndexMath, DecodeGatherAndIndexRowMatchEnumeration) {
  int checked = 0;
  for (const Geo& g : SmallGeometries()) {
    for (uint32_t slot = 0; slot < 3; ++slot) {
      const int32_t base = static_cast<int32_t>(slot) * g.r;
      for (int32_t p = 0; p < 3 * g.r + 2; ++p) {
        for (int32_t v = 0; v <= p; ++v) {
          const std::vector<int32_t> vis = plan_ref::Visible(p, v, g.w);
          const TokenGather tg = DecodeGather(slot, p, v, g.w, g.r);
          ASSERT_EQ(tg.lo, vis.front()) << "p=" << p << " v=" << v << " W=" << g.w;
          ASSERT_EQ(tg.len, static_cast<int32_t>(vis.size()));
          ASSERT_EQ(tg.first_row, plan_ref::RingRowOf(slot, vis.front(), g.r));
          for (int pad_mode = 0; pad_mode < 2; ++pad_mode) {
            const int32_t own = plan_ref::RingRowOf(slot, p, g.r);
            const int32_t pad = pad_mode ? own : -1;
            ASSERT_EQ(LastGatherRow(base, tg.first_row, tg.len, g.r), own);
            std::vector<int32_t> row(g.w + 1, 0x5a5a5a5a);  // poison, one guard entry
            FillIndexRow(row.data(), base, tg.first_row, tg.len, g.w, g.r, pad);
            for (int32_t j = 0; j < g.w; ++j) {
              const int32_t want =
                  j < static_cast<int32_t>(vis.size()) ? plan_ref::RingRowOf(slot, vis[j], g.r) : pad;
              ASSERT_EQ(row[j], want) << "j=" << j << " p=" << p << " v=" << v;
              ASSERT_EQ(IndexEntry(base, tg.first_row, tg.len, j, g.r, pad), want);
            }
            ASSERT_EQ(row[g.w], 0x5a5a5a5a) << "wrote past W entries";
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

TEST(PlanIndexMath, StagedPivotsMatchEnumeration) {
  for (const Geo& g : SmallGeometries()) {
    for (int32_t i = 0; i < 3; ++i) {
      for (int32_t q0 = 0; q0 < 2 * g.r; ++q0) {
        for (int32_t v = 0; v <= q0; ++v) {
          const int32_t sec2_first = 1000 + 7 * i;
          for (int32_t j = 0; j < 2 * g.w + 3; ++j) {
            // Rows the token must read, from the enumeration.
            std::vector<int32_t> want;
            for (int32_t x : plan_ref::Visible(q0 + j, v, g.w))
              want.push_back(x < q0 ? i * g.w + (x - (q0 - g.w)) : sec2_first + (x - q0));
            const Pivots pv = StagedPivots(i, q0, j, v, g.w, sec2_first);
            std::vector<int32_t> got;
            for (int32_t k = 0; k < pv.p1; ++k) got.push_back(pv.p0 + k);
            for (int32_t k = 0; k < pv.p3; ++k) got.push_back(pv.p2 + k);
            ASSERT_EQ(got, want) << "i=" << i << " q0=" << q0 << " v=" << v << " j=" << j
                                 << " W=" << g.w;
            // The history range stays inside the sequence's W rows.
            ASSERT_GE(pv.p0, i * g.w);
            ASSERT_LE(pv.p0 + pv.p1, (i + 1) * g.w);
          }
        }
      }
    }
  }
}

TEST(PlanIndexMath, HistoryPadAndFirstStored) {
  for (const Geo& g : SmallGeometries()) {
    for (int32_t q0 = 0; q0 < 3 * g.r; ++q0) {
      for (int32_t v = 0; v <= q0; ++v) {
        int32_t zeros = 0;  // leading rows of q0 - W ... q0 - 1 that are < 0 or < v
        for (int32_t x = q0 - g.w; x < q0; ++x) zeros += (x < 0 || x < v) ? 1 : 0;
        ASSERT_EQ(HistoryPad(q0, v, g.w), zeros) << "q0=" << q0 << " v=" << v;
      }
      for (int32_t k = q0; k < q0 + 3 * g.r; ++k) {
        int32_t first = k;
        for (int32_t p = k - 1; p >= q0 && p >= k - g.r; --p) first = p;
        ASSERT_EQ(FirstStoredPos(q0, k, g.r), first);
      }
    }
  }
}

TEST(PlanFastMod, EqualsTheRemainder) {
  std::mt19937 rng(3);
  const uint32_t divisors[] = {1, 2, 3, 7, 128, 133, 134, 1000, 65537, (1u << 22) - 3, 1u << 22,
                               0x7fffffffu, 0xffffffffu};
  for (uint32_t d : divisors) {
    const FastMod mod(d);
    for (uint32_t x : {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 0x7fffffffu, 0xffffffffu})
      ASSERT_EQ(mod(x), x % d) << x << " mod " << d;
    for (int i = 0; i < 200000; ++i) {
      const uint32_t x = rng();
      ASSERT_EQ(mod(x), x % d) << x << " mod " << d;
    }
  }
}

}  // namespace
