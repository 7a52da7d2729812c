// The one rule for versioned structs (every struct of swacache.h that starts
// with `size_t struct_size`): each has a list of its released versions,
// oldest first, the last being this library's. A caller's struct_size must
// be the sizeof of one of them (INVALID_ARGUMENT naming the struct and the
// size otherwise). An input struct is read up to the end of that version's
// fields, over the defaults of its *_init() (zero where it has none): fields
// the caller's version lacks keep those defaults. An output struct is written
// up to the end of that version's fields: bytes past the caller's size are
// never touched, and a failed call writes none.
//
// Appending a field to a struct: replace Current<T>() at the end of its list
// by Before<T>(offsetof(T, new_field)), Current<T>(); give the field an init
// default that means "behave as before"; add the older x86-64 size to
// tests/api/struct_versions_test.cc.
#pragma once

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "capi/error.h"
#include "common/status_macros.h"
#include "swacache.h"

namespace swa::capi {

// One released version of a struct: its sizeof (what the caller passes as
// struct_size) and where its fields end (before the tail padding, whose bytes
// are the caller's garbage and never read).
struct StructVersion {
  size_t size;
  size_t fields_end;
};

// A version released before the field at offset `first_appended` was
// appended: its fields end there, and its sizeof is that offset rounded up to
// T's alignment, as the compiler padded it. (Every struct holds a size_t, and
// no appended field is more aligned than the older ones.)
template <typename T>
constexpr StructVersion Before(size_t first_appended) {
  return {(first_appended + alignof(T) - 1) / alignof(T) * alignof(T), first_appended};
}

// This library's version of T.
template <typename T>
constexpr StructVersion Current() {
  return {sizeof(T), sizeof(T)};
}

// StructVersions<T>::kName, ::kVersions (oldest first, the last Current<T>())
// and ::Init (the *_init() that fills the defaults, or nullptr: zero). A struct
// without a specialisation does not compile with the functions below.
template <typename T>
struct StructVersions;

// Whether `versions` is a usable list for T: sizes ascend, every version holds
// at least struct_size, the last is this library's.
template <typename T, size_t N>
constexpr bool ValidVersions(const StructVersion (&versions)[N]) {
  for (size_t i = 0; i < N; ++i) {
    const StructVersion& v = versions[i];
    if (v.fields_end < sizeof(size_t) || v.fields_end > v.size || v.size > sizeof(T)) return false;
    if (i > 0 && v.size <= versions[i - 1].size) return false;
  }
  return versions[N - 1].size == sizeof(T) && versions[N - 1].fields_end == sizeof(T);
}

#define SWA_STRUCT_VERSIONS(T, init, ...)                                  \
  template <>                                                              \
  struct StructVersions<T> {                                               \
    static constexpr const char* kName = #T;                               \
    static constexpr StructVersion kVersions[] = {__VA_ARGS__};            \
    static constexpr void (*Init)(T*) = init;                              \
  };                                                                       \
  static_assert(ValidVersions<T>(StructVersions<T>::kVersions),            \
                #T ": versions must ascend and end at Current<" #T ">()")

// Versions before the last are older releases' (their x86-64 sizes are in
// tests/api/struct_versions_test.cc).
SWA_STRUCT_VERSIONS(swa_layer_desc_t, swa_layer_desc_init,
                    Before<swa_layer_desc_t>(offsetof(swa_layer_desc_t, rope_style)),  // 0.1
                    Before<swa_layer_desc_t>(offsetof(swa_layer_desc_t, softmax_scale)),  // 0.2
                    Before<swa_layer_desc_t>(offsetof(swa_layer_desc_t, compress_kind)),
                    Current<swa_layer_desc_t>());
SWA_STRUCT_VERSIONS(swa_config_t, swa_config_init,
                    Before<swa_config_t>(offsetof(swa_config_t, store_secret)),  // 0.2
                    Current<swa_config_t>());
SWA_STRUCT_VERSIONS(swa_layout_t, nullptr,
                    Before<swa_layout_t>(offsetof(swa_layout_t, compress_bytes)),  // 0.2
                    Current<swa_layout_t>());
SWA_STRUCT_VERSIONS(swa_layer_layout_t, nullptr,
                    Before<swa_layer_layout_t>(offsetof(swa_layer_layout_t, compress_kind)),  // 0.2
                    Current<swa_layer_layout_t>());
SWA_STRUCT_VERSIONS(swa_compress_args_t, swa_compress_args_init, Current<swa_compress_args_t>());
SWA_STRUCT_VERSIONS(swa_tensor_view_t, nullptr, Current<swa_tensor_view_t>());
SWA_STRUCT_VERSIONS(swa_slot_info_t, nullptr, Current<swa_slot_info_t>());
SWA_STRUCT_VERSIONS(swa_plan_options_t, swa_plan_options_init, Current<swa_plan_options_t>());
SWA_STRUCT_VERSIONS(swa_plan_info_t, nullptr, Current<swa_plan_info_t>());
SWA_STRUCT_VERSIONS(swa_step_args_t, swa_step_args_init,
                    Before<swa_step_args_t>(offsetof(swa_step_args_t, lse)),  // 0.1
                    Before<swa_step_args_t>(offsetof(swa_step_args_t, positions)),  // 0.2
                    Current<swa_step_args_t>());
SWA_STRUCT_VERSIONS(swa_cache_stats_t, nullptr, Current<swa_cache_stats_t>());
SWA_STRUCT_VERSIONS(swa_merge_args_t, swa_merge_args_init,
                    Before<swa_merge_args_t>(offsetof(swa_merge_args_t, device)),  // 0.2
                    Current<swa_merge_args_t>());
SWA_STRUCT_VERSIONS(swa_kv_store_t, swa_kv_store_init, Current<swa_kv_store_t>());
SWA_STRUCT_VERSIONS(swa_store_memory_config_t, swa_store_memory_config_init,
                    Current<swa_store_memory_config_t>());
SWA_STRUCT_VERSIONS(swa_store_memory_stats_t, nullptr, Current<swa_store_memory_stats_t>());
SWA_STRUCT_VERSIONS(swa_store_directory_config_t, swa_store_directory_config_init,
                    Current<swa_store_directory_config_t>());
SWA_STRUCT_VERSIONS(swa_store_redis_config_t, swa_store_redis_config_init,
                    Before<swa_store_redis_config_t>(offsetof(swa_store_redis_config_t, username)),  // 0.2
                    Current<swa_store_redis_config_t>());
SWA_STRUCT_VERSIONS(swa_store_redis_cluster_config_t, swa_store_redis_cluster_config_init,
                    Before<swa_store_redis_cluster_config_t>(offsetof(swa_store_redis_cluster_config_t, username)),  // 0.2
                    Current<swa_store_redis_cluster_config_t>());
SWA_STRUCT_VERSIONS(swa_store_tiered_config_t, swa_store_tiered_config_init,
                    Current<swa_store_tiered_config_t>());
SWA_STRUCT_VERSIONS(swa_store_tier_stats_t, nullptr, Current<swa_store_tier_stats_t>());
SWA_STRUCT_VERSIONS(swa_project_args_t, swa_project_args_init, Current<swa_project_args_t>());
SWA_STRUCT_VERSIONS(swa_rope_info_t, nullptr, Current<swa_rope_info_t>());
SWA_STRUCT_VERSIONS(swa_rope_args_t, swa_rope_args_init, Current<swa_rope_args_t>());

#undef SWA_STRUCT_VERSIONS

// The version of T whose sizeof is `size`, or nullptr.
template <typename T>
const StructVersion* FindVersion(size_t size) {
  for (const StructVersion& v : StructVersions<T>::kVersions)
    if (v.size == size) return &v;
  return nullptr;
}

// OK when `size` is a struct_size of T that this library knows; otherwise
// INVALID_ARGUMENT naming T, the size and the known sizes.
template <typename T>
absl::Status CheckStructSize(size_t size) {
  using V = StructVersions<T>;
  if (FindVersion<T>(size) != nullptr) return absl::OkStatus();
  std::string known;
  for (const StructVersion& v : V::kVersions) absl::StrAppend(&known, known.empty() ? "" : ", ", v.size);
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s.struct_size = %u is not a size this library knows (it knows %s; sizeof(%s) = %u)",
      V::kName, size, known, V::kName, sizeof(T)));
}

// `p` is not NULL (the message names `arg`) and carries a known struct_size.
template <typename T>
absl::Status CheckStruct(const T* p, const char* arg) {
  if (p == nullptr) return NullArg(arg);
  return CheckStructSize<T>(p->struct_size);
}

// This library's defaults for T: its init function's, or zero with struct_size set.
template <typename T>
T DefaultStruct() {
  T v;
  std::memset(&v, 0, sizeof v);
  v.struct_size = sizeof v;
  if constexpr (StructVersions<T>::Init != nullptr) StructVersions<T>::Init(&v);
  return v;
}

// The caller's struct at `bytes`, whose struct_size (already checked) is
// `size`: the fields of its version over the defaults. The copy keeps the
// caller's size.
template <typename T>
T ReadStructBytes(const void* bytes, size_t size) {
  T v = DefaultStruct<T>();
  std::memcpy(static_cast<void*>(&v), bytes, FindVersion<T>(size)->fields_end);
  return v;
}

// Checks `in` (CheckStruct) and returns what the call reads of it.
template <typename T>
absl::StatusOr<T> ReadStruct(const T* in, const char* arg) {
  if (absl::Status s = CheckStruct(in, arg); !s.ok()) return s;
  return ReadStructBytes<T>(in, in->struct_size);
}

// An array of `n` caller structs (n bounded by the caller): its stride is the
// struct_size of element 0, which every element must carry. Each element is
// read as ReadStruct reads one. `arg` names the array in messages.
template <typename T>
absl::StatusOr<std::vector<T>> ReadStructArray(const T* base, size_t n, const char* arg) {
  std::vector<T> out;
  if (n == 0) return out;
  if (base == nullptr) return NullArg(arg);
  const size_t stride = base->struct_size;
  if (absl::Status s = CheckStructSize<T>(stride); !s.ok())
    return absl::InvalidArgumentError(absl::StrFormat("%s[0]: %s", arg, s.message()));
  const auto* bytes = reinterpret_cast<const unsigned char*>(base);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    size_t size;
    std::memcpy(&size, bytes + i * stride, sizeof size);
    if (size != stride)
      return absl::InvalidArgumentError(
          absl::StrFormat("%s[%u].struct_size = %u differs from %s[0].struct_size = %u", arg, i,
                          size, arg, stride));
    out.push_back(ReadStructBytes<T>(bytes + i * stride, stride));
  }
  return out;
}

// Writes `v` into the caller's `out` (already checked): the fields of the
// caller's version, nothing past them; the caller's struct_size stays. A call
// fills a zeroed T (`T v{};`) and writes it once it can no longer fail.
template <typename T>
void WriteStruct(const T& v, T* out) {
  T copy = v;
  copy.struct_size = out->struct_size;
  std::memcpy(static_cast<void*>(out), &copy, FindVersion<T>(out->struct_size)->fields_end);
}

// For *_init(): zero over this library's size, and that size. (An init
// function cannot know the caller's size; see docs/api.md, "Structs".)
template <typename T>
void InitStruct(T* s) {
  std::memset(static_cast<void*>(s), 0, sizeof *s);
  s->struct_size = sizeof *s;
}

}  // namespace swa::capi

// NULL and struct_size of a caller's struct, named by the argument's spelling.
#define SWA_CHECK_STRUCT(ptr) SWA_RETURN_IF_ERROR(::swa::capi::CheckStruct((ptr), #ptr))
