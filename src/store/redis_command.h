// The Redis command of a blob put, shared by the single-server and the cluster
// stores: one SET of the whole blob (atomic for readers), with an expiry when
// asked. hiredis copies the value into its output buffer anyway, so joining
// the pieces first costs one copy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "store/kv_store.h"

namespace swa {

// The argument list of `SET key value [EX ttl]`; `joined` and `ttl` keep the
// bytes the views point into and must outlive the command.
inline std::vector<std::string_view> BlobSetCommand(std::string_view key,
                                                    absl::Span<const ConstByteSpan> pieces,
                                                    uint32_t ttl_seconds, std::string* joined,
                                                    std::string* ttl) {
  std::string_view value;
  if (pieces.size() == 1) {
    value = std::string_view(reinterpret_cast<const char*>(pieces[0].data()), pieces[0].size());
  } else {
    joined->resize(TotalBytes(pieces));
    GatherInto(pieces, reinterpret_cast<uint8_t*>(joined->data()));
    value = *joined;
  }
  std::vector<std::string_view> args = {"SET", key, value};
  if (ttl_seconds != 0) {
    *ttl = absl::StrCat(ttl_seconds);
    args.push_back("EX");
    args.push_back(*ttl);
  }
  return args;
}

}  // namespace swa
