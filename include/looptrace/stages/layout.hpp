// The layout stage: an element (or its coordinates) of a tensor -> its byte address in
// one memory level (SEMANTICS "Layouts"). A tensor's layout is a mixed radix: the
// block index of each rank in `order`, then the index inside the block in
// `block_order`, over padded extents; its strides are worked out once, so an address
// costs a few multiply-adds and allocates nothing. Without a layout file every tensor
// is row-major in its ranks' order, each at the next multiple of `align` ("Data
// movement"), exactly as before layouts existed.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/layout.hpp"

namespace looptrace {

inline constexpr std::size_t kMaxLayoutRanks = 16;

// One digit of a layout's mixed radix: a rank's block index (`inner` false) or its
// index inside the block, its radix (`extent`) and its stride in elements.
struct LayoutDigit {
  std::uint32_t rank = 0;
  bool inner = false;
  std::int64_t extent = 1;
  std::uint64_t stride = 1;
};

class TensorLayout {
 public:
  TensorLayout() = default;
  // Row-major in rank order (the default layout).
  static TensorLayout row_major(const TensorInfo& info, std::uint64_t base, std::uint64_t bytes);
  // As `spec` says; throws SpecError naming its file and line (a rank the tensor
  // lacks, one left out of `order`, a block or pad on a rank it does not have).
  static TensorLayout from_spec(const TensorInfo& info, const TensorLayoutSpec& spec, std::uint64_t bytes);

  std::uint64_t offset(std::span<const std::int64_t> coords) const {
    std::uint64_t o = 0;
    for (std::uint32_t r = 0; r < ranks_; ++r) {
      const std::uint64_t c = std::uint64_t(coords[r]), b = std::uint64_t(block_[r]);
      o += b == 1 ? c * outer_[r] : c / b * outer_[r] + c % b * inner_[r];
    }
    return o;
  }
  // Of element e in the tensor's row-major numbering (TensorInfo::strides).
  std::uint64_t offset(std::int64_t e) const {
    if (identity_) return std::uint64_t(e);
    std::uint64_t o = 0;
    for (std::uint32_t r = ranks_; r-- > 0;) {
      const std::uint64_t c = std::uint64_t(e % shape_[r]), b = std::uint64_t(block_[r]);
      e /= shape_[r];
      o += b == 1 ? c * outer_[r] : c / b * outer_[r] + c % b * inner_[r];
    }
    return o;
  }
  std::uint64_t address(std::int64_t e) const { return base + offset(e) * bytes; }
  std::uint64_t address(std::span<const std::int64_t> coords) const { return base + offset(coords) * bytes; }

  // The digits in address order (most significant first), those of radix 1 left out.
  const std::vector<LayoutDigit>& digits() const { return digits_; }
  std::int64_t block(std::uint32_t rank) const { return block_[rank]; }
  // Element order is address order: offset(e) == e.
  bool identity() const { return identity_; }
  // Elements of the padded space (what the tensor occupies).
  std::uint64_t span() const { return span_; }
  std::uint64_t end() const { return base + span_ * bytes; }

  std::uint64_t base = 0, bytes = 1;

 private:
  void finish(const TensorInfo& info, const std::vector<std::uint32_t>& order, const std::vector<std::uint32_t>& inner,
              const std::vector<std::int64_t>& padded);

  std::uint32_t ranks_ = 0;
  bool identity_ = true;
  std::uint64_t span_ = 0;
  std::array<std::int64_t, kMaxLayoutRanks> shape_{}, block_{};
  std::array<std::uint64_t, kMaxLayoutRanks> outer_{}, inner_{};
  std::vector<LayoutDigit> digits_;
};

// Where every traced tensor lies in one memory level. Consumers (both transfer
// engines, caches) take addresses through address().
struct AddressMap {
  std::vector<std::uint64_t> base;   // per Schedule::tensors
  std::vector<std::uint64_t> bytes;  // per Schedule::tensors: bytes per element
  std::vector<TensorLayout> layouts;  // per Schedule::tensors
  std::vector<std::uint8_t> placed;   // per Schedule::tensors: 1 if `order` laid it out (else it sits at 0, over others)

  std::uint64_t address(std::uint32_t tensor, std::int64_t element) const {
    return layouts[tensor].address(element);
  }

  // Every tensor of `order` (names; others get base 0) laid out in turn, row-major,
  // each at the next multiple of `align`.
  static AddressMap make(const Schedule& schedule, const std::vector<std::string>& order, std::uint64_t align);
  // The same, with the layouts `layout` gives `level` (null: as above). A tensor the
  // file names takes its `base` or else the next multiple of its align; throws
  // SpecError naming the file and line for overlapping tensors, or a tensor or level
  // the workload and mapping lack.
  static AddressMap make(const Schedule& schedule, const std::vector<std::string>& order, std::uint64_t align,
                         const LayoutSpec* layout, const std::string& level);
};

// Refuses (SpecError, naming the file and line) a layout file naming a tensor the
// workload lacks, or a level that neither a Storage node nor the arch's !Memory nodes have.
void check_layout_names(const Schedule& schedule, const LayoutSpec& layout);

}  // namespace looptrace
