// hiredis's reply parser (read.h) with bounds on what one reply may cost: a
// broken or hostile server must not make the client buffer or allocate
// without bound. hiredis buffers a reply until it is whole, and allocates an
// array's element table from the count in its header (`*2000000000\r\n`,
// 14 bytes, asks 0.14 for 16 GB); it has no limit of its own in 0.14. Every
// reply read through it is read with a RedisReplyLimits that the call site
// chooses for its command (RedisConnection::Read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct redisReply;
struct redisReader;
struct redisReadTask;
struct redisReplyObjectFunctions;

namespace swa {

struct RedisReplyDeleter {
  void operator()(redisReply* r) const;
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

// Bounds on one reply. Past any of them the reply is refused (a protocol
// error; the connection is not used again).
struct RedisReplyLimits {
  // Bytes of the reply as received (its parsed part included): no more than
  // max_bytes + 1 are taken in for it.
  size_t max_bytes = 0;
  // The element counts of its arrays' headers, summed (nested ones included),
  // checked at each header before hiredis allocates the array.
  uint64_t max_elements = 0;
  // Arrays nested in one another: 0 = no array at all, 1 = an array of
  // scalars...
  uint32_t max_depth = 0;
  // The longest the server may stay silent (no byte of the reply arriving,
  // no byte of the command taken) within the call's timeout: past it the
  // call fails UNAVAILABLE, "no byte for <ms>", while a server that keeps
  // sending is read until the reply is whole, refused or the timeout passes.
  // RedisConnectionPool::Run and RunPipeline also open a new connection
  // within it. Infinite (the default): only the timeout applies.
  absl::Duration max_silence = absl::InfiniteDuration();
};

// The reply of a command that answers a status, an integer, nil, a short
// string or an error reply, never an array: SET, EXISTS, DEL, PING, AUTH,
// SELECT, READONLY, ASKING. 64 KiB leaves room for any error reply (MOVED
// and ASK name a host of at most 255 bytes).
inline constexpr RedisReplyLimits kRedisShortReply{64 * 1024, 0, 0};

class RedisReplyReader {
 public:
  RedisReplyReader();
  ~RedisReplyReader();
  RedisReplyReader(const RedisReplyReader&) = delete;
  RedisReplyReader& operator=(const RedisReplyReader&) = delete;

  // False when hiredis could not allocate its reader.
  bool ok() const { return reader_ != nullptr; }

  // A new reply starts: its bounds. The bytes buffered already (a pipeline's
  // next replies) count towards it.
  void Begin(const RedisReplyLimits& limits);
  // Appends received bytes; false when hiredis cannot grow its buffer.
  bool Feed(const char* data, size_t n);
  // The reply when it is whole, null when more bytes are needed, or the
  // refusal: hiredis's protocol errors, and an array past the limits (its
  // count or depth named). Not checked here: the byte bound, which is
  // Room()'s and BytesRefusal()'s.
  absl::StatusOr<RedisReply> Next();
  // How many more bytes may be fed for the reply in progress: 0 once more
  // than max_bytes are in without a whole reply (then BytesRefusal()).
  size_t Room() const;
  // Bytes of the reply in progress taken in so far.
  size_t received() const { return received_; }
  std::string BytesRefusal() const;

  // True when bytes are buffered or a reply is half parsed.
  bool Pending() const;
  // hiredis's message for a failed Feed.
  const char* error() const;

 private:
  // The bounds of the reply in progress, as the element hook sees them
  // (through hiredis's task privdata).
  struct Tally {
    RedisReplyLimits limits;
    uint64_t elements = 0;
    std::string refusal;  // set by the hook when it refuses an array
    const redisReplyObjectFunctions* base = nullptr;  // hiredis's own
  };
  // hiredis's createArray, bounded: refuses (null, which hiredis reports as
  // out of memory, and sets Tally::refusal) an array past the limits before
  // hiredis's own allocates it. `Count` is an int in hiredis 0.14, a size_t
  // in 1.x.
  template <typename Count>
  static void* CreateArray(const redisReadTask* task, Count count);

  redisReader* reader_ = nullptr;
  std::unique_ptr<redisReplyObjectFunctions> functions_;
  Tally tally_;
  size_t received_ = 0;  // bytes of the reply in progress, since Begin
};

}  // namespace swa
