// Jinja's filters and tests, by name.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <cstdio>
#include <limits>

#include "jinja_internal.hpp"

namespace looptrace::jinja {

JinjaValue Evaluator::eval_filter(const Expr& e) {
  JinjaValue v = eval(*e.children[0]);
  std::vector<JinjaValue> args;
  for (std::size_t i = 1; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
  Kwargs kwargs;
  for (const auto& [k, x] : e.kwargs) kwargs.emplace_back(k, eval(*x));
  return apply_filter(e.name, v, args, kwargs);
}

namespace {

// Free functions, not Evaluator's private members, so that filters (map, select) can call them.
JinjaValue filter_value(Evaluator& ev, const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args,
                        Kwargs& kwargs);
bool test_value(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args);

// One use of a filter, `v | name(args)`.
struct FilterCall {
  Evaluator& ev;
  const std::string& name;
  const JinjaValue& v;
  std::vector<JinjaValue>& args;
  Kwargs& kwargs;
};

using Filter = JinjaValue (*)(const FilterCall&);

JinjaValue filter_default(const FilterCall& c) {
  const JinjaValue fallback = arg(c.args, c.kwargs, 0, "default_value", std::string());
  const bool boolean = arg(c.args, c.kwargs, 1, "boolean", false).truthy();
  if (c.v.is_undefined() || (boolean && !c.v.truthy())) return fallback;
  return c.v;
}

// The min and max filters: the item whose attribute (or itself) is least or greatest.
JinjaValue extreme_item(const FilterCall& c, bool min) {
  const JinjaValue attribute = arg(c.args, c.kwargs, 1, "attribute");
  const bool cs = arg(c.args, c.kwargs, 0, "case_sensitive", false).truthy();
  JinjaList items = c.ev.iterate(c.v);
  if (items.empty()) return JinjaUndefined{c.name, c.name + " of an empty sequence"};
  JinjaValue best = items[0], best_key = attribute_of(c.ev, items[0], attribute);
  for (std::size_t i = 1; i < items.size(); ++i) {
    JinjaValue k = attribute_of(c.ev, items[i], attribute);
    if (min ? less_than(k, best_key, cs) : less_than(best_key, k, cs)) {
      best = items[i];
      best_key = k;
    }
  }
  return best;
}

JinjaValue filter_min(const FilterCall& c) { return extreme_item(c, true); }
JinjaValue filter_max(const FilterCall& c) { return extreme_item(c, false); }

JinjaValue filter_sum(const FilterCall& c) {
  const JinjaValue attribute = arg(c.args, c.kwargs, 0, "attribute");
  JinjaValue total = arg(c.args, c.kwargs, 1, "start", 0);
  for (const auto& x : c.ev.iterate(c.v)) total = binary_op(BinaryOp::Add, total, attribute_of(c.ev, x, attribute));
  return total;
}

JinjaValue filter_length(const FilterCall& c) {
  if (c.v.is_string()) return std::int64_t(characters(c.v.as_string()).size());
  if (c.v.is_sequence()) return std::int64_t(c.v.list().size());
  if (c.v.is_dict()) return std::int64_t(c.v.dict().size());
  type_error(an(c.v) + " has no length");
}

JinjaValue no_item(const FilterCall& c) {
  return JinjaUndefined{c.name, "the sequence is empty, so it has no " + c.name + " item"};
}

JinjaValue filter_first(const FilterCall& c) {
  JinjaList items = c.ev.iterate(c.v);
  return items.empty() ? no_item(c) : items.front();
}

JinjaValue filter_last(const FilterCall& c) {
  JinjaList items = c.ev.iterate(c.v);
  return items.empty() ? no_item(c) : items.back();
}

JinjaValue filter_int(const FilterCall& c) {
  const JinjaValue fallback = arg(c.args, c.kwargs, 0, "default", 0);
  const int base = int(to_int(arg(c.args, c.kwargs, 1, "base", 10)));
  try {
    if (c.v.is_string()) {
      try {
        return to_int(c.v, base);
      } catch (const JinjaError&) {
        return to_int(JinjaValue(to_float(c.v)));
      }
    }
    return to_int(c.v);
  } catch (const JinjaError&) {
    return fallback;
  }
}

JinjaValue filter_float(const FilterCall& c) {
  try {
    return to_float(c.v);
  } catch (const JinjaError&) {
    return arg(c.args, c.kwargs, 0, "default", 0.0);
  }
}

JinjaValue filter_string(const FilterCall& c) { return c.v.str(); }

JinjaValue filter_abs(const FilterCall& c) { return builtin_abs_of(c.ev, c.v); }

JinjaValue filter_round(const FilterCall& c) {
  const std::int64_t precision = to_int(arg(c.args, c.kwargs, 0, "precision", 0));
  const std::string method = arg(c.args, c.kwargs, 1, "method", "common").str();
  const double scale = std::pow(10.0, double(precision));
  const double x = to_float(c.v) * scale;
  double r;
  if (method == "common") r = std::nearbyint(x);  // Python's round(): half to even
  else if (method == "ceil") r = std::ceil(x);
  else if (method == "floor") r = std::floor(x);
  else type_error("round: method must be 'common', 'ceil' or 'floor'");
  return r / scale;
}

JinjaValue filter_list(const FilterCall& c) { return JinjaValue(c.ev.iterate(c.v)); }

JinjaValue filter_join(const FilterCall& c) {
  const std::string sep = arg(c.args, c.kwargs, 0, "d", std::string()).str();
  const JinjaValue attribute = arg(c.args, c.kwargs, 1, "attribute");
  std::string out;
  bool first = true;
  for (const auto& x : c.ev.iterate(c.v)) {
    out += (first ? "" : sep) + attribute_of(c.ev, x, attribute).str();
    first = false;
    if (out.size() > kMaxString) throw JinjaError("string too long");
  }
  return out;
}

JinjaValue filter_upper(const FilterCall& c) { return upper(c.v.str()); }
JinjaValue filter_lower(const FilterCall& c) { return lower(c.v.str()); }
JinjaValue filter_capitalize(const FilterCall& c) { return capitalize(c.v.str()); }
JinjaValue filter_title(const FilterCall& c) { return title_case(c.v.str()); }

JinjaValue filter_trim(const FilterCall& c) {
  const JinjaValue chars = arg(c.args, c.kwargs, 0, "chars");
  return strip(c.v.str(), chars.is_string() ? &chars.as_string() : nullptr, true, true);
}

JinjaValue filter_replace(const FilterCall& c) {
  const std::vector<JinjaValue>& args = c.args;
  if (args.size() < 2) type_error("replace needs the old and the new text");
  return replace_all(c.v.str(), args[0].str(), args[1].str(), args.size() > 2 ? to_int(args[2]) : -1);
}

JinjaValue filter_escape(const FilterCall& c) { return html_escape(c.v.str()); }
JinjaValue filter_safe(const FilterCall& c) { return c.v; }

JinjaValue filter_tojson(const FilterCall& c) {
  return to_json(c.v, int(to_int(arg(c.args, c.kwargs, 0, "indent", 0))), 0);
}

JinjaValue filter_items(const FilterCall& c) {
  if (!c.v.is_dict()) type_error("items needs a dict, not " + an(c.v));
  return items_of(c.v);
}

JinjaValue filter_dictsort(const FilterCall& c) {
  if (!c.v.is_dict()) type_error("dictsort needs a dict, not " + an(c.v));
  const bool by_value = arg(c.args, c.kwargs, 1, "by", "key").str() == "value";
  const bool reverse = arg(c.args, c.kwargs, 2, "reverse", false).truthy();
  const bool cs = arg(c.args, c.kwargs, 0, "case_sensitive", false).truthy();
  JinjaList items = items_of(c.v).list();
  std::stable_sort(items.begin(), items.end(), [&](const JinjaValue& a, const JinjaValue& b) {
    return less_than(a.list()[by_value], b.list()[by_value], cs);
  });
  if (reverse) std::reverse(items.begin(), items.end());
  return JinjaValue(std::move(items));
}

JinjaValue filter_sort(const FilterCall& c) {
  const bool reverse = arg(c.args, c.kwargs, 0, "reverse", false).truthy();
  const bool cs = arg(c.args, c.kwargs, 1, "case_sensitive", false).truthy();
  const JinjaValue attribute = arg(c.args, c.kwargs, 2, "attribute");
  JinjaList items = c.ev.iterate(c.v);
  std::stable_sort(items.begin(), items.end(), [&](const JinjaValue& a, const JinjaValue& b) {
    return less_than(attribute_of(c.ev, a, attribute), attribute_of(c.ev, b, attribute), cs);
  });
  if (reverse) std::reverse(items.begin(), items.end());
  return JinjaValue(std::move(items));
}

JinjaValue filter_reverse(const FilterCall& c) {
  if (c.v.is_string()) {
    std::vector<std::string> chars = characters(c.v.as_string());
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return out;
  }
  JinjaList items = c.ev.iterate(c.v);
  std::reverse(items.begin(), items.end());
  return JinjaValue(std::move(items));
}

JinjaValue filter_unique(const FilterCall& c) {
  const JinjaValue attribute = arg(c.args, c.kwargs, 1, "attribute");
  JinjaList out, keys;
  for (const auto& x : c.ev.iterate(c.v)) {
    JinjaValue k = attribute_of(c.ev, x, attribute);
    if (!arg(c.args, c.kwargs, 0, "case_sensitive", false).truthy() && k.is_string()) k = lower(k.as_string());
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
    keys.push_back(k);
    out.push_back(x);
  }
  return JinjaValue(std::move(out));
}

// select, reject, selectattr, rejectattr: the items whose test (or truth) is `keep`.
JinjaValue selected(const FilterCall& c, bool by_attr, bool keep) {
  const std::vector<JinjaValue>& args = c.args;
  std::size_t next = 0;
  JinjaValue attribute;
  if (by_attr) {
    if (args.empty()) type_error(c.name + " needs an attribute");
    attribute = args[next++];
  }
  const std::string test = next < args.size() ? args[next++].str() : "";
  std::vector<JinjaValue> test_args(args.begin() + std::ptrdiff_t(std::min(next, args.size())), args.end());
  JinjaList out;
  for (const auto& x : c.ev.iterate(c.v)) {
    const JinjaValue subject = by_attr ? attribute_of(c.ev, x, attribute) : x;
    const bool pass = test.empty() ? subject.truthy() : test_value(test, subject, test_args);
    if (pass == keep) out.push_back(x);
  }
  return JinjaValue(std::move(out));
}

JinjaValue filter_select(const FilterCall& c) { return selected(c, false, true); }
JinjaValue filter_reject(const FilterCall& c) { return selected(c, false, false); }
JinjaValue filter_selectattr(const FilterCall& c) { return selected(c, true, true); }
JinjaValue filter_rejectattr(const FilterCall& c) { return selected(c, true, false); }

JinjaValue filter_map(const FilterCall& c) {
  JinjaList out;
  if (const JinjaValue* attribute = kwarg(c.kwargs, "attribute")) {
    const JinjaValue* fallback = kwarg(c.kwargs, "default");
    for (const auto& x : c.ev.iterate(c.v)) {
      JinjaValue y = attribute_of(c.ev, x, *attribute);
      out.push_back(y.is_undefined() && fallback ? *fallback : y);
    }
    return JinjaValue(std::move(out));
  }
  if (c.args.empty()) type_error("map needs a filter name or attribute=");
  const std::string filter = c.args[0].str();
  std::vector<JinjaValue> rest(c.args.begin() + 1, c.args.end());
  for (const auto& x : c.ev.iterate(c.v)) {
    std::vector<JinjaValue> a = rest;
    Kwargs k;
    out.push_back(filter_value(c.ev, filter, x, a, k));
  }
  return JinjaValue(std::move(out));
}

JinjaValue filter_attr(const FilterCall& c) { return c.ev.get_attr(c.v, arg(c.args, c.kwargs, 0, "name").str()); }

JinjaValue filter_format(const FilterCall& c) {
  if (c.args.size() == 1) return printf_format(c.v.str(), c.args[0]);
  return printf_format(c.v.str(), JinjaValue(c.args, true));
}

JinjaValue filter_indent(const FilterCall& c) {
  const JinjaValue width = arg(c.args, c.kwargs, 0, "width", 4);
  const bool first = arg(c.args, c.kwargs, 1, "first", false).truthy();
  const bool blank = arg(c.args, c.kwargs, 2, "blank", false).truthy();
  const std::string pad = width.is_string() ? width.as_string() : std::string(std::size_t(std::max<std::int64_t>(0, std::min<std::int64_t>(to_int(width), 1000))), ' ');
  std::vector<std::string> lines = split(c.v.str(), JinjaValue("\n"), -1);
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

JinjaValue filter_wordcount(const FilterCall& c) { return std::int64_t(split(c.v.str(), JinjaValue(), -1).size()); }

JinjaValue filter_center(const FilterCall& c) {
  const std::int64_t width = std::min<std::int64_t>(to_int(arg(c.args, c.kwargs, 0, "width", 80)), 100000);
  const std::string s = c.v.str();
  if (width <= std::int64_t(s.size())) return s;
  const std::size_t total = std::size_t(width) - s.size(), left = total / 2 + (total % 2 && s.size() % 2);
  return std::string(left, ' ') + s + std::string(total - left, ' ');
}

// The count of batch (`linecount`) and slice (`slices`).
std::size_t positive_count(const FilterCall& c, std::string_view keyword) {
  const std::int64_t n = to_int(arg(c.args, c.kwargs, 0, keyword, 1));
  if (n <= 0) type_error(c.name + " needs a positive count");
  return std::size_t(n);
}

JinjaValue filter_batch(const FilterCall& c) {
  const std::size_t n = positive_count(c, "linecount");
  JinjaList items = c.ev.iterate(c.v), out;
  for (std::size_t i = 0; i < items.size(); i += n)
    out.push_back(JinjaValue(JinjaList(items.begin() + std::ptrdiff_t(i),
                                       items.begin() + std::ptrdiff_t(std::min(items.size(), i + n)))));
  return JinjaValue(std::move(out));
}

JinjaValue filter_slice(const FilterCall& c) {
  const std::size_t n = positive_count(c, "slices");
  if (n > kMaxItems) throw JinjaError("slice() into more than " + std::to_string(kMaxItems) + " slices");
  JinjaList items = c.ev.iterate(c.v), out;
  const std::size_t per = items.size() / n, extra = items.size() % n;
  std::size_t at = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t len = per + (k < extra);
    out.push_back(JinjaValue(JinjaList(items.begin() + std::ptrdiff_t(at), items.begin() + std::ptrdiff_t(at + len))));
    at += len;
  }
  return JinjaValue(std::move(out));
}

struct FilterEntry {
  std::string_view name;
  Filter fn;
  bool sees_undefined = false;  // default alone sees undefined values and arguments
};

constexpr FilterEntry kFilters[] = {
    {"abs", filter_abs}, {"attr", filter_attr}, {"batch", filter_batch}, {"capitalize", filter_capitalize},
    {"center", filter_center}, {"count", filter_length}, {"d", filter_default, true},
    {"default", filter_default, true}, {"dictsort", filter_dictsort}, {"e", filter_escape},
    {"escape", filter_escape}, {"first", filter_first}, {"float", filter_float}, {"forceescape", filter_escape},
    {"format", filter_format}, {"indent", filter_indent}, {"int", filter_int}, {"items", filter_items},
    {"join", filter_join}, {"last", filter_last}, {"length", filter_length}, {"list", filter_list},
    {"lower", filter_lower}, {"map", filter_map}, {"max", filter_max}, {"min", filter_min},
    {"reject", filter_reject}, {"rejectattr", filter_rejectattr}, {"replace", filter_replace},
    {"reverse", filter_reverse}, {"round", filter_round}, {"safe", filter_safe}, {"select", filter_select},
    {"selectattr", filter_selectattr}, {"slice", filter_slice}, {"sort", filter_sort}, {"string", filter_string},
    {"sum", filter_sum}, {"title", filter_title}, {"tojson", filter_tojson}, {"trim", filter_trim},
    {"unique", filter_unique}, {"upper", filter_upper}, {"wordcount", filter_wordcount},
};
static_assert(sorted_by_name(kFilters));

const std::vector<std::string>& filter_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const FilterEntry& f : kFilters) out.emplace_back(f.name);
    return out;
  }();
  return names;
}

JinjaValue filter_value(Evaluator& ev, const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args,
                        Kwargs& kwargs) {
  const FilterEntry* f = find_named(kFilters, name);
  if (!f || !f->sees_undefined) {
    defined(v);
    for (const auto& a : args) defined(a);
    for (const auto& [k, a] : kwargs) defined(a);
  }
  if (!f) type_error("unknown filter '" + name + "'" + did_you_mean(name, filter_names()));
  return f->fn(FilterCall{ev, name, v, args, kwargs});
}

}  // namespace

JinjaValue Evaluator::apply_filter(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args,
                                   Kwargs& kwargs) {
  return filter_value(*this, name, v, args, kwargs);
}

JinjaValue Evaluator::eval_test(const Expr& e) {
  JinjaValue v = eval(*e.children[0]);
  std::vector<JinjaValue> args;
  for (std::size_t i = 1; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
  for (const auto& [k, x] : e.kwargs) args.push_back(eval(*x));
  return apply_test(e.name, v, args) != e.negated;
}

bool Evaluator::apply_test(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args) {
  return test_value(name, v, args);
}

namespace {

// One test's call: the value tested and the test's arguments (all defined, unless the
// test takes undefined values).
struct TestCall {
  const std::string& name;
  const JinjaValue& v;
  std::vector<JinjaValue>& args;
  const JinjaValue& other() const {
    if (args.empty()) type_error("the test '" + name + "' needs an argument");
    return args[0];
  }
};

struct TestEntry {
  std::string_view name;
  bool (*fn)(const TestCall&);
  bool takes_undefined = false;
};

bool test_even_odd(const TestCall& c) {
  if (!is_integral(c.v)) type_error("the test '" + c.name + "' needs an integer");
  return (floor_mod(int_of(c.v), 2) == 0) == (c.name == "even");
}

bool test_divisibleby(const TestCall& c) {
  if (!is_integral(c.v) || !is_integral(c.other())) type_error("divisibleby needs integers");
  return floor_mod(int_of(c.v), int_of(c.other())) == 0;
}

bool test_iterable(const TestCall& c) { return c.v.is_sequence() || c.v.is_string() || c.v.is_dict(); }
bool test_eq(const TestCall& c) { return compare_op(CompareOp::Eq, c.v, c.other()); }
bool test_ne(const TestCall& c) { return compare_op(CompareOp::Ne, c.v, c.other()); }
bool test_lt(const TestCall& c) { return compare_op(CompareOp::Lt, c.v, c.other()); }
bool test_le(const TestCall& c) { return compare_op(CompareOp::Le, c.v, c.other()); }
bool test_gt(const TestCall& c) { return compare_op(CompareOp::Gt, c.v, c.other()); }
bool test_ge(const TestCall& c) { return compare_op(CompareOp::Ge, c.v, c.other()); }

// Jinja's tests, by name (sorted: a binary search), with the operators' spellings.
constexpr TestEntry kTests[] = {
    {"!=", test_ne},
    {"<", test_lt},
    {"<=", test_le},
    {"==", test_eq},
    {">", test_gt},
    {">=", test_ge},
    {"boolean", [](const TestCall& c) { return c.v.is_bool(); }},
    {"callable", [](const TestCall& c) { return c.v.is_callable(); }},
    {"defined", [](const TestCall& c) { return !c.v.is_undefined(); }, true},
    {"divisibleby", test_divisibleby},
    {"eq", test_eq},
    {"equalto", test_eq},
    {"escaped", [](const TestCall&) { return false; }},
    {"even", test_even_odd},
    {"false", [](const TestCall& c) { return c.v.is_bool() && !c.v.as_bool(); }},
    {"float", [](const TestCall& c) { return c.v.is_float(); }},
    {"ge", test_ge},
    {"greaterthan", test_gt},
    {"gt", test_gt},
    {"in", [](const TestCall& c) { return contains(c.other(), c.v); }},
    {"integer", [](const TestCall& c) { return c.v.is_int(); }},
    {"iterable", test_iterable},
    {"le", test_le},
    {"lessthan", test_lt},
    {"lower", [](const TestCall& c) { return c.v.is_string() && c.v.as_string() == lower(c.v.as_string()); }},
    {"lt", test_lt},
    {"mapping", [](const TestCall& c) { return c.v.is_dict(); }},
    {"ne", test_ne},
    {"none", [](const TestCall& c) { return c.v.is_none(); }},
    {"number", [](const TestCall& c) { return c.v.is_number(); }},
    {"odd", test_even_odd},
    {"sameas", [](const TestCall& c) { return c.v == c.other() && c.v.kind() == c.other().kind(); }},
    {"sequence", test_iterable},
    {"string", [](const TestCall& c) { return c.v.is_string(); }},
    {"true", [](const TestCall& c) { return c.v.is_bool() && c.v.as_bool(); }},
    {"undefined", [](const TestCall& c) { return c.v.is_undefined(); }, true},
    {"upper", [](const TestCall& c) { return c.v.is_string() && c.v.as_string() == upper(c.v.as_string()); }},
};
static_assert(sorted_by_name(kTests));

bool test_value(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args) {
  const TestEntry* test = find_named(kTests, name);
  if (!test) {
    std::vector<std::string> names;
    for (const TestEntry& t : kTests)
      if (std::isalpha(static_cast<unsigned char>(t.name[0]))) names.emplace_back(t.name);
    type_error("unknown test '" + name + "'" + did_you_mean(name, names));
  }
  if (!test->takes_undefined) {
    defined(v);
    for (const auto& a : args) defined(a);
  }
  return test->fn(TestCall{name, v, args});
}

}  // namespace

}  // namespace looptrace::jinja
