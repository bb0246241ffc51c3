// Evaluating Jinja expressions with Python's semantics: operators, attributes and
// items, function calls, Jinja's filters and tests, Python's math functions.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <cstdio>
#include <limits>

#include "jinja_internal.hpp"

namespace looptrace::jinja {

namespace {

using Kwargs = std::vector<std::pair<std::string, JinjaValue>>;

[[noreturn]] void type_error(const std::string& message) { throw JinjaError(message); }

bool is_integral(const JinjaValue& v) { return v.is_int() || v.is_bool(); }

std::int64_t int_of(const JinjaValue& v) { return v.is_bool() ? v.as_bool() : v.as_int(); }

double float_of(const JinjaValue& v) { return v.is_float() ? v.as_float() : double(int_of(v)); }

[[noreturn]] void overflow() { throw JinjaError("integer overflow (looptrace computes with 64-bit integers)"); }

std::int64_t add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
std::int64_t sub(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
std::int64_t mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

std::int64_t floor_div(std::int64_t x, std::int64_t y) {
  if (y == 0) throw JinjaError("division by zero");
  if (x == std::numeric_limits<std::int64_t>::min() && y == -1) overflow();
  std::int64_t q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return q;
}

std::int64_t floor_mod(std::int64_t x, std::int64_t y) {
  if (y == 0) throw JinjaError("division by zero");
  if (y == -1) return 0;  // x % -1 overflows for INT64_MIN in C++
  std::int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

std::int64_t int_pow(std::int64_t base, std::int64_t exp) {
  std::int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = mul(result, base);
    exp >>= 1;
    if (exp) base = mul(base, base);
  }
  return result;
}

std::string repeat(const std::string& s, std::int64_t n) {
  if (n <= 0 || s.empty()) return {};
  if (static_cast<std::size_t>(n) > kMaxString / s.size()) throw JinjaError("string too long");
  std::string out;
  out.reserve(s.size() * static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out += s;
  return out;
}

[[noreturn]] void unsupported(const std::string& op, const JinjaValue& a, const JinjaValue& b) {
  type_error("unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

// Python's int(): from bools, ints, floats (truncating) and integer text.
std::int64_t to_int(const JinjaValue& v, int base = 10) {
  if (is_integral(v)) return int_of(v);
  if (v.is_float()) {
    const double d = v.as_float();
    if (!std::isfinite(d)) type_error("cannot convert " + v.str() + " to an integer");
    if (d >= 9.2233720368547758e18 || d < -9.2233720368547758e18) overflow();
    return static_cast<std::int64_t>(d);
  }
  if (v.is_string()) {
    std::string s = v.as_string();
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    std::size_t b = 0, e = s.size();
    while (b < e && is_space(s[b])) ++b;
    while (e > b && is_space(s[e - 1])) --e;
    s = s.substr(b, e - b);
    errno = 0;
    char* end = nullptr;
    const long long r = std::strtoll(s.c_str(), &end, base);
    if (!s.empty() && end == s.c_str() + s.size()) {
      if (errno == ERANGE) overflow();
      return r;
    }
  }
  type_error("invalid literal for int(): " + v.repr());
}

double to_float(const JinjaValue& v) {
  if (v.is_number()) return float_of(v);
  if (v.is_string()) {
    const std::string& s = v.as_string();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return d;
  }
  type_error("could not convert " + v.repr() + " to float");
}

// Python's round(): half to even.
double round_half_even(double x, std::int64_t digits) {
  const double scale = std::pow(10.0, static_cast<double>(digits));
  const double y = x * scale;
  double r = std::nearbyint(y);  // the default rounding mode is to nearest, ties to even
  return r / scale;
}

const JinjaValue* kwarg(const Kwargs& kwargs, std::string_view name) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

// Argument `index` or keyword `name`, or `fallback`.
JinjaValue arg(const std::vector<JinjaValue>& args, const Kwargs& kwargs, std::size_t index,
               std::string_view name, JinjaValue fallback = {}) {
  if (index < args.size()) return args[index];
  if (const JinjaValue* v = kwarg(kwargs, name)) return *v;
  return fallback;
}

void expect_args(const std::string& f, const std::vector<JinjaValue>& args, std::size_t lo, std::size_t hi) {
  if (args.size() < lo || args.size() > hi)
    type_error(f + "() takes " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
               " argument" + (hi == 1 ? "" : "s") + ", not " + std::to_string(args.size()));
}

// The strings of a list of UTF-8 code points.
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string strip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto strippable = [&](char c) { return chars ? chars->find(c) != std::string::npos : is_space(c); };
  std::size_t b = 0, e = s.size();
  if (left)
    while (b < e && strippable(s[b])) ++b;
  if (right)
    while (e > b && strippable(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, std::int64_t count) {
  if (from.empty()) {
    // Python inserts `to` around every character.
    std::string out;
    std::int64_t n = 0;
    for (const auto& ch : characters(s)) {
      if (count < 0 || n++ < count) out += to;
      out += ch;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::string out;
  std::size_t pos = 0;
  std::int64_t n = 0;
  for (std::size_t hit; (count < 0 || n < count) && (hit = s.find(from, pos)) != std::string::npos; ++n) {
    out += s.substr(pos, hit - pos) + to;
    if (out.size() > kMaxString) throw JinjaError("string too long");
    pos = hit + from.size();
  }
  return out + s.substr(pos);
}

std::vector<std::string> split(const std::string& s, const JinjaValue& sep, std::int64_t max_split) {
  std::vector<std::string> out;
  if (sep.is_none()) {
    std::size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && std::int64_t(out.size()) == max_split) {
        std::size_t e = s.size();
        while (e > i && is_space(s[e - 1])) --e;
        out.push_back(s.substr(i, e - i));
        break;
      }
      std::size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = defined(sep).is_string() ? sep.as_string() : (type_error("split() needs a string separator"), sep.as_string());
  if (d.empty()) type_error("empty separator");
  std::size_t pos = 0;
  for (std::size_t hit; (max_split < 0 || std::int64_t(out.size()) < max_split) &&
                        (hit = s.find(d, pos)) != std::string::npos;) {
    out.push_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

JinjaValue string_list(const std::vector<std::string>& items) {
  JinjaList out;
  for (const auto& s : items) out.emplace_back(s);
  return JinjaValue(std::move(out));
}

// Sorting and min/max: numbers with numbers, strings with strings (optionally ignoring
// case), sequences lexicographically.
bool less_than(const JinjaValue& a, const JinjaValue& b, bool case_sensitive = true) {
  if (!case_sensitive && a.is_string() && b.is_string()) return lower(a.as_string()) < lower(b.as_string());
  return compare_op("<", a, b);
}

JinjaValue attribute_of(Evaluator& ev, const JinjaValue& item, const JinjaValue& attribute) {
  if (attribute.is_none()) return item;
  if (attribute.is_int()) return ev.get_item(item, attribute);
  JinjaValue v = item;
  for (const auto& part : split(defined(attribute).str(), JinjaValue("."), -1))
    v = ev.get_item(v, !part.empty() && std::all_of(part.begin(), part.end(), is_digit)
                           ? JinjaValue(std::stoll(part))
                           : JinjaValue(part));
  return v;
}

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

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string title_case(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    start = !alpha;
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

JinjaValue items_of(const JinjaValue& d) {
  JinjaList out;
  for (const auto& [k, v] : d.dict()) out.push_back(JinjaValue(JinjaList{k, v}, true));
  return JinjaValue(std::move(out));
}

// str.format with {}, {0} and {name} fields (no format specs).
std::string python_format(const std::string& f, const std::vector<JinjaValue>& args, const Kwargs& kwargs) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') { out += '{'; ++i; continue; }
    if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') { out += '}'; ++i; continue; }
    if (f[i] != '{') { out += f[i]; continue; }
    const std::size_t close = f.find('}', i);
    if (close == std::string::npos) type_error("format(): a '{' is not closed");
    const std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos) type_error("format(): format specs are not supported");
    const JinjaValue* v = nullptr;
    if (field.empty()) {
      if (auto_index < args.size()) v = &args[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), is_digit)) {
      const std::size_t k = std::stoul(field);
      if (k < args.size()) v = &args[k];
    } else {
      v = kwarg(kwargs, field);
    }
    if (!v) type_error("format(): no argument for {" + field + "}");
    out += defined(*v).str();
    i = close;
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- operators

JinjaValue binary_op(const std::string& op, const JinjaValue& a_, const JinjaValue& b_) {
  const JinjaValue& a = defined(a_);
  const JinjaValue& b = defined(b_);
  if (op == "~") {
    std::string s = a.str() + b.str();
    if (s.size() > kMaxString) throw JinjaError("string too long");
    return s;
  }
  if (a.is_number() && b.is_number()) {
    if (op == "/") {
      const double y = float_of(b);
      if (y == 0) throw JinjaError("division by zero");
      return float_of(a) / y;
    }
    if (is_integral(a) && is_integral(b)) {
      const std::int64_t x = int_of(a), y = int_of(b);
      if (op == "+") return add(x, y);
      if (op == "-") return sub(x, y);
      if (op == "*") return mul(x, y);
      if (op == "//") return floor_div(x, y);
      if (op == "%") return floor_mod(x, y);
      if (op == "**") {
        if (y >= 0) return int_pow(x, y);
        if (x == 0) throw JinjaError("0 cannot be raised to a negative power");
        return std::pow(double(x), double(y));
      }
    } else {
      const double x = float_of(a), y = float_of(b);
      if (op == "+") return x + y;
      if (op == "-") return x - y;
      if (op == "*") return x * y;
      if (op == "//" || op == "%") {
        if (y == 0) throw JinjaError("division by zero");
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        if (op == "%") return m;
        return std::floor((x - m) / y + 0.5);  // exact floor division, as Python's divmod
      }
      if (op == "**") {
        if (x == 0 && y < 0) throw JinjaError("0 cannot be raised to a negative power");
        return std::pow(x, y);
      }
    }
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > kMaxString) throw JinjaError("string too long");
      return a.as_string() + b.as_string();
    }
    if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
      if (a.list().size() + b.list().size() > kMaxItems) throw JinjaError("list too long");
      JinjaList out = a.list();
      out.insert(out.end(), b.list().begin(), b.list().end());
      return JinjaValue(std::move(out), a.is_tuple());
    }
  }
  if (op == "*") {
    const JinjaValue* seq = a.is_string() || a.is_sequence() ? &a : b.is_string() || b.is_sequence() ? &b : nullptr;
    const JinjaValue* count = seq == &a ? &b : &a;
    if (seq && is_integral(*count)) {
      const std::int64_t n = int_of(*count);
      if (seq->is_string()) return repeat(seq->as_string(), n);
      JinjaList out;
      if (n > 0 && !seq->list().empty()) {
        if (static_cast<std::size_t>(n) > kMaxItems / seq->list().size()) throw JinjaError("list too long");
        for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->list().begin(), seq->list().end());
      }
      return JinjaValue(std::move(out), seq->is_tuple());
    }
  }
  if (op == "%" && a.is_string()) return printf_format(a.as_string(), b);
  unsupported(op, a, b);
}

bool compare_op(const std::string& op, const JinjaValue& a_, const JinjaValue& b_) {
  const JinjaValue& a = defined(a_);
  const JinjaValue& b = defined(b_);
  if (op == "==") return a == b;
  if (op == "!=") return !(a == b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  int c = 0;
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) c = int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b);
    else {
      const double x = float_of(a), y = float_of(b);
      if (std::isnan(x) || std::isnan(y)) return false;
      c = x < y ? -1 : x > y;
    }
  } else if (a.is_string() && b.is_string()) {
    c = a.as_string().compare(b.as_string());
  } else if (a.kind() == b.kind() && a.is_sequence()) {
    const JinjaList &x = a.list(), &y = b.list();
    std::size_t i = 0;
    while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
    if (i < x.size() && i < y.size()) return compare_op(op, x[i], y[i]);
    c = x.size() < y.size() ? -1 : x.size() > y.size();
  } else {
    type_error("'" + op + "' is not supported between " + an(a) + " and " + an(b));
  }
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

bool contains(const JinjaValue& container, const JinjaValue& item) {
  defined(container);
  defined(item);
  if (container.is_string()) {
    if (!item.is_string()) type_error("'in <string>' needs a string on the left, not " + an(item));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_sequence())
    return std::any_of(container.list().begin(), container.list().end(), [&](const JinjaValue& x) { return x == item; });
  if (container.is_dict()) return container.find(item) != nullptr;
  type_error(an(container) + " is not a container ('in' needs a string, list, tuple or dict)");
}

// printf-style formatting: `"%d items" % n`, `"%s-%s" % (a, b)`, `"%(x)s" % d`.
std::string printf_format(const std::string& format, const JinjaValue& args_) {
  const JinjaValue& args = defined(args_);
  const bool by_name = args.is_dict();
  std::vector<JinjaValue> items = args.is_tuple() ? args.list() : std::vector<JinjaValue>{args};
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) type_error("incomplete format");
    if (format[i] == '%') {
      out += '%';
      continue;
    }
    const JinjaValue* value = nullptr;
    if (format[i] == '(') {
      const std::size_t close = format.find(')', i);
      if (close == std::string::npos || !by_name) type_error("format requires a mapping");
      value = args.find(format.substr(i + 1, close - i - 1));
      if (!value) type_error("no key '" + format.substr(i + 1, close - i - 1) + "' for the format");
      i = close + 1;
    }
    std::string spec = "%";
    while (i < format.size() && std::strchr("-+ #0", format[i])) spec += format[i++];
    while (i < format.size() && (is_digit(format[i]) || format[i] == '.')) spec += format[i++];
    if (i >= format.size()) type_error("incomplete format");
    const char conv = format[i];
    if (!value) {
      if (next >= items.size()) type_error("not enough arguments for the format string");
      value = &items[next++];
    }
    defined(*value);
    char buf[512];
    if (std::strchr("diu", conv)) {
      spec += "lld";
      std::snprintf(buf, sizeof buf, spec.c_str(), static_cast<long long>(is_integral(*value) ? int_of(*value) : to_int(*value)));
      out += buf;
    } else if (std::strchr("xXo", conv)) {
      spec += std::string("ll") + conv;
      std::snprintf(buf, sizeof buf, spec.c_str(), static_cast<long long>(to_int(*value)));
      out += buf;
    } else if (std::strchr("eEfFgG", conv)) {
      spec += conv;
      std::snprintf(buf, sizeof buf, spec.c_str(), to_float(*value));
      out += buf;
    } else if (conv == 's' || conv == 'r' || conv == 'a') {
      const std::string s = conv == 's' ? value->str() : value->repr();
      spec += 's';
      if (spec == "%s") out += s;
      else {
        std::snprintf(buf, sizeof buf, spec.c_str(), s.c_str());
        out += buf;
      }
    } else {
      type_error(std::string("unsupported format character '") + conv + "'");
    }
    if (out.size() > kMaxString) throw JinjaError("string too long");
  }
  if (!by_name && next < items.size() && args.is_tuple())
    type_error("not all arguments converted during string formatting");
  return out;
}

bool is_builtin_global(std::string_view name, bool python_mode) {
  static const char* const kJinja[] = {"range", "dict", "namespace"};
  static const char* const kPython[] = {
      "range", "ceil", "floor", "trunc", "abs", "round", "min", "max", "sum", "len", "int", "float",
      "str", "bool", "pow", "sqrt", "exp", "log", "log2", "log10", "gcd", "lcm", "prod", "isqrt",
      "comb", "perm", "factorial", "fmod", "copysign", "hypot", "list", "tuple", "dict"};
  if (python_mode) return std::find(std::begin(kPython), std::end(kPython), name) != std::end(kPython);
  return std::find(std::begin(kJinja), std::end(kJinja), name) != std::end(kJinja);
}

// ---------------------------------------------------------------- evaluation

void Evaluator::charge(std::int64_t n) {
  if (!budget_) return;
  if (n > *budget_) throw JinjaError("more than " + std::to_string(limit_) + " loop iterations in total");
  *budget_ -= n;
}

JinjaList Evaluator::iterate(const JinjaValue& v) {
  if (v.is_undefined() && v.undefined().lenient) return {};
  switch (defined(v).kind()) {
    case JinjaValue::Kind::List:
    case JinjaValue::Kind::Tuple: return v.list();
    case JinjaValue::Kind::Dict: {
      JinjaList keys;
      for (const auto& [k, x] : v.dict()) keys.push_back(k);
      return keys;
    }
    case JinjaValue::Kind::String: {
      JinjaList out;
      for (auto& c : characters(v.as_string())) out.emplace_back(std::move(c));
      return out;
    }
    default: type_error(an(v) + " is not iterable");
  }
}

JinjaValue Evaluator::get_attr(const JinjaValue& obj, const std::string& name) {
  defined(obj);
  static const char* const kDictMethods[] = {"items", "keys", "values", "get", "update", "pop", "copy", "setdefault"};
  static const char* const kListMethods[] = {"append", "extend", "pop", "index", "count", "insert", "remove",
                                             "reverse", "sort", "copy"};
  static const char* const kStrMethods[] = {
      "upper", "lower", "strip", "lstrip", "rstrip", "split", "rsplit", "join", "startswith", "endswith",
      "replace", "format", "title", "capitalize", "find", "count", "isdigit", "isalpha", "isalnum",
      "isupper", "islower", "zfill", "splitlines", "index"};
  auto method_in = [&](const auto& names) { return std::find(std::begin(names), std::end(names), name) != std::end(names); };
  const bool is_method = (obj.is_dict() && !obj.is_namespace() && method_in(kDictMethods)) ||
                         (obj.is_sequence() && method_in(kListMethods) && (obj.is_list() || name == "index" || name == "count")) ||
                         (obj.is_string() && method_in(kStrMethods));
  if (is_method)
    return JinjaValue(std::make_shared<const JinjaCallable>(JinjaCallable{JinjaCallable::Kind::Method, name, obj, nullptr}));
  if (obj.is_dict())
    if (const JinjaValue* v = obj.find(name)) return *v;
  std::vector<std::string> keys;
  if (obj.is_dict())
    for (const auto& [k, v] : obj.dict())
      if (k.is_string()) keys.push_back(k.as_string());
  return JinjaUndefined{name, an(obj) + " has no attribute '" + name + "'" + did_you_mean(name, keys)};
}

JinjaValue Evaluator::get_item(const JinjaValue& obj, const JinjaValue& key) {
  defined(obj);
  defined(key);
  if (obj.is_dict()) {
    if (const JinjaValue* v = obj.find(key)) return *v;
    if (key.is_string() && !obj.is_namespace()) return get_attr(obj, key.as_string());
    std::vector<std::string> keys;
    for (const auto& [k, v] : obj.dict())
      if (k.is_string()) keys.push_back(k.as_string());
    return JinjaUndefined{key.str(), "the dict has no key " + key.repr() + (key.is_string() ? did_you_mean(key.as_string(), keys) : "")};
  }
  if ((obj.is_sequence() || obj.is_string()) && is_integral(key)) {
    const std::int64_t n = obj.is_string() ? std::int64_t(obj.as_string().size()) : std::int64_t(obj.list().size());
    std::int64_t i = int_of(key);
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return JinjaUndefined{key.str(), "index " + key.str() + " is out of range (the " + obj.type_name() +
                                           " has " + std::to_string(n) + " items)"};
    if (obj.is_string()) return obj.as_string().substr(std::size_t(i), 1);
    return obj.list()[std::size_t(i)];
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return JinjaUndefined{key.str(), an(obj) + " cannot be indexed with " + an(key)};
}

JinjaValue Evaluator::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Literal: return e.value;
    case ExprKind::Name: {
      JinjaValue v = lookup(e.name);
      if (!v.is_undefined()) return v;
      if (is_builtin_global(e.name, python_)) {
        return JinjaValue(std::make_shared<const JinjaCallable>(JinjaCallable{JinjaCallable::Kind::Builtin, e.name, {}, nullptr}));
      }
      if (python_) {
        if (e.name == "pi") return M_PI;
        if (e.name == "e") return M_E;
        if (e.name == "tau") return 2 * M_PI;
        if (e.name == "inf") return std::numeric_limits<double>::infinity();
        if (e.name == "nan") return std::numeric_limits<double>::quiet_NaN();
        fail_undefined(v);  // Python fails at once
      }
      return v;
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      JinjaList items;
      for (const auto& c : e.children) items.push_back(defined(eval(*c)));
      return JinjaValue(std::move(items), e.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: {
      JinjaValue out{JinjaDict{}};
      for (std::size_t i = 0; i + 1 < e.children.size(); i += 2) {
        JinjaValue k = defined(eval(*e.children[i]));
        if (k.is_sequence() && !k.is_tuple()) type_error("a list cannot be a dict key");
        JinjaValue v = defined(eval(*e.children[i + 1]));
        bool replaced = false;
        for (auto& [ok, ov] : out.dict())
          if (ok == k) { ov = v; replaced = true; }
        if (!replaced) out.dict().emplace_back(std::move(k), std::move(v));
      }
      return out;
    }
    case ExprKind::Unary: {
      const JinjaValue v = defined(eval(*e.children[0]));
      if (!v.is_number()) type_error("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return v.is_bool() ? JinjaValue(int_of(v)) : v;
      if (v.is_float()) return -v.as_float();
      return sub(0, int_of(v));
    }
    case ExprKind::Binary: return binary_op(e.name, eval(*e.children[0]), eval(*e.children[1]));
    case ExprKind::And: {
      JinjaValue lhs = eval(*e.children[0]);
      return lhs.truthy() ? eval(*e.children[1]) : lhs;
    }
    case ExprKind::Or: {
      JinjaValue lhs = eval(*e.children[0]);
      return lhs.truthy() ? lhs : eval(*e.children[1]);
    }
    case ExprKind::Not: return !eval(*e.children[0]).truthy();
    case ExprKind::Compare: {
      JinjaValue lhs = eval(*e.children[0]);
      for (std::size_t i = 0; i < e.ops.size(); ++i) {
        JinjaValue rhs = eval(*e.children[i + 1]);
        if (!compare_op(e.ops[i], lhs, rhs)) return false;
        lhs = std::move(rhs);
      }
      return true;
    }
    case ExprKind::Cond: {
      if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
      if (e.children[2]) return eval(*e.children[2]);
      return JinjaUndefined{"if", "an inline 'if' without 'else' was false, and its value is used", true};
    }
    case ExprKind::GetAttr: return get_attr(eval(*e.children[0]), e.name);
    case ExprKind::GetItem: return get_item(eval(*e.children[0]), eval(*e.children[1]));
    case ExprKind::Slice: {
      const JinjaValue obj = defined(eval(*e.children[0]));
      if (!obj.is_sequence() && !obj.is_string()) type_error(an(obj) + " cannot be sliced");
      auto part = [&](int k) -> std::optional<std::int64_t> {
        if (!e.children[std::size_t(k)]) return std::nullopt;
        JinjaValue v = defined(eval(*e.children[std::size_t(k)]));
        if (v.is_none()) return std::nullopt;
        if (!is_integral(v)) type_error("slice indices must be integers");
        return int_of(v);
      };
      const std::optional<std::int64_t> start = part(1), stop = part(2), step_opt = part(3);
      const std::int64_t step = step_opt.value_or(1);
      if (step == 0) type_error("slice step cannot be zero");
      std::vector<JinjaValue> chars;
      const JinjaList& items = obj.is_string() ? (chars = iterate(obj)) : obj.list();
      const std::int64_t n = std::int64_t(items.size());
      auto clamp = [&](std::optional<std::int64_t> i, std::int64_t fallback) {
        if (!i) return fallback;
        std::int64_t v = *i < 0 ? *i + n : *i;
        if (step > 0) return std::clamp<std::int64_t>(v, 0, n);
        return std::clamp<std::int64_t>(v, -1, n - 1);
      };
      const std::int64_t b = clamp(start, step > 0 ? 0 : n - 1), stop_i = clamp(stop, step > 0 ? n : -1);
      JinjaList out;
      for (std::int64_t i = b; step > 0 ? i < stop_i : i > stop_i; i += step) out.push_back(items[std::size_t(i)]);
      if (obj.is_string()) {
        std::string s;
        for (const auto& c : out) s += c.as_string();
        return s;
      }
      return JinjaValue(std::move(out), obj.is_tuple());
    }
    case ExprKind::Call: return eval_call(e);
    case ExprKind::Filter: return eval_filter(e);
    case ExprKind::Test: return eval_test(e);
  }
  return {};
}

JinjaValue Evaluator::eval_call(const Expr& e) {
  const JinjaValue f = eval(*e.children[0]);
  if (f.is_undefined()) {
    // Say what is missing: `ceil(x)` in a template names ceil, not a NoneType.
    fail_undefined(f);
  }
  if (!f.is_callable()) type_error(an(f) + " is not callable");
  std::vector<JinjaValue> args;
  for (std::size_t i = 1; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
  Kwargs kwargs;
  for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v));
  return call(f, std::move(args), std::move(kwargs));
}

JinjaValue Evaluator::call(const JinjaValue& f, std::vector<JinjaValue> args, Kwargs kwargs) {
  const JinjaCallable& c = f.callable();
  switch (c.kind) {
    case JinjaCallable::Kind::Builtin:
      for (const auto& a : args) defined(a);
      return call_builtin(c.name, args, kwargs);
    case JinjaCallable::Kind::Method:
      for (const auto& a : args) defined(a);
      return call_method(c.self, c.name, args, kwargs);
    case JinjaCallable::Kind::Host:
      for (const auto& a : args) defined(a);
      for (const auto& [k, v] : kwargs) defined(v);
      return call_host(c, std::move(args), std::move(kwargs));
    case JinjaCallable::Kind::Macro:
      return call_macro(c, std::move(args), std::move(kwargs));
  }
  return {};
}

JinjaValue Evaluator::call_builtin(const std::string& name, std::vector<JinjaValue>& args, Kwargs& kwargs) {
  auto number = [&](std::size_t i) -> const JinjaValue& {
    if (i >= args.size()) type_error(name + "() needs more arguments");
    if (!args[i].is_number()) type_error(name + "() needs a number, not " + an(args[i]));
    return args[i];
  };
  auto integer = [&](std::size_t i) -> std::int64_t {
    if (i >= args.size()) type_error(name + "() needs more arguments");
    if (!is_integral(args[i])) type_error(name + "() needs an integer, not " + an(args[i]));
    return int_of(args[i]);
  };
  auto from_double = [&](double d) -> JinjaValue {
    if (!std::isfinite(d)) type_error(name + "() of " + JinjaValue(d).str() + " is not an integer");
    return to_int(JinjaValue(d));
  };
  if (name == "range") {
    expect_args(name, args, 1, 3);
    std::int64_t start = 0, stop = 0, step = 1;
    if (args.size() == 1) stop = integer(0);
    else {
      start = integer(0);
      stop = integer(1);
      if (args.size() == 3) step = integer(2);
    }
    if (step == 0) type_error("range() step must not be zero");
    const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
    const __int128 count = span <= 0 ? 0 : (span - 1) / (step > 0 ? __int128{step} : -__int128{step}) + 1;
    // A for loop charges its iterations; range() only refuses what could never run.
    if (budget_ && count > *budget_) throw JinjaError("more than " + std::to_string(limit_) + " loop iterations in total");
    if (count > static_cast<__int128>(kMaxItems)) type_error("range() of more than " + std::to_string(kMaxItems) + " items");
    JinjaList out;
    for (__int128 k = 0; k < count; ++k) out.emplace_back(static_cast<std::int64_t>(start + k * step));
    return JinjaValue(std::move(out));
  }
  if (name == "dict" || name == "namespace") {
    JinjaDict out;
    auto put = [&](JinjaValue k, JinjaValue v) {
      for (auto& [ok, ov] : out)
        if (ok == k) { ov = std::move(v); return; }
      out.emplace_back(std::move(k), std::move(v));
    };
    if (args.size() > 1) type_error(name + "() takes at most 1 positional argument");
    if (!args.empty()) {
      if (args[0].is_dict()) {
        for (const auto& [k, v] : args[0].dict()) put(k, v);
      } else {
        for (const auto& item : iterate(args[0])) {
          if (!item.is_sequence() || item.list().size() != 2) type_error(name + "() needs pairs");
          put(item.list()[0], item.list()[1]);
        }
      }
    }
    for (const auto& [k, v] : kwargs) put(k, v);
    return name == "dict" ? JinjaValue(std::move(out)) : JinjaValue::make_namespace(std::move(out));
  }
  // Python's builtins and math functions (Python expressions only).
  if (name == "ceil" || name == "floor" || name == "trunc") {
    expect_args(name, args, 1, 1);
    const JinjaValue& x = number(0);
    if (is_integral(x)) return int_of(x);
    const double d = x.as_float();
    return from_double(name == "ceil" ? std::ceil(d) : name == "floor" ? std::floor(d) : std::trunc(d));
  }
  if (name == "abs") {
    expect_args(name, args, 1, 1);
    const JinjaValue& x = number(0);
    if (x.is_float()) return std::fabs(x.as_float());
    return int_of(x) < 0 ? sub(0, int_of(x)) : int_of(x);
  }
  if (name == "round") {
    expect_args(name, args, 1, 2);
    const JinjaValue& x = number(0);
    if (args.size() == 1 || args[1].is_none()) {
      if (is_integral(x)) return int_of(x);
      return from_double(round_half_even(x.as_float(), 0));
    }
    const std::int64_t digits = integer(1);
    if (is_integral(x)) return int_of(x);
    return round_half_even(x.as_float(), digits);
  }
  if (name == "min" || name == "max") {
    JinjaList items = args.size() == 1 ? iterate(args[0]) : args;
    if (items.empty()) type_error(name + "() of an empty sequence");
    JinjaValue best = items[0];
    for (std::size_t i = 1; i < items.size(); ++i)
      if (name == "min" ? less_than(items[i], best) : less_than(best, items[i])) best = items[i];
    return best;
  }
  if (name == "sum" || name == "prod") {
    expect_args(name, args, 1, 2);
    JinjaValue total = arg(args, kwargs, 1, "start", name == "sum" ? JinjaValue(0) : JinjaValue(1));
    for (const auto& x : iterate(args[0])) total = binary_op(name == "sum" ? "+" : "*", total, x);
    return total;
  }
  if (name == "len") {
    expect_args(name, args, 1, 1);
    if (args[0].is_string()) return std::int64_t(args[0].as_string().size());
    if (args[0].is_sequence()) return std::int64_t(args[0].list().size());
    if (args[0].is_dict()) return std::int64_t(args[0].dict().size());
    type_error(an(args[0]) + " has no len()");
  }
  if (name == "int") {
    expect_args(name, args, 0, 2);
    if (args.empty()) return 0;
    return to_int(args[0], args.size() > 1 ? int(integer(1)) : 10);
  }
  if (name == "float") {
    expect_args(name, args, 0, 1);
    return args.empty() ? 0.0 : to_float(args[0]);
  }
  if (name == "str") return args.empty() ? std::string() : args[0].str();
  if (name == "bool") return !args.empty() && args[0].truthy();
  if (name == "list" || name == "tuple") {
    expect_args(name, args, 0, 1);
    return JinjaValue(args.empty() ? JinjaList{} : iterate(args[0]), name == "tuple");
  }
  if (name == "pow") {
    expect_args(name, args, 2, 3);
    JinjaValue r = binary_op("**", number(0), number(1));
    if (args.size() == 3) r = binary_op("%", r, number(2));
    return r;
  }
  if (name == "gcd" || name == "lcm") {
    std::int64_t r = name == "gcd" ? 0 : 1;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::int64_t x = integer(i);
      if (x == std::numeric_limits<std::int64_t>::min()) overflow();
      const std::int64_t a = std::abs(x);
      if (name == "gcd") r = std::gcd(r, a);
      else if (a == 0 || r == 0) r = 0;
      else r = mul(r / std::gcd(r, a), a);
    }
    return r;
  }
  if (name == "isqrt") {
    expect_args(name, args, 1, 1);
    const std::int64_t x = integer(0);
    if (x < 0) type_error("isqrt() of a negative number");
    std::int64_t r = static_cast<std::int64_t>(std::sqrt(double(x)));
    while (r > 0 && static_cast<__int128>(r) * r > x) --r;
    while (static_cast<__int128>(r + 1) * (r + 1) <= x) ++r;
    return r;
  }
  if (name == "factorial" || name == "comb" || name == "perm") {
    const std::int64_t n = integer(0);
    const std::int64_t k = name == "factorial" ? n : args.size() > 1 ? integer(1) : n;
    if (n < 0 || k < 0) type_error(name + "() of a negative number");
    if (k > n) return 0;
    std::int64_t r = 1;
    if (name == "comb") {
      const std::int64_t kk = std::min(k, n - k);
      for (std::int64_t i = 1; i <= kk; ++i) {
        __int128 w = static_cast<__int128>(r) * (n - kk + i) / i;
        if (w > std::numeric_limits<std::int64_t>::max()) overflow();
        r = static_cast<std::int64_t>(w);
      }
      return r;
    }
    for (std::int64_t i = n - k + 1; i <= n; ++i) r = mul(r, i);
    return r;
  }
  // Float functions.
  const double x = number(0).is_float() ? args[0].as_float() : double(int_of(args[0]));
  if (name == "sqrt") {
    if (x < 0) type_error("math domain error: sqrt of a negative number");
    return std::sqrt(x);
  }
  if (name == "exp") return std::exp(x);
  if (name == "log" || name == "log2" || name == "log10") {
    if (x <= 0) type_error("math domain error: log of a number <= 0");
    if (name == "log2") return std::log2(x);
    if (name == "log10") return std::log10(x);
    if (args.size() > 1) return std::log(x) / std::log(float_of(number(1)));
    return std::log(x);
  }
  if (name == "fmod") return std::fmod(x, float_of(number(1)));
  if (name == "copysign") return std::copysign(x, float_of(number(1)));
  if (name == "hypot") {
    double s = 0;
    for (std::size_t i = 0; i < args.size(); ++i) s += float_of(number(i)) * float_of(number(i));
    return std::sqrt(s);
  }
  type_error("unknown function '" + name + "'");
}

JinjaValue Evaluator::call_method(const JinjaValue& self, const std::string& name, std::vector<JinjaValue>& args,
                                  Kwargs& kwargs) {
  if (self.is_dict()) {
    JinjaDict& d = self.dict();
    if (name == "items") return items_of(self);
    if (name == "keys" || name == "values") {
      JinjaList out;
      for (const auto& [k, v] : d) out.push_back(name == "keys" ? k : v);
      return JinjaValue(std::move(out));
    }
    if (name == "get") {
      expect_args(name, args, 1, 2);
      if (const JinjaValue* v = self.find(args[0])) return *v;
      return args.size() > 1 ? args[1] : JinjaValue();
    }
    if (name == "copy") return JinjaValue(JinjaDict(d));
    if (name == "update") {
      JinjaValue other = args.empty() ? JinjaValue(JinjaDict{}) : args[0];
      JinjaDict incoming = other.is_dict() ? other.dict() : JinjaDict{};
      for (const auto& [k, v] : kwargs) incoming.emplace_back(k, v);
      for (const auto& [k, v] : incoming) {
        bool found = false;
        for (auto& [ok, ov] : d)
          if (ok == k) { ov = v; found = true; }
        if (!found) d.emplace_back(k, v);
      }
      return {};
    }
    if (name == "pop" || name == "setdefault") {
      expect_args(name, args, 1, 2);
      for (auto it = d.begin(); it != d.end(); ++it)
        if (it->first == args[0]) {
          JinjaValue v = it->second;
          if (name == "pop") d.erase(it);
          return v;
        }
      if (name == "setdefault") {
        d.emplace_back(args[0], args.size() > 1 ? args[1] : JinjaValue());
        return d.back().second;
      }
      if (args.size() > 1) return args[1];
      type_error("pop(): no key " + args[0].repr());
    }
  }
  if (self.is_sequence()) {
    JinjaList& l = self.list();
    if (name == "index") {
      for (std::size_t i = 0; i < l.size(); ++i)
        if (!args.empty() && l[i] == args[0]) return std::int64_t(i);
      type_error("index(): the item is not in the list");
    }
    if (name == "count") {
      expect_args(name, args, 1, 1);
      return std::int64_t(std::count(l.begin(), l.end(), args[0]));
    }
    if (name == "append" || name == "insert" || name == "extend") {
      if (l.size() >= kMaxItems) throw JinjaError("list too long");
      if (name == "append") {
        expect_args(name, args, 1, 1);
        l.push_back(args[0]);
      } else if (name == "extend") {
        expect_args(name, args, 1, 1);
        for (auto& x : iterate(args[0])) l.push_back(std::move(x));
      } else {
        expect_args(name, args, 2, 2);
        std::int64_t i = to_int(args[0]), n = std::int64_t(l.size());
        if (i < 0) i = std::max<std::int64_t>(0, i + n);
        l.insert(l.begin() + std::min(i, n), args[1]);
      }
      return {};
    }
    if (name == "pop") {
      if (l.empty()) type_error("pop() from an empty list");
      std::int64_t i = args.empty() ? -1 : to_int(args[0]), n = std::int64_t(l.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) type_error("pop() index out of range");
      JinjaValue v = l[std::size_t(i)];
      l.erase(l.begin() + i);
      return v;
    }
    if (name == "remove") {
      for (auto it = l.begin(); it != l.end(); ++it)
        if (!args.empty() && *it == args[0]) {
          l.erase(it);
          return {};
        }
      type_error("remove(): the item is not in the list");
    }
    if (name == "reverse") {
      std::reverse(l.begin(), l.end());
      return {};
    }
    if (name == "sort") {
      std::stable_sort(l.begin(), l.end(), [](const JinjaValue& a, const JinjaValue& b) { return less_than(a, b); });
      if (const JinjaValue* r = kwarg(kwargs, "reverse"); r && r->truthy()) std::reverse(l.begin(), l.end());
      return {};
    }
    if (name == "copy") return JinjaValue(JinjaList(l));
  }
  if (self.is_string()) {
    const std::string& s = self.as_string();
    auto str_arg = [&](std::size_t i) -> const std::string& {
      if (i >= args.size() || !args[i].is_string()) type_error(name + "() needs a string argument");
      return args[i].as_string();
    };
    if (name == "upper") return upper(s);
    if (name == "lower") return lower(s);
    if (name == "title") return title_case(s);
    if (name == "capitalize") return capitalize(s);
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const std::string* chars = !args.empty() && args[0].is_string() ? &args[0].as_string() : nullptr;
      return strip(s, chars, name != "rstrip", name != "lstrip");
    }
    if (name == "split" || name == "rsplit") {
      const JinjaValue sep = arg(args, kwargs, 0, "sep");
      const std::int64_t max_split = to_int(arg(args, kwargs, 1, "maxsplit", -1));
      if (name == "rsplit" && max_split >= 0) {
        // Split from the right: split all, then join the leftmost ones back.
        std::vector<std::string> all = split(s, sep, -1);
        if (std::int64_t(all.size()) > max_split + 1) {
          const std::string joiner = sep.is_none() ? " " : sep.as_string();
          std::string head = all[0];
          const std::size_t keep = all.size() - std::size_t(max_split);
          for (std::size_t i = 1; i < keep; ++i) head += joiner + all[i];
          std::vector<std::string> out{head};
          out.insert(out.end(), all.begin() + std::ptrdiff_t(keep), all.end());
          return string_list(out);
        }
        return string_list(all);
      }
      return string_list(split(s, sep, max_split));
    }
    if (name == "splitlines") return string_list(split(replace_all(s, "\r\n", "\n", -1), JinjaValue("\n"), -1));
    if (name == "join") {
      std::string out;
      bool first = true;
      for (const auto& x : iterate(arg(args, kwargs, 0, "iterable"))) {
        if (!x.is_string()) type_error("join() needs strings, not " + an(x));
        out += (first ? "" : s) + x.as_string();
        first = false;
        if (out.size() > kMaxString) throw JinjaError("string too long");
      }
      return out;
    }
    if (name == "startswith" || name == "endswith") {
      const std::string& p = str_arg(0);
      if (p.size() > s.size()) return false;
      return name == "startswith" ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
    }
    if (name == "replace") {
      return replace_all(s, str_arg(0), str_arg(1), args.size() > 2 ? to_int(args[2]) : -1);
    }
    if (name == "find" || name == "index") {
      const std::size_t hit = s.find(str_arg(0));
      if (hit == std::string::npos) {
        if (name == "index") type_error("index(): substring not found");
        return -1;
      }
      return std::int64_t(hit);
    }
    if (name == "count") {
      const std::string& p = str_arg(0);
      if (p.empty()) return std::int64_t(characters(s).size() + 1);
      std::int64_t n = 0;
      for (std::size_t pos = s.find(p); pos != std::string::npos; pos = s.find(p, pos + p.size())) ++n;
      return n;
    }
    auto all_of = [&](int (*pred)(int)) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [pred](char c) { return pred(static_cast<unsigned char>(c)) != 0; });
    };
    if (name == "isdigit") return all_of(std::isdigit);
    if (name == "isalpha") return all_of(std::isalpha);
    if (name == "isalnum") return all_of(std::isalnum);
    if (name == "isupper") return s != lower(s) && s == upper(s);
    if (name == "islower") return s != upper(s) && s == lower(s);
    if (name == "zfill") {
      const std::int64_t width = to_int(arg(args, kwargs, 0, "width", 0));
      if (width <= std::int64_t(s.size())) return s;
      if (std::size_t(width) > kMaxString) throw JinjaError("string too long");
      const std::size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+');
      return s.substr(0, sign) + std::string(std::size_t(width) - s.size(), '0') + s.substr(sign);
    }
    if (name == "format") return python_format(s, args, kwargs);
  }
  type_error(an(self) + " has no method '" + name + "'");
}

// ---------------------------------------------------------------- filters and tests

JinjaValue Evaluator::eval_filter(const Expr& e) {
  JinjaValue v = eval(*e.children[0]);
  std::vector<JinjaValue> args;
  for (std::size_t i = 1; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
  Kwargs kwargs;
  for (const auto& [k, x] : e.kwargs) kwargs.emplace_back(k, eval(*x));
  return apply_filter(e.name, v, args, kwargs);
}

JinjaValue Evaluator::apply_filter(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args,
                                   Kwargs& kwargs) {
  if (name == "default" || name == "d") {
    const JinjaValue fallback = arg(args, kwargs, 0, "default_value", std::string());
    const bool boolean = arg(args, kwargs, 1, "boolean", false).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return fallback;
    return v;
  }
  defined(v);
  for (const auto& a : args) defined(a);
  for (const auto& [k, a] : kwargs) defined(a);
  if (name == "min" || name == "max") {
    const JinjaValue attribute = arg(args, kwargs, 1, "attribute");
    const bool cs = arg(args, kwargs, 0, "case_sensitive", false).truthy();
    JinjaList items = iterate(v);
    if (items.empty()) return JinjaUndefined{name, name + " of an empty sequence"};
    JinjaValue best = items[0], best_key = attribute_of(*this, items[0], attribute);
    for (std::size_t i = 1; i < items.size(); ++i) {
      JinjaValue k = attribute_of(*this, items[i], attribute);
      if (name == "min" ? less_than(k, best_key, cs) : less_than(best_key, k, cs)) {
        best = items[i];
        best_key = k;
      }
    }
    return best;
  }
  if (name == "sum") {
    const JinjaValue attribute = arg(args, kwargs, 0, "attribute");
    JinjaValue total = arg(args, kwargs, 1, "start", 0);
    for (const auto& x : iterate(v)) total = binary_op("+", total, attribute_of(*this, x, attribute));
    return total;
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return std::int64_t(characters(v.as_string()).size());
    if (v.is_sequence()) return std::int64_t(v.list().size());
    if (v.is_dict()) return std::int64_t(v.dict().size());
    type_error(an(v) + " has no length");
  }
  if (name == "first" || name == "last") {
    JinjaList items = iterate(v);
    if (items.empty()) return JinjaUndefined{name, "the sequence is empty, so it has no " + name + " item"};
    return name == "first" ? items.front() : items.back();
  }
  if (name == "int") {
    const JinjaValue fallback = arg(args, kwargs, 0, "default", 0);
    const int base = int(to_int(arg(args, kwargs, 1, "base", 10)));
    try {
      if (v.is_string()) {
        try {
          return to_int(v, base);
        } catch (const JinjaError&) {
          return to_int(JinjaValue(to_float(v)));
        }
      }
      return to_int(v);
    } catch (const JinjaError&) {
      return fallback;
    }
  }
  if (name == "float") {
    try {
      return to_float(v);
    } catch (const JinjaError&) {
      return arg(args, kwargs, 0, "default", 0.0);
    }
  }
  if (name == "string") return v.str();
  if (name == "abs") {
    std::vector<JinjaValue> a{v};
    Kwargs none;
    return call_builtin("abs", a, none);
  }
  if (name == "round") {
    const std::int64_t precision = to_int(arg(args, kwargs, 0, "precision", 0));
    const std::string method = arg(args, kwargs, 1, "method", "common").str();
    const double scale = std::pow(10.0, double(precision));
    const double x = to_float(v) * scale;
    double r;
    if (method == "common") r = std::nearbyint(x);  // Python's round(): half to even
    else if (method == "ceil") r = std::ceil(x);
    else if (method == "floor") r = std::floor(x);
    else type_error("round: method must be 'common', 'ceil' or 'floor'");
    return r / scale;
  }
  if (name == "list") return JinjaValue(iterate(v));
  if (name == "join") {
    const std::string sep = arg(args, kwargs, 0, "d", std::string()).str();
    const JinjaValue attribute = arg(args, kwargs, 1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& x : iterate(v)) {
      out += (first ? "" : sep) + attribute_of(*this, x, attribute).str();
      first = false;
      if (out.size() > kMaxString) throw JinjaError("string too long");
    }
    return out;
  }
  if (name == "upper") return upper(v.str());
  if (name == "lower") return lower(v.str());
  if (name == "capitalize") return capitalize(v.str());
  if (name == "title") return title_case(v.str());
  if (name == "trim") {
    const JinjaValue chars = arg(args, kwargs, 0, "chars");
    return strip(v.str(), chars.is_string() ? &chars.as_string() : nullptr, true, true);
  }
  if (name == "replace") {
    if (args.size() < 2) type_error("replace needs the old and the new text");
    return replace_all(v.str(), args[0].str(), args[1].str(), args.size() > 2 ? to_int(args[2]) : -1);
  }
  if (name == "escape" || name == "e" || name == "forceescape") return html_escape(v.str());
  if (name == "safe") return v;
  if (name == "tojson") return to_json(v, int(to_int(arg(args, kwargs, 0, "indent", 0))), 0);
  if (name == "items") {
    if (!v.is_dict()) type_error("items needs a dict, not " + an(v));
    return items_of(v);
  }
  if (name == "dictsort") {
    if (!v.is_dict()) type_error("dictsort needs a dict, not " + an(v));
    const bool by_value = arg(args, kwargs, 1, "by", "key").str() == "value";
    const bool reverse = arg(args, kwargs, 2, "reverse", false).truthy();
    const bool cs = arg(args, kwargs, 0, "case_sensitive", false).truthy();
    JinjaList items = items_of(v).list();
    std::stable_sort(items.begin(), items.end(), [&](const JinjaValue& a, const JinjaValue& b) {
      return less_than(a.list()[by_value], b.list()[by_value], cs);
    });
    if (reverse) std::reverse(items.begin(), items.end());
    return JinjaValue(std::move(items));
  }
  if (name == "sort") {
    const bool reverse = arg(args, kwargs, 0, "reverse", false).truthy();
    const bool cs = arg(args, kwargs, 1, "case_sensitive", false).truthy();
    const JinjaValue attribute = arg(args, kwargs, 2, "attribute");
    JinjaList items = iterate(v);
    std::stable_sort(items.begin(), items.end(), [&](const JinjaValue& a, const JinjaValue& b) {
      return less_than(attribute_of(*this, a, attribute), attribute_of(*this, b, attribute), cs);
    });
    if (reverse) std::reverse(items.begin(), items.end());
    return JinjaValue(std::move(items));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<std::string> chars = characters(v.as_string());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return out;
    }
    JinjaList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return JinjaValue(std::move(items));
  }
  if (name == "unique") {
    const JinjaValue attribute = arg(args, kwargs, 1, "attribute");
    JinjaList out, keys;
    for (const auto& x : iterate(v)) {
      JinjaValue k = attribute_of(*this, x, attribute);
      if (!arg(args, kwargs, 0, "case_sensitive", false).truthy() && k.is_string()) k = lower(k.as_string());
      if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
      keys.push_back(k);
      out.push_back(x);
    }
    return JinjaValue(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name.size() > 6;
    const bool keep = name[0] == 's';
    std::size_t next = 0;
    const JinjaValue attribute = by_attr ? (args.empty() ? type_error(name + " needs an attribute"), JinjaValue() : args[next++]) : JinjaValue();
    const std::string test = next < args.size() ? args[next++].str() : "";
    std::vector<JinjaValue> test_args(args.begin() + std::ptrdiff_t(std::min(next, args.size())), args.end());
    JinjaList out;
    for (const auto& x : iterate(v)) {
      const JinjaValue subject = by_attr ? attribute_of(*this, x, attribute) : x;
      const bool pass = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
      if (pass == keep) out.push_back(x);
    }
    return JinjaValue(std::move(out));
  }
  if (name == "map") {
    JinjaList out;
    if (const JinjaValue* attribute = kwarg(kwargs, "attribute")) {
      const JinjaValue* fallback = kwarg(kwargs, "default");
      for (const auto& x : iterate(v)) {
        JinjaValue y = attribute_of(*this, x, *attribute);
        out.push_back(y.is_undefined() && fallback ? *fallback : y);
      }
      return JinjaValue(std::move(out));
    }
    if (args.empty()) type_error("map needs a filter name or attribute=");
    const std::string filter = args[0].str();
    std::vector<JinjaValue> rest(args.begin() + 1, args.end());
    for (const auto& x : iterate(v)) {
      std::vector<JinjaValue> a = rest;
      Kwargs k;
      out.push_back(apply_filter(filter, x, a, k));
    }
    return JinjaValue(std::move(out));
  }
  if (name == "attr") return get_attr(v, arg(args, kwargs, 0, "name").str());
  if (name == "format") {
    if (args.size() == 1) return printf_format(v.str(), args[0]);
    return printf_format(v.str(), JinjaValue(args, true));
  }
  if (name == "indent") {
    const JinjaValue width = arg(args, kwargs, 0, "width", 4);
    const bool first = arg(args, kwargs, 1, "first", false).truthy();
    const bool blank = arg(args, kwargs, 2, "blank", false).truthy();
    const std::string pad = width.is_string() ? width.as_string() : std::string(std::size_t(std::max<std::int64_t>(0, std::min<std::int64_t>(to_int(width), 1000))), ' ');
    std::vector<std::string> lines = split(v.str(), JinjaValue("\n"), -1);
    std::string out;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n";
      const bool is_blank = strip(lines[i], nullptr, true, true).empty();
      if ((i > 0 || first) && (blank || !is_blank)) out += pad;
      out += lines[i];
      if (out.size() > kMaxString) throw JinjaError("string too long");
    }
    return out;
  }
  if (name == "wordcount") return std::int64_t(split(v.str(), JinjaValue(), -1).size());
  if (name == "center") {
    const std::int64_t width = std::min<std::int64_t>(to_int(arg(args, kwargs, 0, "width", 80)), 100000);
    const std::string s = v.str();
    if (width <= std::int64_t(s.size())) return s;
    const std::size_t total = std::size_t(width) - s.size(), left = total / 2 + (total % 2 && s.size() % 2);
    return std::string(left, ' ') + s + std::string(total - left, ' ');
  }
  if (name == "batch" || name == "slice") {
    const std::int64_t n = to_int(arg(args, kwargs, 0, name == "batch" ? "linecount" : "slices", 1));
    if (n <= 0) type_error(name + " needs a positive count");
    JinjaList items = iterate(v), out;
    if (name == "batch") {
      for (std::size_t i = 0; i < items.size(); i += std::size_t(n))
        out.push_back(JinjaValue(JinjaList(items.begin() + std::ptrdiff_t(i),
                                           items.begin() + std::ptrdiff_t(std::min(items.size(), i + std::size_t(n))))));
    } else {
      const std::size_t per = items.size() / std::size_t(n), extra = items.size() % std::size_t(n);
      std::size_t at = 0;
      for (std::size_t k = 0; k < std::size_t(n); ++k) {
        const std::size_t len = per + (k < extra);
        out.push_back(JinjaValue(JinjaList(items.begin() + std::ptrdiff_t(at), items.begin() + std::ptrdiff_t(at + len))));
        at += len;
      }
    }
    return JinjaValue(std::move(out));
  }
  static const std::vector<std::string> kFilters = {
      "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
      "first", "float", "forceescape", "format", "indent", "int", "items", "join", "last", "length", "list",
      "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
      "selectattr", "slice", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount"};
  type_error("unknown filter '" + name + "'" + did_you_mean(name, kFilters));
}

JinjaValue Evaluator::eval_test(const Expr& e) {
  JinjaValue v = eval(*e.children[0]);
  std::vector<JinjaValue> args;
  for (std::size_t i = 1; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
  for (const auto& [k, x] : e.kwargs) args.push_back(eval(*x));
  return apply_test(e.name, v, args) != e.negated;
}

bool Evaluator::apply_test(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  defined(v);
  for (const auto& a : args) defined(a);
  auto other = [&]() -> const JinjaValue& {
    if (args.empty()) type_error("the test '" + name + "' needs an argument");
    return args[0];
  };
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "sequence") return v.is_sequence() || v.is_string() || v.is_dict();
  if (name == "iterable") return v.is_sequence() || v.is_string() || v.is_dict();
  if (name == "callable") return v.is_callable();
  if (name == "sameas") return v == other() && v.kind() == other().kind();
  if (name == "eq" || name == "equalto" || name == "==") return compare_op("==", v, other());
  if (name == "ne" || name == "!=") return compare_op("!=", v, other());
  if (name == "lt" || name == "lessthan" || name == "<") return compare_op("<", v, other());
  if (name == "le" || name == "<=") return compare_op("<=", v, other());
  if (name == "gt" || name == "greaterthan" || name == ">") return compare_op(">", v, other());
  if (name == "ge" || name == ">=") return compare_op(">=", v, other());
  if (name == "in") return contains(other(), v);
  if (name == "even" || name == "odd") {
    if (!is_integral(v)) type_error("the test '" + name + "' needs an integer");
    return (floor_mod(int_of(v), 2) == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    if (!is_integral(v) || !is_integral(other())) type_error("divisibleby needs integers");
    return floor_mod(int_of(v), int_of(other())) == 0;
  }
  if (name == "lower") return v.is_string() && v.as_string() == lower(v.as_string());
  if (name == "upper") return v.is_string() && v.as_string() == upper(v.as_string());
  if (name == "escaped") return false;
  static const std::vector<std::string> kTests = {
      "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false", "float",
      "ge", "greaterthan", "gt", "in", "integer", "iterable", "le", "lessthan", "lower", "lt", "mapping",
      "ne", "none", "number", "odd", "sameas", "sequence", "string", "true", "undefined", "upper"};
  type_error("unknown test '" + name + "'" + did_you_mean(name, kTests));
}

}  // namespace looptrace::jinja
