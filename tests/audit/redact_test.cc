// The rule that keeps secret argument values out of traces (audit/redact.h), argument by
// argument, as the audit library applies it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redact.h"

namespace ldscope {
namespace {

// The arguments as they are recorded.
std::vector<std::string> Recorded(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  bool next = false;
  for (const auto& a : argv) {
    const redact::Verdict v = redact::Judge(a.data(), a.size());
    out.push_back(next ? redact::kRedacted : v.value ? a.substr(0, v.keep) + redact::kRedacted : a);
    next = v.next;
  }
  return out;
}

TEST(Redact, ValuesOfSecretNamesOnly) {
  EXPECT_EQ(Recorded({"prog", "--password=hunter2", "-passwd=x", "API_KEY=k", "--Api-Key", "v",
                      "--aws-secret-access-key=s", "--credentials-file", "/etc/c", "MyToken=t", "--apikey=a",
                      "--config=token.yaml", "--verbose", "token", "x=1"}),
            (std::vector<std::string>{"prog", "--password=<redacted>", "-passwd=<redacted>", "API_KEY=<redacted>",
                                      "--Api-Key", "<redacted>", "--aws-secret-access-key=<redacted>",
                                      "--credentials-file", "<redacted>", "MyToken=<redacted>", "--apikey=<redacted>",
                                      "--config=token.yaml", "--verbose", "token", "x=1"}));
}

TEST(Redact, CodeAndPathsAreNotNames) {
  // Not NAME=VALUE: the part before '=' holds other characters.
  EXPECT_EQ(Recorded({"python3", "-c", "os.environ['TOKEN']='x'", "/tmp/password=1", "a b_token=c"}),
            (std::vector<std::string>{"python3", "-c", "os.environ['TOKEN']='x'", "/tmp/password=1", "a b_token=c"}));
  // A trailing flag with nothing after it, and an empty value.
  EXPECT_EQ(Recorded({"p", "--token=", "--secret"}), (std::vector<std::string>{"p", "--token=<redacted>", "--secret"}));
}

}  // namespace
}  // namespace ldscope
