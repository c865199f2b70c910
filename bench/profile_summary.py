"""Summarize a py-spy ``--format raw`` profile: where a thread's samples go.

    python -m bench.profile_summary PROFILE.txt [--thread MainThread] [--top 25] [--match herald/]

Prints the functions with the most samples on their stack (inclusive) and at
the top of the stack (self), as shares of the thread's samples. ``--match``
keeps the inclusive list to frames whose file contains the text (e.g. herald/).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<function>.+?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def frames(stack: str) -> list[str]:
    """``function (file)`` without line numbers, outermost first."""
    result = []
    for frame in stack.split(";"):
        match = _FRAME.match(frame.strip())
        result.append(f"{match['function']} ({match['file']})" if match else frame.strip())
    return result


def summarize(path: Path, thread: str, top: int, match: str | None) -> str:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        stack_frames = frames(stack)
        if not stack_frames or (thread and thread not in stack_frames[0]):
            continue
        count = int(count_text)
        total += count
        for frame in set(stack_frames[1:]):
            inclusive[frame] += count
        own[stack_frames[-1]] += count
    if not total:
        return f"no samples for thread {thread!r}"
    lines = [f"{total} samples of thread {thread!r}", "", "inclusive (on the stack):"]
    shown = [(frame, count) for frame, count in inclusive.most_common() if not match or match in frame][:top]
    lines += [f"  {count / total:6.1%}  {frame}" for frame, count in shown]
    lines += ["", "self (top of the stack):"]
    lines += [f"  {count / total:6.1%}  {frame}" for frame, count in own.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", type=Path)
    parser.add_argument("--thread", default="MainThread")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--match")
    args = parser.parse_args(argv)
    print(summarize(args.profile, args.thread, args.top, args.match))
    return 0


if __name__ == "__main__":
    sys.exit(main())
