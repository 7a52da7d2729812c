// What TLS costs the Redis store: one DeepSeek-V4-like blob (1,415,104 bytes)
// written with SET and read with GET, one call at a time, through raw hiredis
// (plain TCP, the baseline), the store over plain TCP, and the store over TLS
// (OpenSSL, verification on), against one redis-server started here with a
// plain and a TLS port and certificates made by the openssl CLI
// (tests/unit/redis_tls_harness.h). The three are interleaved in rounds so
// that load from other processes hits them alike; prints the median time per
// call and GB/s as a Markdown table; every read is checked against the blob
// after its timed batch. The hiredis GET copies the reply into the caller's
// buffer, as the store does (docs/store.md, "Redis TLS and ACL users").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#if defined(SWACACHE_HAVE_REDIS)
#include <hiredis/hiredis.h>

#include "store/redis_store.h"
#include "tests/unit/redis_tls_harness.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBlob = 1415104;
constexpr int kRounds = 7, kCalls = 40;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  swa::testing::TlsFiles files;
  if (!files.ok()) {
    std::printf("cannot make the certificates: %s\n", files.error().c_str());
    return 1;
  }
  swa::testing::TlsRedisServer server(files, {});
  if (!server.ok()) {
    std::printf("skipped: redis-server did not start with a TLS port: %s\n", server.error().c_str());
    return 0;
  }
  std::string blob(kBlob, '\0');
  for (size_t i = 0; i < kBlob; ++i) blob[i] = static_cast<char>(i * 131 + 7);
  std::string out(kBlob, '\0');

  redisContext* raw = redisConnect("127.0.0.1", server.port());
  if (raw == nullptr || raw->err != 0) return 1;
  swa::RedisStoreOptions plain_options;
  plain_options.port = static_cast<uint32_t>(server.port());
  swa::RedisStoreOptions tls_options = plain_options;
  tls_options.port = static_cast<uint32_t>(server.tls_port());
  tls_options.tls.enabled = true;
  tls_options.tls.ca_file = files.path("ca.crt");
  auto plain = swa::RedisStore::Connect(plain_options);
  auto tls = swa::RedisStore::Connect(tls_options);
  if (!plain.ok() || !tls.ok()) {
    std::printf("connect: %s / %s\n", plain.status().ToString().c_str(), tls.status().ToString().c_str());
    return 1;
  }
  const swa::ConstByteSpan put[1] = {
      swa::ConstByteSpan(reinterpret_cast<const uint8_t*>(blob.data()), blob.size())};
  const swa::ByteSpan get[1] = {swa::ByteSpan(reinterpret_cast<uint8_t*>(out.data()), out.size())};

  // [what][op] -> seconds per call, one entry per round.
  std::vector<double> t[3][2];
  const char* names[3] = {"hiredis, plain TCP", "store, plain TCP", "store, TLS"};
  for (int round = 0; round < kRounds; ++round) {
    for (int what = 0; what < 3; ++what) {
      for (int op = 0; op < 2; ++op) {
        const auto t0 = Clock::now();
        for (int i = 0; i < kCalls; ++i) {
          bool ok = true;
          if (what == 0) {
            auto* r = static_cast<redisReply*>(op == 0 ? redisCommand(raw, "SET bench %b", blob.data(), blob.size())
                                                       : redisCommand(raw, "GET bench"));
            ok = r != nullptr && r->type != REDIS_REPLY_ERROR && (op == 0 || r->len == static_cast<long>(kBlob));
            if (ok && op == 1) std::copy(r->str, r->str + kBlob, out.begin());  // as the store copies out
            if (r != nullptr) freeReplyObject(r);
          } else {
            swa::RedisStore& s = what == 1 ? **plain : **tls;
            ok = op == 0 ? s.Put("bench", put).ok() : s.Get("bench", get).ok();
          }
          if (!ok) {
            std::printf("%s failed\n", names[what]);
            return 1;
          }
        }
        t[what][op].push_back(std::chrono::duration<double>(Clock::now() - t0).count() / kCalls);
        if (op == 1 && out != blob) {  // checked outside the timed calls
          std::printf("%s read other bytes\n", names[what]);
          return 1;
        }
        out.assign(kBlob, '\0');
      }
    }
  }
  redisFree(raw);
  std::printf("blob %zu bytes; %d rounds of %d calls each, interleaved; median per call\n\n", kBlob,
              kRounds, kCalls);
  std::printf("| client | SET us | SET GB/s | GET us | GET GB/s |\n|---|---|---|---|---|\n");
  for (int what = 0; what < 3; ++what) {
    const double s = Median(t[what][0]), g = Median(t[what][1]);
    std::printf("| %s | %.0f | %.2f | %.0f | %.2f |\n", names[what], s * 1e6, kBlob / s / 1e9, g * 1e6,
                kBlob / g / 1e9);
  }
  return 0;
}

#else
int main() {
  std::printf("skipped: this build has no Redis store (hiredis not found)\n");
  return 0;
}
#endif
