// Cache simulation rates (README "Caches"): the bare model, 1 MiB 16-way LRU, over a
// synthetic stream of line accesses (a blocked sweep over 4 MiB, 1/4 writes), with and
// without the three Cs; FIFO and PLRU (PLRU also on the generic engine, the one more
// than 16 ways take); reuse distances over the same stream.
//
//   build/bench/looptrace_bench_cache [LINE_ACCESSES]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "looptrace/stages/cache.hpp"
#include "looptrace/stages/cache_run.hpp"
#include "looptrace/stages/reuse_distances.hpp"
#include "looptrace/frontend/load.hpp"

using namespace looptrace;

namespace {

// CPU time of this thread: the machine is shared, so wall time would measure the others.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Batches of 4096 line accesses, made just before they are simulated (as cache_lines
// hands them on, so they are in the CPU's cache; a stream of 1 GB read from memory
// measured the memory instead): mostly reuse within 256 KiB blocks of a 4 MiB region,
// with random jumps, a quarter writes.
class Stream {
 public:
  std::span<const LineAccess> next() {
    for (std::size_t i = 0; i < batch_.size(); ++i, ++n_) {
      if (n_ % 100000 == 0) start_ = rng_() % (kRegion - kBlock);
      batch_[i] = {std::int64_t(n_ / 64), start_ + rng_() % kBlock, 0, std::uint32_t(n_ % 3), (n_ & 3) == 0};
    }
    return batch_;
  }

 private:
  static constexpr std::uint64_t kRegion = (4u << 20) / 64, kBlock = (256u << 10) / 64;
  std::mt19937_64 rng_{1};
  std::vector<LineAccess> batch_ = std::vector<LineAccess>(4096);
  std::uint64_t n_ = 0, start_ = 0;
};

// CPU seconds of `fn(batch)` alone over `batches` fresh batches.
template <class Fn>
double timed(std::size_t batches, Fn fn) {
  Stream stream;
  double total = 0;
  for (std::size_t b = 0; b < batches; ++b) {
    const auto batch = stream.next();
    const double t = cpu_seconds();
    fn(batch);
    total += cpu_seconds() - t;
  }
  return total;
}

// `outcomes`: each access's CacheAccess written (the stage's output); else the counts
// alone (what `looptrace cache` reports).
void bench_model(std::size_t batches, CacheConfig c, const char* label, bool outcomes = false,
                 CacheEngine engine = CacheEngine::fastest) {
  CacheModel m(c, 3, 1, engine);
  std::vector<CacheAccess> out;
  out.reserve(4096);
  const double s = timed(batches, [&](std::span<const LineAccess> b) {
    if (!outcomes) return m.count(b);
    out.clear();
    m.run(b, out);
  });
  m.finish();
  const CacheReport r = m.report();
  std::printf("%-44s %8.1f M line accesses/s  (%.3f s CPU; hit rate %.4f)\n", label,
              double(batches * 4096) / s / 1e6, s, double(r.total.hits) / double(r.total.accesses));
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::size_t(std::atoll(argv[1])) : 50'000'000, batches = n / 4096;
  CacheConfig c;  // 1 MiB, 16 ways, 64-byte lines, LRU, write-back
  c.three_cs = false;
  bench_model(batches, c, "1 MiB 16-way LRU (hits, misses, write-backs)");
  bench_model(batches, c, "the same, each access's outcome written", true);
  c.policy = CachePolicy::fifo;
  bench_model(batches, c, "1 MiB 16-way FIFO");
  c.policy = CachePolicy::plru;
  bench_model(batches, c, "1 MiB 16-way PLRU");
  bench_model(batches, c, "the same, the generic engine (a byte a node)", false, CacheEngine::generic);
  c.policy = CachePolicy::lru;
  c.three_cs = true;
  bench_model(batches, c, "1 MiB 16-way LRU with the three Cs");
  ReuseDistances d(3);
  const double s = timed(batches, [&](std::span<const LineAccess> b) { d.run(b); });
  std::printf("%-44s %8.1f M line accesses/s  (%.3f s CPU; %llu lines)\n", "reuse distances",
              double(batches * 4096) / s / 1e6, s, (unsigned long long)d.lines());
  return 0;
}
