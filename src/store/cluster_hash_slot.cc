#include "store/cluster_hash_slot.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace swa {
namespace {

constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i << 8;
    for (int k = 0; k < 8; ++k) crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
    table[i] = static_cast<uint16_t>(crc);
  }
  return table;
}

constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

}  // namespace

uint16_t Crc16Xmodem(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char b : bytes)
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ b) & 0xFF]);
  return crc;
}

std::string_view ClusterHashTag(std::string_view key) {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

uint32_t ClusterKeySlot(std::string_view key) {
  return Crc16Xmodem(ClusterHashTag(key)) % kClusterSlots;
}

std::string ClusterNodeAddress::ToString() const {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::vector<ClusterNodeAddress>> ParseClusterNodes(std::string_view nodes) {
  std::vector<ClusterNodeAddress> out;
  for (absl::string_view raw : absl::StrSplit(absl::string_view(nodes.data(), nodes.size()), ',')) {
    const absl::string_view entry = absl::StripAsciiWhitespace(raw);
    if (entry.empty()) continue;
    const size_t colon = entry.rfind(':');
    if (colon == absl::string_view::npos || colon == 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("redis cluster nodes: \"%s\" is not host:port", entry));
    absl::string_view host = entry.substr(0, colon);
    // An IPv6 host is written in brackets ("[::1]:7000"); a bracket anywhere
    // else, or a colon outside brackets, is a malformed entry ("[::1",
    // "::1:7000"), not a host name.
    const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
    if (bracketed) host = host.substr(1, host.size() - 2);
    if (host.find_first_of(bracketed ? "[]" : "[]:") != absl::string_view::npos)
      return absl::InvalidArgumentError(absl::StrFormat(
          "redis cluster nodes: \"%s\" is not host:port (an IPv6 host is written [host]:port)", entry));
    uint32_t port = 0;
    if (!absl::SimpleAtoi(entry.substr(colon + 1), &port) || port == 0 || port > 65535 ||
        host.empty())
      return absl::InvalidArgumentError(absl::StrFormat(
          "redis cluster nodes: \"%s\" has no valid host and port 1 ... 65535", entry));
    out.push_back({std::string(host), port});
  }
  if (out.empty())
    return absl::InvalidArgumentError(
        "redis cluster nodes: no seed node (expected \"host:port,host:port\")");
  return out;
}

}  // namespace swa
