"""What the soak kit's load clients share: their address argument and the
open-files limit that many connections need. Imported by hold_connections.py
and slowloris.py, which run from this folder."""

import argparse
import resource
import sys


def parse_addr(text):
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"want HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def raise_nofile(needed):
    """Soft limit up to the hard one; the hard one too if we may (root)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))
            soft, hard = needed, needed
        except (ValueError, OSError):
            pass
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def descriptors_for(connections):
    """Raises the open-files limit for `connections` sockets and returns it,
    or None (said on stderr) when it cannot go high enough."""
    limit = raise_nofile(connections + 64)
    if limit < connections + 16:
        print(f"open-files limit {limit} is too low for {connections} connections", file=sys.stderr)
        return None
    return limit
