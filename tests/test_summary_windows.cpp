// Tile windows as runs (looptrace/closed_form/window_runs.hpp), the summary's --windows forms and
// --threads, and merging shard summaries (merge_summaries, summary_json round trips).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "helpers.hpp"
#include "looptrace/parallel_trace.hpp"
#include "looptrace/sinks/sink.hpp"
#include "looptrace/sinks/summary_json.hpp"
#include "looptrace/compile/time_odometer.hpp"
#include "looptrace/closed_form/window_runs.hpp"

namespace {

using looptrace::RunBuilder;
using looptrace::SummaryOptions;
using looptrace::TimeRange;
using looptrace::WindowRun;
using looptrace::WindowsForm;
using Runs = std::vector<WindowRun>;

th::Windows pairs(const std::vector<TimeRange>& w) { return th::windows_of(w); }

Runs canonical(const std::vector<TimeRange>& windows) {
  RunBuilder b;
  for (const auto& w : windows) b.add(w);
  return b.finish();
}

bool before(const TimeRange& a, const TimeRange& b) {
  return a.from != b.from ? a.from < b.from : a.to < b.to;
}

std::vector<TimeRange> random_windows(std::mt19937_64& rng, int n) {
  std::vector<TimeRange> w;
  std::int64_t t = 0;
  const std::int64_t lengths[] = {1, 2, 3, 3, 3};
  for (int i = 0; i < n; ++i) {
    t += std::int64_t(rng() % 4);  // repeated starts, regular and irregular gaps
    w.push_back({t, t + lengths[rng() % 5]});
  }
  std::sort(w.begin(), w.end(), before);
  w.erase(std::unique(w.begin(), w.end(), [](auto& a, auto& b) { return a.from == b.from && a.to == b.to; }),
          w.end());
  return w;
}

std::string dump(const looptrace::TraceSummary& s) { return looptrace::summary_json(s).dump(); }

looptrace::TraceSummary summary_of(const th::Schedule& s, const th::TraceOptions& o, WindowsForm form,
                                   int threads = 1) {
  SummaryOptions so;
  so.windows = form;
  so.threads = threads;
  return looptrace::summarize(s, o, so);
}

// The summaries of n shards of `o`'s window, merged (given in reverse order), and the
// same through JSON text, equal the summary of the window; so does --threads.
void check_shards_merge(const th::Schedule& s, th::TraceOptions o, int n) {
  for (WindowsForm form : {WindowsForm::full, WindowsForm::compact, WindowsForm::none}) {
    const std::string whole = dump(summary_of(s, o, form));
    std::vector<looptrace::TraceSummary> shards, parsed;
    for (int i = n; i-- > 0;) {
      th::TraceOptions part = o;
      part.shard = {i, n};
      shards.push_back(summary_of(s, part, form));
      const auto text = looptrace::summary_json(shards.back()).dump();
      parsed.push_back(looptrace::summary_from_json(nlohmann::ordered_json::parse(text), "shard"));
    }
    INFO("form " << int(form) << ", " << n << " shards");
    CHECK(dump(looptrace::merge_summaries(shards)) == whole);
    CHECK(dump(looptrace::merge_summaries(parsed)) == whole);
    CHECK(dump(summary_of(s, o, form, n)) == whole);
  }
}

}  // namespace

TEST_CASE("window runs: canonical runs by hand") {
  // Three adjacent windows of 3, a gap, two more: two runs.
  CHECK(canonical({{0, 3}, {3, 6}, {6, 9}, {10, 13}, {13, 16}}) ==
        Runs{{0, 3, 3, 3}, {10, 3, 3, 2}});
  // A shorter (clipped) first window stands alone; a repeated window counts once.
  CHECK(canonical({{5, 6}, {6, 9}, {6, 9}, {9, 12}, {15, 17}}) ==
        Runs{{5, 1, 0, 1}, {6, 3, 3, 2}, {15, 2, 0, 1}});
  // Runs added whole give what their windows give one by one.
  RunBuilder b;
  b.add(WindowRun{0, 2, 3, 2});  // 0, 3
  b.add(WindowRun{6, 2, 4, 3});  // 6 continues the progression, 10 and 14 do not
  CHECK(b.finish() == Runs{{0, 2, 3, 3}, {10, 2, 4, 2}});
  CHECK(looptrace::window_count(Runs{{0, 2, 3, 3}, {10, 2, 4, 2}}) == 5);
  Runs runs{{0, 3, 3, 8}};
  looptrace::remove_window(runs, {9, 12});
  CHECK(runs == Runs{{0, 3, 3, 3}, {12, 3, 3, 4}});
  CHECK(looptrace::holds_window(runs, {15, 18}));
  CHECK_FALSE(looptrace::holds_window(runs, {9, 12}));
  CHECK_FALSE(looptrace::holds_window(runs, {15, 17}));
}

TEST_CASE("window runs: whole runs, interleaved lists and removals agree with windows one by one") {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 300; ++round) {
    const auto w = random_windows(rng, 1 + int(rng() % 40));
    const Runs want = canonical(w);
    CHECK(pairs(looptrace::expand(want)) == pairs(w));
    // The same windows cut into arbitrary runs, added run by run.
    RunBuilder b;
    for (const auto& r : want) {
      std::int64_t i = 0;
      while (i < r.count) {
        const std::int64_t n = 1 + std::int64_t(rng() % std::uint64_t(r.count - i));
        b.add(WindowRun{r.start + i * r.period, r.length, n > 1 ? r.period : 0, n});
        i += n;
      }
    }
    CHECK(b.finish() == want);
    // Split among three lists (with some windows in two of them), merged back.
    std::vector<std::vector<TimeRange>> parts(3);
    for (const auto& x : w) {
      const std::size_t k = rng() % 3;
      parts[k].push_back(x);
      if (rng() % 5 == 0) parts[(k + 1) % 3].push_back(x);
    }
    std::vector<Runs> lists;
    for (const auto& p : parts) lists.push_back(canonical(p));
    CHECK(looptrace::merge_runs(lists) == want);
    // Removing a window.
    if (!w.empty()) {
      const std::size_t k = rng() % w.size();
      Runs cut = want;
      looptrace::remove_window(cut, w[k]);
      std::vector<TimeRange> rest = w;
      rest.erase(rest.begin() + std::ptrdiff_t(k));
      CHECK(pairs(looptrace::expand(looptrace::merge_runs({cut}))) == pairs(rest));
    }
  }
}

TEST_CASE("window runs: a storage's runs equal its windows enumerated and clipped") {
  // Each storage of these schedules, against its odometer of window starts walked one
  // by one, over random selections.
  using V = th::Defines;
  const std::vector<std::pair<std::vector<std::string>, V>> specs = {
      {{"conv1d.workload.yaml", "conv1d.mapping.yaml"}, {}},
      {{"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"}, {{"N_EINSUMS", 3}, {"M", 4}, {"KN", 3}}},
      {{"matvecs.yaml", "matvecs_pipeline.mapping.yaml"}, {}},
      {{"matvecs.yaml", "fused_matvecs_to_simple_tiled_reuse_A.mapping.yaml"}, {}},
      {{"simple_fused.workload.yaml", "simple_fused.mapping.yaml"}, {}},
  };
  std::mt19937_64 rng(3);
  for (const auto& [files, vars] : specs) {
    const auto s = th::compile_corpus(files, vars);
    for (int round = 0; round < 40; ++round) {
      std::int64_t a = std::int64_t(rng() % std::uint64_t(s.n_timesteps + 1));
      std::int64_t b = std::int64_t(rng() % std::uint64_t(s.n_timesteps + 1));
      if (a > b) std::swap(a, b);
      if (round == 0) a = 0, b = s.n_timesteps;
      const TimeRange sel{a, b};
      for (const auto& storage : s.storages) {
        std::vector<TimeRange> want, want_cut;
        if (storage.duration > 0)
          for (auto odo = storage.starts(); !odo.done(); odo.advance()) {
            const TimeRange w{odo.time(), odo.time() + storage.duration};
            const TimeRange c{std::max(w.from, a), std::min(w.to, b)};
            if (c.from >= c.to) continue;
            want.push_back(c);
            if (c.from != w.from || c.to != w.to) want_cut.push_back(w);
          }
        Runs runs;
        std::vector<TimeRange> cut;
        looptrace::storage_window_runs(storage, sel, runs, cut);
        INFO(files[1] << " " << storage.level << " [" << a << ", " << b << ")");
        CHECK(pairs(looptrace::expand(runs)) == pairs(want));
        CHECK(pairs(cut) == pairs(want_cut));
      }
    }
  }
}

TEST_CASE("summary: compact windows by hand (conv1d), and clipping") {
  // GlobalBuffer holds I, W, O for 8 windows [3p, 3p + 3): one run.
  const auto s = th::compile_corpus({"conv1d.workload.yaml", "conv1d.mapping.yaml"});
  auto sum = summary_of(s, {}, WindowsForm::compact);
  REQUIRE(sum.tile_windows.size() == 2);
  CHECK(sum.tile_windows[1].level == "GlobalBuffer");
  CHECK(sum.tile_windows[1].tensors[0].runs == Runs{{0, 3, 3, 8}});
  CHECK(sum.tile_windows[0].tensors[0].runs == Runs{{0, 24, 0, 1}});
  CHECK(sum.tile_windows[1].tensors[0].windows.empty());
  CHECK(th::windows_of(sum.tile_lifetime("GlobalBuffer", "I")).size() == 8);
  // [5, 17): the windows [3, 6) and [15, 18) are clipped to [5, 6) and [15, 17).
  th::TraceOptions o;
  o.from = 5;
  o.to = 17;
  sum = summary_of(s, o, WindowsForm::compact);
  CHECK(sum.tile_windows[1].tensors[0].runs == Runs{{5, 1, 0, 1}, {6, 3, 3, 3}, {15, 2, 0, 1}});
  CHECK(pairs(sum.tile_windows[1].tensors[0].cut) == th::Windows{{3, 6}, {15, 18}});
  CHECK(pairs(sum.tile_windows[0].tensors[0].cut) == th::Windows{{0, 24}});
  const auto full = summary_of(s, o, WindowsForm::full);
  CHECK(pairs(full.tile_windows[1].tensors[0].windows) ==
        th::Windows{{5, 6}, {6, 9}, {9, 12}, {12, 15}, {15, 17}});
  const auto none = summary_of(s, o, WindowsForm::none);
  CHECK(none.tile_windows[1].tensors[0].windows.empty());
  CHECK(none.tile_windows[1].tensors[0].runs.empty());
  CHECK(none.memory_levels == full.memory_levels);
  const auto j = looptrace::summary_json(none);
  CHECK_FALSE(j.contains("tile_windows"));
  CHECK_FALSE(j.contains("tile_window_runs"));
}

TEST_CASE("summary: a billion windows are one run") {
  // 10^5 x 10^4 iterations of loops outside a storage: 10^9 windows of 2 timesteps.
  const auto s = th::compile_text(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 100000, n: 0 <= n < 10000, k: 0 <= k < 2}
  einsums:
  - Z[m, n] = A[m, k] * B[k, n]
mapping:
  nodes:
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Storage {component: Buf, tensors: [A]}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Compute {einsum: Z}
)");
  REQUIRE(s.n_timesteps == 2'000'000'000);
  th::TraceOptions o;
  o.from = 7;  // cuts the window [6, 8)
  const auto sum = summary_of(s, o, WindowsForm::compact);
  const auto& runs = sum.tile_windows[0].tensors[0].runs;
  CHECK(runs == Runs{{7, 1, 0, 1}, {8, 2, 2, 999'999'996}});
  CHECK(sum.traces[0].n_accesses == 2'000'000'000 - 7);
}

TEST_CASE("summary: shards merge into the whole (both window forms, windows, samples)") {
  using V = th::Defines;
  const std::vector<std::pair<std::vector<std::string>, V>> specs = {
      {{"conv1d.workload.yaml", "conv1d.mapping.yaml"}, {}},
      {{"conv2d.workload.yaml", "conv2d.mapping.yaml"}, {}},
      {{"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"}, {{"N_EINSUMS", 2}, {"M", 8}, {"KN", 4}}},
      {{"matmuls.yaml", "matmul_spatial.mapping.yaml"}, {{"N_EINSUMS", 1}, {"M", 8}, {"KN", 4}}},
      {{"matvecs.yaml", "matvecs_pipeline.mapping.yaml"}, {}},
      {{"simple_fused.workload.yaml", "simple_fused.mapping.yaml"}, {}},
  };
  for (const auto& [files, vars] : specs) {
    const auto s = th::compile_corpus(files, vars);
    INFO(files[1]);
    for (int n : {2, 3, 7}) {
      check_shards_merge(s, {}, n);
      th::TraceOptions o;
      o.from = s.n_timesteps / 5;
      o.to = s.n_timesteps - s.n_timesteps / 7;
      o.tensors = {s.tensors.back().name};
      check_shards_merge(s, o, n);
    }
    // Sampled: --threads splits the sample, and the result is the same.
    th::TraceOptions o;
    o.sample_timesteps = 9;
    o.seed = 4;
    for (int threads : {2, 3})
      CHECK(dump(summary_of(s, o, WindowsForm::compact, threads)) == dump(summary_of(s, o, WindowsForm::compact)));
  }
}

TEST_CASE("merge: shards that do not fit together are refused, naming the file") {
  const auto s = th::compile_corpus({"conv1d.workload.yaml", "conv1d.mapping.yaml"});
  th::TraceOptions a, b, c;
  a.shard = {0, 3};
  c.shard = {2, 3};
  auto e = th::spec_error([&] {
    looptrace::merge_summaries({looptrace::summarize(s, a), looptrace::summarize(s, c)}, {"a.json", "c.json"});
  });
  CHECK(e.where().file == "c.json");
  CHECK(th::contains(e.message(), "do not fit together"));
  b.tensors = {"I"};
  b.shard = {1, 3};
  e = th::spec_error([&] {
    looptrace::merge_summaries({looptrace::summarize(s, a), looptrace::summarize(s, b)}, {"a.json", "b.json"});
  });
  CHECK(e.where().file == "b.json");
  CHECK(th::contains(e.message(), "another schedule or other filters"));
  // A JSON object that is not a summary.
  e = th::spec_error([] { looptrace::summary_from_json(nlohmann::ordered_json::parse("{\"x\": 1}"), "x.json"); });
  CHECK(e.where().file == "x.json");
  CHECK(th::contains(e.message(), "unknown key 'x'"));
}

namespace {

// What a file descriptor writer produced, read back.
std::string capture(const std::function<void(int fd)>& write) {
  const int fd = ::memfd_create("test", 0);
  REQUIRE(fd >= 0);
  write(fd);
  std::string text(std::size_t(::lseek(fd, 0, SEEK_END)), '\0');
  CHECK(::pread(fd, text.data(), text.size(), 0) == ssize_t(text.size()));
  ::close(fd);
  return text;
}

std::string one_thread(const th::Schedule& s, const th::TraceOptions& o, const std::string& format) {
  return capture([&](int fd) {
    looptrace::OutputBuffer out(fd);
    looptrace::AccessStream stream(s, o);
    auto sink = looptrace::make_sink(format, s, out);
    sink->begin();
    for (auto b = stream.next_batch(); !b.empty(); b = stream.next_batch()) sink->write(b);
    sink->end();
    out.flush();
  });
}

}  // namespace

TEST_CASE("parallel trace: many small pieces, in order, equal one thread byte for byte") {
  const auto s = th::compile_corpus({"matmuls.yaml", "fused_matmuls_to_simple.mapping.yaml"},
                                    {{"N_EINSUMS", 3}, {"M", 8}, {"KN", 5}});
  std::vector<th::TraceOptions> selections(5);
  selections[1].from = 17, selections[1].to = 300;
  selections[2].shard = {1, 3};
  selections[3].sample_timesteps = 50, selections[3].seed = 2;
  selections[4].tensors = {"T1"}, selections[4].max_timesteps = 200;
  for (const auto& o : selections)
    for (const std::string format : {"jsonl", "csv", "binary"})
      for (int threads : {2, 3}) {
        looptrace::ParallelTraceOptions p;
        p.threads = threads;
        p.chunk_bytes = 512;  // a few accesses per piece: hundreds of pieces
        std::int64_t pieces = 0, last = -1;
        bool ordered = true;
        p.progress = [&](std::int64_t t) {
          ordered = ordered && t > last;
          last = t;
          ++pieces;
        };
        const std::string want = one_thread(s, o, format);
        INFO(format << ", " << threads << " threads");
        CHECK(capture([&](int fd) { looptrace::write_trace_parallel(s, o, format, fd, p); }) == want);
        CHECK(ordered);
        CHECK(pieces >= 5);
      }
  // Pieces far larger than their buffers (a timestep of 288 accesses, buffers of 1.5
  // KiB): what spills into the piece's file is written first, then the buffer.
  const auto tiles = th::compile_text(R"(
workload:
  iteration_space_shape: {m: 0 <= m < 16, n: 0 <= n < 16, k: 0 <= k < 5}
  einsums:
  - Z[m, n] = A[m, k] * B[k, n]
mapping:
  nodes:
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Compute {einsum: Z}
)");
  for (const std::string format : {"jsonl", "binary"}) {
    looptrace::ParallelTraceOptions p;
    p.threads = 3;
    p.chunk_bytes = 1024;
    CHECK(capture([&](int fd) { looptrace::write_trace_parallel(tiles, {}, format, fd, p); }) ==
          one_thread(tiles, {}, format));
  }
  // Bad options fail before anything is written.
  th::TraceOptions bad;
  bad.tensors = {"nope"};
  CHECK(capture([&](int fd) {
          th::spec_error([&] { looptrace::write_trace_parallel(s, bad, "jsonl", fd, {}); });
        }).empty());
}
