"""How our server spread requests over its pollers, read from its /metrics page
(--metrics): the per-poller sums of uppercut_requests_total, and a line for the
log after each round."""

import re
import urllib.request

# A sample of uppercut_requests_total: its labels and its value.
_SAMPLE = re.compile(r'^uppercut_requests_total\{([^}]*)\} (\S+)$')
_POLLER = re.compile(r'poller="(\d+)"')


def requests_per_poller(page):
    """Requests answered by each poller (every status), in poller order."""
    counts = {}
    for line in page.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        poller = _POLLER.search(match.group(1))
        if poller:
            index = int(poller.group(1))
            counts[index] = counts.get(index, 0) + float(match.group(2))
    return [counts.get(i, 0) for i in range(max(counts) + 1)] if counts else []


def spread_line(counts):
    """'requests per poller: 51% 49%', or None when nothing was counted."""
    total = sum(counts)
    if not total:
        return None
    return "requests per poller: " + " ".join(f"{100 * c / total:.0f}%" for c in counts)


def fetch_spread(url, timeout=5.0):
    """The spread line for the server whose /metrics is at url, or a note why not."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            page = response.read().decode("utf-8", "replace")
    except OSError as e:
        return f"requests per poller: /metrics unreadable ({e})"
    return spread_line(requests_per_poller(page)) or "requests per poller: none counted"
