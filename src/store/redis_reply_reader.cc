#include "store/redis_reply_reader.h"

#include <hiredis/hiredis.h>

#include <cstdint>
#include <type_traits>

#include "absl/strings/str_format.h"

namespace swa {
namespace {

// The type of createArray's count in the installed hiredis.
template <typename F>
struct CountOf;
template <typename R, typename Task, typename Count>
struct CountOf<R (*)(Task, Count)> {
  using type = Count;
};
using ArrayCount = CountOf<decltype(redisReplyObjectFunctions::createArray)>::type;

}  // namespace

void RedisReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

template <typename Count>
void* RedisReplyReader::CreateArray(const redisReadTask* task, Count count) {
  Tally& t = *static_cast<Tally*>(task->privdata);
  uint32_t depth = 1;
  for (const redisReadTask* p = task->parent; p != nullptr; p = p->parent) ++depth;
  // 0.14 parses the count as a long long and passes it as an int: a header
  // of 2^31 or more arrives negative (or wrapped), and a negative count other
  // than -1 (nil, not passed here) would leave an array whose element table
  // is null and whose size is huge.
  const int64_t n = static_cast<int64_t>(count);
  const RedisReplyLimits& l = t.limits;
  if (l.max_depth == 0) {
    t.refusal = absl::StrFormat("an array reply of %d elements (this command never answers one)", n);
  } else if (depth > l.max_depth) {
    t.refusal = absl::StrFormat("arrays nested %u deep (at most %u in this command's reply)", depth,
                                l.max_depth);
  } else if (n < 0) {
    t.refusal = absl::StrFormat("an array length of %d", n);
  } else if (static_cast<uint64_t>(n) > l.max_elements - t.elements) {
    t.refusal =
        t.elements == 0
            ? absl::StrFormat("an array of %d elements (at most %u in this command's reply)", n,
                              l.max_elements)
            : absl::StrFormat("arrays of %u elements in all (at most %u in this command's reply)",
                              t.elements + static_cast<uint64_t>(n), l.max_elements);
  }
  if (!t.refusal.empty()) return nullptr;
  t.elements += static_cast<uint64_t>(n);
  return t.base->createArray(task, count);
}

RedisReplyReader::RedisReplyReader() : reader_(redisReaderCreate()) {
  if (reader_ == nullptr) return;
  if (reader_->fn == nullptr || reader_->fn->createArray == nullptr) {
    redisReaderFree(reader_);  // no reply objects to bound: not this library's use
    reader_ = nullptr;
    return;
  }
  tally_.base = reader_->fn;
  functions_ = std::make_unique<redisReplyObjectFunctions>(*reader_->fn);
  functions_->createArray = &CreateArray<ArrayCount>;
  reader_->fn = functions_.get();
  reader_->privdata = &tally_;  // hiredis hands it to every task
}

RedisReplyReader::~RedisReplyReader() {
  if (reader_ != nullptr) redisReaderFree(reader_);  // frees a half-built reply with functions_
}

void RedisReplyReader::Begin(const RedisReplyLimits& limits) {
  tally_.limits = limits;
  tally_.elements = 0;
  tally_.refusal.clear();
  received_ = reader_->len - reader_->pos;
}

bool RedisReplyReader::Feed(const char* data, size_t n) {
  received_ += n;
  return redisReaderFeed(reader_, data, n) == REDIS_OK;
}

absl::StatusOr<RedisReply> RedisReplyReader::Next() {
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK)
    return absl::UnavailableError(tally_.refusal.empty() ? std::string(reader_->errstr) : tally_.refusal);
  return RedisReply(static_cast<redisReply*>(raw));
}

size_t RedisReplyReader::Room() const {
  const size_t max = tally_.limits.max_bytes;
  if (max == SIZE_MAX) return SIZE_MAX;
  return received_ > max ? 0 : max + 1 - received_;
}

std::string RedisReplyReader::BytesRefusal() const {
  return absl::StrFormat("a reply of more than %u bytes (this command's bound)",
                         tally_.limits.max_bytes);
}

bool RedisReplyReader::Pending() const { return reader_->pos < reader_->len || reader_->ridx >= 0; }

const char* RedisReplyReader::error() const { return reader_->errstr; }

}  // namespace swa
