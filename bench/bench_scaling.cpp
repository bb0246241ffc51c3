// Closed-form summaries and threaded traces (issue 10). Figures, not assertions:
//   taskset -c 0,1 build/bench/looptrace_bench_scaling --benchmark_counters_tabular=true
// Summaries run on one core whatever the machine; the trace benchmarks compare one
// thread with --threads 2 (and 3), writing to /dev/null.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include "bench_common.hpp"
#include "looptrace/parallel_trace.hpp"
#include "looptrace/sinks/sink.hpp"
#include "looptrace/stream.hpp"
#include "looptrace/closed_form/summary.hpp"

using namespace looptrace;
using bench::gemm, bench::huge, bench::load, bench::report_rss;

namespace {

// The whole summary of huge_gemm; arg 0: compact windows, 1: every window listed.
void BM_Summary_HugeGemm(benchmark::State& state) {
  SummaryOptions so;
  so.windows = state.range(0) == 0 ? WindowsForm::compact : WindowsForm::full;
  for (auto _ : state) benchmark::DoNotOptimize(summarize(huge(), {}, so).n_points);
  state.counters["timesteps"] = double(huge().n_timesteps);
  report_rss(state);
}

// A million sampled timesteps of huge_gemm, counted; arg: threads.
void BM_Summary_SampleHuge(benchmark::State& state) {
  SummaryOptions so;
  so.windows = WindowsForm::none;
  so.threads = int(state.range(0));
  TraceOptions o;
  o.sample_timesteps = 1'000'000;
  for (auto _ : state) benchmark::DoNotOptimize(summarize(huge(), o, so).n_points);
  state.counters["timesteps_per_s"] =
      benchmark::Counter(double(state.iterations()) * 1e6, benchmark::Counter::kIsRate);
  report_rss(state);
}

// A prefix of the tiled GEMM (2.2e7 accesses) formatted to /dev/null; args: format
// (0 jsonl, 1 binary), threads (1: the one-thread stream and sink).
void BM_Trace_Threads(benchmark::State& state) {
  const std::string format = state.range(0) == 0 ? "jsonl" : "binary";
  const int threads = int(state.range(1));
  TraceOptions o;
  o.max_timesteps = 20000;
  const int fd = ::open("/dev/null", O_WRONLY);
  std::int64_t accesses = 0;
  for (auto _ : state) {
    if (threads == 1) {
      OutputBuffer out(fd);
      AccessStream stream(gemm(), o);
      auto sink = make_sink(format, gemm(), out);
      sink->begin();
      for (auto b = stream.next_batch(); !b.empty(); b = stream.next_batch()) {
        sink->write(b);
        accesses += std::int64_t(b.size());
      }
      sink->end();
      out.flush();
    } else {
      ParallelTraceOptions p;
      p.threads = threads;
      write_trace_parallel(gemm(), o, format, fd, p);
      accesses += 20000 * 1088;
    }
  }
  ::close(fd);
  state.counters["accesses_per_s"] = benchmark::Counter(double(accesses), benchmark::Counter::kIsRate);
  report_rss(state);
}

}  // namespace

BENCHMARK(BM_Summary_HugeGemm)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Summary_SampleHuge)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Trace_Threads)
    ->Args({0, 1})->Args({0, 2})->Args({0, 3})->Args({1, 1})->Args({1, 2})
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

BENCHMARK_MAIN();
