// Cache simulation rates (README "Caches"): the bare model, 1 MiB 16-way LRU, over a
// synthetic stream of line accesses (a blocked sweep over 4 MiB, 1/4 writes), with and
// without the three Cs; reuse distances over the same stream; then the whole `cache`
// pipeline over the tiled GEMM's trace.
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

// Mostly reuse within 256 KiB blocks of a 4 MiB region, with random jumps.
std::vector<LineAccess> stream(std::size_t n) {
  std::mt19937_64 rng(1);
  std::vector<LineAccess> out(n);
  const std::uint64_t region = (4u << 20) / 64, block = (256u << 10) / 64;
  std::uint64_t start = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 100000 == 0) start = rng() % (region - block);
    out[i] = {std::int64_t(i / 64), start + rng() % block, 0, std::uint32_t(i % 3), (i & 3) == 0};
  }
  return out;
}

void bench_model(const std::vector<LineAccess>& in, CacheConfig c, const char* label) {
  CacheModel m(c, 3, 1);
  std::vector<CacheAccess> out;
  out.reserve(4096);
  const double t = cpu_seconds();
  for (std::size_t i = 0; i < in.size(); i += 4096) {
    out.clear();
    m.run(std::span<const LineAccess>(in).subspan(i, std::min<std::size_t>(4096, in.size() - i)), out);
  }
  m.finish();
  const double s = cpu_seconds() - t;
  const CacheReport r = m.report();
  std::printf("%-44s %8.1f M line accesses/s  (%.3f s CPU; hit rate %.4f)\n", label, double(in.size()) / s / 1e6, s,
              double(r.total.hits) / double(r.total.accesses));
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::size_t(std::atoll(argv[1])) : 50'000'000;
  const std::vector<LineAccess> in = stream(n);
  CacheConfig c;  // 1 MiB, 16 ways, 64-byte lines, LRU, write-back
  c.three_cs = false;
  bench_model(in, c, "1 MiB 16-way LRU (hits, misses, write-backs)");
  c.policy = CachePolicy::plru;
  bench_model(in, c, "1 MiB 16-way PLRU");
  c.policy = CachePolicy::lru;
  c.three_cs = true;
  bench_model(in, c, "1 MiB 16-way LRU with the three Cs");
  {
    ReuseDistances d(3);
    const double t = cpu_seconds();
    for (std::size_t i = 0; i < in.size(); i += 4096)
      d.run(std::span<const LineAccess>(in).subspan(i, std::min<std::size_t>(4096, in.size() - i)));
    const double s = cpu_seconds() - t;
    std::printf("%-44s %8.1f M line accesses/s  (%.3f s CPU; %llu lines)\n", "reuse distances", double(n) / s / 1e6, s,
                (unsigned long long)d.lines());
  }
  return 0;
}
