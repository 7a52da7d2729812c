#include "store/redis_cluster_store.h"

#include "store/redis_command.h"
#include "store/redis_pool.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace swa {
namespace {

constexpr absl::Duration kBackoffBase = absl::Milliseconds(10);
constexpr absl::Duration kBackoffCap = absl::Milliseconds(250);
// A slot-map load gives up on a node that connects no faster, or sends no
// byte of CLUSTER SLOTS's reply for this long, and asks the next one; a node
// that keeps sending is read until the reply is whole, refused by its bounds
// or the refresh's deadline passes (a large map on a slow link is not cut
// off).
constexpr absl::Duration kMapLoadSilence = absl::Milliseconds(1000);

// "MOVED 3999 127.0.0.1:6381" / "ASK ..." -> the target address.
absl::StatusOr<ClusterNodeAddress> RedirectTarget(std::string_view text) {
  const std::string line(text);
  const std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
  absl::StatusOr<std::vector<ClusterNodeAddress>> a =
      parts.size() < 3 ? absl::InvalidArgumentError("") : ParseClusterNodes(parts[2]);
  if (!a.ok()) return absl::UnknownError(absl::StrCat("malformed redirect \"", line, "\""));
  return (*a)[0];
}

void Backoff(int failures, absl::Time deadline) {
  absl::Duration d = kBackoffBase * (1 << std::min(failures, 6));
  d = std::min({d, kBackoffCap, deadline - absl::Now()});
  if (d > absl::ZeroDuration()) absl::SleepFor(d);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisClusterStore>> RedisClusterStore::Connect(
    const RedisClusterOptions& options) {
  if (options.seeds.empty())
    return absl::InvalidArgumentError("redis cluster store: no seed node");
  if (options.timeout_ms == 0)
    return absl::InvalidArgumentError("redis cluster store: timeout_ms = 0 (use a positive timeout)");
  if (options.max_attempts == 0)
    return absl::InvalidArgumentError("redis cluster store: max_attempts = 0 (use at least 1)");
  if (!options.username.empty() && options.password.empty())
    return absl::InvalidArgumentError(absl::StrFormat(
        "redis cluster store: username \"%s\" without a password (AUTH username password)",
        options.username));
  std::shared_ptr<const RedisTlsContext> tls;
  if (options.tls.enabled) {
    absl::StatusOr<std::shared_ptr<const RedisTlsContext>> made =
        RedisTlsContext::Create(options.tls, "redis cluster store");
    if (!made.ok()) return made.status();
    tls = std::move(*made);
  }
  std::unique_ptr<RedisClusterStore> store(new RedisClusterStore(options, std::move(tls)));
  {
    absl::MutexLock lock(&store->mu_);
    store->map_ = std::make_shared<SlotMap>();
  }
  if (absl::Status s = store->Refresh(); !s.ok()) return s;
  return store;
}

std::shared_ptr<const RedisClusterStore::SlotMap> RedisClusterStore::CurrentMap() const {
  absl::MutexLock lock(&mu_);
  return map_;
}

std::shared_ptr<RedisNode> RedisClusterStore::NodeFor(const ClusterNodeAddress& address,
                                                      bool readonly) {
  const std::string name = absl::StrCat(address.ToString(), readonly ? "/readonly" : "");
  absl::MutexLock lock(&mu_);
  std::shared_ptr<RedisNode>& node = nodes_[name];
  if (node == nullptr) {
    node = std::make_shared<RedisNode>(address, options_.username, options_.password, tls_,
                                       options_.connections_per_node, readonly);
  }
  return node;
}

absl::StatusOr<std::shared_ptr<RedisClusterStore::SlotMap>> RedisClusterStore::LoadMap(
    RedisNode& node, absl::Duration timeout) {
  RedisReplyLimits limits = kRedisClusterSlotsReply;
  limits.max_silence = kMapLoadSilence;
  absl::StatusOr<RedisReply> r = node.Run({"CLUSTER", "SLOTS"}, false, timeout, limits);
  if (!r.ok()) return r.status();
  const redisReply& top = **r;
  const std::string& where = node.name();
  if (top.type == REDIS_REPLY_ERROR) {
    absl::Status e = ErrorReplyStatus(ReplyText(top), absl::StrCat(node.name(), ": CLUSTER SLOTS"));
    return absl::IsUnauthenticated(e) ? e : absl::UnavailableError(e.message());
  }
  if (top.type != REDIS_REPLY_ARRAY)
    return absl::UnavailableError(absl::StrCat(where, ": CLUSTER SLOTS: unexpected reply"));
  auto map = std::make_shared<SlotMap>();
  absl::flat_hash_map<std::string, int32_t> shard_by_master;
  for (size_t i = 0; i < top.elements; ++i) {
    const redisReply* range = top.element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
        range->element[0]->type != REDIS_REPLY_INTEGER || range->element[1]->type != REDIS_REPLY_INTEGER)
      return absl::UnavailableError(absl::StrCat(where, ": CLUSTER SLOTS: malformed range"));
    const long long first = range->element[0]->integer, last = range->element[1]->integer;
    if (first < 0 || last >= kClusterSlots || first > last)
      return absl::UnavailableError(absl::StrCat(where, ": CLUSTER SLOTS: bad slot range"));
    std::vector<ClusterNodeAddress> members;  // master first
    for (size_t j = 2; j < range->elements; ++j) {
      const redisReply* n = range->element[j];
      if (n->type != REDIS_REPLY_ARRAY || n->elements < 2 ||
          (n->element[0]->type != REDIS_REPLY_STRING && n->element[0]->type != REDIS_REPLY_STATUS) ||
          n->element[1]->type != REDIS_REPLY_INTEGER)
        return absl::UnavailableError(absl::StrCat(where, ": CLUSTER SLOTS: malformed node"));
      const long long port = n->element[1]->integer;
      if (port < 1 || port > 65535) {
        // A replica whose port is unknown (0) or out of range cannot be
        // reached: left out. A master's is a map no call can use.
        if (j > 2) continue;
        return absl::UnavailableError(absl::StrFormat(
            "%s: CLUSTER SLOTS: slots %d ... %d: master port %d outside 1 ... 65535", where, first,
            last, port));
      }
      std::string host(ReplyText(*n->element[0]));
      if (host.empty() || host == "?") host = node.address().host;  // "the node you asked"
      members.push_back({host, static_cast<uint32_t>(port)});
    }
    auto [it, added] = shard_by_master.emplace(members[0].ToString(), map->shards.size());
    if (added) {
      Shard shard;
      shard.master = NodeFor(members[0], false);
      for (size_t j = 1; j < members.size(); ++j) shard.replicas.push_back(NodeFor(members[j], true));
      map->shards.push_back(std::move(shard));
    }
    for (long long s = first; s <= last; ++s) map->shard_of_slot[s] = it->second;
  }
  if (map->shards.empty())
    return absl::UnavailableError(absl::StrCat(where, ": CLUSTER SLOTS: no slot is served"));
  return map;
}

absl::Status RedisClusterStore::Refresh() {
  return RefreshIfStale(CurrentMap()->version,
                        absl::Now() + absl::Milliseconds(options_.timeout_ms));
}

absl::Status RedisClusterStore::RefreshIfStale(uint64_t seen_version, absl::Time deadline) {
  absl::MutexLock refresh(&refresh_mu_);
  std::shared_ptr<const SlotMap> current = CurrentMap();
  if (current->version != seen_version) return absl::OkStatus();  // another thread reloaded it
  // Known masters first, then replicas, then the seeds: a dead seed is not needed.
  std::vector<ClusterNodeAddress> candidates;
  for (const Shard& s : current->shards) candidates.push_back(s.master->address());
  for (const Shard& s : current->shards)
    for (const auto& r : s.replicas) candidates.push_back(r->address());
  candidates.insert(candidates.end(), options_.seeds.begin(), options_.seeds.end());
  absl::Status last = absl::UnavailableError("redis cluster store: no node to ask for the slot map");
  std::vector<std::string> tried;
  for (const ClusterNodeAddress& a : candidates) {
    if (std::find(tried.begin(), tried.end(), a.ToString()) != tried.end()) continue;
    tried.push_back(a.ToString());
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::StatusOr<std::shared_ptr<SlotMap>> loaded = LoadMap(*NodeFor(a, false), left);
    if (!loaded.ok()) {
      if (absl::IsUnauthenticated(loaded.status())) return loaded.status();
      last = loaded.status();
      continue;
    }
    (*loaded)->version = current->version + 1;
    absl::MutexLock lock(&mu_);
    map_ = std::move(*loaded);
    ++stats_.refreshes;
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrFormat(
      "redis cluster store: no node answered CLUSTER SLOTS (tried %s); last: %s",
      absl::StrJoin(tried, ", "), last.message()));
}

absl::StatusOr<RedisReply> RedisClusterStore::Execute(std::string_view key,
                                                      const std::vector<std::string_view>& args,
                                                      Access access,
                                                      const RedisReplyLimits& limits) {
  return ExecuteWith(
      key, args, access,
      [&](RedisNode& node, bool asking, absl::Duration left) {
        return node.Run(args, asking, left, limits);
      },
      nullptr);
}

absl::StatusOr<RedisReply> RedisClusterStore::ExecuteWith(std::string_view key,
                                                          const std::vector<std::string_view>& args,
                                                          Access access, const Attempt& run,
                                                          const bool* final) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(options_.timeout_ms);
  const uint32_t slot = ClusterKeySlot(key);
  std::shared_ptr<RedisNode> redirect;  // from MOVED or ASK, for the next attempt only
  bool asking = false, replica_failed = false;
  int failures = 0, moves = 0;
  absl::Status last;
  for (uint32_t attempt = 0; attempt < options_.max_attempts; ++attempt) {
    if (attempt > 0) ++stats_.retries;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    std::shared_ptr<const SlotMap> map = CurrentMap();
    std::shared_ptr<RedisNode> node = std::move(redirect);
    bool replica = false;
    if (node == nullptr) {
      const int32_t shard = map->shard_of_slot[slot];
      if (shard < 0) {
        last = absl::UnavailableError(absl::StrFormat("slot %u is served by no node in the map", slot));
        if (absl::Status s = RefreshIfStale(map->version, deadline); absl::IsUnauthenticated(s)) return s;
        Backoff(failures++, deadline);
        continue;
      }
      const Shard& owner = map->shards[shard];
      node = owner.master;
      if (access == Access::kRead && options_.read_from_replicas && !replica_failed &&
          !owner.replicas.empty()) {
        node = owner.replicas[next_replica_++ % owner.replicas.size()];
        replica = true;
        ++stats_.replica_reads;
      }
    }
    absl::StatusOr<RedisReply> r = run(*node, std::exchange(asking, false), left);
    if (!r.ok()) {
      if (absl::IsUnauthenticated(r.status())) return r.status();
      last = r.status();
      node->DropIdle();
      if (final != nullptr && *final) return r.status();
      if (replica) {  // read the master instead, right away
        replica_failed = true;
        ++stats_.replica_fallbacks;
        continue;
      }
      if (absl::Status s = RefreshIfStale(map->version, deadline); absl::IsUnauthenticated(s)) return s;
      Backoff(failures++, deadline);
      continue;
    }
    if (*r == nullptr || (*r)->type != REDIS_REPLY_ERROR) return r;
    const std::string_view text = ReplyText(**r);
    const bool moved = text.starts_with("MOVED "), ask = text.starts_with("ASK ");
    if (moved || ask) {
      absl::StatusOr<ClusterNodeAddress> target = RedirectTarget(text);
      if (!target.ok()) return target.status();
      last = absl::UnavailableError(absl::StrFormat("%s replied \"%s\"", node->name(), text));
      redirect = NodeFor(*target, false);
      if (ask) {
        ++stats_.ask;
        asking = true;
      } else {
        ++stats_.moved;
        if (replica) replica_failed = true;  // a replica not serving the slot: use masters
        (void)RefreshIfStale(map->version, deadline);
        // A second MOVED in one call: the nodes disagree on the owner (a slot
        // assignment reaching one node before the other); wait for them to
        // agree instead of spending the budget bouncing between them.
        if (moves++ > 0) Backoff(failures++, deadline);
      }
      continue;
    }
    if (IsTransientReply(text)) {
      // UNAVAILABLE, naming the node and the command.
      last = ErrorReplyStatus(text, absl::StrFormat("%s: %s", node->name(), args[0]));
      if (replica) {
        replica_failed = true;
        ++stats_.replica_fallbacks;
        continue;
      }
      if (!text.starts_with("TRYAGAIN")) (void)RefreshIfStale(map->version, deadline);
      Backoff(failures++, deadline);
      continue;
    }
    return ErrorReplyStatus(text, absl::StrFormat("%s: %s", node->name(), args[0]));
  }
  const std::string what = absl::StrFormat(
      "redis cluster store %s (slot %u): %s", args[0], slot,
      last.ok() ? std::string("no attempt was made") : std::string(last.message()));
  if (absl::Now() >= deadline || absl::IsDeadlineExceeded(last))
    return absl::DeadlineExceededError(
        absl::StrFormat("%s; deadline of %u ms exceeded", what, options_.timeout_ms));
  return absl::UnavailableError(
      absl::StrFormat("%s; retry budget of %u attempts spent", what, options_.max_attempts));
}

absl::Status RedisClusterStore::Put(std::string_view key, absl::Span<const ConstByteSpan> pieces) {
  std::string joined, ttl;
  const std::vector<std::string_view> args =
      BlobSetCommand(key, pieces, options_.ttl_seconds, &joined, &ttl);
  return Execute(key, args, Access::kWrite, kRedisShortReply).status();  // +OK
}

absl::StatusOr<uint64_t> RedisClusterStore::Get(std::string_view key,
                                                absl::Span<const ByteSpan> pieces) {
  return GetStreaming(key, pieces, nullptr);
}

absl::StatusOr<uint64_t> RedisClusterStore::GetStreaming(
    std::string_view key, absl::Span<const ByteSpan> pieces,
    const std::function<void(uint64_t)>& landed) {
  const std::vector<std::string_view> args = {"GET", key};
  RedisConnection::BulkRead got;
  bool reported = false;  // progress reported: no retry after a failure
  std::function<void(uint64_t)> report;
  if (landed) {
    report = [&](uint64_t n) {
      reported = true;
      landed(n);
    };
  }
  absl::StatusOr<RedisReply> r = ExecuteWith(
      key, args, Access::kRead,
      [&](RedisNode& node, bool asking, absl::Duration left) {
        return node.RunRead(args, asking, left,
                            [&](RedisConnection& c) -> absl::StatusOr<RedisReply> {
                              absl::StatusOr<RedisConnection::BulkRead> b =
                                  c.ReadBulkInto("GET", left, pieces, report);
                              if (!b.ok()) return b.status();
                              if (b->kind == RedisConnection::BulkRead::kOther)
                                return std::move(b->other);  // an error reply, e.g. MOVED
                              got = std::move(*b);
                              return RedisReply();
                            });
      },
      &reported);
  if (!r.ok()) return r.status();
  if (*r == nullptr) {
    if (got.kind == RedisConnection::BulkRead::kNil)
      return absl::NotFoundError("redis cluster store: no blob under this key");
    return got.size;  // kBulk: in the pieces when it is their total
  }
  // Another reply than a bulk string or nil (read by hiredis, at most 1 MiB).
  const redisReply& reply = **r;
  if (reply.type == REDIS_REPLY_NIL) return absl::NotFoundError("redis cluster store: no blob under this key");
  return absl::UnknownError(absl::StrFormat("redis cluster store GET: unexpected reply type %d", reply.type));
}

absl::StatusOr<bool> RedisClusterStore::Exists(std::string_view key) {
  absl::StatusOr<RedisReply> r =
      Execute(key, {"EXISTS", key}, Access::kRead, kRedisShortReply);  // :0 or :1
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_INTEGER)
    return absl::UnknownError(absl::StrFormat("redis cluster store EXISTS: unexpected reply type %d", (*r)->type));
  return (*r)->integer != 0;
}

absl::StatusOr<int64_t> RedisClusterStore::FirstPresent(absl::Span<const std::string> keys,
                                                        size_t* failed_key) {
  // answer[i]: 1 present, 0 absent, -1 not answered by a pipeline.
  std::vector<int8_t> answer(keys.size(), -1);
  std::shared_ptr<const SlotMap> map = CurrentMap();
  std::vector<std::vector<size_t>> by_shard(map->shards.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const int32_t shard = map->shard_of_slot[ClusterKeySlot(keys[i])];
    if (shard >= 0) by_shard[static_cast<size_t>(shard)].push_back(i);
  }
  const absl::Duration timeout = absl::Milliseconds(options_.timeout_ms);
  for (size_t s = 0; s < by_shard.size(); ++s) {
    if (by_shard[s].empty() || map->shards[s].master == nullptr) continue;
    std::vector<std::vector<std::string_view>> commands;
    commands.reserve(by_shard[s].size());
    for (size_t i : by_shard[s]) commands.push_back({"EXISTS", keys[i]});
    // :0 or :1 each. When the pipeline fails, the replies read before the
    // failure still answer their keys; the others take the per-key path below.
    std::vector<RedisReply> replies;
    (void)map->shards[s].master->RunPipeline(commands, timeout, kRedisShortReply, &replies);
    for (size_t j = 0; j < replies.size(); ++j) {
      const redisReply& r = *replies[j];
      if (r.type == REDIS_REPLY_INTEGER) answer[by_shard[s][j]] = r.integer != 0 ? 1 : 0;
    }
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (answer[i] < 0) {
      absl::StatusOr<bool> found = Exists(keys[i]);
      if (!found.ok()) {
        *failed_key = i;
        return found.status();
      }
      answer[i] = *found ? 1 : 0;
    }
    if (answer[i] == 1) return static_cast<int64_t>(i);
  }
  return int64_t{-1};
}

absl::Status RedisClusterStore::Remove(std::string_view key) {
  absl::StatusOr<RedisReply> r =
      Execute(key, {"DEL", key}, Access::kWrite, kRedisShortReply);  // :0 or :1
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_INTEGER)
    return absl::UnknownError(absl::StrFormat("redis cluster store DEL: unexpected reply type %d", (*r)->type));
  if ((*r)->integer == 0) return absl::NotFoundError("redis cluster store: no blob under this key");
  return absl::OkStatus();
}

RedisClusterStats RedisClusterStore::Stats() const {
  RedisClusterStats s;
  s.moved = stats_.moved;
  s.ask = stats_.ask;
  s.refreshes = stats_.refreshes;
  s.retries = stats_.retries;
  s.replica_reads = stats_.replica_reads;
  s.replica_fallbacks = stats_.replica_fallbacks;
  return s;
}

std::string RedisClusterStore::MasterOf(uint32_t slot) const {
  std::shared_ptr<const SlotMap> map = CurrentMap();
  if (slot >= kClusterSlots || map->shard_of_slot[slot] < 0) return "";
  return map->shards[map->shard_of_slot[slot]].master->address().ToString();
}

}  // namespace swa
