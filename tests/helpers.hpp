// Shared helpers for the doctest suite: specs from inline YAML, the conformance corpus,
// collecting a stream, and catching the SpecError a call throws.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "looptrace/support/error.hpp"
#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/load.hpp"
#include "looptrace/stream.hpp"
#include "looptrace/closed_form/summary.hpp"

#ifndef LOOPTRACE_SOURCE_ROOT
#define LOOPTRACE_SOURCE_ROOT "."
#endif

namespace th {

using looptrace::AccessRecord;
using looptrace::Defines;
using looptrace::Schedule;
using looptrace::Spec;
using looptrace::SpecError;
using looptrace::TraceOptions;

// Copies of the conformance corpus specs, so the suite runs without ../shared.
inline std::string corpus_dir() {
  return std::string(LOOPTRACE_SOURCE_ROOT) + "/tests/specs";
}

// A small workload several tests map differently: E reads A[m, n] (8 x 4), writes B[m].
inline const std::string kRowsWorkload = R"(
workload:
  iteration_space_shape: {m: 0 <= m < 8, n: 0 <= n < 4}
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m, n]}
    - {name: B, projection: [m], output: True}
)";

// Loads a spec from one in-memory file named `name`.
inline Spec spec_text(const std::string& text, const Defines& vars = {},
                      const std::string& name = "spec.yaml") {
  return looptrace::load_spec_text({{name, text}}, vars);
}

// Loads a spec from a workload text and a mapping text (two files).
inline Spec spec_text2(const std::string& workload, const std::string& mapping,
                       const Defines& vars = {}) {
  return looptrace::load_spec_text({{"workload.yaml", workload}, {"mapping.yaml", mapping}}, vars);
}

inline Schedule compile_text(const std::string& text, const Defines& vars = {}) {
  return looptrace::compile_schedule(spec_text(text, vars));
}

inline Schedule compile_text2(const std::string& workload, const std::string& mapping,
                              const Defines& vars = {}) {
  return looptrace::compile_schedule(spec_text2(workload, mapping, vars));
}

// Files of the conformance corpus, by name.
inline Schedule compile_corpus(const std::vector<std::string>& files, const Defines& vars = {}) {
  std::vector<std::string> paths;
  for (const auto& f : files) paths.push_back(corpus_dir() + "/" + f);
  return looptrace::compile_schedule(looptrace::load_spec(paths, vars));
}

// The SpecError that `f` throws; fails the test (and returns an empty error) if none.
inline SpecError spec_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e;
  }
  FAIL_CHECK("expected a SpecError, got none");
  return SpecError("<none>");
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// One access as a comparable tuple: (timestep, trace, element).
using Row = std::tuple<std::int64_t, std::uint32_t, std::int64_t>;

inline std::vector<Row> collect(const Schedule& s, const TraceOptions& o = {},
                                std::size_t batch = 4096) {
  looptrace::AccessStream stream(s, o, batch);
  std::vector<Row> out;
  for (auto b = stream.next_batch(); !b.empty(); b = stream.next_batch())
    for (const AccessRecord& r : b) out.emplace_back(r.timestep, r.trace, r.element);
  return out;
}

// Accesses per trace (indexed like Schedule::traces).
inline std::vector<std::int64_t> per_trace(const Schedule& s, const std::vector<Row>& rows) {
  std::vector<std::int64_t> n(s.traces.size(), 0);
  for (const auto& r : rows) ++n[std::get<1>(r)];
  return n;
}

// The summary's n_accesses per trace (0 for traces the filters drop).
inline std::vector<std::int64_t> summary_counts(const Schedule& s, const looptrace::TraceSummary& sum) {
  std::vector<std::int64_t> n(s.traces.size(), 0);
  for (const auto& t : sum.traces) n[std::size_t(t.trace)] = t.n_accesses;
  return n;
}

inline std::vector<Row> restrict_to(const std::vector<Row>& rows, std::int64_t from, std::int64_t to) {
  std::vector<Row> out;
  for (const auto& r : rows)
    if (std::get<0>(r) >= from && std::get<0>(r) < to) out.push_back(r);
  return out;
}

inline int trace_index(const Schedule& s, const std::string& einsum, const std::string& tensor) {
  for (std::size_t i = 0; i < s.traces.size(); ++i)
    if (s.traces[i].einsum == einsum && s.traces[i].tensor == tensor) return int(i);
  return -1;
}

// The element ids of one trace at one timestep, in stream order.
inline std::vector<std::int64_t> elements_at(const Schedule& s, const std::vector<Row>& rows,
                                             std::int64_t t, const std::string& einsum,
                                             const std::string& tensor) {
  std::vector<std::int64_t> out;
  const int trace = trace_index(s, einsum, tensor);
  for (const auto& r : rows)
    if (std::get<0>(r) == t && int(std::get<1>(r)) == trace) out.push_back(std::get<2>(r));
  return out;
}

using Windows = std::vector<std::pair<std::int64_t, std::int64_t>>;
inline Windows windows_of(const std::vector<looptrace::TimeRange>& ranges) {
  Windows w;
  for (const auto& r : ranges) w.emplace_back(r.from, r.to);
  return w;
}

// The conv1d of the corpus, inline: O[p] += I[p + r] * W[r], p < 8, r < 3, p outer.
inline const char* kConv1d = R"(
workload:
  iteration_space_shape:
    p: 0 <= p < 8
    r: 0 <= r < 3
  einsums:
  - name: Conv
    tensor_accesses:
    - {name: I, projection: {P: p + r}}
    - {name: W, projection: [r]}
    - {name: O, projection: [p], output: True}
mapping:
  nodes:
  - !Storage {component: MainMemory, tensors: [I, W, O]}
  - !Temporal {rank_variable: p, tile_shape: 1}
  - !Storage {component: GlobalBuffer, tensors: [I, W, O]}
  - !Temporal {rank_variable: r, tile_shape: 1}
  - !Compute {einsum: Conv, component: MAC}
)";

}  // namespace th
