#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "looptrace/support/error.hpp"
#include "looptrace/frontend/concise_einsum.hpp"

using looptrace::ConciseAccess;
using looptrace::ConciseEinsum;
using looptrace::ExpressionError;
using looptrace::parse_concise_einsum;

namespace {

using Strings = std::vector<std::string>;

// The projection as strings, for compact checks.
Strings projection_of(const ConciseAccess& access) {
  Strings out;
  for (const auto& e : access.projection) out.push_back(e.str());
  return out;
}

struct Failure {
  std::size_t column = SIZE_MAX;
  std::string message;
};

Failure failure_of(const std::string& text) {
  try {
    parse_concise_einsum(text);
  } catch (const ExpressionError& e) {
    return {e.column(), e.what()};
  }
  FAIL("no error for: " << text);
  return {};
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("concise einsum: the matvecs example") {
  const ConciseEinsum e = parse_concise_einsum("Z[nz] = Y[ny] * C[ny, nz]");
  CHECK(e.name == "Z");
  REQUIRE(e.accesses.size() == 3);
  CHECK(e.accesses[0].tensor == "Y");
  CHECK(e.accesses[0].ranks == Strings{"NY"});
  CHECK(projection_of(e.accesses[0]) == Strings{"ny"});
  CHECK_FALSE(e.accesses[0].is_output);
  CHECK(e.accesses[1].tensor == "C");
  CHECK(e.accesses[1].ranks == Strings{"NY", "NZ"});
  CHECK(projection_of(e.accesses[1]) == Strings{"ny", "nz"});
  CHECK_FALSE(e.accesses[1].is_output);
  CHECK(e.accesses[2].tensor == "Z");
  CHECK(e.accesses[2].ranks == Strings{"NZ"});
  CHECK(e.accesses[2].is_output);

  // Spacing does not matter (matvecs.yaml writes it without spaces).
  const ConciseEinsum tight = parse_concise_einsum("Y[ny] = A[na]*B[na,ny]");
  CHECK(tight.name == "Y");
  REQUIRE(tight.accesses.size() == 3);
  CHECK(tight.accesses[0].tensor == "A");
  CHECK(tight.accesses[1].ranks == Strings{"NA", "NY"});
  CHECK(tight.accesses[2].tensor == "Y");
}

TEST_CASE("concise einsum: named ranks with affine projections") {
  const ConciseEinsum e = parse_concise_einsum("K[b, M: p, h] = Q[b, M: p + r, h] * W[n0, r]");
  REQUIRE(e.accesses.size() == 3);
  const ConciseAccess& k = e.accesses[2];
  CHECK(k.tensor == "K");
  CHECK(k.is_output);
  CHECK(k.ranks == Strings{"B", "M", "H"});
  CHECK(projection_of(k) == Strings{"b", "p", "h"});
  const ConciseAccess& q = e.accesses[0];
  CHECK(q.ranks == Strings{"B", "M", "H"});
  CHECK(projection_of(q) == Strings{"b", "p + r", "h"});
  CHECK(q.projection[1].coefficient("r") == 1);
  CHECK(e.accesses[1].ranks == Strings{"N0", "R"});  // `n0` is rank N0

  const ConciseEinsum strided = parse_concise_einsum("O[P: p] = I[H: 2*p + r - 1] * F[r]");
  CHECK(projection_of(strided.accesses[0]) == Strings{"2*p + r - 1"});
  CHECK(strided.accesses[0].ranks == Strings{"H"});
}

TEST_CASE("concise einsum: scalars have no ranks") {
  const ConciseEinsum dot = parse_concise_einsum("S = A[m] * B[m]");
  CHECK(dot.name == "S");
  REQUIRE(dot.accesses.size() == 3);
  CHECK(dot.accesses[2].ranks.empty());
  CHECK(dot.accesses[2].projection.empty());

  const ConciseEinsum empty_brackets = parse_concise_einsum("S[ ] = A[m]");
  REQUIRE(empty_brackets.accesses.size() == 2);
  CHECK(empty_brackets.accesses[1].tensor == "S");
  CHECK(empty_brackets.accesses[1].ranks.empty());

  const ConciseEinsum scale = parse_concise_einsum("Z[m] = s * A[m]");
  REQUIRE(scale.accesses.size() == 3);
  CHECK(scale.accesses[0].tensor == "s");
  CHECK(scale.accesses[0].ranks.empty());
}

TEST_CASE("concise einsum: `+` and a tensor named twice (AccelForge's Mamba)") {
  // Every tensor on the right is read, whatever joins them.
  const ConciseEinsum sum = parse_concise_einsum("H[b, d, n] = HX[b, d, n] + HH[b, d, n]");
  REQUIRE(sum.accesses.size() == 3);
  CHECK(sum.accesses[0].tensor == "HX");
  CHECK(sum.accesses[1].tensor == "HH");
  CHECK(sum.accesses[2].tensor == "H");
  CHECK(sum.accesses[2].is_output);
  // Named twice with the same indices: read once, at its first place.
  const ConciseEinsum twice = parse_concise_einsum("L[b, d] = DX[b, d] * DX[b, d]");
  REQUIRE(twice.accesses.size() == 2);
  CHECK(twice.accesses[0].tensor == "DX");
  CHECK(twice.accesses[0].ranks == Strings{"B", "D"});
  CHECK(twice.accesses[1].tensor == "L");
  const ConciseEinsum mixed = parse_concise_einsum("Y[m] = A[m] - B[m] / A[m] * C[m]");
  REQUIRE(mixed.accesses.size() == 4);
  CHECK(mixed.accesses[2].tensor == "C");
}

TEST_CASE("concise einsum: an expression needs a rank name") {
  const Failure f = failure_of("Z[m] = A[p + r]");
  CHECK(f.column == 9);
  CHECK(contains(f.message, "RANK: expr"));
  CHECK(failure_of("Z[m] = A[m, 2]").column == 12);
}

TEST_CASE("concise einsum: a tensor named again is read as AccelForge reads it, with a note") {
  // AccelForge keys accesses by name: the first place, the last entry.
  const ConciseEinsum twice = parse_concise_einsum("Z[m] = A[m] * B[m] * A[M: m + 1]");
  REQUIRE(twice.accesses.size() == 3);
  CHECK(twice.accesses[0].tensor == "A");
  CHECK(twice.accesses[0].projection[0].constant == 1);  // m + 1, the last
  CHECK(twice.accesses[1].tensor == "B");
  CHECK(twice.accesses[2].tensor == "Z");
  REQUIRE(twice.notes.size() == 1);
  CHECK(contains(twice.notes[0], "tensor A appears twice with different indices: AccelForge keeps the last"));
  // The output on the right too: the output's entry, in the place of the read.
  const ConciseEinsum accumulate = parse_concise_einsum("A[m] = A[m] + B[m]");
  REQUIRE(accumulate.accesses.size() == 2);
  CHECK(accumulate.accesses[0].tensor == "A");
  CHECK(accumulate.accesses[0].is_output);
  CHECK(accumulate.accesses[1].tensor == "B");
  CHECK(!accumulate.accesses[1].is_output);
  REQUIRE(accumulate.notes.size() == 1);
  CHECK(contains(accumulate.notes[0], "tensor A is both the output and an input"));
  // The same indices twice: read once, nothing to note.
  CHECK(parse_concise_einsum("Z[m] = A[m] * A[m]").notes.empty());
}

TEST_CASE("concise einsum: errors and their columns") {
  Failure f = failure_of("Z[m] = 2 * A[m]");
  CHECK(f.column == 7);
  CHECK(contains(f.message, "constant"));

  f = failure_of("Z[m] = A[M: p * q]");
  CHECK(f.column == 14);  // the '*' inside the projection, placed in the whole text
  CHECK(contains(f.message, "not affine"));

  CHECK(failure_of("Z[m] = A[m").column == 8);        // unclosed '['
  CHECK(failure_of("Z[m] A[m]").column == 5);         // missing '='
  CHECK(failure_of("Z[m] == A[m]").column == 5);
  CHECK(failure_of("Z[m] = A[m,]").column == 11);     // empty index
  CHECK(failure_of("Z[m] = A[m] % B[m]").column == 12);
  CHECK(failure_of("Z[m] = A[m] *").column == 13);    // a factor is missing
  CHECK(failure_of("Z[m] =").column == 6);
  CHECK(failure_of("= A[m]").column == 0);
  CHECK(failure_of("").column == 0);
  CHECK(failure_of("Z[m] = A[3: m]").column == 9);    // rank name must be an identifier
  CHECK(failure_of("Z[m] = A[M: ]").column == 12);    // empty projection

  f = failure_of("Z[m, m] = A[m]");
  CHECK(f.column == 5);
  CHECK(contains(f.message, "rank M appears twice"));
}
