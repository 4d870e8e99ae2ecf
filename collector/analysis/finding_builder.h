// How every finding is made: the process it is about, the objects, symbols and events it
// rests on, then a headline, labelled details and fixes. `message`, the one paragraph
// for renderers that print one (JSON, OTLP), is composed from those when the finding is
// finished and never written by hand, so every finding's paragraph has one shape:
//   "<headline>. <label>: <text>. ... Fix: <text>. ..."
// A finding is text: its words are text::Shown (text::Show escapes the byte strings put
// into them); its data (objects, symbols, a fix's value, a script's path) are the bytes
// the model holds until Finish escapes them (render::EscapeByteFields), once: a finished
// finding taken up again holds text.
#pragma once

#include <string>

#include "analysis/context.h"
#include "ldscope_proto/report.pb.h"
#include "text/shown.h"

namespace ldscope::analysis {

class FindingBuilder {
 public:
  // A finding about one process: its pid, executable and stream filled in.
  FindingBuilder(const ProcessIndex& pi, v1::FindingKind kind, v1::Severity sev);
  // A finding about no single process of one trace (a fleet of hosts): the caller fills
  // in pid, exe and host through proto().
  FindingBuilder(v1::FindingKind kind, v1::Severity sev);
  // A finished finding taken up again (several folded into one): finishing it composes
  // its message anew.
  explicit FindingBuilder(v1::Finding finished);

  // The evidence: objects, missing symbols, events, and the fields above. Headline,
  // details and fixes go through the calls below; message is Finish's.
  v1::Finding& proto() { return f_; }
  const v1::Finding& proto() const { return f_; }

  // One line, under ~100 characters: what failed and why.
  void Headline(text::Shown text);
  // One labelled line of evidence ("bound to", "why", ...).
  void Detail(text::Shown label, text::Shown text);
  // One concrete fix: what it does, and its text for people.
  void Fix(v1::FixAction action, text::Shown text);
  // The same, with the change it makes as data (Fix.env, Fix.move): what `run
  // --try-fixes` applies, and tools read instead of the text. An environment change
  // names the variable's whole new value for the finding's process. value and move's file
  // are bytes.
  void Fix(v1::FixAction action, text::Shown text, const std::string& variable, const std::string& value);
  void Fix(v1::FixAction action, text::Shown text, v1::LineMove move);

  // The finding with its message composed.
  v1::Finding Finish() &&;
  // The same, appended to out's findings.
  void AddTo(v1::Report* out) &&;

 private:
  v1::Finding f_;
  bool data_shown_ = false;  // f_'s data escaped already (a finished finding)
};

}  // namespace ldscope::analysis
