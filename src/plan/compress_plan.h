// The compressor rings' part of a step plan (docs/semantics.md, "Compression
// state"): the rewind rule of every typed compressor, checked with the batch,
// and, per layer on demand, the closing windows and the store runs. Pure host
// code over common/compress_math.h.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/compress_math.h"
#include "common/records.h"
#include "layout/layout.h"
#include "plan/step_plan.h"

namespace swa::plan {

// The distinct typed-compressor geometries of a layout, each with the first
// layer that has it (for messages).
std::vector<CompressRing> CompressRingsOf(const Layout& layout);

// OK when every sequence's step leaves each compressor ring the rows it reads
// (common/compress_math.h, CompressRewindOk); FAILED_PRECONDITION naming the
// sequence, the layer and the numbers otherwise.
absl::Status CheckCompressRewinds(absl::Span<const CompressRing> rings, const PlannedSeq* seqs,
                                  const PrevSlotState* prev, size_t n);

// The closing windows of a built plan for a ring of geometry g, in batch
// order then by entry (swa_plan_compress_windows).
void PlanCompressWindows(CompressGeometry g, absl::Span<const PlannedSeq> seqs,
                         std::vector<CompressWindow>* out);
size_t CountCompressWindows(CompressGeometry g, absl::Span<const PlannedSeq> seqs);

// The store runs: the last min(seqlen_q, L) new rows of each sequence, split
// at the wrap; dst_row = slot * L + (p mod L), src_row = batch row.
void PlanCompressStore(CompressGeometry g, absl::Span<const PlannedSeq> seqs,
                       std::vector<RowSegment>* out);

}  // namespace swa::plan
