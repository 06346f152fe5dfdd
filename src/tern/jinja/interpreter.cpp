// The tree-walking renderer: statements append to the output, expressions evaluate to Values.
#include "tern/jinja/interpreter.h"

#include "tern/jinja/builtins.h"
#include "tern/jinja/fault.h"
#include "tern/jinja/operators.h"
#include "tern/jinja/text.h"

namespace tern::jinja {

const Value* Scope::lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get())
    if (const Value* v = s->vars.find(name)) return v;
  return nullptr;
}

Renderer::Renderer(const RenderLimits& limits, const Object& context) : limits_(limits) {
  auto globals = std::make_shared<Scope>();
  globals->vars = builtin_globals();
  for (const auto& [k, v] : context.items) globals->vars.set(k, v);
  scope_ = std::make_shared<Scope>();
  scope_->parent = std::move(globals);
}

Renderer::~Renderer() {
  // A namespace may hold itself (`{% set ns.me = ns %}`); emptying them all frees the cycle.
  for (auto& ns : namespaces_) ns->items.clear();
}

Value Renderer::make_namespace(Object object) {
  Value v = Value::make_namespace(std::move(object));
  namespaces_.push_back(v.namespace_ptr());
  return v;
}

std::string Renderer::render(const Body& body) {
  std::string out;
  exec_body(body, out);
  return out;
}

void Renderer::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    fail("the template built a value of " + std::to_string(bytes) + " bytes, over the limit of " +
         std::to_string(limits_.max_output_bytes));
}

void Renderer::count_iterations(size_t n) {
  iterations_ += static_cast<int64_t>(n);
  if (iterations_ > limits_.max_loop_iterations)
    fail("the template ran more than " + std::to_string(limits_.max_loop_iterations) +
         " loop iterations");
}

void Renderer::append(std::string& out, const std::string& text) {
  written_ += text.size();
  if (written_ > limits_.max_output_bytes)
    fail("the template wrote more than " + std::to_string(limits_.max_output_bytes) + " bytes");
  out += text;
}

Renderer::Flow Renderer::exec_body(const Body& body, std::string& out) {
  for (const StmtPtr& stmt : body) {
    const Flow flow = exec(*stmt, out);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

// Renders `body` into a string with its own scope (block set, filter blocks, macros).
Renderer::Flow Renderer::exec(const Stmt& stmt, std::string& out) {
  line_ = stmt.line;
  switch (stmt.kind) {
    case StmtKind::Text:
      append(out, stmt.text);
      return Flow::Normal;
    case StmtKind::Output: {
      const Value v = eval(*stmt.expr);
      if (v.is_function()) fail("cannot print " + v.repr() + "; call it");
      if (v.is_namespace()) fail("cannot print a namespace");
      append(out, v.str());
      return Flow::Normal;
    }
    case StmtKind::If:
      for (size_t i = 0; i < stmt.conditions.size(); ++i) {
        line_ = stmt.conditions[i]->line;
        if (eval(*stmt.conditions[i]).truthy()) return exec_body(stmt.bodies[i], out);
      }
      return exec_body(stmt.else_body, out);
    case StmtKind::For:
      exec_for(stmt, out);
      return Flow::Normal;
    case StmtKind::Set:
      exec_set(stmt, out);
      return Flow::Normal;
    case StmtKind::Macro:
      scope_->vars.set(stmt.text, make_macro(stmt));
      return Flow::Normal;
    case StmtKind::Break:
      return Flow::Break;
    case StmtKind::Continue:
      return Flow::Continue;
    case StmtKind::With: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope_;
      for (size_t i = 0; i < stmt.targets.size(); ++i)
        inner->vars.set(stmt.targets[i], eval(*stmt.values[i]));
      std::swap(scope_, inner);
      Flow flow;
      try {
        flow = exec_body(stmt.body, out);
      } catch (...) {
        std::swap(scope_, inner);
        throw;
      }
      std::swap(scope_, inner);
      return flow;
    }
    case StmtKind::FilterBlock: {
      std::string captured;
      exec_body(stmt.body, captured);
      auto inner = std::make_shared<Scope>();
      inner->parent = scope_;
      inner->vars.set("<block>", Value(std::move(captured)));
      std::swap(scope_, inner);
      Value filtered;
      try {
        filtered = eval(*stmt.filter);
      } catch (...) {
        std::swap(scope_, inner);
        throw;
      }
      std::swap(scope_, inner);
      append(out, filtered.str());
      return Flow::Normal;
    }
    case StmtKind::Scope:
      return exec_body(stmt.body, out);
  }
  return Flow::Normal;
}

void Renderer::assign(const std::vector<std::string>& targets, bool unpack, const Value& value) {
  if (!unpack) {
    scope_->vars.set(targets[0], value);
    return;
  }
  const std::vector<Value> items = iterate(value);
  if (items.size() != targets.size())
    fail("cannot unpack " + std::to_string(items.size()) + " values into " +
         std::to_string(targets.size()) + " names");
  for (size_t i = 0; i < targets.size(); ++i) scope_->vars.set(targets[i], items[i]);
}

void Renderer::exec_for(const Stmt& stmt, std::string& out) {
  const Value iterable = eval(*stmt.expr);
  if (iterable.is_none() || iterable.is_number() || iterable.is_function() ||
      iterable.is_namespace())
    fail("'" + iterable.type_name() + "' object is not iterable");
  std::vector<Value> items = iterate(iterable);
  auto loop_scope = std::make_shared<Scope>();
  loop_scope->parent = scope_;
  std::swap(scope_, loop_scope);
  struct Restore {
    std::shared_ptr<Scope>& scope;
    std::shared_ptr<Scope>& saved;
    ~Restore() { std::swap(scope, saved); }
  } restore{scope_, loop_scope};

  if (stmt.filter) {
    // `for x in xs if cond`: the condition sees the item; loop.* counts only the kept items.
    std::vector<Value> kept;
    for (const Value& item : items) {
      count_iterations(1);
      assign(stmt.targets, stmt.unpack, item);
      if (eval(*stmt.filter).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_body(stmt.else_body, out);
    return;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    count_iterations(1);
    Object loop;
    loop.items.reserve(12);
    loop.items.emplace_back("index", Value(i + 1));
    loop.items.emplace_back("index0", Value(i));
    loop.items.emplace_back("revindex", Value(n - i));
    loop.items.emplace_back("revindex0", Value(n - i - 1));
    loop.items.emplace_back("first", Value(i == 0));
    loop.items.emplace_back("last", Value(i == n - 1));
    loop.items.emplace_back("length", Value(n));
    loop.items.emplace_back("depth", Value(1));
    loop.items.emplace_back("depth0", Value(0));
    loop.items.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)]
                                              : Value::undefined("there is no previous item"));
    loop.items.emplace_back("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)]
                                                  : Value::undefined("there is no next item"));
    loop.items.emplace_back(
        "cycle", Value::function("loop.cycle", [i](CallArgs& args, Renderer&) {
          if (args.positional.empty()) fail("loop.cycle needs at least one argument");
          return args.positional[static_cast<size_t>(i) % args.positional.size()];
        }));
    scope_->vars.set("loop", Value::make_namespace(std::move(loop)));
    assign(stmt.targets, stmt.unpack, items[static_cast<size_t>(i)]);
    if (exec_body(stmt.body, out) == Flow::Break) break;
  }
}

void Renderer::exec_set(const Stmt& stmt, std::string& out) {
  (void)out;
  Value value;
  if (stmt.expr) {
    value = eval(*stmt.expr);
  } else {
    std::string captured;
    exec_body(stmt.body, captured);
    value = Value(std::move(captured));
    if (stmt.filter) {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope_;
      inner->vars.set("<block>", value);
      std::swap(scope_, inner);
      try {
        value = eval(*stmt.filter);
      } catch (...) {
        std::swap(scope_, inner);
        throw;
      }
      std::swap(scope_, inner);
    }
  }
  if (!stmt.attribute.empty()) {
    const Value* target = scope_->lookup(stmt.text);
    if (!target || !target->is_namespace())
      fail("cannot set attribute '" + stmt.attribute + "' of '" + stmt.text +
           "': only namespace() objects take attribute assignment");
    target->namespace_object().set(stmt.attribute, std::move(value));
    return;
  }
  assign(stmt.targets, stmt.unpack, value);
}

Value Renderer::make_macro(const Stmt& stmt) {
  // The macro sees the scope it was defined in; a weak pointer, because that scope holds the
  // macro and a cycle would never be freed.
  std::weak_ptr<Scope> defined_in = scope_;
  const Stmt* def = &stmt;
  return Value::function(stmt.text, [defined_in, def](CallArgs& args, Renderer& r) -> Value {
    std::shared_ptr<Scope> parent = defined_in.lock();
    if (!parent)
      fail("macro '" + def->text + "' was called after the block it was defined in ended");
    if (args.positional.size() > def->params.size())
      fail("macro '" + def->text + "' takes " + std::to_string(def->params.size()) +
           " arguments, got " + std::to_string(args.positional.size()));
    if (++r.call_depth_ > r.limits_.max_call_depth) {
      --r.call_depth_;
      fail("macro calls nest deeper than " + std::to_string(r.limits_.max_call_depth));
    }
    auto scope = std::make_shared<Scope>();
    scope->parent = parent;
    std::swap(r.scope_, scope);
    const int saved_line = r.line_;
    std::string out;
    try {
      for (const auto& [key, value] : args.keyword) {
        bool known = false;
        for (const auto& p : def->params) known = known || p.first == key;
        if (!known) fail("macro '" + def->text + "' has no parameter '" + key + "'");
      }
      for (size_t i = 0; i < def->params.size(); ++i) {
        const auto& [name, default_value] = def->params[i];
        Value v;
        if (i < args.positional.size()) {
          v = args.positional[i];
        } else {
          bool found = false;
          for (const auto& [key, value] : args.keyword)
            if (key == name) {
              v = value;
              found = true;
            }
          if (!found)
            v = default_value ? r.eval(*default_value)
                              : Value::undefined("parameter '" + name + "' was not given");
        }
        r.scope_->vars.set(name, std::move(v));
      }
      r.exec_body(def->body, out);
    } catch (...) {
      std::swap(r.scope_, scope);
      --r.call_depth_;
      throw;
    }
    std::swap(r.scope_, scope);
    --r.call_depth_;
    r.line_ = saved_line;
    return Value(std::move(out));
  });
}

Value Renderer::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_function()) fail("'" + callee.type_name() + "' object is not callable");
  return callee.as_function().call(args, *this);
}

Value Renderer::get_attribute(const Value& object, const std::string& name) {
  switch (object.kind()) {
    case Value::Kind::Undefined:
      fail_undefined(object);
    case Value::Kind::Namespace: {
      if (const Value* v = object.namespace_object().find(name)) return *v;
      return Value::undefined("namespace has no attribute '" + name + "'");
    }
    case Value::Kind::Dict:
    case Value::Kind::String:
    case Value::Kind::List: {
      // Python attribute first (str.upper, dict.items), then the dict key.
      if (std::optional<Value> method = find_method(object, name)) return *method;
      if (object.is_dict())
        if (const Value* v = object.as_object().find(name)) return *v;
      return Value::undefined("'" + object.type_name() + " object' has no attribute '" + name +
                              "'");
    }
    default:
      return Value::undefined("'" + object.type_name() + " object' has no attribute '" + name +
                              "'");
  }
}

Value Renderer::get_item(const Value& object, const Value& key) {
  switch (object.kind()) {
    case Value::Kind::Undefined:
      fail_undefined(object);
    case Value::Kind::Dict:
      if (key.is_string()) {
        if (const Value* v = object.as_object().find(key.as_string())) return *v;
        if (std::optional<Value> method = find_method(object, key.as_string())) return *method;
      }
      return Value::undefined("'dict object' has no attribute " + key.repr());
    case Value::Kind::Namespace:
      if (key.is_string()) return get_attribute(object, key.as_string());
      return Value::undefined("namespace has no attribute " + key.repr());
    case Value::Kind::List:
    case Value::Kind::String: {
      if (key.is_string()) return get_attribute(object, key.as_string());
      if (!key.is_number() || key.is_float())
        return Value::undefined(object.type_name() + " indices must be integers, not " +
                                key.type_name());
      const int64_t n = length(object);
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n)
        return Value::undefined(object.type_name() + " index " + std::to_string(key.as_int()) +
                                " out of range");
      if (object.is_list()) return object.as_array().items[static_cast<size_t>(i)];
      const std::string& s = object.as_string();
      size_t pos = 0;
      for (int64_t k = 0; k < i; ++k) decode_utf8(s, pos);
      const size_t start = pos;
      decode_utf8(s, pos);
      return Value(s.substr(start, pos - start));
    }
    default:
      return Value::undefined("'" + object.type_name() + "' object is not subscriptable");
  }
}

Value Renderer::eval_slice(const Expr& expr) {
  const Value object = eval(*expr.args[0]);
  if (object.is_undefined()) fail_undefined(object);
  if (!object.is_list() && !object.is_string())
    fail("'" + object.type_name() + "' object is not subscriptable");
  auto bound = [&](size_t i) -> std::optional<int64_t> {
    if (!expr.args[i]) return std::nullopt;
    const Value v = eval(*expr.args[i]);
    if (v.is_none()) return std::nullopt;
    if (!v.is_number() || v.is_float())
      fail("slice indices must be integers or None, not " + v.type_name());
    return v.as_int();
  };
  const std::optional<int64_t> start = bound(1), stop = bound(2), step_opt = bound(3);
  const int64_t step = step_opt.value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  const int64_t n = length(object);
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0)
      x = std::max<int64_t>(x + n, step < 0 ? -1 : 0);
    else
      x = std::min<int64_t>(x, step < 0 ? n - 1 : n);
    return x;
  };
  const int64_t lo = clamp(start, step < 0 ? n - 1 : 0);
  const int64_t hi = clamp(stop, step < 0 ? -1 : n);
  std::vector<int64_t> picks;
  if (step > 0)
    for (int64_t i = lo; i < hi; i += step) picks.push_back(i);
  else
    for (int64_t i = lo; i > hi; i += step) picks.push_back(i);
  if (object.is_list()) {
    std::vector<Value> out;
    out.reserve(picks.size());
    for (int64_t i : picks) out.push_back(object.as_array().items[static_cast<size_t>(i)]);
    return Value::list(std::move(out), object.as_array().is_tuple);
  }
  const std::vector<char32_t> cps = to_code_points(object.as_string());
  std::string out;
  for (int64_t i : picks) append_utf8(cps[static_cast<size_t>(i)], out);
  return Value(std::move(out));
}

Value Renderer::eval_call(const Expr& expr) {
  const Value callee = eval(*expr.args[0]);
  CallArgs args;
  for (size_t i = 1; i < expr.args.size(); ++i) args.positional.push_back(eval(*expr.args[i]));
  for (const auto& [key, value] : expr.kwargs) args.keyword.emplace_back(key, eval(*value));
  const int saved = line_;
  Value result = call(callee, args);
  line_ = saved;
  return result;
}

Value Renderer::eval(const Expr& expr) {
  switch (expr.kind) {
    case ExprKind::Literal:
      return expr.literal;
    case ExprKind::Name: {
      if (const Value* v = scope_->lookup(expr.name)) return *v;
      return Value::undefined("'" + expr.name + "' is undefined");
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      items.reserve(expr.args.size());
      for (const ExprPtr& e : expr.args) items.push_back(eval(*e));
      return Value::list(std::move(items), expr.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: {
      Object object;
      for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        const Value key = eval(*expr.args[i]);
        if (!key.is_string())
          fail("dict keys must be strings in tern's templates, got " + key.type_name());
        object.set(key.as_string(), eval(*expr.args[i + 1]));
      }
      return Value::dict(std::move(object));
    }
    case ExprKind::Attribute:
      return get_attribute(eval(*expr.args[0]), expr.name);
    case ExprKind::Item:
      return get_item(eval(*expr.args[0]), eval(*expr.args[1]));
    case ExprKind::Slice:
      return eval_slice(expr);
    case ExprKind::Call:
      return eval_call(expr);
    case ExprKind::Filter:
    case ExprKind::Test: {
      const Value input = eval(*expr.args[0]);
      CallArgs args;
      for (size_t i = 1; i < expr.args.size(); ++i) args.positional.push_back(eval(*expr.args[i]));
      for (const auto& [key, value] : expr.kwargs) args.keyword.emplace_back(key, eval(*value));
      if (expr.kind == ExprKind::Filter) return apply_filter(*this, expr.name, input, args);
      return Value(apply_test(*this, expr.name, input, args));
    }
    case ExprKind::Negate:
      return negate(eval(*expr.args[0]));
    case ExprKind::Plus: {
      Value v = eval(*expr.args[0]);
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) fail("bad operand type for unary +: '" + v.type_name() + "'");
      return v.is_bool() ? Value(v.as_int()) : v;
    }
    case ExprKind::Not:
      return Value(!eval(*expr.args[0]).truthy());
    case ExprKind::And: {
      Value left = eval(*expr.args[0]);
      return left.truthy() ? eval(*expr.args[1]) : left;
    }
    case ExprKind::Or: {
      Value left = eval(*expr.args[0]);
      return left.truthy() ? left : eval(*expr.args[1]);
    }
    case ExprKind::Binary: {
      const Value a = eval(*expr.args[0]);
      const Value b = eval(*expr.args[1]);
      return binary_op(expr.name, a, b, limits_.max_output_bytes);
    }
    case ExprKind::Compare: {
      Value left = eval(*expr.args[0]);
      for (size_t i = 0; i < expr.ops.size(); ++i) {
        Value right = eval(*expr.args[i + 1]);
        if (!compare_op(expr.ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::Conditional: {
      if (eval(*expr.args[0]).truthy()) return eval(*expr.args[1]);
      if (expr.args[2]) return eval(*expr.args[2]);
      return Value::undefined("the conditional expression has no else branch");
    }
  }
  fail("unknown expression");
}

}  // namespace tern::jinja
