// The pass registry (analysis/registry.h) against the schema and the README: every
// finding kind is reported by one pass, and the README's finding table lists exactly
// the kinds the passes report, so a kind added without its pass or its row fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>

#include "analysis/registry.h"
#include "render/render.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

// The kinds of the README's finding table ("| kind | severity | what it means |"): the
// first cell of each row, in the README's order.
std::vector<std::string> ReadmeKinds() {
  std::istringstream in(testing::ReadFile(PROJECT_SOURCE "/README.md"));
  std::vector<std::string> kinds;
  std::string line;
  bool in_table = false;
  const std::regex row("^\\| `([a-z0-9-]+)` \\|");
  while (std::getline(in, line)) {
    if (line == "| kind | severity | what it means |") {
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("| ---", 0) == 0) continue;
    std::smatch m;
    if (!std::regex_search(line, m, row)) break;
    kinds.push_back(m[1]);
  }
  return kinds;
}

TEST(Registry, EveryKindHasOnePass) {
  const auto* e = v1::FindingKind_descriptor();
  for (int i = 0; i < e->value_count(); ++i) {
    const auto kind = static_cast<v1::FindingKind>(e->value(i)->number());
    if (kind == v1::FINDING_KIND_UNSPECIFIED) continue;
    std::vector<std::string> by;
    for (const analysis::RegisteredPass& p : analysis::Passes())
      if (std::find(p.kinds.begin(), p.kinds.end(), kind) != p.kinds.end()) by.push_back(p.name);
    EXPECT_EQ(by.size(), 1u) << e->value(i)->name() << " is reported by " << by.size() << " passes";
  }
  EXPECT_EQ(analysis::ReportedKinds().size(), static_cast<size_t>(e->value_count() - 1));
}

TEST(Registry, ReadmeTableListsExactlyTheReportedKinds) {
  std::vector<std::string> readme = ReadmeKinds(), reported;
  ASSERT_FALSE(readme.empty()) << "no finding table in README.md";
  for (v1::FindingKind k : analysis::ReportedKinds()) reported.push_back(render::FindingKindName(k));
  std::sort(readme.begin(), readme.end());
  std::sort(reported.begin(), reported.end());
  EXPECT_EQ(readme, reported) << "README.md's finding table against the pass registry";
}

}  // namespace
}  // namespace ldscope
