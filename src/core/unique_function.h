#pragma once

// UniqueFunction<R(Args...)>: a move-only std::function, so callbacks may own unique_ptrs
// (std::move_only_function is C++23). Not thread-safe; move it to the thread that calls it.

#include <memory>
#include <type_traits>
#include <utility>

namespace rampart {

template <typename Signature>
class UniqueFunction;

template <typename R, typename... Args>
class UniqueFunction<R(Args...)> {
 public:
  UniqueFunction() = default;
  template <typename F,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, UniqueFunction> &&
                                        std::is_invocable_r_v<R, F&, Args...>>>
  UniqueFunction(F&& f)  // NOLINT(google-explicit-constructor)
      : callable_(std::make_unique<Model<std::decay_t<F>>>(std::forward<F>(f))) {}

  explicit operator bool() const { return callable_ != nullptr; }
  // REQUIRES: *this holds a callable.
  R operator()(Args... args) { return callable_->Call(std::forward<Args>(args)...); }

 private:
  struct Concept {
    virtual ~Concept() = default;
    virtual R Call(Args... args) = 0;
  };
  template <typename F>
  struct Model final : Concept {
    explicit Model(F callable) : f(std::move(callable)) {}
    R Call(Args... args) override { return f(std::forward<Args>(args)...); }
    F f;
  };
  std::unique_ptr<Concept> callable_;
};

}  // namespace rampart
