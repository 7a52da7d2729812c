// A slot imported into a graph decode keeps its owner until every graph that
// holds it has released it (or been destroyed): free, reset, copy into it,
// restore into it, begin_replay and set_valid_start are refused with
// FAILED_PRECONDITION naming the slot, and no graph step ever writes the ring
// of a sequence that got the slot after it changed hands.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "api/graph_rig.h"
#include "gtest/gtest.h"
#include "swacache.h"

namespace swa_test {
namespace {

struct SlotInfo {
  uint32_t allocated;
  int32_t written_end, valid_start;
  bool operator==(const SlotInfo&) const = default;
};

SlotInfo Info(GraphRig& rig, uint32_t slot) {
  swa_slot_info_t i;
  i.struct_size = sizeof i;
  EXPECT_EQ(swa_slot_info(rig.cache(), slot, &i), SWA_OK) << swa_last_error();
  return {i.allocated, i.written_end, i.valid_start};
}

// -1 when equal, else the first differing index (the size when only lengths differ).
long FirstDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return long(std::min(a.size(), b.size()));
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return long(i);
  return -1;
}

// The refusal of a call on a slot that a graph holds.
void ExpectHeld(swa_status_t st, uint32_t slot, const std::string& what) {
  EXPECT_EQ(st, SWA_FAILED_PRECONDITION) << what;
  const std::string m = swa_last_error();
  EXPECT_NE(m.find("slot " + std::to_string(slot) + " "), std::string::npos) << what << ": " << m;
  EXPECT_NE(m.find("decode graph"), std::string::npos) << what << ": " << m;
  EXPECT_NE(m.find("swa_decode_graph_release()"), std::string::npos) << what << ": " << m;
}

// The reproducer: import, free, alloc, plan and step the graph that
// was never released. The free must fail, and the sequence that gets the next
// slot must not see a byte of the graph's step.
TEST(DecodeGraphOwnership, FreeOfAnImportedSlotIsRefusedAndNoOtherOwnerIsWritten) {
  GraphRig rig(1, 2, 101);
  const uint32_t s = rig.NewSlot(20);
  ASSERT_EQ(swa_decode_graph_import(rig.graph(), &s, 1, nullptr), SWA_OK) << swa_last_error();
  ASSERT_EQ(rig.GraphStep({int32_t(s)}, {21}, nullptr), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_decode_graph_check(rig.graph(), nullptr, nullptr), SWA_OK) << swa_last_error();
  const SlotInfo held = Info(rig, s);
  const std::vector<uint8_t> held_ring = rig.RingBytes(s);

  ExpectHeld(swa_slot_free(rig.cache(), s), s, "free");
  EXPECT_EQ(Info(rig, s), held);
  EXPECT_EQ(FirstDiff(rig.RingBytes(s), held_ring), -1);

  // An engine that ignores the error: a new sequence gets a slot and its
  // prefill, and the graph plans the old sequence's next step.
  uint32_t n = 0;
  ASSERT_EQ(swa_slot_alloc(rig.cache(), &n), SWA_OK) << swa_last_error();
  EXPECT_NE(n, s);
  rig.HostStep(n, 9, 9);
  const SlotInfo owner = Info(rig, n);
  const std::vector<uint8_t> owner_ring = rig.RingBytes(n);
  const swa_status_t stepped = rig.GraphStep({int32_t(s)}, {22}, nullptr);
  EXPECT_EQ(FirstDiff(rig.RingBytes(n), owner_ring), -1) << "the graph wrote the new owner's ring";
  EXPECT_EQ(Info(rig, n), owner);
  // s still belongs to the old sequence: that step was legal and ran.
  EXPECT_EQ(stepped, SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_decode_graph_check(rig.graph(), nullptr, nullptr), SWA_OK) << swa_last_error();
  EXPECT_NE(FirstDiff(rig.RingBytes(s), held_ring), -1);
}

// The documented path: release, free, alloc (the same id), prefill. The graph
// refuses the slot; the new owner's ring is untouched byte for byte.
TEST(DecodeGraphOwnership, ReleasedFreedAndReallocatedSlotIsRefusedByTheGraph) {
  GraphRig rig(2, 2, 102);
  const uint32_t s = rig.NewSlot(20);
  ASSERT_EQ(swa_decode_graph_import(rig.graph(), &s, 1, nullptr), SWA_OK) << swa_last_error();
  ASSERT_EQ(rig.GraphStep({int32_t(s)}, {22}, nullptr), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_decode_graph_release(rig.graph(), &s, 1, nullptr), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_slot_free(rig.cache(), s), SWA_OK) << swa_last_error();
  uint32_t n = 0;
  ASSERT_EQ(swa_slot_alloc(rig.cache(), &n), SWA_OK) << swa_last_error();
  ASSERT_EQ(n, s) << "the pool hands back the slot freed last; the case needs the same id";
  rig.HostStep(n, 9, 9);
  const SlotInfo owner = Info(rig, n);
  const std::vector<uint8_t> owner_ring = rig.RingBytes(n);

  std::vector<GraphRig::Rows> rows;
  ASSERT_EQ(rig.GraphStep({int32_t(s), -1}, {24, 0}, &rows), SWA_OK) << swa_last_error();
  EXPECT_EQ(FirstDiff(rig.RingBytes(n), owner_ring), -1) << "the graph wrote the new owner's ring";
  EXPECT_EQ(Info(rig, n), owner);
  for (const GraphRig::Rows& r : rows) {
    for (float x : r.out) ASSERT_EQ(x, 0.0f);
    for (float x : r.lse) ASSERT_EQ(x, -std::numeric_limits<float>::infinity());
  }
  swa_graph_error_t rec;
  EXPECT_EQ(swa_decode_graph_check(rig.graph(), nullptr, &rec), SWA_FAILED_PRECONDITION);
  EXPECT_EQ(rec.reason, SWA_GRAPH_SLOT_NOT_IMPORTED);
  EXPECT_EQ(rec.slot, int32_t(s));
}

// Every call that hands a held slot to another owner or replaces its content
// is refused, while device-advanced and after swa_slot_set_lengths (host-known
// but still held); nothing changes. Reads stay allowed; after the release
// every call works.
TEST(DecodeGraphOwnership, EveryOwnerOrContentChangingCallIsRefusedWhileHeld) {
  GraphRig rig(1, 2, 103);
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_t store;
  swa_kv_store_init(&store);
  ASSERT_EQ(swa_store_memory_create(&mc, &store), SWA_OK);
  ASSERT_EQ(swa_cache_set_store(rig.cache(), &store), SWA_OK) << swa_last_error();
  const uint32_t s = rig.NewSlot(20), other = rig.NewSlot(12);
  uint32_t fresh = 0;  // no positions: begin_replay's case
  ASSERT_EQ(swa_slot_alloc(rig.cache(), &fresh), SWA_OK);
  const uint8_t key[] = {7, 1};
  ASSERT_EQ(swa_slot_save(rig.cache(), other, key, sizeof key), SWA_OK) << swa_last_error();
  const uint32_t mine[] = {s, fresh};
  ASSERT_EQ(swa_decode_graph_import(rig.graph(), mine, 2, nullptr), SWA_OK) << swa_last_error();
  ASSERT_EQ(rig.GraphStep({int32_t(s)}, {21}, nullptr), SWA_OK) << swa_last_error();

  // Device-advanced: free and reset name the hold.
  ExpectHeld(swa_slot_free(rig.cache(), s), s, "free (device-advanced)");
  ExpectHeld(swa_slot_reset(rig.cache(), s), s, "reset (device-advanced)");
  ExpectHeld(swa_slot_free(rig.cache(), fresh), fresh, "free of the fresh slot");

  const int32_t ends[] = {21, 0};
  ASSERT_EQ(swa_slot_set_lengths(rig.cache(), mine, ends, nullptr, 2), SWA_OK) << swa_last_error();
  const SlotInfo info_s = Info(rig, s), info_fresh = Info(rig, fresh);
  const std::vector<uint8_t> ring_s = rig.RingBytes(s), ring_fresh = rig.RingBytes(fresh);
  const uint8_t missing[] = {9, 9, 9};
  int32_t start = -1, len = -1;
  ExpectHeld(swa_slot_free(rig.cache(), s), s, "free");
  ExpectHeld(swa_slot_reset(rig.cache(), s), s, "reset");
  ExpectHeld(swa_slot_copy(rig.cache(), other, s), s, "copy into");
  ExpectHeld(swa_slot_restore(rig.cache(), s, key, sizeof key), s, "restore into");
  ExpectHeld(swa_slot_restore(rig.cache(), s, missing, sizeof missing), s,
             "restore of a missing key (refused before any store I/O)");
  ExpectHeld(swa_slot_set_valid_start(rig.cache(), s, 5), s, "set_valid_start");
  ExpectHeld(swa_slot_begin_replay(rig.cache(), fresh, 40, &start, &len), fresh, "begin_replay");
  EXPECT_EQ(start, -1);
  EXPECT_EQ(Info(rig, s), info_s);
  EXPECT_EQ(Info(rig, fresh), info_fresh);
  EXPECT_EQ(FirstDiff(rig.RingBytes(s), ring_s), -1);
  EXPECT_EQ(FirstDiff(rig.RingBytes(fresh), ring_fresh), -1);

  // Reads and the owner's own steps are not owner changes.
  EXPECT_EQ(swa_slot_copy(rig.cache(), s, other), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_slot_save(rig.cache(), s, key, sizeof key), SWA_OK) << swa_last_error();
  const swa_seq_t next = {s, 1, 22, 0};
  EXPECT_EQ(swa_plan_build(rig.plan(), &next, 1), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_plan_cancel(rig.plan()), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_slot_copy(rig.cache(), s, s), SWA_OK) << "src == dst is a no-op";

  // Released: every call works again.
  ASSERT_EQ(swa_decode_graph_release(rig.graph(), mine, 2, nullptr), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_slot_set_valid_start(rig.cache(), s, 5), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_slot_copy(rig.cache(), other, s), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_slot_restore(rig.cache(), s, key, sizeof key), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_slot_reset(rig.cache(), s), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_slot_begin_replay(rig.cache(), fresh, 40, &start, &len), SWA_OK) << swa_last_error();
  EXPECT_EQ(start, 40 - int32_t(GraphRig::kWindow));
  EXPECT_EQ(swa_slot_free(rig.cache(), s), SWA_OK) << swa_last_error();
  EXPECT_EQ(swa_slot_free(rig.cache(), fresh), SWA_OK) << swa_last_error();
}

// The hold is per graph: a second graph holds too, a re-import does not hold
// twice, a release by a graph that never imported the slot drops nothing, a
// failed import holds nothing, and destroying a graph drops its holds.
TEST(DecodeGraphOwnership, HoldsAreCountedPerGraph) {
  GraphRig rig(1, 2, 104);
  const uint32_t s = rig.NewSlot(10), t = rig.NewSlot(10);
  swa_decode_graph_t* g2 = nullptr;
  ASSERT_EQ(swa_decode_graph_create(rig.cache(), 2, 1, &g2), SWA_OK) << swa_last_error();
  const int32_t end = 10;

  // Re-import into the same graph (after set_lengths), then one release frees it.
  ASSERT_EQ(swa_decode_graph_import(rig.graph(), &s, 1, nullptr), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_slot_set_lengths(rig.cache(), &s, &end, nullptr, 1), SWA_OK);
  ASSERT_EQ(swa_decode_graph_import(rig.graph(), &s, 1, nullptr), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_slot_set_lengths(rig.cache(), &s, &end, nullptr, 1), SWA_OK);
  ASSERT_EQ(swa_decode_graph_release(rig.graph(), &s, 1, nullptr), SWA_OK);
  EXPECT_EQ(swa_slot_reset(rig.cache(), s), SWA_OK) << swa_last_error();
  rig.HostStep(s, 10, 10);

  // Two graphs hold s: g2 still does after the first graph's release.
  ASSERT_EQ(swa_decode_graph_import(rig.graph(), &s, 1, nullptr), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_slot_set_lengths(rig.cache(), &s, &end, nullptr, 1), SWA_OK);
  ASSERT_EQ(swa_decode_graph_import(g2, &s, 1, nullptr), SWA_OK) << swa_last_error();
  ASSERT_EQ(swa_slot_set_lengths(rig.cache(), &s, &end, nullptr, 1), SWA_OK);
  ExpectHeld(swa_slot_reset(rig.cache(), s), s, "reset, two graphs");
  EXPECT_NE(std::string(swa_last_error()).find("2 decode graphs"), std::string::npos)
      << swa_last_error();
  ASSERT_EQ(swa_decode_graph_release(rig.graph(), &s, 1, nullptr), SWA_OK);
  ASSERT_EQ(swa_decode_graph_release(rig.graph(), &s, 1, nullptr), SWA_OK);  // again: no-op
  ExpectHeld(swa_slot_reset(rig.cache(), s), s, "reset, g2 holds");
  swa_decode_graph_destroy(g2);
  EXPECT_EQ(swa_slot_reset(rig.cache(), s), SWA_OK) << swa_last_error();

  // A failed import (t is fine, the slot past the pool is not) holds nothing.
  const uint32_t bad[] = {t, 1000};
  EXPECT_EQ(swa_decode_graph_import(rig.graph(), bad, 2, nullptr), SWA_OUT_OF_RANGE);
  EXPECT_EQ(swa_slot_reset(rig.cache(), t), SWA_OK) << swa_last_error();
  const swa_seq_t prefill = {t, 4, 4, 0};
  EXPECT_EQ(swa_plan_build(rig.plan(), &prefill, 1), SWA_OK) << "not left device-advanced: "
                                                             << swa_last_error();
  EXPECT_EQ(swa_plan_cancel(rig.plan()), SWA_OK);
}

// A store whose get runs `on_get` after the memory store's: the window in
// which a restore has read the blob and not yet claimed the slot.
struct HookedStore {
  swa_kv_store_t inner;
  std::function<void()> on_get;

  static swa_status_t Put(void* u, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                          size_t n_iov, char* msg, size_t cap) {
    auto* h = static_cast<HookedStore*>(u);
    return h->inner.put(h->inner.user_data, key, key_len, iov, n_iov, msg, cap);
  }
  static swa_status_t Get(void* u, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                          size_t n_iov, uint64_t* size, char* msg, size_t cap) {
    auto* h = static_cast<HookedStore*>(u);
    const swa_status_t st = h->inner.get(h->inner.user_data, key, key_len, iov, n_iov, size, msg, cap);
    if (h->on_get) h->on_get();
    return st;
  }
  static void Release(void* u) {
    auto* h = static_cast<HookedStore*>(u);
    if (h->inner.release != nullptr) h->inner.release(h->inner.user_data);
    delete h;
  }
};

// A graph imports the slot (and the host learns its lengths, so that it is no
// longer device-advanced) while a restore reads the store: the restore writes
// nothing.
TEST(DecodeGraphOwnership, RestoreRacingAnImportWritesNothing) {
  GraphRig rig(1, 2, 105);
  const uint32_t s = rig.NewSlot(20), other = rig.NewSlot(12);
  auto* hooked = new HookedStore;
  swa_store_memory_config_t mc;
  swa_store_memory_config_init(&mc);
  swa_kv_store_init(&hooked->inner);
  ASSERT_EQ(swa_store_memory_create(&mc, &hooked->inner), SWA_OK);
  swa_kv_store_t table;
  swa_kv_store_init(&table);
  table.user_data = hooked;
  table.put = &HookedStore::Put;
  table.get = &HookedStore::Get;
  table.release = &HookedStore::Release;
  ASSERT_EQ(swa_cache_set_store(rig.cache(), &table), SWA_OK) << swa_last_error();
  const uint8_t key[] = {3, 4};
  ASSERT_EQ(swa_slot_save(rig.cache(), other, key, sizeof key), SWA_OK) << swa_last_error();
  const SlotInfo before = Info(rig, s);
  const std::vector<uint8_t> ring = rig.RingBytes(s);
  swa_decode_graph_t* graph = rig.graph();
  hooked->on_get = [&] {
    const int32_t end = 20;
    EXPECT_EQ(swa_decode_graph_import(graph, &s, 1, nullptr), SWA_OK) << swa_last_error();
    EXPECT_EQ(swa_slot_set_lengths(rig.cache(), &s, &end, nullptr, 1), SWA_OK) << swa_last_error();
  };
  ExpectHeld(swa_slot_restore(rig.cache(), s, key, sizeof key), s, "restore racing an import");
  hooked->on_get = nullptr;
  EXPECT_EQ(Info(rig, s), before);
  EXPECT_EQ(FirstDiff(rig.RingBytes(s), ring), -1);
}

}  // namespace
}  // namespace swa_test
