// The layout stage (stages/layout.hpp): addresses worked out by hand, element and
// coordinate forms agreeing, the default layout as Data movement places tensors, and
// the layout file's errors naming file and line.
#include <doctest/doctest.h>

#include "helpers.hpp"
#include "looptrace/frontend/layout.hpp"
#include "looptrace/stages/layout.hpp"

using namespace looptrace;

namespace {

TensorInfo tensor(std::vector<std::string> ranks, std::vector<std::int64_t> shape) {
  TensorInfo t;
  t.name = "X";
  t.ranks = std::move(ranks);
  t.shape = shape;
  t.strides.assign(shape.size(), 1);
  for (std::size_t r = shape.size(); r-- > 1;) t.strides[r - 1] = t.strides[r] * shape[r];
  t.size = t.strides[0] * shape[0];
  return t;
}

TensorLayoutSpec spec_of(const std::string& text) {
  LayoutSpec l = parse_layout(text, "l.yaml");
  REQUIRE(l.tensors.size() == 1);
  return l.tensors[0];
}

}  // namespace

TEST_CASE("layout: row-major, reversed and blocked addresses by hand") {
  const TensorInfo x = tensor({"C", "P"}, {2, 10});
  const TensorLayout rm = TensorLayout::row_major(x, 0x100, 2);
  CHECK(rm.identity());
  CHECK(rm.address(13) == 0x100 + 13 * 2);
  const TensorLayout rev = TensorLayout::from_spec(x, spec_of("layout: {tensors: {X: {order: [P, C]}}}"), 1);
  CHECK(!rev.identity());
  const std::int64_t c1p3[] = {1, 3};
  CHECK(rev.address(std::span<const std::int64_t>(c1p3)) == 3 * 2 + 1);
  // blocks of 2 x 4, P padded to 12: (p / 4) * 8 + c * 4 + p % 4
  const TensorLayout blk = TensorLayout::from_spec(x, spec_of("layout: {tensors: {X: {block: {C: 2, P: 4}}}}"), 1);
  CHECK(blk.span() == 24);
  for (std::int64_t c = 0; c < 2; ++c)
    for (std::int64_t p = 0; p < 10; ++p) {
      const std::int64_t cp[] = {c, p};
      CHECK(blk.offset(c * 10 + p) == std::uint64_t(p / 4 * 8 + c * 4 + p % 4));
      CHECK(blk.offset(std::span<const std::int64_t>(cp)) == blk.offset(c * 10 + p));
    }
  // C padded to 3, only P blocked (block_order then moves nothing): c * 12 + (p / 4) * 4 + p % 4
  const TensorLayout bo = TensorLayout::from_spec(
      x, spec_of("layout: {tensors: {X: {block: {P: 4}, block_order: [P, C], pad: {C: 3}}}}"), 1);
  CHECK(bo.span() == 3 * 12);
  CHECK(bo.offset(1 * 10 + 6) == std::uint64_t(1 * 12 + 1 * 4 + 2));
  // both blocked, block_order [P, C]: (p / 4) * 8 + (p % 4) * 2 + c
  const TensorLayout pc = TensorLayout::from_spec(
      x, spec_of("layout: {tensors: {X: {block: {C: 2, P: 4}, block_order: [P, C]}}}"), 1);
  CHECK(pc.offset(1 * 10 + 6) == std::uint64_t(1 * 8 + 2 * 2 + 1));
}

TEST_CASE("layout: no file places tensors as Data movement says") {
  const Schedule s = th::compile_text(th::kConv1d);
  const AddressMap m = AddressMap::make(s, {"I", "W", "O"}, 4096);
  for (std::uint32_t t = 0; t < 3; ++t) {
    CHECK(m.base[t] == 4096 * t);
    for (std::int64_t e = 0; e < s.tensors[t].size; ++e) CHECK(m.address(t, e) == m.base[t] + std::uint64_t(e) * m.bytes[t]);
  }
  const LayoutSpec empty = parse_layout("layout: {tensors: {}}", "e.yaml");
  const AddressMap same = AddressMap::make(s, {"I", "W", "O"}, 4096, &empty, "MainMemory");
  CHECK(same.base == m.base);
}

TEST_CASE("layout: bad files name the file and line") {
  auto error_at = [](const std::string& text) -> std::string {
    try {
      parse_layout(text, "bad.yaml");
    } catch (const SpecError& e) {
      return e.where().str() + " " + e.message();
    }
    return "";
  };
  CHECK(error_at("layout:\n  tensors:\n    X: {order: [C, C]}\n").rfind("bad.yaml:3:", 0) == 0);
  CHECK(error_at("layout:\n  tensors:\n    X: {bloc: {}}\n").find("unknown key 'bloc'") != std::string::npos);
  CHECK(error_at("layout:\n  tensors:\n    X: {block: {C: 0}}\n").find("at least 1") != std::string::npos);
  CHECK(error_at("layout:\n  tensors:\n    X: {base: 0xZZ}\n").find("whole number") != std::string::npos);
  const TensorInfo x = tensor({"C", "P"}, {2, 10});
  CHECK_THROWS_WITH_AS(TensorLayout::from_spec(x, spec_of("layout:\n  tensors:\n    X:\n      order: [P]\n"), 1),
                       doctest::Contains("leaves out rank C"), SpecError);
  CHECK_THROWS_WITH_AS(TensorLayout::from_spec(x, spec_of("layout: {tensors: {X: {pad: {Q: 2}}}}"), 1),
                       doctest::Contains("does not have"), SpecError);
}
