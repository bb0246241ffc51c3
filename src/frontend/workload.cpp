#include "looptrace/frontend/workload.hpp"

#include <algorithm>
#include <limits>

namespace looptrace {

std::vector<std::string> bits_key_names(const std::string& key) {
  std::vector<std::string> names;
  for (std::size_t start = 0; start <= key.size();) {
    const std::size_t bar = std::min(key.find('|', start), key.size());
    std::string part = key.substr(start, bar - start);
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    names.push_back(std::move(part));
    start = bar + 1;
  }
  return names;
}

std::optional<std::int64_t> Workload::bits_per_value_of(const std::string& tensor) const {
  for (const auto& e : einsums)
    for (const auto& a : e.accesses)
      if (a.tensor == tensor && a.bits_per_value) return a.bits_per_value;
  for (const auto& [key, bits] : bits_per_value)
    if (key == tensor) return bits;
  for (const auto& [key, bits] : bits_per_value)
    if (key.find('|') != std::string::npos) {
      const std::vector<std::string> names = bits_key_names(key);
      if (std::find(names.begin(), names.end(), tensor) != names.end()) return bits;
    }
  for (const auto& [key, bits] : bits_per_value)
    if (key.empty() || key == "All") return bits;
  // AccelForge's `Other`: every tensor no other key names (All names them all).
  for (const auto& [key, bits] : bits_per_value)
    if (key == "Other") return bits;
  return std::nullopt;
}

bool Einsum::has_rank_variable(const std::string& v) const {
  return std::find(rank_variables.begin(), rank_variables.end(), v) != rank_variables.end();
}

const Einsum* Workload::find_einsum(const std::string& name) const {
  for (const auto& e : einsums)
    if (e.name == name) return &e;
  return nullptr;
}

namespace {

using Wide = __int128;
constexpr Wide kInf = Wide(1) << 100;  // "no bound"; far beyond any int64 sum

Wide floor_div(Wide a, Wide b) {  // b > 0
  Wide q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
Wide ceil_div(Wide a, Wide b) { return -floor_div(-a, b); }

struct Bound {
  AffineExpr expr;  // expr >= 0
  const SourceLocation* where;
};

// Interval propagation to a fixpoint: for the box hull of a system of affine
// inequalities over integers this is exact for the forms specs use (sums of
// variables bounded by constants), and always a superset of the true hull.
void propagate(const std::vector<std::string>& vars, const std::vector<Bound>& bounds,
               std::vector<Wide>& lo, std::vector<Wide>& hi) {
  auto index = [&](const std::string& v) {
    return std::size_t(std::find(vars.begin(), vars.end(), v) - vars.begin());
  };
  for (int round = 0; round < 200; ++round) {
    bool changed = false;
    for (const auto& b : bounds) {
      for (const auto& [var, coef] : b.expr.terms) {
        // coef*x >= -(constant + max over the box of the other terms)
        Wide rest = b.expr.constant;
        bool bounded = true;
        for (const auto& [other, c] : b.expr.terms) {
          if (other == var) continue;
          std::size_t k = index(other);
          Wide ext = c > 0 ? hi[k] : lo[k];
          // Past kInf a bound is "none"; overflow of the 128-bit sum likewise.
          Wide term;
          if (ext >= kInf || ext <= -kInf || __builtin_mul_overflow(Wide(c), ext, &term) ||
              __builtin_add_overflow(rest, term, &rest)) {
            bounded = false;
            break;
          }
        }
        if (!bounded || rest >= (Wide(1) << 120) || rest <= -(Wide(1) << 120)) continue;
        std::size_t j = index(var);
        if (coef > 0) {
          Wide v = ceil_div(-rest, coef);
          if (v > lo[j]) { lo[j] = v; changed = true; }
        } else {
          Wide v = floor_div(rest, -Wide(coef));
          if (v < hi[j]) { hi[j] = v; changed = true; }
        }
      }
    }
    if (!changed) return;
  }
}

bool uses_only(const AffineExpr& e, const Einsum& einsum) {
  return std::all_of(e.terms.begin(), e.terms.end(),
                     [&](const auto& t) { return einsum.has_rank_variable(t.first); });
}

std::string int128_str(Wide v) {
  if (v == 0) return "0";
  std::string digits;
  for (Wide m = v < 0 ? -v : v; m > 0; m /= 10) digits.insert(digits.begin(), char('0' + int(m % 10)));
  return v < 0 ? "-" + digits : digits;
}

}  // namespace

EinsumBox einsum_box(const Workload& workload, const Einsum& einsum) {
  std::vector<Bound> bounds;
  for (const auto& c : einsum.constraints)
    for (const auto& b : c.bounds) {
      for (const auto& [var, coef] : b.terms)
        if (!einsum.has_rank_variable(var))
          throw SpecError(c.where, "constraint '" + c.text + "' of Einsum '" + einsum.name +
                                       "' uses '" + var +
                                       "', which none of its projections uses");
      bounds.push_back({b, &c.where});
    }
  for (const auto& c : workload.constraints)
    for (const auto& b : c.bounds)
      if (uses_only(b, einsum)) bounds.push_back({b, &c.where});
  for (const auto& access : einsum.accesses) {
    for (std::size_t r = 0; r < access.ranks.size(); ++r) {
      auto size = einsum.rank_sizes.find(access.ranks[r]);
      if (size == einsum.rank_sizes.end()) {
        size = workload.rank_sizes.find(access.ranks[r]);
        if (size == workload.rank_sizes.end()) continue;
      }
      AffineExpr upper = access.projection[r];  // size - 1 - proj >= 0
      bool overflow = __builtin_sub_overflow(size->second - 1, upper.constant, &upper.constant);
      for (auto& t : upper.terms) overflow |= __builtin_sub_overflow(0, t.second, &t.second);
      if (overflow)
        throw SpecError(access.where, "the projection of tensor '" + access.tensor + "' along rank '" +
                                          access.ranks[r] + "' (" + access.projection[r].str() +
                                          ") overflows 64 bits against its rank size " +
                                          std::to_string(size->second));
      bounds.push_back({access.projection[r], &access.where});
      bounds.push_back({upper, &access.where});
    }
  }

  const auto& vars = einsum.rank_variables;
  std::vector<Wide> lo(vars.size(), 0), hi(vars.size(), kInf);
  propagate(vars, bounds, lo, hi);

  EinsumBox box{vars, {}};
  for (std::size_t j = 0; j < vars.size(); ++j) {
    if (hi[j] >= kInf)
      throw SpecError(einsum.where, "rank variable '" + vars[j] + "' of Einsum '" + einsum.name +
                                        "' is unbounded: give it a constraint in "
                                        "iteration_space_shape (e.g. '0 <= " + vars[j] +
                                        " < 8') or a size in rank_sizes");
    if (hi[j] < lo[j])
      throw SpecError(einsum.where, "rank variable '" + vars[j] + "' of Einsum '" + einsum.name +
                                        "' has an empty range [" + int128_str(lo[j]) + ", " +
                                        int128_str(hi[j]) + "]");
    Wide extent = hi[j] - lo[j] + 1;
    if (extent > std::numeric_limits<std::int64_t>::max() / 4)
      throw SpecError(einsum.where, "rank variable '" + vars[j] + "' of Einsum '" + einsum.name +
                                        "' has an extent too large for 64-bit arithmetic");
    box.extent.push_back(static_cast<std::int64_t>(extent));
  }
  return box;
}

}  // namespace looptrace
