// --help as people read it: descriptions wrapped to the terminal (COLUMNS, else the
// terminal's width, else 100 columns), flags without CLI11's "{false}" notation, and
// `ldscope help [COMMAND]`.
#pragma once

#include <CLI/CLI.hpp>

namespace ldscope::cli {

// Puts the formatter on app and its subcommands (call after they are added).
void UseWrappingHelp(CLI::App& app);

// `help [COMMAND]`: a subcommand that prints app's help or COMMAND's. Returns it; when it
// was given, PrintHelpCommand prints and gives the exit status (2 for an unknown name).
CLI::App* AddHelp(CLI::App& app, std::string& command);
int PrintHelpCommand(CLI::App& app, const std::string& command);

}  // namespace ldscope::cli
