// Statements of a Python script, as an import-order fix moves them: a line inside a
// block (the body of a `try:`, an `if`, a `with`) cannot move alone, so the fix moves
// the whole statement that holds it, at the indentation of the line it goes above.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ldscope::analysis {

struct StatementMove {
  uint32_t first = 0, last = 0;  // the lines moved, 1-based, inclusive
  uint32_t above = 0;            // the first line of the statement they go above
  uint32_t above_last = 0;       // and its last
};

// The move that puts the load on line `late` above the one on line `early` (< late):
// at the lesser indentation of the two lines, the statement holding `late` goes above
// the statement holding `early`. False where no such move keeps the script valid: the
// two are in different blocks, one statement holds both, or either is a definition
// (`def`, `class`, a decorator: moving one reorders no call). Physical lines continued by brackets, a backslash or a
// triple-quoted string belong to the statement where they started.
bool MoveAbove(const std::vector<std::string>& lines, uint32_t late, uint32_t early, StatementMove* out);

}  // namespace ldscope::analysis
