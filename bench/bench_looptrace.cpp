// Throughput and latency of the engine on large mappings. Figures, not assertions:
//   build/bench/looptrace_bench --benchmark_counters_tabular=true
// Each benchmark reports accesses (or lines, records) per second and the process's
// peak RSS so far (peak_rss_MiB).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <random>

#include "bench_common.hpp"
#include "looptrace/closed_form/movement.hpp"
#include "looptrace/sinks/sink.hpp"
#include "looptrace/stages/tile_windows.hpp"
#include "looptrace/stages/transfers.hpp"
#include "looptrace/stream.hpp"
#include "looptrace/closed_form/summary.hpp"

using namespace looptrace;
using bench::gemm, bench::huge, bench::load, bench::report_rss;

namespace {

// 16x16 channels, 256x256 outputs in 10x10 tiles with halos: 2.7e7 accesses.
const Schedule& conv() {
  static Schedule s = load({"conv_halo.workload.yaml", "conv_halo.mapping.yaml"});
  return s;
}
// Four matmuls fused along m: 8.5e6 accesses interleaving four leaves.
const Schedule& fused() {
  static Schedule s = load({"matmuls.yaml", "fused_chain.mapping.yaml"},
                           {{"N_EINSUMS", std::int64_t(4)}, {"M", std::int64_t(256)}, {"KN", std::int64_t(64)}});
  return s;
}

void run_batches(benchmark::State& state, const Schedule& s, TraceOptions o = {}) {
  std::int64_t total = 0;
  for (auto _ : state) {
    AccessStream stream(s, o);
    std::int64_t sum = 0;
    for (auto b = stream.next_batch(); !b.empty(); b = stream.next_batch()) {
      total += std::int64_t(b.size());
      sum += b.back().element;
    }
    benchmark::DoNotOptimize(sum);
  }
  state.counters["accesses_per_s"] = benchmark::Counter(double(total), benchmark::Counter::kIsRate);
  report_rss(state);
}

void BM_Batch_TiledGemm(benchmark::State& state) { run_batches(state, gemm()); }
void BM_Batch_ConvHalo(benchmark::State& state) { run_batches(state, conv()); }
void BM_Batch_FusedChain(benchmark::State& state) { run_batches(state, fused()); }

void BM_Range_TiledGemm(benchmark::State& state) {
  TraceOptions o;
  o.to = gemm().n_timesteps / 8;  // a 1.4e8-access prefix: the rate is what matters
  std::int64_t total = 0;
  for (auto _ : state) {
    AccessStream stream(gemm(), o);
    std::int64_t sum = 0;
    for (const Access& a : stream) {
      sum += a.element + a.timestep;
      ++total;
    }
    benchmark::DoNotOptimize(sum);
  }
  state.counters["accesses_per_s"] = benchmark::Counter(double(total), benchmark::Counter::kIsRate);
  report_rss(state);
}

void run_format(benchmark::State& state, const Schedule& s, const std::string& format, std::int64_t to) {
  TraceOptions o;
  o.to = to;
  int fd = ::open("/dev/null", O_WRONLY);
  std::int64_t total = 0;
  for (auto _ : state) {
    OutputBuffer out(fd);
    AccessStream stream(s, o);
    auto sink = make_sink(format, s, out);
    sink->begin();
    for (auto b = stream.next_batch(); !b.empty(); b = stream.next_batch()) {
      sink->write(b);
      total += std::int64_t(b.size());
    }
    out.flush();
  }
  ::close(fd);
  state.counters["records_per_s"] = benchmark::Counter(double(total), benchmark::Counter::kIsRate);
  report_rss(state);
}

void BM_Format_Jsonl(benchmark::State& state) { run_format(state, gemm(), "jsonl", gemm().n_timesteps / 32); }
void BM_Format_Csv(benchmark::State& state) { run_format(state, gemm(), "csv", gemm().n_timesteps / 32); }
void BM_Format_Binary(benchmark::State& state) { run_format(state, gemm(), "binary", gemm().n_timesteps / 4); }

// One operation per timestep (tile_shape 1 down to the Compute): 3 records a timestep.
constexpr std::int64_t kOneOpPrefix = 100'000'000;
void BM_OneOp_Batch(benchmark::State& state) {
  TraceOptions o;
  o.max_timesteps = kOneOpPrefix;
  run_batches(state, huge(), o);
}
void BM_OneOp_Binary(benchmark::State& state) { run_format(state, huge(), "binary", kOneOpPrefix); }
// AccelForge's own one-op mappings of four chained matmuls (M = KN = 256): 6.7e7 timesteps.
const Schedule& matmuls(const char* mapping) {
  static std::map<std::string, Schedule> cache;
  auto [it, fresh] = cache.try_emplace(mapping);
  if (fresh)
    it->second = load({"matmuls.yaml", mapping},
                      {{"N_EINSUMS", std::int64_t(4)}, {"M", std::int64_t(256)}, {"KN", std::int64_t(256)}});
  return it->second;
}
void BM_OneOp_Fused_Binary(benchmark::State& state) {
  const Schedule& s = matmuls("fused_matmuls_to_simple.mapping.yaml");
  run_format(state, s, "binary", s.n_timesteps);
}
void BM_OneOp_Fused_Jsonl(benchmark::State& state) {
  const Schedule& s = matmuls("fused_matmuls_to_simple.mapping.yaml");
  run_format(state, s, "jsonl", s.n_timesteps / 4);
}
void BM_OneOp_Unfused_Binary(benchmark::State& state) {
  const Schedule& s = matmuls("unfused_matmuls_to_simple.mapping.yaml");
  run_format(state, s, "binary", s.n_timesteps);
}
void BM_OneOp_Unfused_Jsonl(benchmark::State& state) {
  const Schedule& s = matmuls("unfused_matmuls_to_simple.mapping.yaml");
  run_format(state, s, "jsonl", s.n_timesteps / 4);
}
void BM_OneOp_Jsonl(benchmark::State& state) { run_format(state, huge(), "jsonl", kOneOpPrefix / 5); }

// The latency of the first batch after --from T, for T spread over 1e12 timesteps.
void BM_Seek_Huge(benchmark::State& state) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::int64_t> pick(0, huge().n_timesteps - 1);
  for (auto _ : state) {
    TraceOptions o;
    o.from = pick(rng);
    AccessStream stream(huge(), o, 1);
    benchmark::DoNotOptimize(stream.next_batch().data());
  }
  state.counters["timesteps"] = double(huge().n_timesteps);
  report_rss(state);
}

// 10,000 timesteps sampled uniformly from 1e12 and streamed in time order.
void BM_Sample_Huge(benchmark::State& state) {
  std::int64_t total = 0;
  std::uint64_t seed = 0;
  for (auto _ : state) {
    TraceOptions o;
    o.sample_timesteps = 10000;
    o.seed = seed++;
    AccessStream stream(huge(), o);
    for (auto b = stream.next_batch(); !b.empty(); b = stream.next_batch()) total += std::int64_t(b.size());
  }
  state.counters["accesses_per_s"] = benchmark::Counter(double(total), benchmark::Counter::kIsRate);
  report_rss(state);
}

// The composed pipeline with tile windows: every access lands in its GlobalBuffer
// window, counted per window through the batch interface.
void BM_TileWindows_TiledGemm(benchmark::State& state) {
  TraceOptions o;
  o.to = gemm().n_timesteps / 4;
  std::int64_t total = 0;
  for (auto _ : state) {
    auto windows = trace_pipeline(gemm(), o) | tile_windows("GlobalBuffer");
    std::int64_t in_window = 0, n_windows = 0;
    for (TileStep step = windows.next_batch(); !step.empty(); step = windows.next_batch()) {
      n_windows += std::int64_t(step.events.size());
      in_window += std::int64_t(step.accesses.size());
    }
    total += in_window;
    benchmark::DoNotOptimize(n_windows);
  }
  state.counters["accesses_per_s"] = benchmark::Counter(double(total), benchmark::Counter::kIsRate);
  report_rss(state);
}

// Accesses processed per second by `movement --method enumerate` (tiles, fills, drains,
// peaks of every level, visiting every access), and the closed form's time for the same.
void run_movement(benchmark::State& state, const Schedule& s, std::int64_t to,
                  MovementMethod method = MovementMethod::enumerate) {
  TraceOptions o;
  o.to = to;
  MovementOptions how;
  how.method = method;
  const std::int64_t accesses = [&] {
    std::int64_t n = 0;
    for (const auto& t : summarize(s, o).traces) n += t.n_accesses;
    return n;
  }();
  std::int64_t total = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(summarize_movement(s, o, how).levels.size());
    total += accesses;
  }
  state.counters["accesses_per_s"] = benchmark::Counter(double(total), benchmark::Counter::kIsRate);
  report_rss(state);
}
void BM_Movement_TiledGemm(benchmark::State& state) { run_movement(state, gemm(), gemm().n_timesteps / 8); }
void BM_Movement_HugeGemm(benchmark::State& state) { run_movement(state, huge(), 20'000'000); }
// The closed form over the whole schedules (huge_gemm: 1.07e12 timesteps).
void BM_MovementClosedForm_TiledGemm(benchmark::State& state) {
  run_movement(state, gemm(), gemm().n_timesteps, MovementMethod::closed_form);
}
void BM_MovementClosedForm_HugeGemm(benchmark::State& state) {
  run_movement(state, huge(), huge().n_timesteps, MovementMethod::closed_form);
}

// The DRAM transfer trace (requests between DRAM and GlobalBuffer): following the
// accesses (--method enumerate), accesses processed per second; from boxes (the
// default), requests per second.
void run_transfers(benchmark::State& state, const Schedule& s, std::int64_t to, bool enumerate = true) {
  TraceOptions o;
  o.to = to;
  std::int64_t accesses = 0;
  for (const auto& t : summarize(s, o).traces) accesses += t.n_accesses;
  std::int64_t total = 0, requests = 0;
  for (auto _ : state) {
    TransferOptions t;
    t.level = "DRAM";
    t.enumerate = enumerate;
    auto stage = transfer_pipeline(s, o, t);
    for (auto b = stage.next_batch(); !b.empty(); b = stage.next_batch()) requests += std::int64_t(b.size());
    total += accesses;
  }
  if (enumerate) state.counters["accesses_per_s"] = benchmark::Counter(double(total), benchmark::Counter::kIsRate);
  else state.counters["requests_per_s"] = benchmark::Counter(double(requests), benchmark::Counter::kIsRate);
  state.counters["requests"] = double(requests) / double(state.iterations());
  report_rss(state);
}
void BM_Transfers_TiledGemm(benchmark::State& state) { run_transfers(state, gemm(), gemm().n_timesteps / 8); }
// One GlobalBuffer window of huge_gemm (K x 64 x 64 timesteps): the transfer trace runs
// whole windows, so a window's worth is what it processes.
void BM_Transfers_HugeGemm(benchmark::State& state) { run_transfers(state, huge(), 10240 * 64 * 64); }
// From boxes: the whole tiled GEMM, and the same huge_gemm window.
void BM_TransfersBoxes_TiledGemm(benchmark::State& state) { run_transfers(state, gemm(), gemm().n_timesteps, false); }
void BM_TransfersBoxes_HugeGemm(benchmark::State& state) { run_transfers(state, huge(), 10240 * 64 * 64, false); }

// AccelForge's matmuls.yaml + fused_matmuls_to_simple, N_EINSUMS=2 M=128 KN=128: 1.26e7 accesses.
void BM_Summary_FusedMatmuls(benchmark::State& state) {
  static Schedule s = load({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                           {{"N_EINSUMS", std::int64_t(2)}, {"M", std::int64_t(128)}, {"KN", std::int64_t(128)}});
  for (auto _ : state) benchmark::DoNotOptimize(summarize(s).n_points);
  report_rss(state);
}

}  // namespace

BENCHMARK(BM_Batch_TiledGemm)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Range_TiledGemm)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Batch_ConvHalo)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Batch_FusedChain)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Format_Jsonl)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Format_Csv)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Format_Binary)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_OneOp_Batch)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_OneOp_Binary)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_OneOp_Jsonl)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_OneOp_Fused_Binary)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_OneOp_Fused_Jsonl)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_OneOp_Unfused_Binary)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_OneOp_Unfused_Jsonl)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Seek_Huge)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sample_Huge)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TileWindows_TiledGemm)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Movement_TiledGemm)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Movement_HugeGemm)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_MovementClosedForm_TiledGemm)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MovementClosedForm_HugeGemm)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Transfers_TiledGemm)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Transfers_HugeGemm)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_TransfersBoxes_TiledGemm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TransfersBoxes_HugeGemm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Summary_FusedMatmuls)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
