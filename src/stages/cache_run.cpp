#include "looptrace/stages/cache_run.hpp"

#include <algorithm>

#include "looptrace/support/error.hpp"
#include "looptrace/stages/time_selection.hpp"
#include "looptrace/stages/trace_pipeline.hpp"
#include "looptrace/stages/transfers.hpp"
#include "stages/cache_warp.hpp"

namespace looptrace {

std::uint64_t parse_bytes(const std::string& text, const std::string& what) {
  static const std::pair<const char*, std::uint64_t> kUnits[] = {
      {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"KB", 1ull << 10},
      {"MB", 1ull << 20},  {"GB", 1ull << 30},  {"B", 1},           {"", 1}};
  const std::string takes = what + " takes bytes (4096, 64KiB, 1MiB, 2GiB), not '" + text + "'";
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15) throw SpecError(takes);
  const std::string unit = text.substr(digits);
  for (const auto& [name, scale] : kUnits)
    if (unit == name) return std::stoull(text.substr(0, digits)) * scale;
  throw SpecError(takes);
}

CacheConfig parse_cache_spec(const std::string& text, const CacheConfig& base) {
  const std::size_t eq = text.find('='), slash = text.rfind('/');
  if (eq == std::string::npos || eq == 0 || slash == std::string::npos || slash < eq)
    throw SpecError("--cache takes NAME=SIZE/WAYS (e.g. L1=32KiB/8, LLC=1MiB/full), not '" + text + "'");
  CacheConfig c = base;
  c.name = text.substr(0, eq);
  c.size = parse_bytes(text.substr(eq + 1, slash - eq - 1), "--cache " + c.name + ": the size");
  const std::string ways = text.substr(slash + 1);
  if (ways == "full") {
    c.ways = 0;
  } else {
    if (ways.empty() || ways.size() > 12 || ways.find_first_not_of("0123456789") != std::string::npos ||
        std::stoull(ways) == 0)
      throw SpecError("--cache " + c.name + ": the ways take a whole number >= 1 or 'full', not '" + ways + "'");
    c.ways = std::stoull(ways);
  }
  return c;
}

namespace {

template <class Lines>
void pull(Lines lines, const CacheRunOptions& options, CacheRun& run,
          const std::function<void(std::span<const CacheAccess>)>& each) {
  if (!each && options.caches.size() == 1) {
    // Counts alone: the model counts each batch, no outcome is written.
    CacheModel model(options.caches.front(), lines.schedule().tensors.size(), lines.schedule().traces.size());
    std::optional<ReuseDistances> curve;
    if (options.curve) curve.emplace(lines.schedule().tensors.size());
    for (auto b = lines.next_batch(); !b.empty(); b = lines.next_batch()) {
      if (curve) curve->run(b);
      model.count(b);
    }
    model.finish();
    run.caches = {model.report()};
    if (curve) run.curve.emplace(std::move(*curve));
    return;
  }
  const auto drain = [&](auto& caches) {
    for (auto b = caches.next_batch(); !b.empty(); b = caches.next_batch())
      if (each) each(b);
    run.caches = caches.counts();
  };
  if (options.curve) {
    auto caches = std::move(lines) | reuse_distances() | cache(options.caches);
    drain(caches);
    run.curve.emplace(std::move(caches.upstream().distances()));
  } else {
    auto caches = std::move(lines) | cache(options.caches);
    drain(caches);
  }
}

std::string levels_of(const Schedule& s) {
  std::string known;
  for (const auto& l : s.memory_levels) known += (known.empty() ? "" : ", ") + l;
  return known.empty() ? "the mapping has no Storage node" : "levels: " + known;
}

}  // namespace

CacheRun simulate_caches(const Schedule& s, const TraceOptions& o, const CacheRunOptions& options,
                         const std::function<void(std::span<const CacheAccess>)>& each) {
  if (options.caches.empty()) throw SpecError("no cache to simulate");
  for (const CacheConfig& c : options.caches) check_cache_config(c);
  if (o.sample_timesteps)
    throw SpecError("a cache needs whole stretches of time: use --from/--to, --max-timesteps or --shard, "
                    "not --sample-timesteps");
  const std::uint64_t line = options.caches.front().line_bytes;
  CacheRun run;
  run.source = options.source;
  // One cache, counts alone: `warp` (warp_trace or warp_stream) may run it on a fresh
  // model; whether it did (then `run` holds its report).
  const auto warped = [&](auto&& warp) {
    if (!options.warp || each || options.caches.size() != 1 || options.curve) return false;
    CacheModel model(options.caches.front(), s.tensors.size(), s.traces.size());
    WarpStats stats;
    if (!warp(model, stats)) return false;
    run.caches = {model.report()}, run.warp = stats;
    return true;
  };
  if (options.source == "trace") {
    // Runs of elements, not elements: the lines of a run come at once.
    auto trace = trace_runs_pipeline(s, o);
    run.tensors = traced_tensors(s, trace.context());
    // The compute sees no one level: the layout's entries for every level place it.
    AddressMap map = default_address_map(s, trace.context(), options.align, options.layout, "");
    run.addresses = map;
    if (warped([&](CacheModel& model, WarpStats& stats) { return warp_trace(s, o, map, line, model, stats); }))
      return run;
    pull(std::move(trace) | cache_lines(line, std::move(map), true), options, run, each);
    return run;
  }
  if (options.source.rfind("transfers:", 0) != 0)
    throw SpecError("--source takes 'trace' or 'transfers:LEVEL', not '" + options.source + "'");
  TransferOptions t;
  t.level = options.source.substr(10);
  t.line_bytes = line;
  t.align = options.align;
  t.layout = options.layout;
  if (t.level.empty())
    throw SpecError("--source transfers:LEVEL needs a level's name (" + levels_of(s) + ")");
  if (std::find(s.memory_levels.begin(), s.memory_levels.end(), t.level) == s.memory_levels.end())
    throw SpecError("--source " + options.source + ": no Storage node has level '" + t.level + "' (" + levels_of(s) +
                    ")");
  run.transfers_empty_level = children_of(s, t.level, o.tensors).empty();
  auto requests = transfer_pipeline(s, o, t);
  run.tensors = traced_tensors(s, requests.context());
  const AddressMap map = requests.addresses();
  auto lines = std::move(requests) | cache_lines(line);
  if (warped([&](CacheModel& model, WarpStats& stats) {
        return warp_stream(s, o, map, line, [&] { return lines.next_batch(); }, model, stats);
      }))
    return run;
  pull(std::move(lines), options, run, each);
  return run;
}

}  // namespace looptrace
