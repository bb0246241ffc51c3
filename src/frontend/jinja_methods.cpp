// Methods of dicts, lists, tuples and strings, by name.
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

// One call of a method of a dict, list, tuple or string: `self.name(args)`.
struct MethodCall {
  Evaluator& ev;
  const std::string& name;
  const JinjaValue& self;
  std::vector<JinjaValue>& args;
  Kwargs& kwargs;

  void expect(std::size_t lo, std::size_t hi) const { expect_args(name, args, lo, hi); }
};

using Method = JinjaValue (*)(const MethodCall&);

JinjaValue dict_items_method(const MethodCall& c) { return items_of(c.self); }

JinjaValue dict_keys(const MethodCall& c) {
  JinjaList out;
  for (const auto& [k, v] : c.self.dict()) out.push_back(k);
  return JinjaValue(std::move(out));
}

JinjaValue dict_values(const MethodCall& c) {
  JinjaList out;
  for (const auto& [k, v] : c.self.dict()) out.push_back(v);
  return JinjaValue(std::move(out));
}

JinjaValue dict_get(const MethodCall& c) {
  c.expect(1, 2);
  if (const JinjaValue* v = c.self.find(c.args[0])) return *v;
  return c.args.size() > 1 ? c.args[1] : JinjaValue();
}

JinjaValue dict_copy(const MethodCall& c) { return JinjaValue(JinjaDict(c.self.dict())); }

JinjaValue dict_update(const MethodCall& c) {
  JinjaDict& d = c.self.dict();
  JinjaValue other = c.args.empty() ? JinjaValue(JinjaDict{}) : c.args[0];
  JinjaDict incoming = other.is_dict() ? other.dict() : JinjaDict{};
  for (const auto& [k, v] : c.kwargs) incoming.emplace_back(k, v);
  for (const auto& [k, v] : incoming) {
    bool found = false;
    for (auto& [ok, ov] : d)
      if (ok == k) { ov = v; found = true; }
    if (!found) d.emplace_back(k, v);
  }
  return {};
}

JinjaValue dict_pop(const MethodCall& c) {
  c.expect(1, 2);
  JinjaDict& d = c.self.dict();
  for (auto it = d.begin(); it != d.end(); ++it)
    if (it->first == c.args[0]) {
      JinjaValue v = it->second;
      d.erase(it);
      return v;
    }
  if (c.args.size() > 1) return c.args[1];
  type_error("pop(): no key " + c.args[0].repr());
}

JinjaValue dict_setdefault(const MethodCall& c) {
  c.expect(1, 2);
  JinjaDict& d = c.self.dict();
  for (const auto& [k, v] : d)
    if (k == c.args[0]) return v;
  d.emplace_back(c.args[0], c.args.size() > 1 ? c.args[1] : JinjaValue());
  return d.back().second;
}

constexpr Named<Method> kDictMethods[] = {
    {"copy", dict_copy}, {"get", dict_get}, {"items", dict_items_method}, {"keys", dict_keys}, {"pop", dict_pop},
    {"setdefault", dict_setdefault}, {"update", dict_update}, {"values", dict_values},
};
static_assert(sorted_by_name(kDictMethods));

JinjaValue list_index(const MethodCall& c) {
  const JinjaList& l = c.self.list();
  for (std::size_t i = 0; i < l.size(); ++i)
    if (!c.args.empty() && l[i] == c.args[0]) return std::int64_t(i);
  type_error("index(): the item is not in the list");
}

JinjaValue list_count(const MethodCall& c) {
  c.expect(1, 1);
  const JinjaList& l = c.self.list();
  return std::int64_t(std::count(l.begin(), l.end(), c.args[0]));
}

// The list that append, extend and insert grow: a full one refuses before the arguments are checked.
JinjaList& growable(const MethodCall& c) {
  JinjaList& l = c.self.list();
  if (l.size() >= kMaxItems) throw JinjaError("list too long");
  return l;
}

JinjaValue list_append(const MethodCall& c) {
  JinjaList& l = growable(c);
  c.expect(1, 1);
  l.push_back(c.args[0]);
  return {};
}

JinjaValue list_extend(const MethodCall& c) {
  JinjaList& l = growable(c);
  c.expect(1, 1);
  for (auto& x : c.ev.iterate(c.args[0])) l.push_back(std::move(x));
  return {};
}

JinjaValue list_insert(const MethodCall& c) {
  JinjaList& l = growable(c);
  c.expect(2, 2);
  std::int64_t i = to_int(c.args[0]), n = std::int64_t(l.size());
  if (i < 0) i = std::max<std::int64_t>(0, i + n);
  l.insert(l.begin() + std::min(i, n), c.args[1]);
  return {};
}

JinjaValue list_pop(const MethodCall& c) {
  JinjaList& l = c.self.list();
  if (l.empty()) type_error("pop() from an empty list");
  std::int64_t i = c.args.empty() ? -1 : to_int(c.args[0]), n = std::int64_t(l.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) type_error("pop() index out of range");
  JinjaValue v = l[std::size_t(i)];
  l.erase(l.begin() + i);
  return v;
}

JinjaValue list_remove(const MethodCall& c) {
  JinjaList& l = c.self.list();
  for (auto it = l.begin(); it != l.end(); ++it)
    if (!c.args.empty() && *it == c.args[0]) {
      l.erase(it);
      return {};
    }
  type_error("remove(): the item is not in the list");
}

JinjaValue list_reverse(const MethodCall& c) {
  JinjaList& l = c.self.list();
  std::reverse(l.begin(), l.end());
  return {};
}

JinjaValue list_sort(const MethodCall& c) {
  JinjaList& l = c.self.list();
  std::stable_sort(l.begin(), l.end(), [](const JinjaValue& a, const JinjaValue& b) { return less_than(a, b); });
  if (const JinjaValue* r = kwarg(c.kwargs, "reverse"); r && r->truthy()) std::reverse(l.begin(), l.end());
  return {};
}

JinjaValue list_copy(const MethodCall& c) { return JinjaValue(JinjaList(c.self.list())); }

// Tuples share this table: get_attr offers them only index and count.
constexpr Named<Method> kListMethods[] = {
    {"append", list_append}, {"copy", list_copy}, {"count", list_count}, {"extend", list_extend},
    {"index", list_index}, {"insert", list_insert}, {"pop", list_pop}, {"remove", list_remove},
    {"reverse", list_reverse}, {"sort", list_sort},
};
static_assert(sorted_by_name(kListMethods));

const std::string& str_arg(const MethodCall& c, std::size_t i) {
  if (i >= c.args.size() || !c.args[i].is_string()) type_error(c.name + "() needs a string argument");
  return c.args[i].as_string();
}

JinjaValue str_upper(const MethodCall& c) { return upper(c.self.as_string()); }
JinjaValue str_lower(const MethodCall& c) { return lower(c.self.as_string()); }
JinjaValue str_title(const MethodCall& c) { return title_case(c.self.as_string()); }
JinjaValue str_capitalize(const MethodCall& c) { return capitalize(c.self.as_string()); }

JinjaValue stripped(const MethodCall& c, bool left, bool right) {
  const std::string* chars = !c.args.empty() && c.args[0].is_string() ? &c.args[0].as_string() : nullptr;
  return strip(c.self.as_string(), chars, left, right);
}

JinjaValue str_strip(const MethodCall& c) { return stripped(c, true, true); }
JinjaValue str_lstrip(const MethodCall& c) { return stripped(c, true, false); }
JinjaValue str_rstrip(const MethodCall& c) { return stripped(c, false, true); }

JinjaValue str_split(const MethodCall& c) {
  const JinjaValue sep = arg(c.args, c.kwargs, 0, "sep");
  const std::int64_t max_split = to_int(arg(c.args, c.kwargs, 1, "maxsplit", -1));
  return string_list(split(c.self.as_string(), sep, max_split));
}

JinjaValue str_rsplit(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  const JinjaValue sep = arg(c.args, c.kwargs, 0, "sep");
  const std::int64_t max_split = to_int(arg(c.args, c.kwargs, 1, "maxsplit", -1));
  if (max_split < 0) return string_list(split(s, sep, max_split));
  // Split from the right: split all, then join the leftmost ones back.
  std::vector<std::string> all = split(s, sep, -1);
  if (std::int64_t(all.size()) <= max_split + 1) return string_list(all);
  const std::string joiner = sep.is_none() ? " " : sep.as_string();
  std::string head = all[0];
  const std::size_t keep = all.size() - std::size_t(max_split);
  for (std::size_t i = 1; i < keep; ++i) head += joiner + all[i];
  std::vector<std::string> out{head};
  out.insert(out.end(), all.begin() + std::ptrdiff_t(keep), all.end());
  return string_list(out);
}

JinjaValue str_splitlines(const MethodCall& c) {
  return string_list(split(replace_all(c.self.as_string(), "\r\n", "\n", -1), JinjaValue("\n"), -1));
}

JinjaValue str_join(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  std::string out;
  bool first = true;
  for (const auto& x : c.ev.iterate(arg(c.args, c.kwargs, 0, "iterable"))) {
    if (!x.is_string()) type_error("join() needs strings, not " + an(x));
    out += (first ? "" : s) + x.as_string();
    first = false;
    if (out.size() > kMaxString) throw JinjaError("string too long");
  }
  return out;
}

JinjaValue str_startswith(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  const std::string& p = str_arg(c, 0);
  return p.size() <= s.size() && s.compare(0, p.size(), p) == 0;
}

JinjaValue str_endswith(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  const std::string& p = str_arg(c, 0);
  return p.size() <= s.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

JinjaValue str_replace(const MethodCall& c) {
  return replace_all(c.self.as_string(), str_arg(c, 0), str_arg(c, 1), c.args.size() > 2 ? to_int(c.args[2]) : -1);
}

JinjaValue str_find(const MethodCall& c) {
  const std::size_t hit = c.self.as_string().find(str_arg(c, 0));
  return hit == std::string::npos ? std::int64_t(-1) : std::int64_t(hit);
}

JinjaValue str_index(const MethodCall& c) {
  const std::size_t hit = c.self.as_string().find(str_arg(c, 0));
  if (hit == std::string::npos) type_error("index(): substring not found");
  return std::int64_t(hit);
}

JinjaValue str_count(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  const std::string& p = str_arg(c, 0);
  if (p.empty()) return std::int64_t(characters(s).size() + 1);
  std::int64_t n = 0;
  for (std::size_t pos = s.find(p); pos != std::string::npos; pos = s.find(p, pos + p.size())) ++n;
  return n;
}

// isdigit() and the like: a non-empty string of such characters.
bool all_chars(const MethodCall& c, int (*pred)(int)) {
  const std::string& s = c.self.as_string();
  return !s.empty() && std::all_of(s.begin(), s.end(), [pred](char ch) { return pred(static_cast<unsigned char>(ch)) != 0; });
}

JinjaValue str_isdigit(const MethodCall& c) { return all_chars(c, std::isdigit); }
JinjaValue str_isalpha(const MethodCall& c) { return all_chars(c, std::isalpha); }
JinjaValue str_isalnum(const MethodCall& c) { return all_chars(c, std::isalnum); }

JinjaValue str_isupper(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  return s != lower(s) && s == upper(s);
}

JinjaValue str_islower(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  return s != upper(s) && s == lower(s);
}

JinjaValue str_zfill(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  const std::int64_t width = to_int(arg(c.args, c.kwargs, 0, "width", 0));
  if (width <= std::int64_t(s.size())) return s;
  if (std::size_t(width) > kMaxString) throw JinjaError("string too long");
  const std::size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+');
  return s.substr(0, sign) + std::string(std::size_t(width) - s.size(), '0') + s.substr(sign);
}

JinjaValue str_format(const MethodCall& c) { return python_format(c.self.as_string(), c.args, c.kwargs); }

constexpr Named<Method> kStringMethods[] = {
    {"capitalize", str_capitalize}, {"count", str_count}, {"endswith", str_endswith}, {"find", str_find},
    {"format", str_format}, {"index", str_index}, {"isalnum", str_isalnum}, {"isalpha", str_isalpha},
    {"isdigit", str_isdigit}, {"islower", str_islower}, {"isupper", str_isupper}, {"join", str_join},
    {"lower", str_lower}, {"lstrip", str_lstrip}, {"replace", str_replace}, {"rsplit", str_rsplit},
    {"rstrip", str_rstrip}, {"split", str_split}, {"splitlines", str_splitlines}, {"startswith", str_startswith},
    {"strip", str_strip}, {"title", str_title}, {"upper", str_upper}, {"zfill", str_zfill},
};
static_assert(sorted_by_name(kStringMethods));

// The method `name` of a value of self's kind, or null.
Method find_method(const JinjaValue& self, std::string_view name) {
  const Named<Method>* m = self.is_dict()       ? find_named(kDictMethods, name)
                           : self.is_sequence() ? find_named(kListMethods, name)
                           : self.is_string()   ? find_named(kStringMethods, name)
                                                : nullptr;
  return m ? m->fn : nullptr;
}

}  // namespace

bool has_method(const JinjaValue& self, std::string_view name) { return find_method(self, name) != nullptr; }

JinjaValue Evaluator::call_method(const JinjaValue& self, const std::string& name, std::vector<JinjaValue>& args,
                                  Kwargs& kwargs) {
  if (const Method m = find_method(self, name)) return m(MethodCall{*this, name, self, args, kwargs});
  type_error(an(self) + " has no method '" + name + "'");
}

}  // namespace looptrace::jinja
