"""
``sb3-grpo``: sb3_grpo's own command line (``python -m sb3_grpo`` is the same).

::

    sb3-grpo plugins           # the active plugins, where each comes from, and the names each hook registered
    sb3-grpo plugins --json    # the same as JSON (what sb3_grpo.list_plugins() returns)
    sb3-grpo --version

Training and tuning from the command line is ``sb3-grpo-zoo`` (rl_zoo3 with sb3_grpo's algorithms).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _print_plugins(as_json: bool) -> int:
    from sb3_grpo.plugins import PluginError, list_plugins

    try:
        plugins = list_plugins()
    except PluginError as exc:
        print(f"sb3-grpo: error: {exc}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(plugins, indent=2))
        return 0
    for plugin in plugins:
        print(f"{plugin['name']}  ({plugin['source']})")
        if not plugin["hooks"]:
            print("    implements no hook: registers nothing")
        for hook, names in plugin["hooks"].items():
            print(f"    {hook}: {', '.join(names) or '(nothing)'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``) and return the exit status."""
    from sb3_grpo import __version__

    parser = argparse.ArgumentParser(prog="sb3-grpo", description="sb3_grpo's command line.")
    parser.add_argument("--version", action="version", version=f"sb3-grpo {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    plugins = commands.add_parser(
        "plugins", help="list the active plugins and what each registered", description="List the active plugins."
    )
    plugins.add_argument("--json", action="store_true", help="print JSON (the value of sb3_grpo.list_plugins())")
    args = parser.parse_args(argv)
    if args.command == "plugins":
        return _print_plugins(args.json)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
