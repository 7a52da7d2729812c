// The C <-> C++ store bridge of src/capi/: an engine's table as a KvStore
// (CallbackStore), a C++ store as a table (trampolines), and AdoptTable's
// recognition of the library's own tables.
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "capi/callback_store.h"
#include "capi/store_table.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace swa::capi {
namespace {

// An engine-style table whose callbacks return what the test sets.
struct Script {
  int code = SWA_OK;  // an int: the test returns values outside the enum
  std::string message;
  bool fill_whole_buffer = false;  // write message_cap bytes, no NUL
  int releases = 0;
  uint64_t size_on_entry = 0;
};

swa_status_t ScriptPut(void* ud, const uint8_t*, size_t, const swa_iov_t*, size_t, char* msg,
                       size_t cap) {
  auto* s = static_cast<Script*>(ud);
  if (s->fill_whole_buffer) {
    std::memset(msg, 'x', cap);
  } else {
    std::snprintf(msg, cap, "%s", s->message.c_str());
  }
  return static_cast<swa_status_t>(s->code);
}

swa_status_t ScriptGet(void* ud, const uint8_t*, size_t, const swa_iov_t*, size_t,
                       uint64_t* blob_size, char*, size_t) {
  auto* s = static_cast<Script*>(ud);
  s->size_on_entry = *blob_size;
  *blob_size = 12345;
  return SWA_OK;
}

void ScriptRelease(void* ud) { ++static_cast<Script*>(ud)->releases; }

swa_kv_store_t ScriptTable(Script* s) {
  swa_kv_store_t t;
  swa_kv_store_init(&t);
  t.user_data = s;
  t.put = ScriptPut;
  t.get = ScriptGet;
  t.release = ScriptRelease;
  return t;
}

TEST(StoreBridge, AdoptTableTakesTheLibrarysOwnStoreItself) {
  swa_kv_store_t t = MakeStoreTable(std::make_unique<MemoryStore>(1 << 20));
  KvStore* inside = StoreFromTable(t);
  ASSERT_NE(inside, nullptr);
  absl::StatusOr<std::unique_ptr<KvStore>> adopted = AdoptTable(t);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(BuiltinBehind(**adopted), inside);  // no callback hop; deleting it is the one release
  EXPECT_EQ(dynamic_cast<CallbackStore*>(adopted->get()), nullptr);
  // Claimed: a second adoption is refused, and release through the table is a no-op.
  absl::StatusOr<std::unique_ptr<KvStore>> again = AdoptTable(t);
  EXPECT_TRUE(absl::IsInvalidArgument(again.status())) << again.status();
  t.release(t.user_data);
  const std::string v = "v";
  const ConstByteSpan put[1] = {ConstByteSpan(reinterpret_cast<const uint8_t*>(v.data()), 1)};
  EXPECT_TRUE((*adopted)->Put("k", put).ok());
}

TEST(StoreBridge, UnadoptGivesTheStoreBackUnclaimedAndAlive) {
  swa_kv_store_t t = MakeStoreTable(std::make_unique<MemoryStore>(1 << 20), "memory");
  KvStore* inside = StoreFromTable(t);
  absl::StatusOr<std::unique_ptr<KvStore>> adopted = AdoptTable(t);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  Unadopt(std::move(*adopted));  // an attach that failed after the claim
  EXPECT_EQ(StoreFromTable(t), inside) << "the store must still be alive";
  absl::StatusOr<std::unique_ptr<KvStore>> again = AdoptTable(t);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(BuiltinBehind(**again), inside);
  again->reset();  // the owner drops it: released, and the table is stale
  EXPECT_EQ(StoreFromTable(t), nullptr);
  absl::StatusOr<std::unique_ptr<KvStore>> stale = AdoptTable(t, "tier 3");
  EXPECT_TRUE(absl::IsInvalidArgument(stale.status())) << stale.status();
  EXPECT_NE(stale.status().message().find("tier 3: "), std::string::npos) << stale.status();
  EXPECT_NE(stale.status().message().find("was already released"), std::string::npos)
      << stale.status();
}

TEST(StoreBridge, ATableWithAReplacedEntryGoesThroughTheCallbacks) {
  swa_kv_store_t t = MakeStoreTable(std::make_unique<MemoryStore>(1 << 20));
  t.exists = nullptr;  // the engine took "exists" away
  EXPECT_EQ(StoreFromTable(t), nullptr);
  absl::StatusOr<std::unique_ptr<KvStore>> adopted = AdoptTable(t);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_NE(BuiltinBehind(**adopted), nullptr);  // claimed, reached through the callbacks
  const std::string v = "value";
  const ConstByteSpan put[1] = {
      ConstByteSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size())};
  ASSERT_TRUE((*adopted)->Put("k", put).ok());
  std::string got(v.size(), '\0');
  const ByteSpan get[1] = {ByteSpan(reinterpret_cast<uint8_t*>(got.data()), got.size())};
  absl::StatusOr<uint64_t> size = (*adopted)->Get("k", get);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, v.size());
  EXPECT_EQ(got, v);
  absl::StatusOr<bool> exists = (*adopted)->Exists("k");
  EXPECT_TRUE(absl::IsUnimplemented(exists.status())) << exists.status();
  EXPECT_NE(exists.status().message().find("does not support exists"), std::string::npos);
  // Destroying the adopted store deletes the built-in store once.
}

TEST(StoreBridge, BadTablesAreRefusedAndStayTheCallers) {
  Script s;
  swa_kv_store_t t = ScriptTable(&s);
  t.struct_size = 8;
  EXPECT_TRUE(absl::IsInvalidArgument(AdoptTable(t).status()));
  t = ScriptTable(&s);
  t.put = nullptr;
  t.get = nullptr;
  EXPECT_TRUE(absl::IsInvalidArgument(AdoptTable(t).status()));
  EXPECT_EQ(s.releases, 0);
}

TEST(StoreBridge, CallbackStatusesMessagesAndReleaseOnce) {
  Script s;
  {
    absl::StatusOr<std::unique_ptr<KvStore>> store = AdoptTable(ScriptTable(&s));
    ASSERT_TRUE(store.ok());
    s.code = SWA_UNAVAILABLE;
    s.message = "server busy";
    absl::Status st = (*store)->Put("k", {});
    EXPECT_TRUE(absl::IsUnavailable(st));
    EXPECT_EQ(st.message(), "server busy");
    s.message.clear();
    EXPECT_EQ((*store)->Put("k", {}).message(), "(no message)");
    s.code = 77;
    s.message = "odd";
    st = (*store)->Put("k", {});
    EXPECT_TRUE(absl::IsUnknown(st));
    EXPECT_EQ(st.message(), "returned 77, which is not a swa_status_t: odd");
    s.code = SWA_INTERNAL;
    s.fill_whole_buffer = true;  // no NUL written: the library terminates it
    EXPECT_EQ((*store)->Put("k", {}).message(), std::string(SWA_STORE_MESSAGE_BYTES - 1, 'x'));
    // get: *blob_size holds the buffers' total on entry; the true size comes back.
    uint8_t a[3], b[5];
    const ByteSpan pieces[2] = {ByteSpan(a, 3), ByteSpan(b, 5)};
    absl::StatusOr<uint64_t> size = (*store)->Get("k", pieces);
    ASSERT_TRUE(size.ok());
    EXPECT_EQ(s.size_on_entry, 8u);
    EXPECT_EQ(*size, 12345u);
    EXPECT_EQ(s.releases, 0);
  }
  EXPECT_EQ(s.releases, 1);
}

// A C++ store that fails in ways a C caller must never see raw.
class Throwing final : public KvStore {
 public:
  absl::Status Put(std::string_view, absl::Span<const ConstByteSpan>) override {
    throw std::bad_alloc();
  }
  absl::StatusOr<uint64_t> Get(std::string_view, absl::Span<const ByteSpan>) override {
    return absl::Status(static_cast<absl::StatusCode>(99), std::string(400, 'm'));
  }
  absl::StatusOr<bool> Exists(std::string_view) override { throw 5; }
  absl::Status Remove(std::string_view) override { return absl::NotFoundError("gone"); }
};

TEST(StoreBridge, TrampolinesStopExceptionsAndMapCodes) {
  swa_kv_store_t t = MakeStoreTable(std::make_unique<Throwing>());
  char msg[SWA_STORE_MESSAGE_BYTES];
  const uint8_t key[] = {'k'};
  EXPECT_EQ(t.put(t.user_data, key, 1, nullptr, 0, msg, sizeof msg), SWA_RESOURCE_EXHAUSTED);
  EXPECT_STREQ(msg, "out of host memory");
  uint64_t size = 0;
  EXPECT_EQ(t.get(t.user_data, key, 1, nullptr, 0, &size, msg, sizeof msg), SWA_UNKNOWN);
  EXPECT_EQ(std::strlen(msg), sizeof msg - 1);  // truncated to the buffer
  uint32_t exists = 7;
  EXPECT_EQ(t.exists(t.user_data, key, 1, &exists, msg, sizeof msg), SWA_INTERNAL);
  EXPECT_EQ(exists, 7u);
  EXPECT_EQ(t.remove(t.user_data, key, 1, msg, sizeof msg), SWA_NOT_FOUND);
  EXPECT_STREQ(msg, "gone");
  t.release(t.user_data);
}

}  // namespace
}  // namespace swa::capi
