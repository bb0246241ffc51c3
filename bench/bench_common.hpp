// What both benchmark programs share: loading a spec of bench/specs, the peak RSS
// counter, and the two GEMMs both measure.
#pragma once

#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <string>
#include <vector>

#include "looptrace/stream.hpp"

namespace bench {

inline looptrace::Schedule load(std::vector<std::string> files, looptrace::Defines vars = {}) {
  for (auto& f : files) f = std::string(LOOPTRACE_BENCH_SPECS) + "/" + f;
  return looptrace::compile_schedule(looptrace::load_spec(files, vars));
}

inline void report_rss(benchmark::State& state) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_MiB"] = double(usage.ru_maxrss) / 1024.0;
}

// 2^30 MACs in 32x32 output tiles: 1.14e9 accesses, 1088 per timestep.
inline const looptrace::Schedule& gemm() {
  static looptrace::Schedule s = load({"gemm.workload.yaml", "gemm_tiled.mapping.yaml"});
  return s;
}
// bench/specs/huge_gemm at M = K = N = 10240: 1.07e12 timesteps (one MAC each),
// 25,600 GlobalBuffer windows.
inline const looptrace::Schedule& huge() {
  static looptrace::Schedule s = load({"gemm.workload.yaml", "huge_gemm.mapping.yaml"},
                                      {{"M", std::int64_t(10240)}, {"K", std::int64_t(10240)}, {"N", std::int64_t(10240)}});
  return s;
}

}  // namespace bench
