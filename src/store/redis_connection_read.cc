// RedisConnection's reading of replies: through hiredis within the bounds the
// caller names (Read; store/redis_reply_reader.h), and a GET's bulk string
// straight from the socket into the caller's buffers (ReadBulkInto). The
// transport (connect, TLS, Send, Receive) is redis_connection.cc.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/redis_connection.h"

namespace swa {
namespace {

// ReadBulkInto: the longest "$<length>\r\n" line it waits for (lengths are
// below 2^55: 17 digits), and the bounds of a reply other than a bulk string
// (a GET answers an error reply, never an array).
constexpr size_t kMaxBulkHeaderBytes = 32;
constexpr RedisReplyLimits kGetOtherReply{1 << 20, 0, 0};

}  // namespace

absl::StatusOr<RedisReply> RedisConnection::Read(std::string_view what, absl::Duration timeout,
                                                 const RedisReplyLimits& limits) {
  const absl::Time deadline = absl::Now() + timeout;
  auto protocol_error = [&](absl::string_view why) {
    return absl::UnavailableError(absl::StrFormat("%s: %s: protocol error: %s", name_, what, why));
  };
  reader_.Begin(limits);
  // hiredis rescans a line whose end it has not seen from its start at every
  // call: with bytes streaming in, parse again only once they have grown by
  // half since the last parse, or when the socket has nothing more now (so
  // that a reply of n bytes costs O(n) scanning, not O(n^2 / 64 KiB)).
  size_t since_parse = 0;
  bool parse = true;
  for (;;) {
    if (parse || reader_.Room() == 0) {
      absl::StatusOr<RedisReply> r = reader_.Next();
      if (!r.ok()) return protocol_error(r.status().message());
      if (*r != nullptr) {
        ++replies_read_;
        return r;
      }
      since_parse = 0;
      // Never more than limits.max_bytes + 1 bytes taken in for one reply.
      if (reader_.Room() == 0) return protocol_error(reader_.BytesRefusal());
    }
    absl::StatusOr<size_t> got =
        Receive(reinterpret_cast<uint8_t*>(buf_.data()), std::min(buf_.size(), reader_.Room()),
                what, timeout, deadline, limits.max_silence);
    if (!got.ok()) {
      if (since_parse == 0) return got.status();
      absl::StatusOr<RedisReply> r = reader_.Next();  // a whole reply may be in: it comes first
      if (r.ok() && *r != nullptr) {
        ++replies_read_;
        return r;
      }
      return r.ok() ? got.status() : protocol_error(r.status().message());
    }
    if (!reader_.Feed(buf_.data(), *got))
      return absl::ResourceExhaustedError(
          absl::StrFormat("%s: %s: reply buffer: %s", name_, what, reader_.error()));
    since_parse += *got;
    parse = 2 * since_parse >= reader_.received() || !ReadableNow();
  }
}

absl::StatusOr<RedisConnection::BulkRead> RedisConnection::ReadBulkInto(
    std::string_view what, absl::Duration timeout, absl::Span<const ByteSpan> pieces,
    const std::function<void(uint64_t)>& landed) {
  BulkRead out;
  // Bytes hiredis holds already (never, one command at a time): its path.
  auto through_hiredis = [&](size_t have) -> absl::StatusOr<BulkRead> {
    if (have > 0 && !reader_.Feed(buf_.data(), have))
      return absl::ResourceExhaustedError(
          absl::StrFormat("%s: %s: reply buffer: %s", name_, what, reader_.error()));
    // A GET answers nothing else than an error reply: never buffer much of one.
    absl::StatusOr<RedisReply> r = Read(what, timeout, kGetOtherReply);
    if (!r.ok()) return r.status();
    out.kind = BulkRead::kOther;
    out.other = std::move(*r);
    return std::move(out);
  };
  if (reader_.Pending()) return through_hiredis(0);
  const absl::Time deadline = absl::Now() + timeout;
  uint8_t* const buf = reinterpret_cast<uint8_t*>(buf_.data());
  auto protocol_error = [&](std::string_view why) {
    return absl::UnavailableError(
        absl::StrFormat("%s: %s: protocol error: %s", name_, what, why));
  };
  // The first line: "$<length>\r\n" for a bulk string.
  size_t have = 0, eol = 0;
  for (;;) {
    const uint8_t* cr = have < 2 ? nullptr
                                 : static_cast<const uint8_t*>(std::memchr(buf, '\r', have - 1));
    if (cr != nullptr && cr[1] == '\n') {
      eol = static_cast<size_t>(cr - buf);
      break;
    }
    // An array never answers a GET, and hiredis 0.14 allocates the element
    // pointers its header counts (2^31 - 1 of them from 14 bytes): refused.
    if (have > 0 && buf[0] == '*') return protocol_error("an array reply");
    if (have > 0 && buf[0] != '$') return through_hiredis(have);
    if (cr != nullptr) return protocol_error("a bulk length line with a CR but no LF");
    if (have > kMaxBulkHeaderBytes) return protocol_error("a bulk length line without CRLF");
    absl::StatusOr<size_t> got = Receive(buf + have, buf_.size() - have, what, timeout, deadline);
    if (!got.ok()) return got.status();
    have += *got;
  }
  if (buf[0] == '*') return protocol_error("an array reply");
  if (buf[0] != '$') return through_hiredis(have);
  // "-1" (nil) or decimal digits, below 2^55: anything else (another sign,
  // no digits, a length no store holds) is out of step with the protocol.
  int64_t len = 0;
  if (eol == 3 && buf[1] == '-' && buf[2] == '1') {
    len = -1;
  } else {
    if (eol < 2) return protocol_error("a bulk string without a length");
    for (size_t i = 1; i < eol; ++i) {
      const bool digit = buf[i] >= '0' && buf[i] <= '9';
      if (digit) len = len * 10 + (buf[i] - '0');  // len < 2^55 before: no overflow
      if (!digit || len >= (int64_t{1} << 55))
        return protocol_error(absl::StrCat(
            "bulk string length \"",
            absl::CHexEscape(absl::string_view(reinterpret_cast<const char*>(buf) + 1, eol - 1)),
            "\""));
    }
  }
  size_t pos = eol + 2;  // first unconsumed byte of buf
  if (len == -1) {
    if (have > pos) return protocol_error("bytes past a nil reply");  // out of step
    ++replies_read_;
    out.kind = BulkRead::kNil;
    return out;
  }
  const uint64_t size = static_cast<uint64_t>(len);
  const bool into = size == TotalBytes(pieces);
  // Copies `n` body bytes from `src` into the pieces (or drops them).
  size_t piece = 0;
  uint64_t at = 0, body = 0;
  auto put = [&](const uint8_t* src, uint64_t n) {
    body += n;
    if (!into) return;
    while (n > 0) {
      const uint64_t k = std::min<uint64_t>(n, pieces[piece].size() - at);
      if (k > 0) std::memcpy(pieces[piece].data() + at, src, k);
      src += k;
      n -= k;
      at += k;
      if (at == pieces[piece].size()) ++piece, at = 0;
    }
  };
  while (piece < pieces.size() && pieces[piece].empty()) ++piece;
  const uint64_t buffered = std::min<uint64_t>(have - pos, size);
  put(buf + pos, buffered);
  pos += buffered;
  // The whole size is reported only once the bulk's CRLF has been checked.
  if (into && landed && body > 0 && body < size) landed(body);
  while (body < size) {
    while (into && piece < pieces.size() && at == pieces[piece].size()) ++piece, at = 0;
    while (into && piece < pieces.size() && pieces[piece].empty()) ++piece;
    uint8_t* dst = into ? pieces[piece].data() + at : buf;
    const uint64_t cap = into ? pieces[piece].size() - at : buf_.size();
    absl::StatusOr<size_t> got =
        Receive(dst, std::min<uint64_t>(cap, size - body), what, timeout, deadline);
    if (!got.ok()) return got.status();
    if (into) {
      body += *got;
      at += *got;
      if (at == pieces[piece].size()) ++piece, at = 0;
      if (landed && body < size) landed(body);
    } else {
      body += *got;
    }
  }
  // The bulk's closing "\r\n": what is left of buf, then the socket.
  uint8_t tail[2];
  size_t tail_have = 0;
  while (tail_have < 2 && pos < have) tail[tail_have++] = buf[pos++];
  while (tail_have < 2) {
    absl::StatusOr<size_t> got = Receive(tail + tail_have, 2 - tail_have, what, timeout, deadline);
    if (!got.ok()) return got.status();
    tail_have += *got;
  }
  if (tail[0] != '\r' || tail[1] != '\n' || pos < have)
    return absl::UnavailableError(absl::StrFormat(
        "%s: %s: protocol error: a bulk string of %u bytes not followed by CRLF alone", name_,
        what, size));
  ++replies_read_;
  if (into && landed && size > 0) landed(size);
  out.kind = BulkRead::kBulk;
  out.size = size;
  return out;
}

absl::StatusOr<RedisReply> RedisConnection::Command(const std::vector<std::string_view>& args,
                                                    absl::Duration timeout,
                                                    const RedisReplyLimits& limits) {
  if (absl::Status s = Send({args}, timeout, limits.max_silence); !s.ok()) return s;
  return Read(args[0], timeout, limits);
}

}  // namespace swa
