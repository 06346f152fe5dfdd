// Renders a parsed template: walks the statements, evaluates expressions with Python/Jinja
// semantics, and enforces the limits that keep a hostile template from running away.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tern/jinja/ast.h"
#include "tern/jinja/value.h"

namespace tern::jinja {

struct RenderLimits {
  size_t max_output_bytes = 64u << 20;       // also the largest string or list a template may build
  int max_call_depth = 100;                  // nested macro calls
  int64_t max_loop_iterations = 10'000'000;  // all loops of one render together
};

struct Scope {
  Object vars;
  std::shared_ptr<Scope> parent;
  const Value* lookup(const std::string& name) const;
};

class Renderer {
 public:
  Renderer(const RenderLimits& limits, const Object& context);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  std::string render(const Body& body);
  int line() const { return line_; }

  // Used by the builtins (filters, tests, methods).
  Value eval(const Expr& expr);
  Value call(const Value& callee, CallArgs& args);
  Value get_attribute(const Value& object, const std::string& name);
  Value get_item(const Value& object, const Value& key);
  // Throws when a string or list of this many bytes would pass the output limit.
  void check_size(size_t bytes) const;
  // Counts iterations of loops and of builtins that loop over templates' values.
  void count_iterations(size_t n);
  Value make_namespace(Object object);

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& stmt, std::string& out);
  void exec_for(const Stmt& stmt, std::string& out);
  void exec_set(const Stmt& stmt, std::string& out);
  Value make_macro(const Stmt& stmt);
  void assign(const std::vector<std::string>& targets, bool unpack, const Value& value);
  Value eval_call(const Expr& expr);
  Value eval_slice(const Expr& expr);
  void append(std::string& out, const std::string& text);

  RenderLimits limits_;
  std::shared_ptr<Scope> scope_;
  std::vector<std::shared_ptr<Object>> namespaces_;  // cleared at the end to break cycles
  int line_ = 0;
  int call_depth_ = 0;
  int64_t iterations_ = 0;
  size_t written_ = 0;
};

}  // namespace tern::jinja
