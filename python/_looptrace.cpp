// The Python extension `looptrace._looptrace`: a thin binding of the library's public
// API (load_spec, compile_schedule, summarize + AccessStream for trace_accesses, summarize_movement,
// tile_timeline + timeline_json, describe_spec, AccessStream, IterationStream, transfer_pipeline,
// build_plot). The Python package (looptrace/__init__.py) shapes what it returns into the reference's
// classes. Arrays are handed to numpy without a copy: each owns its buffer through a
// capsule. Long calls release the GIL and poll for Ctrl-C between batches.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "looptrace/sinks/describe.hpp"
#include "looptrace/support/error.hpp"
#include "looptrace/iterations.hpp"
#include "looptrace/closed_form/movement.hpp"
#include "looptrace/closed_form/tile_timeline.hpp"
#include "looptrace/sinks/timeline.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/sinks/movement_report.hpp"
#include "looptrace/sinks/plot.hpp"
#include "looptrace/sinks/summary_json.hpp"
#include "looptrace/sinks/cache_report.hpp"
#include "looptrace/stages/cache_run.hpp"
#include "looptrace/frontend/load.hpp"
#include "looptrace/stages/time_selection.hpp"
#include "looptrace/stream.hpp"
#include "looptrace/closed_form/summary.hpp"
// The one use of stage internals: the transfer pipeline (stages/transfers.hpp). Kept
// to transfers_of() below, so that a change to the stage protocol touches one place.
#include "looptrace/stages/issue_cycles.hpp"
#include "looptrace/stages/transfers.hpp"

namespace py = pybind11;
using namespace looptrace;

namespace {

// ---- values in, arrays out --------------------------------------------------------

// A Python value (None, bool, int, float, str, list, tuple, dict) as a -D value.
DefineValue to_define(const py::handle& v) {
  if (v.is_none()) return DefineValue();
  if (py::isinstance<py::bool_>(v)) return DefineValue(v.cast<bool>());
  if (py::isinstance<py::int_>(v)) return DefineValue(v.cast<std::int64_t>());
  if (py::isinstance<py::float_>(v)) return DefineValue(v.cast<double>());
  if (py::isinstance<py::str>(v)) return DefineValue(v.cast<std::string>());
  if (py::isinstance<py::dict>(v)) {
    DefineValue::Dict d;
    for (auto item : v.cast<py::dict>()) d.emplace_back(to_define(item.first), to_define(item.second));
    return DefineValue(std::move(d));
  }
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    DefineValue::List l;
    for (auto item : v) l.push_back(to_define(item));
    return DefineValue(std::move(l), py::isinstance<py::tuple>(v));
  }
  throw py::type_error("jinja_parse_data values must be None, bool, int, float, str, list, tuple or dict, not " +
                       std::string(py::str(v.get_type().attr("__name__"))));
}

// A vector handed to numpy: the array views its buffer, a capsule owns it.
template <class T>
py::array_t<T> adopt(std::vector<T>&& data, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(data));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, owned->data(), owner);
}
template <class T>
py::array_t<T> adopt(std::vector<T>&& data) {
  const auto n = py::ssize_t(data.size());
  return adopt(std::move(data), {n});
}

// Called between batches with the GIL released: takes it back now and then (every
// 50 ms) to run Python's signal handlers, so Ctrl-C raises KeyboardInterrupt.
class Poll {
 public:
  void operator()() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(50)) return;
    last_ = now;
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

py::object json_to_python(const nlohmann::ordered_json& j) {
  // Names come from user files: invalid UTF-8 becomes U+FFFD, as the CLI prints it.
  const std::string text = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return py::module_::import("json").attr("loads")(text);
}

// ---- the spec and its schedule ----------------------------------------------------

// A loaded spec; its schedule is compiled once, on first use.
struct SpecHandle {
  std::shared_ptr<const Spec> spec;
  std::shared_ptr<const Schedule> compiled;

  // Called with the GIL held; compiles without it, and stores the result with it (two
  // threads may both compile once; either result is the same).
  std::shared_ptr<const Schedule> schedule() {
    if (!compiled) {
      std::shared_ptr<const Schedule> s;
      {
        py::gil_scoped_release nogil;
        s = std::make_shared<const Schedule>(compile_schedule(*spec));
      }
      if (!compiled) compiled = std::move(s);
    }
    return compiled;
  }
};

std::shared_ptr<SpecHandle> load(const std::vector<std::string>& files, const py::dict& data,
                                 bool require_mapping) {
  Defines variables;
  for (auto item : data) variables[py::str(item.first)] = to_define(item.second);
  LoadOptions options;
  options.require_mapping = require_mapping;
  auto h = std::make_shared<SpecHandle>();
  py::gil_scoped_release nogil;
  h->spec = std::make_shared<const Spec>(load_spec(files, variables, options));
  return h;
}

// The workload of one spec with the mapping (and arch) of another: what
// trace_accesses(mapping, workload=...) traces.
std::shared_ptr<SpecHandle> combine(const SpecHandle& mapping, const SpecHandle& workload) {
  auto s = std::make_shared<Spec>(*mapping.spec);
  s->workload = workload.spec->workload;
  auto h = std::make_shared<SpecHandle>();
  h->spec = std::move(s);
  return h;
}

TraceOptions trace_options(const py::object& tensors, const py::object& einsums, const py::object& max_timesteps,
                           const py::object& from, const py::object& to, const py::object& shard,
                           const py::object& sample, std::uint64_t seed) {
  TraceOptions o;
  if (!tensors.is_none()) o.tensors = tensors.cast<std::vector<std::string>>();
  if (!einsums.is_none()) o.einsums = einsums.cast<std::vector<std::string>>();
  if (!max_timesteps.is_none()) o.max_timesteps = max_timesteps.cast<std::int64_t>();
  if (!from.is_none()) o.from = from.cast<std::int64_t>();
  if (!to.is_none()) o.to = to.cast<std::int64_t>();
  if (!shard.is_none()) o.shard = shard.cast<std::pair<std::int64_t, std::int64_t>>();
  if (!sample.is_none()) o.sample_timesteps = sample.cast<std::int64_t>();
  o.seed = seed;
  return o;
}

// ---- the materialized trace -------------------------------------------------------

py::list windows_list(const std::vector<TimeRange>& windows) {
  py::list out;
  for (const TimeRange& w : windows) out.append(py::make_tuple(w.from, w.to));
  return out;
}

// A buffer for numpy, uninitialized (its first write touches it) and, when large, on
// transparent huge pages: filling a fresh buffer costs a page fault per 4 KiB otherwise.
template <class T>
struct Buffer {
  T* data = nullptr;
  std::size_t size = 0;

  explicit Buffer(std::size_t n) : size(n) {
    constexpr std::size_t kHuge = std::size_t(2) << 20;
    const std::size_t bytes = std::max<std::size_t>(n * sizeof(T), 1);
    if (bytes >= 2 * kHuge) {
      data = static_cast<T*>(std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge));
      if (data) madvise(data, bytes, MADV_HUGEPAGE);
    } else {
      data = static_cast<T*>(std::malloc(bytes));
    }
    if (!data) throw std::bad_alloc();
  }
  Buffer(Buffer&& o) noexcept : data(std::exchange(o.data, nullptr)), size(o.size) {}
  Buffer(const Buffer&) = delete;
  ~Buffer() { std::free(data); }

  // The array views the buffer; a capsule frees it with the last view.
  py::array_t<T> release(std::vector<py::ssize_t> shape) {
    T* p = std::exchange(data, nullptr);
    py::capsule owner(p, [](void* q) { std::free(q); });
    return py::array_t<T>(std::move(shape), p, owner);
  }
};

// The per-rank coordinates of `n` elements of a tensor of `shape`, row-major: the
// quotients by the row-major strides, through a double reciprocal corrected to the
// exact integer (elements are below 2^53), which is several times a division's speed.
void unravel_into(const std::int64_t* element, std::size_t n, const std::vector<std::int64_t>& shape,
                  std::int64_t* out) {
  const std::size_t r = shape.size();
  if (r == 1) {
    std::memcpy(out, element, n * sizeof(std::int64_t));
    return;
  }
  std::vector<std::int64_t> stride(r, 1);
  for (std::size_t k = r - 1; k-- > 0;) stride[k] = stride[k + 1] * shape[k + 1];
  std::vector<double> inverse(r);
  for (std::size_t k = 0; k < r; ++k) inverse[k] = 1.0 / double(stride[k]);
  if (std::all_of(stride.begin(), stride.end(), [](std::int64_t x) { return (x & (x - 1)) == 0; })) {
    std::vector<int> shift(r);  // power-of-two strides: shifts and masks
    for (std::size_t k = 0; k < r; ++k) shift[k] = __builtin_ctzll(std::uint64_t(stride[k]));
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t e = element[i];
      out[i * r] = e >> shift[0];
      for (std::size_t k = 1; k < r; ++k) out[i * r + k] = (e & (stride[k - 1] - 1)) >> shift[k];
    }
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t e = element[i];
    for (std::size_t k = 0; k + 1 < r; ++k) {
      std::int64_t q = std::int64_t(double(e) * inverse[k]);
      q -= q * stride[k] > e;
      q += (q + 1) * stride[k] <= e;
      out[i * r + k] = q;
      e -= q * stride[k];
    }
    out[i * r + r - 1] = e;
  }
}

// The (n, ranks) coordinates of an element array, in a new buffer that numpy adopts.
py::array_t<std::int64_t> unravel_py(const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& element,
                                     const std::vector<std::int64_t>& shape) {
  const auto n = std::size_t(element.size());
  Buffer<std::int64_t> out(n * shape.size());
  {
    py::gil_scoped_release nogil;
    unravel_into(element.data(), n, shape, out.data);
  }
  return out.release({py::ssize_t(n), py::ssize_t(shape.size())});
}

// The CPUs this process may run on (taskset, cgroups' cpusets), at least 1.
int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, int(std::thread::hardware_concurrency()));
}

// Writes the accesses of `o` into each trace's arrays from its cursors (t_at, e_at: per
// index of the summary's traces, `slot` maps a trace there) up to `t_end`, which they
// must reach exactly. Stops early, leaving the arrays part-written, when `stop` is set.
void gather_accesses(const Schedule& s, const TraceOptions& o, const std::vector<int>& slot,
                     std::vector<std::int64_t*> t_at, std::vector<std::int64_t*> e_at,
                     const std::vector<std::int64_t*>& t_end, const std::atomic<bool>& stop, Poll* poll) {
  AccessStream stream(s, o, 1 << 14);
  for (auto batch = stream.next_batch(); !batch.empty(); batch = stream.next_batch()) {
    if (poll) (*poll)();
    if (stop.load(std::memory_order_relaxed)) return;
    // Records come in runs of one trace (a leaf's tile of one tensor): one cursor a run.
    for (const AccessRecord *r = batch.data(), *end = r + batch.size(); r < end;) {
      const std::uint32_t trace = r->trace;
      const auto k = std::size_t(slot[trace]);
      std::int64_t *t = t_at[k], *e = e_at[k];
      std::int64_t* const limit = t_end[k];
      do {
        if (t == limit) throw std::logic_error("looptrace: a trace has more accesses than its summary counts");
        *t++ = r->timestep;
        *e++ = r->element;
      } while (++r < end && r->trace == trace);
      t_at[k] = t, e_at[k] = e;
    }
  }
  for (std::size_t k = 0; k < t_at.size(); ++k)
    if (t_at[k] != t_end[k]) throw std::logic_error("looptrace: a trace has fewer accesses than its summary counts");
}

// The reference's AccessTrace (trace.hpp's trace_accesses), gathered straight into
// numpy-ready buffers: the summary gives every trace's count in closed form, so each
// array is allocated once at its size and filled in one pass of the stream. With more
// than one CPU, workers take pieces of the traced time: each piece's counts, also in
// closed form, say where in each array it starts, so the pieces are written in place
// at once (page faults included) and the arrays are those of one pass.
py::dict trace_accesses_py(SpecHandle& h, const TraceOptions& options, std::int64_t max_points, int threads) {
  const auto schedule = h.schedule();
  const Schedule& s = *schedule;
  TraceSummary summary;
  std::vector<Buffer<std::int64_t>> timestep, element;
  {
    py::gil_scoped_release nogil;
    Poll poll;
    summary = summarize(s, options);
    for (std::size_t i = 0; i < s.leaves.size(); ++i)
      if (summary.leaf_points[i] > max_points)
        throw SpecError(s.leaves[i].where,
                        "Einsum '" + s.leaves[i].einsum + "' enumerates " + std::to_string(summary.leaf_points[i]) +
                            " points, more than max_points = " + std::to_string(max_points) +
                            "; raise the limit, trace a prefix, or stream the trace instead");
    std::vector<int> slot(s.traces.size(), -1);  // trace -> index in summary.traces
    std::vector<std::int64_t*> t_at, e_at, t_end;
    __int128 total = 0;
    for (const TraceCount& c : summary.traces) {
      slot[std::size_t(c.trace)] = int(timestep.size());
      timestep.emplace_back(std::size_t(c.n_accesses));
      element.emplace_back(std::size_t(c.n_accesses));
      t_at.push_back(timestep.back().data);
      e_at.push_back(element.back().data);
      t_end.push_back(timestep.back().data + timestep.back().size);
      total += c.n_accesses;
    }
    // Pieces of equal time, a few per worker so that uneven ones even out; worth it
    // past a million accesses, and where the counts come in closed form.
    const TimeRange window = TimeSelection::from_options(options, s.n_timesteps).window;
    const int workers = threads > 0 ? threads : std::min(usable_cpus(), 8);
    const std::int64_t pieces = workers > 1 && total >= (1 << 20) && summary.enumerated.empty()
                                    ? std::min<std::int64_t>(4 * workers, window.to - window.from)
                                    : 1;
    std::atomic<bool> stop{false};
    if (pieces <= 1) {
      gather_accesses(s, options, slot, t_at, e_at, t_end, stop, &poll);
    } else {
      // Per piece, where it starts in each array.
      std::vector<std::vector<std::int64_t*>> t_from, e_from;
      std::vector<TraceOptions> piece_options;
      SummaryOptions counts_only;
      counts_only.windows = WindowsForm::none;
      for (std::int64_t i = 0; i < pieces; ++i) {
        TraceOptions o = options;
        o.max_timesteps.reset();
        o.from = window.from + std::int64_t(__int128(window.to - window.from) * i / pieces);
        o.to = window.from + std::int64_t(__int128(window.to - window.from) * (i + 1) / pieces);
        poll();
        const TraceSummary part = summarize(s, o, counts_only);
        t_from.push_back(t_at), e_from.push_back(e_at);
        for (const TraceCount& c : part.traces) {
          const auto k = std::size_t(slot[std::size_t(c.trace)]);
          t_at[k] += c.n_accesses, e_at[k] += c.n_accesses;
        }
        piece_options.push_back(std::move(o));
      }
      for (std::size_t k = 0; k < t_at.size(); ++k)
        if (t_at[k] != t_end[k]) throw std::logic_error("looptrace: the pieces of a trace do not add up to its count");
      t_from.push_back(t_end), e_from.push_back(e_at);
      std::atomic<std::int64_t> next{0};
      std::vector<std::exception_ptr> failed(static_cast<std::size_t>(workers));
      auto work = [&](int w, Poll* p) {
        try {
          for (std::int64_t i; !stop.load() && (i = next++) < pieces;)
            gather_accesses(s, piece_options[std::size_t(i)], slot, t_from[std::size_t(i)], e_from[std::size_t(i)],
                            t_from[std::size_t(i) + 1], stop, p);
        } catch (...) {
          failed[std::size_t(w)] = std::current_exception();
          stop = true;
        }
      };
      {
        std::vector<std::jthread> helpers;
        for (int w = 1; w < workers; ++w) helpers.emplace_back(work, w, nullptr);
        work(0, &poll);  // this thread polls for Ctrl-C
      }
      for (const std::exception_ptr& e : failed)
        if (e) std::rethrow_exception(e);
    }
  }
  py::list traces;
  for (std::size_t k = 0; k < summary.traces.size(); ++k) {
    const TraceCount& c = summary.traces[k];
    const TensorInfo& x = s.tensors[std::size_t(s.traces[std::size_t(c.trace)].tensor_index)];
    const auto n = py::ssize_t(c.n_accesses);
    // Coordinates are unravelled on first use (unravel() below): most uses never ask.
    traces.append(py::make_tuple(c.tensor, c.einsum, c.is_output, timestep[k].release({n}), element[k].release({n}),
                                 py::none(), py::tuple(py::cast(x.ranks)), py::tuple(py::cast(x.shape))));
  }
  py::dict shapes, ranks, spans, levels;
  for (std::size_t i = 0; i < summary.tensors.size(); ++i) {
    shapes[py::str(summary.tensors[i])] = py::tuple(py::cast(summary.tensor_shapes[i]));
    ranks[py::str(summary.tensors[i])] = py::tuple(py::cast(summary.tensor_ranks[i]));
  }
  for (const EinsumSpan& e : summary.einsum_timespans) spans[py::str(e.einsum)] = py::make_tuple(e.first, e.end);
  for (const LevelWindows& l : summary.tile_windows) {
    py::dict per_tensor;
    for (const TensorWindows& w : l.tensors) per_tensor[py::str(w.tensor)] = windows_list(w.windows);
    levels[py::str(l.level)] = per_tensor;
  }
  py::dict out;
  out["traces"] = traces;
  out["n_timesteps"] = summary.n_timesteps;
  out["tensor_shapes"] = shapes;
  out["tensor_ranks"] = ranks;
  out["einsum_timespans"] = spans;
  out["tile_windows"] = levels;
  out["truncated"] = summary.truncated;
  return out;
}

// ---- streams ----------------------------------------------------------------------

// The trace in numpy batches of AccessRecord (timestep, element, trace, multiplicity:
// 24 bytes, the library's own layout, so a batch is filled with memcpy).
class RecordStream {
 public:
  RecordStream(std::shared_ptr<const Schedule> schedule, const TraceOptions& options, std::size_t batch,
               py::dtype dtype)
      : schedule_(std::move(schedule)), batch_(std::max<std::size_t>(batch, 1)), dtype_(std::move(dtype)) {
    if (dtype_.itemsize() != py::ssize_t(sizeof(AccessRecord)))
      throw std::invalid_argument("the record dtype must be 24 bytes");
    py::gil_scoped_release nogil;
    stream_ = std::make_unique<AccessStream>(*schedule_, options, std::min<std::size_t>(batch_, 1 << 16));
  }

  py::object next() {
    if (done_) throw py::stop_iteration();
    py::array out(dtype_, py::array::ShapeContainer{py::ssize_t(batch_)});
    auto* dst = static_cast<AccessRecord*>(out.mutable_data());
    std::size_t filled = 0;
    {
      py::gil_scoped_release nogil;
      Poll poll;
      while (filled < batch_) {
        if (pending_.empty()) poll(), pending_ = stream_->next_batch();
        if (pending_.empty()) {
          done_ = true;
          break;
        }
        const std::size_t n = std::min(pending_.size(), batch_ - filled);
        std::memcpy(dst + filled, pending_.data(), n * sizeof(AccessRecord));
        filled += n;
        pending_ = pending_.subspan(n);
      }
    }
    if (filled == 0) throw py::stop_iteration();
    if (filled < batch_) return out.attr("__getitem__")(py::slice(0, py::ssize_t(filled), 1));
    return out;
  }

  const Schedule& schedule() const { return *schedule_; }

 private:
  std::shared_ptr<const Schedule> schedule_;  // outlives stream_, which views it
  std::size_t batch_;
  py::dtype dtype_;
  std::unique_ptr<AccessStream> stream_;
  std::span<const AccessRecord> pending_;  // the rest of the stream's last batch
  bool done_ = false;
};

py::list trace_table(const Schedule& s) {
  py::list out;
  for (const TraceInfo& t : s.traces) {
    const TensorInfo& x = s.tensors[std::size_t(t.tensor_index)];
    out.append(py::make_tuple(t.einsum, t.tensor, t.is_output, py::tuple(py::cast(x.ranks)),
                              py::tuple(py::cast(x.shape))));
  }
  return out;
}

// Per computing leaf: the timestep and each rank variable's tile origin of every
// iteration (one row per spatial iteration), as `looptrace iterations` lists them.
py::list trace_iterations_py(SpecHandle& h, const TraceOptions& options) {
  const auto schedule = h.schedule();
  const std::size_t n_leaves = schedule->leaves.size();
  std::vector<std::vector<std::int64_t>> timesteps(n_leaves), origins(n_leaves);
  std::vector<std::size_t> order;  // leaves in the order they first iterate
  {
    py::gil_scoped_release nogil;
    Poll poll;
    std::size_t count = 0;
    IterationStream stream(*schedule, options);
    for (const Iteration& it : stream) {
      const auto leaf = std::size_t(it.leaf - schedule->leaves.data());
      if (timesteps[leaf].empty() && origins[leaf].empty()) order.push_back(leaf);
      timesteps[leaf].push_back(it.timestep);
      for (std::size_t v = 0; v < it.tile.size(); ++v) origins[leaf].push_back(it.origin(v));
      if (++count % 65536 == 0) poll();
    }
  }
  py::list out;
  for (std::size_t leaf : order) {
    const LeafSchedule& l = schedule->leaves[leaf];
    const auto n = py::ssize_t(timesteps[leaf].size()), v = py::ssize_t(l.variables.size());
    out.append(py::make_tuple(l.einsum, py::tuple(py::cast(l.variables)), adopt(std::move(timesteps[leaf])),
                              adopt(std::move(origins[leaf]), {n, v})));
  }
  return out;
}

// ---- reports: the CLI's JSON, as Python objects -----------------------------------

// `looptrace cache`: the same dict as its JSON; with curve, the curve's arrays too.
CacheRunOptions cache_options(const std::string& size, const std::string& ways, std::uint64_t line_bytes,
                              const std::string& policy, bool write_through, bool write_allocate,
                              const std::vector<std::string>& caches, const std::string& source,
                              std::uint64_t align, bool curve) {
  CacheConfig base;
  base.line_bytes = line_bytes;
  base.policy = parse_cache_policy(policy);
  base.write_back = !write_through;
  base.write_allocate = write_allocate;
  CacheRunOptions o;
  if (caches.empty()) o.caches.push_back(parse_cache_spec("cache=" + size + "/" + ways, base));
  for (const std::string& c : caches) o.caches.push_back(parse_cache_spec(c, base));
  o.source = source, o.align = align, o.curve = curve;
  return o;
}

py::object cache_py(SpecHandle& h, const TraceOptions& options, CacheRunOptions how, bool arrays,
                    const std::string& layout_text, const std::string& layout_file) {
  const auto schedule = h.schedule();
  std::optional<LayoutSpec> layout;  // outlives the run
  if (!layout_file.empty()) {
    layout = parse_layout(layout_text, layout_file);
    check_layout_names(*schedule, *layout);
    how.layout = &*layout;
  }
  CacheRun run;
  {
    py::gil_scoped_release nogil;
    run = simulate_caches(*schedule, options, how);
  }
  if (!arrays) return json_to_python(cache_json(run, *schedule));
  // The curve as arrays: sizes in lines, misses in total and per tensor, the histogram.
  const ReuseDistances& d = *run.curve;
  std::vector<std::uint64_t> misses = d.misses_at_powers(), lines;
  for (std::size_t k = 0; k < misses.size(); ++k) lines.push_back(std::uint64_t(1) << k);
  std::vector<std::uint64_t> distances, counts;
  for (std::size_t k = 0; k < d.histogram().size(); ++k)
    if (d.histogram()[k]) distances.push_back(k), counts.push_back(d.histogram()[k]);
  py::dict tensors;
  for (const std::string& name : run.tensors)
    if (const int t = schedule->find_tensor(name); t >= 0) tensors[py::str(name)] = adopt(d.misses_at_powers(std::uint32_t(t)));
  py::dict out;
  out["lines"] = adopt(std::move(lines));
  out["misses"] = adopt(std::move(misses));
  out["tensors"] = tensors;
  out["distances"] = adopt(std::move(distances));
  out["counts"] = adopt(std::move(counts));
  out["accesses"] = d.accesses();
  out["cold"] = d.cold();
  out["line_bytes"] = how.caches.front().line_bytes;
  return out;
}

// plot_access_trace(cache=): which of the given element accesses miss one cache over
// the trace. An element access (timestep t, trace k, element e) misses when a line of
// its bytes (under the layout the cache's lines came from) missed as the access of
// trace k at t: the cache sees such a line once per timestep and trace. `points`:
// (einsum, tensor, timesteps, elements) per array pair; one bool array each.
py::list cache_miss_masks(SpecHandle& h, const TraceOptions& options, CacheRunOptions how,
                          const std::string& layout_text, const std::string& layout_file, const py::list& points) {
  const auto schedule = h.schedule();
  const Schedule& s = *schedule;
  if (how.caches.size() != 1 || how.source != "trace")
    throw py::value_error("misses are marked for one cache over the trace");
  std::optional<LayoutSpec> layout;
  if (!layout_file.empty()) {
    layout = parse_layout(layout_text, layout_file);
    check_layout_names(s, *layout);
    how.layout = &*layout;
  }
  const unsigned shift = unsigned(std::countr_zero(how.caches.front().line_bytes));
  struct Missed {
    std::int64_t timestep;
    std::uint32_t trace;
    std::uint64_t line;
    auto operator<=>(const Missed&) const = default;
  };
  std::vector<Missed> missed;
  CacheRun run;
  {
    py::gil_scoped_release nogil;
    run = simulate_caches(s, options, how, [&](std::span<const CacheAccess> b) {
      for (const CacheAccess& a : b)
        if (!a.is(CacheAccess::hit) && a.trace != kNoTrace) missed.push_back({a.timestep, a.trace, a.address >> shift});
    });
    std::sort(missed.begin(), missed.end());
  }
  const AddressMap& map = *run.addresses;
  py::list out;
  for (const py::handle item : points) {
    const auto [einsum, tensor, t_obj, e_obj] = item.cast<std::tuple<std::string, std::string, py::object, py::object>>();
    const auto t = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(t_obj);
    const auto e = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(e_obj);
    if (!t || !e || t.size() != e.size()) throw py::value_error("timesteps and elements must be int arrays of one size");
    std::uint32_t k = 0;
    while (k < s.traces.size() && (s.traces[k].einsum != einsum || s.traces[k].tensor != tensor)) ++k;
    if (k == s.traces.size()) throw py::value_error("no trace of tensor '" + tensor + "' in Einsum '" + einsum + "'");
    const auto x = std::uint32_t(s.traces[k].tensor_index);
    std::vector<std::uint8_t> mask(std::size_t(t.size()), 0);
    const std::int64_t* tp = t.data();
    const std::int64_t* ep = e.data();
    for (std::size_t i = 0; i < mask.size(); ++i) {
      const std::uint64_t a = map.address(x, ep[i]);
      for (std::uint64_t l = a >> shift; l <= (a + map.bytes[x] - 1) >> shift && !mask[i]; ++l)
        mask[i] = std::binary_search(missed.begin(), missed.end(), Missed{tp[i], k, l});
    }
    out.append(adopt(std::move(mask)).attr("view")("bool"));
  }
  return out;
}

py::object summary_py(SpecHandle& h, const TraceOptions& options, const std::string& windows, int threads) {
  const auto schedule = h.schedule();
  SummaryOptions so;
  so.windows = windows == "compact" ? WindowsForm::compact : windows == "none" ? WindowsForm::none : WindowsForm::full;
  if (windows != "full" && windows != "compact" && windows != "none")
    throw py::value_error("windows must be 'full', 'compact' or 'none', not '" + windows + "'");
  so.threads = threads;
  TraceSummary result;
  {
    py::gil_scoped_release nogil;
    result = summarize(*schedule, options, so);
  }
  return json_to_python(summary_json(result));
}

py::object movement_py(SpecHandle& h, const TraceOptions& options, const MovementOptions& how,
                       const std::string& layout_text, const std::string& layout_file, std::uint64_t line_bytes,
                       std::uint64_t align) {
  const auto schedule = h.schedule();
  MovementReport report;
  std::optional<LayoutSpec> layout;
  if (!layout_file.empty()) {
    layout = parse_layout(layout_text, layout_file);
    check_layout_names(*schedule, *layout);
    TransferOptions checked;
    checked.line_bytes = line_bytes, checked.align = align;
    check_transfer_options(checked);
  }
  {
    py::gil_scoped_release nogil;
    report = summarize_movement(*schedule, options, how);
    if (layout) add_layout_costs(report, *schedule, options, &*layout, line_bytes, align);
  }
  return json_to_python(movement_json(report));
}

py::object describe_py(SpecHandle& h) {
  SpecDescription d;
  {
    py::gil_scoped_release nogil;
    d = describe_spec(*h.spec);
  }
  return py::module_::import("json").attr("loads")(describe_json(d, -1));
}

// The requests between `level` and its children: (timestep, address, write, child
// Storage node, tensor) per request, in time order.
struct TransferColumns {
  std::vector<std::int64_t> timestep, cycle;
  std::vector<std::uint64_t> address;
  std::vector<std::uint8_t> write;
  std::vector<std::uint32_t> child, tensor;
};

TransferColumns transfers_of(const Schedule& s, const TraceOptions& o, const TransferOptions& t,
                             const IssueTiming& timing, Poll& poll) {
  TransferColumns c;
  auto requests = transfer_pipeline(s, o, t) | issue_cycles(timing);
  for (auto batch = requests.next_batch(); !batch.empty(); batch = requests.next_batch()) {
    poll();
    for (const auto& [q, cycle] : batch) {
      c.timestep.push_back(q.timestep);
      c.cycle.push_back(cycle);
      c.address.push_back(q.address);
      c.write.push_back(q.write);
      c.child.push_back(q.child);
      c.tensor.push_back(q.tensor);
    }
  }
  return c;
}

py::tuple transfers_py(SpecHandle& h, const TraceOptions& o, const std::string& level, std::uint64_t line_bytes,
                       std::uint64_t align, std::int64_t cycles_per_timestep, const std::string& issue_rate,
                       const std::string& layout_text, const std::string& layout_file, bool partial_sums,
                       bool timeloop) {
  if (cycles_per_timestep < 1 || cycles_per_timestep > (std::int64_t(1) << 20))
    throw SpecError("cycles_per_timestep takes a whole number from 1 to 1048576, not " +
                    std::to_string(cycles_per_timestep));
  const IssueTiming timing =
      issue_rate.empty() ? IssueTiming{cycles_per_timestep} : parse_issue_rate(issue_rate, cycles_per_timestep);
  const auto schedule = h.schedule();
  TransferOptions t;
  t.level = level;
  t.line_bytes = line_bytes;
  t.align = align;
  t.partial_sums = partial_sums;
  if (timeloop) t.convention = Convention::timeloop;
  std::optional<LayoutSpec> layout;  // outlives the pipeline
  if (!layout_file.empty()) {
    layout = parse_layout(layout_text, layout_file);
    check_layout_names(*schedule, *layout);
    t.layout = &*layout;
  }
  TransferColumns c;
  {
    py::gil_scoped_release nogil;
    Poll poll;
    c = transfers_of(*schedule, o, t, timing, poll);
  }
  py::list storages, tensors;
  for (const StorageWindows& st : schedule->storages) storages.append(st.level);
  for (const TensorInfo& x : schedule->tensors) tensors.append(x.name);
  return py::make_tuple(adopt(std::move(c.timestep)), adopt(std::move(c.address)), adopt(std::move(c.write)),
                        adopt(std::move(c.child)), adopt(std::move(c.tensor)), storages, tensors,
                        adopt(std::move(c.cycle)));
}

// ---- pictures ---------------------------------------------------------------------

// The density raster of a trace too large to draw point by point, streamed in C++
// (build_plot): per panel the accesses per cell and which series touched each cell.
py::dict plot_raster_py(SpecHandle& h, const TraceOptions& o, const std::string& color_by, const std::string& rank,
                        const std::string& memory_level, std::int64_t columns, std::int64_t rows) {
  const auto schedule = h.schedule();
  PlotOptions p;
  p.color_by = color_by == "access" ? PlotColor::access : PlotColor::einsum;
  p.rank = rank;
  p.memory_level = memory_level;
  p.max_points = 0;  // always rasters: the caller chose this path for a large trace
  p.raster_columns = columns, p.raster_rows = rows;
  PlotData d;
  {
    py::gil_scoped_release nogil;
    d = build_plot(*schedule, o, p);
  }
  py::list series, panels;
  for (const PlotSeries& s : d.series) series.append(py::make_tuple(s.label, s.color, s.is_output));
  for (PlotPanel& panel : d.panels) {
    DensityRaster& r = panel.density;
    py::dict x;
    x["tensor"] = panel.tensor;
    x["ranks"] = py::tuple(py::cast(panel.ranks));
    x["shape"] = py::tuple(py::cast(panel.shape));
    x["rank"] = panel.rank;
    x["y_first"] = panel.y_first, x["y_size"] = panel.y_size;
    x["timesteps_per_column"] = r.timesteps_per_column, x["y_per_row"] = r.y_per_row;
    x["n_blocks"] = panel.n_blocks;
    std::vector<double> share(r.counts.size());
    for (std::size_t c = 0; c < share.size(); ++c) share[c] = panel.touched_share(c);
    x["share"] = adopt(std::move(share), {py::ssize_t(r.rows), py::ssize_t(r.columns)});
    x["timesteps"] = adopt(std::move(r.timesteps), {py::ssize_t(r.rows), py::ssize_t(r.columns)});
    x["counts"] = adopt(std::move(r.counts), {py::ssize_t(r.rows), py::ssize_t(r.columns)});
    x["series"] = adopt(std::move(r.series), {py::ssize_t(r.rows), py::ssize_t(r.columns)});
    x["tiles"] = adopt(std::move(r.tiles), {py::ssize_t(r.rows), py::ssize_t(r.columns)});
    panels.append(x);
  }
  py::dict out;
  out["window"] = py::make_tuple(d.window.from, d.window.to);
  out["truncated"] = d.truncated;
  out["sampled_timesteps"] = d.sampled_timesteps;
  out["from_boxes"] = d.from_boxes;
  out["raster"] = d.raster;
  out["series"] = series;
  out["panels"] = panels;
  return out;
}

// Bins (timestep, y) points into a rows x columns grid over [t0, t1) x [y0, y1): the
// count per cell and the series that touched it (0xFFFF none, 0xFFFE several), for an
// AccessTrace already in memory that is too large to scatter.
py::tuple bin_points(const std::vector<py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>>& xs,
                     const std::vector<py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>>& ys,
                     const std::vector<int>& series, std::int64_t t0, std::int64_t t1, std::int64_t y0,
                     std::int64_t y1, std::int64_t columns, std::int64_t rows) {
  std::vector<std::uint32_t> counts(std::size_t(rows * columns), 0);
  std::vector<std::uint16_t> who(std::size_t(rows * columns), 0xFFFF);
  const double cw = double(std::max<std::int64_t>(t1 - t0, 1)) / double(columns);
  const double rh = double(std::max<std::int64_t>(y1 - y0, 1)) / double(rows);
  {
    py::gil_scoped_release nogil;
    for (std::size_t k = 0; k < xs.size(); ++k) {
      const std::int64_t* x = xs[k].data();
      const std::int64_t* y = ys[k].data();
      const auto s = std::uint16_t(series[k]);
      for (py::ssize_t i = 0, n = xs[k].size(); i < n; ++i) {
        if (x[i] < t0 || x[i] >= t1 || y[i] < y0 || y[i] >= y1) continue;
        const auto c = std::min<std::int64_t>(std::int64_t(double(x[i] - t0) / cw), columns - 1);
        const auto r = std::min<std::int64_t>(std::int64_t(double(y[i] - y0) / rh), rows - 1);
        const std::size_t cell = std::size_t(r * columns + c);
        if (counts[cell] != 0xFFFFFFFFu) ++counts[cell];
        who[cell] = who[cell] == 0xFFFF || who[cell] == s ? s : std::uint16_t(0xFFFE);
      }
    }
  }
  return py::make_tuple(adopt(std::move(counts), {py::ssize_t(rows), py::ssize_t(columns)}),
                        adopt(std::move(who), {py::ssize_t(rows), py::ssize_t(columns)}));
}

}  // namespace

PYBIND11_MODULE(_looptrace, m) {
  m.doc() = "looptrace's C++ engine; use the `looptrace` package, which wraps it";

  // looptrace::SpecError -> looptrace.SpecError(ValueError) with file, line, column, message.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const SpecError& e) {
      py::object cls = py::module_::import("looptrace._errors").attr("SpecError");
      py::object err = cls(e.message(), e.where().file, e.where().line, e.where().column);
      PyErr_SetObject(cls.ptr(), err.ptr());
    } catch (const ExpressionError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  py::class_<SpecHandle, std::shared_ptr<SpecHandle>>(m, "SpecHandle")
      .def("files", [](const SpecHandle& h) { return h.spec->files; })
      .def("has_mapping", [](const SpecHandle& h) { return h.spec->has_mapping; })
      .def("warnings", [](const SpecHandle& h) {
        std::vector<std::string> out;
        for (const SpecWarning& w : h.spec->warnings) out.push_back(w.str());
        return out;
      })
      .def("compile", [](SpecHandle& h) { h.schedule(); })
      .def("n_timesteps", [](SpecHandle& h) { return h.schedule()->n_timesteps; })
      .def("trace_table", [](SpecHandle& h) { return trace_table(*h.schedule()); });

  m.def("load", &load, py::arg("files"), py::arg("variables"), py::arg("require_mapping"));
  m.def("combine", &combine, py::arg("mapping"), py::arg("workload"));
  m.def("describe", &describe_py);

  m.def("trace_accesses",
        [](SpecHandle& h, py::object tensors, py::object einsums, py::object max_timesteps, std::int64_t max_points,
           int threads) {
          const py::object none = py::none();
          return trace_accesses_py(h, trace_options(tensors, einsums, max_timesteps, none, none, none, none, 0),
                                   max_points, threads);
        });

  py::class_<RecordStream>(m, "RecordStream")
      .def("__iter__", [](RecordStream& s) -> RecordStream& { return s; })
      .def("__next__", &RecordStream::next)
      .def("trace_table", [](const RecordStream& s) { return trace_table(s.schedule()); });

  m.def("stream", [](SpecHandle& h, py::object tensors, py::object einsums, py::object max_timesteps, py::object from,
                     py::object to, py::object shard, py::object sample, std::uint64_t seed, std::size_t batch,
                     py::dtype dtype) {
    return std::make_unique<RecordStream>(
        h.schedule(), trace_options(tensors, einsums, max_timesteps, from, to, shard, sample, seed), batch, dtype);
  });
  m.def("trace_iterations", [](SpecHandle& h, py::object einsums, py::object max_timesteps, py::object from,
                               py::object to, py::object shard, py::object sample, std::uint64_t seed) {
    return trace_iterations_py(h, trace_options(py::none(), einsums, max_timesteps, from, to, shard, sample, seed));
  });
  m.def("summary", [](SpecHandle& h, py::object tensors, py::object einsums, py::object max_timesteps,
                      py::object from, py::object to, py::object shard, py::object sample, std::uint64_t seed,
                      const std::string& windows, int threads) {
    return summary_py(h, trace_options(tensors, einsums, max_timesteps, from, to, shard, sample, seed), windows,
                      threads);
  });
  m.def("movement", [](SpecHandle& h, py::object tensors, py::object einsums, py::object max_timesteps,
                       py::object from, py::object to, py::object shard, int threads, bool enumerate,
                       bool partial_sums, const std::string& layout_text, const std::string& layout_file,
                       std::uint64_t line_bytes, std::uint64_t align, bool timeloop) {
    const py::object none = py::none();
    MovementOptions how;
    how.method = enumerate ? MovementMethod::enumerate : MovementMethod::closed_form;
    how.threads = threads;
    how.partial_sums = partial_sums;
    if (timeloop) {
      if (enumerate || !layout_file.empty())
        throw SpecError("convention='timeloop' is counted in closed form only, without a layout");
      how.convention = Convention::timeloop;
    }
    return movement_py(h, trace_options(tensors, einsums, max_timesteps, from, to, shard, none, 0), how, layout_text,
                       layout_file, line_bytes, align);
  });
  m.def("timeline", [](SpecHandle& h, py::object tensors, py::object einsums, py::object max_timesteps,
                       py::object from, py::object to, py::object shard, std::int64_t max_events,
                       std::int64_t cycles_per_timestep) {
    const auto schedule = h.schedule();
    const TraceOptions options = trace_options(tensors, einsums, max_timesteps, from, to, shard, py::none(), 0);
    std::string text;
    {
      py::gil_scoped_release nogil;
      text = timeline_json(tile_timeline(*schedule, options), TimelineOptions{max_events, cycles_per_timestep});
    }
    return text;
  });
  m.def("transfers", [](SpecHandle& h, const std::string& level, py::object tensors, py::object einsums,
                        py::object max_timesteps, py::object from, py::object to, py::object shard,
                        std::uint64_t line_bytes, std::uint64_t align, std::int64_t cycles_per_timestep,
                        const std::string& issue_rate, const std::string& layout_text, const std::string& layout_file,
                        bool partial_sums, bool timeloop) {
    const py::object none = py::none();
    return transfers_py(h, trace_options(tensors, einsums, max_timesteps, from, to, shard, none, 0), level,
                        line_bytes, align, cycles_per_timestep, issue_rate, layout_text, layout_file, partial_sums,
                        timeloop);
  });
  m.def("plot_raster", [](SpecHandle& h, py::object tensors, py::object einsums, py::object max_timesteps,
                          py::object from, py::object to, const std::string& color_by, const std::string& rank,
                          const std::string& memory_level, std::int64_t columns, std::int64_t rows) {
    const py::object none = py::none();
    return plot_raster_py(h, trace_options(tensors, einsums, max_timesteps, from, to, none, none, 0), color_by, rank,
                          memory_level, columns, rows);
  });
  m.def("cache", [](SpecHandle& h, py::object tensors, py::object einsums, py::object max_timesteps,
                    py::object from, py::object to, py::object shard, const std::string& size,
                    const std::string& ways, std::uint64_t line_bytes, const std::string& policy,
                    bool write_through, bool write_allocate, const std::vector<std::string>& caches,
                    const std::string& source, std::uint64_t align, bool curve, bool arrays,
                    const std::string& layout_text, const std::string& layout_file) {
    const py::object none = py::none();
    return cache_py(h, trace_options(tensors, einsums, max_timesteps, from, to, shard, none, 0),
                    cache_options(size, ways, line_bytes, policy, write_through, write_allocate, caches, source,
                                  align, curve || arrays),
                    arrays, layout_text, layout_file);
  });
  m.def("cache_miss_masks", [](SpecHandle& h, py::object tensors, py::object einsums, py::object max_timesteps,
                               const std::string& size, const std::string& ways, std::uint64_t line_bytes,
                               const std::string& policy, bool write_through, bool write_allocate, std::uint64_t align,
                               const std::string& layout_text, const std::string& layout_file, const py::list& points) {
    const py::object none = py::none();
    return cache_miss_masks(h, trace_options(tensors, einsums, max_timesteps, none, none, none, none, 0),
                            cache_options(size, ways, line_bytes, policy, write_through, write_allocate, {}, "trace",
                                          align, false),
                            layout_text, layout_file, points);
  });
  m.def("bin_points", &bin_points);
  m.def("unravel", &unravel_py);
}
