#include "looptrace/sinks/summary_json.hpp"

#include <set>

#include "looptrace/support/error.hpp"

namespace looptrace {

namespace {

using json = nlohmann::ordered_json;

const char* form_name(WindowsForm f) {
  return f == WindowsForm::full ? "full" : f == WindowsForm::compact ? "compact" : "none";
}

}  // namespace

json summary_json(const TraceSummary& s) {
  json out;
  out["n_timesteps"] = s.n_timesteps;
  out["truncated"] = s.truncated;
  out["tensors"] = s.tensors;
  out["einsums"] = s.einsums;
  out["memory_levels"] = s.memory_levels;
  json shapes = json::object(), ranks = json::object();
  for (std::size_t i = 0; i < s.tensors.size(); ++i) {
    shapes[s.tensors[i]] = i < s.tensor_shapes.size() ? s.tensor_shapes[i] : std::vector<std::int64_t>{};
    ranks[s.tensors[i]] = i < s.tensor_ranks.size() ? s.tensor_ranks[i] : std::vector<std::string>{};
  }
  out["tensor_shapes"] = shapes;
  out["tensor_ranks"] = ranks;
  json spans = json::object();
  for (const auto& span : s.einsum_timespans) spans[span.einsum] = {span.first, span.end};
  out["einsum_timespans"] = spans;
  if (s.windows_form != WindowsForm::none) {
    json windows = json::object();
    for (const auto& level : s.tile_windows) {
      json per_tensor = json::object();
      for (const auto& t : level.tensors) {
        json list = json::array();
        if (s.windows_form == WindowsForm::full)
          for (const auto& w : t.windows) list.push_back({w.from, w.to});
        else
          for (const auto& r : t.runs)
            list.push_back({{"start", r.start}, {"length", r.length}, {"period", r.period}, {"count", r.count}});
        per_tensor[t.tensor] = list;
      }
      windows[level.level] = per_tensor;
    }
    out[s.windows_form == WindowsForm::full ? "tile_windows" : "tile_window_runs"] = windows;
  }
  json traces = json::array();
  for (const auto& t : s.traces)
    traces.push_back({{"einsum", t.einsum}, {"tensor", t.tensor}, {"is_output", t.is_output},
                      {"n_accesses", t.n_accesses}});
  out["traces"] = traces;
  out["n_points"] = s.n_points;
  out["enumerated"] = s.enumerated;
  json merge;
  merge["kind"] = "summary";
  merge["from"] = s.selection.from;
  merge["to"] = s.selection.to;
  merge["full_timesteps"] = s.selection.full_timesteps;
  merge["sample_timesteps"] = s.selection.sample_timesteps >= 0 ? json(s.selection.sample_timesteps) : json(nullptr);
  merge["windows"] = form_name(s.windows_form);
  merge["einsum_order"] = s.einsum_order;
  json cut = json::object();
  for (const auto& level : s.tile_windows)
    for (const auto& t : level.tensors) {
      if (t.cut.empty()) continue;
      json list = json::array();
      for (const auto& w : t.cut) list.push_back({{"window", {w.from, w.to}}});
      cut[level.level][t.tensor] = list;
    }
  merge["cut_windows"] = cut;
  out["merge"] = merge;
  return out;
}

json summary_json(const TraceSummary& s, const Schedule& schedule) {
  if (s.tensor_shapes.size() == s.tensors.size()) return summary_json(s);
  TraceSummary filled = s;  // a summary built by hand: shapes from the schedule
  filled.tensor_shapes.clear();
  filled.tensor_ranks.clear();
  for (const auto& name : s.tensors) {
    const TensorInfo& t = schedule.tensors[std::size_t(schedule.find_tensor(name))];
    filled.tensor_shapes.push_back(t.shape);
    filled.tensor_ranks.push_back(t.ranks);
  }
  return summary_json(filled);
}

namespace {

// Reads a summary written by `looptrace summary` back, refusing anything else by name.
class SummaryReader {
 public:
  SummaryReader(const json& j, const std::string& name) : j_(j), name_(name) {}

  TraceSummary read() {
    if (!j_.is_object()) fail("not a looptrace summary: the file is not a JSON object");
    static const std::set<std::string> known = {
        "n_timesteps", "truncated", "tensors", "einsums", "memory_levels", "tensor_shapes", "tensor_ranks",
        "einsum_timespans", "tile_windows", "tile_window_runs", "traces", "n_points", "enumerated", "merge"};
    for (const auto& [key, value] : j_.items())
      if (!known.count(key)) fail("unknown key '" + key + "' in a summary");
    const json& m = need(j_, "merge", "");
    if (get(need(m, "kind", "merge."), "merge.kind", std::string()) != "summary")
      fail("'merge.kind' is not \"summary\": only summaries can be merged so far");
    TraceSummary s;
    header(s);
    windows(m, s);
    cut_windows(m, s);
    traces(s);
    selection(m, s);
    return s;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw SpecError(SourceLocation{name_, 0, 0}, what); }
  const json& need(const json& obj, const char* key, const std::string& path) const {
    if (!obj.is_object() || !obj.contains(key))
      fail("not a looptrace summary: no '" + path + key + "' (write shards with `looptrace summary`)");
    return obj.at(key);
  }
  template <class T>
  T get(const json& v, const std::string& key, T) const {
    try {
      return v.get<T>();
    } catch (const nlohmann::json::exception&) {
      fail("'" + key + "' has the wrong type: " + v.dump().substr(0, 80));
    }
  }

  void header(TraceSummary& s) const {
    s.n_timesteps = get(need(j_, "n_timesteps", ""), "n_timesteps", std::int64_t());
    s.truncated = get(need(j_, "truncated", ""), "truncated", bool());
    s.tensors = get(need(j_, "tensors", ""), "tensors", std::vector<std::string>());
    s.einsums = get(need(j_, "einsums", ""), "einsums", std::vector<std::string>());
    s.memory_levels = get(need(j_, "memory_levels", ""), "memory_levels", std::vector<std::string>());
    const auto& shapes = need(j_, "tensor_shapes", "");
    const auto& ranks = need(j_, "tensor_ranks", "");
    for (const auto& t : s.tensors) {
      s.tensor_shapes.push_back(
          get(need(shapes, t.c_str(), "tensor_shapes."), "tensor_shapes." + t, std::vector<std::int64_t>()));
      s.tensor_ranks.push_back(
          get(need(ranks, t.c_str(), "tensor_ranks."), "tensor_ranks." + t, std::vector<std::string>()));
    }
    for (const auto& [einsum, span] : need(j_, "einsum_timespans", "").items()) {
      auto v = get(span, "einsum_timespans." + einsum, std::vector<std::int64_t>());
      if (v.size() != 2) fail("'einsum_timespans." + einsum + "' is not [first, end]");
      s.einsum_timespans.push_back({einsum, v[0], v[1]});
    }
  }

  void windows(const json& m, TraceSummary& s) const {
    const std::string form = get(need(m, "windows", "merge."), "merge.windows", std::string());
    if (form == "full") s.windows_form = WindowsForm::full;
    else if (form == "compact") s.windows_form = WindowsForm::compact;
    else if (form == "none") s.windows_form = WindowsForm::none;
    else fail("'merge.windows' is '" + form + "', not full, compact or none");
    if (s.windows_form == WindowsForm::none) {
      for (const auto& level : s.memory_levels) s.tile_windows.push_back({level, {}});
      return;
    }
    const char* windows_key = form == "full" ? "tile_windows" : "tile_window_runs";
    for (const auto& [level, tensors] : need(j_, windows_key, "").items()) {
      s.tile_windows.push_back({level, {}});
      for (const auto& [tensor, list] : tensors.items()) {
        TensorWindows t{tensor, {}, {}, {}};
        const std::string path = std::string(windows_key) + "." + level + "." + tensor;
        if (!list.is_array()) fail("'" + path + "' is not a list");
        for (const auto& w : list) window(w, path, s.windows_form, t);
        s.tile_windows.back().tensors.push_back(std::move(t));
      }
    }
  }
  void window(const json& w, const std::string& path, WindowsForm form, TensorWindows& t) const {
    if (form == WindowsForm::full) {
      auto v = get(w, path, std::vector<std::int64_t>());
      if (v.size() != 2) fail("'" + path + "' holds " + w.dump() + ", not [start, end]");
      t.windows.push_back({v[0], v[1]});
      return;
    }
    WindowRun r{get(need(w, "start", path + "[]."), path + ".start", std::int64_t()),
                get(need(w, "length", path + "[]."), path + ".length", std::int64_t()),
                get(need(w, "period", path + "[]."), path + ".period", std::int64_t()),
                get(need(w, "count", path + "[]."), path + ".count", std::int64_t())};
    if (r.count < 1 || r.length < 0 || (r.count > 1 && r.period <= 0))
      fail("'" + path + "' holds a run that is not one: " + w.dump());
    t.runs.push_back(r);
  }

  void cut_windows(const json& m, TraceSummary& s) const {
    for (const auto& [level, tensors] : need(m, "cut_windows", "merge.").items())
      for (const auto& [tensor, list] : tensors.items()) {
        TensorWindows* t = nullptr;
        for (auto& l : s.tile_windows)
          if (l.level == level)
            for (auto& x : l.tensors)
              if (x.tensor == tensor) t = &x;
        if (!t) fail("'merge.cut_windows." + level + "." + tensor + "' names a level or tensor without windows");
        for (const auto& c : list) {
          auto v = get(need(c, "window", "merge.cut_windows[]."), "merge.cut_windows.window", std::vector<std::int64_t>());
          if (v.size() != 2) fail("'merge.cut_windows' holds " + c.dump() + ", not {\"window\": [start, end]}");
          t->cut.push_back({v[0], v[1]});
        }
      }
  }

  void traces(TraceSummary& s) const {
    for (const auto& t : need(j_, "traces", "")) {
      TraceCount c;
      c.einsum = get(need(t, "einsum", "traces[]."), "traces[].einsum", std::string());
      c.tensor = get(need(t, "tensor", "traces[]."), "traces[].tensor", std::string());
      c.is_output = get(need(t, "is_output", "traces[]."), "traces[].is_output", bool());
      c.n_accesses = get(need(t, "n_accesses", "traces[]."), "traces[].n_accesses", std::int64_t());
      c.trace = std::int64_t(s.traces.size());
      s.traces.push_back(c);
    }
    s.n_points = get(need(j_, "n_points", ""), "n_points", std::int64_t());
    s.enumerated = get(need(j_, "enumerated", ""), "enumerated", std::vector<std::int64_t>());
  }

  void selection(const json& m, TraceSummary& s) const {
    s.selection.from = get(need(m, "from", "merge."), "merge.from", std::int64_t());
    s.selection.to = get(need(m, "to", "merge."), "merge.to", std::int64_t());
    s.selection.full_timesteps = get(need(m, "full_timesteps", "merge."), "merge.full_timesteps", std::int64_t());
    const auto& k = need(m, "sample_timesteps", "merge.");
    s.selection.sample_timesteps = k.is_null() ? -1 : get(k, "merge.sample_timesteps", std::int64_t());
    s.einsum_order = get(need(m, "einsum_order", "merge."), "merge.einsum_order", std::vector<std::string>());
    if (s.selection.from < 0 || s.selection.to < s.selection.from || s.selection.to > s.selection.full_timesteps)
      fail("'merge.from' and 'merge.to' are not a window of the schedule");
  }

  const json& j_;
  const std::string& name_;
};

}  // namespace

TraceSummary summary_from_json(const json& j, const std::string& name) { return SummaryReader(j, name).read(); }

}  // namespace looptrace
