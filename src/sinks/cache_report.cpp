#include "looptrace/sinks/cache_report.hpp"

#include <iomanip>
#include <sstream>

namespace looptrace {

namespace {

using json = nlohmann::ordered_json;

void put_counts(json& out, const CacheCounts& c, bool writebacks) {
  out["accesses"] = c.accesses;
  out["hits"] = c.hits;
  out["misses"] = c.misses;
  out["cold"] = c.cold;
  out["capacity"] = c.capacity;
  out["conflict"] = c.conflict();
  if (writebacks) out["writebacks"] = c.writebacks;
  out["write_throughs"] = c.write_throughs;
}

// The Einsums of the traced traces, in workload order, with their traces' counts.
std::vector<std::pair<std::string, CacheCounts>> einsum_counts(const CacheReport& r, const Schedule& s) {
  std::vector<std::pair<std::string, CacheCounts>> out;
  for (std::size_t e = 0; e < s.einsums.size(); ++e) {
    CacheCounts sum;
    bool any = false;
    for (std::size_t t = 0; t < s.traces.size(); ++t)
      if (s.traces[t].einsum_index == int(e) && r.traces[t].accesses > 0) sum += r.traces[t], any = true;
    if (any) out.push_back({s.einsums[e], sum});
  }
  return out;
}

// One object per traced tensor, in the run's order: {"tensor": name, ...what fill adds}.
template <class Fill>
json per_tensor(const CacheRun& run, const Schedule& s, Fill fill) {
  json out = json::array();
  for (const std::string& name : run.tensors) {
    const int t = s.find_tensor(name);
    if (t < 0) continue;
    json x;
    x["tensor"] = name;
    fill(x, std::uint32_t(t));
    out.push_back(std::move(x));
  }
  return out;
}

json cache_object(const CacheRun& run, const CacheReport& r, const Schedule& s) {
  json c;
  c["name"] = r.config.name;
  c["size"] = r.config.size;
  c["ways"] = r.config.ways == 0 ? json("full") : json(r.config.ways);
  c["sets"] = r.config.sets();
  c["line_bytes"] = r.config.line_bytes;
  c["policy"] = policy_name(r.config.policy);
  c["write_policy"] = r.config.write_back ? "write-back" : "write-through";
  c["write_allocate"] = r.config.write_allocate;
  put_counts(c, r.total, true);
  c["tensors"] = per_tensor(run, s, [&](json& x, std::uint32_t t) { put_counts(x, r.tensors[t], true); });
  json einsums = json::array();
  if (run.source == "trace" && &r == &run.caches.front())
    for (const auto& [name, counts] : einsum_counts(r, s)) {
      json x;
      x["einsum"] = name;
      put_counts(x, counts, false);
      einsums.push_back(std::move(x));
    }
  c["einsums"] = std::move(einsums);
  return c;
}

json curve_json(const CacheRun& run, const Schedule& s) {
  const ReuseDistances& d = *run.curve;
  const std::uint64_t line = run.caches.front().config.line_bytes;
  json c;
  c["line_bytes"] = line;
  c["accesses"] = d.accesses();
  c["cold"] = d.cold();
  c["distinct_lines"] = d.lines();
  const std::vector<std::uint64_t> misses = d.misses_at_powers();
  json lines = json::array(), bytes = json::array();
  for (std::size_t k = 0; k < misses.size(); ++k) lines.push_back(std::uint64_t(1) << k), bytes.push_back(line << k);
  c["lines"] = lines;
  c["bytes"] = bytes;
  c["misses"] = misses;
  c["tensors"] = per_tensor(run, s, [&](json& x, std::uint32_t t) {
    x["accesses"] = d.tensor_accesses(t);
    x["misses"] = d.misses_at_powers(t);
  });
  json histogram = json::array();  // [distance, accesses] where accesses > 0
  const auto& h = d.histogram();
  for (std::size_t k = 0; k < h.size(); ++k)
    if (h[k]) histogram.push_back(json::array({k, h[k]}));
  c["histogram"] = std::move(histogram);
  return c;
}

std::string percent(std::uint64_t part, std::uint64_t whole) {
  if (whole == 0) return "-";
  std::ostringstream o;
  o << std::fixed << std::setprecision(2) << 100.0 * double(part) / double(whole) << "%";
  return o.str();
}

void text_row(std::ostringstream& o, const std::string& label, const CacheCounts& c, bool writebacks) {
  o << "  " << std::left << std::setw(16) << label << std::right << std::setw(14) << c.accesses << std::setw(14)
    << c.hits << std::setw(14) << c.misses << std::setw(9) << percent(c.hits, c.accesses) << std::setw(12) << c.cold
    << std::setw(12) << c.capacity << std::setw(12) << c.conflict() << std::setw(12)
    << (writebacks ? std::to_string(c.writebacks) : std::string("-")) << "\n";
}

}  // namespace

json cache_json(const CacheRun& run, const Schedule& s) {
  json out;
  out["source"] = run.source;
  json caches = json::array();
  for (const CacheReport& r : run.caches) caches.push_back(cache_object(run, r, s));
  out["caches"] = std::move(caches);
  out["curve"] = run.curve ? curve_json(run, s) : json(nullptr);
  // How much of it warps counted rather than simulated (null: every access simulated).
  out["warp"] = run.warp ? json{{"simulated", run.warp->simulated}, {"skipped", run.warp->skipped},
                                {"warps", run.warp->warps}, {"phase_warps", run.warp->phase_warps},
                                {"probe_warps", run.warp->probe_warps},
                                {"partial_shadow_warps", run.warp->partial_shadow_warps},
                                {"idle_place_warps", run.warp->idle_place_warps}}
                         : json(nullptr);
  return out;
}

std::string cache_text(const CacheRun& run, const Schedule& s) {
  std::ostringstream o;
  for (const CacheReport& r : run.caches) {
    const CacheConfig& c = r.config;
    o << c.name << ": " << c.size << " bytes, " << (c.ways == 0 ? std::string("fully associative") : std::to_string(c.ways) + "-way")
      << ", " << c.sets() << " sets of " << c.line_bytes << "-byte lines, " << policy_name(c.policy) << ", "
      << (c.write_back ? "write-back" : "write-through") << (c.write_allocate ? "" : ", no write-allocate")
      << " (source: " << run.source << ")\n";
    o << "  " << std::left << std::setw(16) << "" << std::right << std::setw(14) << "accesses" << std::setw(14) << "hits"
      << std::setw(14) << "misses" << std::setw(9) << "hit rate" << std::setw(12) << "cold" << std::setw(12)
      << "capacity" << std::setw(12) << "conflict" << std::setw(12) << "writebacks" << "\n";
    text_row(o, "total", r.total, true);
    for (const std::string& name : run.tensors)
      if (const int t = s.find_tensor(name); t >= 0) text_row(o, "tensor " + name, r.tensors[std::size_t(t)], true);
    if (run.source == "trace" && &r == &run.caches.front())
      for (const auto& [name, counts] : einsum_counts(r, s)) text_row(o, "einsum " + name, counts, false);
    if (c.write_back == false) o << "  write-throughs: " << r.total.write_throughs << "\n";
  }
  if (run.warp)
    o << "warps: " << run.warp->warps << " (" << run.warp->phase_warps << " at a phase, " << run.warp->probe_warps
      << " of them at a probe, "
      << run.warp->partial_shadow_warps << " over part of the shadow, " << run.warp->idle_place_warps
      << " with idle lines that differ), " << run.warp->simulated
      << " line accesses simulated, "
      << run.warp->skipped << " counted by shifting the cache\n";
  if (run.curve) {
    const std::vector<std::uint64_t> misses = run.curve->misses_at_powers();
    const std::uint64_t line = run.caches.front().config.line_bytes;
    o << "miss-ratio curve (fully associative LRU, " << run.curve->accesses() << " accesses, "
      << run.curve->lines() << " distinct lines):\n";
    o << "  " << std::right << std::setw(12) << "lines" << std::setw(14) << "bytes" << std::setw(14) << "misses"
      << std::setw(10) << "ratio" << "\n";
    for (std::size_t k = 0; k < misses.size(); ++k)
      o << "  " << std::setw(12) << (std::uint64_t(1) << k) << std::setw(14) << (line << k) << std::setw(14)
        << misses[k] << std::setw(10) << percent(misses[k], run.curve->accesses()) << "\n";
  }
  return o.str();
}

}  // namespace looptrace
