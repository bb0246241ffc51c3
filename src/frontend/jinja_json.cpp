// Jinja's tojson: HTML-safe JSON with sorted keys.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <cstdio>
#include <limits>

#include "jinja_internal.hpp"

namespace looptrace::jinja {

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '<': out += "\\u003c"; break;  // Jinja's tojson is HTML-safe
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      case '\'': out += "\\u0027"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string to_json(const JinjaValue& v, int indent, int level) {
  const std::string nl = indent > 0 ? "\n" + std::string(std::size_t(indent * (level + 1)), ' ') : "";
  const std::string close = indent > 0 ? "\n" + std::string(std::size_t(indent * level), ' ') : "";
  const std::string sep = indent > 0 ? "," : ", ";
  switch (v.kind()) {
    case JinjaValue::Kind::None: return "null";
    case JinjaValue::Kind::Bool: return v.as_bool() ? "true" : "false";
    case JinjaValue::Kind::Int: return v.str();
    case JinjaValue::Kind::Float: {
      const double d = v.as_float();
      return std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : v.str();
    }
    case JinjaValue::Kind::String: return json_quote(v.as_string());
    case JinjaValue::Kind::List:
    case JinjaValue::Kind::Tuple: {
      if (v.list().empty()) return "[]";
      std::string out = "[";
      for (std::size_t i = 0; i < v.list().size(); ++i) out += (i ? sep : "") + nl + to_json(v.list()[i], indent, level + 1);
      return out + close + "]";
    }
    case JinjaValue::Kind::Dict: {
      if (v.dict().empty()) return "{}";
      std::vector<std::pair<std::string, const JinjaValue*>> items;  // sorted by key, as Jinja does
      for (const auto& [k, x] : v.dict()) items.emplace_back(k.str(), &x);
      std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::string out = "{";
      for (std::size_t i = 0; i < items.size(); ++i)
        out += (i ? sep : "") + nl + json_quote(items[i].first) + ": " + to_json(*items[i].second, indent, level + 1);
      return out + close + "}";
    }
    case JinjaValue::Kind::Undefined: fail_undefined(v);
    default: type_error(an(v) + " cannot be written as JSON");
  }
}

}  // namespace looptrace::jinja
