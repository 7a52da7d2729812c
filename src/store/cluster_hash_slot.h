// Redis Cluster key routing, pure arithmetic (no I/O, no hiredis): the
// CRC16/XMODEM of a key's hash tag modulo 16384, and the seed list parser.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace swa {

inline constexpr uint32_t kClusterSlots = 16384;

// CRC16/XMODEM (polynomial 0x1021, initial value 0, no reflection, no final
// XOR): check value crc16("123456789") = 0x31C3.
uint16_t Crc16Xmodem(std::string_view bytes);

// The part of `key` that is hashed: the bytes between the first '{' and the
// first '}' after it when that span is non-empty, else the whole key.
std::string_view ClusterHashTag(std::string_view key);

// The cluster slot of `key`, 0 ... 16383.
uint32_t ClusterKeySlot(std::string_view key);

struct ClusterNodeAddress {
  std::string host;
  uint32_t port = 0;
  std::string ToString() const;  // "host:port" ("[v6]:port" for IPv6)
  bool operator==(const ClusterNodeAddress&) const = default;
};

// Parses "host:port,host:port" (spaces around entries ignored, "[v6]:port"
// accepted). INVALID_ARGUMENT naming the entry for an empty list, a missing
// or bad port.
absl::StatusOr<std::vector<ClusterNodeAddress>> ParseClusterNodes(std::string_view nodes);

}  // namespace swa
