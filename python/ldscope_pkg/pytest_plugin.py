"""pytest --ldscope: the loader's side of failed imports, from a snapshot of the test process.

Registered through the wheel's pytest11 entry point. With --ldscope, a test that fails
with an ImportError or OSError whose message is a loader error (undefined symbol,
cannot open shared object file, a version not found, static TLS, wrong ELF class...)
gets an "ldscope" report section (shown by -rA), and its findings' headlines as the
"ldscope" property of its JUnit test case: the error, then `ldscope snapshot` of
the test process right after the failure. At the end of the session the process's own
report is printed. A snapshot sees what is loaded, not the load that failed: the
section says what was loaded when it failed (a copy of a library that a later load was
bound to, two copies of one), never why a search went where it did.
"""
import os
import re

import pytest

_LOADER_ERROR = re.compile(
    r"undefined symbol|cannot open shared object file|version `[^']*' not found|static TLS|"
    r"wrong ELF class|invalid ELF header|cannot enable executable stack|failed to map segment|"
    r"cannot allocate memory in static TLS block")


def pytest_addoption(parser):
    parser.getgroup("ldscope").addoption(
        "--ldscope", action="store_true", default=False,
        help="explain loader errors of failing tests with a snapshot of the test process (ldscope)")


def _loader_error(call):
    if call.excinfo is None or not call.excinfo.errisinstance((ImportError, OSError)):
        return None
    message = str(call.excinfo.value)
    return message if _LOADER_ERROR.search(message) else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not item.config.getoption("ldscope") or not report.failed:
        return
    error = _loader_error(call)
    if error is None:
        return
    from . import SnapshotError, snapshot
    lines = ["loader error: %s" % error]
    try:
        found = snapshot()
        lines.append("ldscope snapshot of this process (pid %d) right after the failure; the load that failed "
                     "left nothing behind, what was already loaded is below:" % os.getpid())
        lines.append(found.text.rstrip("\n"))
        headlines = ["%s[%s]: %s" % (f.severity, f.kind, f.headline) for f in found.findings]
    except SnapshotError as e:
        lines.append("ldscope could not read this process: %s" % e)
        headlines = []
    text = "\n".join(lines) + "\n"
    report.sections.append(("ldscope", text))
    item.user_properties.append(("ldscope", "; ".join(headlines) if headlines else "no finding"))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not config.getoption("ldscope"):
        return
    from . import SnapshotError, snapshot
    terminalreporter.write_sep("=", "ldscope: the test process at the end of the session")
    try:
        terminalreporter.write(snapshot().text)
    except SnapshotError as e:
        terminalreporter.write_line("ldscope could not read this process: %s" % e)
