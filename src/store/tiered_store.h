// A stack of stores, fastest first (e.g. memory in front of a directory or a
// Redis Cluster): reads try each tier in order and copy a hit into the faster
// tiers; writes go to the slowest tier (the tier of record) first and then to
// the faster ones; statistics per tier. docs/store.md, "Tiered", has the rules.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "store/kv_store.h"

namespace swa {

struct TierStats {
  uint64_t hits = 0;           // gets answered by this tier
  uint64_t misses = 0;         // gets this tier did not have (NOT_FOUND)
  uint64_t errors = 0;         // calls of any kind that failed otherwise
  uint64_t bytes_read = 0;     // blob bytes of the hits
  uint64_t puts = 0;           // successful puts, promotions included
  uint64_t bytes_written = 0;  // blob bytes of those puts
  uint64_t promotions = 0;     // puts that copied a hit up from a slower tier
  uint64_t fenced = 0;         // keys this tier is skipped for now (see Put)
};

// Thread-safe when every tier is. Calls on one key are ordered by a lock
// striped by key (puts and removes exclusive, gets and exists shared), so a
// get never promotes a blob that a put replaced meanwhile and two puts never
// leave different blobs in different tiers.
class TieredStore final : public KvStore {
 public:
  // INVALID_ARGUMENT for no tiers or a null one.
  static absl::StatusOr<std::unique_ptr<TieredStore>> Create(
      std::vector<std::unique_ptr<KvStore>> tiers);

  // Writes the slowest tier first: its failure is the put's (named), and no
  // other tier is touched, so readers keep the previous blob or none. Then
  // every faster tier, slowest to fastest; one that fails is cleared of the
  // key instead (counted, not returned), and when that fails too the key is
  // *fenced* in that tier: this store reads the tier no more for the key
  // until a later put, promotion or remove there succeeds.
  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override;
  // The first unfenced tier that has the key answers; a whole hit is then put
  // into every faster tier (a failed promotion is counted, not returned). A
  // tier that fails is skipped; its error is returned only when no later tier
  // has the key.
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override;
  // Get, but a hit from a slower tier is promoted only after `verify()`
  // accepted it (never without a `verify`); its error is returned, and the
  // faster tiers are left as they were.
  absl::StatusOr<uint64_t> GetVerified(std::string_view key, absl::Span<const ByteSpan> pieces,
                                       const std::function<void(uint64_t)>& landed,
                                       const std::function<absl::Status()>& verify) override;
  // True when any unfenced tier has the key; a tier's error only when none does.
  absl::StatusOr<bool> Exists(std::string_view key) override;
  // Removes from the slowest tier first: its failure (other than NOT_FOUND)
  // is returned, named, with no tier touched. Then from every faster tier; one
  // that fails is fenced for the key. OK when an unfenced tier held the key,
  // NOT_FOUND when none did.
  absl::Status Remove(std::string_view key) override;

  size_t tier_count() const { return tiers_.size(); }
  KvStore& tier(size_t i) { return *tiers_[i].store; }
  TierStats Stats(size_t tier) const;

 private:
  struct Counters {
    std::atomic<uint64_t> hits{0}, misses{0}, errors{0}, bytes_read{0}, puts{0}, bytes_written{0},
        promotions{0};
  };
  struct Tier {
    std::unique_ptr<KvStore> store;
    std::unique_ptr<Counters> counters = std::make_unique<Counters>();
  };
  static constexpr size_t kKeyLocks = 64;

  explicit TieredStore(std::vector<Tier> tiers);
  absl::Status Named(size_t tier, const absl::Status& status) const;
  absl::Mutex& KeyLock(std::string_view key) const;
  void Promote(std::string_view key, absl::Span<const ByteSpan> pieces, size_t below);
  // Get and GetVerified; `promote_unverified` promotes a whole hit without a `verify`.
  absl::StatusOr<uint64_t> Read(std::string_view key, absl::Span<const ByteSpan> pieces,
                                const std::function<void(uint64_t)>& landed,
                                const std::function<absl::Status()>& verify,
                                bool promote_unverified);
  // After a failed write into faster tier `tier`: clear the key there, or
  // fence it when that fails too.
  void ClearOrFence(size_t tier, std::string_view key);
  bool Fenced(size_t tier, std::string_view key) const;
  void SetFenced(size_t tier, std::string_view key, bool fenced);

  std::vector<Tier> tiers_;
  mutable std::array<absl::Mutex, kKeyLocks> key_locks_;
  mutable absl::Mutex fence_mu_;
  std::vector<absl::flat_hash_set<std::string>> fenced_ ABSL_GUARDED_BY(fence_mu_);
  std::atomic<size_t> fenced_keys_{0};  // all tiers: reads skip fence_mu_ while 0
};

}  // namespace swa
