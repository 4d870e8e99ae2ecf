// Input for long_functions_test: the constructs scripts/long-functions must not
// mistake for braces of a function (never compiled). Each function's expected length
// is in tests/golden/long_functions.txt.
#include <map>
#define BLOCK { {
#define LONG_MACRO(x) \
  do {            \
  } while (0)

namespace outer {
namespace {

constexpr long kBig = 4'000'000;  // a digit separator, not a character literal
int Separated() { return 1'000; }
const std::map<int, int> kTable = {{1, 2}, {3, 4}};
auto kLambda = [](int x) {
  return x + 1;
};

// A comment with a brace { that must not count.
int Strings() {
  const char* a = "}{";
  const char* b = R"x(a "raw" string }}} with )" inside)x";
  char c = '{', d = '}', e = '\'';
  /* a block comment }
     over two lines { */
  return a[0] + b[0] + c + d + e;
}

}  // namespace

enum class Kind : int { kA, kB };

template <typename T, class U>
T Templated(U u) {
  return T(u);
}

class Widget : public Base {
 public:
  Widget(int a, int b) : a_{a}, b_(b), c_{} {
    Init();
  }
  int a() const { return a_; }
  bool operator==(const Widget& o) const {
    return a_ == o.a_;
  }
  int operator()(int x) { return x; }
  auto Trailing() const -> std::map<int, int> {
    return {};
  }

 private:
  struct Inner {
    void Method() {
      auto l = [this] { return 1; };
    }
  };
  int a_{0};
  int b_ = 1;
  int c_{};
};

Widget::Widget(int a) : a_{a}, b_{a} {}

}  // namespace outer

extern "C" {
void CStyle(void) {
  int x[] = {1, 2, 3};
  if (x[0]) {
    x[1] = 2;
  }
}
}
