#include "looptrace/stages/dedup.hpp"

#include <algorithm>

namespace looptrace {
namespace {

// Sorts the records [i, j) of one timestep by (trace in order of first appearance,
// element), writes each distinct (trace, element) once at `out`, returns the new end.
std::size_t merge_timestep(std::span<AccessRecord> r, std::size_t i, std::size_t j, std::size_t out,
                           std::vector<std::uint32_t>& order) {
  order.clear();
  for (std::size_t k = i; k < j; ++k)
    if (std::find(order.begin(), order.end(), r[k].trace) == order.end()) order.push_back(r[k].trace);
  auto rank = [&](std::uint32_t trace) { return std::find(order.begin(), order.end(), trace) - order.begin(); };
  std::sort(r.begin() + std::ptrdiff_t(i), r.begin() + std::ptrdiff_t(j),
            [&](const AccessRecord& a, const AccessRecord& b) {
              if (a.trace != b.trace) return rank(a.trace) < rank(b.trace);
              return a.element < b.element;
            });
  for (std::size_t k = i; k < j;) {
    AccessRecord rec = r[k++];
    std::uint64_t m = rec.multiplicity;
    for (; k < j && r[k].trace == rec.trace && r[k].element == rec.element; ++k)
      m = std::min<std::uint64_t>(m + r[k].multiplicity, 0xffffffffu);
    rec.multiplicity = std::uint32_t(m);
    r[out++] = rec;
  }
  return out;
}

}  // namespace

std::size_t merge_equal_accesses(std::span<AccessRecord> records, std::vector<std::uint32_t>& order) {
  std::size_t out = 0;
  for (std::size_t i = 0; i < records.size();) {
    std::size_t j = i + 1;
    while (j < records.size() && records[j].timestep == records[i].timestep) ++j;
    out = merge_timestep(records, i, j, out, order);
    i = j;
  }
  return out;
}

}  // namespace looptrace
