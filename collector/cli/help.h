// --help as people read it: descriptions wrapped to the terminal (COLUMNS, else the
// terminal's width, else 100 columns), flags without CLI11's "{false}" notation, and
// `ldscope help [COMMAND]`; the man page and shell completions from the same app.
#pragma once

#include <CLI/CLI.hpp>

namespace ldscope::cli {

// Puts the formatter on app and its subcommands (call after they are added).
void UseWrappingHelp(CLI::App& app);

// `help [COMMAND]`: a subcommand that prints app's help or COMMAND's. Returns it; when it
// was given, PrintHelpCommand prints and gives the exit status (2 for an unknown name).
CLI::App* AddHelp(CLI::App& app, std::string& command);
int PrintHelpCommand(CLI::App& app, const std::string& command);

// `generate man|bash|zsh [-o FILE]` (hidden): the man page, or bash's or zsh's
// completion, made from app's commands and options (generate.cc), which the build writes
// and the packages install. The man page does not depend on the terminal.
struct GenerateOptions {
  std::string what;
  std::string output;
};
CLI::App* AddGenerate(CLI::App& app, GenerateOptions& opt);
int Generate(const CLI::App& app, const GenerateOptions& opt);

}  // namespace ldscope::cli
