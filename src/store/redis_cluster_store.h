// The built-in Redis Cluster store: keys routed by hash slot over a slot map
// read with CLUSTER SLOTS, MOVED/ASK followed, failures retried within a
// per-call deadline and attempt budget, pooled connections per node, optional
// reads from replicas. One blob per key (SET/GET/EXISTS/DEL), as the Redis store.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/cluster_hash_slot.h"
#include "store/kv_store.h"
#include "store/redis_cluster_node.h"
#include "store/redis_tls.h"

namespace swa {

// The bounds of CLUSTER SLOTS's reply (RedisClusterStore's map loads), sized
// for the largest map this client takes:
// all 16384 slots in ranges of one slot each, every range served by a master
// and 5 replicas, every node entry at its longest in Redis 7's form: a
// 255-byte hostname as the endpoint, the port, the 40-character node id, and
// the networking metadata "ip" (a 45-character IPv6 address) and "hostname"
// (255 bytes again). In RESP2 bytes:
//   node entry: "*4\r\n" 4 + "$255\r\n<255>\r\n" 263 + ":65535\r\n" 8 +
//     "$40\r\n<40>\r\n" 47 + metadata "*4\r\n" 4 + "$2\r\nip\r\n" 8 +
//     "$45\r\n<45>\r\n" 52 + "$8\r\nhostname\r\n" 14 + 263 = 663 bytes,
//     8 elements (4 + 4);
//   range: "*8\r\n" 4 + two ":16383\r\n" 16 + 6 node entries = 3998 bytes,
//     2 + 6 + 6 * 8 = 56 elements;
//   reply: "*16384\r\n" 8 + 16384 ranges = 65,503,240 bytes (62.5 MiB),
//     16384 + 16384 * 56 = 933,888 elements, arrays 4 deep (reply, range,
//     node, metadata).
// A real cluster's map is far smaller (its ranges are few unless slots are
// scattered one by one); the bounds are 64 MiB, 2^20 elements and depth 4.
inline constexpr size_t kRedisSlotsNodeEntryBytes = 4 + 263 + 8 + 47 + 4 + 8 + 52 + 14 + 263;
inline constexpr size_t kRedisSlotsNodesPerRange = 6;
inline constexpr size_t kRedisSlotsRangeBytes =
    4 + 16 + kRedisSlotsNodesPerRange * kRedisSlotsNodeEntryBytes;
inline constexpr size_t kRedisSlotsReplyBytes = 8 + kClusterSlots * kRedisSlotsRangeBytes;
inline constexpr uint64_t kRedisSlotsReplyElements =
    kClusterSlots + uint64_t{kClusterSlots} * (2 + kRedisSlotsNodesPerRange * (1 + 8));
inline constexpr RedisReplyLimits kRedisClusterSlotsReply{64u << 20, 1u << 20, 4};
static_assert(kRedisSlotsNodeEntryBytes == 663 && kRedisSlotsReplyBytes == 65503240 &&
              kRedisSlotsReplyElements == 933888);
static_assert(kRedisSlotsReplyBytes <= kRedisClusterSlotsReply.max_bytes &&
              kRedisSlotsReplyElements <= kRedisClusterSlotsReply.max_elements);

struct RedisClusterOptions {
  std::vector<ClusterNodeAddress> seeds;
  std::string username;               // non-empty: AUTH username password (an ACL user)
  std::string password;               // empty = no AUTH
  RedisTlsOptions tls;                // every node, redirect targets included
  uint32_t ttl_seconds = 0;
  uint32_t timeout_ms = 5000;         // deadline of one call, retries included
  uint32_t connections_per_node = 4;  // idle connections kept per node
  bool read_from_replicas = false;
  uint32_t max_attempts = 16;         // tries per call (redirects and retries)
};

struct RedisClusterStats {
  uint64_t moved = 0;              // MOVED redirects followed
  uint64_t ask = 0;                // ASK redirects followed
  uint64_t refreshes = 0;          // slot maps installed
  uint64_t retries = 0;            // attempts after the first
  uint64_t replica_reads = 0;      // reads sent to a replica
  uint64_t replica_fallbacks = 0;  // replica reads that fell back to the master
};

class RedisClusterStore final : public KvStore {
 public:
  // Loads the slot map from the first seed that answers; fails (UNAVAILABLE,
  // UNAUTHENTICATED) when none does.
  static absl::StatusOr<std::unique_ptr<RedisClusterStore>> Connect(
      const RedisClusterOptions& options);

  absl::Status Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) override;
  // GET's reply goes from the socket straight into the pieces
  // (RedisConnection::ReadBulkInto: no reply buffered by hiredis; an array
  // reply, a malformed length or a non-bulk reply past 1 MiB is a protocol
  // error, the connection dropped). Redirects and retries as every call,
  // except that a call which has reported progress through `landed` is not
  // retried: its failure is the call's (a retry could land other bytes where
  // some were reported in for good).
  absl::StatusOr<uint64_t> Get(std::string_view key, absl::Span<const ByteSpan> pieces) override;
  absl::StatusOr<uint64_t> GetStreaming(std::string_view key, absl::Span<const ByteSpan> pieces,
                                        const std::function<void(uint64_t)>& landed) override;
  absl::StatusOr<bool> Exists(std::string_view key) override;
  absl::Status Remove(std::string_view key) override;
  // One pipeline of EXISTS per master (the keys its shard serves in the
  // current map); a key whose reply is a redirect or an error, or whose node
  // failed, is asked again through Exists() (redirects, retries, deadline).
  absl::StatusOr<int64_t> FirstPresent(absl::Span<const std::string> keys,
                                       size_t* failed_key) override;

  // Reloads the slot map now (from the known nodes, then the seeds).
  absl::Status Refresh();
  RedisClusterStats Stats() const;
  // "host:port" of the master serving `slot` in the current map, or "".
  std::string MasterOf(uint32_t slot) const;

 private:
  struct Shard {
    std::shared_ptr<RedisNode> master;
    std::vector<std::shared_ptr<RedisNode>> replicas;
  };
  struct SlotMap {
    uint64_t version = 0;
    std::vector<Shard> shards;
    std::vector<int32_t> shard_of_slot = std::vector<int32_t>(kClusterSlots, -1);
  };
  enum class Access { kRead, kWrite };

  RedisClusterStore(RedisClusterOptions options, std::shared_ptr<const RedisTlsContext> tls)
      : options_(std::move(options)), tls_(std::move(tls)) {}

  // Runs one single-key command with routing, redirects and retries, each
  // reply read within `limits`.
  absl::StatusOr<RedisReply> Execute(std::string_view key, const std::vector<std::string_view>& args,
                                     Access access, const RedisReplyLimits& limits);
  // Execute with each attempt run by `run(node, asking, time left)`: a
  // reply (error replies included) or null when it took the reply itself
  // (returned as is). A failed attempt is retried unless `*final` (when set)
  // is true after it.
  using Attempt = std::function<absl::StatusOr<RedisReply>(RedisNode&, bool, absl::Duration)>;
  absl::StatusOr<RedisReply> ExecuteWith(std::string_view key,
                                         const std::vector<std::string_view>& args, Access access,
                                         const Attempt& run, const bool* final);
  // Reloads the map unless another thread did since `seen_version`.
  absl::Status RefreshIfStale(uint64_t seen_version, absl::Time deadline);
  // CLUSTER SLOTS from `node` within `timeout`, giving up on a node silent
  // for kMapLoadSilence (redis_cluster_store.cc) so that the next one is asked.
  absl::StatusOr<std::shared_ptr<SlotMap>> LoadMap(RedisNode& node, absl::Duration timeout);
  std::shared_ptr<RedisNode> NodeFor(const ClusterNodeAddress& address, bool readonly);
  std::shared_ptr<const SlotMap> CurrentMap() const;

  const RedisClusterOptions options_;
  const std::shared_ptr<const RedisTlsContext> tls_;  // null: plain TCP
  mutable absl::Mutex mu_;
  std::shared_ptr<const SlotMap> map_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<RedisNode>> nodes_ ABSL_GUARDED_BY(mu_);
  absl::Mutex refresh_mu_;  // one map load at a time
  std::atomic<uint64_t> next_replica_{0};
  struct AtomicStats {
    std::atomic<uint64_t> moved{0}, ask{0}, refreshes{0}, retries{0}, replica_reads{0},
        replica_fallbacks{0};
  };
  mutable AtomicStats stats_;
};

}  // namespace swa
