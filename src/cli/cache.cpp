// `looptrace cache`: an exact cache (or a hierarchy) over the trace at the compute or
// over the transfer trace of a level: counts with the three Cs, the miss-ratio curve,
// or the misses as a DRAM simulator's trace.
#include <unistd.h>

#include <bit>
#include <iostream>
#include <optional>

#include "common.hpp"
#include "empty_selection.hpp"
#include "looptrace/support/error.hpp"
#include "looptrace/sinks/cache_report.hpp"
#include "looptrace/sinks/output.hpp"
#include "looptrace/sinks/transfer_formats.hpp"
#include "looptrace/stages/cache_run.hpp"
#include "looptrace/stages/issue_cycles.hpp"
#include "looptrace/stages/transfers.hpp"

namespace looptrace::cli {

namespace {
struct CacheArgs {
  std::string size = "1MiB", ways = "16", policy = "lru", source = "trace", format = "json";
  std::uint64_t line_bytes = 64, align = 4096;
  std::vector<std::string> caches;  // NAME=SIZE/W
  bool write_through = false, no_write_allocate = false, curve = false, misses = false, no_warp = false;
  std::int64_t cycles_per_timestep = 1;
  std::string layout;  // a layout file (SEMANTICS "Layouts"); empty: row-major

  CacheRunOptions resolved() const {
    CacheConfig base;
    base.line_bytes = line_bytes;
    base.policy = parse_cache_policy(policy);
    base.write_back = !write_through;
    base.write_allocate = !no_write_allocate;
    CacheRunOptions o;
    if (caches.empty()) o.caches.push_back(parse_cache_spec("cache=" + size + "/" + ways, base));
    for (const std::string& c : caches) o.caches.push_back(parse_cache_spec(c, base));
    o.source = source;
    o.align = align;
    o.curve = curve;
    o.warp = !no_warp;
    return o;
  }
};

// The misses (what the last cache sends down) as a DRAMsim3 or Ramulator 2 trace.
void write_misses(const Schedule& schedule, const TraceOptions& options, const CacheRunOptions& run,
                  const CacheArgs& a) {
  OutputBuffer out(STDOUT_FILENO);
  auto sink = make_transfer_sink(a.format, schedule, "", out);
  IssueClock clock(IssueTiming{a.cycles_per_timestep});
  std::vector<TransferRequest> down;
  std::vector<IssuedTransfer> issued;
  simulate_caches(schedule, options, run, [&](std::span<const CacheAccess> batch) {
    down.clear(), issued.clear();
    for (const CacheAccess& x : batch) traffic_of(x, down);
    for (const TransferRequest& r : down) issued.push_back({r, clock.issue(r.timestep)});
    sink->write(issued);
  });
  out.flush();
}
}  // namespace

void add_cache_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("cache", "Simulate a cache (or a hierarchy) exactly: hits, misses and their causes");
  auto args = std::make_shared<CommonArgs>();
  auto c = std::make_shared<CacheArgs>();
  args->add_to(*cmd);
  cmd->add_option("--size", c->size, "Cache size in bytes (or with KiB, MiB, GiB)")->capture_default_str();
  cmd->add_option("--ways", c->ways, "Associativity: a number of ways, or 'full'")->capture_default_str();
  cmd->add_option("--line-bytes", c->line_bytes, "Line size in bytes (a power of two)")
      ->capture_default_str()
      ->check(whole_number(1, std::int64_t(1) << 30));
  cmd->add_option("--policy", c->policy, "Replacement: lru, fifo or plru (tree pseudo-LRU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"lru", "fifo", "plru"}));
  cmd->add_flag("--write-through", c->write_through, "Send every write down at once (default: write-back)");
  cmd->add_flag("--no-write-allocate", c->no_write_allocate, "A write miss goes down without filling a line");
  cmd->add_option("--source", c->source,
                  "trace (the accesses at the compute) or transfers:LEVEL (the requests of `looptrace transfers "
                  "--level LEVEL`: a cache in front of LEVEL)")
      ->capture_default_str();
  cmd->add_option("--cache", c->caches,
                  "NAME=SIZE/WAYS, repeated, innermost first: a hierarchy (replaces --size/--ways)");
  cmd->add_flag("--no-warp", c->no_warp,
                "Simulate every line access (by default, where a loop's blocks repeat in a shifted cache, the "
                "blocks after are counted, not simulated: the same counts)");
  cmd->add_flag("--curve", c->curve, "Add the miss-ratio curve (exact reuse distances, every size at once)");
  cmd->add_flag("--misses", c->misses, "Write what the last cache sends down, as --format dramsim3 or ramulator2");
  cmd->add_option("--format", c->format, "json or text; with --misses: dramsim3 or ramulator2")
      ->capture_default_str()
      ->check(CLI::IsMember({"json", "text", "dramsim3", "ramulator2"}));
  cmd->add_option("--align", c->align, "Each tensor starts at a multiple of this many bytes")
      ->capture_default_str()
      ->check(whole_number(1, std::int64_t(1) << 40));
  cmd->add_option("--layout", c->layout,
                  "A layout file (README 'Layouts'): transfers:L takes its entries for L, the trace those for "
                  "every level");
  cmd->add_option("--cycles-per-timestep", c->cycles_per_timestep,
                  "--misses --format dramsim3: a request at timestep t issues at cycle t * C")
      ->capture_default_str()
      ->check(whole_number(1, std::int64_t(1) << 20));
  cmd->callback([args, c] {
    const bool trace_format = c->format == "dramsim3" || c->format == "ramulator2";
    if (c->misses != trace_format)
      throw SpecError(c->misses ? "--misses writes a DRAM trace: give --format dramsim3 or ramulator2"
                                : "--format " + c->format + " is for --misses (the misses as a DRAM trace)");
    if (!std::has_single_bit(c->align))
      throw SpecError("--align takes a power of two, not " + std::to_string(c->align));
    CacheRunOptions run = c->resolved();
    for (const CacheConfig& config : run.caches) check_cache_config(config);
    Schedule schedule = args->load();
    std::optional<LayoutSpec> layout;  // outlives the run
    if (!c->layout.empty()) {
      layout = load_layout(c->layout);
      check_layout_names(schedule, *layout);
      run.layout = &*layout;
    }
    const TraceOptions options = args->resolved();
    if (c->misses) return write_misses(schedule, options, run, *c);
    const CacheRun result = simulate_caches(schedule, options, run);
    OutputBuffer out(STDOUT_FILENO);
    if (c->format == "text") {
      out.write(cache_text(result, schedule));
    } else {
      out.write(cache_json(result, schedule).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
      out.put('\n');
    }
    out.flush();
    if (result.caches.front().total.accesses > 0) return;
    if (result.transfers_empty_level)
      std::cerr << "looptrace: note: no Storage node below " << printable(run.source.substr(10))
                << " is filled from it: its transfer trace is empty\n";
    else
      note_nothing_selected(schedule, options, "the cache sees no access");
  });
}

}  // namespace looptrace::cli
