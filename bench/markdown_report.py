"""bench/markdown_report.py: bench/run's results as Markdown, for `bench/run --markdown`:
what was measured and where (date, commit, nproc, kernel, the command line),
then the table, ready to paste into docs/performance.md. Only the Python
standard library is used.
"""

import datetime
import os
import subprocess


def git_commit(repo):
    """`git rev-parse --short HEAD` in `repo`, with `-dirty` when a tracked file
    differs from it (what was measured is then not quite that commit); None
    outside a git checkout."""
    def git(*argv):
        return subprocess.run(["git", "-C", repo, *argv], capture_output=True, text=True)

    try:
        head = git("rev-parse", "--short", "HEAD")
        if head.returncode != 0:
            return None
        status = git("status", "--porcelain", "--untracked-files=no")
    except OSError:
        return None
    commit = head.stdout.strip()
    return commit + "-dirty" if status.returncode != 0 or status.stdout.strip() else commit


def run_facts(repo, command):
    """What a published figure must say about its run."""
    return {
        "date": datetime.date.today().isoformat(),
        "commit": git_commit(repo) or "unknown",
        "nproc": len(os.sched_getaffinity(0)),
        "kernel": os.uname().release,
        "command": command,
    }


def provenance(facts):
    """The lines above the table: when, on what, and the command (an indented
    block, as docs/performance.md quotes commands)."""
    return [
        f"Measured {facts['date']} on commit {facts['commit']} "
        f"(nproc {facts['nproc']}, kernel {facts['kernel']}):",
        "",
        f"    {facts['command']}",
    ]


def table(header, rows, text_columns=1):
    """A Markdown table; the first `text_columns` columns are left-aligned, the
    numbers after them right-aligned. A `|` inside a cell is escaped."""
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    rule = ["---" if i < text_columns else "---:" for i in range(len(header))]
    return [line(header), line(rule), *(line(row) for row in rows)]


def report(facts, caption, header, rows, text_columns=1):
    """The whole block: provenance, the caption, the table."""
    return "\n".join([*provenance(facts), "", caption, "", *table(header, rows, text_columns)])
