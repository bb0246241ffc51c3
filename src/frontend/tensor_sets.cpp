// AccelForge's tensor sets: the renames an Einsum gives its tensors (`input`, `output`,
// `weight`) and the set expressions that arch attributes are evaluated with, per Einsum,
// as AccelForge's Spec._spec_eval_expressions(einsum_name) does.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "front_end.hpp"

namespace looptrace::front_end {

// ---------------------------------------------------------------- reading renames

std::vector<TensorRename> read_rename_list(const Reader& in, const SpecNode& node, const std::string& what) {
  std::vector<TensorRename> out;
  if (node.is_null()) return out;
  if (node.is_map()) {  // {new_name: source}
    in.check_unique_keys(node, what);
    for (const auto& [k, v] : node.entries)
      out.push_back({in.name(*k, "a rename's name"), in.string(*v, "the source of rename '" + k->text + "'"),
                     std::nullopt, v->where});
    return out;
  }
  in.expect_list(node, what);
  for (const auto& item : node.items) {  // {name: N, source: S, expected_count: C}
    in.check_keys(*item, "a rename", {"name", "source"}, {"expected_count"});
    TensorRename r;
    r.name = in.name(*item->find("name"), "a rename's name");
    const SpecNode* source = item->find("source");
    if (!source) in.fail(*item, "rename '" + r.name + "' needs a 'source'");
    r.source = in.string(*source, "the source of rename '" + r.name + "'");
    r.where = source->where;
    if (const SpecNode* count = item->find("expected_count"); count && !count->is_null())
      r.expected_count = in.string(*count, "the expected_count of rename '" + r.name + "'");
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<TensorRename> read_default_renames(const Reader& in, const SpecNode& node) {
  if (node.is_null()) return {};
  in.check_keys(node, "renames", {"einsums"});
  const SpecNode* einsums = node.find("einsums");
  if (!einsums || einsums->is_null()) return {};
  in.expect_list(*einsums, "renames.einsums");
  std::vector<TensorRename> out;
  for (const auto& e : einsums->items) {
    in.check_keys(*e, "an Einsum's renames", {"name"}, {"tensor_accesses", "rank_variables"});
    // AccelForge's Einsums take the default's renames; renames listed under an Einsum's
    // own name are not read by its workload either (Einsum._eval_expressions).
    if (in.name(*e->find("name"), "the name of an Einsum's renames") != "default") continue;
    if (const SpecNode* t = e->find("tensor_accesses")) {
      std::vector<TensorRename> list = read_rename_list(in, *t, "renames of 'default'");
      out.insert(out.end(), list.begin(), list.end());
    }
  }
  return out;
}

// ---------------------------------------------------------------- evaluation

struct SetValue {
  bool is_set = false;
  double number = 0;
  bool integral = true;
  std::vector<std::string> set;  // sorted
  bool from_name = false;        // a symbol's set, which carries its bits_per_value
};

namespace {

using Value = SetValue;

Value number(double v, bool integral) { return Value{false, v, integral, {}, false}; }
Value tensors(std::vector<std::string> s) {
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return Value{true, 0, true, std::move(s), false};
}

class Parser {
 public:
  using Lookup = std::function<Value(const std::string&)>;
  Parser(const std::string& text, Lookup lookup, std::vector<std::string>& bits_of)
      : text_(text), lookup_(std::move(lookup)), bits_of_(bits_of) {}

  Value run() {
    Value v = expression();
    skip();
    if (pos_ < text_.size()) unsupported("unexpected '" + text_.substr(pos_, 1) + "'");
    return v;
  }

 private:
  [[noreturn]] void unsupported(const std::string& why) const { throw SetExpressionError(why, false); }
  [[noreturn]] static void accelforge_fails(const std::string& why) { throw SetExpressionError(why, true); }
  // Python evaluates one branch of `a if c else b` and of `and`/`or`: the other is
  // parsed with its errors of meaning (not of syntax) left unsaid.
  bool failing() const { return skipping_ == 0; }
  Value skipped(bool evaluate, Value (Parser::*part)()) {
    if (evaluate) return (this->*part)();
    ++skipping_;
    Value v = (this->*part)();
    --skipping_;
    return v;
  }

  void skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool word(const char* w) {  // a keyword, not the start of a longer name
    skip();
    const std::size_t n = std::char_traits<char>::length(w);
    if (text_.compare(pos_, n, w) != 0) return false;
    if (pos_ + n < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_ + n])) || text_[pos_ + n] == '_'))
      return false;
    pos_ += n;
    return true;
  }
  bool op(const char* o) {  // an operator, not the start of a longer one (`*` of `**`)
    skip();
    const std::size_t n = std::char_traits<char>::length(o);
    if (text_.compare(pos_, n, o) != 0) return false;
    const char next = pos_ + n < text_.size() ? text_[pos_ + n] : '\0';
    if ((n == 1 && (o[0] == '*' || o[0] == '/') && next == o[0]) || (n == 1 && (o[0] == '<' || o[0] == '>') && next == '='))
      return false;
    pos_ += n;
    return true;
  }
  void expect(const char* o) {
    if (!op(o)) unsupported(std::string("expected '") + o + "'");
  }
  void nest() {
    if (++depth_ > 100) unsupported("nested too deeply");
  }

  static bool truthy(const Value& v) { return v.is_set ? !v.set.empty() : v.number != 0; }
  double num(const Value& v, const char* op) const {
    if (v.is_set && failing()) accelforge_fails(std::string("'") + op + "' needs numbers, not a tensor set");
    return v.is_set ? 0 : v.number;
  }

  Value expression() {
    nest();
    const std::size_t start = pos_;
    skipped(false, &Parser::or_expr);  // `then`, after the condition
    if (!word("if")) {
      pos_ = start;
      Value v = or_expr();
      return --depth_, v;
    }
    const bool c = truthy(or_expr());
    if (!word("else")) unsupported("'if' without 'else'");
    Value otherwise = skipped(!c, &Parser::expression);
    if (c) {
      const std::size_t end = pos_;
      pos_ = start;
      otherwise = or_expr();
      pos_ = end;
    }
    --depth_;
    return otherwise;
  }
  Value or_expr() {
    Value v = and_expr();
    while (word("or")) {
      const bool done = truthy(v);
      Value r = skipped(!done, &Parser::and_expr);
      if (!done) v = r;
    }
    return v;
  }
  Value and_expr() {
    Value v = not_expr();
    while (word("and")) {
      const bool go = truthy(v);
      Value r = skipped(go, &Parser::not_expr);
      if (go) v = r;
    }
    return v;
  }
  Value not_expr() {
    if (!word("not")) return comparison();
    nest();
    const Value v = number(!truthy(not_expr()), true);
    --depth_;
    return v;
  }
  Value comparison() {
    Value a = bit_or();
    for (const char* o : {"==", "!=", "<=", ">=", "<", ">"})
      if (op(o)) {
        const Value b = bit_or();
        const std::string s = o;
        if (a.is_set || b.is_set) {
          if (s != "==" && s != "!=" && failing()) accelforge_fails("'" + s + "' compares numbers, not tensor sets");
          const bool eq = a.is_set == b.is_set && a.set == b.set;
          return number(s == "==" ? eq : !eq, true);
        }
        const double x = a.number, y = b.number;
        const bool r = s == "==" ? x == y : s == "!=" ? x != y : s == "<=" ? x <= y : s == ">=" ? x >= y
                     : s == "<" ? x < y : x > y;
        return number(r, true);
      }
    return a;
  }
  // Set operators on sets (AccelForge's InvertibleSet), bitwise ones on integers.
  Value set_op(char o, const Value& a, const Value& b) {
    if (a.is_set != b.is_set) {
      if (!failing()) return number(0, true);
      accelforge_fails(std::string("'") + o + "' between a tensor set and a number");
    }
    if (!a.is_set) {
      if (!a.integral || !b.integral) {
        if (!failing()) return number(0, true);
        accelforge_fails(std::string("'") + o + "' needs integers");
      }
      const auto x = std::int64_t(a.number), y = std::int64_t(b.number);
      return number(double(o == '|' ? (x | y) : o == '&' ? (x & y) : o == '^' ? (x ^ y) : x - y), true);
    }
    std::vector<std::string> r;
    if (o == '|') std::set_union(a.set.begin(), a.set.end(), b.set.begin(), b.set.end(), std::back_inserter(r));
    if (o == '&') std::set_intersection(a.set.begin(), a.set.end(), b.set.begin(), b.set.end(), std::back_inserter(r));
    if (o == '-') std::set_difference(a.set.begin(), a.set.end(), b.set.begin(), b.set.end(), std::back_inserter(r));
    if (o == '^')
      std::set_symmetric_difference(a.set.begin(), a.set.end(), b.set.begin(), b.set.end(), std::back_inserter(r));
    return tensors(std::move(r));
  }
  Value bit_or() {
    Value v = bit_xor();
    while (op("|")) v = set_op('|', v, bit_xor());
    return v;
  }
  Value bit_xor() {
    Value v = bit_and();
    while (op("^")) v = set_op('^', v, bit_and());
    return v;
  }
  Value bit_and() {
    Value v = sum();
    while (op("&")) v = set_op('&', v, sum());
    return v;
  }
  Value sum() {
    Value v = product();
    for (;;) {
      if (op("+")) {
        const Value r = product();
        v = number(num(v, "+") + num(r, "+"), v.integral && r.integral);
      } else if (op("-")) {
        const Value r = product();
        v = v.is_set ? set_op('-', v, r) : number(num(v, "-") - num(r, "-"), v.integral && r.integral);
      } else {
        return v;
      }
    }
  }
  Value product() {
    Value v = unary();
    for (;;) {
      if (op("*")) {
        const Value r = unary();
        v = number(num(v, "*") * num(r, "*"), v.integral && r.integral);
      } else if (op("//") || op("/") || op("%")) {
        const char o = text_[pos_ - 1] == '/' && text_[pos_ - 2] == '/' ? 'f' : text_[pos_ - 1];
        const Value r = unary();
        const double x = num(v, "/"), y = num(r, "/");
        if (y == 0 && failing()) accelforge_fails("division by zero");
        if (y == 0) return number(0, true);
        if (o == '/') v = number(x / y, false);
        else if (o == 'f') v = number(std::floor(x / y), v.integral && r.integral);
        else v = number(x - y * std::floor(x / y), v.integral && r.integral);
      } else {
        return v;
      }
    }
  }
  Value unary() {
    nest();
    Value v;
    if (op("~")) {
      v = unary();
      if (!v.is_set && failing()) accelforge_fails("'~' of a number: looptrace takes '~' as a set's complement");
      v = v.is_set ? set_op('-', lookup_("All"), v) : number(0, true);
    } else if (op("-")) {
      v = unary();
      v = number(-num(v, "-"), v.integral);
    } else if (op("+")) {
      v = unary();
      num(v, "+");
    } else {
      v = power();
    }
    --depth_;
    return v;
  }
  Value power() {
    Value v = postfix(primary());
    if (op("**")) {
      const Value r = unary();
      const double p = std::pow(num(v, "**"), num(r, "**"));
      v = number(p, v.integral && r.integral && r.number >= 0);
    }
    return v;
  }
  Value postfix(Value v) {
    for (;;) {
      if (op(".")) {
        skip();
        const std::string attr = name();
        if (attr != "bits_per_value") unsupported("attribute '" + attr + "' (looptrace reads bits_per_value)");
        v = bits_per_value(v);
      } else if (op("(")) {  // `Inputs()` is the set itself
        if (!v.is_set) unsupported("a call of a number");
        expect(")");
      } else {
        return v;
      }
    }
  }
  std::string name() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (start == pos_) unsupported("expected a name");
    return text_.substr(start, pos_ - start);
  }
  Value primary() {
    // A `then` is read twice (skipped, then evaluated): nested ones could take 2^depth.
    if (++steps_ > 100'000) unsupported("the expression is too long to evaluate");
    skip();
    if (pos_ >= text_.size()) unsupported("the expression ends early");
    const char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      Value v = expression();
      expect(")");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char* start = text_.c_str() + pos_;
      char* end = nullptr;
      const double d = std::strtod(start, &end);
      const std::string lexeme(start, std::size_t(end - start));
      pos_ += lexeme.size();
      return number(d, lexeme.find_first_of(".eE") == std::string::npos);
    }
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '_') unsupported(std::string("unexpected '") + c + "'");
    const std::string n = name();
    if (n == "True" || n == "False") return number(n == "True", true);
    if (n == "len") {
      expect("(");
      const Value v = expression();
      expect(")");
      if (!v.is_set && failing()) accelforge_fails("len() of a number");
      return number(double(v.set.size()), true);
    }
    skip();
    Value v = number(0, true);
    try {
      v = lookup_(n);
    } catch (const SetExpressionError&) {
      if (failing()) throw;
    }
    if (pos_ < text_.size() && text_[pos_] == '(' && !v.is_set && failing()) unsupported("function '" + n + "'");
    return v;
  }
  // AccelForge's InvertibleSet.bits_per_value: of a one-tensor symbol only.
  Value bits_per_value(const Value& v) {
    if (!failing()) return number(0, true);
    if (!v.is_set) accelforge_fails("bits_per_value of a number");
    if (v.set.size() != 1)
      accelforge_fails("Can not access bits_per_value for a set !=1 elements: {" + join(v.set) + "}");
    std::optional<std::int64_t> bits = v.from_name ? bits_(v.set.front()) : std::nullopt;
    if (!bits) accelforge_fails("Bits per value is not defined for set {" + v.set.front() + "}");
    bits_of_.push_back(v.set.front());
    return number(double(*bits), true);
  }

 public:
  std::function<std::optional<std::int64_t>(const std::string&)> bits_;

 private:
  const std::string& text_;
  Lookup lookup_;
  std::vector<std::string>& bits_of_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int skipping_ = 0;
  int steps_ = 0;
};

}  // namespace

EinsumSymbols::~EinsumSymbols() = default;

EinsumSymbols::EinsumSymbols(const Workload& w, const Einsum& e, NumberLookup numbers) : numbers_(std::move(numbers)) {
  std::vector<std::string> all, inputs, outputs, intermediates, shared;
  for (const TensorAccess& a : e.accesses) {
    all.push_back(a.tensor);
    (a.is_output ? outputs : inputs).push_back(a.tensor);
    bits_[a.tensor] = a.bits_per_value ? a.bits_per_value : w.bits_per_value_of(a.tensor);
    bool read = false, written = false;
    std::set<std::string> users;
    for (const Einsum& other : w.einsums)
      for (const TensorAccess& b : other.accesses)
        if (b.tensor == a.tensor) {
          (b.is_output ? written : read) = true;
          users.insert(other.name);
        }
    if (read && written) intermediates.push_back(a.tensor);
    if (users.size() > 1) shared.push_back(a.tensor);
  }
  for (const Einsum& other : w.einsums)  // another Einsum's tensor is empty here
    for (const TensorAccess& b : other.accesses) symbols_.emplace(b.tensor, Symbol{std::make_shared<Value>(tensors({})), {}});
  for (const std::string& t : all) symbols_[t] = Symbol{std::make_shared<Value>(tensors({t})), {}};
  auto set = [&](const char* n, std::vector<std::string> v) { symbols_[n] = Symbol{std::make_shared<Value>(tensors(std::move(v))), {}}; };
  set("All", all), set("Tensors", all), set("Nothing", {}), set("Inputs", inputs), set("Outputs", outputs);
  set("Intermediates", intermediates), set("Shared", shared), set("Persistent", {});
  // The Einsum's own renames, then the defaults it does not override, each seeing those
  // before it. One that fails is an error only where it is used.
  std::vector<const TensorRename*> renames;
  for (const TensorRename& r : e.renames) renames.push_back(&r);
  for (const TensorRename& r : w.default_renames)
    if (std::none_of(e.renames.begin(), e.renames.end(), [&](const TensorRename& o) { return o.name == r.name; }))
      renames.push_back(&r);
  for (const TensorRename* r : renames) {
    Symbol s;
    try {
      std::vector<std::string> ignored;
      auto value = std::make_shared<Value>(run(r->source, ignored));
      s.value = value;
      if (!value->is_set) throw SetExpressionError("'" + r->source + "' is not a tensor set", false);
      if (r->expected_count) {
        const Value n = run(*r->expected_count, ignored);
        if (n.is_set || double(value->set.size()) != n.number)
          throw SetExpressionError("Expected count is " + std::to_string(std::int64_t(n.number)) + ", but got " +
                                       std::to_string(value->set.size()) + ": {" + join(value->set) + "}",
                                   true);
      }
    } catch (const SetExpressionError& x) {
      s.value.reset();
      s.failure = "rename '" + r->name + "' ('" + r->source + "'): " + x.what();
      s.accelforge_error = x.accelforge_error;
    }
    symbols_[r->name] = std::move(s);
  }
}

SetValue EinsumSymbols::symbol(const std::string& name) const {
  auto it = symbols_.find(name);
  if (it != symbols_.end()) {
    if (!it->second.value) throw SetExpressionError(it->second.failure, it->second.accelforge_error);
    Value v = *it->second.value;
    v.from_name = true;
    return v;
  }
  std::optional<JinjaValue> n = numbers_(name);
  if (!n) throw SetExpressionError("name '" + name + "' is not defined", true);
  if (n->is_bool()) return number(n->as_bool(), true);
  if (n->is_int()) return number(double(n->as_int()), true);
  if (n->is_float()) return number(n->as_float(), false);
  throw SetExpressionError("'" + name + "' is " + n->type_name() + ", not a number or a tensor set", false);
}

Value EinsumSymbols::run(const std::string& text, std::vector<std::string>& bits_of) const {
  Parser p(text, [this](const std::string& n) { return symbol(n); }, bits_of);
  p.bits_ = [this](const std::string& t) -> std::optional<std::int64_t> {
    auto it = bits_.find(t);
    return it == bits_.end() ? std::nullopt : it->second;
  };
  return p.run();
}

EinsumSymbols::Number EinsumSymbols::evaluate_number(const std::string& text) const {
  Number out;
  const Value v = run(text, out.bits_of);
  if (v.is_set) throw SetExpressionError("'" + text + "' is a tensor set, not a number", true);
  out.value = v.number;
  return out;
}

}  // namespace looptrace::front_end
