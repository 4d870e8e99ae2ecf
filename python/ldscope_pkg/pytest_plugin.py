"""pytest --ldscope: the loader's side of failed imports, from a snapshot of the test process.

Registered through the wheel's pytest11 entry point. With --ldscope, a test that fails
with an ImportError or OSError whose message is a loader error (undefined symbol,
cannot open shared object file, a version not found, static TLS, wrong ELF class...)
gets an "ldscope" report section (shown by -rA), and its findings' headlines as the
"ldscope" property of its JUnit test case, the section as its system-out: the error, then
`ldscope snapshot` of the test process right after the failure. At the end of the
session the process's own report is printed; under pytest-xdist, one report on the
controller and its workers together (each worker writes a snapshot of itself when its
session ends). A snapshot sees what is loaded, not the load that failed: the section
says what was loaded when it failed (a copy of a library that a later load was bound to,
two copies of one), never why a search went where it did.
"""
import os
import re
import shutil
import subprocess
import tempfile

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


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    """The section also as the test case's system-out in --junitxml, after the JUnit
    plugin has opened the case (in the controller, for a report a worker sent)."""
    if report.when != "call" or _config is None:
        return
    text = "".join(content for name, content in report.sections if name == "ldscope")
    xml = _junit_writer(_config)
    if not text or xml is None:
        return
    import xml.etree.ElementTree as ET
    out = ET.Element("system-out")
    out.text = text
    xml.node_reporter(report).append(out)


def _junit_writer(config):
    """The JUnit plugin's writer, when --junitxml is given."""
    try:
        from _pytest.junitxml import xml_key
        return config.stash.get(xml_key, None)
    except (ImportError, AttributeError):
        return getattr(config, "_xml", None)


_config = None  # the session's config, with --ldscope


def pytest_configure(config):
    global _config
    if config.getoption("ldscope"):
        _config = config


def _snapshot_to(trace):
    """Writes a snapshot of this process to trace; the reason when it could not."""
    from . import _run_snapshot, binary
    done = _run_snapshot([binary(), "snapshot", "-q", "--no-report", "--no-facts", "-o", trace, str(os.getpid())], True)
    if done.returncode != 0 or not os.path.exists(trace):
        return done.stderr.decode("utf-8", "replace").strip() or "ldscope exited %d" % done.returncode
    return None


# pytest-xdist: the controller names a directory in each worker's input; each worker
# writes a snapshot of itself there when its session ends, and says in its output
# which pid it was and whether the snapshot was written; the controller adds its own
# and reports on all of them together (so that workers that loaded different files
# for one library are compared).
@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    config = node.config
    if not config.getoption("ldscope"):
        return
    if getattr(config, "_ldscope_traces", None) is None:
        config._ldscope_traces = tempfile.mkdtemp(prefix="ldscope-pytest-")
        config._ldscope_workers = {}
    node.workerinput["ldscope_traces"] = config._ldscope_traces


def pytest_sessionfinish(session):
    config = session.config
    traces = getattr(config, "workerinput", {}).get("ldscope_traces")
    if traces is None:
        return
    error = _snapshot_to(os.path.join(traces, config.workerinput["workerid"] + ".ldscope"))
    config.workeroutput["ldscope"] = {"pid": os.getpid(), "error": error}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    workers = getattr(node.config, "_ldscope_workers", None)
    if workers is None:
        return
    done = getattr(node, "workeroutput", {}).get("ldscope")
    if done is None:
        done = {"pid": None, "error": "it ended before its snapshot: %s" % (error or "no output")}
    workers[node.gateway.id] = done


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not config.getoption("ldscope"):
        return
    traces = getattr(config, "_ldscope_traces", None)
    if traces is None:
        from . import SnapshotError, snapshot
        terminalreporter.write_sep("=", "ldscope: the test process at the end of the session")
        try:
            terminalreporter.write(snapshot().text)
        except SnapshotError as e:
            terminalreporter.write_line("ldscope could not read this process: %s" % e)
        return
    from . import binary
    workers = config._ldscope_workers
    terminalreporter.write_sep(
        "=", "ldscope: the test process and its %d worker%s at the end of the session" %
        (len(workers), "" if len(workers) == 1 else "s"))
    error = _snapshot_to(os.path.join(traces, "controller.ldscope"))
    terminalreporter.write_line("controller: pid %d" % os.getpid() +
                                ("" if error is None else ", could not be read: %s" % error))
    for worker in sorted(workers, key=lambda w: (len(w), w)):
        done = workers[worker]
        pid = "" if done["pid"] is None else ": pid %d" % done["pid"]
        terminalreporter.write_line(
            worker + pid + ("" if done["error"] is None else ", could not be read: %s" % done["error"]))
    files = sorted(os.path.join(traces, f) for f in os.listdir(traces) if f.endswith(".ldscope"))
    if not files:
        return
    done = subprocess.run([binary(), "report"] + files, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    terminalreporter.write(done.stdout.decode("utf-8", "replace"))
    if done.returncode not in (0, 3):
        terminalreporter.write_line("ldscope report: %s" % done.stderr.decode("utf-8", "replace").strip())


def pytest_unconfigure(config):
    global _config
    _config = None
    traces = getattr(config, "_ldscope_traces", None)
    if traces is not None:
        shutil.rmtree(traces, ignore_errors=True)
