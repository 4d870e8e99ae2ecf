"""ldscope VERSION: what the dynamic loader did, and what a running process has loaded.

The binary lives in data/bin (`python -m ldscope ...` runs it). From Python:

    import ldscope
    report = ldscope.snapshot()        # this process; ldscope.snapshot(pid) for another
    for f in report.findings:
        print(f.severity, f.kind, f.headline)

In IPython or Jupyter: `%load_ext ldscope`, then `%ldscope` shows the kernel's report
(text in a terminal, a table in a notebook).
"""
import html
import json
import os
import shutil
import subprocess
import tempfile

__version__ = "VERSION"


def binary():
    """The ldscope binary shipped in this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "bin", "ldscope")


class SnapshotError(Exception):
    """ldscope could not read the process (the message says why, and how to allow it)."""


class Finding(object):
    """One finding: kind ("duplicate-library"), severity ("error", "warning", "info"),
    headline, details [(label, text)], fixes [(action, text)], and the process (pid, exe)."""

    def __init__(self, d):
        self.kind = d.get("kind", "").lower().replace("_", "-")
        self.severity = d.get("severity", "INFO").lower()
        self.headline = d.get("headline", "")
        self.details = [(x.get("label", ""), x.get("text", "")) for x in d.get("details", [])]
        self.fixes = [(x.get("action", ""), x.get("text", "")) for x in d.get("fixes", [])]
        self.pid = d.get("pid", 0)
        self.exe = d.get("exe", "")

    def __repr__(self):
        return "Finding(%s[%s]: %s)" % (self.severity, self.kind, self.headline)


class Report(object):
    """What `ldscope snapshot` found: findings, notes, and the text `ldscope` prints."""

    def __init__(self, findings, notes, text):
        self.findings = findings
        self.notes = notes
        self.text = text

    def __repr__(self):
        return self.text

    def _repr_pretty_(self, p, cycle):
        p.text(self.text)

    def _repr_html_(self):
        rows = []
        for f in self.findings:
            details = "<br>".join("<b>%s:</b> %s" % (html.escape(l), html.escape(t)) for l, t in f.details)
            fixes = "<br>".join(html.escape(t) for _, t in f.fixes)
            rows.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" %
                        (html.escape(f.severity), html.escape(f.kind), html.escape(f.headline), details, fixes))
        notes = "".join("<p><i>note: %s</i></p>" % html.escape(n) for n in self.notes)
        if not rows:
            return "<p>ldscope: no findings</p>" + notes
        return ("<table><tr><th>severity</th><th>kind</th><th>finding</th><th>details</th><th>fix</th></tr>%s"
                "</table>%s" % ("".join(rows), notes))


def _yama_scope():
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return f.read().strip()
    except OSError:
        return ""


def _run_snapshot(argv, own):
    """Runs ldscope snapshot. Reading this very process (own) where
    kernel.yama.ptrace_scope is 1 needs this process to name ldscope as its reader
    (prctl PR_SET_PTRACER) before ldscope reads: it waits for a line on its standard
    input until then."""
    if not (own and _yama_scope() == "1"):
        return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    gate = ["/bin/sh", "-c", 'read _ && exec "$0" "$@"'] + argv
    p = subprocess.Popen(gate, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        libc.prctl(0x59616D61, p.pid, 0, 0, 0)  # PR_SET_PTRACER
        out, err = p.communicate(b"\n")
    finally:
        libc.prctl(0x59616D61, 0, 0, 0, 0)
    return subprocess.CompletedProcess(gate, p.returncode, out, err)


def snapshot(pid=None, facts=False):
    """The diagnosis of what a running process (default: this one) has loaded, read by
    `ldscope snapshot` without stopping it. facts: also record the files' ELF facts in
    the trace (slower; the findings are the same on this machine). Raises SnapshotError
    when the process cannot be read."""
    own = pid is None or pid == os.getpid()
    pid = os.getpid() if pid is None else int(pid)
    tmp = tempfile.mkdtemp(prefix="ldscope-")
    try:
        trace = os.path.join(tmp, "snapshot.ldscope")
        report = os.path.join(tmp, "report.json")
        argv = [binary(), "snapshot", "-q", "--format", "json", "--report", report, "-o", trace, str(pid)]
        if not facts:
            argv.insert(2, "--no-facts")
        done = _run_snapshot(argv, own)
        if done.returncode not in (0, 3) or not os.path.exists(report):
            raise SnapshotError(done.stderr.decode("utf-8", "replace").strip() or "ldscope exited %d" % done.returncode)
        with open(report) as f:
            data = json.load(f)
        text = subprocess.run([binary(), "report", trace], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE).stdout.decode("utf-8", "replace")
        return Report([Finding(d) for d in data.get("findings", [])], data.get("notes", []), text)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_ipython_extension(ipython):
    """`%load_ext ldscope`: the `%ldscope` line magic shows this kernel's report (or that
    of the pid given)."""

    def ldscope_magic(line):
        arg = line.strip()
        return snapshot(int(arg) if arg else None)

    ipython.register_magic_function(ldscope_magic, magic_kind="line", magic_name="ldscope")
