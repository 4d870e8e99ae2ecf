// See finding_builder.h.
#include "analysis/finding_builder.h"

#include <utility>

#include "render/render.h"

namespace ldscope::analysis {

FindingBuilder::FindingBuilder(const ProcessIndex& pi, v1::FindingKind kind, v1::Severity sev)
    : FindingBuilder(kind, sev) {
  f_.set_pid(pi.p->pid());
  f_.set_exe(pi.p->exe());
  f_.set_stream(pi.p->stream());
}

FindingBuilder::FindingBuilder(v1::FindingKind kind, v1::Severity sev) {
  f_.set_kind(kind);
  f_.set_severity(sev);
}

FindingBuilder::FindingBuilder(v1::Finding finished) : f_(std::move(finished)), data_shown_(true) {
  f_.clear_message();
}

void FindingBuilder::Headline(text::Shown text) { f_.set_headline(std::move(text).str()); }

void FindingBuilder::Detail(text::Shown label, text::Shown text) {
  auto* d = f_.add_details();
  d->set_label(std::move(label).str());
  d->set_text(std::move(text).str());
}

void FindingBuilder::Fix(v1::FixAction action, text::Shown text) {
  auto* x = f_.add_fixes();
  x->set_action(action);
  x->set_text(std::move(text).str());
}

void FindingBuilder::Fix(v1::FixAction action, text::Shown text, const std::string& variable,
                         const std::string& value) {
  Fix(action, std::move(text));
  auto* env = f_.mutable_fixes(f_.fixes_size() - 1)->mutable_env();
  env->set_variable(variable);
  env->set_value(value);
}

void FindingBuilder::Fix(v1::FixAction action, text::Shown text, v1::LineMove move) {
  Fix(action, std::move(text));
  *f_.mutable_fixes(f_.fixes_size() - 1)->mutable_move() = std::move(move);
}

v1::Finding FindingBuilder::Finish() && {
  if (!data_shown_)
    render::EscapeByteFields(&f_, {"ldscope.v1.Finding.headline", "ldscope.v1.Detail", "ldscope.v1.Fix.text"});
  data_shown_ = true;
  std::string m = f_.headline() + ".";
  for (const auto& d : f_.details()) m += " " + d.label() + ": " + d.text() + ".";
  for (const auto& x : f_.fixes()) m += " Fix: " + x.text() + ".";
  f_.set_message(std::move(m));
  return std::move(f_);
}

void FindingBuilder::AddTo(v1::Report* out) && { *out->add_findings() = std::move(*this).Finish(); }

}  // namespace ldscope::analysis
