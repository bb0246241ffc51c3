#include "looptrace/sinks/movement_report.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <iomanip>
#include <sstream>
#include <utility>

namespace looptrace {

namespace {

using json = nlohmann::ordered_json;

json peak_json(const FootprintPeak& p, const char* unit) {
  json out;
  out[unit] = p.value;
  out["timestep"] = p.timestep;
  return out;
}

// A peak in bytes against `instances` of a size in bits: {"instances", "total_bits",
// "peak_bits", "fits", "over_by_bits"}.
void fit_json(json& out, const std::optional<FootprintPeak>& peak_bytes, double size_bits, std::int64_t instances) {
  if (instances > 1) {
    out["instances"] = instances;
    size_bits *= double(instances);
    out["total_bits"] = std::isinf(size_bits) ? json("inf") : json(size_bits);
  }
  if (!peak_bytes) {
    out["fits"] = nullptr;  // no byte sizes to compare
    return;
  }
  const double peak_bits = double(peak_bytes->value) * 8;
  out["peak_bits"] = peak_bits;
  out["fits"] = peak_bits <= size_bits;
  if (peak_bits > size_bits) out["over_by_bits"] = peak_bits - size_bits;
}

json capacity_json(const LevelMovement& l) {
  json out;
  if (l.capacity_unevaluated) {
    out["size"] = *l.capacity_unevaluated;
    out["evaluated"] = false;
    if (!l.capacity_unevaluated_reason.empty()) out["reason"] = l.capacity_unevaluated_reason;
    return out;
  }
  if (!l.capacity_bits) {  // a size per Einsum
    json per = json::array();
    for (const EinsumCapacity& c : l.einsum_capacities) {
      json e;
      e["einsum"] = c.einsum;
      e["size_bits"] = c.size_bits;
      e["bits_of"] = c.bits_of;
      e["peak_footprint"] = peak_json(c.peak_footprint, "elements");
      if (c.peak_footprint_bytes) e["peak_footprint_bytes"] = peak_json(*c.peak_footprint_bytes, "bytes");
      fit_json(e, c.peak_footprint_bytes, c.size_bits, c.instances);
      per.push_back(e);
    }
    json fits = true;
    for (const json& e : per)
      if (e["fits"].is_null()) fits = nullptr;
      else if (!e["fits"].get<bool>() && !fits.is_null()) fits = false;
    out["per_einsum"] = per;
    out["fits"] = fits;
    return out;
  }
  out["size_bits"] = std::isinf(*l.capacity_bits) ? json("inf") : json(*l.capacity_bits);
  fit_json(out, l.peak_footprint_bytes, *l.capacity_bits, l.instances);
  return out;
}

}  // namespace

json layout_json(const LevelLayoutCost& c) {
  json out;
  out["line_bytes"] = c.line_bytes;
  if (c.banks > 0) {
    out["banks"] = c.banks;
    out["bank_bytes"] = c.bank_bytes;
    out["peak_bank_requests"] = {{"requests", c.peak_bank_requests}, {"timestep", c.peak_bank_timestep}};
  }
  json tensors = json::array();
  for (const auto& t : c.tensors) {
    json tj;
    tj["tensor"] = t.tensor;
    tj["fill_lines"] = t.fill_lines;
    tj["min_fill_lines"] = t.min_fill_lines ? json(*t.min_fill_lines) : json(nullptr);
    tj["drain_lines"] = t.drain_lines;
    tj["min_drain_lines"] = t.min_drain_lines ? json(*t.min_drain_lines) : json(nullptr);
    if (c.banks > 0) {
      tj["bank_cycles"] = t.bank_cycles;
      tj["min_bank_cycles"] = t.min_bank_cycles;
      tj["max_tile_cycles"] = t.max_tile_cycles;
    }
    tensors.push_back(tj);
  }
  out["tensors"] = tensors;
  if (!c.enumerated.empty()) out["enumerated"] = c.enumerated;
  return out;
}

namespace {
// --convention timeloop: per level and tensor Timeloop's figures (README "Timeloop's
// convention"), no footprint or capacity.
// What both conventions report first: the traced window.
json report_json(const MovementReport& r) {
  json out;
  out["n_timesteps"] = r.n_timesteps;
  out["from"] = r.from;
  out["truncated"] = r.truncated;
  return out;
}

// A tensor's entry as both conventions begin it (its instances, where given, after
// `home`), and its figures in bytes with `bytes_per_value`; the rest is each one's.
json tensor_json(const TensorMovement& t, bool instances) {
  json tj;
  tj["tensor"] = t.tensor;
  tj["home"] = t.home;
  if (instances) tj["instances"] = t.instances;
  tj["windows"] = t.windows;
  tj["max_tile"] = t.max_tile;
  tj["fills"] = t.fills;
  return tj;
}
void bytes_json(const TensorMovement& t, std::initializer_list<std::pair<const char*, std::int64_t>> more, json& tj) {
  if (!t.bytes_per_value) return;
  const std::int64_t b = *t.bytes_per_value;
  tj["bytes_per_value"] = b;
  tj["max_tile_bytes"] = t.max_tile * b;
  tj["fill_bytes"] = t.fills * b;
  for (const auto& [key, n] : more) tj[key] = n * b;
}

json timeloop_json(const MovementReport& r) {
  json out = report_json(r);
  out["convention"] = "timeloop";
  json levels = json::array();
  for (const auto& l : r.levels) {
    json level;
    level["level"] = l.level;
    json tensors = json::array();
    for (const auto& t : l.tensors) {
      json tj = tensor_json(t, true);
      tj["reads"] = t.reads;
      tj["updates"] = t.updates;
      tj["parent_reads"] = t.parent_reads;
      tj["parent_updates"] = t.parent_updates;
      bytes_json(t, {{"read_bytes", t.reads}, {"update_bytes", t.updates}}, tj);
      tensors.push_back(tj);
    }
    level["tensors"] = tensors;
    levels.push_back(level);
  }
  out["levels"] = levels;
  out["method"] = "closed-form";
  out["enumerated"] = json::array();
  return out;
}

std::string timeloop_text(const MovementReport& r) {
  std::ostringstream out;
  out << "timesteps [" << r.from << ", " << r.n_timesteps << "), Timeloop's convention (per instance; reads and "
      << "updates of the level, summed over its instances)\n\n";
  std::size_t level_w = 5, tensor_w = 6;
  for (const auto& l : r.levels) {
    level_w = std::max(level_w, l.level.size());
    for (const auto& t : l.tensors) tensor_w = std::max(tensor_w, t.tensor.size());
  }
  const int n = 14;  // Timeloop's figures grow past the default table's 12
  out << std::left << std::setw(int(level_w) + 2) << "level" << std::setw(int(tensor_w) + 2) << "tensor"
      << std::setw(6) << "home" << std::right << std::setw(n) << "instances" << std::setw(n) << "max_tile"
      << std::setw(n) << "fills" << std::setw(n) << "reads" << std::setw(n) << "updates" << std::setw(n)
      << "parent reads" << std::setw(n) << "parent upd." << "\n";
  for (const auto& l : r.levels)
    for (const auto& t : l.tensors)
      out << std::left << std::setw(int(level_w) + 2) << l.level << std::setw(int(tensor_w) + 2) << t.tensor
          << std::setw(6) << (t.home ? "yes" : "") << std::right << std::setw(n) << t.instances << std::setw(n)
          << t.max_tile << std::setw(n) << t.fills << std::setw(n) << t.reads << std::setw(n) << t.updates
          << std::setw(n) << t.parent_reads << std::setw(n) << t.parent_updates << "\n";
  return out.str();
}
}  // namespace

json movement_json(const MovementReport& r) {
  if (r.convention == Convention::timeloop) return timeloop_json(r);
  json out = report_json(r);
  json levels = json::array();
  for (const auto& l : r.levels) {
    json level;
    level["level"] = l.level;
    level["peak_footprint"] = peak_json(l.peak_footprint, "elements");
    if (l.peak_footprint_bytes) level["peak_footprint_bytes"] = peak_json(*l.peak_footprint_bytes, "bytes");
    if (l.capacity_bits || l.capacity_unevaluated || !l.einsum_capacities.empty()) level["capacity"] = capacity_json(l);
    json tensors = json::array();
    for (const auto& t : l.tensors) {
      json tj = tensor_json(t, false);
      tj["drains"] = t.drains;
      bytes_json(t, {{"drain_bytes", t.drains}}, tj);
      if (t.per_instance) {
        tj["instances"] = t.per_instance->instances;
        tj["max_tile_per_instance"] = t.per_instance->max_tile;
        tj["fills_per_instance"] = t.per_instance->fills;
      }
      tensors.push_back(tj);
    }
    level["tensors"] = tensors;
    if (l.layout) level["layout"] = layout_json(*l.layout);
    levels.push_back(level);
  }
  out["levels"] = levels;
  out["method"] = r.method == MovementMethod::enumerate ? "enumerate" : "closed-form";
  json enumerated = json::array();
  for (const auto& e : r.enumerated) {
    json part = {{"level", e.level}};
    if (!e.tensor.empty()) part["tensor"] = e.tensor;  // one slot, else the whole level
    part["reason"] = e.reason;
    enumerated.push_back(part);
  }
  out["enumerated"] = enumerated;
  return out;
}

namespace {
// "1073741824 bits (134217728 bytes)": whole numbers as such, not 1.07374e+09.
std::string bits_text(double bits) {
  std::ostringstream out;
  if (bits == std::floor(bits) && std::fabs(bits) < 9e15) {
    out << static_cast<long long>(bits) << " bits";
    if (std::fmod(bits, 8) == 0) out << " (" << static_cast<long long>(bits / 8) << " bytes)";
  } else {
    out << bits << " bits";
  }
  return out.str();
}
// "fits", or "does NOT fit (over by 8 bits (1 bytes))".
std::string fit_text(double peak_bits, double size_bits) {
  if (peak_bits <= size_bits) return "fits";
  return "does NOT fit (over by " + bits_text(peak_bits - size_bits) + ")";
}

// "  Q: 8 bits (1 bytes), WQ's bits_per_value; peak 1 bytes at t=0: fits", a line each.
std::string einsum_capacities_text(const LevelMovement& l) {
  std::ostringstream out;
  for (const EinsumCapacity& c : l.einsum_capacities) {
    out << "  " << c.einsum << ": " << bits_text(c.size_bits);
    std::vector<std::string> from;
    for (const std::string& t : c.bits_of) from.push_back(t + "'s bits_per_value");
    for (std::size_t i = 0; i < from.size(); ++i) out << (i ? ", " : ", from ") << from[i];
    if (!c.peak_footprint_bytes) {
      out << "; peak " << c.peak_footprint.value << " elements (no bits_per_value to compare)\n";
      continue;
    }
    if (c.instances > 1) out << " x " << c.instances << " instances";
    out << "; peak " << c.peak_footprint_bytes->value << " bytes at t=" << c.peak_footprint_bytes->timestep << ": "
        << fit_text(double(c.peak_footprint_bytes->value) * 8, c.size_bits * double(c.instances)) << "\n";
  }
  return out.str();
}
}  // namespace

// What each parent level's layout costs: lines against the fewest, bank cycles.
void layout_text(const MovementReport& r, std::ostringstream& out) {
  auto opt = [](const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string("-"); };
  const int n = 12;
  for (const auto& l : r.levels) {
    if (!l.layout) continue;
    const LevelLayoutCost& c = *l.layout;
    out << "\n" << l.level << " layout (" << c.line_bytes << "-byte lines";
    if (c.banks > 0) out << ", " << c.banks << " banks of " << c.bank_bytes << " bytes";
    out << "):\n" << std::left << std::setw(14) << "  tensor" << std::right << std::setw(n) << "fill lines"
        << std::setw(n) << "fewest" << std::setw(n) << "drain lines" << std::setw(n) << "fewest";
    if (c.banks > 0) out << std::setw(n) << "cycles" << std::setw(n) << "fewest" << std::setw(n) << "tile max";
    out << "\n";
    for (const auto& t : c.tensors) {
      out << "  " << std::left << std::setw(12) << t.tensor << std::right << std::setw(n) << t.fill_lines
          << std::setw(n) << opt(t.min_fill_lines) << std::setw(n) << t.drain_lines << std::setw(n)
          << opt(t.min_drain_lines);
      if (c.banks > 0) out << std::setw(n) << t.bank_cycles << std::setw(n) << t.min_bank_cycles << std::setw(n) << t.max_tile_cycles;
      out << "\n";
    }
    if (c.banks > 0)
      out << "  the most requests one bank gets in a timestep: " << c.peak_bank_requests << " at t=" << c.peak_bank_timestep << "\n";
    if (!c.enumerated.empty()) out << "  (its transfers follow the accesses: " << c.enumerated << ")\n";
  }
}

std::string movement_text(const MovementReport& r) {
  if (r.convention == Convention::timeloop) return timeloop_text(r);
  std::ostringstream out;
  out << "timesteps [" << r.from << ", " << r.n_timesteps << ")" << (r.truncated ? " (part of the schedule)" : "")
      << "\n\n";
  std::size_t level_w = 5, tensor_w = 6;
  for (const auto& l : r.levels) {
    level_w = std::max(level_w, l.level.size());
    for (const auto& t : l.tensors) tensor_w = std::max(tensor_w, t.tensor.size());
  }
  // Columns of 12, wider where a figure needs it (two spaces before the widest).
  int n = 12;
  for (const auto& l : r.levels)
    for (const auto& t : l.tensors) {
      const std::int64_t b = t.bytes_per_value.value_or(1);
      for (const std::int64_t v : {t.windows, t.max_tile, t.fills, t.drains, t.fills * b, t.drains * b})
        n = std::max(n, int(std::to_string(v).size()) + 2);
    }
  out << std::left << std::setw(int(level_w) + 2) << "level" << std::setw(int(tensor_w) + 2) << "tensor"
      << std::setw(6) << "home" << std::right << std::setw(n) << "windows" << std::setw(n) << "max_tile"
      << std::setw(n) << "fills" << std::setw(n) << "drains" << std::setw(n) << "fill B" << std::setw(n)
      << "drain B" << "\n";
  for (const auto& l : r.levels)
    for (const auto& t : l.tensors) {
      out << std::left << std::setw(int(level_w) + 2) << l.level << std::setw(int(tensor_w) + 2) << t.tensor
          << std::setw(6) << (t.home ? "yes" : "") << std::right << std::setw(n) << t.windows;
      if (t.windows == 0) {  // zeros would read as measured; nothing was
        out << std::setw(n) << "-" << std::setw(n) << "-" << std::setw(n) << "-" << std::setw(n) << "-"
            << std::setw(n) << "-" << "  (no window in the selection)\n";
        continue;
      }
      out << std::setw(n) << t.max_tile << std::setw(n) << t.fills << std::setw(n) << t.drains;
      if (t.bytes_per_value)
        out << std::setw(n) << t.fills * *t.bytes_per_value << std::setw(n) << t.drains * *t.bytes_per_value;
      else
        out << std::setw(n) << "-" << std::setw(n) << "-";
      out << "\n";
    }
  bool per_instance = false;  // below !Spatial loops: per instance, after the table
  for (const auto& l : r.levels)
    for (const auto& t : l.tensors) {
      if (!t.per_instance) continue;
      if (!per_instance) out << "\nper instance (fills of each instance's own tile, summed over the instances):\n";
      per_instance = true;
      out << "  " << l.level << " " << t.tensor << ": " << t.per_instance->instances << " instances, max tile "
          << t.per_instance->max_tile << ", fills " << t.per_instance->fills << "\n";
    }
  out << "\n";
  for (const auto& l : r.levels) {
    out << l.level << ": peak footprint " << l.peak_footprint.value << " elements";
    if (l.peak_footprint.timestep >= 0) out << " at t=" << l.peak_footprint.timestep;
    if (l.peak_footprint_bytes)
      out << "; " << l.peak_footprint_bytes->value << " bytes at t=" << l.peak_footprint_bytes->timestep;
    if (l.capacity_unevaluated) {
      out << "; size '" << *l.capacity_unevaluated << "' not evaluated";
      if (!l.capacity_unevaluated_reason.empty()) out << " (" << l.capacity_unevaluated_reason << ")";
    } else if (!l.einsum_capacities.empty()) {
      out << "; its size per Einsum:\n" << einsum_capacities_text(l);
      continue;
    } else if (l.capacity_bits) {
      if (std::isinf(*l.capacity_bits)) out << "; unbounded size";
      else if (!l.peak_footprint_bytes) out << "; size " << bits_text(*l.capacity_bits) << " (no bits_per_value to compare)";
      else {
        out << "; size " << bits_text(*l.capacity_bits);
        if (l.instances > 1) out << " x " << l.instances << " instances";
        out << ": " << fit_text(double(l.peak_footprint_bytes->value) * 8, *l.capacity_bits * double(l.instances));
      }
    }
    out << "\n";
  }
  for (const auto& e : r.enumerated)
    out << "enumerated " << e.level << (e.tensor.empty() ? "" : " " + e.tensor) << ": " << e.reason << "\n";
  layout_text(r, out);
  return out.str();
}

}  // namespace looptrace
