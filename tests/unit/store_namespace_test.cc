// Tenant namespaces (issue 33, item 3): two caches of the same layout with
// different namespaces share one memory store, and one directory (two
// DirectoryStore objects on one folder). Under equal engine keys neither sees
// the other's blobs through exists, probe, restore or remove; each restores
// exactly its own bytes. The prefix's encoding is length-prefixed.
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "store/blob_auth.h"
#include "store/blob_store.h"
#include "store/directory_store.h"
#include "store/memory_store.h"
#include "unit/store_test_util.h"

namespace swa {
namespace {

using swa::testing::FillRandom;
using swa::testing::Restore;
using swa::testing::Save;
using swa::testing::SharedStore;

std::unique_ptr<Cache> TenantCache(const std::string& ns, std::unique_ptr<KvStore> kv) {
  CacheOptions options;
  options.store_security.name_space = ns;
  absl::StatusOr<std::unique_ptr<Cache>> c = Cache::Create(swa::testing::SmallSpec(), options);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  (*c)->SetStore(std::make_shared<BlobStore>(std::move(kv), (*c)->layout().fingerprint(),
                                             (*c)->store_security()));
  return std::move(*c);
}

std::vector<uint8_t> Stored(const Cache& c, uint32_t slot) {
  return std::vector<uint8_t>(c.slot_base(slot), c.slot_base(slot) + c.layout().stored_bytes());
}

// a and b share a store; both save under the same engine keys.
void CheckIsolation(Cache& a, Cache& b) {
  std::mt19937_64 rng(7);
  for (Cache* c : {&a, &b}) {
    ASSERT_EQ(*c->slots().Alloc(), 0u);
    ASSERT_EQ(*c->slots().Alloc(), 1u);
    FillRandom(c->pool(), c->layout().pool_bytes(), rng);
  }
  ASSERT_TRUE(a.slots().Set(0, {true, 40, 30, 41}).ok());
  ASSERT_TRUE(b.slots().Set(0, {true, 50, 45, 52}).ok());
  const std::vector<uint8_t> a_bytes = Stored(a, 0), b_bytes = Stored(b, 0);
  ASSERT_NE(a_bytes, b_bytes);
  BlobStore& sa = **a.store();
  BlobStore& sb = **b.store();
  // Only a saves "shared": b sees nothing under it.
  ASSERT_TRUE(Save(a, 0, "shared").ok());
  EXPECT_TRUE(*sa.Exists("shared"));
  EXPECT_FALSE(*sb.Exists("shared"));
  const std::string_view keys[2] = {"other", "shared"};
  EXPECT_EQ(*sa.FirstPresent(keys), 1);
  EXPECT_EQ(*sb.FirstPresent(keys), -1);
  EXPECT_EQ(Restore(b, 1, "shared").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(sb.Remove("shared").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(*sa.Exists("shared"));  // b's remove did not touch a's blob
  // b saves under the same key; each restores its own bytes and positions.
  ASSERT_TRUE(Save(b, 0, "shared").ok());
  ASSERT_TRUE(Restore(a, 1, "shared").ok());
  ASSERT_TRUE(Restore(b, 1, "shared").ok());
  EXPECT_EQ(Stored(a, 1), a_bytes);
  EXPECT_EQ(Stored(b, 1), b_bytes);
  EXPECT_EQ(a.slots().Get(1)->written_end, 40);
  EXPECT_EQ(b.slots().Get(1)->written_end, 50);
  // a removes its blob; b's stays.
  ASSERT_TRUE(sa.Remove("shared").ok());
  EXPECT_FALSE(*sa.Exists("shared"));
  EXPECT_TRUE(*sb.Exists("shared"));
  EXPECT_EQ(*sb.FirstPresent(keys), 1);
}

TEST(StoreNamespace, TwoTenantsOnOneMemoryStore) {
  auto shared = std::make_shared<MemoryStore>(64 << 20);
  auto a = TenantCache("tenant-a", std::make_unique<SharedStore>(shared));
  auto b = TenantCache("tenant-b", std::make_unique<SharedStore>(shared));
  ASSERT_TRUE(a && b);
  CheckIsolation(*a, *b);
}

TEST(StoreNamespace, TwoTenantsOnOneDirectory) {
  char tmpl[] = "/tmp/swa_ns_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  {
    DirectoryStoreOptions o;
    o.path = root;
    o.sync = false;
    auto da = DirectoryStore::Open(o);
    auto db = DirectoryStore::Open(o);
    ASSERT_TRUE(da.ok() && db.ok());
    auto a = TenantCache("tenant-a", std::move(*da));
    auto b = TenantCache("tenant-b", std::move(*db));
    ASSERT_TRUE(a && b);
    CheckIsolation(*a, *b);
  }
  std::filesystem::remove_all(root);
}

TEST(StoreNamespace, NoNamespaceAndANamespaceAreDistinct) {
  auto shared = std::make_shared<MemoryStore>(64 << 20);
  auto a = TenantCache("", std::make_unique<SharedStore>(shared));
  auto b = TenantCache("t", std::make_unique<SharedStore>(shared));
  ASSERT_TRUE(a && b);
  CheckIsolation(*a, *b);
}

TEST(StoreNamespace, PrefixIsLengthPrefixed) {
  EXPECT_EQ(StoreNamespacePrefix(""), "");
  EXPECT_EQ(StoreNamespacePrefix("ab"), "ns2:ab");
  EXPECT_EQ(StoreNamespacePrefix(std::string("a\0:", 3)), std::string("ns3:a\0:", 7));
  // Namespace "a" with a key starting "b" and namespace "ab" never meet: the
  // length comes first.
  BlobStore s1(std::make_unique<MemoryStore>(1 << 20), 0x1234, {"a", nullptr});
  BlobStore s2(std::make_unique<MemoryStore>(1 << 20), 0x1234, {"ab", nullptr});
  BlobStore s0(std::make_unique<MemoryStore>(1 << 20), 0x1234, {"", nullptr});
  EXPECT_EQ(s1.FullKey("k"), "ns1:a0000000000001234:k");
  EXPECT_EQ(s2.FullKey("k"), "ns2:ab0000000000001234:k");
  EXPECT_EQ(s0.FullKey("k"), "0000000000001234:k");
  EXPECT_TRUE(CheckStoreNamespace(std::string(256, 'n'), "ns").ok());
  EXPECT_EQ(CheckStoreNamespace(std::string(257, 'n'), "ns").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace swa
