// Valid traces of extreme but legal shapes, written with the project's own trace writer
// and schema, for the reader's bounds (bounds_test, the fuzz_shapes target, bench/bounds):
// whatever their shape, reading a trace costs memory and time in proportion to its size
// (docs/ARCHITECTURE.md, "Bounds on reading a trace").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ldscope::testing {

enum class Shape {
  kStrings,  // one long search name and candidate directory, referred to by many searches
  kFacts,    // facts records declaring millions of symbols in small zlib streams
  kForks,    // many fork children of an image of many objects
  kChain,    // a chain of dlopened objects, each needing the previous few
  kSonames,  // many files of one SONAME, alive together
};

struct ShapeSize {
  uint64_t count = 0;  // searches, symbols per facts record, fork children, objects
  uint64_t width = 0;  // string bytes, facts records, objects of the forked image, chain's k
};

// The names of the shapes ("strings", ...), and the size each has in the bounds' table
// (bench/RESULTS.md): the sizes at which an unbounded reader needed gigabytes or minutes.
const std::vector<std::pair<std::string, Shape>>& Shapes();
ShapeSize FullSize(Shape s);

// The trace's bytes (a TraceHeader, then delimited events, as store::TraceWriter writes).
std::string MakeTrace(Shape s, const ShapeSize& size);
// Writes it to path with store::TraceWriter, its header naming host; false on failure.
bool WriteTrace(const std::string& path, Shape s, const ShapeSize& size, const std::string& host = "shapes");

}  // namespace ldscope::testing
