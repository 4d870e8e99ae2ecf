// Writes one trace of an extreme shape (trace_shapes.h), for bench/bounds:
//   trace_shapes SHAPE FILE [COUNT [WIDTH]]
// SHAPE: strings, facts, forks, chain, sonames; COUNT and WIDTH default to the shape's
// size in bench/RESULTS.md.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bounds/trace_shapes.h"

int main(int argc, char** argv) {
  using namespace ldscope::testing;
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: trace_shapes SHAPE FILE [COUNT [WIDTH]]\n");
    return 2;
  }
  for (const auto& [name, shape] : Shapes()) {
    if (name != argv[1]) continue;
    ShapeSize size = FullSize(shape);
    if (argc > 3) size.count = std::strtoull(argv[3], nullptr, 10);
    if (argc > 4) size.width = std::strtoull(argv[4], nullptr, 10);
    if (!WriteTrace(argv[2], shape, size)) {
      std::fprintf(stderr, "trace_shapes: cannot write %s\n", argv[2]);
      return 1;
    }
    return 0;
  }
  std::fprintf(stderr, "trace_shapes: no shape %s\n", argv[1]);
  return 2;
}
